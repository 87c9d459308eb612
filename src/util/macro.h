/* SPDX-License-Identifier: MIT */
/* Small macros used everywhere: cleanup attributes, ownership transfer, array size. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
	}
}
#define _cleanup_close_ _cleanup_(closep)

/* For library destructors that return void and must not see NULL. */
#define DEFINE_CLEANUP_FUNC(type, func)              \
	static inline void func##p(type *p)          \
	{                                            \
		if (*p)                              \
			func(*p);                    \
	}

#define TAKE_PTR(ptr)                        \
	({                                   \
		__typeof__(ptr) _p_ = (ptr); \
		(ptr) = NULL;                \
		_p_;                         \
	})

#define TAKE_FD(fd)                  \
	({                           \
		int _fd_ = (fd);     \
		(fd) = -EBADF;       \
		_fd_;                \
	})

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define streq(a, b) (strcmp((a), (b)) == 0)

/* Returns -errno for the last failed libc call, never 0. */
static inline int negative_errno(void)
{
	return errno > 0 ? -errno : -EIO;
}
