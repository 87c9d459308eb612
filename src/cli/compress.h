/* SPDX-License-Identifier: MIT */
/*
 * Compressed streams for `volume export --compress zstd` and `volume import`:
 * the one place libzstd is used. A compressor is not written by hand.
 *
 * Writing: one zstd frame, in bounded memory (libzstd's streaming buffers,
 * the level's window and its job buffers: a few MiB at level 1, tens at 19,
 * whatever the size of the tree), compressed by one worker thread beside the
 * caller when libzstd has threads (as `tar | zstd` runs two processes), else
 * in the caller's thread.
 *
 * Reading: the stream's first bytes say what it is (magic numbers, as
 * `file` does): zstd is decompressed (any number of frames, windows up to
 * COMPRESS_WINDOW_LOG_MAX), anything else is passed through as it is (a tar
 * stream); gzip, xz and bzip2 are refused with the command that
 * decompresses them. A stream that ends inside a frame or is damaged is an
 * error with its reason; compress_in_finish() reads to the end, so damage
 * after tar's end blocks is found too.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

#define COMPRESS_LEVEL_DEFAULT 1
#define COMPRESS_LEVEL_MAX 19       /* 20-22 are zstd's --ultra: windows of 32-128 MiB */
#define COMPRESS_WINDOW_LOG_MAX 27  /* 128 MiB: zstd's own default limit for decompression */

/* "zstd" or "zstd:N" (N from 1 to COMPRESS_LEVEL_MAX) -> the level; -EINVAL with a message. */
int compress_parse(const char *spec, int *ret_level, char **reterr_msg);

typedef struct CompressOut CompressOut;

int compress_out_new(int fd, int level, CompressOut **ret, char **reterr_msg);
/* A TarWriteFn: compresses @len bytes to the fd. 0 or -errno (the reason: compress_out_error()). */
int compress_out_write(void *userdata, const void *data, size_t len);
/* Ends the frame and writes what is left. */
int compress_out_finish(CompressOut *z);
const char *compress_out_error(const CompressOut *z);
uint64_t compress_out_bytes(const CompressOut *z); /* written to the fd */
void compress_out_free(CompressOut *z);

typedef struct CompressIn CompressIn;

/* Reads the first bytes of @fd to tell what it holds. */
int compress_in_new(int fd, CompressIn **ret, char **reterr_msg);
/* A TarReadFn: like read(2) of the decompressed stream; -1 with errno (the reason: compress_in_error()). */
ssize_t compress_in_read(void *userdata, void *buf, size_t len);
/* After the tar end blocks: reads the rest, which must end where a frame ends. 0 or -errno. */
int compress_in_finish(CompressIn *z);
const char *compress_in_error(const CompressIn *z); /* NULL if the stream itself had no fault */
const char *compress_in_kind(const CompressIn *z);  /* "zstd" or "plain" */
void compress_in_free(CompressIn *z);

DEFINE_CLEANUP_FUNC(CompressOut *, compress_out_free);
DEFINE_CLEANUP_FUNC(CompressIn *, compress_in_free);
