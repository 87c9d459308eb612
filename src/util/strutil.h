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

/* Length of the valid UTF-8 sequence at @s (1 to 4), or 0 if it is not one (overlong, surrogate, truncated). */
size_t utf8_sequence_length(const unsigned char *s, size_t avail);

/*
 * Whether code point @cp acts on a terminal or reorders or hides text: C0 and
 * C1 controls (ESC, U+009B CSI), DEL, bidirectional embeddings, overrides and
 * isolates (U+202E), zero-width and line/paragraph separators.
 */
bool codepoint_is_display_unsafe(uint32_t cp);

/*
 * Any bytes (a filesystem label, a device's model string, a log line) as text
 * that is safe to print: valid UTF-8 of safe code points is kept, every byte of
 * an unsafe code point or of invalid UTF-8 becomes "\\xNN"; with
 * @double_backslash, '\\' becomes "\\\\" so that label_unescape() gives the
 * bytes back. Stops before a sequence that would not fit in @len with the NUL.
 */
void text_escape(const char *raw, bool double_backslash, char *buf, size_t len);
/* The same into a new string of the size it needs (NULL on ENOMEM). */
char *text_escape_dup(const char *raw, bool double_backslash);

/* @s as one word of a POSIX shell command: single-quoted, each ' as '\'' (NULL on ENOMEM). */
char *shell_quote_dup(const char *s);

/*
 * A filesystem label (any bytes, as mkfs.xfs -L accepts them) for records,
 * Status, tables and logs: text_escape() with backslashes doubled. Truncates
 * to @len. label_unescape() gives the bytes back (-EINVAL on a malformed
 * escape, -ENAMETOOLONG if they do not fit in @len with the NUL).
 */
void label_escape(const char *raw, char *buf, size_t len);
int label_unescape(const char *esc, char *buf, size_t len);

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * A JSON object's text with a last member "crc" appended: {"a":1} becomes
 * {"a":1,"crc":N}, N the CRC32C of the text as given. NULL when @body is not
 * "{...}" or on OOM. crc_trailer_check() verifies such text as read (trailing
 * whitespace allowed): 0, or -EUCLEAN when the member is missing or wrong.
 */
char *crc_trailer_append(const char *body);
int crc_trailer_check(const char *buf, size_t len);
