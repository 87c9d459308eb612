/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the tar reader of `nvmevol volume import` (src/cli/tar-read.c): the
 * stream is another host's, applied as root.
 *
 * Input: a tar stream. It is read by tar_read_tree() from a memfd into a
 * fresh directory inside a sandbox directory, which is then emptied; and
 * its first bytes go through tar_header_parse(), tar_pax_parse() and
 * tar_path_normalize() on their own.
 *
 * Properties checked beyond "no crash": nothing appears in the sandbox
 * beside the import's own directory (no name, link or symlink of the stream
 * reaches out); a normalized name is relative, has no "." or ".." component
 * and no empty one, and fits TAR_READ_PATH_MAX.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/tar-read.h"
#include "fuzz-sandbox.h"
#include "util/fs-util.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sandbox_init("fuzz-tar");
	return 0;
}

static void check_path(const uint8_t *data, size_t size)
{
	char in[600], out[TAR_READ_PATH_MAX + 1], *err = NULL;
	size_t n = size < sizeof(in) - 1 ? size : sizeof(in) - 1;

	memcpy(in, data, n);
	in[n] = '\0';
	if (tar_path_normalize(in, out, sizeof(out), &err) == 0)
		fuzz_check_relative_path(out, TAR_READ_PATH_MAX);
	free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	TarReadLimits lim = { .max_entries = 1000, .max_bytes = 64 << 20, .allow_devices = false };
	TarReadStats st;
	TarHeader h;
	TarPax pax = { 0 };
	char *err = NULL;
	int in, root;

	fuzz_sandbox_init("fuzz-tar");
	if (size > (4u << 20))
		return 0;
	check_path(data, size);
	if (size >= 512)
		(void)tar_header_parse(data, &h, &err);
	free(err);
	err = NULL;
	(void)tar_pax_parse((const char *)data, size, &pax, &err);
	tar_pax_done(&pax);
	free(err);
	err = NULL;

	in = memfd_create("fuzz-tar", MFD_CLOEXEC);
	if (in < 0 || (size && write(in, data, size) != (ssize_t)size) || lseek(in, 0, SEEK_SET) < 0)
		abort();
	root = fuzz_sandbox_enter();
	(void)tar_read_tree(in, root, &lim, &st, &err);
	free(err);
	close(in);
	fuzz_sandbox_leave(root);
	return 0;
}
