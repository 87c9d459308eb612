/* SPDX-License-Identifier: MIT */
/*
 * The records of `nvmevol volume send`: a snapshot's tree (@new_fd) as the
 * changes from another snapshot of the same volume (@old_fd; -EBADF: from
 * an empty tree, a full send). Both trees are walked in lock step, sorted by
 * name (dircursor: no symlink followed, no mount crossed, bounded
 * descriptors). For a regular file at a path both have, only the ranges
 * whose physical blocks differ at the same offset travel (FIEMAP: XFS copies
 * on write, so the same block at the same offset holds the same bytes; both
 * snapshots are on one filesystem); a name only the old tree has is deleted,
 * one only the new tree has is made; metadata (owner, mode, nanosecond
 * times, extended attributes) is sent where it differs. Hard links: the
 * first path of an inode of the new tree is made, the others are links to it;
 * a file that was hard-linked in the old tree is sent whole (changing it in
 * place would change its other names). Renames: a first pass keys the files
 * at names only one tree has by their first physical block; a new file that
 * starts at an old one's block is that file renamed, linked into a stash at
 * the start and moved out at its new name, then diffed (src/README.md).
 * Memory: the names of one directory per level and the first path of every
 * hard-linked file, at most SEND_TREE_MEM_MAX together (the first pass half
 * of it, past which it finds no renames).
 */
#pragma once

#include <signal.h>
#include <stdint.h>

#include "stream/send-stream.h"

#define SEND_TREE_MEM_MAX (256ull << 20)

typedef struct SendTreeStats {
	uint64_t entries;    /* entries of the new tree walked */
	uint64_t data_bytes; /* of WRITE records */
	uint64_t records, bytes; /* of the whole stream */
} SendTreeStats;

/* Writes the header @header_json, the records and the end to @out. */
int send_tree(int new_fd, int old_fd, const char *header_json, int out, volatile sig_atomic_t *stop,
	      SendTreeStats *ret_stats, char **reterr_msg);
