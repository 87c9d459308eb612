/* SPDX-License-Identifier: MIT */
/* Small trees for the tests that copy volumes (clone, evacuate): failed assertions on any error. */
#pragma once

/* Writes @data to @dir/@rel (created or truncated, mode 0640). */
void tree_put(const char *dir, const char *rel, const char *data);
/* A small tree: nested directories, a hard link, a symlink, a FIFO, an attribute, an owner, a 200 MiB hole. */
void tree_fill_sample(const char *dir);
