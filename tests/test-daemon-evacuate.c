/* SPDX-License-Identifier: MIT */
/*
 * Cordons, fences and evacuation through the real daemon and the `nvmevol
 * partition cordon|uncordon|evacuate` and `volume fence|unfence` commands on
 * two loop-backed XFS partitions: placement skips a cordoned partition and a
 * Create pinned to it gets an Err that says how to uncordon; the cordon
 * survives a restart (it is on the partition); a fenced volume refuses Mount
 * with the new host and the way back, Get and Remove still work; evacuate
 * moves idle volumes with their data, options and limits, lists volumes in
 * use as waiting, and the next Mount serves from the new partition.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void teardown(void)
{
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

Test(daemon_evacuate, idle_volumes_move_with_their_data_in_use_ones_wait_snapshots_are_refused)
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

	/* Not all could leave: exit 1, and the JSON says which moved, which wait, which are refused and why. */
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--json"), 1, "%s", err);
	j = parse_out();
	cr_assert(names_in(json_object_get(j, "moved"), "data"), "%s", out);
	cr_assert(names_in(json_object_get(j, "moved"), "empty"), "%s", out);
	cr_assert(names_in(json_object_get(j, "waiting"), "busy"), "%s", out);
	cr_assert(names_in(json_object_get(j, "refused"), "snapped"), "%s", out);
	cr_assert(strstr(out, "snapshot"), "%s", out);
	json_decref(j);

	/* Cordoned first, and each volume now on the other partition, its data, owner and options whole. */
	st = status_partition(u0);
	cr_assert(json_is_true(json_object_get(st, "cordoned")), "%s", out);
	json_decref(st);
	cr_assert_str_eq(volume_partition("data"), u1);
	cr_assert_str_eq(volume_partition("empty"), u1);
	cr_assert_str_eq(volume_partition("busy"), u0);
	cr_assert_str_eq(volume_partition("snapped"), u0);
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

	/* The waiting one moves once unmounted; the command is simply run again (exit 1: snapped still refused). */
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "evacuate", u0), 1, "%s", err);
	cr_assert(strstr(out, "moved busy"), "%s", out);
	cr_assert_str_eq(volume_partition("busy"), u1);
	cr_assert_eq(ADMIN("volume", "snapshot-rm", "snapped", "s1"), 0, "%s", err);
	cr_assert_eq(ADMIN("partition", "evacuate", u0, "--to", u1), 0, "%s %s", out, err);
	cr_assert_str_eq(volume_partition("snapped"), u1);

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
