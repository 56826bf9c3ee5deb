/*
 * upload_auth.c - the uploader's credential (upload_auth.h): the
 * Authorization value built from a token or a basic_auth password, read
 * from a file (re-read when it changes) or the environment, and registered
 * with grpcc's log hook in every form it can take, so that grpc's log lines
 * never carry it. The secret is never put into err and is zeroed when freed.
 */
#include "upload_auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "grpcc.h"

#define MAX_TOKEN_BYTES (16u << 10)

/* RFC 4648 base64 of n bytes into out (4 * ((n + 2) / 3) + 1 bytes). */
static void base64(const unsigned char *in, size_t n, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
}

/*
 * The Authorization value from a secret's raw bytes: "Bearer <token>", or
 * with basic auth "Basic base64(<user>:<password>)". Refuses what cannot be
 * a header value. Never puts the secret into err.
 */
static int make_auth(const struct upload_auth *u, const char *raw, const char *source, char **auth,
		     struct pp_err *err)
{
	const char *what = u->basic_user ? "basic_auth password" : "bearer token";
	size_t n = strlen(raw);

	while (n && (raw[n - 1] == '\n' || raw[n - 1] == '\r' || raw[n - 1] == ' ' ||
		     raw[n - 1] == '\t'))
		n--;
	if (!n)
		return pp_errf(err, -EINVAL, "%s from %s is empty", what, source);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)raw[i] < 0x20 || (unsigned char)raw[i] > 0x7e)
			return pp_errf(err, -EINVAL,
				       "%s from %s contains a character not allowed in "
				       "a header (byte %zu)",
				       what, source, i);
	if (!u->basic_user) {
		char *a = malloc(n + sizeof("Bearer "));
		if (!a)
			return pp_errf(err, -ENOMEM, "out of memory");
		memcpy(a, "Bearer ", 7);
		memcpy(a + 7, raw, n);
		a[7 + n] = '\0';
		grpcc_secret_register(a);
		grpcc_secret_register(a + 7); /* the token alone */
		*auth = a;
		return 0;
	}
	size_t ul = strlen(u->basic_user), pl = ul + 1 + n;
	char *pair = malloc(pl + 1), *a = malloc(sizeof("Basic ") + 4 * ((pl + 2) / 3) + 1);
	if (!pair || !a) {
		free(pair);
		free(a);
		return pp_errf(err, -ENOMEM, "out of memory");
	}
	memcpy(pair, u->basic_user, ul);
	pair[ul] = ':';
	memcpy(pair + ul + 1, raw, n);
	pair[pl] = '\0';
	memcpy(a, "Basic ", 6);
	base64((const unsigned char *)pair, pl, a + 6);
	explicit_bzero(pair, pl);
	free(pair);
	char *pw = strndup(raw, n);
	if (pw) {
		grpcc_secret_register(pw); /* the password alone */
		explicit_bzero(pw, n);
		free(pw);
	}
	grpcc_secret_register(a);
	grpcc_secret_register(a + 6);
	*auth = a;
	return 0;
}

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

int upload_auth_refresh(struct upload_auth *u, struct pp_err *err)
{
	struct stat st;

	if (!u->token_file)
		return 0;
	const char *what = u->basic_user ? "basic_auth password file" : "bearer token file";
	if (stat(u->token_file, &st))
		return pp_errf(err, -errno, "cannot read %s %s: %s", what, u->token_file,
			       strerror(errno));
	struct pp_file_id id = pp_file_id_of(&st);
	if (u->token_loaded && pp_file_id_same(&id, &u->token_id))
		return 0;
	char *raw = NULL, *auth = NULL;
	int rc = pp_read_small_file(u->token_file, MAX_TOKEN_BYTES, &raw, NULL, &st, what, err);
	if (rc)
		return rc;
	rc = make_auth(u, raw, u->token_file, &auth, err);
	free_secret(raw);
	if (rc)
		return rc;
	free_secret(u->auth);
	u->auth = auth;
	u->token_id = pp_file_id_of(&st);
	u->token_loaded = true;
	return 0;
}

int upload_auth_load(struct upload_auth *u, const struct remote_store_config *rs,
		     struct pp_err *err)
{
	int r = 0;

	memset(u, 0, sizeof(*u));
	if (rs->basic_auth_username && *rs->basic_auth_username) {
		u->basic_user = strdup(rs->basic_auth_username);
		if (!u->basic_user)
			goto nomem;
		if (rs->basic_auth_password_file && *rs->basic_auth_password_file) {
			u->token_file = strdup(rs->basic_auth_password_file);
			if (!u->token_file)
				goto nomem;
			if ((r = upload_auth_refresh(u, err)))
				goto fail;
		} else {
			const char *env = getenv("PUSHPROF_BASIC_AUTH_PASSWORD");
			if (!env || !*env) {
				r = pp_errf(err, -EINVAL,
					    "remote_store.basic_auth.username is set but no "
					    "password: set basic_auth.password_file or env "
					    "PUSHPROF_BASIC_AUTH_PASSWORD");
				goto fail;
			}
			r = make_auth(u, env, "env PUSHPROF_BASIC_AUTH_PASSWORD", &u->auth, err);
			if (r)
				goto fail;
		}
	} else if (rs->bearer_token_file && *rs->bearer_token_file) {
		u->token_file = strdup(rs->bearer_token_file);
		if (!u->token_file)
			goto nomem;
		if ((r = upload_auth_refresh(u, err)))
			goto fail;
	} else {
		const char *env = getenv("PUSHPROF_BEARER_TOKEN");
		if (env && *env &&
		    (r = make_auth(u, env, "env PUSHPROF_BEARER_TOKEN", &u->auth, err)))
			goto fail;
	}
	return 0;
nomem:
	r = pp_errf(err, -ENOMEM, "out of memory");
fail:
	upload_auth_free(u);
	return r;
}

void upload_auth_free(struct upload_auth *u)
{
	free(u->token_file);
	free(u->basic_user);
	free_secret(u->auth);
	memset(u, 0, sizeof(*u));
}
