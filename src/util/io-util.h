/* SPDX-License-Identifier: MIT */
/* Whole-buffer reads and writes (retrying short transfers and EINTR). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* write() at the file's offset (state files: the reliability suites trace write). */
int write_all(int fd, const void *buf, size_t len);
int pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* -ENODATA if the file ends before @len bytes. */
int pread_all(int fd, void *buf, size_t len, uint64_t off);
