#include "err.h"

#include <ctype.h>
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

unsigned pp_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65];

	if (la > 64 || lb > 64)
		return 1000;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned prev = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned ca = (unsigned char)tolower((unsigned char)a[i - 1]);
			unsigned cb = (unsigned char)tolower((unsigned char)b[j - 1]);
			if (ca == '-')
				ca = '_';
			if (cb == '-')
				cb = '_';
			unsigned v = prev + (ca != cb);
			if (row[j] + 1 < v)
				v = row[j] + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			prev = row[j];
			row[j] = v;
		}
	}
	return row[lb];
}
