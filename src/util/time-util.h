/* SPDX-License-Identifier: MIT */
/* Clocks and time stamps. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds: for ages and intervals, never for display. */
static inline uint64_t now_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* RFC 3339, UTC: "2026-11-29T20:15:02Z". */
void format_rfc3339(int64_t t, char *buf, size_t len);
