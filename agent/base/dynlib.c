/*
 * dynlib.c - libraries opened on first use (see dynlib.h).
 */
#include "dynlib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* dlsym hands back data pointers; POSIX makes them convertible to function
 * pointers, which is all the tables hold */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit a void *");

static int load(struct dynlib *l)
{
	void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *e = dlerror();
		snprintf(l->msg, sizeof(l->msg), "%s needs %s: %s", l->what, l->soname,
			 e ? e : "cannot be loaded");
		return -ENOENT;
	}
	for (size_t i = 0; i < l->nsyms; i++) {
		dlerror();
		void *p = dlsym(h, l->syms[i].name);
		if (!p) {
			const char *e = dlerror();
			snprintf(l->msg, sizeof(l->msg), "%s needs %s: %s", l->what, l->soname,
				 e ? e : l->syms[i].name);
			/* all or nothing: no half-filled table is ever called */
			memset(l->table, 0, l->syms[l->nsyms - 1].off + sizeof(p));
			dlclose(h);
			return -ENOENT;
		}
		memcpy((char *)l->table + l->syms[i].off, &p, sizeof(p));
	}
	return 0;
}

int dynlib_load(struct dynlib *l, struct pp_err *err)
{
	pthread_mutex_lock(&l->mu);
	if (!l->tried) {
		l->rc = load(l);
		l->tried = true;
	}
	int rc = l->rc;
	pthread_mutex_unlock(&l->mu);
	if (rc)
		return pp_errf(err, rc, "%s", l->msg);
	return 0;
}

bool dynlib_loaded(struct dynlib *l)
{
	pthread_mutex_lock(&l->mu);
	bool ok = l->tried && l->rc == 0;
	pthread_mutex_unlock(&l->mu);
	return ok;
}
