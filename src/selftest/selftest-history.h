/* SPDX-License-Identifier: MIT */
/*
 * A partition's self-test history: the last SELFTEST_HISTORY_MAX runs (a
 * bounded ring, oldest dropped first) and a baseline per figure, kept in
 * nvmevol/selftest-history.json on the partition itself, so that it travels
 * with the disk. The file is replaced atomically (temp file, fsync, rename,
 * fsync of the directory) and carries a CRC: a crash leaves the old or the
 * new history, never a mix.
 *
 * Baseline: the per-figure median of the first SELFTEST_BASELINE_RUNS healthy
 * runs (no data error) made with the same budget and queue depth; once
 * established it stays fixed (a slow drift must not become the new normal)
 * until selftest_history_reset_baseline(). Runs with another budget or queue
 * depth are kept but not compared with it. Runs and a baseline of another
 * SELFTEST_METHOD (an older nvmevol measured them) are never compared with
 * this engine's: the old baseline is kept, not used, until the first
 * SELFTEST_BASELINE_RUNS healthy runs of this method replace it.
 *
 * Everything but the load/save functions is pure.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "selftest/selftest-report.h"
#include "selftest/selftest.h"

#define SELFTEST_HISTORY_MAX 64
#define SELFTEST_BASELINE_RUNS 5
/* Runs the trend looks at, newest last; at least 3 are needed for a direction. */
#define SELFTEST_TREND_RUNS 8
/* Across the trend's runs, a change of more than this share of the baseline is a direction. */
#define SELFTEST_TREND_BAND 0.10
#define SELFTEST_HISTORY_FILE "selftest-history.json"
#define SELFTEST_HISTORY_FILE_MAX (128u * 1024u)

typedef struct SelftestRun {
	int64_t at;            /* unix seconds */
	uint64_t budget_ms;    /* the budget it was given */
	/* Kept: the eight figures (rounded as reported), verify_errors, iodepth, method, duration_ms, file_bytes. */
	SelftestResult fig;
} SelftestRun;

typedef struct SelftestBaseline {
	unsigned runs;         /* healthy runs it is the median of; 0 = none yet */
	int64_t at;            /* time of the last of those runs */
	uint64_t budget_ms;
	unsigned iodepth;
	unsigned method;       /* SELFTEST_METHOD of its runs */
	SelftestResult fig;    /* the medians, in the figure fields */
} SelftestBaseline;

typedef struct SelftestHistory {
	SelftestRun runs[SELFTEST_HISTORY_MAX]; /* oldest first */
	unsigned n;
	uint64_t total;        /* runs ever recorded here, dropped ones included */
	SelftestBaseline baseline;
	int64_t reset_at;      /* runs before this time do not count toward a new baseline */
} SelftestHistory;

typedef enum SelftestTrend {
	SELFTEST_TREND_UNKNOWN,   /* fewer than 3 comparable runs */
	SELFTEST_TREND_STEADY,
	SELFTEST_TREND_IMPROVING,
	SELFTEST_TREND_WORSENING,
	_SELFTEST_TREND_MAX,
} SelftestTrend;

const char *selftest_trend_to_string(SelftestTrend t);

/*
 * Appends a run (@r's figures, verify_errors, budget as given in
 * @budget_ms, iodepth, duration_ms, file_bytes) made at @at, dropping the
 * oldest when full, and establishes the baseline when this run completes it.
 * Returns true when this call established the baseline.
 */
bool selftest_history_add(SelftestHistory *h, const SelftestResult *r, uint64_t budget_ms, int64_t at);

/* Forgets the baseline at @now; the next SELFTEST_BASELINE_RUNS healthy runs make a new one. */
void selftest_history_reset_baseline(SelftestHistory *h, int64_t now);

/* The baseline if there is one and a run with @budget_ms / @iodepth may be compared with it; else NULL. */
const SelftestResult *selftest_history_baseline_for(const SelftestHistory *h, uint64_t budget_ms, unsigned iodepth);

/* Healthy runs so far toward a baseline with @budget_ms / @iodepth (for "pending 3 of 5"). */
unsigned selftest_history_pending(const SelftestHistory *h, uint64_t budget_ms, unsigned iodepth);

/*
 * Per figure: the median ratio to the baseline of the last (up to 5)
 * comparable runs in @ret_recent (0 without a baseline), and a direction from
 * the least-squares slope over the last SELFTEST_TREND_RUNS comparable runs.
 */
void selftest_history_trend(const SelftestHistory *h, SelftestFigure f, double *ret_recent, SelftestTrend *ret_trend);

/*
 * Status JSON: {"runs": total, "kept": n, "baseline": {"state": "established"|"pending", ...figures},
 * "ratio": {figure: measured/baseline of @current} (when @current and a baseline),
 * "trend": {figure: {"recent_ratio": x, "direction": "steady"|...}}}. NULL on OOM.
 */
json_t *selftest_history_status_json(const SelftestHistory *h, const SelftestResult *current, uint64_t budget_ms);

/* The file's text: compact JSON with a trailing CRC member. NULL on OOM. */
char *selftest_history_dump(const SelftestHistory *h);
/*
 * Parses the file's text strictly (version, CRC, bounds of every field).
 * -EUCLEAN and a message saying what is wrong when it is damaged.
 */
int selftest_history_parse(const char *buf, size_t len, SelftestHistory *ret, char **reterr_msg);

/*
 * Loads SELFTEST_HISTORY_FILE from @dirfd: 0 and an empty history when there is
 * none; a damaged file is renamed to SELFTEST_HISTORY_FILE ".damaged" (one
 * kept, for the admin) and -EUCLEAN returned with a message, @ret empty.
 */
int selftest_history_load(int dirfd, SelftestHistory *ret, char **reterr_msg);
/* Replaces the file atomically and durably. */
int selftest_history_save(int dirfd, const SelftestHistory *h);

/* A compact table, oldest first, ratios to the baseline when there is one. */
void selftest_history_print_table(FILE *f, const SelftestHistory *h, const char *title);
