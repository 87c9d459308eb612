/* SPDX-License-Identifier: MIT */
/* An open-addressing hash map from 64-bit keys (inode numbers) to 64-bit values. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct U64Map {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;
	size_t cap, n; /* cap is a power of two; kept at most half full */
} U64Map;

/* Inserts or replaces. */
int u64map_put(U64Map *m, uint64_t key, uint64_t val);
bool u64map_get(const U64Map *m, uint64_t key, uint64_t *ret_val);
void u64map_done(U64Map *m);
