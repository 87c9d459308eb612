/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "selftest/selftest-history.h"
#include "util/time-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

#define HISTORY_VERSION 1
/* Bounds of what a file may say; anything beyond is damage, not a disk. */
#define FIGURE_MAX 1e12
#define BUDGET_MS_MAX (3600u * 1000u)
#define COUNT_MAX (UINT64_C(1) << 53)
#define TIME_MAX (INT64_C(1) << 40)

static const char *const trend_table[_SELFTEST_TREND_MAX] = {
	[SELFTEST_TREND_UNKNOWN] = "unknown",
	[SELFTEST_TREND_STEADY] = "steady",
	[SELFTEST_TREND_IMPROVING] = "improving",
	[SELFTEST_TREND_WORSENING] = "worsening",
};

const char *selftest_trend_to_string(SelftestTrend t)
{
	return t >= 0 && t < _SELFTEST_TREND_MAX ? trend_table[t] : NULL;
}

static bool run_healthy(const SelftestRun *run)
{
	return run->fig.verify_errors == 0;
}

/* Comparable with this engine's runs at @budget_ms and @iodepth. */
static bool run_matches(const SelftestRun *run, uint64_t budget_ms, unsigned iodepth)
{
	return run_healthy(run) && run->budget_ms == budget_ms && run->fig.iodepth == iodepth &&
	       run->fig.method == SELFTEST_METHOD;
}

/* A baseline this engine may compare with: one of its own method (else kept until replaced). */
static bool baseline_current(const SelftestHistory *h)
{
	return h->baseline.runs > 0 && h->baseline.method == SELFTEST_METHOD;
}

/* A run that may be one of the baseline's: comparable, and not older than a reset. */
static bool run_counts(const SelftestHistory *h, const SelftestRun *run, uint64_t budget_ms, unsigned iodepth)
{
	return run_matches(run, budget_ms, iodepth) && run->at >= h->reset_at;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of @n values (sorted in place); the mean of the two middle ones for an even count. */
static double median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void establish_baseline(SelftestHistory *h, uint64_t budget_ms, unsigned iodepth)
{
	const SelftestRun *picked[SELFTEST_BASELINE_RUNS];
	SelftestBaseline b = { .budget_ms = budget_ms, .iodepth = iodepth, .method = SELFTEST_METHOD };
	unsigned k = 0;

	/* The first healthy comparable runs, oldest first. */
	for (unsigned i = 0; i < h->n && k < SELFTEST_BASELINE_RUNS; i++)
		if (run_counts(h, &h->runs[i], budget_ms, iodepth))
			picked[k++] = &h->runs[i];
	if (k < SELFTEST_BASELINE_RUNS)
		return;

	for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
		double v[SELFTEST_BASELINE_RUNS];

		unsigned nv = 0;

		/* 0 is no figure (a p99 from too few samples): the median of the runs that have one. */
		for (unsigned i = 0; i < k; i++)
			if (selftest_figure(&picked[i]->fig, f) > 0)
				v[nv++] = selftest_figure(&picked[i]->fig, f);
		selftest_figure_set(&b.fig, f, selftest_figure_round(f, median(v, nv)));
	}
	b.fig.iodepth = iodepth;
	b.fig.method = SELFTEST_METHOD;
	b.runs = k;
	b.at = picked[k - 1]->at;
	h->baseline = b;
}

bool selftest_history_add(SelftestHistory *h, const SelftestResult *r, uint64_t budget_ms, int64_t at)
{
	SelftestRun run = { .at = at, .budget_ms = budget_ms };

	for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++)
		selftest_figure_set(&run.fig, f, selftest_figure(r, f));
	run.fig.verify_errors = r->verify_errors;
	run.fig.iodepth = r->iodepth;
	run.fig.method = r->method;
	run.fig.duration_ms = r->duration_ms;
	run.fig.file_bytes = r->file_bytes;

	if (h->n == SELFTEST_HISTORY_MAX) {
		memmove(&h->runs[0], &h->runs[1], (SELFTEST_HISTORY_MAX - 1) * sizeof(SelftestRun));
		h->n--;
	}
	h->runs[h->n++] = run;
	h->total++;

	if (baseline_current(h) || !run_healthy(&run))
		return false;
	establish_baseline(h, budget_ms, r->iodepth);
	return baseline_current(h);
}

void selftest_history_reset_baseline(SelftestHistory *h, int64_t now)
{
	h->baseline = (SelftestBaseline){};
	h->reset_at = now;
}

const SelftestResult *selftest_history_baseline_for(const SelftestHistory *h, uint64_t budget_ms, unsigned iodepth)
{
	if (!baseline_current(h) || h->baseline.budget_ms != budget_ms || h->baseline.iodepth != iodepth)
		return NULL;
	return &h->baseline.fig;
}

unsigned selftest_history_pending(const SelftestHistory *h, uint64_t budget_ms, unsigned iodepth)
{
	unsigned k = 0;

	for (unsigned i = 0; i < h->n; i++)
		if (run_counts(h, &h->runs[i], budget_ms, iodepth))
			k++;
	return k < SELFTEST_BASELINE_RUNS ? k : SELFTEST_BASELINE_RUNS;
}

void selftest_history_trend(const SelftestHistory *h, SelftestFigure f, double *ret_recent, SelftestTrend *ret_trend)
{
	const SelftestBaseline *b = &h->baseline;
	double ratios[SELFTEST_TREND_RUNS], recent[5], base, sx = 0, sy = 0, sxx = 0, sxy = 0, slope, change;
	unsigned n = 0, nr;

	*ret_recent = 0;
	*ret_trend = SELFTEST_TREND_UNKNOWN;
	base = baseline_current(h) ? selftest_figure(&b->fig, f) : 0;
	if (base <= 0)
		return;
	/* The newest comparable runs, collected newest first, then put in time order. */
	for (unsigned i = h->n; i > 0 && n < SELFTEST_TREND_RUNS; i--)
		if (run_matches(&h->runs[i - 1], b->budget_ms, b->iodepth) && selftest_figure(&h->runs[i - 1].fig, f) > 0)
			ratios[n++] = selftest_figure(&h->runs[i - 1].fig, f) / base;
	if (n == 0)
		return;
	for (unsigned i = 0; i < n / 2; i++) {
		double t = ratios[i];

		ratios[i] = ratios[n - 1 - i];
		ratios[n - 1 - i] = t;
	}
	nr = n < ELEMENTSOF(recent) ? n : (unsigned)ELEMENTSOF(recent);
	memcpy(recent, ratios + (n - nr), nr * sizeof(double));
	*ret_recent = round(median(recent, nr) * 100) / 100;
	if (n < 3)
		return;

	for (unsigned i = 0; i < n; i++) {
		sx += i;
		sy += ratios[i];
		sxx += (double)i * i;
		sxy += i * ratios[i];
	}
	slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
	/* The change the fitted line makes across the window, in shares of the baseline. */
	change = slope * (n - 1);
	if (!selftest_figure_info(f)->higher_is_better)
		change = -change;
	if (change > SELFTEST_TREND_BAND)
		*ret_trend = SELFTEST_TREND_IMPROVING;
	else if (change < -SELFTEST_TREND_BAND)
		*ret_trend = SELFTEST_TREND_WORSENING;
	else
		*ret_trend = SELFTEST_TREND_STEADY;
}


json_t *selftest_history_status_json(const SelftestHistory *h, const SelftestResult *current, uint64_t budget_ms)
{
	const SelftestBaseline *b = &h->baseline;
	json_t *o = json_object(), *base = json_object(), *trend = json_object();
	char stamp[40];

	if (!o || !base || !trend) {
		json_decref(o);
		json_decref(base);
		json_decref(trend);
		return NULL;
	}
	json_object_set_new(o, "runs", json_integer((json_int_t)h->total));
	json_object_set_new(o, "kept", json_integer(h->n));
	json_object_set_new(o, "baseline", base);
	if (!baseline_current(h)) {
		unsigned iodepth = current ? current->iodepth : SELFTEST_IODEPTH_DEFAULT;

		json_object_set_new(base, "state", json_string("pending"));
		json_object_set_new(base, "runs", json_integer(selftest_history_pending(h, budget_ms, iodepth)));
		json_object_set_new(base, "runs_needed", json_integer(SELFTEST_BASELINE_RUNS));
		if (b->runs > 0)
			json_object_set_new(base, "replaces",
					    json_pack("{s:i,s:s}", "method", (json_int_t)b->method, "why",
						      "measured by an older nvmevol's method: kept, not compared, until the new "
						      "baseline is made"));
		json_decref(trend);
		return o;
	}
	json_object_set_new(base, "state", json_string("established"));
	json_object_set_new(base, "runs", json_integer(b->runs));
	format_rfc3339(b->at, stamp, sizeof(stamp));
	json_object_set_new(base, "established_at", json_string(stamp));
	json_object_set_new(base, "budget_ms", json_integer((json_int_t)b->budget_ms));
	json_object_set_new(base, "iodepth", json_integer(b->iodepth));
	json_object_set_new(base, "method", json_integer(b->method));
	(void)selftest_figures_to_json(base, &b->fig);

	if (current && selftest_history_baseline_for(h, budget_ms, current->iodepth)) {
		json_t *ratio = json_object();

		for (SelftestFigure f = 0; ratio && f < _SELFTEST_FIG_MAX; f++) {
			double bv = selftest_figure(&b->fig, f);

			if (bv > 0)
				json_object_set_new(ratio, selftest_figure_info(f)->key,
						    json_real(round(selftest_figure(current, f) / bv * 100) / 100));
		}
		json_object_set_new(o, "ratio", ratio);
	} else if (current)
		json_object_set_new(o, "ratio_unavailable",
				    json_string("the baseline was measured with another budget or queue depth"));

	for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
		double recent;
		SelftestTrend t;

		selftest_history_trend(h, f, &recent, &t);
		if (recent <= 0)
			continue;
		json_object_set_new(trend, selftest_figure_info(f)->key,
				    json_pack("{s:f,s:s}", "recent_ratio", recent, "direction", selftest_trend_to_string(t)));
	}
	json_object_set_new(o, "trend", trend);
	return o;
}

/* ---- The file ---- */

static json_t *run_json(const SelftestRun *run)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	json_object_set_new(o, "at", json_integer(run->at));
	json_object_set_new(o, "budget_ms", json_integer((json_int_t)run->budget_ms));
	json_object_set_new(o, "iodepth", json_integer(run->fig.iodepth));
	json_object_set_new(o, "method", json_integer(run->fig.method));
	json_object_set_new(o, "duration_ms", json_integer((json_int_t)run->fig.duration_ms));
	json_object_set_new(o, "file_bytes", json_integer((json_int_t)run->fig.file_bytes));
	json_object_set_new(o, "verify_errors", json_integer((json_int_t)run->fig.verify_errors));
	(void)selftest_figures_to_json(o, &run->fig);
	return o;
}

char *selftest_history_dump(const SelftestHistory *h)
{
	_cleanup_free_ char *body = NULL;
	json_t *o, *runs;
	bool complete;

	o = json_object();
	runs = json_array();
	if (!o || !runs) {
		json_decref(o);
		json_decref(runs);
		return NULL;
	}
	json_object_set_new(o, "version", json_integer(HISTORY_VERSION));
	json_object_set_new(o, "total", json_integer((json_int_t)h->total));
	if (h->reset_at > 0)
		json_object_set_new(o, "baseline_reset_at", json_integer(h->reset_at));
	if (h->baseline.runs > 0) {
		json_t *b = json_object();

		if (b) {
			json_object_set_new(b, "runs", json_integer(h->baseline.runs));
			json_object_set_new(b, "at", json_integer(h->baseline.at));
			json_object_set_new(b, "budget_ms", json_integer((json_int_t)h->baseline.budget_ms));
			json_object_set_new(b, "iodepth", json_integer(h->baseline.iodepth));
			json_object_set_new(b, "method", json_integer(h->baseline.method));
			(void)selftest_figures_to_json(b, &h->baseline.fig);
		}
		json_object_set_new(o, "baseline", b);
	}
	for (unsigned i = 0; i < h->n; i++)
		json_array_append_new(runs, run_json(&h->runs[i]));
	/* A run lost to OOM must not silently shorten the history on disk. */
	complete = json_array_size(runs) == h->n;
	json_object_set_new(o, "runs", runs);
	/* Figures are rounded decimals: 15 significant digits print them exactly as rounded. */
	if (complete)
		body = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	json_decref(o);
	if (!body)
		return NULL;
	return crc_trailer_append(body);
}

static int get_u64(json_t *o, const char *key, uint64_t min, uint64_t max, uint64_t *ret, const char *where,
		   char **reterr_msg)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
	    (uint64_t)json_integer_value(v) > max)
		return errmsg_set(reterr_msg, -EUCLEAN, "%s: '%s' is missing or not a whole number from %" PRIu64 " to %" PRIu64,
				  where, key, min, max);
	*ret = (uint64_t)json_integer_value(v);
	return 0;
}

/* "method" of a run or baseline: absent in files written before it existed, which measured with method 1. */
static int get_method(json_t *o, unsigned *ret, const char *where, char **reterr_msg)
{
	uint64_t m = 1;
	int r = 0;

	if (json_object_get(o, "method"))
		r = get_u64(o, "method", 1, UINT16_MAX, &m, where, reterr_msg);
	*ret = (unsigned)m;
	return r;
}

static int get_figures(json_t *o, SelftestResult *r, const char *where, char **reterr_msg)
{
	for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
		const char *key = selftest_figure_info(f)->key;
		json_t *v = json_object_get(o, key);
		double d;

		if (!json_is_number(v))
			return errmsg_set(reterr_msg, -EUCLEAN, "%s: figure '%s' is missing", where, key);
		d = json_number_value(v);
		if (!isfinite(d) || d < 0 || d > FIGURE_MAX)
			return errmsg_set(reterr_msg, -EUCLEAN, "%s: figure '%s' is out of range", where, key);
		selftest_figure_set(r, f, selftest_figure_round(f, d));
	}
	return 0;
}

static int parse_run(json_t *o, SelftestRun *run, const char *where, char **reterr_msg)
{
	uint64_t at = 0, iodepth = 0;
	int r;

	if (!json_is_object(o))
		return errmsg_set(reterr_msg, -EUCLEAN, "%s is not an object", where);
	r = get_u64(o, "at", 0, TIME_MAX, &at, where, reterr_msg);
	if (r >= 0)
		r = get_u64(o, "budget_ms", 1, BUDGET_MS_MAX, &run->budget_ms, where, reterr_msg);
	if (r >= 0)
		r = get_u64(o, "iodepth", 1, SELFTEST_IODEPTH_MAX, &iodepth, where, reterr_msg);
	if (r >= 0)
		r = get_method(o, &run->fig.method, where, reterr_msg);
	if (r >= 0)
		r = get_u64(o, "duration_ms", 0, COUNT_MAX, &run->fig.duration_ms, where, reterr_msg);
	if (r >= 0)
		r = get_u64(o, "file_bytes", 0, COUNT_MAX, &run->fig.file_bytes, where, reterr_msg);
	if (r >= 0)
		r = get_u64(o, "verify_errors", 0, COUNT_MAX, &run->fig.verify_errors, where, reterr_msg);
	if (r >= 0)
		r = get_figures(o, &run->fig, where, reterr_msg);
	run->at = (int64_t)at;
	run->fig.iodepth = (unsigned)iodepth;
	return r;
}

int selftest_history_parse(const char *buf, size_t len, SelftestHistory *ret, char **reterr_msg)
{
	_cleanup_free_ SelftestHistory *h = calloc(1, sizeof(SelftestHistory));
	json_t *o, *runs, *b;
	json_error_t jerr;
	uint64_t version = 0;
	int r;

	if (!h)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	if (crc_trailer_check(buf, len) < 0)
		return errmsg_set(reterr_msg, -EUCLEAN, "CRC mismatch or missing: the file is damaged");
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return errmsg_set(reterr_msg, -EUCLEAN, "malformed JSON: %s", jerr.text);
	if (!json_is_object(o)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "not a JSON object");
		goto out;
	}
	r = get_u64(o, "version", 0, UINT32_MAX, &version, "history", reterr_msg);
	if (r < 0)
		goto out;
	if (version != HISTORY_VERSION) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "unknown history version %" PRIu64 " (this nvmevol reads %d)", version,
			       HISTORY_VERSION);
		goto out;
	}
	r = get_u64(o, "total", 0, COUNT_MAX, &h->total, "history", reterr_msg);
	if (r < 0)
		goto out;
	if (json_object_get(o, "baseline_reset_at")) {
		uint64_t t;

		r = get_u64(o, "baseline_reset_at", 0, TIME_MAX, &t, "history", reterr_msg);
		if (r < 0)
			goto out;
		h->reset_at = (int64_t)t;
	}
	runs = json_object_get(o, "runs");
	if (!json_is_array(runs) || json_array_size(runs) > SELFTEST_HISTORY_MAX || json_array_size(runs) > h->total) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "'runs' must be an array of at most %d runs, and no more than 'total'",
			       SELFTEST_HISTORY_MAX);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(runs); i++) {
		char where[32];

		snprintf(where, sizeof(where), "run %zu", i);
		r = parse_run(json_array_get(runs, i), &h->runs[i], where, reterr_msg);
		if (r < 0)
			goto out;
		h->n++;
	}
	b = json_object_get(o, "baseline");
	if (b) {
		uint64_t n = 0, at = 0, iodepth = 0;

		if (!json_is_object(b)) {
			r = errmsg_set(reterr_msg, -EUCLEAN, "'baseline' is not an object");
			goto out;
		}
		r = get_u64(b, "runs", 1, SELFTEST_HISTORY_MAX, &n, "baseline", reterr_msg);
		if (r >= 0)
			r = get_u64(b, "at", 0, TIME_MAX, &at, "baseline", reterr_msg);
		if (r >= 0)
			r = get_u64(b, "budget_ms", 1, BUDGET_MS_MAX, &h->baseline.budget_ms, "baseline", reterr_msg);
		if (r >= 0)
			r = get_u64(b, "iodepth", 1, SELFTEST_IODEPTH_MAX, &iodepth, "baseline", reterr_msg);
		if (r >= 0)
			r = get_method(b, &h->baseline.method, "baseline", reterr_msg);
		if (r >= 0)
			r = get_figures(b, &h->baseline.fig, "baseline", reterr_msg);
		if (r < 0)
			goto out;
		h->baseline.runs = (unsigned)n;
		h->baseline.at = (int64_t)at;
		h->baseline.iodepth = (unsigned)iodepth;
		h->baseline.fig.iodepth = (unsigned)iodepth;
		h->baseline.fig.method = h->baseline.method;
	}
	*ret = *h;
	r = 0;
out:
	json_decref(o);
	return r;
}

int selftest_history_load(int dirfd, SelftestHistory *ret, char **reterr_msg)
{
	_cleanup_free_ char *buf = NULL, *why = NULL;
	size_t len = 0;
	int r;

	*ret = (SelftestHistory){};
	r = read_file_at(dirfd, SELFTEST_HISTORY_FILE, SELFTEST_HISTORY_FILE_MAX, &buf, &len);
	if (r == -ENOENT)
		return 0;
	if (r == -EFBIG || r == -EBADFD)
		why = strdup(r == -EFBIG ? "larger than any history nvmevol writes" : "not a regular file");
	else if (r < 0) {
		errno = -r;
		return errmsg_set(reterr_msg, r, "cannot read %s: %m", SELFTEST_HISTORY_FILE);
	}
	else if (selftest_history_parse(buf, len, ret, &why) == 0)
		return 0;

	/* Keep the damaged file for the admin and start a new history (a new baseline too). */
	*ret = (SelftestHistory){};
	if (renameat(dirfd, SELFTEST_HISTORY_FILE, dirfd, SELFTEST_HISTORY_FILE ".damaged") < 0)
		return errmsg_set(reterr_msg, -EUCLEAN, "%s is damaged (%s) and cannot be moved aside: %m",
				  SELFTEST_HISTORY_FILE, why ? why : "unreadable");
	return errmsg_set(reterr_msg, -EUCLEAN, "%s is damaged (%s); kept as %s.damaged, starting a new history",
			  SELFTEST_HISTORY_FILE, why ? why : "unreadable", SELFTEST_HISTORY_FILE);
}

int selftest_history_save(int dirfd, const SelftestHistory *h)
{
	_cleanup_free_ char *s = selftest_history_dump(h);

	if (!s)
		return -ENOMEM;
	return write_file_atomic_at(dirfd, SELFTEST_HISTORY_FILE, s, strlen(s), 0600);
}

/* ---- Table ---- */

static void print_cell(FILE *f, const SelftestResult *r, SelftestFigure fig, const SelftestResult *base)
{
	const SelftestFigureInfo *fi = selftest_figure_info(fig);
	double v = selftest_figure(r, fig), b = base ? selftest_figure(base, fig) : 0;
	char cell[48];

	if (b > 0)
		snprintf(cell, sizeof(cell), "%.*f (%.2f)", fi->decimals, v, v / b);
	else
		snprintf(cell, sizeof(cell), "%.*f", fi->decimals, v);
	fprintf(f, " %17s", cell);
}

void selftest_history_print_table(FILE *f, const SelftestHistory *h, const char *title)
{
	static const SelftestFigure cols[] = { SELFTEST_FIG_SEQ_WRITE, SELFTEST_FIG_SEQ_READ, SELFTEST_FIG_RAND_WRITE_IOPS,
					       SELFTEST_FIG_RAND_READ_IOPS, SELFTEST_FIG_WRITE_P99, SELFTEST_FIG_READ_P99 };
	const SelftestBaseline *b = &h->baseline;
	char stamp[40];

	fprintf(f, "Self-test history%s%s: %" PRIu64 " run%s, the last %u kept\n", title ? " of " : "", title ? title : "",
		h->total, h->total == 1 ? "" : "s", h->n);
	if (b->runs > 0) {
		format_rfc3339(b->at, stamp, sizeof(stamp));
		fprintf(f, "Baseline: median of %u runs up to %s (budget %" PRIu64 " ms, QD%u); ratios to it in brackets\n",
			b->runs, stamp, b->budget_ms, b->iodepth);
	} else
		fprintf(f, "Baseline: pending (%u of %d healthy runs)\n",
			h->n > 0 ? selftest_history_pending(h, h->runs[h->n - 1].budget_ms, h->runs[h->n - 1].fig.iodepth) : 0,
			SELFTEST_BASELINE_RUNS);
	fprintf(f, "%-20s %17s %17s %17s %17s %17s %17s  %s\n", "time (UTC)", "seq write MiB/s", "seq read MiB/s",
		"rand write IOPS", "rand read IOPS", "write p99 ms", "read p99 ms", "data");
	if (b->runs > 0) {
		fprintf(f, "%-20s", "baseline");
		for (size_t c = 0; c < ELEMENTSOF(cols); c++)
			print_cell(f, &b->fig, cols[c], NULL);
		fputc('\n', f);
	}
	for (unsigned i = 0; i < h->n; i++) {
		const SelftestRun *run = &h->runs[i];
		const SelftestResult *base = selftest_history_baseline_for(h, run->budget_ms, run->fig.iodepth);

		format_rfc3339(run->at, stamp, sizeof(stamp));
		fprintf(f, "%-20s", stamp);
		for (size_t c = 0; c < ELEMENTSOF(cols); c++)
			print_cell(f, &run->fig, cols[c], base);
		fprintf(f, "  %s\n", run_healthy(run) ? "ok" : "ERRORS");
	}
	if (b->runs > 0) {
		fprintf(f, "Trend over the last %d comparable runs:", SELFTEST_TREND_RUNS);
		for (size_t c = 0; c < ELEMENTSOF(cols); c++) {
			double recent;
			SelftestTrend t;

			selftest_history_trend(h, cols[c], &recent, &t);
			fprintf(f, "%s %s %s", c ? "," : "", selftest_figure_info(cols[c])->key, selftest_trend_to_string(t));
		}
		fputc('\n', f);
	}
}
