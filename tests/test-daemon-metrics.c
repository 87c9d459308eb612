/* SPDX-License-Identifier: MIT */
/*
 * The metrics file and the self-test history of the real daemon on loop XFS:
 * the file parsed by promtool and prometheus_client and its values compared
 * with Status; a reader never sees half a file while volumes churn; the
 * history and its baseline survive a restart and move with the disk to
 * another daemon.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "metrics/metrics.h"
#include "util/time-util.h"

static Testbed tb, tb2;
static ClientReply rep;

static void setup(void)
{
	testbed_require_root();
	testbed_init_or_fail(&tb, 1);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb2);
	testbed_destroy(&tb);
}

TestSuite(metrics_daemon, .init = setup, .fini = teardown, .timeout = 240);

static void prom_path(Testbed *t, char *buf, size_t len)
{
	snprintf(buf, len, "%s/metrics/nvmevol.prom", t->state);
}

static char *read_all(const char *path)
{
	char *buf = NULL;
	size_t cap = 0, len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t n;

		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap + 1);
			cr_assert_not_null(buf);
		}
		n = read(fd, buf + len, cap - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static int run_sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Waits until the metrics file says @needle (it is rewritten within a second of a change). */
static char *wait_for(Testbed *t, const char *needle)
{
	char path[400];

	prom_path(t, path, sizeof(path));
	for (int i = 0; i < 50; i++) {
		char *s = read_all(path);

		if (s && strstr(s, needle))
			return s;
		free(s);
		usleep(100000);
	}
	cr_assert_fail("metrics file %s never showed '%s'", path, needle);
	return NULL;
}

static const char *const fast_env[] = { "NVMEVOL_SELFTEST=warn", "NVMEVOL_SELFTEST_CACHE_SECONDS=0",
					"NVMEVOL_SELFTEST_BUDGET_MS=100", NULL };

Test(metrics_daemon, file_parses_and_agrees_with_status)
{
	char path[400], cmd[8192], *text;
	json_t *st;

	testbed_start_or_fail(&tb, fast_env);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"mv1\",\"Opts\":{\"min_write_ratio\":\"0.5\"}}"), 0, "%s",
		     client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"mv2\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"mv1\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"mv1\",\"ID\":\"b\"}"), 0);
	free(wait_for(&tb, "nvmevol_volume_mounts{volume=\"mv1\""));
	text = wait_for(&tb, "state=\"mounted\"} 1");
	free(text);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"mv1\"}"), 0);
	st = json_object_get(json_object_get(rep.json, "Volume"), "Status");
	cr_assert_not_null(json_object_get(st, "selftest"), "%s", rep.body);
	/* Status of the same moment, as the file the metrics writer leaves: compared by the Python parser. */
	cr_assert_eq(json_dump_file(st, "/tmp/nvmevol-metrics-status.json", 0), 0);
	prom_path(&tb, path, sizeof(path));
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s >&2", path);
	if (access("/usr/bin/promtool", X_OK) == 0)
		cr_expect_eq(run_sh(cmd), 0, "promtool rejects the daemon's file");
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 - %s /tmp/nvmevol-metrics-status.json >&2 <<'EOF'\n"
		 "import json, sys, datetime\n"
		 "from prometheus_client.parser import text_string_to_metric_families\n"
		 "v = {}\n"
		 "for fam in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
		 "    for s in fam.samples:\n"
		 "        v[(s.name, tuple(sorted(s.labels.items())))] = s.value\n"
		 "st = json.load(open(sys.argv[2]))\n"
		 "p = st['partition']; t = st['selftest']\n"
		 "P = (('partition', p['uuid']), ('partition_label', p['label']))\n"
		 "V = (('partition', p['uuid']), ('volume', 'mv1'))\n"
		 "def get(name, *extra, base=P):\n"
		 "    return v[(name, tuple(sorted(base + extra)))]\n"
		 "assert get('nvmevol_volume_mounts', base=V) == st['mount_count'] == 2, st['mount_count']\n"
		 "assert get('nvmevol_volume_info', ('partition_label', p['label']), ('state', st['state']), base=V) == 1\n"
		 "assert get('nvmevol_partition_size_bytes') == p['size_bytes']\n"
		 "assert abs(get('nvmevol_partition_free_bytes') - p['free_bytes']) <= 64 << 20\n"
		 "assert get('nvmevol_partition_selftest_sequential_bytes_per_second', ('op', 'write')) == t['seq_write_mbps'] * 2**20\n"
		 "assert get('nvmevol_partition_selftest_sequential_bytes_per_second', ('op', 'read')) == t['seq_read_mbps'] * 2**20\n"
		 "assert get('nvmevol_partition_selftest_random_operations_per_second', ('op', 'write'), ('iodepth', '16')) == t['rand_write_iops']\n"
		 "if t['read_p99_ms'] is None:\n"
		 "    assert not any(k[0] == 'nvmevol_partition_selftest_latency_seconds' and ('percentile', '99') in k[1] and ('op', 'read') in k[1] for k in v)\n"
		 "else:\n"
		 "    assert abs(get('nvmevol_partition_selftest_latency_seconds', ('op', 'read'), ('percentile', '99')) - t['read_p99_ms'] / 1000) < 1e-12\n"
		 "assert get('nvmevol_volume_selftest_verdict', ('verdict', t['verdict']), base=V) == 1\n"
		 "assert get('nvmevol_partition_selftest_runs_total') == t['history']['runs'] == 1\n"
		 "assert get('nvmevol_partition_selftest_baseline_established') == 0\n"
		 "assert t['baseline_note']['runs_needed'] == 5\n"
		 "created = datetime.datetime.fromisoformat(st['created_at'].replace('Z', '+00:00')).timestamp()\n"
		 "assert get('nvmevol_volume_created_timestamp_seconds', base=V) == created\n"
		 "assert v[('nvmevol_volumes', (('state', 'mounted'),))] == 1\n"
		 "assert v[('nvmevol_volumes', (('state', 'ready'),))] == 1\n"
		 "assert v[('nvmevol_requests_total', (('endpoint', 'VolumeDriver.Mount'), ('result', 'ok')))] == 2\n"
		 "assert v[('nvmevol_request_duration_seconds_count', (('endpoint', 'VolumeDriver.Create'),))] == 2\n"
		 "EOF",
		 path);
	cr_expect_eq(run_sh(cmd), 0, "metrics disagree with Status (see the assertion above)");
	unlink("/tmp/nvmevol-metrics-status.json");
}

/* ---- A reader during heavy updates ---- */

static atomic_bool stop_reader;
static atomic_int reads_done, bad_reads;
static char bad_sample[256];

/* One consistent file: complete lines, and as many volume series as the count by state says. */
static bool file_is_whole(const char *s)
{
	size_t len = strlen(s), info = 0;
	double by_state = 0;
	const char *p;

	if (len == 0 || s[len - 1] != '\n' || strncmp(s, "# HELP nvmevol_up ", 18) != 0)
		return false;
	if (!strstr(s, "\nnvmevol_request_duration_seconds_count{endpoint=\"unknown\"}"))
		return false;
	for (p = s; (p = strstr(p, "\nnvmevol_volumes{state=\"")); p++)
		by_state += atof(strchr(strchr(p, '}'), ' ') + 1);
	for (p = s; (p = strstr(p, "\nnvmevol_volume_info{")); p++)
		info++;
	return fabs((double)info - by_state) < 0.5;
}

static void *reader(void *arg)
{
	const char *path = arg;

	while (!atomic_load(&stop_reader)) {
		char *s = read_all(path);

		if (s) {
			atomic_fetch_add(&reads_done, 1);
			if (!file_is_whole(s)) {
				if (atomic_fetch_add(&bad_reads, 1) == 0)
					snprintf(bad_sample, sizeof(bad_sample), "%.*s", 200, s + (strlen(s) > 200 ? strlen(s) - 200 : 0));
			}
		}
		free(s);
	}
	return NULL;
}

Test(metrics_daemon, a_reader_never_sees_half_a_file)
{
	static const char *const env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_METRICS_INTERVAL_SECONDS=1", NULL };
	char path[400];
	pthread_t t;

	testbed_start_or_fail(&tb, env);
	prom_path(&tb, path, sizeof(path));
	/* Enough volumes that a file is tens of KiB: a torn write would show. */
	for (int i = 0; i < 60; i++)
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"base%02d\"}", i), 0, "%s", client_err(&rep));
	atomic_store(&stop_reader, false);
	cr_assert_eq(pthread_create(&t, NULL, reader, path), 0);
	for (int round = 0; round < 25; round++) {
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"churn%02d\"}", round), 0);
		cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"churn%02d\",\"ID\":\"x\"}", round), 0);
		cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"churn%02d\",\"ID\":\"x\"}", round), 0);
		cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"churn%02d\"}", round), 0);
		usleep(100000);
	}
	atomic_store(&stop_reader, true);
	pthread_join(t, NULL);
	cr_expect_gt(atomic_load(&reads_done), 100, "the reader read only %d times", atomic_load(&reads_done));
	cr_expect_eq(atomic_load(&bad_reads), 0, "%d of %d reads saw a torn file, e.g. ending in: %s", atomic_load(&bad_reads),
		     atomic_load(&reads_done), bad_sample);
	/* Only the file is there: no temp file left behind. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "test \"$(ls -A %s/metrics)\" = nvmevol.prom", tb.state);
	cr_expect_eq(run_sh(cmd), 0, "stray files in the metrics directory");
}

/* ---- History ---- */

/* mount_and_history() returns a reference: dropped at the next call or the end. */

static json_t *mount_and_history(Testbed *t, const char *name, int i)
{
	json_t *st;

	cr_assert_eq(tb_call(t, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"m%d\"}", name, i), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(t, "Get", &rep, "{\"Name\":\"%s\"}", name), 0);
	st = json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "selftest");
	st = json_incref(json_object_get(st, "history")); /* the next call frees the reply */
	cr_assert_eq(tb_call(t, "Unmount", &rep, "{\"Name\":\"%s\",\"ID\":\"m%d\"}", name, i), 0);
	return st;
}

Test(metrics_daemon, history_survives_restart_and_moves_with_the_disk)
{
	char mp[400], hist_file[500];
	json_t *h;
	long runs;

	testbed_start_or_fail(&tb, fast_env);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"hv\"}"), 0);
	for (int i = 0; i < 5; i++) {
		h = mount_and_history(&tb, "hv", i);
		cr_assert_not_null(h, "no history in Status: %s", rep.body);
		cr_expect_eq(json_integer_value(json_object_get(h, "runs")), i + 1);
		json_decref(h);
	}
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"hv\"}"), 0);
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(hist_file, sizeof(hist_file), "%s/nvmevol/selftest-history.json", mp);
	cr_assert_eq(access(hist_file, F_OK), 0, "no history file on the partition");

	/* A restart of the same daemon: the history and its baseline are read back from the disk. */
	cr_assert_eq(testbed_stop(&tb, SIGTERM), 0);
	testbed_start_or_fail(&tb, fast_env);
	/* Before any mount: the metrics show the partition's last run and baseline from its history. */
	free(wait_for(&tb, "nvmevol_partition_selftest_baseline_established{"));
	{
		char *text = wait_for(&tb, "nvmevol_partition_selftest_timestamp_seconds{");

		cr_expect(strstr(text, "nvmevol_partition_selftest_runs_total{") &&
				  strstr(text, "nvmevol_partition_selftest_verdict{"),
			  "%s", text);
		free(text);
	}
	h = mount_and_history(&tb, "hv", 10);
	cr_assert_not_null(h, "%s", rep.body);
	cr_expect_eq(json_integer_value(json_object_get(h, "runs")), 6, "%s", rep.body);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(h, "baseline"), "state")), "established",
			 "%s", rep.body);
	cr_expect_not_null(json_object_get(json_object_get(h, "ratio"), "seq_write_mbps"), "%s", rep.body);
	json_decref(h);

	/* The disk moves to another daemon (its own state directory: another host, as far as nvmevol knows). */
	cr_assert_eq(testbed_stop(&tb, SIGTERM), 0);
	(void)umount2(mp, MNT_DETACH);
	cr_assert_eq(testbed_detach(&tb, 0), 0);
	cr_assert_eq(testbed_init(&tb2, 0), 0);
	snprintf(tb2.prefix, sizeof(tb2.prefix), "%s", tb.prefix);
	tb2.parts[0] = tb.parts[0];
	tb2.n_parts = 1;
	cr_assert_eq(testbed_attach(&tb2, 0), 0);
	tb.n_parts = 0; /* tb2 owns the loop device now; tb's directory (the image) goes last */
	testbed_start_or_fail(&tb2, fast_env);
	h = mount_and_history(&tb2, "hv", 20);
	cr_assert_not_null(h, "%s", rep.body);
	runs = (long)json_integer_value(json_object_get(h, "runs"));
	cr_expect_eq(runs, 7, "the history did not travel: %s", rep.body);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(h, "baseline"), "state")), "established");
	json_decref(h);
}

/* The "metrics" object of `nvmevol status --json`: the writer's counters. */
static json_t *writer_counters(Testbed *t)
{
	static char out[1 << 20];
	const char *const args[] = { "status", "--json", NULL };
	char err[4096];
	json_t *j, *m;

	cr_assert_eq(testbed_admin(t, args, out, sizeof(out), err, sizeof(err)), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	m = json_incref(json_object_get(j, "metrics"));
	json_decref(j);
	cr_assert(json_is_object(m), "status has no metrics object: %s", out);
	return m;
}

/*
 * Each Create asks for a write; the writer coalesces them: a burst is about
 * one write per second it lasts, not one per Create (counted, not timed: the
 * bound comes from the burst's own duration).
 */
Test(metrics_daemon, a_burst_of_creates_is_a_few_writes_of_the_file)
{
	const char *const env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_METRICS_INTERVAL_SECONDS=3600", NULL };
	uint64_t t0, elapsed_ms;
	json_int_t writes0, writes, changes;
	json_t *c;

	testbed_start_or_fail(&tb, env);
	c = writer_counters(&tb);
	writes0 = json_integer_value(json_object_get(c, "writes"));
	json_decref(c);
	t0 = now_mono_ms();
	for (int i = 0; i < 200; i++)
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"burst%03d\"}", i), 0, "%s", client_err(&rep));
	free(wait_for(&tb, "nvmevol_volume_info{volume=\"burst199\""));
	elapsed_ms = now_mono_ms() - t0;
	c = writer_counters(&tb);
	writes = json_integer_value(json_object_get(c, "writes"));
	changes = json_integer_value(json_object_get(c, "changes"));
	cr_expect_geq(changes, 200, "%lld changes counted", (long long)changes);
	cr_expect_leq(writes - writes0, (json_int_t)(elapsed_ms / METRICS_MIN_GAP_MS + 2),
		      "%lld writes for 200 Creates in %llu ms", (long long)(writes - writes0), (unsigned long long)elapsed_ms);
	cr_expect_gt(json_integer_value(json_object_get(c, "last_write_bytes")), 0);
	json_decref(c);
}
