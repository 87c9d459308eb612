/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "cli/compress.h"
#include "util/errmsg.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/strutil.h"

int compress_parse(const char *spec, int *ret_level, char **reterr_msg)
{
	const char *lv;
	char *end;
	long n;

	if (streq(spec, "zstd")) {
		*ret_level = COMPRESS_LEVEL_DEFAULT;
		return 0;
	}
	if (strncmp(spec, "zstd:", 5) != 0)
		return errmsg_set(reterr_msg, -EINVAL, "--compress takes zstd or zstd:LEVEL, not '%s' (zstd is the "
				  "only compressor)", spec);
	lv = spec + 5;
	errno = 0;
	n = strtol(lv, &end, 10);
	if (!*lv || *end || errno || n < 1 || n > COMPRESS_LEVEL_MAX)
		return errmsg_set(reterr_msg, -EINVAL, "--compress zstd:LEVEL takes a level from 1 to %d, not '%s' "
				  "(1 is the fastest, the default)", COMPRESS_LEVEL_MAX, lv);
	*ret_level = (int)n;
	return 0;
}

/* ---- writing ---- */

struct CompressOut {
	int fd;
	ZSTD_CCtx *c;
	void *obuf;
	size_t ocap;
	uint64_t written;
	char *why;
};

int compress_out_new(int fd, int level, CompressOut **ret, char **reterr_msg)
{
	CompressOut *z = calloc(1, sizeof(*z));

	if (!z)
		return -ENOMEM;
	z->fd = fd;
	z->ocap = ZSTD_CStreamOutSize();
	z->obuf = malloc(z->ocap);
	z->c = ZSTD_createCCtx();
	if (!z->obuf || !z->c) {
		compress_out_free(z);
		return -ENOMEM;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(z->c, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(z->c, ZSTD_c_checksumFlag, 1))) {
		compress_out_free(z);
		return errmsg_set(reterr_msg, -EINVAL, "zstd refuses compression level %d", level);
	}
	/* One worker: compression beside the walk. An error only means libzstd was built without threads. */
	(void)ZSTD_CCtx_setParameter(z->c, ZSTD_c_nbWorkers, 1);
	*ret = z;
	return 0;
}

/* Feeds @len bytes (none with ZSTD_e_end) and writes what comes out, until all is taken (and, at the end, flushed). */
static int feed(CompressOut *z, const void *data, size_t len, ZSTD_EndDirective mode)
{
	ZSTD_inBuffer in = { data, len, 0 };

	for (;;) {
		ZSTD_outBuffer out = { z->obuf, z->ocap, 0 };
		size_t left = ZSTD_compressStream2(z->c, &out, &in, mode);
		int r;

		if (ZSTD_isError(left)) {
			free(z->why);
			z->why = NULL;
			return errmsg_set(&z->why, -EIO, "zstd: %s", ZSTD_getErrorName(left));
		}
		if (out.pos > 0) {
			r = write_all(z->fd, z->obuf, out.pos);
			if (r < 0) {
				free(z->why);
				z->why = NULL;
				return errmsg_set(&z->why, r, "cannot write the compressed stream: %s", errno_str(r));
			}
			z->written += out.pos;
		}
		if (mode == ZSTD_e_end ? left == 0 : in.pos == in.size)
			return 0;
	}
}

int compress_out_write(void *userdata, const void *data, size_t len)
{
	return feed(userdata, data, len, ZSTD_e_continue);
}

int compress_out_finish(CompressOut *z)
{
	return feed(z, NULL, 0, ZSTD_e_end);
}

const char *compress_out_error(const CompressOut *z)
{
	return z->why;
}

uint64_t compress_out_bytes(const CompressOut *z)
{
	return z->written;
}

void compress_out_free(CompressOut *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->c);
	free(z->obuf);
	free(z->why);
	free(z);
}

/* ---- reading ---- */

#define HEAD_MAX 6

struct CompressIn {
	int fd;
	uint8_t head[HEAD_MAX]; /* the bytes read to tell the kind, given back first */
	size_t head_n, head_pos;
	ZSTD_DCtx *d; /* NULL: plain */
	uint8_t *ibuf;
	size_t icap;
	ZSTD_inBuffer in;
	bool in_frame; /* a frame was begun and has not ended */
	bool eof;
	uint64_t consumed; /* compressed bytes taken, for messages */
	char *why;
};

/* read(2) of the fd, after the head. 0 at its end, -errno. */
static ssize_t raw_read(CompressIn *z, void *buf, size_t len)
{
	if (z->head_pos < z->head_n) {
		size_t k = z->head_n - z->head_pos < len ? z->head_n - z->head_pos : len;

		memcpy(buf, z->head + z->head_pos, k);
		z->head_pos += k;
		return (ssize_t)k;
	}
	for (;;) {
		ssize_t k = read(z->fd, buf, len);

		if (k >= 0)
			return k;
		if (errno != EINTR)
			return -errno;
	}
}

static bool starts(const CompressIn *z, const char *magic, size_t n)
{
	return z->head_n >= n && memcmp(z->head, magic, n) == 0;
}

int compress_in_new(int fd, CompressIn **ret, char **reterr_msg)
{
	CompressIn *z = calloc(1, sizeof(*z));
	const char *other = NULL;

	if (!z)
		return -ENOMEM;
	z->fd = fd;
	while (z->head_n < HEAD_MAX) {
		ssize_t k;

		z->head_pos = HEAD_MAX; /* raw_read: from the fd */
		k = raw_read(z, z->head + z->head_n, HEAD_MAX - z->head_n);
		if (k < 0) {
			free(z);
			return errmsg_set(reterr_msg, (int)k, "cannot read the stream: %s", errno_str((int)k));
		}
		if (k == 0)
			break;
		z->head_n += (size_t)k;
	}
	z->head_pos = 0;
	if (starts(z, "\x1f\x8b", 2))
		other = "gzip-compressed: decompress it first (gzip -dc FILE | nvmevol volume import ...)";
	else if (starts(z, "\xfd" "7zXZ\0", 6))
		other = "xz-compressed: decompress it first (xz -dc FILE | nvmevol volume import ...)";
	else if (starts(z, "BZh", 3))
		other = "bzip2-compressed: decompress it first (bzip2 -dc FILE | nvmevol volume import ...)";
	if (other) {
		free(z);
		return errmsg_set(reterr_msg, -EMEDIUMTYPE, "the stream is %s; zstd and plain tar are read directly",
				  other);
	}
	if (starts(z, "\x28\xb5\x2f\xfd", 4)) {
		z->icap = ZSTD_DStreamInSize();
		z->ibuf = malloc(z->icap);
		z->d = ZSTD_createDCtx();
		if (!z->ibuf || !z->d ||
		    ZSTD_isError(ZSTD_DCtx_setParameter(z->d, ZSTD_d_windowLogMax, COMPRESS_WINDOW_LOG_MAX))) {
			compress_in_free(z);
			return -ENOMEM;
		}
		z->in = (ZSTD_inBuffer){ z->ibuf, 0, 0 };
	}
	*ret = z;
	return 0;
}

static ssize_t fail(CompressIn *z, int r, const char *fmt, ...) _printf_(3, 4);
static ssize_t fail(CompressIn *z, int r, const char *fmt, ...)
{
	va_list ap;

	free(z->why);
	z->why = NULL;
	va_start(ap, fmt);
	(void)errmsg_setv(&z->why, r, fmt, ap);
	va_end(ap);
	errno = -r;
	return -1;
}

ssize_t compress_in_read(void *userdata, void *buf, size_t len)
{
	CompressIn *z = userdata;

	if (!z->d) {
		ssize_t k = raw_read(z, buf, len);

		if (k < 0) {
			errno = (int)-k;
			return -1;
		}
		return k;
	}
	if (z->why) {
		errno = EBADMSG;
		return -1;
	}
	for (;;) {
		ZSTD_outBuffer out = { buf, len, 0 };
		size_t hint;

		if (z->in.pos == z->in.size && !z->eof) {
			ssize_t k = raw_read(z, z->ibuf, z->icap);

			if (k < 0) {
				errno = (int)-k;
				return -1;
			}
			z->in = (ZSTD_inBuffer){ z->ibuf, (size_t)k, 0 };
			z->eof = k == 0;
		}
		if (z->in.pos == z->in.size && z->eof) {
			if (z->in_frame)
				return fail(z, -EPIPE, "the zstd stream ends in the middle of a frame (after %llu compressed "
					    "bytes): it was cut short", (unsigned long long)z->consumed);
			return 0;
		}
		z->consumed -= z->in.pos;
		hint = ZSTD_decompressStream(z->d, &out, &z->in);
		z->consumed += z->in.pos;
		if (ZSTD_isError(hint)) {
			if (ZSTD_getErrorCode(hint) == ZSTD_error_frameParameter_windowTooLarge)
				return fail(z, -EFBIG, "the zstd stream (at %llu compressed bytes) needs a window over "
					    "128 MiB (zstd --long): decompress it first (zstd -dc --long=31 FILE | nvmevol "
					    "volume import ...)", (unsigned long long)z->consumed);
			return fail(z, -EBADMSG, "the zstd stream is damaged (at %llu compressed bytes): %s",
				    (unsigned long long)z->consumed, ZSTD_getErrorName(hint));
		}
		z->in_frame = hint != 0;
		if (out.pos > 0)
			return (ssize_t)out.pos;
	}
}

int compress_in_finish(CompressIn *z)
{
	static char sink[1 << 16];

	if (!z->d)
		return 0;
	for (;;) {
		ssize_t k = compress_in_read(z, sink, sizeof(sink));

		if (k < 0)
			return -errno;
		if (k == 0)
			return 0;
	}
}

const char *compress_in_error(const CompressIn *z)
{
	return z->why;
}

const char *compress_in_kind(const CompressIn *z)
{
	return z->d ? "zstd" : "plain";
}

void compress_in_free(CompressIn *z)
{
	if (!z)
		return;
	ZSTD_freeDCtx(z->d);
	free(z->ibuf);
	free(z->why);
	free(z);
}
