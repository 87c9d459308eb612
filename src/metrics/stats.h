/* SPDX-License-Identifier: MIT */
/*
 * Process counters for the metrics: requests per endpoint and result with a
 * latency histogram, and errors by kind. Lock-free: every counter is a
 * relaxed atomic, so any thread may count and a snapshot is per-counter
 * exact (not a consistent cut across counters, which the metrics do not need).
 */
#pragma once

#include <stdint.h>

#include "api-endpoint.h"

typedef enum StatsResult {
	STATS_RESULT_OK,       /* answered without Err */
	STATS_RESULT_ERROR,    /* the operation failed: Err from the manager */
	STATS_RESULT_REFUSED,  /* the request itself was refused (4xx): bad JSON, name, method, size */
	_STATS_RESULT_MAX,
} StatsResult;

typedef enum StatsErrorKind {
	STATS_ERROR_INVALID,          /* a refused request or option (EINVAL and friends) */
	STATS_ERROR_NOT_FOUND,        /* no such volume (ENOENT) */
	STATS_ERROR_IN_USE,           /* EBUSY */
	STATS_ERROR_NO_SPACE,         /* ENOSPC, EDQUOT */
	STATS_ERROR_IO,               /* EIO and other I/O failures */
	STATS_ERROR_PARTITION_MISSING,/* ENODEV, ENXIO: the volume's partition is gone */
	STATS_ERROR_SELFTEST_DATA,    /* the self-test read back wrong data (EBADMSG) */
	STATS_ERROR_POLICY_REFUSED,   /* a mount refused by selftest=enforce (EPERM) */
	STATS_ERROR_HISTORY_WRITE,    /* a partition's self-test history could not be saved */
	STATS_ERROR_METRICS_WRITE,    /* the metrics file could not be written */
	STATS_ERROR_OTHER,
	_STATS_ERROR_MAX,
} StatsErrorKind;

/* Upper bounds of the latency buckets, seconds; one more bucket (+Inf) follows. */
#define STATS_LATENCY_BUCKETS 15
extern const double stats_latency_bounds[STATS_LATENCY_BUCKETS];

/* The slot of requests to unknown paths. */
#define STATS_ENDPOINT_UNKNOWN _API_ENDPOINT_MAX
#define STATS_ENDPOINTS (_API_ENDPOINT_MAX + 1)

typedef struct StatsSnapshot {
	uint64_t requests[STATS_ENDPOINTS][_STATS_RESULT_MAX];
	uint64_t buckets[STATS_ENDPOINTS][STATS_LATENCY_BUCKETS + 1];
	uint64_t latency_sum_ns[STATS_ENDPOINTS];
	uint64_t errors[_STATS_ERROR_MAX];
} StatsSnapshot;

const char *stats_result_to_string(StatsResult r);
const char *stats_error_kind_to_string(StatsErrorKind k);
/* The kind of a failed operation's -errno. */
StatsErrorKind stats_error_kind_from_errno(int r);

/* @e out of range counts as STATS_ENDPOINT_UNKNOWN. */
void stats_request(int e, StatsResult res, uint64_t duration_ns);
void stats_error(StatsErrorKind k);
void stats_snapshot(StatsSnapshot *ret);
/* Zeroes every counter (tests). */
void stats_reset(void);
