/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/errmsg.h"

int errmsg_setv(char **reterr_msg, int r, const char *fmt, va_list ap)
{
	if (reterr_msg) {
		char *m = NULL;
		if (vasprintf(&m, fmt, ap) < 0)
			m = NULL;
		free(*reterr_msg);
		*reterr_msg = m;
	}
	return r < 0 ? r : -EINVAL;
}

int errmsg_set(char **reterr_msg, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = errmsg_setv(reterr_msg, r, fmt, ap);
	va_end(ap);
	return r;
}

const char *errno_str(int err)
{
	static const char *const unknown = "unknown error";
	const char *s = strerrordesc_np(err < 0 ? -err : err);

	return s ? s : unknown;
}
