/* SPDX-License-Identifier: MIT */
/*
 * Availability (issue 19): a block device whose reads hang never holds Get,
 * List or a Create on another partition; a dd copy of a pool disk (the same
 * XFS UUID) never takes a verified mount's place. Real daemon, real loop XFS.
 *
 * The hanging device is a loop device whose reads by the daemon are delayed
 * by strace (-P DEVICE -e inject=read,pread64:delay_enter=...): to the daemon
 * the same as a suspended device-mapper target (this host's kernel has no
 * device-mapper), and nothing else on the machine is affected.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"

static Testbed tb;
static ClientReply rep;
static char admin_sock[400];
static pid_t tracer;
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void stop_tracer(void)
{
	int st;

	if (tracer <= 0)
		return;
	/* strace detaches on SIGTERM: the delayed reads go through. */
	(void)kill(tracer, SIGTERM);
	(void)waitpid(tracer, &st, 0);
	tracer = 0;
}

static void teardown(void)
{
	stop_tracer();
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(avail, .fini = teardown, .timeout = 180);

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static json_t *admin_status(void)
{
	cr_assert_eq(client_request(admin_sock, "POST", "/Admin.Status", "{}", 2, &rep), 0);
	cr_assert_eq(rep.status, 200, "%s", rep.body);
	return rep.json;
}

/* Whether the admin Status lists @device among the devices that do not answer. */
static bool reported_silent(const char *device)
{
	json_t *arr = json_object_get(admin_status(), "devices_not_answering");
	size_t i;
	json_t *e;

	json_array_foreach(arr, i, e)
		if (strcmp(json_string_value(json_object_get(e, "device")) ?: "", device) == 0)
			return true;
	return false;
}

/* A loop device over a fresh image in the testbed (no filesystem needed: the probe reads it anyway), tracked for teardown. */
static void attach_extra(int slot, char *dev, size_t len)
{
	char img[600];
	int fd;

	snprintf(img, sizeof(img), "%s/extra%d.img", tb.dir, slot);
	fd = open(img, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert(fd >= 0 && ftruncate(fd, 64LL << 20) == 0);
	close(fd);
	cr_assert_eq(loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", img, NULL }, dev, len), 0);
	snprintf(tb.parts[slot].device, sizeof(tb.parts[slot].device), "%s", dev);
	snprintf(tb.parts[slot].image, sizeof(tb.parts[slot].image), "%s", img);
	tb.parts[slot].attached = true;
	if (tb.n_parts <= slot)
		tb.n_parts = slot + 1;
}

/* Traces the daemon (every thread), injecting @inject into the calls @trace makes on @device. */
static void trace_device(const char *device, const char *trace, const char *inject)
{
	char pid[16], status[64] = "", line[256];
	FILE *f;

	snprintf(pid, sizeof(pid), "%d", tb.pid);
	tracer = fork();
	cr_assert_geq(tracer, 0);
	if (tracer == 0) {
		execlp("strace", "strace", "-f", "-qq", "-o", "/dev/null", "-p", pid, "-P", device, "-e", trace, "-e",
		       inject, (char *)NULL);
		_exit(127);
	}
	/* Attached once the daemon's main thread names a tracer. */
	snprintf(status, sizeof(status), "/proc/%d/status", tb.pid);
	for (int i = 0; i < 100; i++) {
		bool traced = false;

		f = fopen(status, "re");
		while (f && fgets(line, sizeof(line), f))
			traced = traced || (strncmp(line, "TracerPid:", 10) == 0 && atoi(line + 10) > 0);
		if (f)
			fclose(f);
		if (traced)
			break;
		usleep(50 * 1000);
	}
	usleep(300 * 1000); /* the other threads */
}

/* Each read of @device delayed by a minute: a suspended device-mapper target, as the daemon sees it. */
static void delay_reads_of(const char *device)
{
	trace_device(device, "trace=read,pread64", "inject=read,pread64:delay_enter=60s");
}

typedef struct Timed {
	const char *endpoint, *body;
	uint64_t took_ms;
	bool ok, done;
	char err[256];
} Timed;

static void *timed_call(void *userdata)
{
	Timed *t = userdata;
	ClientReply r = { 0 };
	char path[64];
	uint64_t t0 = mono_ms();

	snprintf(path, sizeof(path), "/VolumeDriver.%s", t->endpoint);
	t->ok = client_request(tb.sock, "POST", path, t->body, strlen(t->body), &r) == 0 && r.status == 200 &&
		!client_err(&r)[0];
	snprintf(t->err, sizeof(t->err), "%s", r.body ? r.body : "no answer");
	t->took_ms = mono_ms() - t0;
	client_reply_done(&r);
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Runs each call in its own thread and gives them @budget_ms together; returns how many finished by then
 * (a call blocked behind the hanging device finishes only when the test lets the reads go).
 */
static int run_timed(Timed *calls, int n, pthread_t *threads, unsigned budget_ms)
{
	uint64_t end = mono_ms() + budget_ms;
	int done = 0;

	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&threads[i], NULL, timed_call, &calls[i]), 0);
	while (mono_ms() < end) {
		done = 0;
		for (int i = 0; i < n; i++)
			done += __atomic_load_n(&calls[i].done, __ATOMIC_ACQUIRE);
		if (done == n)
			break;
		usleep(20 * 1000);
	}
	return done;
}

Test(avail, a_device_whose_reads_hang_never_holds_get_list_or_create)
{
	char hang[64], trigger[64], body[256];
	Timed first[1] = { { "Get", "{\"Name\":\"nosuchvolume\"}" } };
	Timed later[3] = { { "Get", "{\"Name\":\"stillnosuch\"}" }, { "List", "{}" }, { "Create", body } };
	pthread_t t1[1], t3[3];
	bool seen = false;
	int done1, done3;

	testbed_require_root();
	if (access("/usr/bin/strace", X_OK) != 0)
		cr_skip_test("needs strace (Debian package strace) to make a device's reads hang");
	testbed_setup(&tb, 1, selftest_off);
	snprintf(admin_sock, sizeof(admin_sock), "%s/nvmevol-admin.sock", tb.dir);
	snprintf(body, sizeof(body), "{\"Name\":\"elsewhere\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label);

	attach_extra(1, hang, sizeof(hang));
	/* Let the daemon see the device once while it still answers: what follows is a device that stops. */
	usleep(1500 * 1000);
	delay_reads_of(hang);
	/* A new device: the daemon rescans (the old one: on the next Get miss), and its probe of @hang hangs. */
	attach_extra(2, trigger, sizeof(trigger));
	usleep(200 * 1000);

	done1 = run_timed(first, 1, t1, 3000);
	/* The background rescan skips the device after its deadline and reports it. */
	for (int i = 0; i < 40 && done1 == 1 && !(seen = reported_silent(hang)); i++)
		usleep(100 * 1000);
	done3 = done1 == 1 ? run_timed(later, 3, t3, 3000) : 0;

	/* The device answers again (as after `dmsetup resume`): everything blocked behind it finishes. */
	stop_tracer();
	pthread_join(t1[0], NULL);
	for (int i = 0; done1 == 1 && i < 3; i++)
		pthread_join(t3[i], NULL);

	cr_assert_eq(done1, 1, "a Get of an unknown name did not answer within 3 s while %s hangs (it took %llu ms)",
		     hang, (unsigned long long)first[0].took_ms);
	cr_expect_lt(first[0].took_ms, 1000, "Get miss took %llu ms", (unsigned long long)first[0].took_ms);
	cr_expect(seen, "Status does not report %s among devices_not_answering: %s", hang, rep.body);
	cr_assert_eq(done3, 3, "Get, List or Create did not answer within 3 s while %s hangs", hang);
	for (int i = 0; i < 3; i++)
		cr_expect_lt(later[i].took_ms, 1000, "%s took %llu ms while %s hangs", later[i].endpoint,
			     (unsigned long long)later[i].took_ms, hang);
	cr_expect(later[1].ok && later[2].ok, "List or Create failed: %s / %s", later[1].err, later[2].err);

	/* Once it answers, the next scan probes it again and the report goes. */
	for (int i = 0; i < 50 && reported_silent(hang); i++)
		usleep(100 * 1000);
	cr_expect(!reported_silent(hang), "%s is still reported after it answers again: %s", hang, rep.body);
	cr_expect_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"elsewhere\"}"), 0, "%s", client_err(&rep));
}

/* ---- a dd copy of a pool disk: the same XFS UUID on a second device ---- */

/*
 * An unattached loop device listed in /proc/partitions before @device (scans go in that order: the old
 * code then met the copy first), or "" if there is none.
 */
/*
 * A scan whose probe cannot read a pool partition's device (EIO on its open)
 * learns nothing about it: the partition, mounted and verified, stays served.
 * (Found by errinject: a rescan in the window of an Unmount took the
 * partition for gone.)
 */
Test(avail, a_probe_that_cannot_read_a_pool_device_keeps_its_partition)
{
	char trigger[64], dir[700], file[800], mp[400];
	const char *state;
	int err = 0;

	testbed_require_root();
	if (access("/usr/bin/strace", X_OK) != 0)
		cr_skip_test("needs strace (Debian package strace) to fail a device's open");
	testbed_setup(&tb, 1, selftest_off);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"kept\"}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "kept", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	cr_assert_eq(testbed_write_bytes(file, 4096, false, &err), 4096, "%s", strerror(err));

	trace_device(tb.parts[0].device, "trace=openat", "inject=openat:error=EIO");
	/* A new device: the background rescan probes every device, and the pool's fails. */
	attach_extra(1, trigger, sizeof(trigger));
	usleep(2000 * 1000);
	stop_tracer();

	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"kept\"}"), 0, "%s", client_err(&rep));
	state = json_string_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "state"));
	cr_assert_str_eq(state ? state : "(none)", "ready", "the partition was taken for gone after a failed probe");
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	{
		char *line = mountinfo_line(mp);

		cr_assert_not_null(line, "the partition was unmounted after a failed probe");
		free(line);
	}
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"kept\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"kept\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
}

static void loop_listed_before(const char *device, char *buf, size_t len)
{
	char line[256], name[128];
	unsigned long long blocks;
	FILE *f = fopen("/proc/partitions", "re");

	buf[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		char path[160];

		if (sscanf(line, " %*u %*u %llu %127s", &blocks, name) != 2)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", name);
		if (strcmp(path, device) == 0)
			break;
		if (!buf[0] && blocks == 0 && strncmp(name, "loop", 4) == 0 && access(path, F_OK) == 0)
			snprintf(buf, len, "%s", path);
	}
	if (f)
		fclose(f);
}

static json_t *get_partition(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "partition");
}

static bool names_duplicate(json_t *partition, const char *device)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(partition, "duplicates"), i, e)
		if (strcmp(json_string_value(e) ?: "", device) == 0)
			return true;
	return false;
}

/* The original keeps its verified mount and serves; the copy is reported, never mounted: at runtime and at a restart. */
static void check_original_served(const char *copy, const char *mountpoint, const char *file, const char *when)
{
	json_t *p = get_partition("orig");
	char *line;
	FILE *f;
	char buf[32] = "";

	cr_expect(json_is_true(json_object_get(p, "present")), "%s: the partition is not present: %s", when, rep.body);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(p, "device"), "path")) ?: "", tb.parts[0].device,
			 "%s: served from another device: %s", when, rep.body);
	cr_expect(names_duplicate(p, copy), "%s: Status does not name %s as a duplicate: %s", when, copy, rep.body);
	line = mountinfo_line(mountpoint);
	cr_expect(line && strstr(line, tb.parts[0].device), "%s: the partition mount is gone or changed: %s", when,
		  line ?: "(not mounted)");
	free(line);
	f = fopen(file, "re");
	cr_expect(f && fgets(buf, sizeof(buf), f) && strcmp(buf, "original\n") == 0,
		  "%s: the volume's data is not served: %s", when, f ? buf : strerror(errno));
	if (f)
		fclose(f);
}

Test(avail, a_copy_of_a_pool_disk_never_displaces_its_mount)
{
	char copy_img[600], copy[64] = "", mp[400], dir[700], file[800], bind_file[800];

	testbed_require_root();
	testbed_init_or_fail(&tb, 1);
	/* `dd` of the whole disk, before the daemon ever mounts it: same UUID, same label. */
	snprintf(copy_img, sizeof(copy_img), "%s/copy.img", tb.dir);
	cr_assert_eq(RUN("cp", "--sparse=always", tb.parts[0].image, copy_img), 0);
	/*
	 * Move the original to a loop device registered after two free ones, so that the copy can come
	 * first in /proc/partitions (the order scans go in): hold the lowest free devices, re-attach it.
	 */
	{
		char hold1[64], hold2[64];

		cr_assert_eq(loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", "-r", copy_img, NULL },
					   hold1, sizeof(hold1)), 0);
		cr_assert_eq(testbed_detach(&tb, 0), 0);
		cr_assert_eq(loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", "-r", copy_img, NULL },
					   hold2, sizeof(hold2)), 0);
		cr_assert_eq(testbed_attach(&tb, 0), 0);
		cr_assert_eq(RUN("losetup", "-d", hold1), 0);
		cr_assert_eq(RUN("losetup", "-d", hold2), 0);
	}
	testbed_start_or_fail(&tb, selftest_off);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"orig\"}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "orig", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	cr_assert_eq(RUN("sh", "-c", "echo original >\"$0\"", file), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"orig\",\"ID\":\"m1\"}"), 0, "%s", client_err(&rep));
	snprintf(bind_file, sizeof(bind_file), "%s/data",
		 json_string_value(json_object_get(rep.json, "Mountpoint")));
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));

	/* The copy appears while running, on a device scans meet before the original when there is one. */
	loop_listed_before(tb.parts[0].device, copy, sizeof(copy));
	if (copy[0])
		cr_assert_eq(RUN("losetup", copy, copy_img), 0);
	else
		cr_assert_eq(loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", copy_img, NULL }, copy,
					   sizeof(copy)), 0);
	snprintf(tb.parts[1].device, sizeof(tb.parts[1].device), "%s", copy);
	snprintf(tb.parts[1].image, sizeof(tb.parts[1].image), "%s", copy_img);
	tb.parts[1].attached = true;
	tb.n_parts = 2;
	cr_log_info("original %s, copy %s", tb.parts[0].device, copy);

	/* A rescan: the background one on the device change (an older daemon: on a Get miss). */
	for (int i = 0; i < 30; i++) {
		(void)tb_call(&tb, "Get", &rep, "{\"Name\":\"nosuch%d\"}", i);
		if (names_duplicate(get_partition("orig"), copy))
			break;
		usleep(100 * 1000);
	}
	check_original_served(copy, mp, bind_file, "at runtime");
	{
		/* The admin's table says so too. */
		static char out[16384];
		char sock[400];

		snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb.dir);
		cr_expect_eq(loopxfs_spawn((const char *const[]){ getenv("NVMEVOL_BINARY") ?: "build/src/nvmevol", "status",
								  "--socket", sock, NULL }, out, sizeof(out)), 0);
		cr_expect(strstr(out, "the same XFS UUID is also on") && strstr(out, copy), "nvmevol status: %s", out);
	}

	/* A restart with both attached: the partition's own mount decides. */
	cr_assert_eq(testbed_stop(&tb, SIGTERM), 0);
	testbed_start_or_fail(&tb, selftest_off);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"orig\",\"ID\":\"m2\"}"), 0, "%s", client_err(&rep));
	snprintf(bind_file, sizeof(bind_file), "%s/data",
		 json_string_value(json_object_get(rep.json, "Mountpoint")));
	check_original_served(copy, mp, bind_file, "after a restart");
}
