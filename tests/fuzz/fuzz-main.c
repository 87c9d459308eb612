/* SPDX-License-Identifier: MIT */
/*
 * Replays fuzz inputs without libFuzzer: runs LLVMFuzzerTestOneInput() once
 * for every regular file named on the command line or found (one level deep,
 * in name order) in a directory named there. This is how the seed corpora and
 * the minimized crash regressions run as ordinary tests in every build,
 * sanitizers or not. Exits non-zero if an argument cannot be read; a bug
 * found by an input aborts the process (sanitizer report or abort()).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define INPUT_MAX (16 * 1024 * 1024)

static int run_file(int dirfd, const char *name, const char *shown)
{
	struct stat st;
	uint8_t *buf;
	size_t len = 0;
	int fd;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "fuzz-main: %s: %s\n", shown, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > INPUT_MAX) {
		fprintf(stderr, "fuzz-main: %s: not a regular file of at most 16 MiB\n", shown);
		close(fd);
		return -1;
	}
	/* Exactly the file's size (at least 1 byte): ASan sees any read past the input. */
	buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
	if (!buf) {
		close(fd);
		return -1;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "fuzz-main: %s: short read\n", shown);
			free(buf);
			close(fd);
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	(void)LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path, unsigned *count)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int r = 0, dfd;
	DIR *d;

	d = opendir(path);
	if (!d) {
		fprintf(stderr, "fuzz-main: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
			if (!nn) {
				r = -1;
				goto out;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			r = -1;
			goto out;
		}
		n++;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	dfd = dirfd(d);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		char shown[4096];

		snprintf(shown, sizeof(shown), "%s/%s", path, names[i]);
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			continue;
		if (run_file(dfd, names[i], shown) < 0)
			r = -1;
		else
			(*count)++;
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int failed = 0;

	if (LLVMFuzzerInitialize)
		(void)LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2) {
		fprintf(stderr, "Usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "fuzz-main: %s: %s\n", argv[i], strerror(errno));
			failed = 1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				failed = 1;
		} else if (run_file(AT_FDCWD, argv[i], argv[i]) < 0)
			failed = 1;
		else
			count++;
	}
	printf("%s: %u input(s) replayed%s\n", argv[0], count, failed ? ", some unreadable" : "");
	return failed ? 1 : 0;
}
