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
