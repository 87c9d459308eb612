/* SPDX-License-Identifier: MIT */
/*
 * Cordons, fences and evacuation through the real daemon and the `nvmevol
 * partition cordon|uncordon|evacuate` and `volume fence|unfence` commands on
 * two loop-backed XFS partitions: placement skips a cordoned partition and a
 * Create pinned to it gets an Err that says how to uncordon; the cordon
 * survives a restart (it is on the partition); a fenced volume refuses Mount
 * with the new host and the way back, Get and Remove still work; evacuate
 * moves idle volumes with their data, options and snapshots, gives volumes in
 * use a live pass and lists them as waiting, and the next Mount serves from
 * the new partition. The real case: volumes in use (mounted, a writer in
 * each) and with snapshots, the daemon killed (SIGKILL) during a pass and
 * stopped (SIGTERM) between passes: each final pass smaller than the full
 * copy, every volume and snapshot equal on the target, nothing left behind.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "helpers/treecmp.h"
#include "helpers/treefill.h"
#include "util/macro.h"

static Testbed tb;
static ClientReply rep;
static char out[65536], err[8192];
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void setup(void)
{
	testbed_require_root();
	testbed_setup(&tb, 2, selftest_off);
}

/* The real case's writer processes, ended by the teardown if a test failed before it ended them. */
static pid_t writers[2];

static void teardown(void)
{
	for (size_t i = 0; i < ELEMENTSOF(writers); i++)
		if (writers[i] > 0) {
			(void)kill(writers[i], SIGKILL);
			(void)waitpid(writers[i], NULL, 0);
			writers[i] = 0;
		}
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(daemon_evacuate, .init = setup, .fini = teardown, .timeout = 240);

#define ADMIN(...) testbed_admin(&tb, (const char *const[]){ __VA_ARGS__, NULL }, out, sizeof(out), err, sizeof(err))

static json_t *parse_out(void)
{
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);

	cr_assert_not_null(j, "not JSON (%s): %s", je.text, out);
	return j;
}

/* The Status partition object of partition @uuid from `nvmevol status --json` (the caller's reference). */
static json_t *status_partition(const char *uuid)
{
	json_t *j, *p, *found = NULL;
	size_t i;

	cr_assert_eq(ADMIN("status", "--json"), 0, "%s", err);
	j = parse_out();
	json_array_foreach(json_object_get(j, "partitions"), i, p)
		if (!strcmp(json_string_value(json_object_get(p, "uuid")), uuid))
			found = json_incref(p);
	json_decref(j);
	cr_assert_not_null(found, "partition %s not in status: %s", uuid, out);
	return found;
}

/* The partition UUID a volume's Get names. */
static const char *volume_partition(const char *name)
{
	static char uuid[64];
	json_t *st;
	const char *u;

	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	st = json_object_get(json_object_get(rep.json, "Volume"), "Status");
	u = json_string_value(json_object_get(json_object_get(st, "partition"), "uuid"));
	snprintf(uuid, sizeof(uuid), "%s", u ? u : "");
	return uuid;
}

/* ---- cordon ---- */

Test(daemon_evacuate, cordon_skips_placement_refuses_a_pinned_create_and_survives_a_restart)
{
	const char *u0 = tb.parts[0].uuid, *u1 = tb.parts[1].uuid;
	char mp[400], file[600];
	struct stat st;
	json_t *p;

	cr_assert_eq(ADMIN("partition", "cordon", u0), 0, "%s", err);
	cr_assert(strstr(out, "cordoned"), "%s", out);
	/* Again: nothing changes, and it says so. */
	cr_assert_eq(ADMIN("partition", "cordon", u0, "--json"), 0, "%s", err);
	cr_assert(strstr(out, "already cordoned"), "%s", out);
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(file, sizeof(file), "%s/nvmevol/cordon.json", mp);
	cr_assert_eq(stat(file, &st), 0, "the cordon is not on the partition");

	/* Placement never picks it, however many volumes are made. */
	for (int i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof(name), "free%d", i);
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
		cr_assert_str_eq(volume_partition(name), u1);
	}
	/* Pinned to it: a clear Err, and nothing was made. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0);
	cr_assert(strstr(client_err(&rep), "is cordoned"), "%s", client_err(&rep));
	cr_assert(strstr(client_err(&rep), "nvmevol partition uncordon"), "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"pinned\"}"), 0);

	/* Status JSON and the table. */
	p = status_partition(u0);
	cr_assert(json_is_true(json_object_get(p, "cordoned")), "%s", out);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "cordon"), "by")), "admin");
	json_decref(p);
	p = status_partition(u1);
	cr_assert(json_is_false(json_object_get(p, "cordoned")), "%s", out);
	json_decref(p);
	cr_assert_eq(ADMIN("status"), 0, "%s", err);
	cr_assert(strstr(out, "cordoned (admin)"), "%s", out);

	/* A restart reads it back from the partition. */
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, selftest_off);
	p = status_partition(u0);
	cr_assert(json_is_true(json_object_get(p, "cordoned")), "not cordoned after a restart: %s", out);
	json_decref(p);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0);

	/* Uncordon: it takes volumes again, and says so after a restart too. */
	cr_assert_eq(ADMIN("partition", "uncordon", u0), 0, "%s", err);
	cr_assert(strstr(out, "uncordoned"), "%s", out);
	cr_assert_neq(stat(file, &st), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	cr_assert_eq(ADMIN("partition", "uncordon", u0), 0, "%s", err);
	cr_assert(strstr(out, "not cordoned"), "%s", out);
}

Test(daemon_evacuate, cordon_commands_refuse_bad_input)
{
	cr_assert_eq(ADMIN("partition", "cordon", "nosuch"), 1);
	cr_assert(strstr(err, "no partition has the label or UUID 'nosuch'"), "%s", err);
	cr_assert_eq(ADMIN("partition", "cordon", "a/b"), 1);
	cr_assert(strstr(err, "invalid 'Partition'"), "%s", err);
	cr_assert_eq(ADMIN("partition", "cordon"), 2);
	cr_assert_eq(ADMIN("partition", "uncordon", "x", "y"), 2);
	cr_assert_eq(ADMIN("partition", "cordon", "--help"), 0);
	cr_assert(strstr(out, "no new volumes"), "%s", out);
}

/* ---- fence ---- */

Test(daemon_evacuate, fence_refuses_mount_with_the_new_host_until_unfenced_and_remove_works)
{
	json_t *st;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fv\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"gone\"}"), 0, "%s", client_err(&rep));
	/* Mounted: refused (a move fences once nothing uses it). */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"fv\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("volume", "fence", "fv", "node2"), 1);
	cr_assert(strstr(err, "is mounted"), "%s", err);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"fv\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));

	cr_assert_eq(ADMIN("volume", "fence", "fv", "node2", "--json"), 0, "%s", err);
	st = parse_out();
	cr_assert_eq(json_integer_value(json_object_get(st, "generation")), 1, "%s", out);
	json_decref(st);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"fv\",\"ID\":\"c2\"}"), 0);
	cr_assert(strstr(client_err(&rep), "moved to node2"), "%s", client_err(&rep));
	cr_assert(strstr(client_err(&rep), "nvmevol volume unfence fv"), "%s", client_err(&rep));

	/* Get and List still show it, with the fence in Status. */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"fv\"}"), 0, "%s", client_err(&rep));
	st = json_object_get(json_object_get(rep.json, "Volume"), "Status");
	cr_assert(json_is_true(json_object_get(st, "fenced")));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "moved_to"), "host")), "node2");
	cr_assert_str_eq(json_string_value(json_object_get(st, "state")), "fenced");
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0, "%s", client_err(&rep));
	cr_assert(strstr(rep.body, "\"fv\""), "%s", rep.body);

	/* The fence is in the record: a crash (SIGKILL) and a start keep it. */
	testbed_stop(&tb, SIGKILL);
	testbed_start_or_fail(&tb, selftest_off);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"fv\",\"ID\":\"c3\"}"), 0);
	cr_assert(strstr(client_err(&rep), "moved to node2"), "%s", client_err(&rep));

	/* Unfence: mounts again; fenced again, the generation goes up. */
	cr_assert_eq(ADMIN("volume", "unfence", "fv"), 0, "%s", err);
	cr_assert(strstr(out, "unfenced"), "%s", out);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"fv\",\"ID\":\"c4\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"fv\",\"ID\":\"c4\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("volume", "fence", "fv", "node3", "--json"), 0, "%s", err);
	st = parse_out();
	cr_assert_eq(json_integer_value(json_object_get(st, "generation")), 2, "%s", out);
	json_decref(st);
	cr_assert_eq(ADMIN("volume", "unfence", "fv"), 0, "%s", err);
	cr_assert_eq(ADMIN("volume", "unfence", "fv"), 0, "%s", err);
	cr_assert(strstr(out, "not fenced"), "%s", out);

	/* A fenced volume can be removed. */
	cr_assert_eq(ADMIN("volume", "fence", "gone", "node2"), 0, "%s", err);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"gone\"}"), 0, "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"gone\"}"), 0);

	/* Bad input: usage errors and clear Errs. */
	cr_assert_eq(ADMIN("volume", "fence", "fv"), 2);
	cr_assert_eq(ADMIN("volume", "fence", "nosuch", "node2"), 1);
	cr_assert(strstr(err, "no such volume"), "%s", err);
	cr_assert_eq(ADMIN("volume", "fence", "fv", "bad host"), 1);
	cr_assert(strstr(err, "invalid 'Host'"), "%s", err);
}

/* Fills the filesystem of @dir with one file, then smaller ones, until a 4 KiB allocation or an inode fails. */
static void fill_up(const char *dir)
{
	char path[800];
	struct statvfs sv;

	cr_assert_eq(statvfs(dir, &sv), 0);
	for (int i = 0;; i++) {
		uint64_t want = i == 0 ? (uint64_t)sv.f_bavail * sv.f_frsize : 4096u << (i < 12 ? 12 - i : 0);
		int fd;

		cr_assert_lt(i, 100000, "the partition never filled up");
		snprintf(path, sizeof(path), "%s/fill%d", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 && errno == ENOSPC)
			break; /* not even an inode left */
		cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
		if (posix_fallocate(fd, 0, (off_t)want) != 0 && want == 4096) {
			close(fd);
			break;
		}
		close(fd);
	}
}

/*
 * A fence whose record cannot be written (a full partition): a clear Err, the
 * daemon serves on, the volume is not fenced. The failed write freed the new
 * fence twice (glibc aborted the plugin: a swarm move killed its plugin so).
 */
Test(daemon_evacuate, a_fence_that_cannot_be_written_fails_cleanly)
{
	char dir[700];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"full\",\"Opts\":{\"partition\":\"%s\"}}",
			     tb.parts[0].uuid), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "full", dir, sizeof(dir));
	fill_up(dir);
	cr_assert_eq(ADMIN("volume", "fence", "full", "node2"), 1, "%s %s", out, err);
	cr_assert(strstr(err, "cannot write the record of volume full"), "%s", err);
	cr_assert_eq(waitpid(tb.pid, NULL, WNOHANG), 0, "the daemon died on a fence it could not write");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"full\"}"), 0, "%s", client_err(&rep));
	cr_assert_null(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "moved_to"),
		       "%s", rep.body);
	cr_assert_eq(ADMIN("volume", "unfence", "full"), 0, "%s", err);
	cr_assert(strstr(out, "not fenced"), "%s", out);
}

/* ---- evacuate ---- */

/* A reference copy of @dir next to the volumes (same filesystem: reflinked, holes and layout kept). */
static void reference_copy(const char *dir, const char *ref)
{
	if (RUN("cp", "-a", "--reflink=always", dir, ref) != 0)
		cr_assert_eq(RUN("cp", "-a", "--sparse=always", dir, ref), 0);
}

static json_t *volume_status(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_incref(json_object_get(json_object_get(rep.json, "Volume"), "Status"));
}

static bool names_in(const json_t *arr, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(arr, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "name")), name))
			return true;
	return false;
}

Test(daemon_evacuate, idle_volumes_move_with_their_data_and_snapshots_in_use_ones_wait)
{
	const char *u0 = tb.parts[0].uuid, *u1 = tb.parts[1].uuid;
	char dir[700], ref[700], mp0[400], mp1[400], why[1024], *mpt;
	json_t *j, *st, *opts_before;
	struct stat a, b;

	testbed_part_mountpoint(&tb, 0, mp0, sizeof(mp0));
	testbed_part_mountpoint(&tb, 1, mp1, sizeof(mp1));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"data\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"999\","
			     "\"gid\":\"998\",\"mode\":\"0750\",\"selftest\":\"warn\"}}", u0), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"empty\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"busy\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"snapped\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	testbed_volume_dir(&tb, 0, "data", dir, sizeof(dir));
	tree_fill_sample(dir);
	snprintf(ref, sizeof(ref), "%s/ref-data", mp0);
	reference_copy(dir, ref);
	st = volume_status("data");
	opts_before = json_incref(json_object_get(st, "options"));
	json_decref(st);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("volume", "snapshot", "snapped", "s1"), 0, "%s", err);

	/* Not all could leave: exit 1, and the JSON says which moved and which wait (after a live pass). */
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--json"), 1, "%s", err);
	j = parse_out();
	cr_assert(names_in(json_object_get(j, "moved"), "data"), "%s", out);
	cr_assert(names_in(json_object_get(j, "moved"), "empty"), "%s", out);
	cr_assert(names_in(json_object_get(j, "moved"), "snapped"), "%s", out);
	cr_assert(names_in(json_object_get(j, "waiting"), "busy"), "%s", out);
	cr_assert_eq(json_array_size(json_object_get(j, "refused")), 0, "%s", out);
	json_decref(j);
	/* The snapshot came along, under its name and ID. */
	cr_assert_eq(ADMIN("volume", "snapshots", "snapped", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"s1\""), "%s", out);

	/* Cordoned first, and each volume now on the other partition, its data, owner and options whole. */
	st = status_partition(u0);
	cr_assert(json_is_true(json_object_get(st, "cordoned")), "%s", out);
	json_decref(st);
	cr_assert_str_eq(volume_partition("data"), u1);
	cr_assert_str_eq(volume_partition("empty"), u1);
	cr_assert_str_eq(volume_partition("busy"), u0);
	cr_assert_str_eq(volume_partition("snapped"), u1);
	st = volume_status("data");
	cr_assert(json_equal(json_object_get(st, "options"), opts_before), "options changed: %s", rep.body);
	json_decref(st);
	json_decref(opts_before);
	testbed_volume_dir(&tb, 1, "data", dir, sizeof(dir));
	cr_assert_eq(treecmp(ref, dir, 0, why, sizeof(why)), 0, "the moved volume differs: %s", why);
	testbed_volume_dir(&tb, 0, "data", dir, sizeof(dir));
	cr_assert_neq(lstat(dir, &a), 0, "the old directory is still in volumes/");

	/* The next Mount serves it from the new partition. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"data\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	mpt = strdup(json_string_value(json_object_get(rep.json, "Mountpoint")));
	cr_assert_eq(stat(mpt, &a), 0);
	cr_assert_eq(stat(mp1, &b), 0);
	cr_assert_eq(a.st_dev, b.st_dev, "served from another filesystem than the new partition's");
	snprintf(why, sizeof(why), "%s/sub/deeper/data", mpt);
	cr_assert_eq(stat(why, &a), 0, "the data is not in the mounted volume");
	free(mpt);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"data\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));

	/* The waiting one moves once unmounted; the command is simply run again. */
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "evacuate", u0), 0, "%s %s", out, err);
	cr_assert(strstr(out, "moved busy"), "%s", out);
	cr_assert_str_eq(volume_partition("busy"), u1);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1), 0, "%s %s", out, err);
	cr_assert(strstr(out, "0 volume(s) moved"), "%s", out);

	/* A restart: served from the new partition, nothing left on the old one, still cordoned. */
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, selftest_off);
	cr_assert_str_eq(volume_partition("data"), u1);
	testbed_volume_dir(&tb, 1, "data", dir, sizeof(dir));
	cr_assert_eq(treecmp(ref, dir, 0, why, sizeof(why)), 0, "after a restart: %s", why);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"data\"}"), 0, "%s", client_err(&rep));
	snprintf(dir, sizeof(dir), "%s/nvmevol/meta", mp0);
	cr_assert_eq(testbed_count_entries(dir), 0, "records left on the evacuated partition");
	snprintf(dir, sizeof(dir), "%s/nvmevol/volumes", mp0);
	cr_assert_eq(testbed_count_entries(dir), 0, "directories left on the evacuated partition");
	cr_assert_eq(ADMIN("status", "--json"), 0, "%s", err);
	cr_assert(!strstr(out, "conflicts\":[{"), "%s", out);
}

Test(daemon_evacuate, evacuate_refuses_bad_targets)
{
	const char *u0 = tb.parts[0].uuid;

	cr_assert_eq(ADMIN("partition", "evacuate", "nosuch"), 1);
	cr_assert(strstr(err, "no present partition has the label or UUID 'nosuch'"), "%s", err);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u0), 1);
	cr_assert(strstr(err, "--to names the partition being evacuated"), "%s", err);
	cr_assert_eq(ADMIN("partition", "evacuate"), 2);
	cr_assert_eq(ADMIN("partition", "evacuate", "--help"), 0);
	/* Nothing to move is success. */
	cr_assert_eq(ADMIN("partition", "evacuate", u0), 0, "%s", err);
	cr_assert(strstr(out, "0 volume(s) moved"), "%s", out);
	/* The other partition cordoned too: nowhere to go, said per volume. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"stuck\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].uuid),
		     0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "evacuate", tb.parts[1].uuid), 1);
	cr_assert(strstr(out, "no other partition"), "%s", out);
	cr_assert_str_eq(volume_partition("stuck"), tb.parts[1].uuid);
	/* Every partition cordoned: a Create says so, and what lifts it. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"nowhere\"}"), 0);
	cr_assert(strstr(client_err(&rep), "[cordoned: 'nvmevol partition uncordon' lifts it]"), "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "uncordon", "--help"), 0);
	cr_assert_eq(ADMIN("volume", "fence", "--help"), 0);
	cr_assert_eq(ADMIN("volume", "unfence", "--help"), 0);
	cr_assert(strstr(out, "fenced volume"), "%s", out);
}

/*
 * A switch that fails after its mark (here T's record cannot be written: T's nvmevol/meta/ is
 * immutable, chattr +i, which nothing before the switch writes to) is undone: the volume stays served from P, and neither its
 * record nor its index entry keeps the mark (before: the index entry was put back from the volume
 * while it still had the mark, so it named an evacuation that never happened, across restarts).
 */
/* The text of file @path (a record, an index entry) into @buf. */
static void read_text(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
}

Test(daemon_evacuate, a_switch_that_fails_leaves_no_mark_in_the_record_or_the_index)
{
	const char *u0 = tb.parts[0].uuid;
	char mp[400], p[800], buf[4096];
	int rc;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"undone\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
	snprintf(p, sizeof(p), "%s/nvmevol/meta", mp);
	cr_assert_eq(RUN("chattr", "+i", p), 0);
	rc = ADMIN("partition", "evacuate", u0);
	cr_assert_eq(RUN("chattr", "-i", p), 0);
	cr_assert_eq(rc, 1, "%s %s", out, err);
	cr_assert(strstr(out, "cannot write the record"), "%s", out);
	cr_assert(strstr(out, "undone"), "%s", out);
	cr_assert_str_eq(volume_partition("undone"), u0);
	snprintf(p, sizeof(p), "%s/index/undone.json", tb.state);
	read_text(p, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "evacuating_to"), "the index entry keeps the mark of the undone switch: %s", buf);
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(p, sizeof(p), "%s/nvmevol/meta/undone.json", mp);
	read_text(p, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "evacuating_to"), "the record keeps the mark of the undone switch: %s", buf);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"undone\",\"ID\":\"m1\"}"), 0, "%s", client_err(&rep));
}

/*
 * An empty nvmevol/snapshots/VOLUME on the target (what a snapshot that failed at its meta/ left
 * before, found by errinject's evacuate/mkdirat#2 points) holds nothing: the evacuation removes it and
 * goes on (before: refused, on every later try and across restarts). One with a record still refuses.
 */
/* Partition @i's nvmevol/snapshots/left/@sub made by hand (its path in @p), as a leftover. */
static void leftover_dir(int i, const char *sub, char *p, size_t len)
{
	char mp[400];

	testbed_part_mountpoint(&tb, i, mp, sizeof(mp));
	snprintf(p, len, "%s/nvmevol/snapshots/left", mp);
	cr_assert_eq(mkdir(p, 0700), 0, "%s: %s", p, strerror(errno));
	snprintf(p, len, "%s/nvmevol/snapshots/left/%s", mp, sub);
	cr_assert_eq(mkdir(p, 0700), 0, "%s: %s", p, strerror(errno));
}

Test(daemon_evacuate, an_empty_snapshots_directory_on_the_target_does_not_block_an_evacuation)
{
	const char *u0 = tb.parts[0].uuid, *u1 = tb.parts[1].uuid;
	char p[800];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"left\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	leftover_dir(1, "meta", p, sizeof(p));
	cr_assert_eq(ADMIN("partition", "evacuate", u0), 0, "%s %s", out, err);
	cr_assert_str_eq(volume_partition("left"), u1);
	/* Not empty: refused, and left alone. */
	cr_assert_eq(ADMIN("partition", "uncordon", u0), 0, "%s", err);
	leftover_dir(0, "keep", p, sizeof(p));
	cr_assert_eq(ADMIN("partition", "evacuate", u1), 1, "%s %s", out, err);
	cr_assert(strstr(out, "has nvmevol/snapshots/left"), "%s", out);
	cr_assert_eq(access(p, F_OK), 0, "the leftover with something in it was touched");
	cr_assert_str_eq(volume_partition("left"), u1);
}

/* ---- the real case: volumes in use and with snapshots, restarts in the middle ---- */

/* A process that keeps writing into @dir: 64 small files rewritten in turn, and a log that grows. */
/* A forked command's end: its output in tb.dir/@file for the parent to read, its status as the exit code. */
static _Noreturn void child_exit(const char *file, int rc)
{
	char path[700];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tb.dir, file);
	f = fopen(path, "w");
	if (f) {
		fputs(out, f);
		fclose(f);
	}
	_exit(rc);
}

static pid_t start_writer(const char *dir, size_t slot)
{
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid > 0)
		writers[slot] = pid;
	if (pid == 0) {
		char path[1024], buf[8192];
		int fd;

		snprintf(path, sizeof(path), "%s/w", dir);
		(void)mkdir(path, 0755);
		for (unsigned i = 0;; i++) {
			memset(buf, 'a' + (int)(i % 26), sizeof(buf));
			snprintf(path, sizeof(path), "%s/w/f%02u", dir, i % 64);
			fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd >= 0) {
				(void)!write(fd, buf, sizeof(buf));
				(void)fsync(fd);
				(void)close(fd);
			}
			snprintf(path, sizeof(path), "%s/w/log", dir);
			fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (fd >= 0) {
				(void)!write(fd, buf, 4096);
				(void)close(fd);
			}
			usleep(5000);
		}
	}
	return pid;
}

static void stop_writer(size_t slot)
{
	pid_t pid = writers[slot];
	int status;

	writers[slot] = 0;
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
}

/* The entry of volume @name in array @key of an evacuate's JSON (borrowed), or NULL. */
static json_t *entry_of(json_t *j, const char *key, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(j, key), i, e)
		if (!strcmp(json_string_value(json_object_get(e, "name")), name))
			return e;
	return NULL;
}

/* A live pass's figures, if it was a full one. */
static void note_full_pass(json_t *pass, uint64_t *ret_bytes, uint64_t *ret_ms)
{
	if (!pass || strcmp(json_string_value(json_object_get(pass, "kind")), "full") != 0)
		return;
	*ret_bytes = (uint64_t)json_integer_value(json_object_get(pass, "bytes"));
	*ret_ms = (uint64_t)json_integer_value(json_object_get(pass, "ms"));
}

/* Writes @len bytes of pattern @c at @offset of @path (made if need be). */
static void write_at(const char *path, char c, off_t offset, size_t len)
{
	char buf[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0, "%s: %m", path);
	memset(buf, c, sizeof(buf));
	for (size_t done = 0; done < len; done += sizeof(buf))
		cr_assert_eq(pwrite(fd, buf, sizeof(buf), offset + (off_t)done), (ssize_t)sizeof(buf));
	cr_assert_eq(fsync(fd), 0);
	close(fd);
}

/* The snapshots of @name as "NAME=ID,..." in the order listed. */
static void snapshot_ids(const char *name, char *buf, size_t len)
{
	json_t *j, *s;
	size_t i, used = 0;

	cr_assert_eq(ADMIN("volume", "snapshots", name, "--json"), 0, "%s", err);
	j = parse_out();
	buf[0] = '\0';
	json_array_foreach(json_object_get(j, "snapshots"), i, s)
		used += (size_t)snprintf(buf + used, len - used, "%s=%s,", json_string_value(json_object_get(s, "name")),
					 json_string_value(json_object_get(s, "id")));
	json_decref(j);
}

/* The number of entries of @path, 0 when it does not exist (yet). */
static int entries_or_zero(const char *path)
{
	return access(path, F_OK) == 0 ? testbed_count_entries(path) : 0;
}

/* A reflinked copy of volume @name on partition 0 as ref-NAME there, and of its snapshot @snap (if given) as ref-NAME-SNAP. */
static void keep_copy(const char *mp0, const char *name, const char *snap)
{
	char dir[900], ref[900];

	if (snap)
		snprintf(dir, sizeof(dir), "%s/nvmevol/snapshots/%s/data/%s", mp0, name, snap);
	else
		testbed_volume_dir(&tb, 0, name, dir, sizeof(dir));
	snprintf(ref, sizeof(ref), "%s/ref-%s%s%s", mp0, name, snap ? "-" : "", snap ? snap : "");
	reference_copy(dir, ref);
}

/* Snapshot @snap of @name on partition 1 (mounted at @mp1) equals its copy kept by keep_copy(). */
static void check_snapshot(const char *mp0, const char *mp1, const char *name, const char *snap)
{
	char dir[900], ref[900], why[1024];

	snprintf(dir, sizeof(dir), "%s/nvmevol/snapshots/%s/data/%s", mp1, name, snap);
	snprintf(ref, sizeof(ref), "%s/ref-%s-%s", mp0, name, snap);
	cr_assert_eq(treecmp(ref, dir, 0, why, sizeof(why)), 0, "snapshot %s/%s differs on the target: %s", name, snap,
		     why);
}

/* Where volume @name's directory is: 0 or 1 (the partition), failing unless on exactly one. */
static int volume_home(const char *name)
{
	char d0[700], d1[700];
	struct stat st;
	bool on0, on1;

	testbed_volume_dir(&tb, 0, name, d0, sizeof(d0));
	testbed_volume_dir(&tb, 1, name, d1, sizeof(d1));
	on0 = lstat(d0, &st) == 0;
	on1 = lstat(d1, &st) == 0;
	cr_assert(on0 != on1, "volume %s on %s partition(s)", name, on0 ? "both" : "neither");
	return on1;
}

Test(daemon_evacuate, volumes_in_use_get_live_passes_snapshots_follow_and_restarts_change_nothing, .timeout = 600)
{
	static const char *const names[] = { "db", "logs", "idle", "plain" };
	const char *u0 = tb.parts[0].uuid, *u1 = tb.parts[1].uuid;
	char mp0[400], mp1[400], dir[700], ref[800], path[900], why[1024], ids_db[512], ids_idle[512];
	char *mnt_db, *mnt_logs;
	json_t *j, *e, *opts[4];
	uint64_t full_bytes[2] = { 0 }, full_ms[2] = { 0 }, alloc = 0, shared = 0;
	pid_t cmd;
	int status;
	bool killed_mid_pass = false;

	testbed_part_mountpoint(&tb, 0, mp0, sizeof(mp0));
	testbed_part_mountpoint(&tb, 1, mp1, sizeof(mp1));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"db\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"999\","
			     "\"gid\":\"998\",\"mode\":\"0750\"}}", u0), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"logs\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"idle\",\"Opts\":{\"partition\":\"%s\",\"selftest\":"
			     "\"warn\"}}", u0), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"plain\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	for (int i = 0; i < 4; i++) {
		json_t *st = volume_status(names[i]);

		opts[i] = json_incref(json_object_get(st, "options"));
		json_decref(st);
		testbed_volume_dir(&tb, 0, names[i], dir, sizeof(dir));
		tree_fill_sample(dir);
	}
	/* db: 64 MiB of data; logs: 8 MiB; idle: 16 MiB, with snapshots a and b (1 MiB changed between them). */
	testbed_volume_dir(&tb, 0, "db", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/big", dir);
	write_at(path, 'd', 0, 64u << 20);
	testbed_volume_dir(&tb, 0, "logs", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/old", dir);
	write_at(path, 'l', 0, 8u << 20);
	testbed_volume_dir(&tb, 0, "idle", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/big", dir);
	write_at(path, 'i', 0, 16u << 20);
	cr_assert_eq(ADMIN("volume", "snapshot", "idle", "sa"), 0, "%s", err);
	write_at(path, 'j', 4u << 20, 1u << 20);
	cr_assert_eq(ADMIN("volume", "snapshot", "idle", "sb"), 0, "%s", err);
	write_at(path, 'k', 8u << 20, 1u << 20);
	snapshot_ids("idle", ids_idle, sizeof(ids_idle));
	/* The idle ones as they are, to compare with (nothing writes them). */
	keep_copy(mp0, "idle", NULL);
	keep_copy(mp0, "plain", NULL);
	keep_copy(mp0, "idle", "sa");
	keep_copy(mp0, "idle", "sb");

	/* db and logs in use: mounted through the daemon, a writer in each; db gets a snapshot while written. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"db\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	mnt_db = strdup(json_string_value(json_object_get(rep.json, "Mountpoint")));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"logs\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	mnt_logs = strdup(json_string_value(json_object_get(rep.json, "Mountpoint")));
	(void)start_writer(mnt_db, 0);
	(void)start_writer(mnt_logs, 1);
	usleep(100000);
	cr_assert_eq(ADMIN("volume", "snapshot", "db", "s1"), 0, "%s", err);
	snapshot_ids("db", ids_db, sizeof(ids_db));

	/* Run 1, killed (SIGKILL) in the middle: once db's stage on the target shows a tree being built. */
	cmd = fork();
	cr_assert_geq(cmd, 0);
	if (cmd == 0) {
		/* Its answer, if it got one before the kill, for the parent to read. */
		int rc = ADMIN("partition", "evacuate", u0, "--to", u1, "--json");

		child_exit("run1.json", rc);
	}
	snprintf(path, sizeof(path), "%s/nvmevol/snapshots/.evacuating/db", mp1);
	for (int i = 0; i < 20000 && !killed_mid_pass; i++) {
		if (waitpid(cmd, &status, WNOHANG) == cmd) {
			cmd = 0;
			break;
		}
		killed_mid_pass = entries_or_zero(path) > 1; /* state.json and a tree */
		if (!killed_mid_pass)
			usleep(1000);
	}
	testbed_stop(&tb, SIGKILL);
	if (cmd > 0)
		cr_assert_eq(waitpid(cmd, &status, 0), cmd);
	cr_log_info("run 1 was killed %s", killed_mid_pass ? "during db's pass" : "after it ended");
	snprintf(path, sizeof(path), "%s/run1.json", tb.dir);
	if (!killed_mid_pass && (j = json_load_file(path, 0, NULL))) {
		for (int i = 0; i < 2; i++) {
			note_full_pass(json_object_get(entry_of(j, "waiting", names[i]), "pass"), &full_bytes[i], &full_ms[i]);
		}
		json_decref(j);
	}
	testbed_start_or_fail(&tb, selftest_off);
	/* Whole on exactly one partition each, still served; db and logs still mounted and written. */
	for (int i = 0; i < 4; i++) {
		(void)volume_home(names[i]);
		cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", names[i]), 0, "%s", client_err(&rep));
	}
	cr_assert_eq(volume_home("db"), 0);
	cr_assert_eq(volume_home("logs"), 0);

	/* Run 2: the idle ones move with their snapshots; db and logs get a live pass and wait. */
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1, "--json"), 1, "%s %s", out, err);
	j = parse_out();
	for (int i = 2; i < 4; i++)
		cr_assert(entry_of(j, "moved", names[i]) || volume_home(names[i]) == 1, "%s not moved: %s", names[i], out);
	for (int i = 0; i < 2; i++) {
		e = json_object_get(entry_of(j, "waiting", names[i]), "pass");
		cr_assert_not_null(e, "no live pass for %s: %s", names[i], out);
		note_full_pass(e, &full_bytes[i], &full_ms[i]);
	}
	json_decref(j);

	/* A clean restart between passes: the stage and the pass's snapshot stay; the next pass is incremental. */
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, selftest_off);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1, "--json"), 1, "%s %s", out, err);
	j = parse_out();
	for (int i = 0; i < 2; i++) {
		e = json_object_get(entry_of(j, "waiting", names[i]), "pass");
		cr_assert_not_null(e, "no live pass for %s: %s", names[i], out);
		cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "incremental", "%s", out);
	}
	json_decref(j);
	cr_assert_eq(ADMIN("volume", "snapshots", "db", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"evacuation\": true"), "the pass's snapshot is not listed: %s", out);
	cr_assert(full_bytes[0] && full_bytes[1], "no full pass seen (db %llu, logs %llu bytes)",
		  (unsigned long long)full_bytes[0], (unsigned long long)full_bytes[1]);

	/* The containers stop: the final pass carries what changed since the last one, then the switch. */
	stop_writer(0);
	stop_writer(1);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"db\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"logs\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	keep_copy(mp0, "db", NULL);
	keep_copy(mp0, "logs", NULL);
	keep_copy(mp0, "db", "s1");
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1, "--json"), 0, "%s %s", out, err);
	j = parse_out();
	for (int i = 0; i < 2; i++) {
		uint64_t final_bytes, full = full_bytes[i];

		e = json_object_get(entry_of(j, "moved", names[i]), "final_pass");
		cr_assert_not_null(e, "%s not moved: %s", names[i], out);
		cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "incremental", "%s", out);
		final_bytes = (uint64_t)json_integer_value(json_object_get(e, "bytes"));
		cr_log_info("%s: full pass %llu bytes in %llu ms, final pass %llu bytes in %lld ms (%lld ms frozen), downtime "
			    "%lld ms", names[i], (unsigned long long)full, (unsigned long long)full_ms[i],
			    (unsigned long long)final_bytes,
			    (long long)json_integer_value(json_object_get(e, "ms")),
			    (long long)json_integer_value(json_object_get(e, "frozen_ms")),
			    (long long)json_integer_value(json_object_get(entry_of(j, "moved", names[i]), "downtime_ms")));
		cr_assert_lt(final_bytes, full, "%s's final pass (%llu bytes) is not smaller than its full copy (%llu bytes)",
			     names[i], (unsigned long long)final_bytes, (unsigned long long)full);
	}
	json_decref(j);

	/* A restart (SIGKILL) after the switch: every volume whole on the target, as it was. */
	testbed_stop(&tb, SIGKILL);
	testbed_start_or_fail(&tb, selftest_off);
	for (int i = 0; i < 4; i++) {
		json_t *st = volume_status(names[i]);

		cr_assert_str_eq(volume_partition(names[i]), u1);
		cr_assert_eq(volume_home(names[i]), 1);
		cr_assert(json_equal(json_object_get(st, "options"), opts[i]), "options of %s changed", names[i]);
		json_decref(st);
		json_decref(opts[i]);
		testbed_volume_dir(&tb, 1, names[i], dir, sizeof(dir));
		snprintf(ref, sizeof(ref), "%s/ref-%s", mp0, names[i]);
		cr_assert_eq(treecmp(ref, dir, 0, why, sizeof(why)), 0, "volume %s differs on the target: %s", names[i], why);
	}
	/* The snapshots followed, with their IDs, equal, and sharing blocks on the target as on the source. */
	snapshot_ids("db", path, sizeof(path));
	cr_assert(strstr(ids_db, path) == ids_db, "db's snapshots were %s, now %s", ids_db, path);
	snapshot_ids("idle", path, sizeof(path));
	cr_assert_str_eq(path, ids_idle);
	check_snapshot(mp0, mp1, "db", "s1");
	check_snapshot(mp0, mp1, "idle", "sa");
	check_snapshot(mp0, mp1, "idle", "sb");
	snprintf(dir, sizeof(dir), "%s/nvmevol/snapshots/idle/data/sb", mp1);
	cr_assert_eq(tree_shared_bytes(dir, &alloc, &shared), 0);
	cr_assert_geq(shared, 14u << 20, "snapshot idle/sb shares %llu of %llu bytes on the target",
		      (unsigned long long)shared, (unsigned long long)alloc);

	/* Nothing left on the old partition: no record, directory or snapshot; no stage on the new one. */
	snprintf(dir, sizeof(dir), "%s/nvmevol/meta", mp0);
	cr_assert_eq(testbed_count_entries(dir), 0, "records left on the evacuated partition");
	snprintf(dir, sizeof(dir), "%s/nvmevol/volumes", mp0);
	cr_assert_eq(testbed_count_entries(dir), 0, "directories left on the evacuated partition");
	snprintf(dir, sizeof(dir), "%s/nvmevol/snapshots", mp0);
	cr_assert_eq(testbed_count_entries(dir), 0, "snapshots left on the evacuated partition");
	snprintf(dir, sizeof(dir), "%s/nvmevol/snapshots/.evacuating", mp1);
	cr_assert_neq(access(dir, F_OK), 0, "the stage is left on the target");
	cr_assert_eq(ADMIN("status", "--json"), 0, "%s", err);
	cr_assert(!strstr(out, "conflicts\":[{"), "%s", out);

	/* The next Mount serves db from the new partition, with what was written last. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"db\",\"ID\":\"c3\"}"), 0, "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/w/log", json_string_value(json_object_get(rep.json, "Mountpoint")));
	cr_assert_eq(access(path, F_OK), 0);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"db\",\"ID\":\"c3\"}"), 0, "%s", client_err(&rep));
	free(mnt_db);
	free(mnt_logs);
}

/* ---- limits (project quota: the qemu guest, tests/qemu/run-quota-tests.sh) ---- */

static void setup_quota(void)
{
	testbed_setup_quota_parts(&tb, 2, selftest_off);
}

TestSuite(daemon_evacuate_quota, .init = setup_quota, .fini = teardown, .timeout = 300);

static json_t *quota_of(const char *name)
{
	json_t *st = volume_status(name), *q = json_incref(json_object_get(st, "quota"));

	json_decref(st);
	cr_assert_not_null(q, "no quota in the Status of %s", name);
	return q;
}

/*
 * A volume with size= and inodes=, in use with a snapshot, evacuated in a live
 * and a final pass: on the new partition it has a project ID of its own with
 * the same limits, every file charged to it (what it holds, not its snapshot),
 * and the limit holds a write past it.
 */
Test(daemon_evacuate_quota, limits_follow_the_volume_and_hold_on_the_new_partition)
{
	const char *u0 = tb.parts[0].uuid, *u1 = tb.parts[1].uuid;
	char dir[700], path[900];
	json_t *q;
	char *mnt;
	long long wrote;
	int e = 0;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"lim\",\"Opts\":{\"partition\":\"%s\",\"size\":\"40M\","
			     "\"inodes\":\"1000\"}}", u0), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "lim", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	cr_assert_eq(testbed_write_bytes(path, 16ll << 20, false, &e), 16ll << 20, "%s", strerror(e));
	cr_assert_eq(ADMIN("volume", "snapshot", "lim", "s1"), 0, "%s", err);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"lim\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	mnt = strdup(json_string_value(json_object_get(rep.json, "Mountpoint")));
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1, "--json"), 1, "%s %s", out, err);
	cr_assert(strstr(out, "\"kind\": \"full\""), "no live pass: %s", out);
	/* Written after the live pass: the final pass carries it. */
	snprintf(path, sizeof(path), "%s/g", mnt);
	cr_assert_eq(testbed_write_bytes(path, 4ll << 20, false, &e), 4ll << 20, "%s", strerror(e));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"lim\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	free(mnt);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1, "--json"), 0, "%s %s", out, err);
	cr_assert(strstr(out, "\"kind\": \"incremental\""), "%s", out);
	cr_assert_str_eq(volume_partition("lim"), u1);

	q = quota_of("lim");
	cr_assert_gt(json_integer_value(json_object_get(q, "project_id")), 0, "%s", rep.body);
	cr_assert_eq(json_integer_value(json_object_get(q, "enforced_limit_bytes")), 40ll << 20, "%s", rep.body);
	cr_assert_eq(json_integer_value(json_object_get(q, "enforced_limit_inodes")), 1000, "%s", rep.body);
	/* 20 MiB held; the snapshot's 16 MiB are in project 0 (never charged), as on the old partition. */
	cr_assert_geq(json_integer_value(json_object_get(q, "used_bytes")), 20ll << 20, "%s", rep.body);
	cr_assert_lt(json_integer_value(json_object_get(q, "used_bytes")), 24ll << 20, "%s", rep.body);
	json_decref(q);
	cr_assert_eq(ADMIN("volume", "snapshots", "lim", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"s1\""), "%s", out);

	/* The limit holds on the new partition: 24 MiB more do not fit in 40. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"lim\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/h", json_string_value(json_object_get(rep.json, "Mountpoint")));
	wrote = testbed_write_bytes(path, 24ll << 20, false, &e);
	cr_assert_lt(wrote, 24ll << 20, "a write past size= went through on the new partition");
	cr_assert(e == EDQUOT || e == ENOSPC, "%s", strerror(e));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"lim\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
}

/* --wait: a volume in use is waited for (--timeout), and moved by an incremental final pass once unmounted. */
Test(daemon_evacuate, wait_moves_a_volume_as_soon_as_it_is_unmounted)
{
	const char *u0 = tb.parts[0].uuid;
	char dir[700], path[900];
	int status;
	pid_t cmd;
	FILE *f;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"busy\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	testbed_volume_dir(&tb, 0, "busy", dir, sizeof(dir));
	tree_fill_sample(dir);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));

	/* Still in use when the time is up: exit 1, says so, a live pass made. */
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--timeout", "2"), 1, "%s %s", out, err);
	cr_assert(strstr(out, "waiting for an unmount: busy"), "%s", out);
	cr_assert(strstr(out, "live pass full"), "%s", out);
	cr_assert(strstr(out, "still in use after 2 s"), "%s", out);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--timeout", "soon"), 2);

	/* Unmounted while --wait runs: moved within its next check, by the final pass only. */
	cmd = fork();
	cr_assert_geq(cmd, 0);
	if (cmd == 0) {
		int rc = ADMIN("partition", "evacuate", u0, "--wait", "--timeout", "60");

		child_exit("wait.out", rc);
	}
	usleep(1500 * 1000);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(waitpid(cmd, &status, 0), cmd);
	snprintf(path, sizeof(path), "%s/wait.out", tb.dir);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	memset(out, 0, sizeof(out));
	(void)!fread(out, 1, sizeof(out) - 1, f);
	fclose(f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "--wait ended with %d: %s", status, out);
	cr_assert(strstr(out, "moved busy to"), "%s", out);
	cr_assert(strstr(out, "final pass incremental"), "%s", out);
	cr_assert_str_eq(volume_partition("busy"), tb.parts[1].uuid);
}

/*
 * Passes in quick succession: a pass's snapshot alternates between evacuate-1 and
 * evacuate-2, and snapshot times are whole seconds, so two passes of one second
 * once ordered the previous pass's evacuate-2 after this one's evacuate-1 and
 * made a full pass instead of an incremental one (the real case above failed
 * that way under ASan one run in two). Ten live passes of a small mounted volume
 * fall within a few seconds: every one after the first must be incremental.
 */
Test(daemon_evacuate, passes_within_one_second_stay_incremental)
{
	const char *u0 = tb.parts[0].uuid;
	char dir[700];
	json_t *j, *e;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"quick\",\"Opts\":{\"partition\":\"%s\"}}", u0), 0, "%s",
		     client_err(&rep));
	testbed_volume_dir(&tb, 0, "quick", dir, sizeof(dir));
	tree_fill_sample(dir);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"quick\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	for (int i = 0; i < 10; i++) {
		cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", tb.parts[1].uuid, "--json"), 1, "%s %s", out, err);
		j = parse_out();
		e = json_object_get(entry_of(j, "waiting", "quick"), "pass");
		cr_assert_not_null(e, "pass %d: no live pass: %s", i + 1, out);
		cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), i == 0 ? "full" : "incremental",
				 "pass %d: %s", i + 1, out);
		json_decref(j);
	}
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"quick\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", tb.parts[1].uuid, "--json"), 0, "%s %s", out, err);
	j = parse_out();
	e = json_object_get(entry_of(j, "moved", "quick"), "final_pass");
	cr_assert_not_null(e, "%s", out);
	cr_assert_str_eq(json_string_value(json_object_get(e, "kind")), "incremental", "%s", out);
	json_decref(j);
}
