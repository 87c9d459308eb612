/* SPDX-License-Identifier: MIT */
/*
 * What a copy that shares blocks with a live tree costs by now: the bytes of
 * its regular files' data that the live tree's files at the same paths and
 * offsets no longer share (FIEMAP physical extents compared: XFS copies on
 * write, so a block the live file rewrote moved, and the copy alone keeps
 * the old one), plus all the data of its files that the live tree no longer
 * has. A hard-linked file counts once. Read-only; never follows a symlink or
 * crosses a mount (dircursor), and never opens anything but regular files
 * and directories.
 *
 * Bounded in time: past @budget_ms the walk stops between two files, and
 * the result is a lower bound (complete = false) with the files measured so
 * far. Memory: the names of one directory per level of depth, at most
 * CLONE_COST_MEM_MAX in all (past it, a lower bound too).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CLONE_COST_MEM_MAX (64ull << 20)

typedef struct CloneCost {
	uint64_t unshared_bytes; /* the cost */
	uint64_t files;          /* regular files measured */
	bool complete;           /* every file was measured */
} CloneCost;

/* The cost of the copy @copy_fd against the live tree @live_fd (directories on one filesystem). */
int clone_cost(int copy_fd, int live_fd, unsigned budget_ms, CloneCost *ret, char **reterr_msg);
