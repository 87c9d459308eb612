/* SPDX-License-Identifier: MIT */
/*
 * firstwrite FILE: time (microseconds) of open(O_WRONLY) + one 4 KiB pwrite at
 * offset 0 + close on FILE. On overlayfs the open of a lower-layer file for
 * writing is where the copy-up happens. Built statically so it runs in any
 * image (benchmarks only).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[4096];
	struct timespec a, b;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: firstwrite FILE\n");
		return 2;
	}
	memset(buf, 'x', sizeof(buf));
	clock_gettime(CLOCK_MONOTONIC, &a);
	fd = open(argv[1], O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf) || close(fd) < 0) {
		perror(argv[1]);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.0f\n", (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3);
	return 0;
}
