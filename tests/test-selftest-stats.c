/* SPDX-License-Identifier: MIT */
/*
 * The self-test's latency percentiles and its rule for when a p99 is
 * reported (selftest-stats.h), and what an unreported p99 looks like in the
 * JSON, the table, the judge, the baseline and the metrics. Pure code.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "selftest/selftest-stats.h"

static uint32_t *ramp(size_t n)
{
	uint32_t *v = calloc(n ? n : 1, sizeof(uint32_t));

	cr_assert_not_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint32_t)(i + 1);
	return v;
}

Test(percentile, nearest_rank_as_fio_picks_it)
{
	uint32_t *v = ramp(1000);

	cr_expect_eq(selftest_percentile(v, 1000, 500), 500);
	cr_expect_eq(selftest_percentile(v, 1000, 990), 990);
	cr_expect_eq(selftest_percentile(v, 1000, 1000), 1000);
	cr_expect_eq(selftest_percentile(v, 1000, 1), 1);
	/* Rank ceil(p n): 0.99 * 1001 = 990.99 -> rank 991. */
	free(v);
	v = ramp(1001);
	cr_expect_eq(selftest_percentile(v, 1001, 990), 991);
	cr_expect_eq(selftest_percentile(v, 1001, 500), 501);
	free(v);
	v = ramp(1);
	cr_expect_eq(selftest_percentile(v, 1, 990), 1);
	cr_expect_eq(selftest_percentile(v, 0, 990), 0);
	free(v);
}

Test(percentile, p99_of_a_short_window_is_its_maximum)
{
	/* What the old engine reported at its 64-I/O minimum (63 counted): the slowest I/O, not a p99. */
	uint32_t *v = ramp(63);

	cr_expect_eq(selftest_percentile(v, 63, 990), 63);
	free(v);
	v = ramp(100);
	cr_expect_eq(selftest_percentile(v, 100, 990), 99, "the second-largest of 100");
	free(v);
}

Test(percentile, exact_for_every_count)
{
	/* Integer rank: no count where a float 0.99 * n lands one rank off. */
	for (size_t n = 1; n <= 5000; n++) {
		size_t want = (99 * n + 99) / 100;

		cr_assert_eq((size_t)((990 * (uint64_t)n + 999) / 1000), want, "n=%zu", n);
	}
	uint32_t *v = ramp(5000);

	for (size_t n = 1; n <= 5000; n++)
		cr_assert_eq(selftest_percentile(v, n, 990), (99 * n + 99) / 100, "n=%zu", n);
	free(v);
}

Test(p99_rule, needs_a_thousand_samples)
{
	cr_expect_not(selftest_p99_reportable(0));
	cr_expect_not(selftest_p99_reportable(63));
	cr_expect_not(selftest_p99_reportable(999));
	cr_expect(selftest_p99_reportable(1000));
	cr_expect(selftest_p99_reportable(1u << 20));
	cr_expect_eq(SELFTEST_P99_MIN_SAMPLES, 1000);
}

static SelftestResult few_read_samples(void)
{
	return (SelftestResult){
		.seq_write_mbps = 900, .seq_read_mbps = 800, .rand_write_iops = 30000, .rand_read_iops = 40000,
		.write_p50_ms = 0.05, .write_p99_ms = 0.3, .read_p50_ms = 0.04, .read_p99_ms = 0,
		.write_samples = 1500, .read_samples = 412, .read_p99_unreported = true,
		.iodepth = 16, .method = SELFTEST_METHOD, .duration_ms = 300, .file_bytes = 48 << 20, .blocks_verified = 1000,
	};
}

Test(p99_rule, unreported_p99_is_null_in_json_with_the_reason)
{
	SelftestResult r = few_read_samples();
	json_t *o = selftest_result_to_json(&r);
	const char *why;

	cr_assert_not_null(o);
	cr_expect(json_is_null(json_object_get(o, "read_p99_ms")));
	cr_expect(json_is_real(json_object_get(o, "write_p99_ms")));
	cr_expect_eq(json_integer_value(json_object_get(o, "read_samples")), 412);
	cr_expect_eq(json_integer_value(json_object_get(o, "write_samples")), 1500);
	why = json_string_value(json_object_get(o, "p99_not_reported"));
	cr_assert_not_null(why);
	cr_expect_str_eq(why, "p99 not reported: too few samples (random read 412; a p99 needs 1000)");
	json_decref(o);

	r.write_p99_unreported = true;
	r.write_samples = 70;
	o = selftest_result_to_json(&r);
	cr_expect_str_eq(json_string_value(json_object_get(o, "p99_not_reported")),
			 "p99 not reported: too few samples (random write 70, random read 412; a p99 needs 1000)");
	json_decref(o);

	r = few_read_samples();
	r.read_p99_unreported = false;
	r.read_p99_ms = 0.2;
	o = selftest_result_to_json(&r);
	cr_expect_null(json_object_get(o, "p99_not_reported"));
	cr_expect(json_is_real(json_object_get(o, "read_p99_ms")));
	json_decref(o);
}

Test(p99_rule, unreported_p99_is_not_judged)
{
	SelftestResult r = few_read_samples(), base = few_read_samples();
	SelftestThresholds t = { .max_p99_ms = 0.1 };
	char *msg = NULL;

	/* Even if a value were left in the field, the figure is 0. */
	r.read_p99_ms = 50;
	cr_expect_eq(selftest_figure(&r, SELFTEST_FIG_READ_P99), 0);
	cr_expect_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_expect_str_eq(msg, "p99 latency 0.300 ms (random write, QD1) is above max_p99_ms=0.1");
	free(msg);
	t = (SelftestThresholds){ .max_p99_ms = 1 };
	cr_expect_eq(selftest_judge(&r, &t, NULL, NULL), SELFTEST_VERDICT_PASS);
	/* Relative: a baseline p99 of 0.01 would make 50 ms 5000 times it. */
	base.read_p99_unreported = false;
	base.read_p99_ms = 0.01;
	t = (SelftestThresholds){ .max_p99_ratio = 2 };
	cr_expect_eq(selftest_judge(&r, &t, &base, NULL), SELFTEST_VERDICT_PASS);
}

Test(p99_rule, table_says_not_reported)
{
	SelftestResult r = few_read_samples();
	char buf[4096] = "";
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	cr_assert_not_null(f);
	selftest_print_table(f, &r, NULL);
	fclose(f);
	cr_expect(strstr(buf, "p99 not reported (412 samples, a p99 needs 1000)"), "%s", buf);
	cr_expect(strstr(buf, "p99 0.300 ms"), "%s", buf);
}

Test(p99_rule, baseline_is_the_median_of_the_runs_that_have_a_p99)
{
	SelftestHistory *h = calloc(1, sizeof(*h));
	const SelftestResult *b;

	cr_assert_not_null(h);
	for (int i = 0; i < 5; i++) {
		SelftestResult r = few_read_samples();

		/* Two of five runs had a read p99: 0.2 and 0.4. */
		if (i == 1 || i == 3) {
			r.read_p99_unreported = false;
			r.read_p99_ms = i == 1 ? 0.2 : 0.4;
		}
		selftest_history_add(h, &r, 300, 1700000000 + i);
	}
	b = selftest_history_baseline_for(h, 300, 16);
	cr_assert_not_null(b);
	cr_expect_float_eq(b->read_p99_ms, 0.3, 1e-9, "median of 0.2 and 0.4, not of 0, 0.2, 0, 0.4, 0");
	cr_expect_float_eq(b->write_p99_ms, 0.3, 1e-9);
	free(h);
}
