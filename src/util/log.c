/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/errmsg.h"
#include "util/log.h"
#include "util/strutil.h"

static LogLevel current_level = LOG_LEVEL_INFO;
static const char *const level_names[_LOG_LEVEL_MAX] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARNING] = "warning",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_set_level(LogLevel level)
{
	if (level >= 0 && level < _LOG_LEVEL_MAX)
		current_level = level;
}

const char *log_level_to_string(LogLevel level)
{
	return level >= 0 && level < _LOG_LEVEL_MAX ? level_names[level] : "?";
}

LogLevel log_level_from_string(const char *s)
{
	for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
		if (s && streq(s, level_names[i]))
			return (LogLevel)i;
	return _LOG_LEVEL_INVALID;
}

int log_internal(LogLevel level, int err, const char *fmt, ...)
{
	int abs_err = err < 0 ? -err : err;

	if (level <= current_level) {
		char raw[1024], msg[sizeof(raw) * 4];
		char stamp[32];
		struct timespec ts;
		struct tm tm;
		va_list ap;

		va_start(ap, fmt);
		(void)vsnprintf(raw, sizeof(raw), fmt, ap);
		va_end(ap);
		/* A label, a device's strings or a client's text may hold terminal controls: never print them. */
		text_escape(raw, false, msg, sizeof(msg));

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);

		/* dockerd files a plugin's stderr as errors and its stdout as info: route by level. */
		FILE *out = level <= LOG_LEVEL_WARNING ? stderr : stdout;

		/* One write per line so concurrent threads do not interleave. */
		if (abs_err)
			fprintf(out, "%s.%03ldZ nvmevol %s: %s: %s\n", stamp, ts.tv_nsec / 1000000,
				level_names[level], msg, errno_str(abs_err));
		else
			fprintf(out, "%s.%03ldZ nvmevol %s: %s\n", stamp, ts.tv_nsec / 1000000,
				level_names[level], msg);
	}
	return -abs_err;
}

void log_setup(void)
{
	/* Line-buffered: each event reaches dockerd's log when it happens. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	setvbuf(stderr, NULL, _IOLBF, 0);
}
