/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/selftest-report.h"
#include "selftest/selftest-stats.h"
#include "util/macro.h"

static const char *const verdict_table[_SELFTEST_VERDICT_MAX] = {
	[SELFTEST_VERDICT_PASS] = "pass",
	[SELFTEST_VERDICT_BELOW_BASELINE] = "below-baseline",
	[SELFTEST_VERDICT_BELOW_THRESHOLD] = "below-threshold",
	[SELFTEST_VERDICT_DATA_ERROR] = "data-error",
};

const char *selftest_verdict_to_string(SelftestVerdict v)
{
	if (v < 0 || v >= _SELFTEST_VERDICT_MAX)
		return NULL;
	return verdict_table[v];
}

SelftestVerdict selftest_verdict_from_string(const char *s)
{
	for (int i = 0; i < _SELFTEST_VERDICT_MAX; i++)
		if (s && streq(s, verdict_table[i]))
			return (SelftestVerdict)i;
	return _SELFTEST_VERDICT_INVALID;
}

/* The precision of every figure, in one place, so that JSON, table and judge agree. */
static double round_to(double v, int decimals)
{
	double scale = pow(10, decimals);

	if (!isfinite(v))
		return 0;
	return round(v * scale) / scale;
}

static double mbps(double v)
{
	return round_to(v, 1);
}

static double ms(double v)
{
	return round_to(v, 3);
}

static json_int_t iops(double v)
{
	return (json_int_t)llround(isfinite(v) ? v : 0);
}

static const SelftestFigureInfo figure_table[_SELFTEST_FIG_MAX] = {
	[SELFTEST_FIG_SEQ_WRITE] = { "seq_write_mbps", "sequential write", "MiB/s", 1, true },
	[SELFTEST_FIG_SEQ_READ] = { "seq_read_mbps", "sequential read", "MiB/s", 1, true },
	[SELFTEST_FIG_RAND_WRITE_IOPS] = { "rand_write_iops", "random write", "IOPS", 0, true },
	[SELFTEST_FIG_RAND_READ_IOPS] = { "rand_read_iops", "random read", "IOPS", 0, true },
	[SELFTEST_FIG_WRITE_P50] = { "write_p50_ms", "random write p50", "ms", 3, false },
	[SELFTEST_FIG_WRITE_P99] = { "write_p99_ms", "random write p99", "ms", 3, false },
	[SELFTEST_FIG_READ_P50] = { "read_p50_ms", "random read p50", "ms", 3, false },
	[SELFTEST_FIG_READ_P99] = { "read_p99_ms", "random read p99", "ms", 3, false },
};

const SelftestFigureInfo *selftest_figure_info(SelftestFigure f)
{
	return f >= 0 && f < _SELFTEST_FIG_MAX ? &figure_table[f] : NULL;
}

/* Where each figure lives in a SelftestResult. */
static const size_t figure_offset[_SELFTEST_FIG_MAX] = {
	[SELFTEST_FIG_SEQ_WRITE] = offsetof(SelftestResult, seq_write_mbps),
	[SELFTEST_FIG_SEQ_READ] = offsetof(SelftestResult, seq_read_mbps),
	[SELFTEST_FIG_RAND_WRITE_IOPS] = offsetof(SelftestResult, rand_write_iops),
	[SELFTEST_FIG_RAND_READ_IOPS] = offsetof(SelftestResult, rand_read_iops),
	[SELFTEST_FIG_WRITE_P50] = offsetof(SelftestResult, write_p50_ms),
	[SELFTEST_FIG_WRITE_P99] = offsetof(SelftestResult, write_p99_ms),
	[SELFTEST_FIG_READ_P50] = offsetof(SelftestResult, read_p50_ms),
	[SELFTEST_FIG_READ_P99] = offsetof(SelftestResult, read_p99_ms),
};

static double *figure_field(SelftestResult *r, SelftestFigure f)
{
	return (double *)((char *)r + figure_offset[f]);
}

double selftest_figure_round(SelftestFigure f, double v)
{
	return round_to(v, figure_table[f].decimals);
}

/* A p99 from too few samples is no figure: 0, as a figure that was never measured. */
static bool figure_unreported(const SelftestResult *r, SelftestFigure f)
{
	return (f == SELFTEST_FIG_WRITE_P99 && r->write_p99_unreported) ||
	       (f == SELFTEST_FIG_READ_P99 && r->read_p99_unreported);
}

double selftest_figure(const SelftestResult *r, SelftestFigure f)
{
	if (figure_unreported(r, f))
		return 0;
	return selftest_figure_round(f, *figure_field((SelftestResult *)r, f));
}

void selftest_figure_set(SelftestResult *r, SelftestFigure f, double v)
{
	*figure_field(r, f) = v;
}

char *selftest_p99_note(const SelftestResult *r)
{
	char w[64] = "", rd[64] = "", *s = NULL;

	if (!r->write_p99_unreported && !r->read_p99_unreported)
		return NULL;
	if (r->write_p99_unreported)
		(void)snprintf(w, sizeof(w), "random write %" PRIu64, r->write_samples);
	if (r->read_p99_unreported)
		(void)snprintf(rd, sizeof(rd), "random read %" PRIu64, r->read_samples);
	if (asprintf(&s, "p99 not reported: too few samples (%s%s%s; a p99 needs %u)", w,
		     *w && *rd ? ", " : "", rd, SELFTEST_P99_MIN_SAMPLES) < 0)
		return NULL;
	return s;
}

static int set_new(json_t *o, const char *key, json_t *v)
{
	/* json_object_set_new() takes the reference even on failure; NULL v is rejected too. */
	return json_object_set_new(o, key, v);
}

int selftest_figures_to_json(json_t *o, const SelftestResult *r)
{
	int failed = 0;

	for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++)
		failed |= set_new(o, figure_table[f].key,
				  figure_table[f].decimals == 0 ? json_integer(iops(*figure_field((SelftestResult *)r, f)))
								: json_real(selftest_figure(r, f)));
	return failed ? -ENOMEM : 0;
}

json_t *selftest_result_to_json(const SelftestResult *r)
{
	json_t *o;
	int failed = 0;

	o = json_object();
	if (!o)
		return NULL;

	failed |= selftest_figures_to_json(o, r) < 0;
	/* Status and --json say "no figure" as null, and why (the history keeps 0: no figure either). */
	for (SelftestFigure f = SELFTEST_FIG_WRITE_P99; f <= SELFTEST_FIG_READ_P99; f += 2)
		if (figure_unreported(r, f))
			failed |= set_new(o, figure_table[f].key, json_null());
	failed |= set_new(o, "write_samples", json_integer((json_int_t)r->write_samples));
	failed |= set_new(o, "read_samples", json_integer((json_int_t)r->read_samples));
	if (r->write_p99_unreported || r->read_p99_unreported) {
		_cleanup_free_ char *why = selftest_p99_note(r);

		failed |= set_new(o, "p99_not_reported", why ? json_string(why) : NULL);
	}
	failed |= set_new(o, "duration_ms", json_integer((json_int_t)r->duration_ms));
	failed |= set_new(o, "bytes_written", json_integer((json_int_t)r->bytes_written));
	failed |= set_new(o, "bytes_read", json_integer((json_int_t)r->bytes_read));
	failed |= set_new(o, "file_bytes", json_integer((json_int_t)r->file_bytes));
	failed |= set_new(o, "blocks_verified", json_integer((json_int_t)r->blocks_verified));
	failed |= set_new(o, "verify_errors", json_integer((json_int_t)r->verify_errors));
	if (r->verify_errors > 0)
		failed |= set_new(o, "first_error_offset", json_integer((json_int_t)r->first_error_offset));
	failed |= set_new(o, "alignment", json_integer(r->alignment));
	failed |= set_new(o, "iodepth", json_integer(r->iodepth));
	failed |= set_new(o, "iodepth_engine", json_string(r->qd_threads ? "threads" : "aio"));
	failed |= set_new(o, "method", json_integer(r->method));

	if (failed) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static char *mfree_str(char *s)
{
	free(s);
	return NULL;
}

/* Appends "; "-separated clauses to a growing message. */
typedef struct Msg {
	char *s;
	bool oom;
} Msg;

_printf_(2, 3) static void msg_add(Msg *m, const char *fmt, ...)
{
	_cleanup_free_ char *clause = NULL;
	char *joined = NULL;
	va_list ap;
	int n;

	if (m->oom)
		return;
	va_start(ap, fmt);
	n = vasprintf(&clause, fmt, ap);
	va_end(ap);
	if (n < 0) {
		clause = NULL;
		m->oom = true;
		return;
	}
	if (!m->s) {
		m->s = TAKE_PTR(clause);
		return;
	}
	if (asprintf(&joined, "%s; %s", m->s, clause) < 0) {
		m->oom = true;
		return;
	}
	free(m->s);
	m->s = joined;
}

/* Worse verdicts win: the enum is in rising order of severity. */
static void raise_verdict(SelftestVerdict *v, SelftestVerdict to)
{
	if (to > *v)
		*v = to;
}

/* Measured / baseline, both as reported; 0 when there is no usable baseline. */
static double ratio_of(const SelftestResult *r, const SelftestResult *base, SelftestFigure f)
{
	double b = selftest_figure(base, f);

	return b > 0 ? selftest_figure(r, f) / b : 0;
}

static void judge_baseline(const SelftestResult *r, const SelftestThresholds *t, const SelftestResult *base,
			   SelftestVerdict *v, Msg *m)
{
	/* Ratios are shown and compared with 2 decimals, as a threshold of 0.7 reads. */
	static const struct {
		SelftestFigure a, b; /* b: the second figure of a pair, or a again */
		size_t offset;
		bool is_max;
		const char *key;
	} rules[] = {
		{ SELFTEST_FIG_SEQ_WRITE, SELFTEST_FIG_SEQ_WRITE, offsetof(SelftestThresholds, min_write_ratio), false, "min_write_ratio" },
		{ SELFTEST_FIG_SEQ_READ, SELFTEST_FIG_SEQ_READ, offsetof(SelftestThresholds, min_read_ratio), false, "min_read_ratio" },
		{ SELFTEST_FIG_RAND_WRITE_IOPS, SELFTEST_FIG_RAND_READ_IOPS, offsetof(SelftestThresholds, min_iops_ratio), false, "min_iops_ratio" },
		{ SELFTEST_FIG_WRITE_P99, SELFTEST_FIG_READ_P99, offsetof(SelftestThresholds, max_p99_ratio), true, "max_p99_ratio" },
	};

	for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
		double limit = *(const double *)((const char *)t + rules[i].offset);
		double ra = ratio_of(r, base, rules[i].a), rb = ratio_of(r, base, rules[i].b), ratio;
		SelftestFigure f;

		if (limit <= 0)
			continue;
		/* The worse of the pair (a figure without a baseline is not judged). */
		if (ra <= 0 && rb <= 0)
			continue;
		if (rb <= 0 || (ra > 0 && (rules[i].is_max ? ra >= rb : ra <= rb))) {
			f = rules[i].a;
			ratio = ra;
		} else {
			f = rules[i].b;
			ratio = rb;
		}
		ratio = round_to(ratio, 2);
		if (rules[i].is_max ? ratio <= limit : ratio >= limit)
			continue;
		raise_verdict(v, SELFTEST_VERDICT_BELOW_BASELINE);
		msg_add(m, "%s %.*f %s is %.2f%s this partition's baseline %.*f %s, %s %s=%.15g",
			figure_table[f].what, figure_table[f].decimals, selftest_figure(r, f), figure_table[f].unit, ratio,
			rules[i].is_max ? " times" : " of", figure_table[f].decimals, selftest_figure(base, f),
			figure_table[f].unit, rules[i].is_max ? "above" : "below", rules[i].key, limit);
	}
}

SelftestVerdict selftest_judge(const SelftestResult *r, const SelftestThresholds *t, const SelftestResult *baseline,
			       char **ret_msg)
{
	SelftestVerdict v = SELFTEST_VERDICT_PASS;
	Msg m = {};

	if (r->verify_errors > 0) {
		v = SELFTEST_VERDICT_DATA_ERROR;
		msg_add(&m, "data verification failed: %" PRIu64 " of %" PRIu64 " blocks read back did not match what was written (first at offset %" PRIu64 ")",
			r->verify_errors, r->blocks_verified, r->first_error_offset);
	} else if (t) {
		/* Compare the figures as they are reported, so a message never says "500.0 is below 500". */
		double w = mbps(r->seq_write_mbps), rd = mbps(r->seq_read_mbps);
		json_int_t low_iops = iops(fmin(r->rand_read_iops, r->rand_write_iops));
		double wp99 = selftest_figure(r, SELFTEST_FIG_WRITE_P99), rp99 = selftest_figure(r, SELFTEST_FIG_READ_P99);
		double p99 = fmax(wp99, rp99);

		if (t->min_write_mbps > 0 && w < t->min_write_mbps) {
			raise_verdict(&v, SELFTEST_VERDICT_BELOW_THRESHOLD);
			msg_add(&m, "sequential write %.1f MiB/s is below min_write_mbps=%.15g", w, t->min_write_mbps);
		}
		if (t->min_read_mbps > 0 && rd < t->min_read_mbps) {
			raise_verdict(&v, SELFTEST_VERDICT_BELOW_THRESHOLD);
			msg_add(&m, "sequential read %.1f MiB/s is below min_read_mbps=%.15g", rd, t->min_read_mbps);
		}
		if (t->min_iops > 0 && (double)low_iops < t->min_iops) {
			raise_verdict(&v, SELFTEST_VERDICT_BELOW_THRESHOLD);
			msg_add(&m, "random %s %" PRId64 " IOPS at QD%u is below min_iops=%.15g",
				r->rand_read_iops <= r->rand_write_iops ? "read" : "write",
				(int64_t)low_iops, r->iodepth, t->min_iops);
		}
		if (t->max_p99_ms > 0 && p99 > t->max_p99_ms) {
			raise_verdict(&v, SELFTEST_VERDICT_BELOW_THRESHOLD);
			msg_add(&m, "p99 latency %.3f ms (random %s, QD1) is above max_p99_ms=%.15g", p99,
				wp99 >= rp99 ? "write" : "read", t->max_p99_ms);
		}
		if (baseline)
			judge_baseline(r, t, baseline, &v, &m);
	}

	/* On OOM the verdict stands; only the message is lost. */
	if (m.oom)
		m.s = mfree_str(m.s);
	if (ret_msg)
		*ret_msg = m.s;
	else
		free(m.s);
	return v;
}

static void print_latency(FILE *f, const char *what, double p50, double p99, bool unreported, uint64_t samples)
{
	if (unreported)
		fprintf(f, "  %-18s %-12s p50 %.3f ms   p99 not reported (%" PRIu64 " samples, a p99 needs %u)\n", what,
			"4 KiB QD1", ms(p50), samples, SELFTEST_P99_MIN_SAMPLES);
	else
		fprintf(f, "  %-18s %-12s p50 %.3f ms   p99 %.3f ms\n", what, "4 KiB QD1", ms(p50), ms(p99));
}

void selftest_print_table(FILE *f, const SelftestResult *r, const char *path)
{
	fprintf(f, "Direct-I/O self-test%s%s%s\n", path ? " of '" : "", path ? path : "", path ? "'" : "");
	fprintf(f, "  %-18s %-12s %10.1f MiB/s   (fdatasync %.3f ms included)\n", "sequential write", "1 MiB",
		mbps(r->seq_write_mbps), ms(r->fdatasync_ms));
	fprintf(f, "  %-18s %-12s %10.1f MiB/s\n", "sequential read", "1 MiB", mbps(r->seq_read_mbps));
	print_latency(f, "random write", r->write_p50_ms, r->write_p99_ms, r->write_p99_unreported, r->write_samples);
	print_latency(f, "random read", r->read_p50_ms, r->read_p99_ms, r->read_p99_unreported, r->read_samples);
	fprintf(f, "  %-18s 4 KiB QD%-4u %10" PRId64 " IOPS   (%s)\n", "random write", r->iodepth,
		(int64_t)iops(r->rand_write_iops), r->qd_threads ? "one thread per I/O" : "kernel AIO");
	fprintf(f, "  %-18s 4 KiB QD%-4u %10" PRId64 " IOPS\n", "random read", r->iodepth, (int64_t)iops(r->rand_read_iops));
	fprintf(f, "  %-18s %" PRIu64 " blocks of 4 KiB read back, %" PRIu64 " mismatch%s",
		"verification", r->blocks_verified, r->verify_errors, r->verify_errors == 1 ? "" : "es");
	if (r->verify_errors > 0)
		fprintf(f, " (first at offset %" PRIu64 ")", r->first_error_offset);
	fputc('\n', f);
	fprintf(f, "  %-18s %" PRIu64 " ms, %" PRIu64 " MiB file, %" PRIu64 " MiB written, %" PRIu64 " MiB read, alignment %u B%s\n",
		"run", r->duration_ms, r->file_bytes >> 20, r->bytes_written >> 20, r->bytes_read >> 20, r->alignment,
		r->named_scratch ? ", named scratch file" : "");
}
