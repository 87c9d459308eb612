/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text format writer, the per-endpoint counters and the
 * metrics file rendered from a snapshot, checked by real parsers: promtool
 * (Debian's prometheus package) and prometheus_client's parser (Debian's
 * python3-prometheus-client), both installed by tests/run-all.sh deps.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "settings.h"
#include "metrics/metrics.h"
#include "daemon/statedir.h"
#include "metrics/prom.h"
#include "metrics/stats.h"
#include "util/macro.h"
#include "util/time-util.h"

#define T0 1700000000

/* Values print as "%.0f" (integers below 2^53) or "%.15g" would print them, whatever path prints them. */
Test(prom, values_print_as_printf_would)
{
	static const double values[] = { 0.0, -0.0, 1, -1, 9, 10, 4096, -123456789, 9007199254740991.0, -9007199254740991.0,
					 9007199254740992.0, 1e300, 0.5, -2.25, 1234567890123.0, 18446744073709551615.0 };

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		double v = values[i];
		char want[64], *s = NULL, *line;
		size_t len = 0;
		Prom p;

		if (!islessgreater(v, trunc(v)) && fabs(v) < 9007199254740992.0)
			snprintf(want, sizeof(want), "v %.0f\n", v);
		else
			snprintf(want, sizeof(want), "v %.15g\n", v);
		cr_assert_eq(prom_begin(&p), 0);
		prom_family(&p, "v", "gauge", "h");
		prom_sample(&p, "", NULL, v);
		s = prom_end(&p, &len);
		cr_assert_not_null(s);
		line = strstr(s, "\nv ");
		cr_assert_not_null(line, "%s", s);
		cr_expect_str_eq(line + 1, want, "value %.17g", v);
		free(s);
	}
}

Test(prom, names_escapes_values_and_histograms)
{
	static const double bounds[] = { 0.001, 0.5 };
	static const uint64_t counts[] = { 2, 3, 1 };
	Prom p;
	char *s;
	size_t len = 0;

	cr_expect(prom_metric_name_is_valid("nvmevol_up"));
	cr_expect(prom_metric_name_is_valid("a:b_c9"));
	cr_expect_not(prom_metric_name_is_valid("9a"));
	cr_expect_not(prom_metric_name_is_valid("a-b"));
	cr_expect_not(prom_metric_name_is_valid(""));
	cr_expect(prom_label_name_is_valid("partition_label"));
	cr_expect_not(prom_label_name_is_valid("__name__"));
	cr_expect_not(prom_label_name_is_valid("a:b"));

	cr_assert_eq(prom_begin(&p), 0);
	prom_family(&p, "x_bytes", "gauge", "help with \\ and\nnewline");
	prom_sample(&p, "", PROM_LABELS("volume", "a\"b\\c\nd"), 1234567890123.0);
	prom_sample(&p, "", NULL, 0.000132);
	prom_sample(&p, "", NULL, 1.0 / 0.0);
	prom_family(&p, "y_seconds", "histogram", "h");
	prom_histogram(&p, PROM_LABELS("endpoint", "E"), bounds, counts, 2, 0.75);
	s = prom_end(&p, &len);
	cr_assert_not_null(s);
	cr_expect_eq(strlen(s), len);
	cr_expect_str_eq(s, "# HELP x_bytes help with \\\\ and\\nnewline\n"
			    "# TYPE x_bytes gauge\n"
			    "x_bytes{volume=\"a\\\"b\\\\c\\nd\"} 1234567890123\n"
			    "x_bytes 0.000132\n"
			    "x_bytes +Inf\n"
			    "# HELP y_seconds h\n"
			    "# TYPE y_seconds histogram\n"
			    "y_seconds_bucket{endpoint=\"E\",le=\"0.001\"} 2\n"
			    "y_seconds_bucket{endpoint=\"E\",le=\"0.5\"} 5\n"
			    "y_seconds_bucket{endpoint=\"E\",le=\"+Inf\"} 6\n"
			    "y_seconds_sum{endpoint=\"E\"} 0.75\n"
			    "y_seconds_count{endpoint=\"E\"} 6\n");
	free(s);

	/* A bad name or label fails the whole text: no half-valid file is ever written. */
	cr_assert_eq(prom_begin(&p), 0);
	prom_family(&p, "ok", "gauge", "h");
	prom_sample(&p, "", PROM_LABELS("bad-label", "v"), 1);
	cr_expect_null(prom_end(&p, NULL));
	cr_assert_eq(prom_begin(&p), 0);
	prom_family(&p, "bad name", "gauge", "h");
	cr_expect_null(prom_end(&p, NULL));
}

Test(stats, requests_histogram_and_errors)
{
	StatsSnapshot st;

	stats_reset();
	stats_request(API_MOUNT, STATS_RESULT_OK, 300000);        /* 0.3 ms: first bucket */
	stats_request(API_MOUNT, STATS_RESULT_OK, 400000000);     /* 0.4 s */
	stats_request(API_MOUNT, STATS_RESULT_ERROR, 60000000000); /* 60 s: +Inf */
	stats_request(-22, STATS_RESULT_REFUSED, 1000);
	stats_error(stats_error_kind_from_errno(-EBUSY));
	stats_error(stats_error_kind_from_errno(-ENOSPC));
	stats_error(stats_error_kind_from_errno(-EPIPE));
	stats_snapshot(&st);
	cr_expect_eq(st.requests[API_MOUNT][STATS_RESULT_OK], 2);
	cr_expect_eq(st.requests[API_MOUNT][STATS_RESULT_ERROR], 1);
	cr_expect_eq(st.requests[STATS_ENDPOINT_UNKNOWN][STATS_RESULT_REFUSED], 1);
	cr_expect_eq(st.buckets[API_MOUNT][0], 1);
	cr_expect_eq(st.buckets[API_MOUNT][9], 1, "0.4 s falls in (0.25, 0.5]");
	cr_expect_eq(st.buckets[API_MOUNT][STATS_LATENCY_BUCKETS], 1);
	cr_expect_eq(st.latency_sum_ns[API_MOUNT], 60400300000ULL);
	cr_expect_eq(st.errors[STATS_ERROR_IN_USE], 1);
	cr_expect_eq(st.errors[STATS_ERROR_NO_SPACE], 1);
	cr_expect_eq(st.errors[STATS_ERROR_OTHER], 1);
	cr_expect_str_eq(stats_error_kind_to_string(STATS_ERROR_SELFTEST_DATA), "selftest_data_error");
}

static SelftestResult figures(double wr)
{
	return (SelftestResult){
		.seq_write_mbps = wr, .seq_read_mbps = 800, .rand_write_iops = 40000, .rand_read_iops = 50000,
		.write_p50_ms = 0.05, .write_p99_ms = 0.132, .read_p50_ms = 0.04, .read_p99_ms = 0.2,
		.iodepth = 16, .method = SELFTEST_METHOD, .duration_ms = 301, .file_bytes = 48 << 20,
	};
}

static void fill_snapshot(MetricsSnapshot *s)
{
	MetricsPartition *p;
	MetricsVolume *v;

	*s = (MetricsSnapshot){ .start_time = T0 - 60 };
	s->parts = calloc(2, sizeof(MetricsPartition));
	s->vols = calloc(2, sizeof(MetricsVolume));
	cr_assert(s->parts && s->vols);
	s->n_parts = 2;
	s->n_vols = 2;

	p = &s->parts[0];
	strcpy(p->uuid, "11111111-2222-3333-4444-555555555555");
	strcpy(p->label, "nvmevol-a");
	strcpy(p->device, "/dev/loop7");
	p->present = true;
	p->has_space = true;
	p->size_bytes = 1 << 30;
	p->free_bytes = 900 << 20;
	p->inodes = 524288;
	p->inodes_free = 524000;
	p->volumes = 2;
	p->health = -1;
	p->has_selftest = true;
	p->selftest = figures(500);
	p->selftest_at = T0;
	p->verdict = SELFTEST_VERDICT_BELOW_BASELINE;
	p->budget_ms = 300;
	p->history = calloc(1, sizeof(SelftestHistory));
	cr_assert_not_null(p->history);
	for (int i = 0; i < 5; i++) {
		SelftestResult r = figures(1000);
		selftest_history_add(p->history, &r, 300, T0 - 100 + i);
	}
	selftest_history_add(p->history, &p->selftest, 300, T0);

	p = &s->parts[1];
	strcpy(p->uuid, "66666666-2222-3333-4444-555555555555");
	strcpy(p->label, "nvmevol-b");
	strcpy(p->device, "/dev/loop8");
	p->health = -1;

	v = &s->vols[0];
	cr_assert_eq(metrics_snapshot_add_string(s, "pgdata", &v->name), 0);
	cr_assert_eq(metrics_snapshot_add_string(s, s->parts[0].uuid, &v->partition), 0);
	cr_assert_eq(metrics_snapshot_add_string(s, "nvmevol-a", &v->partition_label), 0);
	v->state = "mounted";
	v->mounts = 2;
	v->size_limit = 10ULL << 30;
	v->has_usage = true;
	v->used_bytes = 4096;
	v->used_inodes = 3;
	v->created_at = T0 - 3600;
	v->has_verdict = true;
	v->verdict = SELFTEST_VERDICT_PASS;
	v = &s->vols[1];
	cr_assert_eq(metrics_snapshot_add_string(s, "odd\"name", &v->name), 0);
	cr_assert_eq(metrics_snapshot_add_string(s, s->parts[1].uuid, &v->partition), 0);
	cr_assert_eq(metrics_snapshot_add_string(s, "", &v->partition_label), 0);
	v->state = "partition-missing";
	metrics_snapshot_count_state(s, "mounted");
	metrics_snapshot_count_state(s, "partition-missing");
	metrics_snapshot_count_state(s, "ready"); /* one beyond the per-volume limit */
}

static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/nvmevol-metrics-XXXXXX");
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

/* Runs "@before @path @after" in a shell; its exit status. */
static int sh(const char *before, const char *path, const char *after)
{
	char *cmd = NULL;
	int st;

	cr_assert_gt(asprintf(&cmd, "%s %s %s", before, path, after), 0);
	st = system(cmd);
	free(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(metrics, render_is_valid_for_promtool_and_the_python_parser)
{
	MetricsSnapshot s;
	StatsSnapshot st;
	char *text, *path;

	if (access("/usr/bin/promtool", X_OK) != 0 || sh("/usr/bin/python3 -c 'import prometheus_client'", "", "2>/dev/null") != 0)
		cr_skip_test("needs promtool (package prometheus) and python3-prometheus-client: tests/run-all.sh deps installs them");
	stats_reset();
	stats_request(API_GET, STATS_RESULT_OK, 1000000);
	stats_error(STATS_ERROR_SELFTEST_DATA);
	stats_snapshot(&st);
	fill_snapshot(&s);
	text = metrics_render(&s, &st, T0 + 5, NULL);
	cr_assert_not_null(text);
	path = write_temp(text);

	/* promtool's linter: names, units, HELP/TYPE, counters ending in _total. */
	cr_expect_eq(sh("promtool check metrics <", path, ">&2"), 0, "promtool rejected:\n%s", text);

	/* Values as a scraper reads them. */
	cr_expect_eq(sh("/usr/bin/python3 -", path, ">&2 <<'EOF'\n"
			"import sys\n"
			"from prometheus_client.parser import text_string_to_metric_families\n"
			"v = {}\n"
			"for fam in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
			"    for s in fam.samples:\n"
			"        v[(s.name, tuple(sorted(s.labels.items())))] = s.value\n"
			"P = (('partition', '11111111-2222-3333-4444-555555555555'), ('partition_label', 'nvmevol-a'))\n"
			"def get(name, *extra):\n"
			"    return v[(name, tuple(sorted(P + extra)))]\n"
			"assert v[('nvmevol_up', ())] == 1\n"
			"assert get('nvmevol_partition_size_bytes') == 2**30\n"
			"assert get('nvmevol_partition_selftest_sequential_bytes_per_second', ('op', 'write')) == 500 * 2**20\n"
			"assert abs(get('nvmevol_partition_selftest_latency_seconds', ('op', 'write'), ('percentile', '99')) - 0.000132) < 1e-12\n"
			"assert get('nvmevol_partition_selftest_random_operations_per_second', ('iodepth', '16'), ('op', 'read')) == 50000\n"
			"assert get('nvmevol_partition_selftest_baseline_sequential_bytes_per_second', ('op', 'write')) == 1000 * 2**20\n"
			"assert get('nvmevol_partition_selftest_baseline_ratio', ('figure', 'seq_write_mbps')) == 0.5\n"
			"assert get('nvmevol_partition_selftest_verdict', ('verdict', 'below-baseline')) == 1\n"
			"assert get('nvmevol_partition_selftest_verdict', ('verdict', 'pass')) == 0\n"
			"assert get('nvmevol_partition_selftest_runs_total') == 6\n"
			"assert v[('nvmevol_volume_used_bytes', (('partition', P[0][1]), ('volume', 'pgdata')))] == 4096\n"
			"assert v[('nvmevol_volume_size_limit_bytes', (('partition', P[0][1]), ('volume', 'pgdata')))] == 10 * 2**30\n"
			"assert v[('nvmevol_volume_mounts', (('partition', P[0][1]), ('volume', 'pgdata')))] == 2\n"
			"assert ('nvmevol_volume_mounts', (('partition', '66666666-2222-3333-4444-555555555555'), ('volume', 'odd\"name'))) in v\n"
			"assert v[('nvmevol_volumes', (('state', 'ready'),))] == 1\n"
			"assert v[('nvmevol_metrics_volumes_omitted', ())] == 1\n"
			"assert v[('nvmevol_errors_total', (('kind', 'selftest_data_error'),))] == 1\n"
			"assert v[('nvmevol_requests_total', (('endpoint', 'VolumeDriver.Get'), ('result', 'ok')))] == 1\n"
			"assert v[('nvmevol_request_duration_seconds_bucket', (('endpoint', 'VolumeDriver.Get'), ('le', '0.001')))] == 1\n"
			"assert v[('nvmevol_start_time_seconds', ())] == 1700000000 - 60\n"
			"EOF"), 0, "values differ from the snapshot:\n%s", text);

	/* The partition without a self-test has no figures, and nothing claims it has. */
	cr_expect_null(strstr(text, "latency_seconds{partition=\"66666666"), "%s", text);
	unlink(path);
	free(path);
	free(text);
	metrics_snapshot_done(&s);
}

/* The counters fill_snapshot's file is rendered with: one Get, one self-test data error. */
static void fixed_stats(StatsSnapshot *st)
{
	stats_reset();
	stats_request(API_GET, STATS_RESULT_OK, 1000000);
	stats_error(STATS_ERROR_SELFTEST_DATA);
	stats_snapshot(st);
}

/* A whole file as a string, or NULL. */
static char *read_all(const char *path)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	if (getdelim(&text, &len, '\0', f) < 0) {
		free(text);
		text = NULL;
	}
	fclose(f);
	return text;
}

static char *golden_text(void)
{
	const char *dir = getenv("NVMEVOL_TEST_DATA");
	char path[512], *text;

	cr_assert_not_null(dir, "NVMEVOL_TEST_DATA is set by meson (tests/data)");
	snprintf(path, sizeof(path), "%s/metrics-golden.prom", dir);
	text = read_all(path);
	cr_assert_not_null(text, "%s: %m", path);

	/* The file says @VERSION@ where the build's version goes. */
	char *at = strstr(text, "@VERSION@"), *out = NULL;

	cr_assert_not_null(at);
	*at = '\0';
	cr_assert_gt(asprintf(&out, "%s%s%s", text, PROJECT_VERSION, at + strlen("@VERSION@")), 0);
	free(text);
	return out;
}

/*
 * tests/data/metrics-golden.prom is what the renderer that built the file as one
 * string in memory (before issue 23) gave for fill_snapshot: the streamed file
 * must say the same, byte for byte.
 */
Test(metrics, render_is_byte_for_byte_the_golden_file)
{
	MetricsSnapshot s;
	StatsSnapshot st;
	_cleanup_free_ char *golden = golden_text(), *text = NULL;

	fixed_stats(&st);
	fill_snapshot(&s);
	text = metrics_render(&s, &st, T0 + 5, NULL);
	cr_assert_not_null(text);
	cr_expect_str_eq(text, golden);
	metrics_snapshot_done(&s);
}

static int collect_calls;

static int collect_fake(void *userdata, MetricsSnapshot *ret)
{
	collect_calls++;
	fill_snapshot(ret);
	return 0;
}

Test(metrics, writer_writes_at_start_after_a_change_and_leaves_up_0_at_stop)
{
	char dir[] = "/tmp/nvmevol-metricsdir-XXXXXX", sub[128], file[160], cmd[200];
	MetricsWriter *w = NULL;
	char *err = NULL, buf[4096];
	struct stat st;
	int calls, fd;
	ssize_t n;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/metrics", dir);
	snprintf(file, sizeof(file), "%s/%s", sub, METRICS_FILE);

	/* A missing parent is an error that names the path. */
	cr_expect_lt(metrics_writer_start("/nonexistent-nvmevol/metrics", 60, collect_fake, NULL, &w, &err), 0);
	cr_expect(err && strstr(err, "/nonexistent-nvmevol/metrics"), "%s", err);
	free(err);
	err = NULL;

	collect_calls = 0;
	cr_assert_eq(metrics_writer_start(sub, 60, collect_fake, NULL, &w, &err), 0, "%s", err);
	cr_assert_eq(stat(file, &st), 0, "written at start");
	cr_expect_eq(st.st_mode & 0777, 0644);
	cr_expect_eq(collect_calls, 1);

	/* A change is written within the minimum gap, not at the next interval (60 s). */
	calls = collect_calls;
	metrics_writer_notify(w);
	for (int i = 0; i < 40 && collect_calls == calls; i++)
		usleep(100000);
	cr_expect_gt(collect_calls, calls, "not rewritten after a change");

	w = metrics_writer_stop(w);
	fd = open(file, O_RDONLY);
	cr_assert_geq(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_expect(strstr(buf, "\nnvmevol_up 0\n"), "%s", buf);
	cr_expect_null(strstr(buf, "pgdata"), "a stopped plugin's file holds no stale volumes");
	snprintf(cmd, sizeof(cmd), "ls -A %s | grep -v '^%s$' && exit 1 || exit 0", sub, METRICS_FILE);
	cr_expect_eq(system(cmd), 0, "only the .prom file is left");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0, "cannot remove %s", dir);
}

/* The number after "\n@name " in @text. */
static int64_t sample_value(const char *text, const char *name)
{
	char needle[128];
	const char *at;
	long long v = -1;

	snprintf(needle, sizeof(needle), "\n%s ", name);
	at = strstr(text, needle);
	cr_assert_not_null(at, "%s missing", name);
	cr_assert_eq(sscanf(at + strlen(needle), "%lld", &v), 1);
	return v;
}

Test(metrics, the_streamed_file_is_what_the_renderer_gives)
{
	char dir[] = "/tmp/nvmevol-metricsdir-XXXXXX", file[160], cmd[200];
	MetricsWriter *w = NULL;
	MetricsWriterCounters c;
	MetricsSnapshot s;
	StatsSnapshot st;
	char *err = NULL, *text, *want;
	size_t len;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/%s", dir, METRICS_FILE);
	fixed_stats(&st);
	cr_assert_eq(metrics_writer_start(dir, 60, collect_fake, NULL, &w, &err), 0, "%s", err);
	text = read_all(file);
	cr_assert_not_null(text);

	/* The same snapshot, counters, start and write times rendered as one string. */
	fill_snapshot(&s);
	s.start_time = sample_value(text, "nvmevol_start_time_seconds");
	want = metrics_render(&s, &st, sample_value(text, "nvmevol_metrics_timestamp_seconds"), &len);
	cr_assert_not_null(want);
	cr_expect_str_eq(text, want);
	metrics_counters(&c);
	cr_expect_eq(c.writes, 1);
	cr_expect_eq(c.last_bytes, len, "the counter says %llu bytes, the file has %zu", (unsigned long long)c.last_bytes, len);
	metrics_snapshot_done(&s);
	free(want);
	free(text);
	metrics_writer_stop(w);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(metrics, a_burst_of_changes_is_a_few_writes)
{
	char dir[] = "/tmp/nvmevol-metricsdir-XXXXXX", cmd[200];
	MetricsWriter *w = NULL;
	MetricsWriterCounters c;
	char *err = NULL;
	uint64_t t0, elapsed_ms, bound;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(metrics_writer_start(dir, 3600, collect_fake, NULL, &w, &err), 0, "%s", err);
	t0 = now_mono_ms();
	for (int i = 0; i < 1000; i++)
		metrics_writer_notify(w);
	/* Until the burst is written (the interval is an hour: only a change writes). */
	for (int i = 0; i < 100; i++) {
		metrics_counters(&c);
		if (c.writes > 1)
			break;
		usleep(50000);
	}
	elapsed_ms = now_mono_ms() - t0;
	metrics_counters(&c);
	cr_expect_eq(c.changes, 1000);
	cr_expect_gt(c.writes, 1, "the burst was never written");
	/* The start's write, then at most one per METRICS_MIN_GAP_MS of the burst and one after it. */
	bound = 1 + elapsed_ms / METRICS_MIN_GAP_MS + 2;
	cr_expect_leq(c.writes, bound, "%llu writes for 1000 changes in %llu ms", (unsigned long long)c.writes,
		      (unsigned long long)elapsed_ms);
	metrics_writer_stop(w);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_expect_eq(system(cmd), 0);
}

Test(metrics, settings)
{
	Settings *c = NULL;
	char *err = NULL;

	unsetenv("NVMEVOL_METRICS_DIR");
	unsetenv("NVMEVOL_METRICS_INTERVAL_SECONDS");
	unsetenv("NVMEVOL_SELFTEST_MIN_WRITE_RATIO");
	setenv("NVMEVOL_STATE_DIR", "/srv/state", 1);
	cr_assert_eq(settings_from_env(&c, &err), 0, "%s", err);
	cr_expect_null(c->metrics_dir, "the default waits for the state directory");
	cr_assert_eq(statedir_resolve(c, &err), 0, "%s", err);
	cr_expect_str_eq(c->metrics_dir, "/srv/state/metrics");
	cr_expect_eq(c->metrics_interval_s, 15);
	cr_expect_eq(c->selftest_pool.min_write_ratio, 0);
	c = settings_free(c);

	setenv("NVMEVOL_METRICS_DIR", "off", 1);
	setenv("NVMEVOL_METRICS_INTERVAL_SECONDS", "1", 1);
	setenv("NVMEVOL_SELFTEST_MIN_WRITE_RATIO", "0.7", 1);
	setenv("NVMEVOL_SELFTEST_MAX_P99_RATIO", "", 1);
	cr_assert_eq(settings_from_env(&c, &err), 0, "%s", err);
	cr_expect_str_eq(c->metrics_dir, "");
	cr_expect_eq(c->metrics_interval_s, 1);
	cr_expect_float_eq(c->selftest_pool.min_write_ratio, 0.7, 1e-12);
	cr_expect_eq(c->selftest_pool.max_p99_ratio, 0, "empty is none");
	c = settings_free(c);

	static const char *const bad[][3] = {
		{ "NVMEVOL_METRICS_DIR", "relative/dir", "NVMEVOL_METRICS_DIR='relative/dir' must be an absolute path" },
		{ "NVMEVOL_METRICS_INTERVAL_SECONDS", "0", "NVMEVOL_METRICS_INTERVAL_SECONDS" },
		{ "NVMEVOL_SELFTEST_MIN_WRITE_RATIO", "70%", "NVMEVOL_SELFTEST_MIN_WRITE_RATIO: invalid value '70%'" },
		{ "NVMEVOL_SELFTEST_MAX_P99_RATIO", "0.5", "NVMEVOL_SELFTEST_MAX_P99_RATIO" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		unsetenv("NVMEVOL_METRICS_DIR");
		unsetenv("NVMEVOL_METRICS_INTERVAL_SECONDS");
		unsetenv("NVMEVOL_SELFTEST_MIN_WRITE_RATIO");
		unsetenv("NVMEVOL_SELFTEST_MAX_P99_RATIO");
		setenv(bad[i][0], bad[i][1], 1);
		cr_expect_eq(settings_from_env(&c, &err), -EINVAL, "accepted %s=%s", bad[i][0], bad[i][1]);
		cr_expect(err && strstr(err, bad[i][2]), "%s", err);
		free(err);
		err = NULL;
	}
	unsetenv(bad[3][0]);
	unsetenv("NVMEVOL_STATE_DIR");
}
