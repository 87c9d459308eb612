/* SPDX-License-Identifier: MIT */
/*
 * The changes from one tree to another, applied to a third directory in one
 * process: what a `volume send | volume receive` pipe does, without the pipe
 * leaving the process. @old_fd and @new_fd are two trees of one filesystem
 * that share blocks where they did not change (two snapshots of a volume);
 * @dst_fd holds a copy of @old_fd, on any filesystem (an evacuation's
 * target). send_tree() walks the two trees in a worker thread and writes the
 * records into a pipe; recv_tree() applies them to @dst_fd as they come, so
 * only the ranges whose physical blocks differ are read and written
 * (send-tree.h), in bounded memory, with recv-tree.h's confinement.
 * @old_fd -EBADF: @dst_fd is empty and gets the whole of @new_fd.
 *
 * On failure @dst_fd is half-changed: the caller discards it.
 */
#pragma once

#include <stdint.h>

#include "stream/recv-tree.h"

typedef struct TreeApplyStats {
	uint64_t entries;    /* of the new tree, walked */
	uint64_t records;    /* changes applied */
	uint64_t data_bytes; /* of file data written */
	uint64_t bytes;      /* the whole stream, framing included */
} TreeApplyStats;

int tree_apply_changes(int new_fd, int old_fd, int dst_fd, const RecvLimits *lim, TreeApplyStats *ret_stats,
		       char **reterr_msg);
