/* SPDX-License-Identifier: MIT */
#include <unistd.h>

#include "util/io-util.h"
#include "util/macro.h"

typedef enum { IO_WRITE, IO_PWRITE, IO_PREAD } IoOp;

/* The one loop of the three: short transfers go on, EINTR is retried. */
static int transfer_all(IoOp op, int fd, char *p, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = op == IO_PREAD    ? pread(fd, p, len, (off_t)off)
			    : op == IO_PWRITE ? pwrite(fd, p, len, (off_t)off)
					      : write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return op == IO_PREAD ? -ENODATA : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* The writers never write through the pointer: the casts only let them share the loop with pread. */
int write_all(int fd, const void *buf, size_t len)
{
	return transfer_all(IO_WRITE, fd, (char *)buf, len, 0);
}

int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return transfer_all(IO_PWRITE, fd, (char *)buf, len, off);
}

int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	return transfer_all(IO_PREAD, fd, buf, len, off);
}
