/* SPDX-License-Identifier: MIT */
/* Error messages for callers: "reterr_msg" out-parameters that end up in Docker's "Err". */
#pragma once

#include <stdarg.h>

#include "util/macro.h"

/*
 * Replaces *reterr_msg (when reterr_msg is not NULL) with the formatted text
 * and returns @r, or -EINVAL when @r is not negative, so a caller can write
 * "return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);".
 */
int errmsg_set(char **reterr_msg, int r, const char *fmt, ...) _printf_(3, 4);
int errmsg_setv(char **reterr_msg, int r, const char *fmt, va_list ap) _printf_(3, 0);

/*
 * The text of an errno value, positive or negative (strerrordesc_np: a static
 * string, safe in any thread, unlike strerror()). "error N" for unknown values.
 */
const char *errno_str(int err);
