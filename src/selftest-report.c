/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest-report.h"
#include "util/macro.h"

static const char *const verdict_table[_SELFTEST_VERDICT_MAX] = {
	[SELFTEST_VERDICT_PASS] = "pass",
	[SELFTEST_VERDICT_BELOW_THRESHOLD] = "below-threshold",
	[SELFTEST_VERDICT_DATA_ERROR] = "data-error",
};

const char *selftest_verdict_to_string(SelftestVerdict v)
{
	if (v < 0 || v >= _SELFTEST_VERDICT_MAX)
		return NULL;
	return verdict_table[v];
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

static int set_new(json_t *o, const char *key, json_t *v)
{
	/* json_object_set_new() takes the reference even on failure; NULL v is rejected too. */
	return json_object_set_new(o, key, v);
}

json_t *selftest_result_to_json(const SelftestResult *r)
{
	json_t *o;
	int failed = 0;

	o = json_object();
	if (!o)
		return NULL;

	failed |= set_new(o, "seq_write_mbps", json_real(mbps(r->seq_write_mbps)));
	failed |= set_new(o, "seq_read_mbps", json_real(mbps(r->seq_read_mbps)));
	failed |= set_new(o, "rand_write_iops", json_integer(iops(r->rand_write_iops)));
	failed |= set_new(o, "rand_read_iops", json_integer(iops(r->rand_read_iops)));
	failed |= set_new(o, "write_p50_ms", json_real(ms(r->write_p50_ms)));
	failed |= set_new(o, "write_p99_ms", json_real(ms(r->write_p99_ms)));
	failed |= set_new(o, "read_p50_ms", json_real(ms(r->read_p50_ms)));
	failed |= set_new(o, "read_p99_ms", json_real(ms(r->read_p99_ms)));
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

SelftestVerdict selftest_judge(const SelftestResult *r, const SelftestThresholds *t, char **ret_msg)
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
		double p99 = ms(fmax(r->write_p99_ms, r->read_p99_ms));

		if (t->min_write_mbps > 0 && w < t->min_write_mbps) {
			v = SELFTEST_VERDICT_BELOW_THRESHOLD;
			msg_add(&m, "sequential write %.1f MiB/s is below min_write_mbps=%.15g", w, t->min_write_mbps);
		}
		if (t->min_read_mbps > 0 && rd < t->min_read_mbps) {
			v = SELFTEST_VERDICT_BELOW_THRESHOLD;
			msg_add(&m, "sequential read %.1f MiB/s is below min_read_mbps=%.15g", rd, t->min_read_mbps);
		}
		if (t->min_iops > 0 && (double)low_iops < t->min_iops) {
			v = SELFTEST_VERDICT_BELOW_THRESHOLD;
			msg_add(&m, "random %s %" PRId64 " IOPS at QD%u is below min_iops=%.15g",
				r->rand_read_iops <= r->rand_write_iops ? "read" : "write",
				(int64_t)low_iops, r->iodepth, t->min_iops);
		}
		if (t->max_p99_ms > 0 && p99 > t->max_p99_ms) {
			v = SELFTEST_VERDICT_BELOW_THRESHOLD;
			msg_add(&m, "p99 latency %.3f ms (random %s, QD1) is above max_p99_ms=%.15g", p99,
				r->write_p99_ms >= r->read_p99_ms ? "write" : "read", t->max_p99_ms);
		}
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

void selftest_print_table(FILE *f, const SelftestResult *r, const char *path)
{
	fprintf(f, "Direct-I/O self-test%s%s%s\n", path ? " of '" : "", path ? path : "", path ? "'" : "");
	fprintf(f, "  %-18s %-12s %10.1f MiB/s   (fdatasync %.3f ms included)\n", "sequential write", "1 MiB",
		mbps(r->seq_write_mbps), ms(r->fdatasync_ms));
	fprintf(f, "  %-18s %-12s %10.1f MiB/s\n", "sequential read", "1 MiB", mbps(r->seq_read_mbps));
	fprintf(f, "  %-18s %-12s p50 %.3f ms   p99 %.3f ms\n", "random write", "4 KiB QD1",
		ms(r->write_p50_ms), ms(r->write_p99_ms));
	fprintf(f, "  %-18s %-12s p50 %.3f ms   p99 %.3f ms\n", "random read", "4 KiB QD1",
		ms(r->read_p50_ms), ms(r->read_p99_ms));
	fprintf(f, "  %-18s 4 KiB QD%-4u %10" PRId64 " IOPS\n", "random write", r->iodepth, (int64_t)iops(r->rand_write_iops));
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
