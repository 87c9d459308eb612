/* SPDX-License-Identifier: MIT */
/*
 * Promises of the plugin's manual page that no other suite exercised, each
 * against the real daemon on real loop XFS:
 *  - a partition already mounted where nvmevol mounts it is never served as
 *    it was found: a shared mount is refused, one without nosuid,nodev or
 *    from another device is replaced by nvmevol's own verified mount;
 *  - trust rule 3: an unpinned Create never lands on a partition that
 *    appeared while the plugin ran and is not adopted, even when it has the
 *    most free space.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "helpers/testbed.h"

static Testbed tb;
static ClientReply rep;
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void setup2(void)
{
	testbed_require_root();
	testbed_setup(&tb, 2, selftest_off);
}

static void teardown(void)
{
	char mp[400];

	client_reply_done(&rep);
	/* A mount the daemon refused is still the test's: take it away before the loop devices go. */
	testbed_stop(&tb, SIGTERM);
	for (int i = 0; i < tb.n_parts; i++) {
		testbed_part_mountpoint(&tb, i, mp, sizeof(mp));
		while (umount2(mp, MNT_DETACH) == 0)
			;
	}
	testbed_destroy(&tb);
}

TestSuite(promises, .init = setup2, .fini = teardown, .timeout = 120);

static dev_t device_number(int i)
{
	struct stat st;

	cr_assert_eq(stat(tb.parts[i].device, &st), 0, "%s: %s", tb.parts[i].device, strerror(errno));
	return st.st_rdev;
}

static dev_t dev_of(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
	return st.st_dev;
}

/* Stops the daemon and mounts partition @dev_part's device at partition @at's mount point, with @options. */
static void premount(int dev_part, int at, const char *options)
{
	char mp[400];

	testbed_part_mountpoint(&tb, at, mp, sizeof(mp));
	while (umount2(mp, MNT_DETACH) == 0)
		;
	cr_assert_eq(RUN("mount", "-t", "xfs", "-o", options, tb.parts[dev_part].device, mp), 0);
}

static void stop_and_unmount_all(void)
{
	char mp[400];

	testbed_stop(&tb, SIGTERM);
	for (int i = 0; i < tb.n_parts; i++) {
		testbed_part_mountpoint(&tb, i, mp, sizeof(mp));
		while (umount2(mp, MNT_DETACH) == 0)
			;
	}
}

static const char *status_partition_uuid(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_string_value(json_object_get(
		json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "partition"), "uuid"));
}

Test(promises, a_shared_mount_in_place_is_refused_and_left_alone)
{
	char mp[400];
	char *line;

	stop_and_unmount_all();
	premount(0, 0, "noatime,nodiratime,nosuid,nodev");
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	cr_assert_eq(RUN("mount", "--make-shared", mp), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);

	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"sh\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label),
		      0, "a volume was created on a shared partition mount");
	cr_assert(strstr(client_err(&rep), "shared"), "the Err does not say why: %s", client_err(&rep));
	/* Nothing was written there, and the mount is still the admin's, shared. */
	line = mountinfo_line(mp);
	cr_assert(line && strstr(line, "shared:"), "the refused mount was changed: %s", line ? line : "(none)");
	free(line);
	/* The other partition serves as usual. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"ok\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label),
		     0, "%s", client_err(&rep));
}

Test(promises, a_mount_without_nosuid_nodev_is_replaced_by_a_verified_one)
{
	char mp[400], vol[400];
	char *line;

	stop_and_unmount_all();
	premount(0, 0, "noatime,nodiratime");
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	line = mountinfo_line(mp);
	cr_assert(line && !strstr(line, "nosuid"), "the fixture's mount already has nosuid: %s", line ? line : "(none)");
	free(line);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);

	line = mountinfo_line(mp);
	cr_assert(line && strstr(line, "nosuid") && strstr(line, "nodev") && strstr(line, "noatime"),
		  "the partition is served without its flags: %s", line ? line : "(none)");
	free(line);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fl\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label),
		     0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"fl\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	snprintf(vol, sizeof(vol), "%s/fl", tb.prop);
	line = mountinfo_line(vol);
	cr_assert(line && strstr(line, "nosuid") && strstr(line, "nodev"), "bind: %s", line ? line : "(none)");
	free(line);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"fl\",\"ID\":\"a\"}"), 0);
}

Test(promises, a_mount_of_another_device_in_place_is_replaced_by_the_right_one)
{
	char mp0[400], mp1[400], dir[700];

	stop_and_unmount_all();
	/* Partition 1's filesystem where partition 0 belongs. */
	premount(1, 0, "noatime,nodiratime,nosuid,nodev");
	testbed_part_mountpoint(&tb, 0, mp0, sizeof(mp0));
	testbed_part_mountpoint(&tb, 1, mp1, sizeof(mp1));
	cr_assert_eq(dev_of(mp0), device_number(1), "fixture: the wrong device is not in place");
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);

	cr_assert_eq(dev_of(mp0), device_number(0), "partition 0's mount point serves another device");
	cr_assert_eq(dev_of(mp1), device_number(1));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"wd\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label),
		     0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "wd", dir, sizeof(dir));
	cr_assert_eq(dev_of(dir), device_number(0), "the volume is not on its partition's device");
	cr_assert_str_eq(status_partition_uuid("wd"), tb.parts[0].uuid);
}

Test(promises, an_unpinned_create_never_lands_on_a_partition_that_is_not_adopted)
{
	char dir[700], file[800], mp[400];
	int err = 0;

	/* Partition 0 is fuller than partition 1: placement by free space alone would pick 1. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"filler\",\"Opts\":{\"partition\":\"%s\"}}",
			     tb.parts[0].label), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "filler", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/fill", dir);
	cr_assert_eq(testbed_write_bytes(file, 64LL << 20, false, &err), 64LL << 20, "%s", strerror(err));

	/* Restart without partition 1, whose UUID this host never used: brought back, it is a foreign disk. */
	testbed_replug_while_running(&tb, 1, selftest_off);
	testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
	/* A Get of an unknown name rescans: the disk is found, mounted read-only, not adopted. */
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"nosuch\"}"), 0);
	for (int i = 0; i < 50; i++) {
		char *line = mountinfo_line(mp);
		bool found = line != NULL;

		free(line);
		if (found)
			break;
		usleep(100 * 1000);
		(void)tb_call(&tb, "Get", &rep, "{\"Name\":\"nosuch\"}");
	}
	{
		char *line = mountinfo_line(mp);

		cr_assert(line && strstr(line, " ro,"), "the hot-plugged partition is not mounted read-only: %s",
			  line ? line : "(none)");
		free(line);
	}

	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "u%d", i);
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
		cr_assert_str_eq(status_partition_uuid(name), tb.parts[0].uuid,
				 "an unpinned Create landed on the partition that is not adopted");
	}
}
