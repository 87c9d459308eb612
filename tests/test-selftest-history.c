/* SPDX-License-Identifier: MIT */
/*
 * Self-test history and baseline (pure parts, and its file in a temporary
 * directory), relative thresholds in the judge, and the rounding of figures
 * at output. Needs nothing but a writable /tmp.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "util/strutil.h"

#define T0 1700000000

static SelftestResult result(double wr, double rd, double wiops, double riops, double wp99, double rp99)
{
	return (SelftestResult){
		.seq_write_mbps = wr, .seq_read_mbps = rd, .rand_write_iops = wiops, .rand_read_iops = riops,
		.write_p50_ms = wp99 / 2, .write_p99_ms = wp99, .read_p50_ms = rp99 / 2, .read_p99_ms = rp99,
		.iodepth = 16, .method = SELFTEST_METHOD, .duration_ms = 300, .file_bytes = 48 << 20,
		.blocks_verified = 1000,
	};
}

static SelftestHistory *new_history(void)
{
	SelftestHistory *h = calloc(1, sizeof(*h));

	cr_assert_not_null(h);
	return h;
}

Test(history, baseline_is_the_median_of_the_first_five_healthy_runs)
{
	SelftestHistory *h = new_history();
	static const double writes[] = { 1000, 1200, 900, 1100, 1050 };
	SelftestResult bad = result(10, 10, 10, 10, 9, 9);
	const SelftestResult *b;

	bad.verify_errors = 3;
	cr_expect_not(selftest_history_add(h, &bad, 300, T0));
	/* Another budget does not count toward a 300 ms baseline. */
	cr_expect_not(selftest_history_add(h, &(SelftestResult){ .seq_write_mbps = 1, .iodepth = 16 }, 5000, T0 + 1));
	for (int i = 0; i < 5; i++) {
		SelftestResult r = result(writes[i], 800 + i, 40000 + 1000 * i, 30000, 0.1 + 0.01 * i, 0.2);
		bool established = selftest_history_add(h, &r, 300, T0 + 10 + i);

		cr_expect_eq(established, i == 4, "run %d", i);
		cr_expect_eq(selftest_history_pending(h, 300, 16), (unsigned)i + 1);
	}
	cr_expect_eq(h->n, 7);
	cr_expect_eq(h->total, 7);
	cr_assert_eq(h->baseline.runs, 5);
	cr_expect_eq(h->baseline.at, T0 + 14);
	b = selftest_history_baseline_for(h, 300, 16);
	cr_assert_not_null(b);
	cr_expect_float_eq(b->seq_write_mbps, 1050, 1e-9);
	cr_expect_float_eq(b->seq_read_mbps, 802, 1e-9);
	cr_expect_float_eq(b->rand_write_iops, 42000, 1e-9);
	cr_expect_float_eq(b->write_p99_ms, 0.12, 1e-9);
	cr_expect_null(selftest_history_baseline_for(h, 5000, 16), "not comparable with another budget");
	cr_expect_null(selftest_history_baseline_for(h, 300, 1), "not comparable with another queue depth");

	/* Fixed once established: a slow sixth run does not move it. */
	SelftestResult slow = result(100, 80, 400, 300, 5, 5);
	cr_expect_not(selftest_history_add(h, &slow, 300, T0 + 20));
	cr_expect_float_eq(selftest_history_baseline_for(h, 300, 16)->seq_write_mbps, 1050, 1e-9);
	free(h);
}

Test(history, ring_is_bounded_and_the_baseline_outlives_its_runs)
{
	SelftestHistory *h = new_history();

	for (int i = 0; i < SELFTEST_HISTORY_MAX + 40; i++) {
		SelftestResult r = result(1000 + i, 900, 50000, 50000, 0.1, 0.1);
		selftest_history_add(h, &r, 300, T0 + i);
	}
	cr_expect_eq(h->n, SELFTEST_HISTORY_MAX);
	cr_expect_eq(h->total, SELFTEST_HISTORY_MAX + 40);
	/* Oldest first, the first 40 dropped. */
	cr_expect_eq(h->runs[0].at, T0 + 40);
	cr_expect_eq(h->runs[SELFTEST_HISTORY_MAX - 1].at, T0 + SELFTEST_HISTORY_MAX + 39);
	cr_expect_float_eq(h->baseline.fig.seq_write_mbps, 1002, 1e-9);

	/* A reset: only runs from then on make the next baseline. */
	selftest_history_reset_baseline(h, T0 + 1000);
	cr_expect_eq(h->baseline.runs, 0);
	cr_expect_eq(selftest_history_pending(h, 300, 16), 0);
	for (int i = 0; i < 5; i++) {
		SelftestResult r = result(500, 900, 50000, 50000, 0.1, 0.1);
		selftest_history_add(h, &r, 300, T0 + 1000 + i);
	}
	cr_expect_float_eq(h->baseline.fig.seq_write_mbps, 500, 1e-9);
	free(h);
}

static SelftestHistory *history_with_baseline(void)
{
	SelftestHistory *h = new_history();

	for (int i = 0; i < 5; i++) {
		SelftestResult r = result(1000, 800, 40000, 50000, 0.1, 0.2);
		selftest_history_add(h, &r, 300, T0 + i);
	}
	cr_assert_eq(h->baseline.runs, 5);
	return h;
}

Test(history, judge_below_baseline_with_figures_and_ranks_below_absolute)
{
	SelftestHistory *h = history_with_baseline();
	const SelftestResult *b = selftest_history_baseline_for(h, 300, 16);
	SelftestThresholds t = { .min_write_ratio = 0.7 };
	SelftestResult r = result(650, 800, 40000, 50000, 0.1, 0.2);
	char *msg = NULL;

	cr_assert_eq(selftest_judge(&r, &t, b, &msg), SELFTEST_VERDICT_BELOW_BASELINE);
	cr_expect_str_eq(msg, "sequential write 650.0 MiB/s is 0.65 of this partition's baseline 1000.0 MiB/s, "
			      "below min_write_ratio=0.7");
	free(msg);
	cr_expect_str_eq(selftest_verdict_to_string(SELFTEST_VERDICT_BELOW_BASELINE), "below-baseline");
	cr_expect_eq(selftest_verdict_from_string("below-baseline"), SELFTEST_VERDICT_BELOW_BASELINE);

	/* Exactly at the ratio (as shown, 2 decimals) passes; no baseline yet means nothing relative is judged. */
	r.seq_write_mbps = 700;
	cr_expect_eq(selftest_judge(&r, &t, b, NULL), SELFTEST_VERDICT_PASS);
	r.seq_write_mbps = 100;
	cr_expect_eq(selftest_judge(&r, &t, NULL, NULL), SELFTEST_VERDICT_PASS);

	/* IOPS: the lower ratio of the two; p99: the higher. */
	r = result(1000, 800, 40000, 20000, 0.1, 0.9);
	t = (SelftestThresholds){ .min_iops_ratio = 0.5, .max_p99_ratio = 3 };
	cr_assert_eq(selftest_judge(&r, &t, b, &msg), SELFTEST_VERDICT_BELOW_BASELINE);
	cr_expect_str_eq(msg, "random read 20000 IOPS is 0.40 of this partition's baseline 50000 IOPS, below min_iops_ratio=0.5; "
			      "random read p99 0.900 ms is 4.50 times this partition's baseline 0.200 ms, above max_p99_ratio=3");
	free(msg);

	/* An absolute threshold missed as well: below-threshold wins, both are said. */
	t.min_read_mbps = 900;
	cr_assert_eq(selftest_judge(&r, &t, b, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_expect(strstr(msg, "below min_read_mbps=900") && strstr(msg, "min_iops_ratio"), "%s", msg);
	free(msg);

	/* Data errors win over everything. */
	r.verify_errors = 1;
	cr_expect_eq(selftest_judge(&r, &t, b, NULL), SELFTEST_VERDICT_DATA_ERROR);
	free(h);
}

Test(history, trend_and_recent_ratio)
{
	SelftestHistory *h = history_with_baseline();
	double recent;
	SelftestTrend t;

	/* Five runs at the baseline: steady. */
	selftest_history_trend(h, SELFTEST_FIG_SEQ_WRITE, &recent, &t);
	cr_expect_float_eq(recent, 1.0, 1e-9);
	cr_expect_eq(t, SELFTEST_TREND_STEADY);

	/* Writes fall by 10 % a run, latency rises: both are worsening. */
	for (int i = 1; i <= 3; i++) {
		SelftestResult r = result(1000 - 100 * i, 800, 40000, 50000, 0.1 * (1 + i), 0.2);
		selftest_history_add(h, &r, 300, T0 + 100 + i);
	}
	selftest_history_trend(h, SELFTEST_FIG_SEQ_WRITE, &recent, &t);
	cr_expect_eq(t, SELFTEST_TREND_WORSENING);
	cr_expect_float_eq(recent, 0.9, 1e-9, "median of 1, 1, 0.9, 0.8, 0.7: %f", recent);
	selftest_history_trend(h, SELFTEST_FIG_WRITE_P99, &recent, &t);
	cr_expect_eq(t, SELFTEST_TREND_WORSENING);
	selftest_history_trend(h, SELFTEST_FIG_READ_P99, &recent, &t);
	cr_expect_eq(t, SELFTEST_TREND_STEADY);

	/* Latency falling is improving. */
	for (int i = 0; i < 8; i++) {
		SelftestResult r = result(1000, 800, 40000, 50000, 0.1, 0.2 - 0.02 * i);
		selftest_history_add(h, &r, 300, T0 + 200 + i);
	}
	selftest_history_trend(h, SELFTEST_FIG_READ_P99, &recent, &t);
	cr_expect_eq(t, SELFTEST_TREND_IMPROVING);
	cr_expect_str_eq(selftest_trend_to_string(t), "improving");

	/* Without a baseline nothing is known. */
	free(h);
	h = new_history();
	selftest_history_trend(h, SELFTEST_FIG_SEQ_WRITE, &recent, &t);
	cr_expect_eq(t, SELFTEST_TREND_UNKNOWN);
	cr_expect_eq(recent, 0);
	free(h);
}

Test(history, status_json_pending_then_established)
{
	SelftestHistory *h = new_history();
	SelftestResult r = result(1000, 800, 40000, 50000, 0.1, 0.2);
	json_t *j;

	selftest_history_add(h, &r, 300, T0);
	j = selftest_history_status_json(h, &r, 300);
	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "baseline"), "state")), "pending");
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "baseline"), "runs")), 1);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(j, "baseline"), "runs_needed")), 5);
	cr_expect_null(json_object_get(j, "ratio"));
	json_decref(j);
	free(h);

	h = history_with_baseline();
	r.seq_write_mbps = 500;
	selftest_history_add(h, &r, 300, T0 + 50);
	j = selftest_history_status_json(h, &r, 300);
	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "baseline"), "state")), "established");
	cr_expect_float_eq(json_real_value(json_object_get(json_object_get(j, "baseline"), "seq_write_mbps")), 1000, 1e-9);
	cr_expect_float_eq(json_real_value(json_object_get(json_object_get(j, "ratio"), "seq_write_mbps")), 0.5, 1e-9);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(j, "trend"), "seq_write_mbps"),
							   "direction")), "worsening");
	cr_expect_eq(json_integer_value(json_object_get(j, "runs")), 6);
	json_decref(j);
	/* A run with another budget has no ratio, and says why. */
	j = selftest_history_status_json(h, &r, 2000);
	cr_expect_null(json_object_get(j, "ratio"));
	cr_expect_not_null(json_object_get(j, "ratio_unavailable"));
	json_decref(j);
	free(h);
}

Test(history, file_round_trip_and_strict_parse)
{
	SelftestHistory *h = history_with_baseline(), *back = new_history();
	SelftestResult bad = result(1.5, 2.25, 3, 4, 0.132, 0.007);
	char *s, *err = NULL;

	bad.verify_errors = 2;
	selftest_history_add(h, &bad, 300, T0 + 99);
	selftest_history_reset_baseline(h, T0 + 98);
	{
		SelftestHistory *other = history_with_baseline();

		h->baseline = other->baseline;
		free(other);
	}
	s = selftest_history_dump(h);
	cr_assert_not_null(s);
	/* Rounded at output: never 0.13200000000000001. */
	cr_expect(strstr(s, "\"write_p99_ms\":0.132"), "%s", s);
	for (const char *d = strchr(s, '.'); d; d = strchr(d + 1, '.'))
		cr_expect_lt(strspn(d + 1, "0123456789"), 4, "a long decimal at %.24s", d);
	cr_assert_eq(selftest_history_parse(s, strlen(s), back, &err), 0, "%s", err);
	cr_expect_eq(back->n, h->n);
	cr_expect_eq(back->total, h->total);
	cr_expect_eq(back->reset_at, T0 + 98);
	cr_expect_eq(back->baseline.runs, 5);
	cr_expect_float_eq(back->baseline.fig.seq_write_mbps, 1000, 1e-9);
	cr_expect_eq(back->runs[5].fig.verify_errors, 2);
	cr_expect_float_eq(back->runs[5].fig.write_p99_ms, 0.132, 1e-12);
	cr_expect_eq(back->runs[5].budget_ms, 300);
	cr_expect_eq(memcmp(back->runs, h->runs, h->n * sizeof(SelftestRun)), 0);

	/* One flipped digit: the CRC catches it. */
	char *p = strstr(s, "1000");
	cr_assert_not_null(p);
	p[0] = '2';
	cr_expect_eq(selftest_history_parse(s, strlen(s), back, &err), -EUCLEAN);
	cr_expect(err && strstr(err, "CRC"), "%s", err);
	free(err);
	err = NULL;
	free(s);

	/* Well-formed (CRC right) but wrong inside. */
	static const char *const wrong[][2] = {
		{ "{\"runs\":[],\"total\":0,\"version\":2}", "version" },
		{ "{\"runs\":{},\"total\":0,\"version\":1}", "runs" },
		{ "{\"runs\":[1],\"total\":0,\"version\":1}", "runs" },
		{ "{\"runs\":[1],\"total\":1,\"version\":1}", "run 0" },
		{ "{\"runs\":[{\"at\":1,\"budget_ms\":300,\"iodepth\":16,\"duration_ms\":1,\"file_bytes\":1,\"verify_errors\":0}],\"total\":1,\"version\":1}", "figure" },
		{ "{\"runs\":[{\"at\":1,\"budget_ms\":0,\"iodepth\":16}],\"total\":1,\"version\":1}", "budget_ms" },
		{ "{\"runs\":[{\"at\":1,\"budget_ms\":300,\"iodepth\":999}],\"total\":1,\"version\":1}", "iodepth" },
		{ "{\"runs\":[{\"at\":1,\"budget_ms\":300,\"iodepth\":16,\"method\":0}],\"total\":1,\"version\":1}", "method" },
		{ "{\"baseline\":[],\"runs\":[],\"total\":0,\"version\":1}", "baseline" },
		{ "{\"total\":0,\"version\":1,\"version\":1}", "JSON" },
		{ "[1]", "" },
	};
	for (size_t i = 0; i < sizeof(wrong) / sizeof(*wrong); i++) {
		char *text = crc_trailer_append(wrong[i][0]);
		int r;

		if (!text) /* not an object: no trailer can be made; feed it raw */
			text = strdup(wrong[i][0]);
		r = selftest_history_parse(text, strlen(text), back, &err);
		cr_expect_eq(r, -EUCLEAN, "accepted %s", wrong[i][0]);
		cr_expect(err && strstr(err, wrong[i][1]), "message for %s: %s", wrong[i][0], err);
		free(err);
		err = NULL;
		free(text);
	}
	free(h);
	free(back);
}

/*
 * An upgrade that changes how the figures are measured (SELFTEST_METHOD) must
 * not read as a change of the disk: a history written before "method"
 * existed (method 1) keeps its baseline on disk, but neither judges nor
 * trends this engine's runs, until five runs of this method replace it.
 */
Test(history, a_baseline_of_another_method_is_not_compared_and_is_replaced)
{
	SelftestHistory *h = history_with_baseline(), *old = new_history();
	SelftestResult r = result(1000, 800, 25000, 30000, 0.1, 0.2);
	char *s, *err = NULL, *p;
	json_t *j, *base;

	/* The same history as an older nvmevol wrote it: no "method" anywhere. */
	s = selftest_history_dump(h);
	cr_assert_not_null(s);
	cr_expect(strstr(s, "\"method\":2"), "%s", s);
	while ((p = strstr(s, ",\"method\":2")))
		memmove(p, p + strlen(",\"method\":2"), strlen(p + strlen(",\"method\":2")) + 1);
	*strstr(s, ",\"crc\":") = '\0';
	strcat(s, "}");
	p = crc_trailer_append(s);
	cr_assert_not_null(p);
	cr_assert_eq(selftest_history_parse(p, strlen(p), old, &err), 0, "%s", err);
	free(p);
	free(s);
	cr_expect_eq(old->baseline.runs, 5);
	cr_expect_eq(old->baseline.method, 1);
	cr_expect_eq(old->runs[0].fig.method, 1);
	cr_expect_not_null(selftest_history_baseline_for(h, 300, 16), "the control: this method's baseline is compared");
	cr_expect_null(selftest_history_baseline_for(old, 300, 16));
	cr_expect_eq(selftest_history_pending(old, 300, 16), 0, "old runs do not count toward the new baseline");

	/* A run at 0.6 of the old baseline's QD16 rates: no ratio, no trend, the old baseline shown as replaced. */
	for (int i = 0; i < 4; i++)
		cr_expect_not(selftest_history_add(old, &r, 300, T0 + 100 + i));
	j = selftest_history_status_json(old, &r, 300);
	cr_assert_not_null(j);
	base = json_object_get(j, "baseline");
	cr_expect_str_eq(json_string_value(json_object_get(base, "state")), "pending");
	cr_expect_eq(json_integer_value(json_object_get(base, "runs")), 4);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(base, "replaces"), "method")), 1);
	cr_expect_null(json_object_get(j, "ratio"));
	json_decref(j);
	{
		SelftestThresholds t = { .min_iops_ratio = 0.8 };

		cr_expect_eq(selftest_judge(&r, &t, &old->baseline.fig, NULL), SELFTEST_VERDICT_BELOW_BASELINE,
			     "the control: judged against the old baseline, the change of method would refuse");
		cr_expect_eq(selftest_judge(&r, &t, selftest_history_baseline_for(old, 300, 16), NULL),
			     SELFTEST_VERDICT_PASS);
	}

	/* The fifth run of this method makes the new baseline from this method's runs only. */
	cr_expect(selftest_history_add(old, &r, 300, T0 + 104));
	cr_assert_not_null(selftest_history_baseline_for(old, 300, 16));
	cr_expect_eq(old->baseline.method, SELFTEST_METHOD);
	cr_expect_float_eq(old->baseline.fig.rand_write_iops, 25000, 1e-9);
	free(h);
	free(old);
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

Test(history, load_save_and_a_damaged_file_is_kept_aside)
{
	char dir[] = "/tmp/nvmevol-history-XXXXXX", path[128];
	SelftestHistory *h = history_with_baseline(), *back = new_history();
	char *err = NULL;
	int dfd, fd;

	cr_assert_not_null(mkdtemp(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);

	/* No file: an empty history. */
	back->n = 9;
	cr_expect_eq(selftest_history_load(dfd, back, &err), 0);
	cr_expect_eq(back->n, 0);

	cr_assert_eq(selftest_history_save(dfd, h), 0);
	cr_expect_eq(count_entries(dir), 1, "no temporary file left");
	cr_assert_eq(selftest_history_load(dfd, back, &err), 0, "%s", err);
	cr_expect_eq(back->n, 5);
	cr_expect_eq(back->baseline.runs, 5);

	/* Damaged: moved aside, a fresh history, an error that says so. */
	snprintf(path, sizeof(path), "%s/%s", dir, SELFTEST_HISTORY_FILE);
	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "{\"version\":", 11), 11);
	close(fd);
	cr_expect_eq(selftest_history_load(dfd, back, &err), -EUCLEAN);
	cr_expect(err && strstr(err, "damaged") && strstr(err, ".damaged"), "%s", err);
	free(err);
	err = NULL;
	cr_expect_eq(back->n, 0);
	cr_expect_eq(back->baseline.runs, 0);
	snprintf(path, sizeof(path), "%s/%s.damaged", dir, SELFTEST_HISTORY_FILE);
	cr_expect_eq(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, SELFTEST_HISTORY_FILE);
	cr_expect_neq(access(path, F_OK), 0);

	/* A symlink in its place is not followed. */
	cr_assert_eq(symlink("/etc/passwd", path), 0);
	cr_expect_lt(selftest_history_load(dfd, back, &err), 0);
	free(err);

	close(dfd);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	cr_expect_eq(system(path), 0);
	free(h);
	free(back);
}

Test(history, table)
{
	SelftestHistory *h = history_with_baseline();
	SelftestResult r = result(500, 800, 40000, 50000, 0.1, 0.2);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	selftest_history_add(h, &r, 300, T0 + 60);
	cr_assert_not_null(f);
	selftest_history_print_table(f, h, "nvmevol-a (uuid)");
	cr_assert_eq(fclose(f), 0);
	cr_expect(strstr(buf, "of nvmevol-a (uuid): 6 runs"), "%s", buf);
	cr_expect(strstr(buf, "Baseline: median of 5 runs"), "%s", buf);
	cr_expect(strstr(buf, "500.0 (0.50)"), "%s", buf);
	cr_expect(strstr(buf, "2023-11-14T22:14:20Z"), "%s", buf);
	cr_expect(strstr(buf, "seq_write_mbps worsening") || strstr(buf, "seq_write_mbps steady"), "%s", buf);
	free(buf);
	free(h);
}

Test(history, figures_table_and_rounding)
{
	SelftestResult r = result(1234.56, 0, 41234.6, 0, 0.1324999, 0);

	cr_expect_str_eq(selftest_figure_info(SELFTEST_FIG_WRITE_P99)->key, "write_p99_ms");
	cr_expect_not(selftest_figure_info(SELFTEST_FIG_READ_P99)->higher_is_better);
	cr_expect_null(selftest_figure_info(_SELFTEST_FIG_MAX));
	cr_expect_float_eq(selftest_figure(&r, SELFTEST_FIG_SEQ_WRITE), 1234.6, 1e-9);
	cr_expect_float_eq(selftest_figure(&r, SELFTEST_FIG_RAND_WRITE_IOPS), 41235, 1e-9);
	cr_expect_float_eq(selftest_figure(&r, SELFTEST_FIG_WRITE_P99), 0.132, 1e-12);

	/* What the JSON prints. */
	json_t *o = selftest_result_to_json(&r);
	char *s = json_dumps(o, JSON_COMPACT | SELFTEST_JSON_REAL_PRECISION);
	cr_expect(strstr(s, "\"write_p99_ms\":0.132,"), "%s", s);
	cr_expect(strstr(s, "\"iodepth_engine\":\"aio\""), "%s", s);
	free(s);
	json_decref(o);
}
