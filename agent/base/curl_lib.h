/*
 * curl_lib.h - libcurl for its two users, the Connect transport
 * (agent/ship/connect.c) and node labels from the Kubernetes API
 * (agent/meta/nodemeta.c): opened on first use (dynlib.h) and initialised
 * once (curl_global_init), so that a command or a config that needs neither
 * never loads libcurl and its ~30 dependencies.
 *
 * Calls go through the table: pp_curl.curl_easy_setopt(h, CURLOPT_URL, u).
 * Its members are typed by curl's own prototypes; curl's typecheck-gcc.h
 * macros, which would swallow the member calls, are off
 * (CURL_DISABLE_TYPECHECK, before curl.h: include this header, not curl.h).
 *
 * Threading: pp_curl_load may be called from any thread, any number of
 * times; the first call opens and initialises, later calls return its
 * result. The table is filled only if that succeeded, and is never
 * emptied.
 */
#ifndef PUSHPROF_CURL_LIB_H
#define PUSHPROF_CURL_LIB_H

#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "dynlib.h"
#include "err.h"

#define PP_CURL_FNS(X, t)        \
	X(t, curl_easy_cleanup)  \
	X(t, curl_easy_getinfo)  \
	X(t, curl_easy_init)     \
	X(t, curl_easy_perform)  \
	X(t, curl_easy_setopt)   \
	X(t, curl_easy_strerror) \
	X(t, curl_global_init)   \
	X(t, curl_slist_append)  \
	X(t, curl_slist_free_all)

struct pp_curl_fns {
	PP_CURL_FNS(DYNLIB_PTR, _)
};

extern struct pp_curl_fns pp_curl;

/*
 * Open libcurl and run curl_global_init, once. 0, or negative errno with
 * err set: "<what> needs libcurl.so.4: <dlerror()>" (-ENOENT) or "<what>:
 * libcurl initialisation failed: <curl's reason>" (-EIO). what names the
 * user ("remote_store.transport: http").
 */
int pp_curl_load(const char *what, struct pp_err *err);

#endif
