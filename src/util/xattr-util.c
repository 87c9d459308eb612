/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/alloc-util.h"
#include "util/macro.h"
#include "util/xattr-util.h"

/*
 * An inode without an open descriptor (a symlink, a special file) is reached
 * through an O_PATH descriptor of exactly that inode (O_NOFOLLOW) and its
 * /proc/self/fd link: the *xattr calls that follow links land on the inode
 * itself, on every kernel (the *xattrat calls need Linux 6.13).
 */
typedef struct Handle {
	int fd;        /* the target's own descriptor, or -EBADF */
	int path_fd;   /* our O_PATH descriptor, or -EBADF */
	char proc[40]; /* /proc/self/fd/N of path_fd */
} Handle;

static int handle_open(const XattrTarget *t, Handle *h)
{
	*h = (Handle){ .fd = t->fd, .path_fd = -EBADF };
	if (t->fd >= 0)
		return 0;
	h->path_fd = openat(t->dirfd, t->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (h->path_fd < 0)
		return negative_errno();
	snprintf(h->proc, sizeof(h->proc), "/proc/self/fd/%d", h->path_fd);
	return 0;
}

static void handle_close(Handle *h)
{
	if (h->path_fd >= 0)
		(void)close(h->path_fd);
	h->path_fd = -EBADF;
}

static ssize_t t_list(const Handle *h, char *buf, size_t size)
{
	return h->fd >= 0 ? flistxattr(h->fd, buf, size) : listxattr(h->proc, buf, size);
}

static ssize_t t_get(const Handle *h, const char *key, void *buf, size_t size)
{
	return h->fd >= 0 ? fgetxattr(h->fd, key, buf, size) : getxattr(h->proc, key, buf, size);
}

static int t_set(const Handle *h, const char *key, const void *val, size_t len)
{
	return h->fd >= 0 ? fsetxattr(h->fd, key, val, len, 0) : setxattr(h->proc, key, val, len, 0);
}

static int t_remove(const Handle *h, const char *key)
{
	return h->fd >= 0 ? fremovexattr(h->fd, key) : removexattr(h->proc, key);
}

/*
 * The attribute @key, or the NUL-separated name list when @key is NULL (then
 * NUL-terminated): what fits 1 KiB in one call, else sized by a first call and
 * read again if it grew in between.
 * At most @max bytes; -ENODATA if @key vanished since the list was read.
 */
static int read_sized(const Handle *t, const char *key, size_t max, char **ret, size_t *ret_len)
{
	/* First into a buffer on the stack: one call, not two, for the usual short list or value (or none). */
	char small[1024];
	ssize_t k = key ? t_get(t, key, small, sizeof(small)) : t_list(t, small, sizeof(small));

	if (k < 0 && errno != ERANGE)
		return negative_errno();
	if (k >= 0) {
		if ((size_t)k > max)
			return -E2BIG;
		*ret = malloc((size_t)k + 1);
		if (!*ret)
			return -ENOMEM;
		memcpy(*ret, small, (size_t)k);
		(*ret)[k] = '\0';
		*ret_len = (size_t)k;
		return 0;
	}
	for (int attempt = 0; attempt < 8; attempt++) {
		_cleanup_free_ char *buf = NULL;
		ssize_t n = key ? t_get(t, key, NULL, 0) : t_list(t, NULL, 0);

		if (n < 0)
			return negative_errno();
		if ((size_t)n > max)
			return -E2BIG;
		buf = malloc((size_t)n + 1);
		if (!buf)
			return -ENOMEM;
		n = key ? t_get(t, key, buf, (size_t)n) : t_list(t, buf, (size_t)n);
		if (n < 0) {
			if (errno == ERANGE)
				continue;
			return negative_errno();
		}
		buf[n] = '\0';
		*ret = TAKE_PTR(buf);
		*ret_len = (size_t)n;
		return 0;
	}
	return -EAGAIN;
}

static int read_names(const Handle *t, char **ret, size_t *ret_len)
{
	return read_sized(t, NULL, XATTR_UTIL_LIST_MAX, ret, ret_len);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Splits a name list into a sorted array of pointers into it. */
static int split_names(char *list, size_t len, const char ***ret, size_t *ret_n)
{
	size_t n = 0, i = 0;
	const char **v;

	for (size_t p = 0; p < len; p += strlen(list + p) + 1)
		n++;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t p = 0; p < len; p += strlen(list + p) + 1)
		if (list[p])
			v[i++] = list + p;
	qsort(v, i, sizeof(*v), cmp_str);
	*ret = v;
	*ret_n = i;
	return 0;
}

/* Blob entry: u32 name length, name, u32 value length, value. Sorted by name. */
static int blob_append(char **blob, size_t *len, size_t *cap, const char *key, const void *val, size_t vlen)
{
	uint32_t kl = (uint32_t)strlen(key), vl = (uint32_t)vlen;
	size_t need = *len + 8 + kl + vlen;

	if (grow_array((void **)blob, cap, need, 1, 256) < 0)
		return -ENOMEM;
	memcpy(*blob + *len, &kl, 4);
	memcpy(*blob + *len + 4, key, kl);
	memcpy(*blob + *len + 4 + kl, &vl, 4);
	if (vlen)
		memcpy(*blob + *len + 8 + kl, val, vlen);
	*len = need;
	return 0;
}

static int blob_read(const Handle *t, void **ret_blob, size_t *ret_len)
{
	_cleanup_free_ char *names = NULL, *blob = NULL;
	_cleanup_free_ const char **v = NULL;
	size_t nlen = 0, n = 0, len = 0, cap = 0;
	int r;

	r = read_names(t, &names, &nlen);
	if (r < 0)
		return r;
	if (nlen == 0) {
		*ret_blob = NULL;
		*ret_len = 0;
		return 0;
	}
	r = split_names(names, nlen, &v, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *val = NULL;
		size_t vlen = 0;

		r = read_sized(t, v[i], XATTR_UTIL_VALUE_MAX, &val, &vlen);
		if (r == -ENODATA)
			continue;
		if (r < 0)
			return r;
		r = blob_append(&blob, &len, &cap, v[i], val, vlen);
		if (r < 0)
			return r;
	}
	*ret_blob = TAKE_PTR(blob);
	*ret_len = len;
	return 0;
}

int xattr_blob_read(const XattrTarget *t, void **ret_blob, size_t *ret_len)
{
	Handle h;
	int r;

	r = handle_open(t, &h);
	if (r < 0)
		return r;
	r = blob_read(&h, ret_blob, ret_len);
	handle_close(&h);
	return r;
}

bool xattr_blob_equal(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

bool xattr_blob_next(const void *b, size_t len, size_t *pos, char *key, size_t keysize, const void **val,
		     size_t *vlen)
{
	const char *blob = b;
	uint32_t kl, vl;

	if (*pos + 4 > len)
		return false;
	memcpy(&kl, blob + *pos, 4);
	if (kl == 0 || kl >= keysize || *pos + 8 + kl > len)
		return false;
	memcpy(key, blob + *pos + 4, kl);
	key[kl] = '\0';
	memcpy(&vl, blob + *pos + 4 + kl, 4);
	if (*pos + 8 + kl + vl > len)
		return false;
	*val = blob + *pos + 8 + kl;
	*vlen = vl;
	*pos += 8 + kl + vl;
	return true;
}

static bool blob_has(const char *blob, size_t len, const char *want)
{
	char key[XATTR_NAME_MAX + 1];
	const void *val;
	size_t pos = 0, vlen;

	while (xattr_blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen))
		if (streq(key, want))
			return true;
	return false;
}

static int blob_apply(const Handle *t, const void *blob, size_t len)
{
	_cleanup_free_ char *names = NULL;
	char key[XATTR_NAME_MAX + 1];
	const void *val;
	size_t nlen = 0, pos = 0, vlen;
	int r;

	r = read_names(t, &names, &nlen);
	if (r < 0)
		return r;
	for (size_t p = 0; p < nlen; p += strlen(names + p) + 1)
		if (names[p] && !blob_has(blob, len, names + p) && t_remove(t, names + p) < 0 && errno != ENODATA)
			return negative_errno();
	while (xattr_blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen))
		if (t_set(t, key, val, vlen) < 0)
			return negative_errno();
	return 0;
}

int xattr_blob_apply(const XattrTarget *t, const void *blob, size_t len)
{
	Handle h;
	int r;

	r = handle_open(t, &h);
	if (r < 0)
		return r;
	r = blob_apply(&h, blob, len);
	handle_close(&h);
	return r;
}
