/* SPDX-License-Identifier: MIT */
/*
 * Reading a tar stream into a directory, for `volume import`: the stream is
 * untrusted (another host's, a file from anywhere) and is applied as root.
 *
 * Formats: ustar and pax (extended headers 'x'; global ones 'g' are parsed
 * and ignored), GNU long names ('L', 'K'), GNU sparse 1.0 in pax headers,
 * numbers in octal or GNU base-256. Entries: regular files, hard links,
 * symlinks, directories, FIFOs, and device nodes only when allowed.
 * Anything else (old GNU sparse, multi-volume, ...) is refused by type.
 *
 * Confinement: every name is checked (relative, no "..", no empty or "."
 * component but a leading "./", at most TAR_READ_PATH_MAX bytes) and every
 * directory on the way is opened one component at a time with openat2()
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV), so no name, hard link or symlink in the stream can reach
 * outside the directory or write through a symlink it made; a symlink's
 * target is stored as it is and never followed. Limits on entries, bytes,
 * header sizes and attributes end the read with an error that names them.
 * Owners, modes, nanosecond times, extended attributes (SCHILY.xattr.*, the
 * ACLs among them; trusted.* is left out: XFS's own copies of ACLs, overlayfs's
 * state) are applied; directories' last; other namespaces are refused. ACLs
 * an archive carries only as text (SCHILY.acl.*: GNU tar --acls, bsdtar) are
 * set from the text; names in it are this host's users and groups.
 *
 * On any error the directory is left half-filled: the caller discards it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TAR_READ_PATH_MAX 4095
#define TAR_READ_PAX_MAX (1u << 20)       /* an extended header, or a GNU long name */
#define TAR_READ_XATTRS_MAX 256            /* per entry */
#define TAR_READ_XATTR_VALUE_MAX 65536
#define TAR_READ_SPARSE_MAX 100000         /* data ranges of one sparse file */

typedef struct TarReadLimits {
	uint64_t max_entries;
	uint64_t max_bytes; /* of all files' data together (their sizes, holes included) */
	bool allow_devices;
} TarReadLimits;

typedef struct TarReadStats {
	uint64_t entries;
	uint64_t bytes;
} TarReadStats;

int tar_read_tree(int in, int root_fd, const TarReadLimits *limits, TarReadStats *ret_stats, char **reterr_msg);

/* The stream from a function instead of an fd (a decompressor): like read(2), -1 with errno on an error. */
typedef ssize_t (*TarReadFn)(void *userdata, void *buf, size_t len);
int tar_read_tree_from(TarReadFn fn, void *userdata, int root_fd, const TarReadLimits *limits, TarReadStats *ret_stats,
		       char **reterr_msg);

/* ---- the pure parts (fuzzed: tests/fuzz/fuzz-tar.c) ---- */

typedef struct TarHeader {
	char name[256 + 1]; /* prefix/name */
	char link[100 + 1];
	char type;
	mode_t mode;
	uint64_t uid, gid, size, rdev_major, rdev_minor;
	int64_t mtime;
	bool zero; /* an all-zero block: the end */
} TarHeader;

/* One 512-byte block: checksum, fields, numbers (octal or base-256). -EBADMSG with a reason. */
int tar_header_parse(const uint8_t block[512], TarHeader *ret, char **reterr_msg);

typedef struct TarXattr {
	char *name;
	void *value;
	size_t len;
} TarXattr;

/* What an extended header says (each field set only if given). */
typedef struct TarPax {
	char *path, *linkpath;
	bool has_mtime, has_atime, has_uid, has_gid, has_size;
	struct timespec mtime, atime;
	uint64_t uid, gid, size;
	TarXattr *xattrs;
	size_t n_xattrs;
	bool sparse;            /* GNU.sparse.major=1, minor=0 */
	char *sparse_name;
	bool has_realsize;
	uint64_t realsize;
	char *acl_access, *acl_default; /* SCHILY.acl.*: text (cli/acl-text.h) */
} TarPax;

void tar_pax_done(TarPax *p);
/* Parses the records of an extended header into @p (later records win). -EBADMSG with a reason. */
int tar_pax_parse(const char *buf, size_t len, TarPax *p, char **reterr_msg);
/* A name as an archive gives it, made relative and checked: "./a//b/" -> "a/b"; "" is the root. -EPERM if it leaves. */
int tar_path_normalize(const char *in, char *out, size_t len, char **reterr_msg);
