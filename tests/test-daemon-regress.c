/*
 * Regressions of the correctness review (issue 10), each against the real
 * daemon on real loop XFS: a failed Remove, a non-ASCII label, a partition
 * attached while running (and the trust rule for it), concurrent Get during
 * rescans, the trash worker at start-up and at shutdown, the same name on two
 * partitions, nosuid/nodev, forgetting a volume whose disk is gone; of
 * issue 19: a record this host did not write grants no suid or dev; and of
 * issue 23: what a start reads per volume.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "volume/volume.h"

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
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(regress, .init = setup2, .fini = teardown, .timeout = 120);

static json_t *status_obj(const char *key)
{
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), key);
}

static const char *status_str(const char *key)
{
	return json_string_value(status_obj(key));
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void write_file(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(content, f);
	fclose(f);
}

static void part_path(int i, const char *rest, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/nvmevol/%s", tb.parts_root, tb.parts[i].uuid, rest);
}

static void set_immutable(const char *path, bool on)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY), flags = 0;

	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
	flags = on ? flags | FS_IMMUTABLE_FL : flags & ~FS_IMMUTABLE_FL;
	cr_assert_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0, "chattr: %s", strerror(errno));
	close(fd);
}

static void restart(const char *const *env)
{
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, env ? env : selftest_off), 0, "daemon did not start again");
}

/* Takes partition @i away as a hot-unplug would: unmounted (the daemon is stopped) and the loop detached. */
static void unplug(int i)
{
	char mp[400];

	testbed_part_mountpoint(&tb, i, mp, sizeof(mp));
	(void)umount2(mp, MNT_DETACH);
	cr_assert_eq(testbed_detach(&tb, i), 0);
}

/* Bug 1: a Remove that fails leaves the volume exactly as it was, and the next start keeps it. */
Test(regress, failed_remove_changes_nothing_and_the_volume_survives_restart)
{
	char dir[700], file[800], rec[700], idx[500];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"stay\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_volume_dir(&tb, 0, "stay", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	write_file(file, "precious");
	/* An immutable directory cannot be renamed: the move to the trash fails (EPERM). */
	set_immutable(dir, true);
	cr_assert_neq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"stay\"}"), 0, "Remove of an immutable directory succeeded");
	cr_assert(strstr(client_err(&rep), "not permitted"), "%s", client_err(&rep));

	part_path(0, "meta/stay.json", rec, sizeof(rec));
	snprintf(idx, sizeof(idx), "%s/index/stay.json", tb.state);
	cr_assert(exists(rec) && exists(idx) && exists(file), "a failed Remove changed the state");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"stay\"}"), 0);
	cr_assert_str_eq(status_str("state"), "ready");
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"stay\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"stay\",\"ID\":\"m\"}"), 0);

	restart(NULL);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"stay\"}"), 0, "the volume is gone after a restart: %s",
		     client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	cr_assert(exists(file), "its data is gone");
	set_immutable(dir, false);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"stay\"}"), 0, "%s", client_err(&rep));
	cr_assert(!exists(rec) && !exists(dir));
}

/* Bug 2: any label mkfs.xfs accepts round-trips through records. */
Test(regress, non_ascii_and_invalid_utf8_labels_round_trip)
{
	static const char *const suffixes[] = { "\xc3\xbc", "\xff\x01" }; /* "ü", then invalid UTF-8 and a control byte */

	for (size_t k = 0; k < 2; k++) {
		char label[32], image[600], name[16];

		snprintf(label, sizeof(label), "%s%s", tb.prefix, suffixes[k]);
		testbed_stop(&tb, SIGTERM);
		unplug(1);
		snprintf(image, sizeof(image), "%s", tb.parts[1].image);
		cr_assert_eq(RUN("xfs_admin", "-L", label, image), 0, "xfs_admin -L refused the label");
		cr_assert_eq(testbed_attach(&tb, 1), 0);
		cr_assert_eq(testbed_start(&tb, selftest_off), 0);

		snprintf(name, sizeof(name), "lbl%zu", k);
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\",\"Opts\":{\"partition\":\"%s\"}}", name,
				     tb.parts[1].uuid), 0, "%s", client_err(&rep));
		restart(NULL);
		cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
		cr_assert_str_eq(status_str("state"), "ready", "record unreadable after a restart with label %zu", k);
		const char *shown = json_string_value(json_object_get(status_obj("partition"), "label"));
		cr_assert_not_null(shown);
		if (k == 0)
			cr_assert_str_eq(shown + strlen(tb.prefix), "\xc3\xbc");
		else
			cr_assert_str_eq(shown + strlen(tb.prefix), "\\xff\\x01");
	}
}

/*
 * Bug 3 and the trust rule: a partition attached while the daemon runs, that
 * this host never used: its volumes appear without a restart, read-only; it
 * gets no new volumes until adopted (here: by a restart); and a Create of a
 * name that exists on it never touches that volume's record.
 */
Test(regress, partition_attached_while_running_is_loaded_read_only_and_never_clobbered)
{
	char dir[700], file[800], rec[700], idx[500], mp[400];
	char *line;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"hp\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"5\"}}",
			     tb.parts[1].label), 0);
	testbed_volume_dir(&tb, 1, "hp", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	write_file(file, "from another host");
	testbed_stop(&tb, SIGTERM);
	unplug(1);
	/* This host never knew it: a disk brought from elsewhere. */
	snprintf(idx, sizeof(idx), "%s/index/hp.json", tb.state);
	cr_assert_eq(unlink(idx), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"hp\"}"), 0);

	cr_assert_eq(testbed_attach(&tb, 1), 0);
	/* The background rescan notices the kernel's devices changed (Get waits for it only briefly): within a few seconds. */
	cr_assert_eq(tb_get_eventually(&tb, "hp", &rep, 3000), 0, "volume on the attached disk not found: %s",
		     client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	cr_assert(json_is_false(json_object_get(status_obj("partition"), "adopted")));
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0);
	cr_assert_eq(json_array_size(json_object_get(rep.json, "Volumes")), 1);

	/* The same name with other options: refused, and the existing record is left alone. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"hp\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"6\"}}", tb.parts[1].label), 0);
	cr_assert(strstr(client_err(&rep), "already exists"), "%s", client_err(&rep));
	part_path(1, "meta/hp.json", rec, sizeof(rec));
	cr_assert(exists(rec), "the other volume's record was deleted");
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"hp\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"5\"}}", tb.parts[1].label), 0,
		     "%s", client_err(&rep));

	/* Read-only: served for reading, no new volumes. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"hp\",\"ID\":\"r\"}"), 0, "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/hp", tb.prop);
	line = mountinfo_line(mp);
	cr_assert(line && strstr(line, " ro,"), "not read-only: %s", line ? line : "(none)");
	free(line);
	snprintf(file, sizeof(file), "%s/new", mp);
	cr_assert_eq(open(file, O_WRONLY | O_CREAT, 0644), -1);
	cr_assert_eq(errno, EROFS);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"hp\",\"ID\":\"r\"}"), 0);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fresh\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0);
	cr_assert(strstr(client_err(&rep), "adopt"), "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"hp\"}"), 0, "Remove on a read-only partition succeeded");
	cr_assert(exists(rec));

	/* A restart adopts what it finds. */
	restart(NULL);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fresh\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0,
		     "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"hp\",\"ID\":\"w\"}"), 0, "%s", client_err(&rep));
	snprintf(file, sizeof(file), "%s/new", mp);
	write_file(file, "writable now");
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"hp\",\"ID\":\"w\"}"), 0);
}

typedef struct Hammer {
	volatile bool stop;
	int errors, calls;
} Hammer;

static void *get_loop(void *arg)
{
	Hammer *h = arg;

	while (!h->stop) {
		ClientReply r = { 0 };
		if (client_post(tb.sock, "/VolumeDriver.Get", &r, "{\"Name\":\"flap\"}") < 0 || r.status != 200)
			h->errors++;
		h->calls++;
		client_reply_done(&r);
	}
	return NULL;
}

/* Bug 4: Get reads partition state while rescans change it (run under ASan in the asan stage). */
Test(regress, get_during_rescans_of_a_flapping_partition)
{
	static Hammer h; /* static: an assertion below must not leave the thread writing to a dead frame */
	pthread_t t;
	char mp[400];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"flap\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0);
	cr_assert_eq(pthread_create(&t, NULL, get_loop, &h), 0);
	for (int round = 0; round < 6; round++) {
		testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
		(void)umount2(mp, MNT_DETACH);
		cr_assert_eq(testbed_detach(&tb, 1), 0);
		/* Mount notices the partition is gone and rescans; Get keeps reading its state. */
		(void)tb_call(&tb, "Mount", &rep, "{\"Name\":\"flap\",\"ID\":\"x%d\"}", round);
		cr_assert_eq(testbed_attach(&tb, 1), 0);
		usleep(100 * 1000);
		cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"flap\",\"ID\":\"y%d\"}", round), 0, "round %d: %s",
			     round, client_err(&rep));
		cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"flap\",\"ID\":\"y%d\"}", round), 0);
	}
	h.stop = true;
	pthread_join(t, NULL);
	cr_assert_gt(h.calls, 0);
	cr_assert_eq(h.errors, 0, "%d of %d Gets failed", h.errors, h.calls);
	cr_assert_eq(kill(tb.pid, 0), 0, "the daemon died");
}

/* Bug 7: trash left by an earlier run is emptied in the background: the socket serves first. */
Test(regress, start_up_does_not_wait_for_the_trash)
{
	char trash[700], dst[800];

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs a build with -Dtest_hooks=true (NVMEVOL_TEST_TRASH_PAUSE_MS)");
	testbed_stop(&tb, SIGKILL);
	part_path(0, "trash", trash, sizeof(trash));
	for (int i = 0; i < 3; i++) {
		char f[900];
		snprintf(dst, sizeof(dst), "%s/left%d.0000000000000000", trash, i);
		cr_assert_eq(mkdir(dst, 0700), 0);
		for (int k = 0; k < 50; k++) {
			snprintf(f, sizeof(f), "%s/f%d", dst, k);
			write_file(f, "x");
		}
	}
	/* Each deletion is followed by a pause: a trash that takes seconds to empty. */
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_TRASH_PAUSE_MS=1500", NULL }), 0);
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0);
	cr_assert_geq(testbed_count_entries(trash), 1, "start-up emptied the trash before serving");
	for (int i = 0; i < 100 && testbed_count_entries(trash) > 0; i++)
		usleep(100 * 1000);
	cr_assert_eq(testbed_count_entries(trash), 0, "the background worker did not empty the trash");
}

/* Bug 6: a stop while the trash worker runs: it is joined, nothing outlives the partitions it uses. */
Test(regress, stop_while_the_trash_worker_runs)
{
	char dir[700], file[800], trash[700];
	int st;

	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_TRASH_PAUSE_MS=1000", NULL }), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"tw%d\",\"Opts\":{\"partition\":\"%s\"}}", i, tb.parts[0].label), 0);
		testbed_volume_dir(&tb, 0, i ? "tw1" : "tw0", dir, sizeof(dir));
		snprintf(file, sizeof(file), "%s/data", dir);
		write_file(file, "x");
		cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"tw%d\"}", i), 0);
	}
	st = testbed_stop(&tb, SIGTERM);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon did not stop cleanly (status 0x%x)", st);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	part_path(0, "trash", trash, sizeof(trash));
	for (int i = 0; i < 50 && testbed_count_entries(trash) > 0; i++)
		usleep(100 * 1000);
	cr_assert_eq(testbed_count_entries(trash), 0, "trash left behind is not emptied by the next start");
}

/* Bug 8: the same name on two partitions: both kept, one served, the conflict in Status, nothing moved. */
Test(regress, same_name_on_two_partitions_keeps_both)
{
	char dir0[700], dir1[700], file[800], rec[700], quarantine[700];
	Volume *v;
	char *body;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"twin\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_volume_dir(&tb, 0, "twin", dir0, sizeof(dir0));
	snprintf(file, sizeof(file), "%s/which", dir0);
	write_file(file, "first");
	testbed_stop(&tb, SIGTERM);

	/* A disk from another host with its own "twin": a record and a directory on partition 1. */
	v = volume_new("twin");
	snprintf(v->partition_uuid, sizeof(v->partition_uuid), "%s", tb.parts[1].uuid);
	snprintf(v->partition_label, sizeof(v->partition_label), "%s", tb.parts[1].label);
	v->created_at = 1700000000;
	body = volume_record_dump(v, false);
	volume_unref(v);
	part_path(1, "meta/twin.json", rec, sizeof(rec));
	write_file(rec, body);
	free(body);
	testbed_volume_dir(&tb, 1, "twin", dir1, sizeof(dir1));
	cr_assert_eq(mkdir(dir1, 0755), 0);
	snprintf(file, sizeof(file), "%s/which", dir1);
	write_file(file, "second");

	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"twin\"}"), 0);
	/* The one this host's index names is served. */
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("partition"), "uuid")), tb.parts[0].uuid);
	json_t *c = status_obj("conflicts");
	cr_assert(json_is_array(c) && json_array_size(c) == 1, "no conflict in Status");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(c, 0), "partition_uuid")), tb.parts[1].uuid);
	cr_assert(exists(rec) && exists(file), "the second copy was touched");
	part_path(1, "quarantine", quarantine, sizeof(quarantine));
	cr_assert_eq(testbed_count_entries(quarantine), 0, "the second copy was quarantined");

	/* Removing the served one serves the other: no restart, nothing lost. */
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"twin\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"twin\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("partition"), "uuid")), tb.parts[1].uuid);
	restart(NULL);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"twin\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("partition"), "uuid")), tb.parts[1].uuid);
}

/* Partition mounts and binds are nosuid,nodev, verified like noatime; options can allow either on a bind. */
Test(regress, nosuid_nodev_on_partitions_and_binds)
{
	char mp[400];
	char *line;

	for (int i = 0; i < 2; i++) {
		testbed_part_mountpoint(&tb, i, mp, sizeof(mp));
		line = mountinfo_line(mp);
		cr_assert(line && strstr(line, "nosuid") && strstr(line, "nodev"), "partition %d: %s", i, line);
		free(line);
	}
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"plain\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"suidok\",\"Opts\":{\"suid\":\"true\"}}"), 0);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"bad\",\"Opts\":{\"dev\":\"yes\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "true or false"), "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"plain\",\"ID\":\"a\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"suidok\",\"ID\":\"a\"}"), 0);
	snprintf(mp, sizeof(mp), "%s/plain", tb.prop);
	line = mountinfo_line(mp);
	cr_assert(line && strstr(line, "nosuid") && strstr(line, "nodev") && strstr(line, "noatime"), "%s", line);
	free(line);
	snprintf(mp, sizeof(mp), "%s/suidok", tb.prop);
	line = mountinfo_line(mp);
	cr_assert(line && !strstr(line, "nosuid") && strstr(line, "nodev"), "%s", line);
	free(line);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"suidok\"}"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("options"), "suid")), "true");
}

/* ---- issue 19, item 5: suid and dev come from this host, not from a disk's own record ---- */

/* The per-mount options of the bind of volume @name, as mountinfo shows them (malloc'd). */
static char *bind_options(const char *name)
{
	char mp[400], opts[512];
	char *line;

	snprintf(mp, sizeof(mp), "%s/%s", tb.prop, name);
	line = mountinfo_line(mp);
	cr_assert_not_null(line, "%s is not mounted", mp);
	cr_assert_eq(sscanf(line, "%*d %*d %*s %*s %*s %511s", opts), 1, "%s", line);
	free(line);
	return strdup(opts);
}

static bool has_option(const char *opts, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = opts; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, opt, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* Mounts @name, checks whether its bind has nosuid and nodev (@suppressed) or neither, unmounts. */
static void expect_bind(const char *name, bool suppressed)
{
	char *o;

	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"t\"}", name), 0, "%s", client_err(&rep));
	o = bind_options(name);
	cr_assert_eq(has_option(o, "nosuid"), suppressed, "volume %s bound with %s", name, o);
	cr_assert_eq(has_option(o, "nodev"), suppressed, "volume %s bound with %s", name, o);
	free(o);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"%s\",\"ID\":\"t\"}", name), 0, "%s", client_err(&rep));
}

static const char *suppressed_why(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return status_str("suid_dev_suppressed");
}

/* `nvmevol volume set NAME KEY=VALUE` through the admin socket; returns the HTTP status. */
static unsigned admin_set(const char *name, const char *changes)
{
	char sock[400];

	snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb.dir);
	cr_assert_eq(client_post(sock, "/Admin.VolumeSet", &rep, "{\"Name\":\"%s\",\"Changes\":%s}", name, changes), 0);
	return rep.status;
}

Test(regress, a_record_this_host_did_not_write_grants_no_suid_or_dev)
{
	char idx[500];
	const char *why;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"sd\",\"Opts\":{\"partition\":\"%s\",\"suid\":\"true\","
			     "\"dev\":\"true\"}}", tb.parts[0].label), 0, "%s", client_err(&rep));
	/* Created here: granted by this host. */
	expect_bind("sd", false);
	cr_assert_null(suppressed_why("sd"));

	/* This host's state is lost (or the disk comes from elsewhere): the record alone grants nothing. */
	testbed_stop(&tb, SIGTERM);
	snprintf(idx, sizeof(idx), "%s/index/sd.json", tb.state);
	cr_assert_eq(unlink(idx), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	expect_bind("sd", true);
	why = suppressed_why("sd");
	cr_assert(why && strstr(why, "not written by this host") && strstr(why, "nvmevol volume set sd suid=true dev=true"),
		  "%s", why ? why : "(no suid_dev_suppressed)");
	/* The index entry written at that start does not grant it either. */
	restart(NULL);
	expect_bind("sd", true);

	/* Only an admin's grant counts, never while mounted; a grant names what it grants. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"sd\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(admin_set("sd", "{\"suid\":\"true\",\"dev\":\"true\"}"), 409, "%s", rep.body);
	cr_assert(strstr(client_err(&rep), "is mounted"), "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"sd\",\"ID\":\"m\"}"), 0);
	cr_assert_eq(admin_set("sd", "{\"suid\":\"true\"}"), 200, "%s", rep.body);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"sd\",\"ID\":\"t\"}"), 0, "%s", client_err(&rep));
	{
		char *o = bind_options("sd");
		cr_assert(!has_option(o, "nosuid") && has_option(o, "nodev"), "%s", o);
		free(o);
	}
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"sd\",\"ID\":\"t\"}"), 0);
	cr_assert_eq(admin_set("sd", "{\"suid\":\"true\",\"dev\":\"true\"}"), 200, "%s", rep.body);
	expect_bind("sd", false);
	cr_assert_null(suppressed_why("sd"));
	/* The grant is this host's now: it outlives a restart. */
	restart(NULL);
	expect_bind("sd", false);
}

Test(regress, a_hot_plugged_disk_grants_no_suid_or_dev_until_adopted_and_set)
{
	char idx[500], sock[400];
	const char *why;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"hot\",\"Opts\":{\"partition\":\"%s\",\"suid\":\"true\","
			     "\"dev\":\"true\"}}", tb.parts[1].label), 0, "%s", client_err(&rep));
	/* Made on "another host": this one never knew it, and the disk arrives while the plugin runs. */
	testbed_stop(&tb, SIGTERM);
	unplug(1);
	snprintf(idx, sizeof(idx), "%s/index/hot.json", tb.state);
	cr_assert_eq(unlink(idx), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	cr_assert_eq(testbed_attach(&tb, 1), 0);
	cr_assert_eq(tb_get_eventually(&tb, "hot", &rep, 3000), 0, "%s", client_err(&rep));
	cr_assert(json_is_false(json_object_get(status_obj("partition"), "adopted")));
	expect_bind("hot", true);
	why = suppressed_why("hot");
	cr_assert(why && strstr(why, "not adopted"), "%s", why ? why : "(no suid_dev_suppressed)");
	/* Not adopted: nothing may be written there, not even a grant. */
	cr_assert_neq(admin_set("hot", "{\"suid\":\"true\",\"dev\":\"true\"}"), 200, "%s", rep.body);

	snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb.dir);
	cr_assert_eq(client_post(sock, "/Admin.PartitionAdopt", &rep, "{\"Partition\":\"%s\"}", tb.parts[1].uuid), 0);
	cr_assert_eq(rep.status, 200, "%s", rep.body);
	/* Adopted, but the record is still not this host's. */
	why = suppressed_why("hot");
	cr_assert(why && strstr(why, "not written by this host"), "%s", why ? why : "(no suid_dev_suppressed)");
	expect_bind("hot", true);
	cr_assert_eq(admin_set("hot", "{\"suid\":\"true\",\"dev\":\"true\"}"), 200, "%s", rep.body);
	expect_bind("hot", false);
}

/* ---- issue 23: what a start costs per volume ---- */

/* The calls of @syscall in a `strace -c` summary (its fourth column), -1 if the summary is not complete. */
static long strace_calls(const char *summary, const char *syscall)
{
	long calls = 0;

	if (!summary || !strstr(summary, " total\n"))
		return -1;
	for (const char *line = summary; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char name[64], c1[32], c2[32], c3[32];
		long n;

		/* "% time  seconds  usecs/call  calls  [errors]  syscall": the name is the last word. */
		if (sscanf(line, "%31s %31s %31s %ld", c1, c2, c3, &n) != 4)
			continue;
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		while (len > 0 && line[len - 1] == ' ')
			len--;
		size_t b = len;
		while (b > 0 && line[b - 1] != ' ')
			b--;
		if (len - b >= sizeof(name))
			continue;
		memcpy(name, line + b, len - b);
		name[len - b] = '\0';
		if (streq(name, syscall))
			calls += n;
	}
	return calls;
}

/* One start under `strace -f -c` until the first List, stopped at once: its file system calls, and its openat. */
static void count_a_start(const char *trace, long *ret_file_calls, long *ret_openat)
{
	static const char *const file_calls[] = { "openat", "newfstatat", "fstat", "statx", "read", "close" };
	char *summary = NULL;
	int r;

	testbed_stop(&tb, SIGTERM);
	r = testbed_start_traced(&tb, "-c", trace, selftest_off);
	cr_assert_eq(r, 0, "the daemon did not start under strace: %s", strerror(-r));
	testbed_stop(&tb, SIGTERM);
	/* strace -D writes the summary once the daemon is gone. */
	for (int i = 0; i < 200 && strace_calls(summary, "openat") < 0; i++) {
		free(summary);
		summary = NULL;
		(void)read_file_at(AT_FDCWD, trace, 1 << 20, &summary, NULL);
		usleep(50 * 1000);
	}
	cr_assert_geq(strace_calls(summary, "openat"), 0, "no strace summary in %s", trace);
	*ret_file_calls = 0;
	for (size_t i = 0; i < sizeof(file_calls) / sizeof(*file_calls); i++)
		*ret_file_calls += strace_calls(summary, file_calls[i]);
	*ret_openat = strace_calls(summary, "openat");
	free(summary);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
}

static void create_many(const char *prefix, int n)
{
	for (int i = 0; i < n; i++)
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s%03d\",\"Opts\":{\"selftest\":\"off\"}}", prefix, i), 0,
			     "%s", client_err(&rep));
}

/*
 * A start grows with the volumes by their two files only (the record on the
 * partition, the index entry): open, fstat, one read and close each. No open
 * of a snapshot directory per volume (one listing of snapshots/), no stat of
 * each volume's directory (the registry knows which have a record), no read
 * to find a file's end. Counted, not timed: the difference between a start
 * with 20 volumes and one with 220 (600 s allowed: 220 Creates and two traced
 * starts of an ASan build on a loaded machine).
 */
Test(regress, a_start_reads_each_volume_s_two_files_and_nothing_more, .timeout = 600)
{
	const int few = 20, more = 200;
	char trace[500];
	long calls1, open1, calls2, open2;
	double calls_per_volume, opens_per_volume;

	if (access("/usr/bin/strace", X_OK) != 0)
		cr_skip_test("needs strace (package strace) to count the daemon's system calls");
	create_many("few", few);
	snprintf(trace, sizeof(trace), "%s/start-few.strace", tb.state);
	count_a_start(trace, &calls1, &open1);
	create_many("more", more);
	snprintf(trace, sizeof(trace), "%s/start-more.strace", tb.state);
	count_a_start(trace, &calls2, &open2);
	calls_per_volume = (double)(calls2 - calls1) / more;
	opens_per_volume = (double)(open2 - open1) / more;
	cr_log_info("per volume: %.2f file system calls, %.2f openat (%ld and %ld with %d volumes, %ld and %ld with %d)",
		    calls_per_volume, opens_per_volume, calls1, open1, few, calls2, open2, few + more);
	cr_expect_leq(opens_per_volume, 2.1, "a start opens %.2f files per volume (its record and its index entry: 2)",
		      opens_per_volume);
	cr_expect_leq(calls_per_volume, 8.5, "a start makes %.2f file system calls per volume (open, fstat, read and "
		      "close of two files: 8)", calls_per_volume);
}

/*
 * The mount counts are written without fsync (src/README.md, State): a Mount
 * and the Unmount after it sync nothing. The count file's rename is counted
 * too, so a tracer that saw nothing cannot pass for one that saw no fsync.
 */
Test(regress, a_mount_and_its_unmount_sync_nothing)
{
	char pid[16], trace[500], status[64], line[256];
	char *summary = NULL;
	pid_t tracer;
	int st;

	if (access("/usr/bin/strace", X_OK) != 0)
		cr_skip_test("needs strace (package strace) to count the daemon's fsyncs");
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"counted\",\"Opts\":{\"selftest\":\"off\"}}"), 0, "%s",
		     client_err(&rep));
	snprintf(pid, sizeof(pid), "%d", tb.pid);
	snprintf(trace, sizeof(trace), "%s/mount.strace", tb.state);
	tracer = fork();
	cr_assert_geq(tracer, 0);
	if (tracer == 0) {
		execlp("strace", "strace", "-f", "-qq", "-c", "-o", trace, "-p", pid, "-e",
		       "trace=fsync,fdatasync,sync_file_range,syncfs,rename,renameat,renameat2", (char *)NULL);
		_exit(127);
	}
	/* Attached once the daemon's main thread names a tracer; then its other threads. */
	snprintf(status, sizeof(status), "/proc/%d/status", tb.pid);
	for (bool traced = false; !traced;) {
		FILE *f;

		cr_assert(waitpid(tracer, &st, WNOHANG) == 0, "strace exited before it attached");
		f = fopen(status, "re");
		while (f && fgets(line, sizeof(line), f))
			traced = traced || (strncmp(line, "TracerPid:", 10) == 0 && atoi(line + 10) > 0);
		if (f)
			fclose(f);
		usleep(50 * 1000);
	}
	usleep(300 * 1000);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"counted\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"counted\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	kill(tracer, SIGINT);
	while (waitpid(tracer, &st, 0) < 0 && errno == EINTR)
		;
	(void)read_file_at(AT_FDCWD, trace, 1 << 20, &summary, NULL);
	cr_assert_not_null(summary, "no strace summary in %s", trace);
	cr_expect_geq(strace_calls(summary, "renameat") + strace_calls(summary, "rename") +
			      strace_calls(summary, "renameat2"), 1, "the count file's rename was not seen:\n%s", summary);
	cr_expect_eq(strace_calls(summary, "fsync") + strace_calls(summary, "fdatasync") +
			     strace_calls(summary, "sync_file_range") + strace_calls(summary, "syncfs"), 0,
		     "a Mount and its Unmount synced:\n%s", summary);
	free(summary);
}
