/* SPDX-License-Identifier: MIT */
/*
 * The content of one regular file for the clone engine: share it (FICLONE),
 * copy it keeping holes (SEEK_DATA/SEEK_HOLE + copy_file_range), and find
 * where a clone no longer shares its source's blocks (FIEMAP).
 *
 * The block-sharing test rests on XFS never writing in place to a shared
 * block: a write to either file moves that range to a new block (copy on
 * write), so the same physical block at the same offset in both files means
 * the same bytes.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Extents read per FIEMAP call, and the window of the file compared at a time (bounded memory). */
#define CLONE_FILE_FIEMAP_BATCH 512
#define CLONE_FILE_DIFF_WINDOW (1ull << 30)

/* @dst (open for writing) gets @src's content and size, sharing its blocks. -EOPNOTSUPP without reflink. */
int clone_file_reflink(int src, int dst);

/* @dst gets @src's content and size by copying its data ranges; holes stay holes. */
int clone_file_copy(int src, int dst);

/*
 * Ranges of [0, @src_size) where @dst may differ from @src:
 * @cb(offset, length, hole) with hole=true where @src reads as zeros (a hole or
 * an unwritten extent) and @dst does not, false where @src has data that
 * @dst does not share. Adjacent ranges are merged. Sizes are not compared.
 * @dst < 0 stands for an empty file: every data range of @src is reported.
 */
typedef int (*CloneFileRangeCallback)(void *userdata, uint64_t offset, uint64_t length, bool hole);
int clone_file_diff(int src, uint64_t src_size, int dst, CloneFileRangeCallback cb, void *userdata);

/*
 * The physical byte address of @fd's first data extent, 0 when it has none
 * (or only unwritten or inline ones): two files that share their first block
 * are copies of one file (a rename between two snapshots keeps its blocks).
 */
int clone_file_first_block(int fd, uint64_t *ret);

/* Whether @dirfd's filesystem shares blocks: 1 yes, 0 no (probed with two unnamed O_TMPFILEs), or -errno. */
int clone_file_probe_reflink(int dirfd);
