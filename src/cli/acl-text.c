/* SPDX-License-Identifier: MIT */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/acl-text.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

/* The kernel's tags (include/uapi/linux/posix_acl.h), in the order it wants them. */
#define TAG_USER_OBJ 0x01
#define TAG_USER 0x02
#define TAG_GROUP_OBJ 0x04
#define TAG_GROUP 0x08
#define TAG_MASK 0x10
#define TAG_OTHER 0x20
#define ACL_XATTR_VERSION 2
#define UNDEFINED_ID UINT32_MAX

typedef struct AclEntry {
	uint16_t tag, perm;
	uint32_t id;
} AclEntry;

static const char *perm_text(uint16_t perm, char buf[static 4])
{
	buf[0] = perm & 4 ? 'r' : '-';
	buf[1] = perm & 2 ? 'w' : '-';
	buf[2] = perm & 1 ? 'x' : '-';
	buf[3] = '\0';
	return buf;
}

int acl_xattr_to_text(const void *value, size_t len, char **ret_text)
{
	const uint8_t *p = value;
	char *text, *w;
	uint32_t version;

	if (len < 4 || (len - 4) % 8 != 0)
		return -EINVAL;
	memcpy(&version, p, 4);
	if (le32toh(version) != ACL_XATTR_VERSION)
		return -EINVAL;
	/* "group:4294967294:rwx\n" is the longest entry: 22 bytes. */
	text = malloc((len - 4) / 8 * 24 + 1);
	if (!text)
		return -ENOMEM;
	w = text;
	*w = '\0';
	for (size_t off = 4; off < len; off += 8) {
		uint16_t tag, perm;
		uint32_t id;
		const char *kind;
		char perms[4];
		bool named;

		memcpy(&tag, p + off, 2);
		memcpy(&perm, p + off + 2, 2);
		memcpy(&id, p + off + 4, 4);
		tag = le16toh(tag), perm = le16toh(perm), id = le32toh(id);
		switch (tag) {
		case TAG_USER_OBJ: kind = "user", named = false; break;
		case TAG_USER: kind = "user", named = true; break;
		case TAG_GROUP_OBJ: kind = "group", named = false; break;
		case TAG_GROUP: kind = "group", named = true; break;
		case TAG_MASK: kind = "mask", named = false; break;
		case TAG_OTHER: kind = "other", named = false; break;
		default: free(text); return -EINVAL;
		}
		if (named)
			w += sprintf(w, "%s%s:%u:%s", w > text ? "\n" : "", kind, id, perm_text(perm, perms));
		else
			w += sprintf(w, "%s%s::%s", w > text ? "\n" : "", kind, perm_text(perm, perms));
	}
	*ret_text = text;
	return 0;
}

/* "rwx", "r-x", "rw": each of r, w, x at most once, '-' anywhere. */
static int parse_perm(const char *s, uint16_t *ret)
{
	uint16_t perm = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 3)
		return -EINVAL;
	for (; *s; s++) {
		uint16_t bit = *s == 'r' ? 4 : *s == 'w' ? 2 : *s == 'x' ? 1 : 0;

		if (*s != '-' && (bit == 0 || (perm & bit)))
			return -EINVAL;
		perm |= bit;
	}
	*ret = perm;
	return 0;
}

/* Decimal digits only, below the kernel's "no ID" value. */
static bool parse_id(const char *s, uint32_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v >= UNDEFINED_ID)
			return false;
	}
	*ret = (uint32_t)v;
	return true;
}

static int parse_tag(const char *s, bool *ret_takes_name, uint16_t *ret_obj_tag)
{
	if (streq(s, "user") || streq(s, "u"))
		*ret_obj_tag = TAG_USER_OBJ, *ret_takes_name = true;
	else if (streq(s, "group") || streq(s, "g"))
		*ret_obj_tag = TAG_GROUP_OBJ, *ret_takes_name = true;
	else if (streq(s, "mask") || streq(s, "m"))
		*ret_obj_tag = TAG_MASK, *ret_takes_name = false;
	else if (streq(s, "other") || streq(s, "o"))
		*ret_obj_tag = TAG_OTHER, *ret_takes_name = false;
	else
		return -EINVAL;
	return 0;
}

/* One entry, already trimmed and without comment: "tag:qualifier:perm[:id]" (mask and other also "tag:perm"). */
static int parse_entry(char *e, AclNameLookup lookup, AclEntry *ret, char **reterr_msg)
{
	char *field[4] = { 0 }, shown[96];
	size_t n = 0;
	bool takes_name;
	uint16_t tag;
	const char *perm;

	text_escape(e, false, shown, sizeof(shown));
	for (char *s = e; n < 4; n++) {
		field[n] = s;
		s = strchr(s, ':');
		if (!s) {
			n++;
			break;
		}
		*s++ = '\0';
		if (n == 3)
			return errmsg_set(reterr_msg, -EINVAL, "ACL entry \"%s\" has too many fields", shown);
	}
	if (n < 2 || parse_tag(field[0], &takes_name, &tag) < 0)
		return errmsg_set(reterr_msg, -EINVAL, "ACL entry \"%s\" is not tag:qualifier:permissions", shown);
	perm = n == 2 ? field[1] : field[2];
	if ((n == 2 && takes_name) || (n >= 3 && !takes_name && field[1][0]) || (n == 4 && !field[1][0]))
		return errmsg_set(reterr_msg, -EINVAL, "ACL entry \"%s\" is not tag:qualifier:permissions", shown);
	if (parse_perm(perm, &ret->perm) < 0)
		return errmsg_set(reterr_msg, -EINVAL, "ACL entry \"%s\" has invalid permissions", shown);
	ret->tag = tag;
	ret->id = UNDEFINED_ID;
	if (n == 2 || !field[1][0])
		return 0;

	ret->tag = tag == TAG_USER_OBJ ? TAG_USER : TAG_GROUP;
	/* bsdtar's fourth field, then a numeric qualifier, then the name on this host. */
	if (n == 4) {
		if (!parse_id(field[3], &ret->id))
			return errmsg_set(reterr_msg, -EINVAL, "ACL entry \"%s\" has an invalid ID", shown);
		return 0;
	}
	if (parse_id(field[1], &ret->id))
		return 0;
	if (lookup && lookup(field[1], ret->tag == TAG_GROUP, &ret->id) == 0)
		return 0;
	return errmsg_set(reterr_msg, -ENOENT,
			  "ACL entry \"%s\" names a %s this host does not know: create it, or make the archive with numeric IDs (GNU tar --numeric-owner)",
			  shown, ret->tag == TAG_GROUP ? "group" : "user");
}

static int cmp_entry(const void *a, const void *b)
{
	const AclEntry *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

/* Splits on ',' and '\n', trims blanks, drops '#' comments (getfacl's "#effective:"), parses each entry into @v. */
static int parse_entries(char *text, AclNameLookup lookup, AclEntry *v, size_t *ret_n, char **reterr_msg)
{
	size_t n = 0;
	char *save = NULL;

	for (char *e = strtok_r(text, ",\n", &save); e; e = strtok_r(NULL, ",\n", &save)) {
		char *hash = strchr(e, '#'), *end;
		int r;

		if (hash)
			*hash = '\0';
		while (*e == ' ' || *e == '\t' || *e == '\r')
			e++;
		end = e + strlen(e);
		while (end > e && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
			*--end = '\0';
		if (!*e)
			continue;
		if (n == ACL_TEXT_ENTRIES_MAX)
			return errmsg_set(reterr_msg, -E2BIG, "an ACL has more than %u entries", ACL_TEXT_ENTRIES_MAX);
		r = parse_entry(e, lookup, &v[n], reterr_msg);
		if (r < 0)
			return r;
		n++;
	}
	*ret_n = n;
	return 0;
}

/* The kernel's rules (posix_acl_valid): owner, owning group, other once each; a mask once, needed by named entries. */
static int check_entries(const AclEntry *v, size_t n, char **reterr_msg)
{
	unsigned count[0x21] = { 0 };

	for (size_t i = 0; i < n; i++) {
		count[v[i].tag]++;
		if (i > 0 && v[i].tag == v[i - 1].tag && (v[i].tag == TAG_USER || v[i].tag == TAG_GROUP) &&
		    v[i].id == v[i - 1].id)
			return errmsg_set(reterr_msg, -EINVAL, "an ACL names %s %u twice",
					  v[i].tag == TAG_USER ? "user" : "group", v[i].id);
	}
	if (count[TAG_USER_OBJ] != 1 || count[TAG_GROUP_OBJ] != 1 || count[TAG_OTHER] != 1)
		return errmsg_set(reterr_msg, -EINVAL,
				  "an ACL needs exactly one entry each for the owner (user::), the owning group (group::) and others (other::)");
	if (count[TAG_MASK] > 1)
		return errmsg_set(reterr_msg, -EINVAL, "an ACL has more than one mask entry");
	if ((count[TAG_USER] || count[TAG_GROUP]) && !count[TAG_MASK])
		return errmsg_set(reterr_msg, -EINVAL, "an ACL with named users or groups needs a mask entry (mask::)");
	return 0;
}

int acl_text_to_xattr(const char *text, AclNameLookup lookup, void **ret_value, size_t *ret_len,
		      char **reterr_msg)
{
	_cleanup_free_ AclEntry *v = NULL;
	_cleanup_free_ char *copy = strdup(text);
	uint8_t *out;
	uint32_t version = htole32(ACL_XATTR_VERSION);
	size_t n = 0, cap = 1;
	int r;

	if (!copy)
		return -ENOMEM;
	/* At most one entry per separator, plus one. */
	for (const char *s = text; *s; s++)
		cap += *s == ',' || *s == '\n';
	if (cap > ACL_TEXT_ENTRIES_MAX)
		cap = ACL_TEXT_ENTRIES_MAX;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	r = parse_entries(copy, lookup, v, &n, reterr_msg);
	if (r < 0)
		return r;
	if (n == 0) {
		*ret_value = NULL;
		*ret_len = 0;
		return 0;
	}
	qsort(v, n, sizeof(*v), cmp_entry);
	r = check_entries(v, n, reterr_msg);
	if (r < 0)
		return r;

	out = malloc(4 + 8 * n);
	if (!out)
		return -ENOMEM;
	memcpy(out, &version, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t tag = htole16(v[i].tag), perm = htole16(v[i].perm);
		uint32_t id = htole32(v[i].id);

		memcpy(out + 4 + 8 * i, &tag, 2);
		memcpy(out + 4 + 8 * i + 2, &perm, 2);
		memcpy(out + 4 + 8 * i + 4, &id, 4);
	}
	*ret_value = out;
	*ret_len = 4 + 8 * n;
	return 0;
}
