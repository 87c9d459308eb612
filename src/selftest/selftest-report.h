/* SPDX-License-Identifier: MIT */
/* Self-test results as JSON, as a human table, and judged against a volume's thresholds. Pure code. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdio.h>

#include "volume/volume-options.h"
#include "selftest/selftest.h"

/* In rising order of severity: a judge returns the worst that applies. */
typedef enum SelftestVerdict {
	SELFTEST_VERDICT_PASS,
	SELFTEST_VERDICT_BELOW_BASELINE,
	SELFTEST_VERDICT_BELOW_THRESHOLD,
	SELFTEST_VERDICT_DATA_ERROR,
	_SELFTEST_VERDICT_MAX,
	_SELFTEST_VERDICT_INVALID = -EINVAL,
} SelftestVerdict;

/* "pass", "below-baseline", "below-threshold", "data-error"; NULL for anything else. */
const char *selftest_verdict_to_string(SelftestVerdict v);
SelftestVerdict selftest_verdict_from_string(const char *s);

/* The eight figures of a run, in the order of the JSON and the table. */
typedef enum SelftestFigure {
	SELFTEST_FIG_SEQ_WRITE,       /* seq_write_mbps */
	SELFTEST_FIG_SEQ_READ,        /* seq_read_mbps */
	SELFTEST_FIG_RAND_WRITE_IOPS, /* rand_write_iops */
	SELFTEST_FIG_RAND_READ_IOPS,  /* rand_read_iops */
	SELFTEST_FIG_WRITE_P50,       /* write_p50_ms */
	SELFTEST_FIG_WRITE_P99,       /* write_p99_ms */
	SELFTEST_FIG_READ_P50,        /* read_p50_ms */
	SELFTEST_FIG_READ_P99,        /* read_p99_ms */
	_SELFTEST_FIG_MAX,
} SelftestFigure;

typedef struct SelftestFigureInfo {
	const char *key;       /* JSON key, e.g. "seq_write_mbps" */
	const char *what;      /* "sequential write" */
	const char *unit;      /* "MiB/s", "IOPS", "ms" */
	int decimals;          /* as reported: 1, 0 or 3 */
	bool higher_is_better; /* false for latencies */
} SelftestFigureInfo;

const SelftestFigureInfo *selftest_figure_info(SelftestFigure f);
/* The figure from @r, rounded as reported (what JSON, table and judge show); 0 for an unreported p99. */
double selftest_figure(const SelftestResult *r, SelftestFigure f);
void selftest_figure_set(SelftestResult *r, SelftestFigure f, double v);
/* @v rounded to the figure's reported precision; 0 for NaN and infinities. */
double selftest_figure_round(SelftestFigure f, double v);

/*
 * Keys: seq_write_mbps, seq_read_mbps (MiB/s, 1 decimal), rand_write_iops,
 * rand_read_iops (integers), write_p50_ms, write_p99_ms, read_p50_ms,
 * read_p99_ms (3 decimals), duration_ms, bytes_written, bytes_read,
 * file_bytes, blocks_verified, verify_errors, alignment, iodepth,
 * iodepth_engine ("aio" or "threads"), write_samples and read_samples (the
 * QD1 latencies counted), first_error_offset when verify_errors > 0, and,
 * when a p99 had too few samples, null for it and p99_not_reported (the
 * text of selftest_p99_note()). NULL on OOM. Dump with SELFTEST_JSON_REAL_PRECISION:
 * the figures are rounded decimals, and jansson's default 17 digits would
 * print 0.132 as 0.13200000000000001.
 */
json_t *selftest_result_to_json(const SelftestResult *r);
/*
 * "p99 not reported: too few samples (random read 412; a p99 needs 1000)"
 * when a p99 of @r is unreported, else NULL (also on OOM). Malloc'd.
 */
char *selftest_p99_note(const SelftestResult *r);
/* Only the eight figures, keyed and rounded as above (IOPS as integers), set on @o; 0 or -ENOMEM. */
int selftest_figures_to_json(json_t *o, const SelftestResult *r);
#define SELFTEST_JSON_REAL_PRECISION JSON_REAL_PRECISION(15)

/*
 * DATA_ERROR whenever r->verify_errors > 0, whatever the thresholds. Otherwise
 * BELOW_THRESHOLD if any absolute threshold (0 = none) is missed:
 *   min_write_mbps  vs seq_write_mbps
 *   min_read_mbps   vs seq_read_mbps
 *   min_iops        vs the LOWER of rand_read_iops and rand_write_iops
 *   max_p99_ms      vs the HIGHER of write_p99_ms and read_p99_ms
 * else BELOW_BASELINE if @baseline (the partition's own figures, rounded as
 * reported; NULL = none yet) is given and a relative threshold is missed:
 *   min_write_ratio vs seq_write_mbps / baseline
 *   min_read_ratio  vs seq_read_mbps / baseline
 *   min_iops_ratio  vs the LOWER of the two IOPS ratios
 *   max_p99_ratio   vs the HIGHER of the two p99 ratios
 * (a baseline figure of 0 is not judged; nor is a p99 from too few samples,
 * which selftest_figure() gives as 0). Figures are compared as reported
 * (rounded like the JSON), so a message never says "500.0 is below 500".
 * @ret_msg (may be NULL) gets a malloc'd message with every missed threshold,
 * quoting measured vs required figures, e.g. "sequential write 41.2 MiB/s is
 * below min_write_mbps=500; p99 latency 3.100 ms (random write, QD1) is above
 * max_p99_ms=1", or NULL on PASS. @t may be NULL (no thresholds).
 */
SelftestVerdict selftest_judge(const SelftestResult *r, const SelftestThresholds *t, const SelftestResult *baseline,
			       char **ret_msg);

/* A human table of the figures, headed by @path (may be NULL). */
void selftest_print_table(FILE *f, const SelftestResult *r, const char *path);
