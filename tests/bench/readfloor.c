/* SPDX-License-Identifier: MIT */
/*
 * readfloor: the least a start-up that reads every volume's files can cost
 * (benchmarks only). Reads every file of each DIR with openat + one read of
 * up to 4 KiB + close, on THREADS threads (default 1), and prints the files,
 * the bytes, the wall time and the CPU time (user + system, all threads) in
 * ms. No parsing: what is left of start-up's time above this is nvmevol's
 * own work. On a loaded machine the CPU time is the figure to compare.
 *
 *   readfloor [-t THREADS] DIR...
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
	int dirfd;
	char **names;
	size_t n;
	size_t next; /* claimed with an atomic add */
	unsigned long long bytes;
} Job;

static void *worker(void *arg)
{
	Job *j = arg;
	char buf[4096];

	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		int fd;
		ssize_t n;

		if (i >= j->n)
			return NULL;
		fd = openat(j->dirfd, j->names[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n > 0)
			__atomic_fetch_add(&j->bytes, (unsigned long long)n, __ATOMIC_RELAXED);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	int threads = 1, a = 1;
	size_t files = 0;
	unsigned long long bytes = 0;
	struct timespec t0, t1;

	if (argc > 2 && !strcmp(argv[1], "-t")) {
		threads = atoi(argv[2]);
		a = 3;
	}
	if (a >= argc || threads < 1 || threads > 64) {
		fprintf(stderr, "usage: readfloor [-t THREADS] DIR...\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (; a < argc; a++) {
		Job j = { 0 };
		size_t cap = 0;
		struct dirent *de;
		DIR *d = opendir(argv[a]);
		pthread_t t[64];

		if (!d) {
			perror(argv[a]);
			return 1;
		}
		j.dirfd = dirfd(d);
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			if (j.n == cap) {
				cap = cap ? cap * 2 : 1024;
				j.names = realloc(j.names, cap * sizeof(*j.names));
				if (!j.names)
					return 1;
			}
			j.names[j.n++] = strdup(de->d_name);
		}
		for (int k = 1; k < threads; k++)
			pthread_create(&t[k], NULL, worker, &j);
		worker(&j);
		for (int k = 1; k < threads; k++)
			pthread_join(t[k], NULL);
		files += j.n;
		bytes += j.bytes;
		for (size_t i = 0; i < j.n; i++)
			free(j.names[i]);
		free(j.names);
		closedir(d);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%zu %llu %.1f %.1f\n", files, bytes,
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
	return 0;
}
