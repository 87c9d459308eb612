/* SPDX-License-Identifier: MIT */
/* Growing arrays: one place for the doubling and its overflow checks. */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Makes room for @need elements of @size bytes in the array *@p of capacity
 * *@cap (in elements), doubling from @first. 0, or -ENOMEM with *@p unchanged.
 */
static inline int grow_array(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t c = *cap ? *cap : first;
	void *np;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (c > SIZE_MAX / size)
		return -ENOMEM;
	np = realloc(*p, c * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

#define GROW_ARRAY(arr, cap, need, first) grow_array((void **)&(arr), &(cap), (need), sizeof(*(arr)), (first))
