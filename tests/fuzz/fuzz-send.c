/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the stream decoder of `nvmevol volume receive` (src/stream/send-stream.c)
 * and its application (src/stream/recv-tree.c): the stream is another host's,
 * applied as root.
 *
 * Input: a send stream. Its framing is read from memory, its header checked,
 * and its records applied to a fresh directory inside a sandbox directory,
 * which is then emptied; and the bytes after the first one go through
 * send_record_parse() as a payload of the type the first byte names. So that
 * mutations reach the records' application past the checksums, an input whose
 * first byte is '#' is framed here instead: after a fixed header, each
 * (u8 type, u16 length, payload) of the rest becomes a record with its CRC,
 * and an end record with the right counts closes it.
 *
 * Properties checked beyond "no crash": nothing appears in the sandbox beside
 * the receive's own directory (no name, link, symlink or rename of the stream
 * reaches out); a parsed path is relative, has no empty, "." or ".."
 * component and fits SEND_PATH_MAX; a parsed write fits SEND_WRITE_MAX.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream/recv-tree.h"
#include "stream/send-stream.h"
#include "fuzz-sandbox.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/strutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_sandbox_init("fuzz-send");
	return 0;
}

static void check_parse(const uint8_t *data, size_t size)
{
	SendRecord rec;
	char *err = NULL;

	if (size < 1)
		return;
	if (send_record_parse(data[0] % (_SEND_RECORD_MAX + 1), data + 1, size - 1, &rec, &err) == 0) {
		fuzz_check_relative_path(rec.path, SEND_PATH_MAX);
		if (rec.type == SEND_LINK || rec.type == SEND_RENAME)
			fuzz_check_relative_path(rec.target, SEND_PATH_MAX);
		if (rec.type == SEND_WRITE && rec.length > SEND_WRITE_MAX)
			fuzz_fail("a parsed write is larger than SEND_WRITE_MAX", rec.path);
		send_record_done(&rec);
	}
	free(err);
}

typedef struct Buf {
	uint8_t *p;
	size_t len;
	uint32_t crc;
	uint64_t records;
} Buf;

static void put_le(Buf *b, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

/* One record (type, payload) with its CRC, counted into the whole stream's. */
static void put_record(Buf *b, uint32_t type, const uint8_t *payload, size_t len)
{
	size_t start = b->len;

	put_le(b, type, 4);
	put_le(b, len, 4);
	memcpy(b->p + b->len, payload, len);
	b->len += len;
	put_le(b, crc32c(0, b->p + start, b->len - start), 4);
	b->crc = crc32c(b->crc, b->p + start, b->len - start);
	b->records++;
}

/* The '#' mode: a well-framed stream of the records the input describes (malloc'd, *ret_len bytes). */
static uint8_t *frame(const uint8_t *data, size_t size, size_t *ret_len)
{
	static const char header[] = "{\"format\":\"nvmevol-send\",\"version\":1,\"snapshot\":\"s\","
				     "\"snapshot_id\":\"0123456789abcdef0123456789abcdef\",\"options\":{}}";
	Buf b = { .p = malloc(64 + sizeof(header) + 4 * size + 64) }; /* a record of 3 input bytes is 12 */
	uint8_t end[20];
	uint64_t bytes;

	if (!b.p)
		abort();
	memcpy(b.p, SEND_STREAM_MAGIC, 8);
	b.len = 8;
	put_le(&b, SEND_STREAM_VERSION, 4);
	b.crc = crc32c(0, b.p, 12);
	put_record(&b, SEND_HEADER, (const uint8_t *)header, sizeof(header));
	for (size_t i = 1; i + 3 <= size;) {
		uint32_t type = data[i] % _SEND_RECORD_MAX;
		size_t len = (size_t)data[i + 1] | (size_t)data[i + 2] << 8;

		i += 3;
		if (len > size - i)
			len = size - i;
		if (type != SEND_END && type != SEND_HEADER)
			put_record(&b, type, data + i, len);
		i += len;
	}
	bytes = b.len;
	for (size_t i = 0; i < 8; i++) {
		end[i] = (uint8_t)(b.records >> (8 * i));
		end[8 + i] = (uint8_t)(bytes >> (8 * i));
	}
	for (size_t i = 0; i < 4; i++)
		end[16 + i] = (uint8_t)(b.crc >> (8 * i));
	put_record(&b, SEND_END, end, sizeof(end));
	*ret_len = b.len;
	return b.p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *framed = NULL;
	RecvLimits lim = { .max_bytes = 64 << 20, .max_records = 10000, .allow_devices = false };
	SendMem m = { .p = data, .len = size };
	SendReader rd;
	SendRecord rec = { 0 };
	RecvStats st;
	char *err = NULL;
	int root, r;

	fuzz_sandbox_init("fuzz-send");
	if (size > (4u << 20))
		return 0;
	check_parse(data, size);
	if (size > 0 && data[0] == '#') {
		framed = frame(data, size, &m.len);
		m.p = framed;
	}

	root = fuzz_sandbox_enter();
	r = send_reader_init(&rd, send_read_mem, &m, &err);
	if (r == 0 && send_reader_next(&rd, &rec, &err) == 1 && rec.type == SEND_HEADER)
		(void)recv_tree(&rd, root, &lim, &st, &err);
	send_record_done(&rec);
	send_reader_done(&rd);
	free(err);
	fuzz_sandbox_leave(root);
	free(framed);
	return 0;
}
