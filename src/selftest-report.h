/* SPDX-License-Identifier: MIT */
/* Self-test results as JSON, as a human table, and judged against a volume's thresholds. Pure code. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "options.h"
#include "selftest.h"

typedef enum SelftestVerdict {
	SELFTEST_VERDICT_PASS,
	SELFTEST_VERDICT_BELOW_THRESHOLD,
	SELFTEST_VERDICT_DATA_ERROR,
	_SELFTEST_VERDICT_MAX,
	_SELFTEST_VERDICT_INVALID = -EINVAL,
} SelftestVerdict;

/* "pass", "below-threshold", "data-error"; NULL for anything else. */
const char *selftest_verdict_to_string(SelftestVerdict v);

/*
 * Keys: seq_write_mbps, seq_read_mbps (MiB/s, 1 decimal), rand_write_iops,
 * rand_read_iops (integers), write_p50_ms, write_p99_ms, read_p50_ms,
 * read_p99_ms (3 decimals), duration_ms, bytes_written, bytes_read,
 * file_bytes, blocks_verified, verify_errors, alignment, iodepth, and
 * first_error_offset when verify_errors > 0. NULL on OOM.
 */
json_t *selftest_result_to_json(const SelftestResult *r);

/*
 * DATA_ERROR whenever r->verify_errors > 0, whatever the thresholds. Otherwise
 * BELOW_THRESHOLD if any threshold (0 = none) is missed:
 *   min_write_mbps  vs seq_write_mbps
 *   min_read_mbps   vs seq_read_mbps
 *   min_iops        vs the LOWER of rand_read_iops and rand_write_iops
 *   max_p99_ms      vs the HIGHER of write_p99_ms and read_p99_ms
 * Figures are compared as reported (rounded like the JSON), so a message never
 * says "500.0 is below 500". @ret_msg (may be NULL) gets a malloc'd message
 * quoting measured vs required figures, e.g. "sequential write 41.2 MB/s is
 * below min_write_mbps=500; p99 latency 3.1 ms is above max_p99_ms=1", or
 * NULL on PASS. @t may be NULL (no thresholds).
 */
SelftestVerdict selftest_judge(const SelftestResult *r, const SelftestThresholds *t, char **ret_msg);

/* A human table of the figures, headed by @path (may be NULL). */
void selftest_print_table(FILE *f, const SelftestResult *r, const char *path);
