/* SPDX-License-Identifier: MIT */
/* One line per event on stderr; Docker collects plugin output. */
#pragma once

#include "util/macro.h"

typedef enum LogLevel {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
	_LOG_LEVEL_MAX,
	_LOG_LEVEL_INVALID = -EINVAL,
} LogLevel;

/* Warnings and errors go to stderr, the rest to stdout; both line-buffered. */
void log_setup(void);
void log_set_level(LogLevel level);
LogLevel log_level_from_string(const char *s);
const char *log_level_to_string(LogLevel level);

/* Logs and returns -abs(err) so callers can "return log_error_errno(r, ...)". */
int log_internal(LogLevel level, int err, const char *fmt, ...) _printf_(3, 4);

#define log_error(...) log_internal(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_info(...) log_internal(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(e, ...) log_internal(LOG_LEVEL_ERROR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_LEVEL_WARNING, (e), __VA_ARGS__)
