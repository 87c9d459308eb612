/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <linux/limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream/send-stream.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/xattr-util.h"

static const char *const type_names[_SEND_RECORD_MAX] = {
	[SEND_HEADER] = "header", [SEND_MKDIR] = "mkdir",       [SEND_CREATE] = "create",   [SEND_WRITE] = "write",
	[SEND_HOLE] = "hole",     [SEND_TRUNCATE] = "truncate", [SEND_SYMLINK] = "symlink", [SEND_LINK] = "link",
	[SEND_RENAME] = "rename", [SEND_UNLINK] = "unlink",     [SEND_RMDIR] = "rmdir",     [SEND_SETATTR] = "setattr",
	[SEND_MKNOD] = "mknod",   [SEND_END] = "end",
};

const char *send_record_type_name(uint32_t type)
{
	return type > 0 && type < _SEND_RECORD_MAX ? type_names[type] : "unknown";
}

void send_record_done(SendRecord *r)
{
	free(r->xattrs);
	r->xattrs = NULL;
	r->xattrs_len = 0;
}

/* ---- little-endian fields ---- */

static void le_put(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le_get(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

typedef struct Cursor {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
} Cursor;

static uint64_t take(Cursor *c, size_t n)
{
	uint64_t v;

	if (c->bad || c->len - c->pos < n) {
		c->bad = true;
		return 0;
	}
	v = le_get(c->p + c->pos, n);
	c->pos += n;
	return v;
}

static const uint8_t *take_bytes(Cursor *c, size_t n)
{
	const uint8_t *p;

	if (c->bad || c->len - c->pos < n) {
		c->bad = true;
		return NULL;
	}
	p = c->p + c->pos;
	c->pos += n;
	return p;
}

/* ---- checks ---- */

int send_path_check(const char *p, size_t len, bool root_ok, char **reterr_msg)
{
	size_t start = 0;

	if (len == 0)
		return root_ok ? 0 : errmsg_set(reterr_msg, -EPERM, "a record names the volume itself where it may not");
	if (len > SEND_PATH_MAX)
		return errmsg_set(reterr_msg, -ENAMETOOLONG, "a name is longer than %d bytes", SEND_PATH_MAX);
	if (memchr(p, '\0', len))
		return errmsg_set(reterr_msg, -EBADMSG, "a name holds a NUL byte");
	if (p[0] == '/')
		return errmsg_set(reterr_msg, -EPERM, "'%.*s' is an absolute name: names are relative to the volume",
				  (int)(len < 200 ? len : 200), p);
	for (size_t i = 0; i <= len; i++) {
		size_t n;

		if (i < len && p[i] != '/')
			continue;
		n = i - start;
		if (n == 0)
			return errmsg_set(reterr_msg, -EPERM, "'%.*s' has an empty component", (int)(len < 200 ? len : 200), p);
		if (n == 1 && p[start] == '.')
			return errmsg_set(reterr_msg, -EPERM, "'%.*s' has a '.' component", (int)(len < 200 ? len : 200), p);
		if (n == 2 && p[start] == '.' && p[start + 1] == '.')
			return errmsg_set(reterr_msg, -EPERM, "'%.*s' climbs out with '..'", (int)(len < 200 ? len : 200), p);
		if (n > 255)
			return errmsg_set(reterr_msg, -ENAMETOOLONG, "'%.*s' has a component longer than 255 bytes",
					  (int)(len < 200 ? len : 200), p);
		start = i + 1;
	}
	return 0;
}

static int take_path(Cursor *c, char *out, bool root_ok, char **reterr_msg)
{
	size_t n = (size_t)take(c, 2);
	const uint8_t *b = take_bytes(c, n);
	int r;

	if (!b)
		return errmsg_set(reterr_msg, -EBADMSG, "a record is shorter than its fields");
	r = send_path_check((const char *)b, n, root_ok, reterr_msg);
	if (r < 0)
		return r;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

static int check_range(uint64_t offset, uint64_t length, const char *path, char **reterr_msg)
{
	if (offset > SEND_FILE_SIZE_MAX || length > SEND_FILE_SIZE_MAX - offset)
		return errmsg_set(reterr_msg, -EFBIG, "%s: a range or size past %llu bytes (16 TiB), the most a received "
				  "file may have", path, (unsigned long long)SEND_FILE_SIZE_MAX);
	return 0;
}

/* Decodes the attributes list into xattr-util's blob: u32 name length, name, u32 value length, value. */
static int take_xattrs(Cursor *c, SendRecord *ret, char **reterr_msg)
{
	uint32_t n = (uint32_t)take(c, 4);
	size_t cap = 0, len = 0;
	uint8_t *blob = NULL;

	if (c->bad)
		return errmsg_set(reterr_msg, -EBADMSG, "a setattr record is shorter than its fields");
	if (n > SEND_XATTRS_MAX)
		return errmsg_set(reterr_msg, -E2BIG, "%s carries %" PRIu32 " attributes (the most is %d)", ret->path, n,
				  SEND_XATTRS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		size_t kl = (size_t)take(c, 2);
		const uint8_t *k = take_bytes(c, kl);
		size_t vl = (size_t)take(c, 4);
		const uint8_t *v = take_bytes(c, vl);

		if (!k || !v) {
			free(blob);
			return errmsg_set(reterr_msg, -EBADMSG, "a setattr record is shorter than its attributes");
		}
		if (kl == 0 || kl > 255 || memchr(k, '\0', kl) || vl > SEND_XATTR_VALUE_MAX) {
			free(blob);
			return errmsg_set(reterr_msg, -EBADMSG, "%s carries an attribute with an invalid name or a value "
					  "over %d bytes", ret->path, SEND_XATTR_VALUE_MAX);
		}
		if (!(kl > 5 && memcmp(k, "user.", 5) == 0) && !(kl > 9 && memcmp(k, "security.", 9) == 0) &&
		    !(kl > 17 && memcmp(k, "system.posix_acl_", 17) == 0)) {
			free(blob);
			return errmsg_set(reterr_msg, -EPERM, "%s carries attribute %.*s, which receive does not set (only "
					  "user.*, security.* and POSIX ACLs)", ret->path, (int)kl, (const char *)k);
		}
		if (GROW_ARRAY(blob, cap, len + 8 + kl + vl, 256) < 0) {
			free(blob);
			return -ENOMEM;
		}
		memcpy(blob + len, &(uint32_t){ (uint32_t)kl }, 4);
		memcpy(blob + len + 4, k, kl);
		memcpy(blob + len + 4 + kl, &(uint32_t){ (uint32_t)vl }, 4);
		if (vl)
			memcpy(blob + len + 8 + kl, v, vl);
		len += 8 + kl + vl;
	}
	ret->xattrs = blob;
	ret->xattrs_len = len;
	return 0;
}

int send_record_parse(uint32_t type, const uint8_t *payload, size_t len, SendRecord *ret, char **reterr_msg)
{
	Cursor c = { .p = payload, .len = len };
	int r = 0;

	*ret = (SendRecord){ .type = type };
	switch (type) {
	case SEND_HEADER:
		if (len == 0 || len > SEND_HEADER_MAX || payload[len - 1] != '\0' || memchr(payload, '\0', len - 1))
			return errmsg_set(reterr_msg, -EBADMSG, "the stream's header is not a NUL-terminated text of at "
					  "most %u bytes", SEND_HEADER_MAX);
		ret->json = (const char *)payload;
		return 0;
	case SEND_MKDIR:
	case SEND_CREATE:
		r = take_path(&c, ret->path, false, reterr_msg);
		ret->mode = (uint32_t)take(&c, 4);
		if (r == 0 && (ret->mode & ~07777u))
			r = errmsg_set(reterr_msg, -EBADMSG, "%s: a mode with bits beyond 07777", ret->path);
		break;
	case SEND_UNLINK:
	case SEND_RMDIR:
		r = take_path(&c, ret->path, false, reterr_msg);
		break;
	case SEND_WRITE:
		r = take_path(&c, ret->path, false, reterr_msg);
		ret->offset = take(&c, 8);
		ret->length = c.bad ? 0 : c.len - c.pos;
		ret->data = take_bytes(&c, (size_t)ret->length);
		if (r == 0 && ret->length > SEND_WRITE_MAX)
			r = errmsg_set(reterr_msg, -E2BIG, "a write record of %" PRIu64 " bytes (the most is %u)",
				       ret->length, SEND_WRITE_MAX);
		if (r == 0 && !c.bad)
			r = check_range(ret->offset, ret->length, ret->path, reterr_msg);
		break;
	case SEND_HOLE:
	case SEND_TRUNCATE:
		r = take_path(&c, ret->path, false, reterr_msg);
		ret->offset = take(&c, 8);
		ret->length = take(&c, 8);
		if (r == 0 && !c.bad)
			r = check_range(ret->offset, ret->length, ret->path, reterr_msg);
		break;
	case SEND_SYMLINK:
	case SEND_LINK:
	case SEND_RENAME:
		r = take_path(&c, ret->path, false, reterr_msg);
		if (r == 0 && type == SEND_SYMLINK) {
			/* A symlink's target is any text: stored, never followed. */
			size_t n = (size_t)take(&c, 2);
			const uint8_t *b = take_bytes(&c, n);

			if (b && (n == 0 || n > SEND_PATH_MAX || memchr(b, '\0', n)))
				r = errmsg_set(reterr_msg, -EBADMSG, "symlink %s has an empty or invalid target", ret->path);
			else if (b) {
				memcpy(ret->target, b, n);
				ret->target[n] = '\0';
			}
		} else if (r == 0)
			r = take_path(&c, ret->target, false, reterr_msg);
		break;
	case SEND_SETATTR:
		r = take_path(&c, ret->path, true, reterr_msg);
		ret->uid = (uint32_t)take(&c, 4);
		ret->gid = (uint32_t)take(&c, 4);
		ret->mode = (uint32_t)take(&c, 4);
		ret->atime.tv_sec = (time_t)(int64_t)take(&c, 8);
		ret->atime.tv_nsec = (long)take(&c, 4);
		ret->mtime.tv_sec = (time_t)(int64_t)take(&c, 8);
		ret->mtime.tv_nsec = (long)take(&c, 4);
		if (r == 0 && !c.bad && (ret->mode & ~07777u))
			r = errmsg_set(reterr_msg, -EBADMSG, "%s: a mode with bits beyond 07777", ret->path);
		if (r == 0 && !c.bad && (ret->uid == UINT32_MAX || ret->gid == UINT32_MAX))
			r = errmsg_set(reterr_msg, -EINVAL, "%s has an owner or group Linux cannot store", ret->path);
		if (r == 0 && !c.bad && (ret->atime.tv_nsec >= 1000000000L || ret->mtime.tv_nsec >= 1000000000L))
			r = errmsg_set(reterr_msg, -EBADMSG, "%s has a time with more than 999999999 nanoseconds", ret->path);
		if (r == 0 && !c.bad)
			r = take_xattrs(&c, ret, reterr_msg);
		break;
	case SEND_MKNOD: {
		uint32_t t;

		r = take_path(&c, ret->path, false, reterr_msg);
		ret->mode = (uint32_t)take(&c, 4);
		ret->rdev = take(&c, 8);
		t = ret->mode & S_IFMT;
		if (r == 0 && !c.bad && ((ret->mode & ~(07777u | S_IFMT)) ||
					 (t != S_IFIFO && t != S_IFSOCK && t != S_IFCHR && t != S_IFBLK)))
			r = errmsg_set(reterr_msg, -EBADMSG, "%s: mknod of something that is not a FIFO, socket or device",
				       ret->path);
		break;
	}
	case SEND_END:
		ret->end_records = take(&c, 8);
		ret->end_bytes = take(&c, 8);
		ret->end_crc = (uint32_t)take(&c, 4);
		break;
	default:
		return errmsg_set(reterr_msg, -EBADMSG, "a record of unknown type %" PRIu32 ": the stream is damaged, or of "
				  "a newer nvmevol", type);
	}
	if (r == 0 && c.bad)
		r = errmsg_set(reterr_msg, -EBADMSG, "a %s record is shorter than its fields", send_record_type_name(type));
	if (r == 0 && c.pos != c.len)
		r = errmsg_set(reterr_msg, -EBADMSG, "a %s record has %zu bytes past its fields", send_record_type_name(type),
			       c.len - c.pos);
	if (r < 0)
		send_record_done(ret);
	return r;
}

/* ---- writing ---- */

static int flush(SendWriter *w);

int send_writer_init(SendWriter *w, int fd, volatile sig_atomic_t *stop)
{
	*w = (SendWriter){ .fd = fd, .stop = stop };
	if (write_all(fd, SEND_STREAM_MAGIC, 8) < 0)
		return negative_errno();
	uint8_t v[4];
	le_put(v, SEND_STREAM_VERSION, 4);
	if (write_all(fd, v, 4) < 0)
		return negative_errno();
	w->crc = crc32c(crc32c(0, SEND_STREAM_MAGIC, 8), v, 4);
	w->bytes = 12;
	return 0;
}

void send_writer_done(SendWriter *w)
{
	/* The whole records given so far go out (a stream without its end is still read up to there). */
	w->len = w->start;
	(void)flush(w);
	free(w->buf);
	w->buf = NULL;
}

static int put_raw(SendWriter *w, const void *p, size_t n)
{
	if (GROW_ARRAY(w->buf, w->cap, w->len + n, 4096) < 0)
		return -ENOMEM;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

static int put_u(SendWriter *w, uint64_t v, size_t n)
{
	uint8_t b[8];

	le_put(b, v, n);
	return put_raw(w, b, n);
}

static int put_str(SendWriter *w, const char *s)
{
	size_t n = strlen(s);

	if (n > SEND_PATH_MAX)
		return -ENAMETOOLONG;
	return put_u(w, n, 2) < 0 ? -ENOMEM : put_raw(w, s, n);
}

static int begin(SendWriter *w, uint32_t type)
{
	w->start = w->len;
	if (put_u(w, type, 4) < 0 || put_u(w, 0, 4) < 0)
		return -ENOMEM;
	return 0;
}

static int flush(SendWriter *w)
{
	int r = w->len ? write_all(w->fd, w->buf, w->len) : 0;

	w->len = w->start = 0;
	return r;
}

/*
 * Fills in the length, appends the CRC; the records go out once SEND_WRITER_BATCH bytes are
 * waiting (a write per record was four syscalls per small file of a full stream).
 */
static int finish(SendWriter *w, int r)
{
	uint8_t *rec, c[4];
	size_t n;

	if (r == 0 && w->stop && *w->stop)
		r = -EINTR;
	if (r < 0) {
		w->len = w->start; /* never a part of a record */
		return r;
	}
	rec = w->buf + w->start;
	n = w->len - w->start;
	le_put(rec + 4, n - 8, 4);
	le_put(c, crc32c(0, rec, n), 4);
	if ((r = put_raw(w, c, 4)) < 0) {
		w->len = w->start;
		return r;
	}
	n += 4;
	w->crc = crc32c(w->crc, w->buf + w->start, n);
	w->bytes += n;
	w->records++;
	w->start = w->len;
	return w->len >= SEND_WRITER_BATCH ? flush(w) : 0;
}

int send_put_header(SendWriter *w, const char *json)
{
	int r = begin(w, SEND_HEADER);

	if (r == 0)
		r = put_raw(w, json, strlen(json) + 1);
	return finish(w, r);
}

int send_put_path(SendWriter *w, uint32_t type, const char *path, uint32_t mode)
{
	int r = begin(w, type);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0 && (type == SEND_MKDIR || type == SEND_CREATE))
		r = put_u(w, mode & 07777, 4);
	return finish(w, r);
}

int send_put_two(SendWriter *w, uint32_t type, const char *path, const char *target)
{
	int r = begin(w, type);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0)
		r = put_str(w, target);
	return finish(w, r);
}

int send_put_write(SendWriter *w, const char *path, uint64_t offset, const void *data, size_t len)
{
	int r = begin(w, SEND_WRITE);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0)
		r = put_u(w, offset, 8);
	if (r == 0)
		r = put_raw(w, data, len);
	return finish(w, r);
}

int send_put_range(SendWriter *w, uint32_t type, const char *path, uint64_t offset, uint64_t length)
{
	int r = begin(w, type);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0)
		r = put_u(w, offset, 8);
	if (r == 0)
		r = put_u(w, length, 8);
	return finish(w, r);
}

int send_put_setattr(SendWriter *w, const char *path, const struct stat *st, const void *blob, size_t blob_len)
{
	char key[XATTR_NAME_MAX + 1];
	const void *val;
	size_t pos = 0, vlen, count_at;
	uint32_t n = 0;
	int r = begin(w, SEND_SETATTR);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0)
		r = put_u(w, st->st_uid, 4);
	if (r == 0)
		r = put_u(w, st->st_gid, 4);
	if (r == 0)
		r = put_u(w, st->st_mode & 07777, 4);
	if (r == 0)
		r = put_u(w, (uint64_t)(int64_t)st->st_atim.tv_sec, 8);
	if (r == 0)
		r = put_u(w, (uint64_t)st->st_atim.tv_nsec, 4);
	if (r == 0)
		r = put_u(w, (uint64_t)(int64_t)st->st_mtim.tv_sec, 8);
	if (r == 0)
		r = put_u(w, (uint64_t)st->st_mtim.tv_nsec, 4);
	count_at = w->len;
	if (r == 0)
		r = put_u(w, 0, 4);
	while (r == 0 && xattr_blob_next(blob, blob_len, &pos, key, sizeof(key), &val, &vlen)) {
		/* trusted.*: XFS's own copies of ACLs, another tool's state; not the file's own. */
		if (strncmp(key, "trusted.", 8) == 0)
			continue;
		if ((r = put_u(w, strlen(key), 2)) == 0 && (r = put_raw(w, key, strlen(key))) == 0 &&
		    (r = put_u(w, vlen, 4)) == 0)
			r = put_raw(w, val, vlen);
		n++;
	}
	if (r == 0)
		le_put(w->buf + count_at, n, 4);
	return finish(w, r);
}

int send_put_mknod(SendWriter *w, const char *path, uint32_t mode, uint64_t rdev)
{
	int r = begin(w, SEND_MKNOD);

	if (r == 0)
		r = put_str(w, path);
	if (r == 0)
		r = put_u(w, mode, 4);
	if (r == 0)
		r = put_u(w, rdev, 8);
	return finish(w, r);
}

int send_put_end(SendWriter *w)
{
	uint64_t records = w->records, bytes = w->bytes;
	uint32_t crc = w->crc;
	int r = begin(w, SEND_END);

	if (r == 0)
		r = put_u(w, records, 8);
	if (r == 0)
		r = put_u(w, bytes, 8);
	if (r == 0)
		r = put_u(w, crc, 4);
	r = finish(w, r);
	return r == 0 ? flush(w) : r;
}

/* ---- reading ---- */

int send_read_fd(void *userdata, void *buf, size_t len)
{
	int fd = *(int *)userdata;
	size_t got = 0;

	while (got < len) {
		ssize_t k = read(fd, (char *)buf + got, len - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (int)got;
}

int send_read_mem(void *userdata, void *buf, size_t len)
{
	SendMem *m = userdata;
	size_t n = len < m->len - m->pos ? len : m->len - m->pos;

	if (n > 0)
		memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return (int)n;
}

static int fill(SendReader *r, void *buf, size_t len, bool at_start, char **reterr_msg)
{
	int k = r->read(r->userdata, buf, len);

	if (k < 0)
		return errmsg_set(reterr_msg, k, "cannot read the stream: %s", errno_str(k));
	if ((size_t)k < len)
		return errmsg_set(reterr_msg, -EPIPE, "the stream ends %s (at byte %" PRIu64 "): it was cut short",
				  at_start ? "before its end record" : "in the middle of a record", r->bytes + (uint64_t)k);
	return 0;
}

int send_reader_init(SendReader *r, SendReadFn fn, void *userdata, char **reterr_msg)
{
	uint8_t head[12];
	uint32_t v;
	int e;

	*r = (SendReader){ .read = fn, .userdata = userdata };
	e = fill(r, head, sizeof(head), true, reterr_msg);
	if (e < 0)
		return e;
	if (memcmp(head, SEND_STREAM_MAGIC, 8) != 0)
		return errmsg_set(reterr_msg, -EBADMSG, "this is not a stream of 'nvmevol volume send' (it does not start "
				  "with " SEND_STREAM_MAGIC ")");
	v = (uint32_t)le_get(head + 8, 4);
	if (v != SEND_STREAM_VERSION)
		return errmsg_set(reterr_msg, -EPROTONOSUPPORT, "the stream has format version %" PRIu32 "; this nvmevol "
				  "reads version %u (receive it with the nvmevol that sent it, or a newer one)", v,
				  SEND_STREAM_VERSION);
	r->crc = crc32c(0, head, sizeof(head));
	r->bytes = sizeof(head);
	return 0;
}

void send_reader_done(SendReader *r)
{
	free(r->buf);
	r->buf = NULL;
}

int send_reader_next(SendReader *r, SendRecord *ret, char **reterr_msg)
{
	uint8_t head[8], c[4], extra;
	uint32_t type, len, want, have;
	uint64_t start = r->bytes;
	int e;

	if (r->ended)
		return 0;
	e = fill(r, head, sizeof(head), true, reterr_msg);
	if (e < 0)
		return e;
	type = (uint32_t)le_get(head, 4);
	len = (uint32_t)le_get(head + 4, 4);
	if (len > SEND_RECORD_MAX)
		return errmsg_set(reterr_msg, -EBADMSG, "a record of %" PRIu32 " bytes at byte %" PRIu64 " (the most is %u): "
				  "the stream is damaged", len, start, SEND_RECORD_MAX);
	if (len > r->cap) {
		uint8_t *n = realloc(r->buf, len);

		if (!n)
			return -ENOMEM;
		r->buf = n;
		r->cap = len;
	}
	if (len > 0 && (e = fill(r, r->buf, len, false, reterr_msg)) < 0)
		return e;
	if ((e = fill(r, c, 4, false, reterr_msg)) < 0)
		return e;
	want = (uint32_t)le_get(c, 4);
	have = crc32c(crc32c(0, head, 8), r->buf, len);
	if (want != have)
		return errmsg_set(reterr_msg, -EBADMSG, "the checksum of the record at byte %" PRIu64 " does not match: the "
				  "stream is damaged", start);
	if ((type == SEND_HEADER) != !r->header_seen)
		return errmsg_set(reterr_msg, -EBADMSG, r->header_seen ? "the stream has a second header" :
				  "the stream does not start with its header");
	e = send_record_parse(type, r->buf, len, ret, reterr_msg);
	if (e < 0)
		return e;
	if (type == SEND_END) {
		if (ret->end_records != r->records || ret->end_bytes != start || ret->end_crc != r->crc)
			return errmsg_set(reterr_msg, -EBADMSG, "the stream's end record does not match what came before it "
					  "(%" PRIu64 " records, %" PRIu64 " bytes; it says %" PRIu64 ", %" PRIu64 "%s): "
					  "the stream is damaged or records are missing", r->records, start,
					  ret->end_records, ret->end_bytes,
					  ret->end_crc != r->crc ? ", and the whole stream's checksum differs" : "");
		if (r->read(r->userdata, &extra, 1) != 0)
			return errmsg_set(reterr_msg, -EBADMSG, "bytes follow the stream's end record");
		r->ended = true;
	}
	r->header_seen = true;
	r->crc = crc32c(crc32c(crc32c(r->crc, head, 8), r->buf, len), c, 4);
	r->bytes += 8 + (uint64_t)len + 4;
	r->records++;
	return 1;
}
