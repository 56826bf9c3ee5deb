#include "err.h"

#include <stdio.h>
#include <string.h>

int pp_errf(struct pp_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int pp_err_wrap(struct pp_err *err, const char *fmt, ...)
{
	char prefix[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	size_t pl = strlen(prefix);
	if (pl + 2 >= sizeof(err->msg))
		pl = sizeof(err->msg) - 3;
	memcpy(err->msg, prefix, pl);
	memcpy(err->msg + pl, ": ", 2);
	size_t room = sizeof(err->msg) - pl - 3;
	size_t ol = strnlen(old, room);
	memcpy(err->msg + pl + 2, old, ol);
	err->msg[pl + 2 + ol] = '\0';
	return err->code;
}
