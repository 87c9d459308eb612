/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets that apply a stream to a directory share (fuzz-tar,
 * fuzz-send): a sandbox directory in /tmp holding one fresh "root" per input,
 * beside which nothing may appear, and the check of a parsed relative path.
 */
#pragma once

/* Prints "TARGET: property violated: WHAT: DETAIL" and aborts. */
_Noreturn void fuzz_fail(const char *what, const char *detail);

/* Makes the sandbox (once; removed at exit) for @target, and quiets the log. */
void fuzz_sandbox_init(const char *target);
/* A fresh sandbox/root, open. */
int fuzz_sandbox_enter(void);
/* Fails if anything but root is in the sandbox; closes and removes root. */
void fuzz_sandbox_leave(int root_fd);

/* Fails unless @p is relative, without an empty, "." or ".." component, and at most @max bytes. */
void fuzz_check_relative_path(const char *p, size_t max);
