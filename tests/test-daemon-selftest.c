/* SPDX-License-Identifier: MIT */
/*
 * The self-test as Docker sees it: run on the first Mount on real loop XFS,
 * reported in Get's Status, cached per partition, judged by policy, and never
 * blocking other requests.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers/testbed.h"

static Testbed tb;
static ClientReply rep;

static void setup1(void)
{
	testbed_require_root();
	testbed_init_or_fail(&tb, 1);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(selftest_mount, .init = setup1, .fini = teardown, .timeout = 180);

static json_t *selftest_status(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0);
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "selftest");
}

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	cr_assert(json_is_number(v), "no number '%s'", key);
	return json_number_value(v);
}

static int scratch_entries(void)
{
	char dir[600];
	int n = 0;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s/nvmevol/selftest", tb.parts_root, tb.parts[0].uuid);
	d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

Test(selftest_mount, first_mount_measures_and_reports_then_caches)
{
	json_t *st;

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"st1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"st2\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"st1\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	st = selftest_status("st1");
	cr_assert_not_null(st, "no selftest in Status: %s", rep.body);
	cr_expect_str_eq(json_string_value(json_object_get(st, "verdict")), "pass");
	cr_expect_str_eq(json_string_value(json_object_get(st, "policy")), "warn");
	cr_expect(json_is_false(json_object_get(st, "cached")));
	/* Plausible figures for a loop device on a VM disk. */
	cr_expect(num(st, "seq_write_mbps") > 1 && num(st, "seq_write_mbps") < 100000, "%s", rep.body);
	cr_expect(num(st, "seq_read_mbps") > 1 && num(st, "seq_read_mbps") < 100000);
	cr_expect(num(st, "rand_write_iops") > 10 && num(st, "rand_read_iops") > 10);
	/* A p99 from enough samples, or null and the reason (a loaded machine gets fewer in 300 ms). */
	if (json_is_null(json_object_get(st, "read_p99_ms"))) {
		cr_expect_lt(num(st, "read_samples"), 1000, "%s", rep.body);
		cr_expect(json_is_string(json_object_get(st, "p99_not_reported")), "%s", rep.body);
	} else {
		cr_expect_geq(num(st, "read_samples"), 1000, "%s", rep.body);
		cr_expect(num(st, "read_p99_ms") > 0 && num(st, "read_p99_ms") >= num(st, "read_p50_ms"));
	}
	cr_expect(num(st, "duration_ms") > 0 && num(st, "duration_ms") < 3000, "budget 300 ms, took %f", num(st, "duration_ms"));
	cr_expect_lt(num(st, "verify_errors"), 0.5);
	cr_expect_not_null(json_object_get(st, "tested_at"));
	/* The second volume on the same partition reuses the result. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"st2\",\"ID\":\"b\"}"), 0);
	st = selftest_status("st2");
	cr_expect(json_is_true(json_object_get(st, "cached")), "%s", rep.body);
	cr_expect_eq(scratch_entries(), 0, "self-test left scratch files");
}

Test(selftest_mount, enforce_refuses_with_figures_and_leaves_nothing_mounted)
{
	char mp[400];

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"slow\",\"Opts\":{\"selftest\":\"enforce\",\"min_write_mbps\":\"9000000\"}}"), 0);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"slow\",\"ID\":\"a\"}"), 0);
	cr_expect(strstr(client_err(&rep), "min_write_mbps") && strstr(client_err(&rep), "9000000") && strstr(client_err(&rep), "MiB/s"),
		  "Err must quote measured and required figures: %s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/slow", tb.prop);
	cr_expect_null(mountinfo_line(mp), "a refused Mount left a mount");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"slow\"}"), 0);
	json_t *status = json_object_get(json_object_get(rep.json, "Volume"), "Status");
	cr_expect_eq(json_integer_value(json_object_get(status, "mount_count")), 0);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(status, "selftest"), "verdict")), "below-threshold");
	/* With nothing mounted, Remove works: the failed Mount took no reference. */
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"slow\"}"), 0, "%s", client_err(&rep));
}

Test(selftest_mount, warn_mounts_and_records_the_verdict)
{
	json_t *st;

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=enforce", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"meh\",\"Opts\":{\"selftest\":\"warn\",\"min_iops\":\"900000000\"}}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"meh\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	st = selftest_status("meh");
	cr_expect_str_eq(json_string_value(json_object_get(st, "verdict")), "below-threshold");
	cr_expect(strstr(json_string_value(json_object_get(st, "message")), "min_iops"));
	cr_expect_gt(num(json_object_get(st, "thresholds"), "min_iops"), 899999999.5);
}

Test(selftest_mount, policy_off_runs_nothing)
{
	json_t *st;

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"quick\",\"Opts\":{\"selftest\":\"off\"}}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"quick\",\"ID\":\"a\"}"), 0);
	st = selftest_status("quick");
	cr_expect_str_eq(json_string_value(json_object_get(st, "policy")), "off");
	cr_expect_null(json_object_get(st, "seq_write_mbps"));
}

Test(selftest_mount, corrupt_data_fails_the_mount_under_warn)
{
	char mp[400];

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs a build with -Dtest_hooks=true");
	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", "NVMEVOL_TEST_SELFTEST_CORRUPT=1", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"liar\"}"), 0);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"liar\",\"ID\":\"a\"}"), 0);
	cr_expect(strstr(client_err(&rep), "wrong data"), "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/liar", tb.prop);
	cr_expect_null(mountinfo_line(mp));
	cr_expect_eq(scratch_entries(), 0, "scratch files left after a failed self-test");
	/* A bad result is never cached: the next Mount tests again (and fails again). */
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"liar\",\"ID\":\"b\"}"), 0);
}

struct mount_job {
	const char *name, *id;
	int rc;
	double ms;
};

static void *do_mount(void *arg)
{
	struct mount_job *j = arg;
	ClientReply r = { 0 };
	double t0 = now_ms();

	j->rc = client_post(tb.sock, "/VolumeDriver.Mount", &r, "{\"Name\":\"%s\",\"ID\":\"%s\"}", j->name, j->id);
	if (j->rc == 0 && (r.status != 200 || client_err(&r)[0]))
		j->rc = -1;
	j->ms = now_ms() - t0;
	client_reply_done(&r);
	return NULL;
}

Test(selftest_mount, other_requests_are_answered_while_a_long_selftest_runs)
{
	struct mount_job a = { "long1", "a", 0, 0 }, b = { "long2", "b", 0, 0 };
	pthread_t ta, tbth;
	double worst = 0;

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", "NVMEVOL_SELFTEST_BUDGET_MS=2500", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"long1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"long2\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"other\"}"), 0);
	pthread_create(&ta, NULL, do_mount, &a);
	usleep(300 * 1000);
	pthread_create(&tbth, NULL, do_mount, &b);
	usleep(100 * 1000);
	for (int i = 0; i < 20; i++) {
		static const char *const eps[] = { "Get", "List", "Capabilities", "Path" };
		const char *ep = eps[i % 4];
		double t0 = now_ms(), dt;
		cr_assert_eq(tb_call(&tb, ep, &rep, strcmp(ep, "Get") && strcmp(ep, "Path") ? "{}" : "{\"Name\":\"other\"}"), 0,
			     "%s failed during a self-test: %s", ep, client_err(&rep));
		dt = now_ms() - t0;
		if (dt > worst)
			worst = dt;
		usleep(50 * 1000);
	}
	pthread_join(ta, NULL);
	pthread_join(tbth, NULL);
	cr_expect_lt(worst, 100.0, "a request took %.1f ms while a self-test ran", worst);
	cr_expect_gt(a.ms, 1500.0, "the long self-test did not run (%.0f ms)", a.ms);
	cr_assert_eq(a.rc, 0);
	cr_assert_eq(b.rc, 0);
	/* The second Mount on the same partition waited and reused the result instead of testing twice. */
	json_t *st = selftest_status("long2");
	cr_expect(json_is_true(json_object_get(st, "cached")), "%s", rep.body);
}

Test(selftest_mount, scratch_area_is_clean_after_a_kill)
{
	struct mount_job a = { "killed", "a", 0, 0 };
	pthread_t ta;

	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", "NVMEVOL_SELFTEST_BUDGET_MS=3000", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"killed\"}"), 0);
	pthread_create(&ta, NULL, do_mount, &a);
	usleep(800 * 1000);
	testbed_stop(&tb, SIGKILL);
	pthread_join(ta, NULL);
	cr_expect_neq(a.rc, 0, "the Mount could not have succeeded");
	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
	cr_expect_eq(scratch_entries(), 0, "scratch files left after a kill and restart");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"killed\"}"), 0);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "mount_count")), 0);
}
