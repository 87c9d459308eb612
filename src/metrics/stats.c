/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "metrics/stats.h"

const double stats_latency_bounds[STATS_LATENCY_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
};

static const char *const result_table[_STATS_RESULT_MAX] = {
	[STATS_RESULT_OK] = "ok",
	[STATS_RESULT_ERROR] = "error",
	[STATS_RESULT_REFUSED] = "refused",
};

static const char *const error_table[_STATS_ERROR_MAX] = {
	[STATS_ERROR_INVALID] = "invalid",
	[STATS_ERROR_NOT_FOUND] = "not_found",
	[STATS_ERROR_IN_USE] = "in_use",
	[STATS_ERROR_NO_SPACE] = "no_space",
	[STATS_ERROR_IO] = "io",
	[STATS_ERROR_PARTITION_MISSING] = "partition_missing",
	[STATS_ERROR_SELFTEST_DATA] = "selftest_data_error",
	[STATS_ERROR_POLICY_REFUSED] = "refused_by_policy",
	[STATS_ERROR_HISTORY_WRITE] = "history_write",
	[STATS_ERROR_METRICS_WRITE] = "metrics_write",
	[STATS_ERROR_OTHER] = "other",
};

/* The counters; relaxed atomics, see stats.h. */
static _Atomic uint64_t requests[STATS_ENDPOINTS][_STATS_RESULT_MAX];
static _Atomic uint64_t buckets[STATS_ENDPOINTS][STATS_LATENCY_BUCKETS + 1];
static _Atomic uint64_t latency_sum_ns[STATS_ENDPOINTS];
static _Atomic uint64_t errors[_STATS_ERROR_MAX];

const char *stats_result_to_string(StatsResult r)
{
	return r >= 0 && r < _STATS_RESULT_MAX ? result_table[r] : NULL;
}

const char *stats_error_kind_to_string(StatsErrorKind k)
{
	return k >= 0 && k < _STATS_ERROR_MAX ? error_table[k] : NULL;
}

StatsErrorKind stats_error_kind_from_errno(int r)
{
	switch (r) {
	case -EINVAL:
	case -E2BIG:
	case -ENAMETOOLONG:
	case -EEXIST:
		return STATS_ERROR_INVALID;
	case -ENOENT:
		return STATS_ERROR_NOT_FOUND;
	case -EBUSY:
		return STATS_ERROR_IN_USE;
	case -ENOSPC:
	case -EDQUOT:
		return STATS_ERROR_NO_SPACE;
	case -EIO:
	case -EUCLEAN:
	case -EROFS:
		return STATS_ERROR_IO;
	case -ENODEV:
	case -ENXIO:
		return STATS_ERROR_PARTITION_MISSING;
	case -EBADMSG:
		return STATS_ERROR_SELFTEST_DATA;
	case -EPERM:
		return STATS_ERROR_POLICY_REFUSED;
	default:
		return STATS_ERROR_OTHER;
	}
}

void stats_request(int e, StatsResult res, uint64_t duration_ns)
{
	double s = (double)duration_ns / 1e9;
	unsigned b = 0;

	if (e < 0 || e >= (int)STATS_ENDPOINTS)
		e = STATS_ENDPOINT_UNKNOWN;
	if (res < 0 || res >= _STATS_RESULT_MAX)
		res = STATS_RESULT_ERROR;
	while (b < STATS_LATENCY_BUCKETS && s > stats_latency_bounds[b])
		b++;
	atomic_fetch_add_explicit(&requests[e][res], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&buckets[e][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&latency_sum_ns[e], duration_ns, memory_order_relaxed);
}

void stats_error(StatsErrorKind k)
{
	if (k < 0 || k >= _STATS_ERROR_MAX)
		k = STATS_ERROR_OTHER;
	atomic_fetch_add_explicit(&errors[k], 1, memory_order_relaxed);
}

void stats_snapshot(StatsSnapshot *ret)
{
	for (unsigned e = 0; e < STATS_ENDPOINTS; e++) {
		for (unsigned r = 0; r < _STATS_RESULT_MAX; r++)
			ret->requests[e][r] = atomic_load_explicit(&requests[e][r], memory_order_relaxed);
		for (unsigned b = 0; b <= STATS_LATENCY_BUCKETS; b++)
			ret->buckets[e][b] = atomic_load_explicit(&buckets[e][b], memory_order_relaxed);
		ret->latency_sum_ns[e] = atomic_load_explicit(&latency_sum_ns[e], memory_order_relaxed);
	}
	for (unsigned k = 0; k < _STATS_ERROR_MAX; k++)
		ret->errors[k] = atomic_load_explicit(&errors[k], memory_order_relaxed);
}

void stats_reset(void)
{
	for (unsigned e = 0; e < STATS_ENDPOINTS; e++) {
		for (unsigned r = 0; r < _STATS_RESULT_MAX; r++)
			atomic_store_explicit(&requests[e][r], 0, memory_order_relaxed);
		for (unsigned b = 0; b <= STATS_LATENCY_BUCKETS; b++)
			atomic_store_explicit(&buckets[e][b], 0, memory_order_relaxed);
		atomic_store_explicit(&latency_sum_ns[e], 0, memory_order_relaxed);
	}
	for (unsigned k = 0; k < _STATS_ERROR_MAX; k++)
		atomic_store_explicit(&errors[k], 0, memory_order_relaxed);
}
