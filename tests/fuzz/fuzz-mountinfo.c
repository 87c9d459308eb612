/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the reading of /proc/self/mountinfo text, which the daemon uses at
 * start-up (reconcile) and to verify every bind it makes.
 *
 * Input: mountinfo text, capped at 128 KiB as util-linux's libmount fuzzer
 * does (libmount's parser is line based; longer inputs only cost time).
 *
 * Exercised: mountinfo_parse_buffer (libmount mnt_table_parse_stream on
 * fmemopen, entry copying), mount_options_contain and mount_is_shared on each
 * entry. Not exercised: the kernel's own file, mounting or unmounting.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/mount.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MOUNTINFO_FUZZ_MAX (128 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	MountEntry *e = NULL;
	size_t n = 0;
	char *buf;

	if (size > MOUNTINFO_FUZZ_MAX)
		return 0;
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);

	if (mountinfo_parse_buffer(buf, size, &e, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (!e[i].target || !e[i].root || !e[i].vfs_options || !e[i].optional) {
				fprintf(stderr, "fuzz-mountinfo: entry %zu has a NULL field\n", i);
				abort();
			}
			(void)mount_options_contain(e[i].vfs_options, "noatime");
			(void)mount_options_contain(e[i].vfs_options, "nodiratime");
			(void)mount_options_contain(e[i].fs_options, "prjquota");
			(void)mount_is_shared(&e[i]);
		}
		mount_entries_free(e, n);
	}
	free(buf);
	return 0;
}
