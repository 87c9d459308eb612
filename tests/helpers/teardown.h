/* SPDX-License-Identifier: MIT */
/*
 * Teardown that can fail. Criterion ignores a failed assertion in a .fini
 * (the test stays "passed", the program exits 0), and runs no .fini after a
 * skip or a failed assertion in .init or in the test body before its own
 * cleanup. So:
 *   - teardown_fail() aborts the test's worker process: Criterion reports
 *     "crashed during its setup or teardown" and the program exits non-zero,
 *     which fails the meson test (a plain exit(1) there is ignored);
 *   - teardown_track() runs a cleanup when the worker exits too, where a skip
 *     or an early failure leaves it (cleanups must be idempotent and call
 *     teardown_untrack() themselves).
 */
#pragma once

#include <stddef.h>

_Noreturn void teardown_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Appends a message to @buf ("; " between messages), truncating what does not fit. */
void teardown_note(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Runs @fn(@obj) at the worker's exit unless teardown_untrack(@obj) was called first; tracking twice is one entry. */
void teardown_track(void (*fn)(void *obj), void *obj);
void teardown_untrack(const void *obj);

/*
 * Where fixtures make their temporary directories: $NVMEVOL_TEST_TMPDIR, else
 * $NVMEVOL_TEST_TMPDIR_DEFAULT (meson sets one per build directory), made if
 * missing, else @fallback. tests/check-leftovers.sh looks there for loop
 * devices and mounts a suite left behind.
 */
const char *teardown_tmpdir(const char *fallback);
