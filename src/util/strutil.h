/* SPDX-License-Identifier: MIT */
/* Strict number parsers (no sign, no spaces, no trailing garbage) and a CRC. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int parse_u32(const char *s, uint32_t *ret);
int parse_u64(const char *s, uint64_t *ret);
/* Octal permission bits, 1 to 4 digits (e.g. "755", "0700", "2775"). */
int parse_mode(const char *s, mode_t *ret);
/* A non-negative decimal number ("12", "0.5", "1e3" is rejected). */
int parse_decimal(const char *s, double *ret);
/* Bytes with a unit K, M, G or T (powers of 1024); a bare number is bytes. */
int parse_size(const char *s, uint64_t *ret);

/* Formats @bytes like "10G" or "1536M" (exact when possible). */
void format_size(uint64_t bytes, char *buf, size_t len);

bool string_is_printable_ascii(const char *s);

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
