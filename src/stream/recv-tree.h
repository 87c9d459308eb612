/* SPDX-License-Identifier: MIT */
/*
 * Applying the records of a send stream (send-stream.h) to a directory, for
 * `nvmevol volume receive`: the stream is another host's and is applied as
 * root, into a pending directory the plugin bound (an import's, or a
 * block-sharing copy of the base snapshot) that becomes the volume only at
 * the commit.
 *
 * Confinement, as import's tar reader: every directory on a record's path is
 * opened one component at a time with openat2() (RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV); the last
 * component is reached with *at() calls that never follow a symlink
 * (O_NOFOLLOW, AT_SYMLINK_NOFOLLOW), so no record writes through a symlink
 * or reaches outside; a hard link's and a rename's other path is confined
 * the same way; a rename never replaces anything (RENAME_NOREPLACE); files
 * are written only when they are regular files; device nodes only with
 * @allow_devices; the data written is capped by @max_bytes, the records by
 * @max_records, sizes and offsets by SEND_FILE_SIZE_MAX.
 *
 * On any error the directory is left half-changed: the caller discards it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "stream/send-stream.h"

typedef struct RecvLimits {
	uint64_t max_bytes;   /* data of WRITE records together */
	uint64_t max_records;
	bool allow_devices;
} RecvLimits;

typedef struct RecvStats {
	uint64_t records, data_bytes, bytes;
} RecvStats;

/* Applies the records that follow the header (already read from @rd) to @root_fd, up to and with END. */
int recv_tree(SendReader *rd, int root_fd, const RecvLimits *lim, RecvStats *ret_stats, char **reterr_msg);
