/* SPDX-License-Identifier: MIT */
/* Small trees for the tests that copy volumes (clone, evacuate): failed assertions on any error. */
#pragma once

/* Writes @data to @dir/@rel (created or truncated, mode 0640). */
void tree_put(const char *dir, const char *rel, const char *data);
/* Writes @len bytes of @data to @dir/@rel (created or truncated, mode 0640) and fsyncs it. */
void tree_put_bytes(const char *dir, const char *rel, const void *data, size_t len);
/* A small tree: nested directories, a hard link, a symlink, a FIFO, an attribute, an owner, a 200 MiB hole. */
void tree_fill_sample(const char *dir);
