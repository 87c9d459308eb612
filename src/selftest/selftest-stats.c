/* SPDX-License-Identifier: MIT */
#include "selftest/selftest-stats.h"

bool selftest_p99_reportable(uint64_t samples)
{
	return samples >= SELFTEST_P99_MIN_SAMPLES;
}

uint32_t selftest_percentile(const uint32_t *sorted, size_t n, unsigned permille)
{
	uint64_t rank;

	if (n == 0)
		return 0;
	if (permille > 1000)
		permille = 1000;
	rank = ((uint64_t)permille * n + 999) / 1000;
	if (rank < 1)
		rank = 1;
	return sorted[rank - 1];
}
