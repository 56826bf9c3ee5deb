/*
 * upload_auth.h - the uploader's credential: the Authorization value,
 * "Bearer <token>" (remote_store.bearer_token_file, else env
 * PUSHPROF_BEARER_TOKEN) or "Basic base64(<user>:<password>)"
 * (remote_store.basic_auth: password_file, else env
 * PUSHPROF_BASIC_AUTH_PASSWORD). A file is re-read when it changes (a
 * rotated token is used by the next request). Every form of the secret is
 * registered with grpcc's log hook; none ever goes into err or a log line.
 *
 * Part of the uploader (a struct inside it, not an allocated object): one
 * caller at a time, like the uploader.
 */
#ifndef PUSHPROF_UPLOAD_AUTH_H
#define PUSHPROF_UPLOAD_AUTH_H

#include <stdbool.h>
#include <sys/stat.h>

#include "config.h"
#include "err.h"
#include "fileutil.h"

struct upload_auth {
	char *token_file;	    /* the token or password file; NULL: env or none */
	struct pp_file_id token_id; /* of the file as last read */
	bool token_loaded;
	char *auth;	  /* "Bearer <token>" or "Basic <b64>", NULL when none */
	char *basic_user; /* basic auth: token_file holds the password */
};

/* Fill *u from rs and the environment (*u is overwritten, not freed). 0;
 * or a negative code with err filled (a file that cannot be read, a secret
 * that cannot be a header value, basic_auth without a password, -ENOMEM)
 * and *u empty. */
int upload_auth_load(struct upload_auth *u, const struct remote_store_config *rs,
		     struct pp_err *err);
/* Re-read the file when it is new or changed since the last read: 0 (the
 * value kept or replaced), or negative with err filled (the old value kept). */
int upload_auth_refresh(struct upload_auth *u, struct pp_err *err);
/* Frees and zeroes what u holds; u is empty afterwards. */
void upload_auth_free(struct upload_auth *u);

#endif
