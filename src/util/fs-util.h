/* SPDX-License-Identifier: MIT */
/* fd-relative file helpers: atomic writes, capped reads, safe recursive delete. */
#pragma once

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A DIR stream over a duplicate of @dirfd, rewound: @dirfd stays open and
 * usable. NULL with errno set on failure. closedir() the result.
 */
DIR *opendir_fd(int dirfd);

/*
 * Calls @cb with each name in @dirfd but "." and "..", from the top (through
 * opendir_fd()). Stops at the first negative return of @cb and returns it; a
 * failing readdir() returns its error, never a shorter listing.
 */
int dir_foreach_name(int dirfd, int (*cb)(const char *name, void *userdata), void *userdata);
/* The same with each entry's inode number as the directory holds it (d_ino). */
int dir_foreach_entry(int dirfd, int (*cb)(const char *name, uint64_t ino, void *userdata), void *userdata);

/*
 * The names in @dirfd (dir_foreach_name()), strdup'ed into *ret_names, *ret_n
 * of them, sorted by strcmp() when @sorted; free with names_free(). A walk's
 * memory bound: each name adds its length + 1 + a pointer to *mem, and past
 * @mem_max the read stops with -ENOBUFS. On error nothing is returned.
 */
int dir_read_names(int dirfd, bool sorted, uint64_t *mem, uint64_t mem_max, char ***ret_names, size_t *ret_n);
void names_free(char **names, size_t n);

/* Temp files written by write_file_atomic_at() start with '.' and contain ".tmp.". */
bool is_atomic_tmp_name(const char *name);

/*
 * Durably replaces @name in @dirfd with @buf: temp file (O_EXCL|O_NOFOLLOW), write,
 * fsync, close, renameat, fsync of the directory. The rename happens only if every
 * step before it succeeded; a failed fsync is never retried.
 */
int write_file_atomic_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode);
/* The same without the fsyncs: readers never see half a file, but a crash may keep the old one (reports, not state). */
int write_file_replace_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode);

/*
 * The two halves of those, for a writer that streams: replace_tmp_open_at()
 * creates the temp file (O_EXCL|O_NOFOLLOW) and returns its fd; the caller
 * writes (and, for @durable, fsyncs) and closes it, then
 * replace_tmp_finish_at() renames it over @name if @r (the caller's result) is
 * >= 0, or removes it. With @durable the directory is fsynced after the rename.
 */
#define REPLACE_TMP_NAME_MAX 320
int replace_tmp_open_at(int dirfd, const char *name, mode_t mode, char ret_tmp[static REPLACE_TMP_NAME_MAX]);
int replace_tmp_finish_at(int dirfd, const char *tmp, const char *name, int r, bool durable);

/* Reads a regular file (never through a symlink), at most @max bytes, NUL-terminated. */
int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len);

/* unlinkat() followed by an fsync of the directory; -ENOENT is success. */
int unlink_durable_at(int dirfd, const char *name);

/* mkdirat() that accepts an existing real directory (never a symlink): 1 if it made one, 0 if it was there. */
int mkdirat_exist_ok(int dirfd, const char *name, mode_t mode);

/* mkdir -p of the absolute @path (parents 0755, the last one @mode), then opens it O_DIRECTORY|O_NOFOLLOW. */
int mkdir_p_open(const char *path, mode_t mode, int *ret_fd);

/*
 * Removes everything inside the directory @dirfd, at any depth, with at most
 * 17 fds open at once. No symlink is followed and no mount boundary is
 * crossed (another device or mount ID: also a bind mount of the same
 * filesystem); a mount point found inside makes it fail with -EXDEV and leaves
 * that subtree alone, everything else is removed. A directory moved out of the
 * tree while the walk is below it stops the walk with -ESTALE. Memory: the
 * current path's names plus 16 bytes per level of depth.
 */
int rm_rf_children(int dirfd);

/* rm_rf_children() of @name, then the directory itself. -ENOENT is success. */
int rm_rf_at(int dirfd, const char *name);

/* What rm_rf_at_gated() calls around each step (one entry read and unlinked, or a directory removed). */
typedef struct RmRfGate {
	void (*enter)(void);
	void (*leave)(void);
} RmRfGate;

/* rm_rf_at() with @gate (NULL: none) around each of its writes, so that another thread can hold them off. */
int rm_rf_at_gated(int dirfd, const char *name, const RmRfGate *gate);

/* Removes leftover atomic-write temp files in @dirfd. Returns how many. */
int remove_atomic_tmp_files(int dirfd);
