/* SPDX-License-Identifier: MIT */
/*
 * tartool DIR [zstd[:LEVEL]]: the archive writer of `nvmevol volume export`
 * (cli/tar-write.c, cli/compress.c) on any directory, to standard output,
 * without the plugin: for profiling (perf, callgrind, strace -c) against
 * GNU tar on the same tree. Not installed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "cli/compress.h"
#include "cli/tar-write.h"

int main(int argc, char **argv)
{
	TarWriteStats st = { 0 };
	CompressOut *z = NULL;
	char *err = NULL;
	int fd, level = 0, r;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s DIR [zstd[:LEVEL]] > ARCHIVE\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || (argc == 3 && compress_parse(argv[2], &level, &err) < 0)) {
		fprintf(stderr, "%s: %s\n", argv[0], err ? err : "cannot open the directory");
		return 2;
	}
	if (level > 0) {
		r = compress_out_new(STDOUT_FILENO, level, &z, &err);
		if (r == 0)
			r = tar_write_tree_to(fd, compress_out_write, z, NULL, &st, &err);
		if (r == 0)
			r = compress_out_finish(z);
		compress_out_free(z);
	} else
		r = tar_write_tree(fd, STDOUT_FILENO, NULL, &st, &err);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", argv[0], err ? err : "failed");
		return 1;
	}
	fprintf(stderr, "%llu entries, %llu bytes\n", (unsigned long long)st.entries, (unsigned long long)st.bytes);
	return 0;
}
