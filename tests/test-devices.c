/* SPDX-License-Identifier: MIT */
/*
 * Device facts, XFS geometry and the device rule on this host's real block
 * devices: loop devices with real kernel partitions (added with BLKPG, since
 * this kernel has no partition table parsers), `nvmevol devices`, and the
 * daemon's trust rule for removable devices (a loop device marked removable
 * through the test_hooks-only NVMEVOL_TEST_REMOVABLE), at start and on the
 * rescan path. NVMe itself runs in the qemu guest (tests/qemu/run-nvme-tests.sh).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "device/device-policy.h"
#include "device/device.h"
#include "helpers/loopxfs.h"
#include "helpers/teardown.h"
#include "helpers/testbed.h"
#include "device/probe.h"
#include "device/xfs-geometry.h"

/* ---- a loop device with two real partitions: one at 1 MiB, one at a 512-byte odd sector ---- */

#define P1_START 2048u     /* sectors: 1 MiB */
#define P1_SIZE 819200u    /* 400 MiB: room for mkfs.xfs's minimum log with a stripe unit */
#define P2_START 821249u   /* odd: not a multiple of 4 KiB */
#define P2_SIZE 819200u

static struct {
	char dir[256], image[300], dev[64], p1[80], p2[80], disk[32], mnt[300];
	char prefix[16], label1[16], label2[16];
} lp;
static ClientReply rep;

static int sh(const char *const *argv)
{
	return loopxfs_spawn(argv, NULL, 0);
}
#define SH(...) sh((const char *const[]){ __VA_ARGS__, NULL })

/* Deletes partition @n of lp.dev if it is there, retrying for up to 5 s while it is busy (being probed). */
static void lp_delpart(int n, char *why, size_t why_len)
{
	char sys[128], num[8], said[512] = "";
	int r = 0;

	snprintf(sys, sizeof(sys), "/sys/block/%s/%sp%d", lp.disk, lp.disk, n);
	snprintf(num, sizeof(num), "%d", n);
	for (int i = 0; i < 50 && access(sys, F_OK) == 0; i++) {
		r = loopxfs_spawn_capture((const char *const[]){ "delpart", lp.dev, num, NULL }, NULL, 0, said,
					  sizeof(said));
		if (r == 0)
			return;
		usleep(100 * 1000);
	}
	if (access(sys, F_OK) == 0)
		teardown_note(why, why_len, "delpart %s %d exited %d: %s", lp.dev, n, r, said);
}

static void lp_destroy(void)
{
	char why[2048] = "", msg[1024];
	int r;

	teardown_untrack(&lp);
	if (lp.mnt[0] && loopxfs_umount_path(lp.mnt) < 0)
		/* Busy: lazily; the detach below waits for the last user. */
		(void)umount2(lp.mnt, MNT_DETACH);
	if (lp.dev[0]) {
		lp_delpart(2, why, sizeof(why));
		lp_delpart(1, why, sizeof(why));
		if (loopxfs_detach(lp.dev, lp.image, msg, sizeof(msg)) < 0)
			teardown_note(why, sizeof(why), "%s", msg);
	}
	if (lp.dir[0] && (r = SH("rm", "-rf", lp.dir)) != 0)
		teardown_note(why, sizeof(why), "rm -rf %s exited %d", lp.dir, r);
	if (why[0])
		teardown_fail("devices: the loop device with two partitions: %s", why);
	memset(&lp, 0, sizeof(lp));
}

static void lp_destroy_tracked(void *unused)
{
	lp_destroy();
}

/* Everything or nothing: on failure what was made is undone (Criterion runs no .fini after a failed .init). */
static int lp_create(void)
{
	const char *base = teardown_tmpdir("/var/tmp");
	char s1[16], n1[16], s2[16], n2[16];
	int fd;

	snprintf(lp.dir, sizeof(lp.dir), "%s/nvmevol-devices.XXXXXX", base);
	if (!mkdtemp(lp.dir)) {
		lp.dir[0] = '\0';
		return -errno;
	}
	/* A skip in a test body runs no .fini: the device goes at the worker's exit then. */
	teardown_track(lp_destroy_tracked, &lp);
	snprintf(lp.image, sizeof(lp.image), "%s/disk.img", lp.dir);
	snprintf(lp.mnt, sizeof(lp.mnt), "%s/mnt", lp.dir);
	if (mkdir(lp.mnt, 0700) < 0)
		return -errno;
	fd = open(lp.image, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (long long)(P2_START + P2_SIZE + 2048) * 512) < 0)
		return -errno;
	close(fd);
	/* -P: BLKPG partitions need the loop device's partition flag. */
	if (loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", "-P", lp.image, NULL }, lp.dev,
			  sizeof(lp.dev)) != 0 || !lp.dev[0])
		return -EIO;
	snprintf(lp.disk, sizeof(lp.disk), "%s", strrchr(lp.dev, '/') + 1);
	snprintf(s1, sizeof(s1), "%u", P1_START);
	snprintf(n1, sizeof(n1), "%u", P1_SIZE);
	snprintf(s2, sizeof(s2), "%u", P2_START);
	snprintf(n2, sizeof(n2), "%u", P2_SIZE);
	if (SH("addpart", lp.dev, "1", s1, n1) != 0 || SH("addpart", lp.dev, "2", s2, n2) != 0)
		return -EIO;
	snprintf(lp.p1, sizeof(lp.p1), "%sp1", lp.dev);
	snprintf(lp.p2, sizeof(lp.p2), "%sp2", lp.dev);
	/* devtmpfs makes the nodes; give it a moment. */
	for (int i = 0; i < 100 && (access(lp.p1, F_OK) < 0 || access(lp.p2, F_OK) < 0); i++)
		usleep(20000);
	snprintf(lp.prefix, sizeof(lp.prefix), "nvd%05u", (unsigned)(getpid() % 100000));
	snprintf(lp.label1, sizeof(lp.label1), "%sa", lp.prefix);
	snprintf(lp.label2, sizeof(lp.label2), "%sb", lp.prefix);
	/* What mkfs.xfs is told is what the geometry test expects back. */
	if (SH("mkfs.xfs", "-q", "-f", "-L", lp.label1, "-m", "crc=1,reflink=1,bigtime=1", "-d",
	       "su=64k,sw=2,agcount=2", lp.p1) != 0 ||
	    SH("mkfs.xfs", "-q", "-f", "-L", lp.label2, "-m", "crc=1,reflink=0,bigtime=0", "-s", "size=4096", lp.p2) != 0)
		return -EIO;
	return 0;
}

static void lp_setup(void)
{
	int r;

	testbed_require_root();
	r = lp_create();
	if (r < 0) {
		lp_destroy();
		cr_assert_fail("cannot make a loop device with two partitions (losetup -P, addpart, mkfs.xfs): %s",
			       strerror(-r));
	}
}

static void lp_teardown(void)
{
	client_reply_done(&rep);
	lp_destroy();
}

TestSuite(devices, .init = lp_setup, .fini = lp_teardown, .timeout = 120);

Test(devices, facts_of_real_loop_partitions)
{
	DeviceFacts f;
	char *err = NULL;
	DeviceDecision d;

	cr_assert_eq(device_facts_read(lp.p1, &f, &err), 0, "%s", err);
	cr_expect_eq(f.transport, DEVICE_TRANSPORT_LOOP);
	cr_expect_str_eq(f.disk, lp.disk);
	cr_expect(f.is_partition);
	cr_expect_eq(f.partition_number, 1);
	cr_expect_eq(f.start_bytes, (uint64_t)P1_START * 512);
	cr_expect_eq(f.size_bytes, (uint64_t)P1_SIZE * 512);
	cr_expect_str_eq(f.loop_backing_file, lp.image);
	cr_expect_eq(f.logical_block_size, 512);
	cr_expect_not(f.removable);
	cr_expect_not(f.usb);
	cr_expect(device_partition_aligned(&f));

	cr_assert_eq(device_facts_read(lp.p2, &f, &err), 0, "%s", err);
	cr_expect_eq(f.partition_number, 2);
	cr_expect_eq(f.start_bytes, (uint64_t)P2_START * 512);
	cr_expect_not(device_partition_aligned(&f));
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_OFF, .health = DEVICE_POLICY_WARN },
			       &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN);
	cr_expect_str_eq(d.reasons[0].code, "misaligned-partition");

	cr_expect_eq(device_facts_read("/dev/null", &f, &err), -ENOTBLK);
	cr_expect(err && strstr(err, "not a block device"), "%s", err);
	free(err);
}

static void geometry_of(const char *dev, XfsGeometry *g)
{
	int fd;

	cr_assert_eq(SH("mount", "-t", "xfs", "-o", "ro", dev, lp.mnt), 0);
	fd = open(lp.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(fd >= 0);
	cr_assert_eq(xfs_geometry_read(fd, g), 0);
	close(fd);
	cr_assert_eq(umount2(lp.mnt, 0), 0);
}

Test(devices, xfs_geometry_is_what_mkfs_was_told)
{
	XfsGeometry g;
	int fd;

	geometry_of(lp.p1, &g);
	cr_expect_eq(g.block_size, 4096);
	cr_expect_eq(g.sunit_bytes, 64 * 1024);
	cr_expect_eq(g.swidth_bytes, 128 * 1024);
	cr_expect(g.crc && g.reflink && g.bigtime);
	geometry_of(lp.p2, &g);
	cr_expect_eq(g.sector_size, 4096);
	cr_expect_eq(g.sunit_bytes, 0);
	cr_expect(g.crc);
	cr_expect_not(g.reflink);
	cr_expect_not(g.bigtime);

	/* Not XFS: the ioctl is refused, nothing is made up. */
	fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_expect_lt(xfs_geometry_read(fd, &g), 0);
	close(fd);
}

Test(devices, the_devices_command)
{
	json_t *a, *e;

	a = testbed_devices_json(NULL, (const char *const[]){ "--label-prefix", lp.prefix, "--require-nvme", "warn", NULL });
	cr_expect_eq(json_array_size(a), 2);
	e = testbed_devices_entry(a, lp.p1);
	cr_expect_str_eq(json_string_value(json_object_get(e, "label")), lp.label1);
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(e, "facts"), "transport")), "loop");
	cr_expect_str_eq(json_string_value(json_object_get(e, "use")), "yes, warn");
	cr_expect(testbed_devices_has_reason(e, "not-nvme", "NVMEVOL_REQUIRE_NVME=warn"));
	e = testbed_devices_entry(a, lp.p2);
	cr_expect(testbed_devices_has_reason(e, "misaligned-partition", NULL));
	cr_expect_not(json_is_true(json_object_get(json_object_get(json_object_get(e, "facts"), "partition"), "aligned")));
	json_decref(a);

	/* The environment is the default, an option wins over it. */
	a = testbed_devices_json((const char *const[]){ "NVMEVOL_REQUIRE_NVME=enforce", NULL },
			 (const char *const[]){ "--label-prefix", lp.prefix, NULL });
	e = testbed_devices_entry(a, lp.p1);
	cr_expect_str_eq(json_string_value(json_object_get(e, "use")), "no");
	cr_expect(testbed_devices_has_reason(e, "not-nvme", "NVMEVOL_REQUIRE_NVME=enforce"));
	json_decref(a);
	a = testbed_devices_json((const char *const[]){ "NVMEVOL_REQUIRE_NVME=enforce", NULL },
			 (const char *const[]){ "--require-nvme", "off", "--label-prefix", lp.prefix, NULL });
	cr_expect_str_eq(json_string_value(json_object_get(testbed_devices_entry(a, lp.p1), "use")), "yes");
	json_decref(a);

	/* Geometry is shown where the filesystem is mounted. */
	cr_assert_eq(SH("mount", "-t", "xfs", "-o", "ro", lp.p1, lp.mnt), 0);
	a = testbed_devices_json(NULL, (const char *const[]){ "--label-prefix", lp.prefix, NULL });
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(testbed_devices_entry(a, lp.p1), "xfs"), "sunit_bytes")), 65536);
	cr_expect_null(json_object_get(testbed_devices_entry(a, lp.p2), "xfs"));
	json_decref(a);
	cr_assert_eq(umount2(lp.mnt, 0), 0);
}

Test(devices, removable_is_refused_unless_listed)
{
	char hook[64], devs[128];
	json_t *a, *e;

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs -Dtest_hooks=true (NVMEVOL_TEST_REMOVABLE); the real USB stick runs in tests/qemu/");
	snprintf(hook, sizeof(hook), "NVMEVOL_TEST_REMOVABLE=%s", lp.disk);
	a = testbed_devices_json((const char *const[]){ hook, NULL },
			 (const char *const[]){ "--label-prefix", lp.prefix, "--require-nvme", "off", NULL });
	e = testbed_devices_entry(a, lp.p1);
	cr_expect(json_is_true(json_object_get(json_object_get(e, "facts"), "removable")));
	cr_expect_str_eq(json_string_value(json_object_get(e, "use")), "no");
	cr_expect(testbed_devices_has_reason(e, "untrusted-removable", "NVMEVOL_DEVICES (not listed)"));
	json_decref(a);

	/* Listing one partition (by a path) lets that one in, not its sibling. */
	snprintf(devs, sizeof(devs), "%s", lp.p1);
	a = testbed_devices_json((const char *const[]){ hook, NULL },
			 (const char *const[]){ "--devices", devs, "--label-prefix", lp.prefix, "--require-nvme", "off", NULL });
	e = testbed_devices_entry(a, lp.p1);
	cr_expect(json_is_true(json_object_get(e, "listed")));
	cr_expect_str_eq(json_string_value(json_object_get(e, "use")), "yes");
	cr_expect_str_eq(json_string_value(json_object_get(testbed_devices_entry(a, lp.p2), "use")), "no");
	json_decref(a);
}

/* ---- the daemon: trust rule at start and on rescan, Status ---- */

static Testbed tb;

static void tb_teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(devices_daemon, .fini = tb_teardown, .timeout = 180);

static json_t *partition_status(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "partition");
}

Test(devices_daemon, status_shows_device_xfs_and_verdict)
{
	json_t *p, *dev;

	testbed_require_root();
	testbed_setup(&tb, 1, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dv\",\"Opts\":{\"health\":\"enforce\"}}"), 0, "%s",
		     client_err(&rep));
	p = partition_status("dv");
	dev = json_object_get(p, "device");
	cr_assert_not_null(dev, "no device in %s", rep.body);
	cr_expect_str_eq(json_string_value(json_object_get(dev, "transport")), "loop");
	cr_expect_str_eq(json_string_value(json_object_get(dev, "path")), tb.parts[0].device);
	cr_expect(strstr(json_string_value(json_object_get(dev, "backing_file")), tb.parts[0].image));
	cr_expect(json_is_true(json_object_get(json_object_get(p, "xfs"), "crc")));
	cr_expect_null(json_object_get(p, "health"), "a loop device has no NVMe health");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(p, "policy"), "verdict")), "warn");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "options"),
				 "health")),
			 "enforce");
	/* A bad value is refused with the valid ones. */
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dv2\",\"Opts\":{\"health\":\"strict\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "invalid health 'strict': expected off, warn or enforce"), "%s",
		  client_err(&rep));
}

Test(devices_daemon, require_nvme_enforce_refuses_loop_partitions)
{
	testbed_require_root();
	testbed_setup(&tb, 1, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_REQUIRE_NVME=enforce", NULL });
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dv\"}"), 0);
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dv\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label),
		      0);
	cr_expect(strstr(client_err(&rep), "is not available") &&
			  strstr(client_err(&rep), "not nvme (NVMEVOL_REQUIRE_NVME=enforce)"),
		  "%s", client_err(&rep));
	/* Refused means never mounted. */
	{
		char mp[512];
		char *line;
		testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
		line = mountinfo_line(mp);
		cr_expect_null(line, "refused partition is mounted: %s", line);
		free(line);
	}
}

static char hook_all[] = "NVMEVOL_TEST_REMOVABLE=*";

Test(devices_daemon, removable_refused_at_start_unless_listed)
{
	char listed[128], mp[512], *line;

	testbed_require_root();
	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs -Dtest_hooks=true (NVMEVOL_TEST_REMOVABLE); the real USB stick runs in tests/qemu/");
	/* A volume made while the disk was trusted... */
	testbed_setup(&tb, 1, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"kept\"}"), 0, "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	(void)umount2(mp, MNT_DETACH);

	/* ...is on a refused disk once that disk counts as removable: not mounted, the reason in Status and Err. */
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", hook_all, NULL }), 0);
	line = mountinfo_line(mp);
	cr_expect_null(line, "a removable partition was mounted: %s", line);
	free(line);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"kept\"}"), 0, "%s", client_err(&rep));
	{
		json_t *st = json_object_get(json_object_get(rep.json, "Volume"), "Status");
		const char *problem = json_string_value(json_object_get(json_object_get(st, "partition"), "problem"));
		cr_expect_str_eq(json_string_value(json_object_get(st, "state")), "partition-missing");
		cr_expect(problem && strstr(problem, "removable") && strstr(problem, "NVMEVOL_DEVICES=UUID="), "%s",
			  problem ? problem : rep.body);
		cr_expect(json_is_true(json_object_get(json_object_get(json_object_get(st, "partition"), "device"),
						       "removable")));
	}
	cr_expect_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"kept\",\"ID\":\"m1\"}"), 0);
	cr_expect(strstr(client_err(&rep), "removable"), "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);

	/* Listed by the admin: used again. */
	snprintf(listed, sizeof(listed), "NVMEVOL_DEVICES=UUID=%s", tb.parts[0].uuid);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", hook_all, listed, NULL }), 0);
	cr_expect_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"kept\",\"ID\":\"m1\"}"), 0, "%s", client_err(&rep));
	cr_expect_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"kept\",\"ID\":\"m1\"}"), 0, "%s", client_err(&rep));
}

Test(devices_daemon, removable_appearing_after_start_is_refused)
{
	char listed[128], img[600], dev[64], label[16], mp[512], *line;
	ProbedDevice d = { 0 };
	int fd;

	testbed_require_root();
	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs -Dtest_hooks=true (NVMEVOL_TEST_REMOVABLE); the real USB stick runs in tests/qemu/");
	/* Everything counts as removable; the first disk is trusted because it is listed. */
	cr_assert_eq(testbed_init(&tb, 1), 0);
	snprintf(listed, sizeof(listed), "NVMEVOL_DEVICES=%s", tb.parts[0].device);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", hook_all, listed, NULL }), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"first\"}"), 0, "%s", client_err(&rep));

	/* A stick with the prefix appears. */
	snprintf(img, sizeof(img), "%s/stick.img", tb.dir);
	fd = open(img, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert(fd >= 0 && ftruncate(fd, 320LL << 20) == 0);
	close(fd);
	cr_assert_eq(loopxfs_spawn((const char *const[]){ "losetup", "--find", "--show", img, NULL }, dev, sizeof(dev)), 0);
	/* testbed_destroy detaches parts[0..n_parts): track the stick there. */
	snprintf(tb.parts[1].device, sizeof(tb.parts[1].device), "%s", dev);
	snprintf(tb.parts[1].image, sizeof(tb.parts[1].image), "%s", img);
	tb.parts[1].attached = true;
	tb.n_parts = 2;
	snprintf(label, sizeof(label), "%sz", tb.prefix);
	cr_assert_eq(RUN("mkfs.xfs", "-q", "-f", "-L", label, dev), 0);
	cr_assert_eq(probe_device(dev, &d), 0);
	snprintf(tb.parts[1].uuid, sizeof(tb.parts[1].uuid), "%s", d.uuid);
	probed_device_done(&d);

	/*
	 * Naming it makes the daemon rescan (at most once a second): it is found, refused, never mounted.
	 * libblkid sometimes misses a loop device attached a moment ago; the next rescan sees it.
	 */
	for (int i = 0; i < 5; i++) {
		usleep(1100 * 1000);
		cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"onstick\",\"Opts\":{\"partition\":\"%s\"}}", label),
			      0);
		if (!strstr(client_err(&rep), "no nvmevol partition has the label"))
			break;
	}
	cr_expect(strstr(client_err(&rep), "removable") && strstr(client_err(&rep), "NVMEVOL_DEVICES"), "%s",
		  client_err(&rep));
	testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
	line = mountinfo_line(mp);
	cr_expect_null(line, "the stick was mounted: %s", line);
	free(line);
	/* Placement never picks it either. */
	cr_expect_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"second\"}"), 0, "%s", client_err(&rep));
	cr_expect_str_eq(json_string_value(json_object_get(partition_status("second"), "uuid")), tb.parts[0].uuid);
}

/* ---- an NVMe health reading that takes seconds never holds Get ---- */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *mount_in_background(void *userdata)
{
	ClientReply r = { 0 };

	(void)client_post(tb.sock, "/VolumeDriver.Mount", &r, "{\"Name\":\"slowh\",\"ID\":\"m1\"}");
	*(bool *)userdata = r.status == 200 && !client_err(&r)[0];
	client_reply_done(&r);
	return NULL;
}

Test(devices_daemon, get_answers_while_a_health_reading_is_slow)
{
	pthread_t t;
	bool mounted = false;
	uint64_t t0, took;
	json_t *h;

	testbed_require_root();
	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs -Dtest_hooks=true (NVMEVOL_TEST_NVME, NVMEVOL_TEST_HEALTH_DELAY_MS); real NVMe runs in tests/qemu/");
	/* Every reading (of a controller that does not exist) takes 3 s; none is cached. */
	testbed_setup(&tb, 1, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_NVME=*",
						     "NVMEVOL_TEST_HEALTH_DELAY_MS=3000", "NVMEVOL_HEALTH_CACHE_SECONDS=0",
						     NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"slowh\"}"), 0, "%s", client_err(&rep));
	h = json_object_get(partition_status("slowh"), "health");
	cr_assert(h && strstr(json_string_value(json_object_get(h, "error")) ?: "", "nvme4242"),
		  "no health reading was made: %s", rep.body);

	/* A Mount reads the health anew: 3 s in the admin commands. */
	cr_assert_eq(pthread_create(&t, NULL, mount_in_background, &mounted), 0);
	usleep(500 * 1000);
	t0 = mono_ms();
	cr_expect_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"slowh\"}"), 0, "%s", client_err(&rep));
	took = mono_ms() - t0;
	pthread_join(t, NULL);
	cr_expect_lt(took, 1000, "Get took %llu ms behind a health reading", (unsigned long long)took);
	cr_expect(json_object_get(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"),
						  "partition"), "health"),
		  "Get did not show the last reading: %s", rep.body);
	cr_expect(mounted, "the Mount failed");
	cr_expect_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"slowh\",\"ID\":\"m1\"}"), 0);
}
