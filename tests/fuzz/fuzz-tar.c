/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the tar reader of `nvmevol volume import` (src/cli/tar-read.c): the
 * stream is another host's, applied as root.
 *
 * Input: a tar stream. It is read by tar_read_tree() from a memfd into a
 * fresh directory inside a sandbox directory, which is then emptied; and
 * its first bytes go through tar_header_parse(), tar_pax_parse(),
 * tar_path_normalize() and the ACL text parser (acl_text_to_xattr) on
 * their own.
 *
 * Properties checked beyond "no crash": nothing appears in the sandbox
 * beside the import's own directory (no name, link or symlink of the stream
 * reaches out); a normalized name is relative, has no "." or ".." component
 * and no empty one, and fits TAR_READ_PATH_MAX; an ACL text that parses
 * gives the same attribute again after a round trip through its own text.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/acl-text.h"
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

static void check_acl(const char *text)
{
	void *v1 = NULL, *v2 = NULL;
	size_t n1 = 0, n2 = 0;
	char *again = NULL, *err = NULL;

	if (acl_text_to_xattr(text, NULL, &v1, &n1, &err) == 0 && n1 > 0) {
		if (acl_xattr_to_text(v1, n1, &again) < 0)
			fuzz_fail("an ACL made from text cannot be written as text", text);
		if (acl_text_to_xattr(again, NULL, &v2, &n2, NULL) < 0 || n1 != n2 || memcmp(v1, v2, n1) != 0)
			fuzz_fail("an ACL's own text gives another ACL", text);
	}
	free(v1);
	free(v2);
	free(again);
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
	if (pax.acl_access)
		check_acl(pax.acl_access);
	if (pax.acl_default)
		check_acl(pax.acl_default);
	tar_pax_done(&pax);
	if (size < 4096) {
		char text[4096];

		memcpy(text, data, size);
		text[size] = '\0';
		check_acl(text);
	}
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
