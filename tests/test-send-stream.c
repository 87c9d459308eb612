/* SPDX-License-Identifier: MIT */
/*
 * The send stream's pure parts (src/stream/send-stream.c): every record type
 * written and read back field for field; the path rules; the framing's
 * refusals (another magic or version, a flipped bit in any byte, a cut at
 * any byte, a record missing before the end, bytes after it, a second
 * header, a record before the header), each with its reason; and snapshot
 * IDs in records (src/volume/snapshot.c).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream/send-stream.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "volume/snapshot.h"

/* A stream of one record of each type, in memory (*ret_len bytes, malloc'd). */
static uint8_t *every_record(size_t *ret_len)
{
	int fd = memfd_create("stream", 0);
	struct stat st = { .st_uid = 1234, .st_gid = 5678, .st_mode = S_IFREG | 04750 };
	/* xattr-util's blob: u32 name length, name, u32 value length, value. */
	uint8_t blob[4 + 6 + 4 + 3] = { 6, 0, 0, 0, 'u', 's', 'e', 'r', '.', 'k', 3, 0, 0, 0, 'v', 0, 0xff };
	SendWriter w;
	uint8_t *buf;
	off_t len;

	st.st_atim = (struct timespec){ 1500000000, 1 };
	st.st_mtim = (struct timespec){ 1600000000, 999999999 };
	cr_assert_geq(fd, 0);
	cr_assert_eq(send_writer_init(&w, fd, NULL), 0);
	cr_assert_eq(send_put_header(&w, "{\"format\":\"nvmevol-send\"}"), 0);
	cr_assert_eq(send_put_path(&w, SEND_MKDIR, "d", 0755), 0);
	cr_assert_eq(send_put_path(&w, SEND_CREATE, "d/f", 0644), 0);
	cr_assert_eq(send_put_write(&w, "d/f", 1 << 20, "data", 4), 0);
	cr_assert_eq(send_put_range(&w, SEND_HOLE, "d/f", 4096, 8192), 0);
	cr_assert_eq(send_put_range(&w, SEND_TRUNCATE, "d/f", 3 << 20, 0), 0);
	cr_assert_eq(send_put_two(&w, SEND_SYMLINK, "s", "../anything/at all"), 0);
	cr_assert_eq(send_put_two(&w, SEND_LINK, "d/g", "d/f"), 0);
	cr_assert_eq(send_put_two(&w, SEND_RENAME, "d/g", "h"), 0);
	cr_assert_eq(send_put_path(&w, SEND_UNLINK, "h", 0), 0);
	cr_assert_eq(send_put_path(&w, SEND_RMDIR, "d", 0), 0);
	cr_assert_eq(send_put_setattr(&w, "", &st, blob, sizeof(blob)), 0);
	cr_assert_eq(send_put_mknod(&w, "null", S_IFCHR | 0666, 0x103), 0);
	cr_assert_eq(send_put_end(&w), 0);
	send_writer_done(&w);
	len = lseek(fd, 0, SEEK_END);
	buf = malloc((size_t)len);
	cr_assert_eq(pread(fd, buf, (size_t)len, 0), len);
	close(fd);
	*ret_len = (size_t)len;
	return buf;
}

/* Reads @buf to its end: 0, or the first error (its text in @why). */
static int read_all(const uint8_t *buf, size_t len, SendRecord *recs, size_t max, size_t *ret_n, char **why)
{
	SendMem m = { .p = buf, .len = len };
	SendReader rd;
	size_t n = 0;
	int r;

	r = send_reader_init(&rd, send_read_mem, &m, why);
	while (r == 0) {
		SendRecord rec;

		r = send_reader_next(&rd, &rec, why);
		if (r <= 0)
			break;
		if (recs && n < max)
			recs[n] = rec;
		else
			send_record_done(&rec);
		n++;
		r = 0;
	}
	send_reader_done(&rd);
	if (ret_n)
		*ret_n = n;
	return r;
}

Test(send_stream, every_record_type_reads_back_as_written)
{
	size_t len, n;
	uint8_t *buf = every_record(&len);
	static SendRecord r[32];
	char *why = NULL;

	cr_assert_eq(read_all(buf, len, r, 32, &n, &why), 0, "%s", why);
	cr_assert_eq(n, 14);
	cr_assert_eq(r[0].type, SEND_HEADER);
	cr_assert_eq(r[1].type, SEND_MKDIR);
	cr_assert_str_eq(r[1].path, "d");
	cr_assert_eq(r[1].mode, 0755);
	cr_assert_eq(r[3].type, SEND_WRITE);
	cr_assert_eq(r[3].offset, 1 << 20);
	cr_assert_eq(r[3].length, 4);
	cr_assert_eq(r[4].type, SEND_HOLE);
	cr_assert_eq(r[4].offset, 4096);
	cr_assert_eq(r[4].length, 8192);
	cr_assert_eq(r[5].offset, 3 << 20);
	cr_assert_str_eq(r[6].target, "../anything/at all", "a symlink's target is stored as given");
	cr_assert_str_eq(r[8].path, "d/g");
	cr_assert_str_eq(r[8].target, "h");
	cr_assert_eq(r[11].type, SEND_SETATTR);
	cr_assert_str_eq(r[11].path, "");
	cr_assert_eq(r[11].uid, 1234);
	cr_assert_eq(r[11].gid, 5678);
	cr_assert_eq(r[11].mode, 04750);
	cr_assert_eq(r[11].mtime.tv_nsec, 999999999);
	cr_assert_eq(r[11].atime.tv_sec, 1500000000);
	cr_assert_eq(r[11].xattrs_len, 17);
	cr_assert_eq(memcmp(r[11].xattrs, "\x06\0\0\0user.k\x03\0\0\0v\0\xff", 17), 0);
	cr_assert_eq(r[12].mode, S_IFCHR | 0666);
	cr_assert_eq(r[12].rdev, 0x103);
	cr_assert_eq(r[13].type, SEND_END);
	for (size_t i = 0; i < n; i++)
		send_record_done(&r[i]);
	free(buf);
}

Test(send_stream, every_flipped_bit_and_every_cut_is_refused)
{
	size_t len;
	uint8_t *buf = every_record(&len);

	for (size_t i = 0; i < len; i++) {
		char *why = NULL;

		buf[i] ^= 0x10;
		cr_assert_lt(read_all(buf, len, NULL, 0, NULL, &why), 0, "a flip at byte %zu went through", i);
		cr_assert_not_null(why);
		free(why);
		buf[i] ^= 0x10;
		why = NULL;
		cr_assert_lt(read_all(buf, i, NULL, 0, NULL, &why), 0, "a cut at byte %zu went through", i);
		cr_assert(strstr(why, "cut short") || strstr(why, "not a stream"), "at %zu: %s", i, why);
		free(why);
	}
	free(buf);
}

static void expect_refused(const uint8_t *buf, size_t len, const char *reason)
{
	char *why = NULL;

	cr_assert_lt(read_all(buf, len, NULL, 0, NULL, &why), 0, "went through: expected %s", reason);
	cr_assert(why && strstr(why, reason), "expected '%s', got '%s'", reason, why);
	free(why);
}

Test(send_stream, the_framing_refuses_what_is_not_one_whole_stream)
{
	size_t len;
	uint8_t *buf = every_record(&len), *more = malloc(len + 1);

	memcpy(more, buf, len);
	more[len] = 0;
	expect_refused(more, len + 1, "bytes follow");
	memcpy(more, "NVMESENX", 8);
	expect_refused(more, len, "not a stream of 'nvmevol volume send'");
	memcpy(more, buf, len);
	more[8] = 2;
	expect_refused(more, len, "format version 2");
	free(more);
	free(buf);
}

Test(send_stream, paths_are_relative_and_stay_inside)
{
	static const char *const bad[] = { "/etc/passwd", "..", "a/../..", "a//b", "a/", "./a", "a/./b", "" };
	char *why = NULL;
	char long_name[300];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_lt(send_path_check(bad[i], strlen(bad[i]), false, &why), 0, "'%s' was taken", bad[i]);
		free(why);
		why = NULL;
	}
	cr_assert_eq(send_path_check("", 0, true, NULL), 0, "the root, where it may be named");
	cr_assert_eq(send_path_check("a/b c/...", 9, false, NULL), 0);
	cr_assert_lt(send_path_check("a\0b", 3, false, NULL), 0, "a NUL inside a name");
	memset(long_name, 'x', sizeof(long_name));
	cr_assert_eq(send_path_check(long_name, 255, false, NULL), 0);
	cr_assert_lt(send_path_check(long_name, 256, false, &why), 0);
	cr_assert(strstr(why, "longer than 255"), "%s", why);
	free(why);
}

Test(send_stream, record_fields_past_their_limits_are_refused)
{
	/* TRUNCATE "f" to 2^60: u16 1, "f", u64 size, u64 0. */
	uint8_t trunc[2 + 1 + 16] = { 1, 0, 'f', 0, 0, 0, 0, 0, 0, 0, 0x10 };
	uint8_t mode[2 + 1 + 4] = { 1, 0, 'f', 0, 0x10, 0, 0 }; /* MKDIR with S_IFCHR bits */
	SendRecord r;
	char *why = NULL;

	cr_assert_eq(send_record_parse(SEND_TRUNCATE, trunc, sizeof(trunc), &r, &why), -EFBIG);
	cr_assert(strstr(why, "16 TiB"), "%s", why);
	free(why);
	why = NULL;
	cr_assert_eq(send_record_parse(SEND_MKDIR, mode, sizeof(mode), &r, &why), -EBADMSG);
	free(why);
	why = NULL;
	cr_assert_eq(send_record_parse(99, mode, sizeof(mode), &r, &why), -EBADMSG);
	cr_assert(strstr(why, "unknown type 99"), "%s", why);
	free(why);
	why = NULL;
	cr_assert_eq(send_record_parse(SEND_MKDIR, mode, sizeof(mode) - 1, &r, &why), -EBADMSG);
	cr_assert(strstr(why, "shorter than its fields"), "%s", why);
	free(why);
}

Test(send_stream, a_snapshot_record_keeps_its_id_and_one_without_is_an_older_ones)
{
	VolumeSnapshot s = { .name = "s1", .state = SNAPSHOT_COMMITTED, .id = "0123456789abcdef0123456789abcdef" };
	VolumeSnapshot back;
	char *rec = snapshot_record_dump("vol", &s), *old;

	cr_assert_not_null(rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", &back, NULL), 0);
	cr_assert_str_eq(back.id, s.id);
	s.id[0] = '\0';
	old = snapshot_record_dump("vol", &s);
	cr_assert_eq(snapshot_record_parse(old, strlen(old), "vol", &back, NULL), 0);
	cr_assert_str_eq(back.id, "");
	cr_assert(!snapshot_id_is_valid("0123456789ABCDEF0123456789abcdef"));
	cr_assert(!snapshot_id_is_valid("0123"));
	free(rec);
	free(old);
}

/* @rec with @field ("key":value,) put before "bytes", its CRC recomputed: only the field can be wrong. */
static char *with_field(const char *rec, const char *field)
{
	const char *at = strstr(rec, "\"bytes\"");
	char *bad, *crc;

	cr_assert_not_null(at);
	cr_assert(asprintf(&bad, "%.*s%s%s", (int)(at - rec), rec, field, at) > 0);
	crc = strstr(bad, ",\"crc\"");
	cr_assert_not_null(crc);
	strcpy(crc, "}");
	crc = crc_trailer_append(bad);
	free(bad);
	return crc;
}

Test(send_stream, a_snapshot_record_keeps_by_move_and_refuses_a_false_or_odd_one)
{
	VolumeSnapshot s = { .name = "s1", .state = SNAPSHOT_COMMITTED, .id = "0123456789abcdef0123456789abcdef",
			     .by_move = true };
	VolumeSnapshot back;
	char *rec = snapshot_record_dump("vol", &s), *bad;
	_cleanup_free_ char *why = NULL;

	cr_assert_not_null(rec);
	cr_assert(strstr(rec, "\"by_move\":true"), "%s", rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", &back, NULL), 0);
	cr_assert(back.by_move);
	/* A user's snapshot has no by_move at all, so an older nvmevol reads it. */
	s.by_move = false;
	free(rec);
	rec = snapshot_record_dump("vol", &s);
	cr_assert(!strstr(rec, "by_move"), "%s", rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", &back, NULL), 0);
	cr_assert(!back.by_move);
	/* "by_move": false is not a form nvmevol writes: damaged (the CRC is recomputed, so only the field is wrong). */
	bad = with_field(rec, "\"by_move\":false,");
	cr_assert_eq(snapshot_record_parse(bad, strlen(bad), "vol", &back, &why), -EUCLEAN);
	cr_assert(strstr(why, "not a snapshot record"), "%s", why);
	free(bad);
	free(rec);
}

/* An evacuation's snapshot says so in its record; another's record has no such field. */
Test(send_stream, an_evacuation_snapshot_is_marked_in_its_record)
{
	VolumeSnapshot s = { .name = "evacuate-1", .state = SNAPSHOT_COMMITTED, .evacuation = true,
			     .id = "0123456789abcdef0123456789abcdef" };
	VolumeSnapshot back;
	char *rec = snapshot_record_dump("vol", &s);

	cr_assert_not_null(rec);
	cr_assert(strstr(rec, "\"evacuation\":true"), "%s", rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", &back, NULL), 0);
	cr_assert(back.evacuation);
	s.evacuation = false;
	free(rec);
	rec = snapshot_record_dump("vol", &s);
	cr_assert(!strstr(rec, "evacuation"), "%s", rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", &back, NULL), 0);
	cr_assert(!back.evacuation);
	free(rec);
}

/* @s's record, which holds @field (or, @has false, nothing with that name), parsed back into *@back. */
static char *dump_and_parse(const VolumeSnapshot *s, const char *field, bool has, VolumeSnapshot *back)
{
	char *rec = snapshot_record_dump("vol", s);
	char name[64];

	cr_assert_not_null(rec);
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(field, ":"), field);
	cr_assert(has ? strstr(rec, field) != NULL : strstr(rec, name) == NULL, "%s", rec);
	cr_assert_eq(snapshot_record_parse(rec, strlen(rec), "vol", back, NULL), 0);
	return rec;
}

/* A receive's snapshot carries its mark (the received tree's root inode) until its commit settles it; a 0 is refused. */
Test(send_stream, a_receive_snapshot_keeps_its_mark_in_its_record_until_it_is_cleared)
{
	VolumeSnapshot s = { .name = "r2", .state = SNAPSHOT_COMMITTED, .receive_root = 1234567,
			     .id = "0123456789abcdef0123456789abcdef" };
	VolumeSnapshot back;
	_cleanup_free_ char *why = NULL;
	char *rec, *bad;

	rec = dump_and_parse(&s, "\"receive_root\":1234567", true, &back);
	cr_assert_eq(back.receive_root, 1234567);
	free(rec);
	/* Cleared: no field at all, as every other snapshot's record. */
	s.receive_root = 0;
	rec = dump_and_parse(&s, "\"receive_root\":", false, &back);
	cr_assert_eq(back.receive_root, 0);
	bad = with_field(rec, "\"receive_root\":0,");
	cr_assert_eq(snapshot_record_parse(bad, strlen(bad), "vol", &back, &why), -EUCLEAN);
	cr_assert(strstr(why, "receive_root"), "%s", why);
	free(bad);
	free(rec);
}
