/* SPDX-License-Identifier: MIT */
/*
 * The real daemon on real loop-backed XFS partitions, driven over its socket:
 * the whole lifecycle, every option, bad input, restarts, a missing
 * partition, a corrupt record. Flags are checked in /proc/self/mountinfo,
 * owner and mode with stat().
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "volume/volume.h"

static Testbed tb;
static ClientReply rep;

static void setup2(void)
{
	testbed_require_root();
	testbed_setup(&tb, 2, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(daemon, .init = setup2, .fini = teardown, .timeout = 120);

static const char *status_str(const char *key)
{
	json_t *st = json_object_get(json_object_get(rep.json, "Volume"), "Status");
	return json_string_value(json_object_get(st, key));
}

static json_t *status_obj(const char *key)
{
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), key);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int list_count(void)
{
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0);
	return (int)json_array_size(json_object_get(rep.json, "Volumes"));
}

Test(daemon, lifecycle_with_owner_mode_and_verified_flags)
{
	char dir[700], mp[400], file[800], partmp[400];
	struct stat st;
	char *line;
	FILE *f;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pgdata\",\"Opts\":{\"uid\":\"999\",\"gid\":\"999\",\"mode\":\"0700\"}}"),
		     0, "%s", client_err(&rep));
	/* The served directory exists on one partition, owned and moded as asked. */
	testbed_volume_dir(&tb, 0, "pgdata", dir, sizeof(dir));
	if (!exists(dir))
		testbed_volume_dir(&tb, 1, "pgdata", dir, sizeof(dir));
	cr_assert_eq(stat(dir, &st), 0, "volume directory missing on both partitions");
	cr_assert_eq(st.st_uid, 999);
	cr_assert_eq(st.st_gid, 999);
	cr_assert_eq(st.st_mode & 07777, 0700);

	/* Get: RFC 3339 CreatedAt and a Status object with partition, options, owner, mode. */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"pgdata\"}"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(rep.json, "Volume"), "Name")), "pgdata");
	const char *created = json_string_value(json_object_get(json_object_get(rep.json, "Volume"), "CreatedAt"));
	cr_assert(created && strlen(created) == 20 && created[10] == 'T' && created[19] == 'Z', "CreatedAt %s", created);
	cr_assert_str_eq(status_str("owner"), "999:999");
	cr_assert_str_eq(status_str("mode"), "0700");
	cr_assert_str_eq(status_str("state"), "ready");
	json_t *part = status_obj("partition");
	cr_assert(strstr(json_string_value(json_object_get(part, "mount_options")), "noatime"));
	cr_assert(strncmp(json_string_value(json_object_get(part, "label")), tb.prefix, strlen(tb.prefix)) == 0);
	cr_assert_not_null(json_object_get(part, "uuid"));
	cr_assert_not_null(json_object_get(part, "device"));

	/* Mount: a bind of the volume directory, noatime,nodiratime, from the partition's device. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"pgdata\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/pgdata", tb.prop);
	cr_assert_str_eq(json_string_value(json_object_get(rep.json, "Mountpoint")), mp);
	line = mountinfo_line(mp);
	cr_assert_not_null(line, "no mountinfo entry at %s", mp);
	cr_assert(strstr(line, " /nvmevol/volumes/pgdata "), "root: %s", line);
	cr_assert(strstr(line, "noatime") && strstr(line, "nodiratime"), "flags: %s", line);
	cr_assert(strstr(line, " - xfs "), "fstype: %s", line);
	free(line);

	/* The partition mount itself: noatime,nodiratime and never shared. */
	for (int i = 0; i < 2; i++) {
		testbed_part_mountpoint(&tb, i, partmp, sizeof(partmp));
		line = mountinfo_line(partmp);
		cr_assert_not_null(line, "partition %d not mounted", i);
		cr_assert(strstr(line, "noatime") && strstr(line, "nodiratime"), "%s", line);
		cr_assert_null(strstr(line, "shared:"), "%s", line);
		free(line);
	}

	/* A file written through the mountpoint is on the XFS partition. */
	snprintf(file, sizeof(file), "%s/hello", mp);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs("data", f);
	fclose(f);
	snprintf(file, sizeof(file), "%s/hello", dir);
	cr_assert(exists(file), "file not visible on the partition at %s", file);

	cr_assert_eq(tb_call(&tb, "Path", &rep, "{\"Name\":\"pgdata\"}"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(rep.json, "Mountpoint")), mp);
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(rep.json, "Volumes"), 0), "Mountpoint")), mp);

	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"pgdata\",\"ID\":\"c1\"}"), 0);
	cr_assert_null(mountinfo_line(mp));
	cr_assert(!exists(mp), "mountpoint directory left behind");
	cr_assert_eq(tb_call(&tb, "Path", &rep, "{\"Name\":\"pgdata\"}"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(rep.json, "Mountpoint")), "");

	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"pgdata\"}"), 0, "%s", client_err(&rep));
	cr_assert(!exists(dir), "volume directory still there after Remove");
	cr_assert_eq(list_count(), 0);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"pgdata\"}"), 0);
	cr_assert(strstr(client_err(&rep), "no such volume"));
}

Test(daemon, mount_counts_per_id_like_docker_cp)
{
	char mp[400];

	snprintf(mp, sizeof(mp), "%s/v1", tb.prop);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"v1\"}"), 0);
	/* Container start, then docker cp with the same ID, then the cp's Unmount. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"v1\",\"ID\":\"i1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"v1\",\"ID\":\"i1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"v1\",\"ID\":\"i1\"}"), 0);
	char *line = mountinfo_line(mp);
	cr_assert_not_null(line, "unmounted under a running container after docker cp");
	free(line);
	/* Exactly one mount entry, no stacking. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"v1\",\"ID\":\"i2\"}"), 0);
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char buf[4096];
	int n = 0;
	while (fgets(buf, sizeof(buf), f))
		if (strstr(buf, mp))
			n++;
	fclose(f);
	cr_assert_eq(n, 1, "%d mount entries at %s", n, mp);

	cr_assert_neq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"v1\"}"), 0);
	cr_assert(strstr(client_err(&rep), "in use"), "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"v1\",\"ID\":\"i1\"}"), 0);
	line = mountinfo_line(mp);
	cr_assert_not_null(line);
	free(line);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"v1\",\"ID\":\"i2\"}"), 0);
	cr_assert_null(mountinfo_line(mp));
	/* Unknown IDs and unknown volumes unmount fine and change nothing. */
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"v1\",\"ID\":\"never\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"nosuch\",\"ID\":\"x\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"v1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"v1\"}"), 0, "second Remove must be idempotent");
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"nosuch\",\"ID\":\"x\"}"), 0);
	cr_assert(!exists(mp));
}

Test(daemon, partition_option_and_placement_by_free_space)
{
	char dir[700], fill[700];
	int fd;

	/* Pinned by label, then by UUID. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"onb\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0,
		     "%s", client_err(&rep));
	testbed_volume_dir(&tb, 1, "onb", dir, sizeof(dir));
	cr_assert(exists(dir));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"ona\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].uuid), 0);
	testbed_volume_dir(&tb, 0, "ona", dir, sizeof(dir));
	cr_assert(exists(dir));
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"onz\",\"Opts\":{\"partition\":\"nosuchlabel\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "nosuchlabel") && strstr(client_err(&rep), tb.parts[0].label),
		  "Err should name the available partitions: %s", client_err(&rep));

	/* Fill partition a: the next unpinned volume goes to b, the one with more free space. */
	snprintf(fill, sizeof(fill), "%s/fill", dir);
	fd = open(fill, O_CREAT | O_WRONLY, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(posix_fallocate(fd, 0, 150LL << 20), 0);
	close(fd);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"free1\"}"), 0);
	testbed_volume_dir(&tb, 1, "free1", dir, sizeof(dir));
	cr_assert(exists(dir), "volume not placed on the partition with the most free space");
}

Test(daemon, create_is_idempotent_and_rejects_different_options)
{
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"same\",\"Opts\":{\"mode\":\"700\",\"uid\":\"5\"}}"), 0);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"same\",\"Opts\":{\"uid\":\"5\",\"mode\":\"0700\"}}"), 0,
			     "repeat %d: %s", i, client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"same\",\"Opts\":{\"uid\":\"6\",\"mode\":\"0700\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "different options") && strstr(client_err(&rep), "uid: 5 (existing) vs 6 (requested)"),
		  "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"same\"}"), 0);
	cr_assert_str_eq(status_str("owner"), "5:0");
	cr_assert_eq(list_count(), 1);
}

Test(daemon, bad_options_fail_and_create_nothing)
{
	static const char *const bad[] = {
		"{\"bogus\":\"1\"}", "{\"uid\":\"-1\"}", "{\"uid\":\"abc\"}", "{\"gid\":\"4294967295\"}",
		"{\"mode\":\"999\"}", "{\"mode\":\"rwx\"}", "{\"size\":\"abc\"}", "{\"size\":\"-1\"}",
		"{\"size\":\"1.5.5G\"}", "{\"size\":\"99999999999999999999T\"}", "{\"size\":\"\"}",
		"{\"selftest\":\"maybe\"}", "{\"min_iops\":\"fast\"}", "{\"uid\":1}", "[]", "\"x\"",
		"{\"partition\":\"a/b\"}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"bad%zu\",\"Opts\":%s}", i, bad[i]), 0, "accepted %s", bad[i]);
		cr_assert(strlen(client_err(&rep)) > 10, "unclear Err for %s: %s", bad[i], client_err(&rep));
	}
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"unk\",\"Opts\":{\"bogus\":\"1\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "valid options") && strstr(client_err(&rep), "uid"), "%s", client_err(&rep));
	cr_assert_eq(list_count(), 0);
}

Test(daemon, size_without_quota_support_is_refused_clearly)
{
	char dir[700], idx[500];

	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"sized\",\"Opts\":{\"size\":\"10M\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "quota"), "%s", client_err(&rep));
	for (int i = 0; i < 2; i++) {
		testbed_volume_dir(&tb, i, "sized", dir, sizeof(dir));
		cr_assert(!exists(dir));
	}
	snprintf(idx, sizeof(idx), "%s/index/sized.json", tb.state);
	cr_assert(!exists(idx));
	cr_assert_eq(list_count(), 0);
}

/* The wrong-node guard: the daemon runs in this test's UTS namespace, so "here" is uname's nodename. */
Test(daemon, node_option_creates_only_on_that_node)
{
	struct utsname u;
	char dir[700], idx[500], upper[80];
	size_t i;

	cr_assert_eq(uname(&u), 0);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"node\":\"elsewhere-%s\"}}",
			      u.nodename), 0, "created a volume pinned to another node");
	cr_assert(strstr(client_err(&rep), "pinned to node elsewhere-") && strstr(client_err(&rep), "this is node") &&
		  strstr(client_err(&rep), u.nodename) && strstr(client_err(&rep), "node.hostname==elsewhere-"),
		  "Err does not name both nodes and the constraint: %s", client_err(&rep));
	for (int p = 0; p < 2; p++) {
		testbed_volume_dir(&tb, p, "pinned", dir, sizeof(dir));
		cr_assert(!exists(dir), "a refused create left %s", dir);
	}
	snprintf(idx, sizeof(idx), "%s/index/pinned.json", tb.state);
	cr_assert(!exists(idx));
	cr_assert_eq(list_count(), 0);

	/* On its own node (any case), it is an ordinary volume; Create again is idempotent. */
	for (i = 0; u.nodename[i] && i < sizeof(upper) - 1; i++)
		upper[i] = (char)toupper((unsigned char)u.nodename[i]);
	upper[i] = '\0';
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"node\":\"%s\"}}", upper), 0,
		     "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pinned\",\"Opts\":{\"node\":\"%s\"}}", u.nodename),
		     0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"pinned\"}"), 0);
	for (i = 0; upper[i]; i++)
		upper[i] = (char)tolower((unsigned char)upper[i]);
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("options"), "node")), upper,
			 "the canonical form is lower case");
}

Test(daemon, hostile_names_and_malformed_requests_change_nothing)
{
	static const char *const bad_names[] = {
		"a", ".", "..", "...", "./x", "../x", "x/../../y", "/abs", "/", "a/b", "~", ".hidden", "-x",
		"a b", "a\\tb", "a\\nb", "a:b", "a\\\\b", "%2e%2e", "\\u00fc1", "a\\u0000b", "",
	};
	static const char *const bad_bodies[] = {
		"{", "[]", "\"x\"", "1", "null", "{} x", "{\"Name\":1}", "{\"Name\":null}", "{\"Name\":{}}",
		"{\"Name\":\"a1\",\"Name\":\"../x\"}", "{}", "\xff\xfe", "{\"Name\":\"ok1\",\"Opts\":[]}",
		"{\"Name\":\"ok2\",\"Opts\":{\"uid\":5}}",
	};
	char longname[300], n128[129], n129[130];

	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		for (const char *ep = "Create"; ep; ep = strcmp(ep, "Create") == 0 ? "Get" : strcmp(ep, "Get") == 0 ? "Remove" : NULL)
			cr_assert_neq(tb_call(&tb, ep, &rep, "{\"Name\":\"%s\"}", bad_names[i]), 0, "%s accepted '%s'", ep, bad_names[i]);
	}
	memset(longname, 'x', 299);
	longname[299] = '\0';
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", longname), 0);
	for (size_t i = 0; i < sizeof(bad_bodies) / sizeof(bad_bodies[0]); i++)
		cr_assert_neq(tb_call(&tb, "Create", &rep, "%s", bad_bodies[i]), 0, "accepted body %s", bad_bodies[i]);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"ok\"}"), 0, "Mount without ID");
	cr_assert_neq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"ok\",\"ID\":\"\"}"), 0, "Unmount with empty ID");

	/* Unknown endpoint, wrong method, oversized body. */
	cr_assert_eq(client_request(tb.sock, "POST", "/VolumeDriver.Nope", "{}", 2, &rep), 0);
	cr_assert_eq(rep.status, 404);
	cr_assert_not_null(json_object_get(rep.json, "Err"));
	cr_assert_eq(client_request(tb.sock, "GET", "/VolumeDriver.List", NULL, 0, &rep), 0);
	cr_assert_eq(rep.status, 405);
	char *big = malloc(70 * 1024);
	memset(big, ' ', 70 * 1024);
	memcpy(big, "{\"Name\":\"big\"", 13);
	big[70 * 1024 - 1] = '}';
	cr_assert_eq(client_request(tb.sock, "POST", "/VolumeDriver.Create", big, 70 * 1024, &rep), 0);
	cr_assert_eq(rep.status, 413);
	free(big);

	/* Valid edge names are accepted. */
	memset(n128, 'n', 128);
	n128[128] = '\0';
	memset(n129, 'n', 129);
	n129[129] = '\0';
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", n129), 0);
	cr_assert_eq(list_count(), 0, "something was created by bad input");
	static const char *const good[] = { "ab", "name-with-dash", "name_with_underscore", "thing.d", "A1", "a..b" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", good[i]), 0, "rejected %s", good[i]);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\"}", n128), 0);
	/* Unknown top-level keys are ignored for forward compatibility. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fwd\",\"Opts\":{},\"Future\":1}"), 0);
	cr_assert_eq(list_count(), 8);
	/* Activate and Capabilities. */
	cr_assert_eq(client_request(tb.sock, "POST", "/Plugin.Activate", NULL, 0, &rep), 0);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(rep.json, "Implements"), 0)), "VolumeDriver");
}

Test(daemon, restart_keeps_volumes_options_and_mounts)
{
	char mp[400];

	snprintf(mp, sizeof(mp), "%s/keep", tb.prop);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"keep\",\"Opts\":{\"uid\":\"7\",\"mode\":\"0750\"}}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"idle\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"keep\",\"ID\":\"c1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"keep\",\"ID\":\"c2\"}"), 0);

	for (int round = 0; round < 2; round++) {
		testbed_stop(&tb, round == 0 ? SIGKILL : SIGTERM);
		char *line = mountinfo_line(mp);
		cr_assert_not_null(line, "a stop of the plugin unmounted a volume in use");
		free(line);
		cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
		cr_assert_eq(list_count(), 2);
		cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"keep\"}"), 0);
		cr_assert_eq(json_integer_value(status_obj("mount_count")), 2);
		cr_assert_str_eq(json_string_value(json_object_get(status_obj("options"), "mode")), "0750");
		cr_assert_str_eq(json_string_value(json_object_get(status_obj("options"), "uid")), "7");
	}
	/* Unmounts with the IDs from before the restarts bring it down. */
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"keep\",\"ID\":\"c1\"}"), 0);
	char *line = mountinfo_line(mp);
	cr_assert_not_null(line);
	free(line);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"keep\",\"ID\":\"c2\"}"), 0);
	cr_assert_null(mountinfo_line(mp));
}

Test(daemon, restart_after_binds_vanished_resets_counts_and_removes_strays)
{
	char mp[400], stray[400];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"gone\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"gone\",\"ID\":\"c1\"}"), 0);
	testbed_stop(&tb, SIGKILL);
	/* What `docker plugin disable` does: everything under PropagatedMount is unmounted. */
	snprintf(mp, sizeof(mp), "%s/gone", tb.prop);
	cr_assert_eq(umount2(mp, MNT_DETACH), 0);
	/* And a stray mount no volume owns. */
	snprintf(stray, sizeof(stray), "%s/stray", tb.prop);
	mkdir(stray, 0755);
	cr_assert_eq(mount("tmpfs", stray, "tmpfs", 0, NULL), 0);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_assert_null(mountinfo_line(stray), "stray mount left under PropagatedMount");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"gone\"}"), 0);
	cr_assert_eq(json_integer_value(status_obj("mount_count")), 0);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"gone\"}"), 0, "%s", client_err(&rep));
}

Test(daemon, missing_partition_is_reported_never_forgotten)
{
	char partmp[400];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"away\",\"Opts\":{\"partition\":\"%s\",\"uid\":\"3\"}}", tb.parts[1].label), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"here\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_stop(&tb, SIGTERM);
	testbed_part_mountpoint(&tb, 1, partmp, sizeof(partmp));
	cr_assert_eq(umount2(partmp, 0), 0);
	cr_assert_eq(testbed_detach(&tb, 1), 0);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);

	/* Get must answer the volume (Docker would erase its record otherwise). */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"away\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "partition-missing");
	cr_assert_str_eq(json_string_value(json_object_get(status_obj("options"), "uid")), "3");
	cr_assert_eq(list_count(), 2);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"away\",\"ID\":\"m1\"}"), 0);
	cr_assert(strstr(client_err(&rep), tb.parts[1].label) && strstr(client_err(&rep), "not available"), "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"away\"}"), 0, "Remove must not forget a volume whose data it cannot reach");
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"here\",\"ID\":\"m1\"}"), 0, "other partitions keep working");

	/* The disk comes back: the next Mount finds it without a restart. */
	cr_assert_eq(testbed_attach(&tb, 1), 0);
	sleep(1);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"away\",\"ID\":\"m2\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"away\"}"), 0);
	cr_assert_str_eq(status_str("state"), "mounted");
}

Test(daemon, corrupt_record_is_isolated)
{
	char meta[600];
	FILE *f;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"good\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"bad\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_stop(&tb, SIGTERM);
	snprintf(meta, sizeof(meta), "%s/%s/nvmevol/meta/bad.json", tb.parts_root, tb.parts[0].uuid);
	f = fopen(meta, "w");
	cr_assert_not_null(f);
	fputs("{\"version\":1,\"name\":\"bad\",garbage", f);
	fclose(f);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"good\",\"ID\":\"x\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"bad\"}"), 0, "Get must still answer a volume with a bad record");
	cr_assert_str_eq(status_str("state"), "record-unreadable");
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"bad\",\"ID\":\"x\"}"), 0);
	cr_assert(strstr(client_err(&rep), "unreadable"), "%s", client_err(&rep));
}

static Volume *read_volume_file(const char *path)
{
	char buf[8192];
	Volume *v = NULL;
	size_t n;
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s", path);
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	cr_assert_eq(volume_record_parse(buf, n, &v, NULL), 0);
	return v;
}

/* Writes @out (freed) to @path. */
static void write_dumped(const char *path, char *out)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(out);
	cr_assert_not_null(f, "%s", path);
	fputs(out, f);
	fclose(f);
	free(out);
}

static void rewrite_state(const char *meta, const char *state)
{
	Volume *v = read_volume_file(meta);

	v->state = volume_state_from_string(state);
	write_dumped(meta, volume_record_dump(v, true));
	volume_unref(v);
}

/* Rewrites an index entry as a Create that crashed before its record leaves it: "pending". */
static void mark_index_pending(const char *idx)
{
	Volume *v = read_volume_file(idx);

	write_dumped(idx, volume_index_dump(v, VOLUME_INDEX_PENDING));
	volume_unref(v);
}

Test(daemon, interrupted_create_is_rolled_back_and_a_lost_record_keeps_its_data)
{
	char meta[600], dir[700], idx[500], file[800], qdir[700];
	struct dirent *de;
	DIR *d;
	int n = 0;
	FILE *f;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"half\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"lost\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_volume_dir(&tb, 0, "lost", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fputs("kept", f);
	fclose(f);
	testbed_stop(&tb, SIGKILL);
	/*
	 * A create that wrote its index entry ("pending") and directory but not its
	 * record (the commit point): provably never committed. And a committed
	 * volume whose record was lost (xfs_repair, a partial restore): its index
	 * entry looks like any committed one, so its data is kept.
	 */
	snprintf(idx, sizeof(idx), "%s/index/half.json", tb.state);
	mark_index_pending(idx);
	snprintf(meta, sizeof(meta), "%s/%s/nvmevol/meta/half.json", tb.parts_root, tb.parts[0].uuid);
	cr_assert_eq(unlink(meta), 0);
	snprintf(meta, sizeof(meta), "%s/%s/nvmevol/meta/lost.json", tb.parts_root, tb.parts[0].uuid);
	cr_assert_eq(unlink(meta), 0);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);

	cr_assert_eq(list_count(), 0, "half-created volume, or one without its record, visible");
	testbed_volume_dir(&tb, 0, "half", dir, sizeof(dir));
	cr_assert(!exists(dir));
	testbed_volume_dir(&tb, 0, "lost", dir, sizeof(dir));
	cr_assert(!exists(dir));
	snprintf(idx, sizeof(idx), "%s/index/half.json", tb.state);
	cr_assert(!exists(idx));
	/* The committed one is in the quarantine with its data, not in the trash; the pending one is not. */
	snprintf(qdir, sizeof(qdir), "%s/%s/nvmevol/quarantine", tb.parts_root, tb.parts[0].uuid);
	d = opendir(qdir);
	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		cr_assert(strncmp(de->d_name, "lost.", 5) == 0, "%s was quarantined", de->d_name);
		snprintf(file, sizeof(file), "%s/%s/data", qdir, de->d_name);
		f = fopen(file, "r");
		cr_assert_not_null(f, "the data of a committed volume is gone: %s", file);
		cr_assert_not_null(fgets(meta, sizeof(meta), f));
		fclose(f);
		cr_assert_str_eq(meta, "kept");
	}
	closedir(d);
	cr_assert_eq(n, 1, "the committed volume without its record was not quarantined");
	/* The name is free again. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"half\"}"), 0);
}

/* nvmevol 0.1 wrote "removing" before moving the directory: a failed remove left it so. */
Test(daemon, legacy_removing_record_with_an_intact_directory_keeps_the_volume)
{
	char meta[600], dir[700];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"old\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label), 0);
	testbed_stop(&tb, SIGKILL);
	snprintf(meta, sizeof(meta), "%s/%s/nvmevol/meta/old.json", tb.parts_root, tb.parts[0].uuid);
	rewrite_state(meta, "removing");
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"old\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	testbed_volume_dir(&tb, 0, "old", dir, sizeof(dir));
	cr_assert(exists(dir));
}

Test(daemon, second_instance_on_the_same_state_is_refused)
{
	Testbed second = tb;
	char *log;

	/* Its own directory: the admin socket is beside the plugin socket, and a running one's is never taken. */
	snprintf(second.sock, sizeof(second.sock), "%s/second", tb.dir);
	cr_assert_eq(mkdir(second.sock, 0700), 0);
	snprintf(second.sock, sizeof(second.sock), "%s/second/s2.sock", tb.dir);
	snprintf(second.log, sizeof(second.log), "%s/second.log", tb.dir);
	second.pid = -1;
	cr_assert_neq(testbed_start(&second, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0,
		      "a second daemon started on a locked state directory");
	log = testbed_log_text(&second);
	cr_assert(strstr(log, "state locked"), "%s", log);
	free(log);
	cr_assert_eq(tb_call(&tb, "List", &rep, "{}"), 0, "the first instance must be unaffected");
}

Test(daemon, symlink_planted_at_the_mountpoint_is_never_followed)
{
	char mp[400], canary[400];
	char *line;

	snprintf(canary, sizeof(canary), "%s/canary", tb.dir);
	cr_assert_eq(mkdir(canary, 0755), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"trap\"}"), 0);
	mkdir(tb.prop, 0755);
	snprintf(mp, sizeof(mp), "%s/trap", tb.prop);
	cr_assert_eq(symlink(canary, mp), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"trap\",\"ID\":\"x\"}"), 0, "%s", client_err(&rep));
	cr_assert_null(mountinfo_line(canary), "mounted onto the symlink's target");
	line = mountinfo_line(mp);
	cr_assert_not_null(line);
	free(line);
}

/*
 * Docker's activation never waits for the state (100,000 records take seconds
 * to load): Plugin.Activate and Capabilities are answered while start-up is
 * still under way (stretched by a test hook), and List waits until it is done.
 */
Test(daemon, activate_is_answered_before_the_state_is_loaded)
{
	bool answered = false;
	size_t mark;
	char *log;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"loaded\"}"), 0);
	testbed_stop(&tb, SIGTERM);
	/* The log is appended to: this start's lines are those after the mark. */
	log = testbed_log_text(&tb);
	mark = strlen(log);
	free(log);
	cr_assert_eq(testbed_spawn(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_START_PAUSE_MS=8000",
								NULL }),
		     0);
	for (int i = 0; i < 100 && !answered; i++) {
		client_reply_done(&rep);
		answered = client_request(tb.sock, "POST", "/Plugin.Activate", NULL, 0, &rep) == 0 && rep.status == 200;
		if (!answered)
			usleep(50 * 1000);
	}
	cr_assert(answered, "Plugin.Activate never answered");
	log = testbed_log_text(&tb);
	cr_expect_null(strstr(log + mark, "ready: "), "Activate was answered only after the state was loaded:\n%s",
		       log + mark);
	free(log);
	cr_assert_eq(client_request(tb.sock, "POST", "/VolumeDriver.Capabilities", "{}", 2, &rep), 0);
	cr_expect_eq(rep.status, 200);

	/* A request that needs the state waits for it, and sees it whole. */
	cr_assert_eq(testbed_wait_ready(&tb), 0);
	log = testbed_log_text(&tb);
	cr_expect(strstr(log + mark, "ready: 1 volume(s)"), "%s", log + mark);
	free(log);
	cr_expect_eq(list_count(), 1);
}
