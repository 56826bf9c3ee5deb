/*
 * dynlib.h - a shared library opened with dlopen() the first time it is
 * needed: gRPC, libcurl and libmicrohttpd (with their ~80 dependencies)
 * cost every command 30-40 ms of dynamic loading when linked, and most
 * commands (snapshot to a file, check-config, version) use none of them.
 *
 * A user file lists the functions it calls once, as an X-macro, and gets a
 * struct of pointers typed by the library's own prototypes:
 *
 *	#define CURL_FNS(X, t) X(t, curl_easy_init) X(t, curl_easy_setopt)
 *	static struct { CURL_FNS(DYNLIB_PTR, _) } C;
 *	static struct dynlib curl_lib = DYNLIB_INIT(PP_SONAME_CURL, "Connect transport",
 *						    C, CURL_FNS);
 *	...
 *	if (dynlib_load(&curl_lib, err))
 *		return err->code;
 *	C.curl_easy_setopt(h, CURLOPT_URL, url);
 *
 * The SONAMEs are the build machine's (meson.build: scripts/soname.py), so a
 * binary loads the ABI it was compiled against.
 *
 * Threading: dynlib_load may be called from any thread, any number of
 * times; the first call opens the library (RTLD_NOW | RTLD_LOCAL) and
 * resolves every name, later calls return the first call's result. The
 * library is never closed. On failure the table stays all NULL and every
 * call returns the same error: a missing library is an error of the command
 * that needs it, never a crash.
 */
#ifndef PUSHPROF_DYNLIB_H
#define PUSHPROF_DYNLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"

struct dynlib_sym {
	const char *name;
	size_t off; /* of its pointer in the user's table */
};

struct dynlib {
	const char *soname; /* "libgrpc.so.29" */
	const char *what;   /* who needs it, for the error: "gRPC transport" */
	const struct dynlib_sym *syms;
	size_t nsyms;
	void *table; /* the user's struct of function pointers */
	/* private, under mu */
	pthread_mutex_t mu;
	bool tried;
	int rc; /* of the first try: 0 or -ENOENT */
	char msg[400];
};

/* One member of the table: a pointer typed as the header declares fn
 * (the X-macro passes the table's name, unused here). */
#define DYNLIB_PTR(tbl, fn) __typeof__(&fn) fn;
/* One name of the table, with where its pointer goes. */
#define DYNLIB_SYM(tbl, fn) { #fn, offsetof(__typeof__(tbl), fn) },

/* A static initialiser: tbl is the struct variable, list its X-macro. */
#define DYNLIB_INIT(soname_, what_, tbl, list)                                          \
	{                                                                               \
		.soname = (soname_), .what = (what_),                                   \
		.syms = (const struct dynlib_sym[]){ list(DYNLIB_SYM, tbl) },           \
		.nsyms = sizeof((const struct dynlib_sym[]){ list(DYNLIB_SYM, tbl) }) / \
			 sizeof(struct dynlib_sym),                                     \
		.table = &(tbl), .mu = PTHREAD_MUTEX_INITIALIZER,                       \
	}

/*
 * Open the library and fill the table, once. 0, or -ENOENT with err set to
 * "<what> needs <soname>: <dlerror()>" (the same sentence on every call).
 */
int dynlib_load(struct dynlib *l, struct pp_err *err);

/* Whether an earlier dynlib_load succeeded; never opens anything. */
bool dynlib_loaded(struct dynlib *l);

#endif
