/*
 * curl_lib.c - libcurl opened and initialised once (curl_lib.h).
 */
#include "curl_lib.h"

#include <errno.h>
#include <pthread.h>

struct pp_curl_fns pp_curl;

/* no `what` of its own: dynlib's sentence, " needs libcurl.so.4: ...", gets
 * the user's name in front (pp_curl_load) */
static struct dynlib lib = DYNLIB_INIT(PP_SONAME_CURL, "", pp_curl, PP_CURL_FNS);
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_rc;

static void init(void)
{
	init_rc = pp_curl.curl_global_init(CURL_GLOBAL_DEFAULT);
}

int pp_curl_load(const char *what, struct pp_err *err)
{
	struct pp_err e = { 0 };

	if (dynlib_load(&lib, &e))
		return pp_errf(err, e.code, "%s%s", what, e.msg);
	pthread_once(&init_once, init);
	if (init_rc != CURLE_OK)
		return pp_errf(err, -EIO, "%s: libcurl initialisation failed: %s", what,
			       pp_curl.curl_easy_strerror(init_rc));
	return 0;
}
