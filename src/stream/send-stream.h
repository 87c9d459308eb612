/* SPDX-License-Identifier: MIT */
/*
 * The stream of `nvmevol volume send` and `receive`: its format, the writer
 * and the reader (framing, checksums, limits). The stream is another host's
 * and is applied as root: the reader checks everything before a record
 * reaches recv-tree.c, and its pure part is fuzzed (tests/fuzz/fuzz-send.c).
 *
 * Format (every number little-endian):
 *   "NVMESEND" (8 bytes), u32 version (SEND_STREAM_VERSION)
 *   records: u32 type, u32 length, payload[length], u32 CRC32C of the type,
 *            length and payload bytes
 *   the first record is HEADER (JSON: volume, snapshot and its ID, the base
 *   snapshot's ID for an incremental, the volume's options); the last is END:
 *   u64 records before it, u64 bytes before it, u32 CRC32C of every byte
 *   before it (the whole stream). Nothing may follow END.
 * Payloads: a path is u16 length + bytes (relative, checked: no "..", ".",
 * empty component, leading or trailing "/", NUL; "" is the root, only for
 * SETATTR); see SendRecord for each type's fields.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SEND_STREAM_MAGIC "NVMESEND"
#define SEND_STREAM_VERSION 1u
#define SEND_PATH_MAX 4095
#define SEND_HEADER_MAX (64u * 1024)          /* the JSON header */
#define SEND_WRITE_MAX (1u << 20)             /* data of one WRITE record */
#define SEND_WRITER_BATCH (256u << 10)        /* records are written out in batches of this many bytes */
#define SEND_RECORD_MAX (SEND_WRITE_MAX + 2 * SEND_PATH_MAX + 128 * 1024)
#define SEND_XATTRS_MAX 256                   /* attributes of one inode */
#define SEND_XATTR_VALUE_MAX 65536
#define SEND_FILE_SIZE_MAX (1ull << 44)       /* 16 TiB: an offset or size past it is refused */

typedef enum SendRecordType {
	SEND_HEADER = 1,
	SEND_MKDIR,    /* path, mode */
	SEND_CREATE,   /* path, mode: an empty regular file (what was there goes first: UNLINK) */
	SEND_WRITE,    /* path, offset, data */
	SEND_HOLE,     /* path, offset, length: reads as zeros, deallocated */
	SEND_TRUNCATE, /* path, size */
	SEND_SYMLINK,  /* path, target (stored as given, never followed) */
	SEND_LINK,     /* path, target path: a hard link to an existing non-directory */
	SEND_RENAME,   /* path, target path (the new name; nothing may be there) */
	SEND_UNLINK,   /* path: a non-directory */
	SEND_RMDIR,    /* path: a directory and everything in it */
	SEND_SETATTR,  /* path, uid, gid, mode, atime, mtime, xattrs (exactly these) */
	SEND_MKNOD,    /* path, mode (with the type: FIFO, socket, character or block device), rdev */
	SEND_END,
	_SEND_RECORD_MAX,
} SendRecordType;

const char *send_record_type_name(uint32_t type);

typedef struct SendRecord {
	uint32_t type;
	char path[SEND_PATH_MAX + 1];
	char target[SEND_PATH_MAX + 1]; /* SYMLINK, LINK, RENAME */
	uint32_t mode, uid, gid;
	uint64_t offset, length, rdev; /* length: HOLE's, TRUNCATE's size */
	struct timespec atime, mtime;
	const uint8_t *data; /* WRITE: points into the payload; length = its size */
	/* SETATTR: the attributes in xattr-util's blob format (host order), malloc'd; NULL when none. */
	void *xattrs;
	size_t xattrs_len;
	/* HEADER: the JSON text, NUL-terminated, pointing into the payload. END: the counts. */
	const char *json;
	uint64_t end_records, end_bytes;
	uint32_t end_crc;
} SendRecord;

void send_record_done(SendRecord *r);

/* A path of a record checked (see above). @root_ok: "" is allowed. -EPERM/-ENAMETOOLONG/-EBADMSG with a reason. */
int send_path_check(const char *p, size_t len, bool root_ok, char **reterr_msg);

/* Parses one record's payload (the framing's CRC already checked). -EBADMSG with a reason. Pure (fuzzed). */
int send_record_parse(uint32_t type, const uint8_t *payload, size_t len, SendRecord *ret, char **reterr_msg);

/* ---- writing ---- */

typedef struct SendWriter {
	int fd;
	uint32_t crc;     /* of every byte written so far */
	uint64_t bytes;   /* written so far */
	uint64_t records;
	volatile sig_atomic_t *stop;
	uint8_t *buf;     /* whole records not written yet, then the one being built (from start) */
	size_t len, cap, start;
} SendWriter;

int send_writer_init(SendWriter *w, int fd, volatile sig_atomic_t *stop);
/* Writes out the whole records still waiting (send_put_end() wrote them already), frees the buffer. */
void send_writer_done(SendWriter *w);

/*
 * Each adds one record; -errno (-EINTR when *stop was set, -EPIPE when the reader went). Records go
 * out in batches of SEND_WRITER_BATCH bytes, and all of them with the end record.
 */
int send_put_header(SendWriter *w, const char *json);
int send_put_path(SendWriter *w, uint32_t type, const char *path, uint32_t mode);          /* MKDIR, CREATE, UNLINK, RMDIR */
int send_put_two(SendWriter *w, uint32_t type, const char *path, const char *target);     /* SYMLINK, LINK, RENAME */
int send_put_write(SendWriter *w, const char *path, uint64_t offset, const void *data, size_t len);
int send_put_range(SendWriter *w, uint32_t type, const char *path, uint64_t offset, uint64_t length); /* HOLE, TRUNCATE (offset = size) */
int send_put_setattr(SendWriter *w, const char *path, const struct stat *st, const void *xattr_blob, size_t xattr_len);
int send_put_mknod(SendWriter *w, const char *path, uint32_t mode, uint64_t rdev);
int send_put_end(SendWriter *w);

/* ---- reading ---- */

typedef int (*SendReadFn)(void *userdata, void *buf, size_t len); /* bytes read (0 at the end) or -errno */

typedef struct SendReader {
	SendReadFn read;
	void *userdata;
	uint32_t crc;
	uint64_t bytes, records;
	bool header_seen, ended;
	uint8_t *buf;
	size_t cap;
} SendReader;

/* Reads the magic and version. -EBADMSG (not a send stream), -EPROTONOSUPPORT (another version). */
int send_reader_init(SendReader *r, SendReadFn fn, void *userdata, char **reterr_msg);
void send_reader_done(SendReader *r);
/* The next record, checked (CRC, order, fields); END is checked against the whole stream, then 0 at the end. */
int send_reader_next(SendReader *r, SendRecord *ret, char **reterr_msg);
/* A SendReadFn for a file descriptor (@userdata: a pointer to the int fd). */
int send_read_fd(void *userdata, void *buf, size_t len);
/* A SendReadFn for bytes in memory (@userdata: a SendMem, read from pos on): the tests and the fuzz target. */
typedef struct SendMem {
	const uint8_t *p;
	size_t len, pos;
} SendMem;
int send_read_mem(void *userdata, void *buf, size_t len);
