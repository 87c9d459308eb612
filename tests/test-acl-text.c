/* SPDX-License-Identifier: MIT */
/* POSIX ACL text <-> attribute value (src/cli/acl-text.c): the forms GNU tar and bsdtar write. */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/acl-text.h"

typedef struct Entry {
	uint16_t tag, perm;
	uint32_t id;
} Entry;

#define NOID UINT32_MAX

/* The expected attribute value, built by hand from the kernel's layout. */
static size_t expect(const Entry *e, size_t n, uint8_t *out)
{
	uint32_t v = htole32(2);

	memcpy(out, &v, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t t = htole16(e[i].tag), p = htole16(e[i].perm);
		uint32_t id = htole32(e[i].id);

		memcpy(out + 4 + 8 * i, &t, 2);
		memcpy(out + 6 + 8 * i, &p, 2);
		memcpy(out + 8 + 8 * i, &id, 4);
	}
	return 4 + 8 * n;
}

static int lookup(const char *name, bool group, uint32_t *ret_id)
{
	if (!group && strcmp(name, "alice") == 0)
		return *ret_id = 1000, 0;
	if (group && strcmp(name, "staff") == 0)
		return *ret_id = 50, 0;
	return -ENOENT;
}

static void check(const char *text, const Entry *e, size_t n)
{
	uint8_t want[256];
	size_t wlen = expect(e, n, want), len = 0;
	void *v = NULL;
	char *err = NULL;

	cr_assert_eq(acl_text_to_xattr(text, lookup, &v, &len, &err), 0, "%s: %s", text, err ? err : "");
	cr_assert_eq(len, wlen, "%s: %zu bytes, want %zu", text, len, wlen);
	cr_assert_eq(memcmp(v, want, len), 0, "%s: another attribute", text);
	free(v);
}

static const Entry file_acl[] = {
	{ 0x01, 6, NOID }, { 0x02, 4, 1000 }, { 0x04, 4, NOID }, { 0x08, 6, 2000 }, { 0x10, 6, NOID }, { 0x20, 4, NOID },
};

Test(acl_text, gnu_tars_lines_with_names_give_the_kernels_order)
{
	check("user::rw-\nuser:alice:r--\ngroup::r--\ngroup:2000:rw-\nmask::rw-\nother::r--\n", file_acl, 6);
}

Test(acl_text, bsdtars_commas_with_ids_in_the_fourth_field_and_any_order)
{
	/* bsdtar puts the named entries after the base ones; the name's ID is the fourth field. */
	check("user::rw-,group::r--,other::r--,user:nobody-here:r--:1000,group:2000:rw-,mask::rw-", file_acl, 6);
}

Test(acl_text, short_forms_comments_and_blanks)
{
	static const Entry e[] = { { 0x01, 7, NOID }, { 0x08, 5, 50 }, { 0x04, 0, NOID }, { 0x10, 5, NOID }, { 0x20, 1, NOID } };
	static const Entry sorted[] = { e[0], e[2], e[1], e[3], e[4] };

	check(" u::rwx # owner\n g:staff:r-x\t#effective:r-x\ng::---\nm:r-x\no::--x\n\n", sorted, 5);
}

Test(acl_text, the_binary_form_comes_back_as_text_that_parses_to_it)
{
	uint8_t val[256];
	size_t len = expect(file_acl, 6, val), len2 = 0;
	char *text = NULL;
	void *v2 = NULL;

	cr_assert_eq(acl_xattr_to_text(val, len, &text), 0);
	cr_assert_str_eq(text, "user::rw-\nuser:1000:r--\ngroup::r--\ngroup:2000:rw-\nmask::rw-\nother::r--");
	cr_assert_eq(acl_text_to_xattr(text, NULL, &v2, &len2, NULL), 0);
	cr_assert_eq(len2, len);
	cr_assert_eq(memcmp(v2, val, len), 0);
	free(text);
	free(v2);
}

Test(acl_text, an_empty_text_is_no_acl)
{
	void *v = (void *)1;
	size_t len = 99;

	cr_assert_eq(acl_text_to_xattr("\n # nothing\n", NULL, &v, &len, NULL), 0);
	cr_assert_eq(len, 0);
	cr_assert_null(v);
}

static void refused(const char *text, int want, const char *words)
{
	void *v = NULL;
	size_t len = 0;
	char *err = NULL;

	cr_assert_eq(acl_text_to_xattr(text, lookup, &v, &len, &err), want, "%s", text);
	cr_assert_null(v);
	cr_assert(err && strstr(err, words), "%s: %s", text, err ? err : "(no message)");
	free(err);
}

Test(acl_text, malformed_and_invalid_acls_are_refused_with_a_reason)
{
	refused("user::rw-,group::r--", -EINVAL, "exactly one entry each");
	refused("user::rw-,user::r--,group::r--,other::r--", -EINVAL, "exactly one entry each");
	refused("user::rw-,user:7:r--,group::r--,other::r--", -EINVAL, "needs a mask");
	refused("user::rw-,user:7:r--,user:7:rw-,group::r--,mask::rw-,other::r--", -EINVAL, "names user 7 twice");
	refused("user::rw-,group::r--,mask::r--,mask::rw-,other::r--", -EINVAL, "more than one mask");
	refused("user::rwz,group::r--,other::r--", -EINVAL, "invalid permissions");
	refused("user::rww,group::r--,other::r--", -EINVAL, "invalid permissions");
	refused("owner::rw-,group::r--,other::r--", -EINVAL, "not tag:qualifier:permissions");
	refused("user:rw-,group::r--,other::r--", -EINVAL, "not tag:qualifier:permissions");
	refused("mask:x:rw-,user::rw-,group::r--,other::r--", -EINVAL, "not tag:qualifier:permissions");
	refused("user:a:rw-:1:2,group::r--,other::r--", -EINVAL, "too many fields");
	refused("user:a:rw-:12x,group::r--,other::r--", -EINVAL, "invalid ID");
	refused("user:a:rw-:4294967295,group::r--,other::r--", -EINVAL, "invalid ID");
	refused("user::rw-,user:bob:r--,group::r--,mask::r--,other::r--", -ENOENT, "does not know");
	/* The entry is shown escaped: an archive's bytes never reach the terminal as they are. */
	refused("user:\x1b[2J:rwq,group::r--,other::r--", -EINVAL, "\\x1b");
}

Test(acl_text, more_entries_than_the_cap_are_refused)
{
	size_t n = ACL_TEXT_ENTRIES_MAX + 1;
	char *text = malloc(n * 24 + 64), *w = text;
	void *v = NULL;
	size_t len = 0;
	char *err = NULL;

	w += sprintf(w, "user::rw-,group::r--,other::r--,mask::rw-");
	for (size_t i = 0; i < n; i++)
		w += sprintf(w, ",user:%zu:r--", i);
	cr_assert_eq(acl_text_to_xattr(text, NULL, &v, &len, &err), -E2BIG);
	cr_assert(err && strstr(err, "more than"), "%s", err ? err : "");
	free(err);
	free(text);
}

Test(acl_text, a_value_that_is_not_an_acl_is_refused)
{
	static const uint8_t bad_version[12] = { 1, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t bad_len[7] = { 2, 0, 0, 0, 1, 0, 6 };
	static const uint8_t bad_tag[12] = { 2, 0, 0, 0, 0x40, 0, 6, 0, 0xff, 0xff, 0xff, 0xff };
	char *text = NULL;

	cr_assert_eq(acl_xattr_to_text(bad_version, sizeof(bad_version), &text), -EINVAL);
	cr_assert_eq(acl_xattr_to_text(bad_len, sizeof(bad_len), &text), -EINVAL);
	cr_assert_eq(acl_xattr_to_text(bad_tag, sizeof(bad_tag), &text), -EINVAL);
	cr_assert_null(text);
}
