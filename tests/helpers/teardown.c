/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "teardown.h"

void teardown_fail(const char *fmt, ...)
{
	va_list ap;

	/* stderr, not cr_log: this may run from an atexit handler, after the test has reported. */
	fputs("teardown FAILED: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	/* Criterion ignores a worker's exit status after its test reported; a crash fails the program. */
	signal(SIGABRT, SIG_DFL);
	abort();
}

void teardown_note(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 3 >= len)
		return;
	if (used > 0) {
		strcpy(buf + used, "; ");
		used += 2;
	}
	va_start(ap, fmt);
	(void)vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

#define TRACKED_MAX 16
static struct {
	void (*fn)(void *obj);
	void *obj;
} tracked[TRACKED_MAX];

static void run_tracked(void)
{
	for (int i = 0; i < TRACKED_MAX; i++)
		if (tracked[i].obj)
			/* The cleanup untracks its object itself. */
			tracked[i].fn(tracked[i].obj);
}

void teardown_track(void (*fn)(void *obj), void *obj)
{
	static bool registered;
	int free_slot = -1;

	if (!registered) {
		atexit(run_tracked);
		registered = true;
	}
	for (int i = 0; i < TRACKED_MAX; i++) {
		if (tracked[i].obj == obj) {
			tracked[i].fn = fn;
			return;
		}
		if (!tracked[i].obj && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		teardown_fail("more than %d live test fixtures: raise TRACKED_MAX", TRACKED_MAX);
	tracked[free_slot].fn = fn;
	tracked[free_slot].obj = obj;
}

void teardown_untrack(const void *obj)
{
	for (int i = 0; i < TRACKED_MAX; i++)
		if (tracked[i].obj == obj)
			tracked[i].obj = NULL;
}

const char *teardown_tmpdir(const char *fallback)
{
	const char *d = getenv("NVMEVOL_TEST_TMPDIR");

	if (!d || !*d)
		d = getenv("NVMEVOL_TEST_TMPDIR_DEFAULT");
	if (!d || !*d)
		return fallback;
	/* 0755: tests run commands as nobody (setpriv) below their testbed. */
	(void)mkdir(d, 0755);
	return d;
}
