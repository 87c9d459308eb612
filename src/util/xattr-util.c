/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/alloc-util.h"
#include "util/macro.h"
#include "util/xattr-util.h"

/* Linux 6.13 added these with the same numbers on every architecture; glibc 2.36 has no wrappers. */
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_getxattrat
#define __NR_getxattrat 464
#endif
#ifndef __NR_listxattrat
#define __NR_listxattrat 465
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif

struct xattr_args_v0 {
	uint64_t value;
	uint32_t size;
	uint32_t flags;
};

static ssize_t t_list(const XattrTarget *t, char *buf, size_t size)
{
	if (t->fd >= 0)
		return flistxattr(t->fd, buf, size);
	return syscall(__NR_listxattrat, t->dirfd, t->name, AT_SYMLINK_NOFOLLOW, buf, size);
}

static ssize_t t_get(const XattrTarget *t, const char *key, void *buf, size_t size)
{
	struct xattr_args_v0 args = { .value = (uint64_t)(uintptr_t)buf, .size = (uint32_t)size };

	if (t->fd >= 0)
		return fgetxattr(t->fd, key, buf, size);
	return syscall(__NR_getxattrat, t->dirfd, t->name, AT_SYMLINK_NOFOLLOW, key, &args, sizeof(args));
}

static int t_set(const XattrTarget *t, const char *key, const void *val, size_t len)
{
	struct xattr_args_v0 args = { .value = (uint64_t)(uintptr_t)val, .size = (uint32_t)len };

	if (t->fd >= 0)
		return fsetxattr(t->fd, key, val, len, 0);
	return (int)syscall(__NR_setxattrat, t->dirfd, t->name, AT_SYMLINK_NOFOLLOW, key, &args, sizeof(args));
}

static int t_remove(const XattrTarget *t, const char *key)
{
	if (t->fd >= 0)
		return fremovexattr(t->fd, key);
	return (int)syscall(__NR_removexattrat, t->dirfd, t->name, AT_SYMLINK_NOFOLLOW, key);
}

static int errno_to_result(void)
{
	/* No *xattrat in this kernel: the caller decides what an unreachable attribute means. */
	if (errno == ENOSYS)
		return -EOPNOTSUPP;
	return negative_errno();
}

/* The NUL-separated name list, grown until it fits (it can change between calls). */
static int read_names(const XattrTarget *t, char **ret, size_t *ret_len)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		_cleanup_free_ char *buf = NULL;
		ssize_t n = t_list(t, NULL, 0);

		if (n < 0)
			return errno_to_result();
		if (n == 0) {
			*ret = NULL;
			*ret_len = 0;
			return 0;
		}
		if (n > XATTR_UTIL_LIST_MAX)
			return -E2BIG;
		buf = malloc((size_t)n + 1);
		if (!buf)
			return -ENOMEM;
		n = t_list(t, buf, (size_t)n);
		if (n < 0) {
			if (errno == ERANGE)
				continue;
			return errno_to_result();
		}
		buf[n] = '\0';
		*ret = TAKE_PTR(buf);
		*ret_len = (size_t)n;
		return 0;
	}
	return -EAGAIN;
}

/* One value; -ENODATA if it vanished since the list was read. */
static int read_value(const XattrTarget *t, const char *key, void **ret, size_t *ret_len)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		_cleanup_free_ void *buf = NULL;
		ssize_t n = t_get(t, key, NULL, 0);

		if (n < 0)
			return errno_to_result();
		if (n > XATTR_UTIL_VALUE_MAX)
			return -E2BIG;
		buf = malloc(n > 0 ? (size_t)n : 1);
		if (!buf)
			return -ENOMEM;
		n = t_get(t, key, buf, (size_t)n);
		if (n < 0) {
			if (errno == ERANGE)
				continue;
			return errno_to_result();
		}
		*ret = TAKE_PTR(buf);
		*ret_len = (size_t)n;
		return 0;
	}
	return -EAGAIN;
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

int xattr_blob_read(const XattrTarget *t, void **ret_blob, size_t *ret_len)
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
		_cleanup_free_ void *val = NULL;
		size_t vlen = 0;

		r = read_value(t, v[i], &val, &vlen);
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

bool xattr_blob_equal(const void *a, size_t alen, const void *b, size_t blen)
{
	return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* Walks @blob: *pos advances; false at the end or on a malformed entry. */
static bool blob_next(const char *blob, size_t len, size_t *pos, char *key, size_t keysize, const void **val,
		      size_t *vlen)
{
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

size_t xattr_blob_count(const void *blob, size_t len)
{
	char key[XATTR_NAME_MAX + 1];
	const void *val;
	size_t pos = 0, vlen, n = 0;

	while (blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen))
		n++;
	return n;
}

static bool blob_has(const char *blob, size_t len, const char *want)
{
	char key[XATTR_NAME_MAX + 1];
	const void *val;
	size_t pos = 0, vlen;

	while (blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen))
		if (streq(key, want))
			return true;
	return false;
}

int xattr_blob_apply(const XattrTarget *t, const void *blob, size_t len)
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
			return errno_to_result();
	while (blob_next(blob, len, &pos, key, sizeof(key), &val, &vlen))
		if (t_set(t, key, val, vlen) < 0)
			return errno_to_result();
	return 0;
}
