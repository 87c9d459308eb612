/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strutil.h"

int parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s || strlen(s) > 20)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*ret = v;
	return 0;
}

int parse_u32(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = parse_u64(s, &v);

	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

int parse_mode(const char *s, mode_t *ret)
{
	mode_t m = 0;
	size_t n;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	if (n == 0 || n > 5)
		return -EINVAL;
	if (n == 5 && s[0] != '0')
		return -ERANGE;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '7')
			return -EINVAL;
		m = (mode_t)(m * 8 + (mode_t)(*p - '0'));
	}
	if (m > 07777)
		return -ERANGE;
	*ret = m;
	return 0;
}

int parse_decimal(const char *s, double *ret)
{
	double v = 0, scale = 1;
	bool dot = false, digits = false;

	if (!s || !*s || strlen(s) > 32)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p == '.' && !dot) {
			dot = true;
			continue;
		}
		if (*p < '0' || *p > '9')
			return -EINVAL;
		digits = true;
		if (dot) {
			scale /= 10;
			v += (*p - '0') * scale;
		} else
			v = v * 10 + (*p - '0');
	}
	if (!digits || !isfinite(v))
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
	char num[24];
	size_t n;
	unsigned shift = 0;
	uint64_t v;
	int r;

	if (!s)
		return -EINVAL;
	n = strlen(s);
	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	switch (s[n - 1]) {
	case 'K': case 'k': shift = 10; break;
	case 'M': case 'm': shift = 20; break;
	case 'G': case 'g': shift = 30; break;
	case 'T': case 't': shift = 40; break;
	default:
		if (s[n - 1] < '0' || s[n - 1] > '9')
			return -EINVAL;
	}
	if (shift)
		n--;
	memcpy(num, s, n);
	num[n] = '\0';
	r = parse_u64(num, &v);
	if (r < 0)
		return r;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*ret = v << shift;
	return 0;
}

void format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, units[u]);
}

bool string_is_printable_ascii(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return false;
	return true;
}

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static bool crc32c_hw;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
		crc32c_table[i] = c;
	}
#if defined(__x86_64__)
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
/*
 * SSE4.2's crc32 instruction is CRC32C (the same reflected polynomial), eight bytes at a time: the
 * send stream checksums every byte twice on each side (its record and the whole stream), and the
 * table's byte a step held a full send to a few hundred MB/s (callgrind: tests/bench/RESULTS.md §8).
 */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	for (; len > 0 && ((uintptr_t)p & 7u); len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, sizeof(v));
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len > 0; len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

/* Chainable: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b). The CPU's instruction if it has one, else a table. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (crc32c_hw)
		return ~crc32c_sse42(crc, p, len);
#endif
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[(crc ^ *p++) & 0xffu];
	return ~crc;
}

/* The length of the valid UTF-8 sequence at @s (0 if none) and, through @ret_cp, its code point. */
static size_t utf8_decode(const unsigned char *s, size_t avail, uint32_t *ret_cp)
{
	uint32_t cp;
	size_t n;

	if (avail == 0)
		return 0;
	if (s[0] < 0x80) {
		*ret_cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret_cp = cp;
	return n;
}

size_t utf8_sequence_length(const unsigned char *s, size_t avail)
{
	uint32_t cp;

	return utf8_decode(s, avail, &cp);
}

bool codepoint_is_display_unsafe(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || /* C0, DEL, C1 (U+009B is a CSI) */
	       cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || /* Arabic letter mark, zero widths, LRM, RLM */
	       (cp >= 0x2028 && cp <= 0x202e) ||                 /* line/paragraph separators, embeddings, overrides */
	       (cp >= 0x2060 && cp <= 0x206f) ||                 /* invisible operators, isolates */
	       cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);   /* BOM, interlinear annotation */
}

void text_escape(const char *raw, bool double_backslash, char *buf, size_t len)
{
	const unsigned char *p = (const unsigned char *)raw;
	size_t avail = strlen(raw), o = 0;

	if (len == 0)
		return;
	while (avail > 0) {
		uint32_t cp = 0;
		size_t n = utf8_decode(p, avail, &cp);
		char tmp[4 * 4 + 1]; /* at most four bytes, each "\\xNN" */
		size_t tn = 0;

		if (n > 0 && !codepoint_is_display_unsafe(cp) && !(cp == '\\' && double_backslash))
			memcpy(tmp, p, n), tn = n;
		else if (n == 1 && cp == '\\')
			tmp[0] = tmp[1] = '\\', tn = 2;
		else {
			/* Every byte of an unsafe or invalid sequence as \xNN: label_unescape() gives them back. */
			if (n == 0)
				n = 1;
			for (size_t i = 0; i < n; i++)
				tn += (size_t)snprintf(tmp + tn, sizeof(tmp) - tn, "\\x%02x", p[i]);
		}
		if (o + tn >= len)
			break;
		memcpy(buf + o, tmp, tn);
		o += tn;
		p += n;
		avail -= n;
	}
	buf[o] = '\0';
}

char *text_escape_dup(const char *raw, bool double_backslash)
{
	size_t len = strlen(raw) * 4 + 1;
	char *buf = malloc(len);

	if (buf)
		text_escape(raw, double_backslash, buf, len);
	return buf;
}

char *shell_quote_dup(const char *s)
{
	size_t n = 3;
	char *out, *o;

	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	out = malloc(n);
	if (!out)
		return NULL;
	o = out;
	*o++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else
			*o++ = *c;
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

void label_escape(const char *raw, char *buf, size_t len)
{
	text_escape(raw, true, buf, len);
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int label_unescape(const char *esc, char *buf, size_t len)
{
	size_t o = 0;

	for (const char *p = esc; *p;) {
		char c;

		if (*p != '\\')
			c = *p++;
		else if (p[1] == '\\')
			c = '\\', p += 2;
		else if (p[1] == 'x' && hex_value(p[2]) >= 0 && hex_value(p[3]) >= 0 && (hex_value(p[2]) | hex_value(p[3])))
			c = (char)(hex_value(p[2]) * 16 + hex_value(p[3])), p += 4;
		else
			return -EINVAL;
		if (o + 1 >= len)
			return -ENAMETOOLONG;
		buf[o++] = c;
	}
	if (len == 0)
		return -ENAMETOOLONG;
	buf[o] = '\0';
	return 0;
}

char *crc_trailer_append(const char *body)
{
	char *out = NULL;
	size_t n = body ? strlen(body) : 0;

	/* At least one member before: "{}" has none for the comma to follow. */
	if (n < 3 || body[0] != '{' || body[n - 1] != '}' || n - 1 > INT_MAX)
		return NULL;
	if (asprintf(&out, "%.*s,\"crc\":%u}", (int)(n - 1), body, crc32c(0, body, n)) < 0)
		return NULL;
	return out;
}

int crc_trailer_check(const char *buf, size_t len)
{
	static const char marker[] = ",\"crc\":";
	const char *end = buf + len, *p, *digits;
	uint64_t want = 0;
	uint32_t got;

	while (end > buf && (end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (end - buf < (ptrdiff_t)sizeof(marker) + 2 || end[-1] != '}')
		return -EUCLEAN;
	/* Back over the digits to the marker; the CRC member must be last. */
	p = end - 1;
	while (p > buf && p[-1] >= '0' && p[-1] <= '9')
		p--;
	digits = p;
	if (digits == end - 1 || end - 1 - digits > 10)
		return -EUCLEAN;
	if ((size_t)(digits - buf) < sizeof(marker) - 1 ||
	    memcmp(digits - (sizeof(marker) - 1), marker, sizeof(marker) - 1) != 0)
		return -EUCLEAN;
	for (p = digits; p < end - 1; p++)
		want = want * 10 + (uint64_t)(*p - '0');
	/* The body is everything before the marker, closed by the '}' that ended it. */
	got = crc32c(crc32c(0, buf, (size_t)(digits - (sizeof(marker) - 1) - buf)), "}", 1);
	return want == got ? 0 : -EUCLEAN;
}
