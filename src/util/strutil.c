/* SPDX-License-Identifier: MIT */
#include <errno.h>
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

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
		crc32c_table[i] = c;
	}
}

/* Chainable: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b). Table-driven, one byte per step. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&crc32c_once, crc32c_init);
	crc = ~crc;
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[(crc ^ *p++) & 0xffu];
	return ~crc;
}
