/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the loader of volume records and index files
 * (<fs>/nvmevol/meta/<name>.json, <state>/index/<name>.json), which must
 * survive truncated, corrupted and hostile files: a bad record makes one
 * volume "record-unreadable", never the daemon crash.
 *
 * Input: the file's bytes, as read_file_at() would return them.
 *
 * Exercised: volume_record_parse (jansson, version and CRC check, every
 * field, options, mount counts, escaped labels), volume_record_dump,
 * volume_unref. Pure code: nothing touches a filesystem.
 *
 * Property checked beyond "no crash": an accepted record is written back
 * (volume_record_dump, with and without counts) into a form that parses
 * again to the same dump, so what the daemon saves it can always load.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "fuzz-record: property violated: %s\nfirst: %s\nagain: %s\n", what, a ? a : "(null)",
		b ? b : "(null)");
	abort();
}

static void check_roundtrip(const Volume *v, bool with_mounts)
{
	Volume *again = NULL;
	char *s1, *s2 = NULL, *err = NULL;

	s1 = volume_record_dump(v, with_mounts);
	if (!s1)
		return;
	if (volume_record_parse(s1, strlen(s1), &again, &err) < 0)
		fail(err ? err : "dumped record does not parse", s1, NULL);
	s2 = volume_record_dump(again, with_mounts);
	if (s2 && strcmp(s1, s2) != 0)
		fail("dump(parse(dump(v))) != dump(v)", s1, s2);
	if (volume_mount_total(again) != (with_mounts ? volume_mount_total(v) : 0))
		fail("mount counts changed across a round trip", s1, s2);
	free(err);
	free(s1);
	free(s2);
	volume_unref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Volume *v = NULL;
	char *buf, *err = NULL;
	int r;

	if (size > RECORD_SIZE_MAX + 16)
		return 0;
	/* Exactly the input's size: the parser is given a length, not a string. */
	buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);

	r = volume_record_parse(buf, size, &v, &err);
	if (r == 0) {
		if (!v || !volume_name_is_valid(v->name))
			fail("accepted record has no valid name", NULL, NULL);
		check_roundtrip(v, true);
		check_roundtrip(v, false);
		volume_unref(v);
	} else if (!err || v)
		fail("refused record without a message, or with a volume", err, NULL);
	free(err);
	free(buf);
	return 0;
}
