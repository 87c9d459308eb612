/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli/acl-text.h"
#include "cli/tar-read.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/io-util.h"
#include "util/macro.h"

#define BLOCK 512
#define RESOLVE_CONFINED (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* ---- the pure parts ---- */

/* A numeric field: octal (spaces and NULs around it), or GNU base-256 (top bit of the first byte). */
static int number(const uint8_t *f, size_t len, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return -EBADMSG; /* negative */
		v = f[0] & 0x3f;
		for (i = 1; i < len; i++) {
			if (v >> 56)
				return -EBADMSG;
			v = (v << 8) | f[i];
		}
		*ret = v;
		return 0;
	}
	while (i < len && (f[i] == ' ' || f[i] == '\0'))
		i++;
	if (i == len) {
		*ret = 0;
		return 0;
	}
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -EBADMSG;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -EBADMSG;
	*ret = v;
	return 0;
}

static void field_str(const uint8_t *f, size_t len, char *out)
{
	size_t n = strnlen((const char *)f, len);

	memcpy(out, f, n);
	out[n] = '\0';
}

int tar_header_parse(const uint8_t b[512], TarHeader *ret, char **reterr_msg)
{
	TarHeader h = { 0 };
	uint64_t sum = 0, want = 0, v = 0;
	int64_t ssum = 0;
	char prefix[156];
	bool zero = true;

	for (size_t i = 0; i < BLOCK; i++)
		if (b[i]) {
			zero = false;
			break;
		}
	if (zero) {
		*ret = (TarHeader){ .zero = true };
		return 0;
	}
	for (size_t i = 0; i < BLOCK; i++) {
		uint8_t c = i >= 148 && i < 156 ? ' ' : b[i];

		sum += c;
		ssum += (int8_t)c;
	}
	if (number(b + 148, 8, &want) < 0 || (want != sum && (int64_t)want != ssum))
		return errmsg_set(reterr_msg, -EBADMSG, "a header's checksum does not match: the stream is damaged, or not tar");
	if (number(b + 100, 8, &v) < 0 || v > 07777)
		return errmsg_set(reterr_msg, -EBADMSG, "a header has an invalid mode");
	h.mode = (mode_t)v;
	if (number(b + 108, 8, &h.uid) < 0 || number(b + 116, 8, &h.gid) < 0 || number(b + 124, 12, &h.size) < 0 ||
	    number(b + 136, 12, &v) < 0 || number(b + 329, 8, &h.rdev_major) < 0 || number(b + 337, 8, &h.rdev_minor) < 0)
		return errmsg_set(reterr_msg, -EBADMSG, "a header has an invalid number");
	if (v > INT64_MAX)
		return errmsg_set(reterr_msg, -EBADMSG, "a header has an invalid time");
	h.mtime = (int64_t)v;
	h.type = (char)b[156];
	field_str(b + 157, 100, h.link);
	field_str(b, 100, h.name);
	if (memcmp(b + 257, "ustar", 5) == 0 && b[345]) {
		field_str(b + 345, 155, prefix);
		snprintf(h.name, sizeof(h.name), "%s/%.100s", prefix, (const char *)b);
	}
	*ret = h;
	return 0;
}

void tar_pax_done(TarPax *p)
{
	free(p->path);
	free(p->linkpath);
	free(p->sparse_name);
	free(p->acl_access);
	free(p->acl_default);
	for (size_t i = 0; i < p->n_xattrs; i++) {
		free(p->xattrs[i].name);
		free(p->xattrs[i].value);
	}
	free(p->xattrs);
	*p = (TarPax){ 0 };
}

static int pax_time(const char *v, size_t len, struct timespec *ret)
{
	int64_t sec = 0;
	long nsec = 0;
	size_t i = 0, digits = 0;
	bool neg = false;

	if (i < len && v[i] == '-') {
		neg = true;
		i++;
	}
	for (; i < len && v[i] >= '0' && v[i] <= '9'; i++, digits++) {
		if (sec > (INT64_MAX - 9) / 10)
			return -EBADMSG;
		sec = sec * 10 + (v[i] - '0');
	}
	if (digits == 0)
		return -EBADMSG;
	if (i < len && v[i] == '.') {
		long scale = 100000000;

		for (i++; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
			nsec += (v[i] - '0') * scale;
			scale /= 10;
		}
	}
	if (i != len)
		return -EBADMSG;
	if (neg) {
		sec = -sec;
		if (nsec) {
			sec--;
			nsec = 1000000000 - nsec;
		}
	}
	*ret = (struct timespec){ .tv_sec = (time_t)sec, .tv_nsec = nsec };
	return 0;
}

static int pax_u64(const char *v, size_t len, uint64_t *ret)
{
	uint64_t x = 0;

	if (len == 0 || len > 20)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - 9) / 10)
			return -EBADMSG;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*ret = x;
	return 0;
}

static int dup_value(const char *v, size_t len, char **ret)
{
	char *s;

	if (memchr(v, '\0', len))
		return -EBADMSG;
	s = strndup(v, len);
	if (!s)
		return -ENOMEM;
	free(*ret);
	*ret = s;
	return 0;
}

static int pax_record(TarPax *p, const char *key, size_t klen, const char *v, size_t vlen)
{
#define KEY(s) (klen == strlen(s) && memcmp(key, s, klen) == 0)
	if (KEY("path"))
		return dup_value(v, vlen, &p->path);
	if (KEY("linkpath"))
		return dup_value(v, vlen, &p->linkpath);
	if (KEY("mtime"))
		return p->has_mtime = true, pax_time(v, vlen, &p->mtime);
	if (KEY("atime"))
		return p->has_atime = true, pax_time(v, vlen, &p->atime);
	if (KEY("uid"))
		return p->has_uid = true, pax_u64(v, vlen, &p->uid);
	if (KEY("gid"))
		return p->has_gid = true, pax_u64(v, vlen, &p->gid);
	if (KEY("size"))
		/* Bounded as base-256 headers are: block arithmetic on it never wraps. */
		return p->has_size = true, pax_u64(v, vlen, &p->size) < 0 || p->size > (1ull << 62) ? -EBADMSG : 0;
	if (KEY("GNU.sparse.major"))
		return vlen == 1 && v[0] == '1' ? (p->sparse = true, 0) : -EOPNOTSUPP;
	if (KEY("GNU.sparse.minor"))
		return vlen == 1 && v[0] == '0' ? 0 : -EOPNOTSUPP;
	if (KEY("GNU.sparse.name"))
		return dup_value(v, vlen, &p->sparse_name);
	if (KEY("GNU.sparse.realsize") || KEY("GNU.sparse.size"))
		return p->has_realsize = true, pax_u64(v, vlen, &p->realsize) < 0 || p->realsize > (1ull << 62) ? -EBADMSG : 0;
	if (klen > 13 && memcmp(key, "SCHILY.xattr.", 13) == 0) {
		TarXattr x = { 0 };
		size_t cap = p->n_xattrs;

		if (p->n_xattrs >= TAR_READ_XATTRS_MAX || vlen > TAR_READ_XATTR_VALUE_MAX || klen - 13 > 255)
			return -E2BIG;
		x.name = strndup(key + 13, klen - 13);
		x.value = malloc(vlen ? vlen : 1);
		if (!x.name || !x.value || memchr(x.name, '\0', klen - 13) ||
		    grow_array((void **)&p->xattrs, &cap, p->n_xattrs + 1, sizeof(*p->xattrs), 8) < 0) {
			free(x.name);
			free(x.value);
			return -ENOMEM;
		}
		memcpy(x.value, v, vlen);
		x.len = vlen;
		p->xattrs[p->n_xattrs++] = x;
		return 0;
	}
	/* The text form of the ACLs: used where the archive has no SCHILY.xattr.system.posix_acl_* for them. */
	if (KEY("SCHILY.acl.access"))
		return dup_value(v, vlen, &p->acl_access);
	if (KEY("SCHILY.acl.default"))
		return dup_value(v, vlen, &p->acl_default);
	return 0;
#undef KEY
}

int tar_pax_parse(const char *buf, size_t len, TarPax *p, char **reterr_msg)
{
	size_t pos = 0;

	while (pos < len) {
		size_t rlen = 0, i = pos;
		const char *eq, *rec;
		int r;

		while (i < len && buf[i] >= '0' && buf[i] <= '9' && i - pos < 8)
			rlen = rlen * 10 + (size_t)(buf[i++] - '0');
		if (i == pos || i >= len || buf[i] != ' ' || rlen <= i - pos + 1 || rlen > len - pos ||
		    buf[pos + rlen - 1] != '\n')
			return errmsg_set(reterr_msg, -EBADMSG, "an extended header has a malformed record");
		rec = buf + i + 1;
		eq = memchr(rec, '=', (size_t)(buf + pos + rlen - 1 - rec));
		if (!eq || eq == rec)
			return errmsg_set(reterr_msg, -EBADMSG, "an extended header has a record without a key");
		r = pax_record(p, rec, (size_t)(eq - rec), eq + 1, (size_t)(buf + pos + rlen - 1 - (eq + 1)));
		if (r == -ENOMEM)
			return r;
		if (r == -E2BIG)
			return errmsg_set(reterr_msg, r, "an entry has more than %d attributes, or one larger than %d bytes",
					  TAR_READ_XATTRS_MAX, TAR_READ_XATTR_VALUE_MAX);
		if (r == -EOPNOTSUPP)
			return errmsg_set(reterr_msg, r, "a sparse file in a GNU sparse format other than 1.0");
		if (r < 0)
			return errmsg_set(reterr_msg, -EBADMSG, "an extended header has an invalid value for '%.*s'",
					  (int)((eq - rec) < 64 ? (eq - rec) : 64), rec);
		pos += rlen;
	}
	return 0;
}

int tar_path_normalize(const char *in, char *out, size_t len, char **reterr_msg)
{
	size_t o = 0;
	const char *p = in;

	if (in[0] == '/')
		return errmsg_set(reterr_msg, -EPERM, "'%.200s' is an absolute name: names are relative to the volume", in);
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return errmsg_set(reterr_msg, -EPERM, "'%.200s' climbs out with '..'", in);
		if (n > 255)
			return errmsg_set(reterr_msg, -ENAMETOOLONG, "'%.200s' has a component longer than 255 bytes", in);
		if (n > 0 && !(n == 1 && p[0] == '.')) {
			if (o + n + 2 > len || o + n + 1 > TAR_READ_PATH_MAX)
				return errmsg_set(reterr_msg, -ENAMETOOLONG, "a name is longer than %d bytes", TAR_READ_PATH_MAX);
			if (o)
				out[o++] = '/';
			memcpy(out + o, p, n);
			o += n;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	out[o] = '\0';
	return 0;
}

/* ---- applying a stream ---- */

typedef struct DirMeta {
	char *path;
	TarHeader h;
	TarPax pax;
} DirMeta;

typedef struct Reader {
	int in, root;
	TarReadFn fn; /* if set, instead of in */
	void *fn_data;
	const TarReadLimits *lim;
	TarReadStats st;
	uint64_t offset; /* of the stream, for messages */
	DirMeta *dirs;   /* applied last, deepest first */
	size_t n_dirs, cap_dirs;
	char *why;
} Reader;

static int fill(Reader *r, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t k = r->fn ? r->fn(r->fn_data, (char *)buf + got, len - got) : read(r->in, (char *)buf + got, len - got);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errmsg_set(&r->why, negative_errno(), "cannot read the stream: %s", errno_str(errno));
		if (k == 0)
			return errmsg_set(&r->why, -EPIPE, "the stream ends in the middle of an entry (at byte %" PRIu64
					  "): it was cut short", r->offset + got);
		got += (size_t)k;
	}
	r->offset += len;
	return 0;
}

static int skip(Reader *r, uint64_t len)
{
	static char sink[1 << 16];

	while (len > 0) {
		size_t k = len < sizeof(sink) ? (size_t)len : sizeof(sink);
		int e = fill(r, sink, k);

		if (e < 0)
			return e;
		len -= k;
	}
	return 0;
}

static uint64_t padded(uint64_t n)
{
	return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* The data of an 'x' or 'L' entry, NUL-terminated. */
static int read_small(Reader *r, uint64_t size, char **ret)
{
	char *b;
	int e;

	if (size > TAR_READ_PAX_MAX)
		return errmsg_set(&r->why, -E2BIG, "an extended header or long name of %" PRIu64 " bytes (the most is %u)",
				  size, TAR_READ_PAX_MAX);
	b = malloc((size_t)size + 1);
	if (!b)
		return -ENOMEM;
	e = fill(r, b, (size_t)size);
	if (e == 0)
		e = skip(r, padded(size) - size);
	if (e < 0) {
		free(b);
		return e;
	}
	b[size] = '\0';
	*ret = b;
	return 0;
}

static int open_confined(int dirfd, const char *name)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_CONFINED };
	long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	return fd < 0 ? negative_errno() : (int)fd;
}

/*
 * Opens the directory that holds @path (checked, relative), making missing
 * directories on the way (0700, given their own entry's mode later); one
 * component at a time, each confined. *ret_leaf points into @path.
 */
static int open_parent(Reader *r, const char *path, bool make, int *ret_fd, const char **ret_leaf)
{
	_cleanup_free_ char *copy = strdup(path);
	char *p, *slash;
	int fd, e;

	if (!copy)
		return -ENOMEM;
	fd = fcntl(r->root, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return negative_errno();
	for (p = copy; (slash = strchr(p, '/')); p = slash + 1) {
		int next;

		*slash = '\0';
		if (make && mkdirat(fd, p, 0700) < 0 && errno != EEXIST) {
			e = negative_errno();
			close(fd);
			return errmsg_set(&r->why, e, "cannot make the directory of %s: %s", path, errno_str(e));
		}
		next = open_confined(fd, p);
		close(fd);
		if (next < 0)
			return errmsg_set(&r->why, next, "%s: a component on its way is not a directory of the volume (%s): "
					  "names may not pass through symlinks or leave the volume", path, errno_str(next));
		fd = next;
	}
	*ret_fd = fd;
	*ret_leaf = path + (p - copy);
	return 0;
}

/* One extended attribute, on the entry itself (a symlink's too), never through a symlink. */
static int set_attr(Reader *r, int dirfd, const char *leaf, int fd, const char *name, const void *value, size_t len,
		    const char *path)
{
	char proc[64];
	int e;

	if (fd >= 0)
		e = fsetxattr(fd, name, value, len, 0);
	else {
		/* Never through the symlink: the inode by an O_PATH descriptor. */
		struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_CONFINED };
		long pfd = syscall(SYS_openat2, dirfd, leaf, &how, sizeof(how));

		if (pfd < 0)
			return errmsg_set(&r->why, negative_errno(), "cannot reach %s: %s", path, errno_str(errno));
		snprintf(proc, sizeof(proc), "/proc/self/fd/%ld", pfd);
		e = setxattr(proc, name, value, len, 0); /* the magic link is the inode itself */
		close((int)pfd);
	}
	if (e < 0)
		return errmsg_set(&r->why, negative_errno(), "cannot set attribute %.64s of %s: %s", name, path,
				  errno_str(errno));
	return 0;
}

static bool has_xattr(const TarPax *x, const char *name)
{
	for (size_t i = 0; i < x->n_xattrs; i++)
		if (streq(x->xattrs[i].name, name))
			return true;
	return false;
}

/* Names in an ACL's text, as GNU tar writes them without --numeric-owner: this host's users and groups. */
static int lookup_host_name(const char *name, bool group, uint32_t *ret_id)
{
	char buf[4096];
	int e;

	if (group) {
		struct group gr, *res = NULL;

		e = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
		if (e != 0 || !res)
			return -ENOENT;
		*ret_id = (uint32_t)res->gr_gid;
	} else {
		struct passwd pw, *res = NULL;

		e = getpwnam_r(name, &pw, buf, sizeof(buf), &res);
		if (e != 0 || !res)
			return -ENOENT;
		*ret_id = (uint32_t)res->pw_uid;
	}
	return 0;
}

/*
 * An ACL the archive carries only as text (GNU tar --acls without --xattrs,
 * bsdtar): set from the text, unless its attribute came too (that one wins).
 */
static int apply_acl_text(Reader *r, int dirfd, const char *leaf, int fd, const TarPax *x, bool access,
			  const char *path)
{
	const char *text = access ? x->acl_access : x->acl_default;
	const char *name = access ? "system.posix_acl_access" : "system.posix_acl_default";
	_cleanup_free_ void *value = NULL;
	_cleanup_free_ char *why = NULL;
	size_t len = 0;
	int e;

	if (!text || has_xattr(x, name))
		return 0;
	e = acl_text_to_xattr(text, lookup_host_name, &value, &len, &why);
	if (e < 0)
		return errmsg_set(&r->why, e, "the %s ACL of %s: %s", access ? "access" : "default", path,
				  why ? why : errno_str(e));
	/* The three base entries are the mode, already set (an attribute of them alone is the mode again). */
	if (len == 0 || (access && len == ACL_XATTR_MODE_ONLY_LEN))
		return 0;
	return set_attr(r, dirfd, leaf, fd, name, value, len, path);
}

/* Owner, mode, attributes, times: in the order that keeps them (chown clears set-ID bits and capabilities). */
static int apply_meta(Reader *r, int dirfd, const char *leaf, int fd, const TarHeader *h, const TarPax *x,
		      const char *path)
{
	uid_t uid = (uid_t)(x->has_uid ? x->uid : h->uid);
	gid_t gid = (gid_t)(x->has_gid ? x->gid : h->gid);
	bool link = h->type == '2';
	struct timespec ts[2];
	int e;

	if ((x->has_uid ? x->uid : h->uid) >= UINT32_MAX || (x->has_gid ? x->gid : h->gid) >= UINT32_MAX)
		return errmsg_set(&r->why, -EINVAL, "%s has an owner or group beyond what Linux can store", path);
	if (fd >= 0 ? fchown(fd, uid, gid) : fchownat(dirfd, leaf, uid, gid, AT_SYMLINK_NOFOLLOW))
		return errmsg_set(&r->why, negative_errno(), "cannot set the owner of %s: %s", path, errno_str(errno));
	if (!link && (fd >= 0 ? fchmod(fd, h->mode) : fchmodat(dirfd, leaf, h->mode, 0)))
		return errmsg_set(&r->why, negative_errno(), "cannot set the mode of %s: %s", path, errno_str(errno));
	for (size_t i = 0; i < x->n_xattrs; i++) {
		const TarXattr *a = &x->xattrs[i];

		if (strncmp(a->name, "trusted.", 8) == 0)
			continue; /* not a file's own data: another filesystem's or another tool's (overlayfs) */
		if (strncmp(a->name, "user.", 5) && strncmp(a->name, "security.", 9) && strncmp(a->name, "system.posix_acl_", 17))
			return errmsg_set(&r->why, -EPERM, "%s carries attribute %.64s, which import does not set", path,
					  a->name);
		e = set_attr(r, dirfd, leaf, fd, a->name, a->value, a->len, path);
		if (e < 0)
			return e;
	}
	/* Symlinks have no ACLs; only directories have a default one. */
	if (!link) {
		e = apply_acl_text(r, dirfd, leaf, fd, x, true, path);
		if (e == 0 && h->type == '5')
			e = apply_acl_text(r, dirfd, leaf, fd, x, false, path);
		if (e < 0)
			return e;
	}
	ts[1] = x->has_mtime ? x->mtime : (struct timespec){ .tv_sec = (time_t)h->mtime };
	ts[0] = x->has_atime ? x->atime : ts[1];
	if (fd >= 0 ? futimens(fd, ts) : utimensat(dirfd, leaf, ts, AT_SYMLINK_NOFOLLOW))
		return errmsg_set(&r->why, negative_errno(), "cannot set the times of %s: %s", path, errno_str(errno));
	return 0;
}

/* GNU sparse 1.0: the map leads the data ("COUNT\nOFFSET\nLENGTH\n...", padded to a block). */
static int write_sparse(Reader *r, int fd, uint64_t size, uint64_t realsize, const char *path)
{
	char line[32];
	uint64_t used = 0, count = 0, *map = NULL, n_vals;
	size_t li = 0;
	int e = 0;

	/* Numbers one a line; the first is the count of pairs. */
	for (uint64_t want = 1, got = 0; got < want;) {
		char c;

		if (used >= size)
			return errmsg_set(&r->why, -EBADMSG, "the sparse map of %s is longer than its data", path);
		e = fill(r, &c, 1);
		if (e < 0)
			goto out;
		used++;
		if (c != '\n') {
			if (c < '0' || c > '9' || li >= 20) {
				e = errmsg_set(&r->why, -EBADMSG, "the sparse map of %s is malformed", path);
				goto out;
			}
			line[li++] = c;
			continue;
		}
		line[li] = '\0';
		if (li == 0) {
			e = errmsg_set(&r->why, -EBADMSG, "the sparse map of %s is malformed", path);
			goto out;
		}
		if (got == 0 && want == 1) {
			count = strtoull(line, NULL, 10);
			if (count > TAR_READ_SPARSE_MAX) {
				e = errmsg_set(&r->why, -E2BIG, "%s has more than %d data ranges", path, TAR_READ_SPARSE_MAX);
				goto out;
			}
			want = 1 + 2 * count;
			map = calloc(2 * count + 1, sizeof(*map));
			if (!map)
				return -ENOMEM;
		} else
			map[got - 1] = strtoull(line, NULL, 10);
		got++;
		li = 0;
	}
	e = skip(r, padded(used) - used);
	used = padded(used);
	n_vals = 2 * count;
	for (uint64_t i = 0; e == 0 && i < n_vals; i += 2) {
		uint64_t off = map[i], len = map[i + 1];
		static char chunk[1 << 20];

		if (off > realsize || len > realsize - off || len > size - used) {
			e = errmsg_set(&r->why, -EBADMSG, "the sparse map of %s points past its size or its data", path);
			break;
		}
		while (e == 0 && len > 0) {
			size_t k = len < sizeof(chunk) ? (size_t)len : sizeof(chunk);

			e = fill(r, chunk, k);
			if (e == 0)
				e = pwrite_all(fd, chunk, k, off);
			if (e < 0 && !r->why)
				e = errmsg_set(&r->why, e, "cannot write %s: %s", path, errno_str(e));
			off += k;
			len -= k;
			used += k;
		}
	}
	if (e == 0)
		e = skip(r, padded(size) - used);
	if (e == 0 && ftruncate(fd, (off_t)realsize) < 0)
		e = errmsg_set(&r->why, negative_errno(), "cannot size %s: %s", path, errno_str(errno));
out:
	free(map);
	return e;
}

static int write_data(Reader *r, int fd, uint64_t size, const char *path)
{
	static char chunk[1 << 20];
	uint64_t off = 0;
	int e = 0;

	while (e == 0 && off < size) {
		size_t k = size - off < sizeof(chunk) ? (size_t)(size - off) : sizeof(chunk);

		e = fill(r, chunk, k);
		/* 4 KiB of zeros stay a hole: an archive without a sparse map still restores holes. */
		for (size_t p = 0; e == 0 && p < k; p += 4096) {
			size_t len = k - p < 4096 ? k - p : 4096;
			bool zeros = true;

			for (size_t i = 0; i < len && zeros; i++)
				zeros = chunk[p + i] == 0;
			if (!zeros)
				e = pwrite_all(fd, chunk + p, len, off + p);
		}
		if (e < 0 && !r->why)
			e = errmsg_set(&r->why, e, "cannot write %s: %s", path, errno_str(e));
		off += k;
	}
	if (e == 0)
		e = skip(r, padded(size) - size);
	if (e == 0 && ftruncate(fd, (off_t)size) < 0)
		e = errmsg_set(&r->why, negative_errno(), "cannot size %s: %s", path, errno_str(errno));
	return e;
}

/* Makes room for a new entry at @leaf: a non-directory there goes; a directory stays only for a directory. */
static int clear_leaf(Reader *r, int dirfd, const char *leaf, bool for_dir, const char *path, bool *ret_is_dir)
{
	struct stat st;

	*ret_is_dir = false;
	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : errmsg_set(&r->why, negative_errno(), "cannot look at %s: %s", path,
							  errno_str(errno));
	if (S_ISDIR(st.st_mode)) {
		if (!for_dir)
			return errmsg_set(&r->why, -EISDIR, "%s comes twice, a directory first: not replaced", path);
		*ret_is_dir = true;
		return 0;
	}
	if (unlinkat(dirfd, leaf, 0) < 0)
		return errmsg_set(&r->why, negative_errno(), "cannot replace %s: %s", path, errno_str(errno));
	return 0;
}

static int entry(Reader *r, const TarHeader *h, TarPax *x, const char *raw_name, const char *raw_link)
{
	_cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
	char path[TAR_READ_PATH_MAX + 1], target[TAR_READ_PATH_MAX + 1];
	const char *leaf, *tleaf;
	uint64_t size = x->has_size ? x->size : h->size;
	bool is_dir = false;
	int e;

	e = tar_path_normalize(raw_name, path, sizeof(path), &r->why);
	if (e < 0)
		return e;
	if (++r->st.entries > r->lim->max_entries)
		return errmsg_set(&r->why, -E2BIG, "the stream has more than %" PRIu64 " entries", r->lim->max_entries);
	if (path[0] == '\0') {
		/* The root itself ("./"): only its attributes. */
		if (h->type != '5')
			return errmsg_set(&r->why, -EBADMSG, "'%.200s' names the volume itself but is not a directory", raw_name);
		if (GROW_ARRAY(r->dirs, r->cap_dirs, r->n_dirs + 1, 64) < 0 || !(r->dirs[r->n_dirs].path = strdup("")))
			return -ENOMEM;
		r->dirs[r->n_dirs].h = *h;
		r->dirs[r->n_dirs++].pax = *x;
		*x = (TarPax){ 0 };
		return skip(r, padded(size));
	}
	e = open_parent(r, path, true, &dirfd, &leaf);
	if (e < 0)
		return e;
	switch (h->type) {
	case '0':
	case '\0':
	case '7': {
		uint64_t real = x->sparse ? x->realsize : size;

		if (x->sparse && !x->has_realsize)
			return errmsg_set(&r->why, -EBADMSG, "sparse file %s has no real size", path);
		if (real > r->lim->max_bytes - r->st.bytes || real > r->lim->max_bytes)
			return errmsg_set(&r->why, -EFBIG, "%s is %" PRIu64 " bytes: more than the import may write (%" PRIu64
					  " bytes left of %" PRIu64 ": the volume's size=, or the partition's free space)",
					  path, real, r->lim->max_bytes - r->st.bytes, r->lim->max_bytes);
		r->st.bytes += real;
		e = clear_leaf(r, dirfd, leaf, false, path, &is_dir);
		if (e < 0)
			return e;
		fd = openat(dirfd, leaf, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return errmsg_set(&r->why, negative_errno(), "cannot create %s: %s", path, errno_str(errno));
		e = x->sparse ? write_sparse(r, fd, size, real, path) : write_data(r, fd, size, path);
		return e < 0 ? e : apply_meta(r, dirfd, leaf, fd, h, x, path);
	}
	case '1': {
		_cleanup_close_ int tdir = -EBADF;
		struct stat st;

		e = tar_path_normalize(raw_link, target, sizeof(target), &r->why);
		if (e < 0)
			return e;
		if (!target[0])
			return errmsg_set(&r->why, -EPERM, "hard link %s names the volume itself", path);
		e = open_parent(r, target, false, &tdir, &tleaf);
		if (e < 0)
			return e;
		if (fstatat(tdir, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			return errmsg_set(&r->why, -ENOENT, "hard link %s: %s is not a file the stream made before", path,
					  target);
		e = clear_leaf(r, dirfd, leaf, false, path, &is_dir);
		if (e == 0 && linkat(tdir, tleaf, dirfd, leaf, 0) < 0)
			e = errmsg_set(&r->why, negative_errno(), "cannot link %s to %s: %s", path, target, errno_str(errno));
		return e < 0 ? e : skip(r, padded(size));
	}
	case '2':
		e = clear_leaf(r, dirfd, leaf, false, path, &is_dir);
		if (e == 0 && symlinkat(raw_link, dirfd, leaf) < 0)
			e = errmsg_set(&r->why, negative_errno(), "cannot make symlink %s: %s", path, errno_str(errno));
		if (e == 0)
			e = apply_meta(r, dirfd, leaf, -EBADF, h, x, path);
		return e < 0 ? e : skip(r, padded(size));
	case '3':
	case '4':
	case '6': {
		mode_t type = h->type == '3' ? S_IFCHR : h->type == '4' ? S_IFBLK : S_IFIFO;

		if (h->type != '6' && !r->lim->allow_devices)
			return errmsg_set(&r->why, -EPERM, "%s is a device node: import one only into a volume with -o dev=true",
					  path);
		e = clear_leaf(r, dirfd, leaf, false, path, &is_dir);
		if (e == 0 && mknodat(dirfd, leaf, type | 0600, makedev(h->rdev_major, h->rdev_minor)) < 0)
			e = errmsg_set(&r->why, negative_errno(), "cannot make %s: %s", path, errno_str(errno));
		if (e == 0)
			e = apply_meta(r, dirfd, leaf, -EBADF, h, x, path);
		return e < 0 ? e : skip(r, padded(size));
	}
	case '5':
		e = clear_leaf(r, dirfd, leaf, true, path, &is_dir);
		if (e == 0 && !is_dir && mkdirat(dirfd, leaf, 0700) < 0)
			e = errmsg_set(&r->why, negative_errno(), "cannot make directory %s: %s", path, errno_str(errno));
		if (e < 0)
			return e;
		if (GROW_ARRAY(r->dirs, r->cap_dirs, r->n_dirs + 1, 64) < 0 || !(r->dirs[r->n_dirs].path = strdup(path)))
			return -ENOMEM;
		r->dirs[r->n_dirs].h = *h;
		r->dirs[r->n_dirs++].pax = *x;
		*x = (TarPax){ 0 };
		return skip(r, padded(size));
	default:
		return errmsg_set(&r->why, -EOPNOTSUPP, "%s has entry type '%c', which import does not take", path,
				  h->type >= 0x20 && h->type < 0x7f ? h->type : '?');
	}
}

/* Directories' attributes, once nothing more is made in them: deepest (latest) first. */
static int finish_dirs(Reader *r)
{
	for (size_t i = r->n_dirs; i-- > 0;) {
		DirMeta *d = &r->dirs[i];
		_cleanup_close_ int fd = d->path[0] ? -EBADF : fcntl(r->root, F_DUPFD_CLOEXEC, 3);
		int e;

		if (d->path[0]) {
			_cleanup_close_ int parent = -EBADF;
			const char *leaf;

			e = open_parent(r, d->path, false, &parent, &leaf);
			if (e < 0)
				return e;
			fd = open_confined(parent, leaf);
			if (fd < 0)
				return errmsg_set(&r->why, fd, "cannot open directory %s: %s", d->path, errno_str(fd));
		}
		if (fd < 0)
			return negative_errno();
		e = apply_meta(r, -EBADF, NULL, fd, &d->h, &d->pax, d->path[0] ? d->path : "./");
		if (e < 0)
			return e;
	}
	return 0;
}

static int read_tree(Reader r, TarReadStats *ret_stats, char **reterr_msg)
{
	_cleanup_free_ char *longname = NULL, *longlink = NULL;
	TarPax x = { 0 };
	uint8_t block[BLOCK];
	bool ended = false;
	int e = 0;

	while (e == 0) {
		TarHeader h;
		char *data = NULL;

		e = fill(&r, block, BLOCK);
		if (e == -EPIPE && r.offset % BLOCK == 0) {
			free(r.why);
			r.why = NULL;
			e = errmsg_set(&r.why, -EPIPE, "the stream ends without tar's end blocks (at byte %" PRIu64
				       "): it was cut short", r.offset);
		}
		if (e < 0)
			break;
		e = tar_header_parse(block, &h, &r.why);
		if (e < 0) {
			char *w = r.why;
			r.why = NULL;
			e = errmsg_set(&r.why, e, "%s (at byte %" PRIu64 ")", w, r.offset - BLOCK);
			free(w);
			break;
		}
		if (h.zero) {
			ended = true;
			break;
		}
		switch (h.type) {
		case 'x':
			e = read_small(&r, h.size, &data);
			if (e == 0)
				e = tar_pax_parse(data, h.size, &x, &r.why);
			free(data);
			continue;
		case 'g':
			/* Global records (a comment, a charset): they change nothing here. */
			e = skip(&r, padded(h.size));
			continue;
		case 'L':
		case 'K':
			e = read_small(&r, h.size, &data);
			if (e == 0) {
				free(h.type == 'L' ? longname : longlink);
				*(h.type == 'L' ? &longname : &longlink) = data;
			}
			continue;
		default:
			break;
		}
		e = entry(&r, &h, &x,
			  x.sparse && x.sparse_name ? x.sparse_name : x.path ? x.path : longname ? longname : h.name,
			  x.linkpath ? x.linkpath : longlink ? longlink : h.link);
		tar_pax_done(&x);
		free(longname);
		free(longlink);
		longname = longlink = NULL;
	}
	tar_pax_done(&x);
	if (e == 0 && ended)
		e = finish_dirs(&r);
	for (size_t i = 0; i < r.n_dirs; i++) {
		free(r.dirs[i].path);
		tar_pax_done(&r.dirs[i].pax);
	}
	free(r.dirs);
	if (e < 0) {
		if (reterr_msg && r.why) {
			free(*reterr_msg);
			*reterr_msg = r.why;
		} else {
			free(r.why);
			errmsg_set(reterr_msg, e, "%s", errno_str(e));
		}
		return e;
	}
	free(r.why);
	*ret_stats = r.st;
	return 0;
}

int tar_read_tree(int in, int root_fd, const TarReadLimits *limits, TarReadStats *ret_stats, char **reterr_msg)
{
	return read_tree((Reader){ .in = in, .root = root_fd, .lim = limits }, ret_stats, reterr_msg);
}

int tar_read_tree_from(TarReadFn fn, void *userdata, int root_fd, const TarReadLimits *limits, TarReadStats *ret_stats,
		       char **reterr_msg)
{
	return read_tree((Reader){ .in = -EBADF, .fn = fn, .fn_data = userdata, .root = root_fd, .lim = limits },
			 ret_stats, reterr_msg);
}
