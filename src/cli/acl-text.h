/* SPDX-License-Identifier: MIT */
/*
 * POSIX ACLs between the kernel's binary form (the system.posix_acl_access and
 * system.posix_acl_default attributes: a version-2 header, then 8-byte entries
 * of tag, permissions, ID) and the text archives carry them as
 * (SCHILY.acl.access, SCHILY.acl.default).
 *
 * GNU tar --acls writes only the text, one entry a line, with user and group
 * names unless --numeric-owner; bsdtar writes the entries comma-separated,
 * each named entry with its numeric ID as a fourth field. An import that met
 * only the text and ignored it would drop the archive's ACLs in silence.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries of one ACL: far above what XFS stores (about 25,000 in a 64 KiB attribute). */
#define ACL_TEXT_ENTRIES_MAX 8192

/*
 * Looks up a user (@group false) or group name for a text entry that names
 * one without its ID; 0 and *ret_id when found, -ENOENT when not.
 */
typedef int (*AclNameLookup)(const char *name, bool group, uint32_t *ret_id);

/* The binary ACL as text, one entry a line with numeric IDs (what GNU tar --numeric-owner writes). */
int acl_xattr_to_text(const void *value, size_t len, char **ret_text);

/*
 * The text as the binary attribute value, entries in the order the kernel
 * wants (by tag, named ones by ID), checked as the kernel checks them (one
 * owner, owning group and other entry each, a mask when there are named
 * entries, no ID twice). @lookup may be NULL: then a name without an ID is
 * refused. A text without entries gives *ret_len 0 (no ACL). -EINVAL/-ENOENT/
 * -E2BIG with a reason in *reterr_msg.
 */
int acl_text_to_xattr(const char *text, AclNameLookup lookup, void **ret_value, size_t *ret_len,
		      char **reterr_msg);

/* An attribute value of this length holds only the owner, owning group and other entries: what the mode says. */
#define ACL_XATTR_MODE_ONLY_LEN (4 + 3 * 8)
