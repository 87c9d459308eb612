/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "util/u64map.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Fibonacci hashing: inode numbers are clustered. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static int grow(U64Map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	U64Map n = { .cap = cap };

	n.keys = malloc(cap * sizeof(*n.keys));
	n.vals = malloc(cap * sizeof(*n.vals));
	n.used = calloc(cap, 1);
	if (!n.keys || !n.vals || !n.used) {
		u64map_done(&n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			(void)u64map_put(&n, m->keys[i], m->vals[i]);
	u64map_done(m);
	*m = n;
	return 0;
}

int u64map_put(U64Map *m, uint64_t key, uint64_t val)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		int r = grow(m);
		if (r < 0)
			return r;
	}
	for (i = slot_of(key, m->cap); m->used[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

bool u64map_get(const U64Map *m, uint64_t key, uint64_t *ret_val)
{
	if (m->cap == 0)
		return false;
	for (size_t i = slot_of(key, m->cap); m->used[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key) {
			if (ret_val)
				*ret_val = m->vals[i];
			return true;
		}
	return false;
}

void u64map_done(U64Map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	*m = (U64Map){ 0 };
}
