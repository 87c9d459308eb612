/* SPDX-License-Identifier: MIT */
/* Latency percentiles of a self-test phase, and when a p99 may be reported at all. Pure code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A p99 is reported only from at least this many samples. Nearest rank puts
 * the p99 of n samples at rank ceil(0.99 n); with 1000 samples ten lie above
 * it, so it is the tenth-largest, and the distribution-free 95 % interval of
 * that rank (990 +- 1.96 sqrt(1000 * 0.99 * 0.01)) spans p98.4..p99.6. With
 * 100 samples the p99 is the second-largest and its interval reaches the
 * maximum: it says what the one slowest I/O of the window did, not what 1 %
 * of the I/Os do. fio's 2 s QD1 jobs have tens of thousands.
 */
#define SELFTEST_P99_MIN_SAMPLES 1000u

bool selftest_p99_reportable(uint64_t samples);

/*
 * Nearest-rank percentile @permille (1..1000) of the @n values in @sorted
 * (ascending): the value at rank ceil(permille * n / 1000), in integer
 * arithmetic, as fio's clat percentiles pick the first value whose
 * cumulative count reaches p * n. 0 when @n is 0.
 */
uint32_t selftest_percentile(const uint32_t *sorted, size_t n, unsigned permille);
