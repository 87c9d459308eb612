/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume move` between two real daemons on loop-backed XFS (two
 * testbeds: two state directories, sockets and partitions), the other node
 * reached through a wrapper script as --via, as `ssh node2` would be: an
 * idle move compared with the independent comparator (treecmp) and the
 * source fenced after it; a mounted volume with --final-now refused with
 * nothing changed, naming the mount count and why Docker could not name the
 * containers; a receiver that fails midway leaving the source serving,
 * unfenced, without the pass's snapshot; a receiver that drops after a live
 * pass committed, then a rerun that sends only the changes since the common
 * snapshot, and one refused because the copy there is in use or was
 * unfenced (and written); --small-seconds ending the live passes, and the
 * wait saying who holds the volume; a Remove taking a move's snapshots
 * along but refusing a user's.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "helpers/treecmp.h"
#include "helpers/treefill.h"
#include "util/macro.h"

#define ENV ((const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_CLONE_FREEZE_BUDGET_MS=20000", NULL })

static Testbed src, dst;
static ClientReply rep;
static char out[65536], err[8192];

static void setup(void)
{
	testbed_require_root();
	testbed_setup(&src, 1, ENV);
	testbed_setup(&dst, 1, ENV);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&dst);
	testbed_destroy(&src);
}

TestSuite(daemon_move, .init = setup, .fini = teardown, .timeout = 300);

static const char *bin(void)
{
	return getenv("NVMEVOL_BINARY") ? getenv("NVMEVOL_BINARY") : "build/src/nvmevol";
}

static void slurp(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, len - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/*
 * The --via wrapper: called as `WRAPPER nvmevol ARGS...`, it runs this
 * build's binary with ARGS against the second daemon; with @fail_after, the
 * receives after the first @good read that many bytes of the stream and
 * fail, as a link that drops.
 */
static void wrapper_after(const char *path, long fail_after, int good)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "#!/bin/sh\nshift\n");
	/* Only the receive breaks: the other node answers its status. */
	if (fail_after > 0)
		fprintf(f, "if [ \"$2\" = receive ]; then\n"
			"  n=$(cat '%s.count' 2>/dev/null || echo 0); echo $((n + 1)) > '%s.count'\n"
			"  if [ \"$n\" -ge %d ]; then head -c %ld >/dev/null; exit 1; fi\n"
			"fi\n", path, path, good, fail_after);
	fprintf(f, "exec '%s' \"$@\" --socket '%s/nvmevol-admin.sock'\n", bin(), dst.dir);
	fclose(f);
	cr_assert_eq(chmod(path, 0755), 0);
}

static void wrapper(const char *path, long fail_after)
{
	wrapper_after(path, fail_after, 0);
}

static char outf[600], errf[600];

/* Starts `nvmevol volume move NAME --via WRAPPER ARGS` on the first daemon; stdout and stderr to files. */
static pid_t move_start(const char *name, const char *via, const char *args)
{
	char cmd[4096];
	pid_t pid;

	snprintf(outf, sizeof(outf), "%s/move.out", src.dir);
	snprintf(errf, sizeof(errf), "%s/move.err", src.dir);
	/* Nothing of the last move's output: move_says() reads this one's alone. */
	(void)unlink(outf);
	(void)unlink(errf);
	/* No Docker to ask: the move names the mount count and says why (a real dockerd: the admin stage). */
	snprintf(cmd, sizeof(cmd), "DOCKER_HOST=unix://%s/no-docker.sock '%s' volume move %s --via '%s' %s --socket "
		 "'%s/nvmevol-admin.sock' > '%s' 2> '%s'", src.dir, bin(), name, via, args, src.dir, outf, errf);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Its exit status; stdout in out, stderr in err. */
static int move_wait(pid_t pid)
{
	int st = 0;

	cr_assert_eq(waitpid(pid, &st, 0), pid);
	slurp(outf, out, sizeof(out));
	slurp(errf, err, sizeof(err));
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int move(const char *name, const char *via, const char *args)
{
	return move_wait(move_start(name, via, args));
}

/* Waits (60 s at most) until the running move's stderr says @what; its stderr in err. */
static void move_says(const char *what)
{
	for (int i = 0; i < 600; i++) {
		slurp(errf, err, sizeof(err));
		if (strstr(err, what))
			return;
		usleep(100000);
	}
	cr_assert_fail("the move never said '%s': %s", what, err);
}

/* @len bytes of @fill in @dir/@rel, synced. */
static void put(const char *dir, const char *rel, size_t len, char fill)
{
	char *buf = malloc(len);

	cr_assert_not_null(buf);
	memset(buf, fill, len);
	tree_put_bytes(dir, rel, buf, len);
	free(buf);
}

static bool has_snapshots(Testbed *tb, const char *name)
{
	char o[8192], e[2048];

	cr_assert_eq(testbed_admin(tb, (const char *const[]){ "volume", "snapshots", name, "--json", NULL }, o, sizeof(o),
				   e, sizeof(e)),
		     0, "%s", e);
	return strstr(o, "\"name\"") != NULL;
}

Test(daemon_move, an_idle_volume_arrives_whole_and_the_source_is_fenced)
{
	char via[600], a[512], b[512], why[1024], sub[600];
	json_t *j;

	snprintf(via, sizeof(via), "%s/node2", src.dir);
	wrapper(via, 0);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"mv\",\"Opts\":{\"uid\":\"1000\",\"mode\":\"0750\"}}"), 0,
		     "%s", client_err(&rep));
	testbed_volume_dir(&src, 0, "mv", a, sizeof(a));
	put(a, "big", 5 << 20, 'x');
	snprintf(sub, sizeof(sub), "%s/d", a);
	cr_assert_eq(mkdir(sub, 0700), 0);
	put(sub, "small", 100, 'y');

	cr_assert_eq(move("mv", via, "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "not JSON: %s", out);
	cr_expect(json_array_size(json_object_get(j, "passes")) >= 1, "%s", out);
	json_decref(j);

	/* The other node has it, equal to the source, with its options. */
	testbed_volume_dir(&dst, 0, "mv", b, sizeof(b));
	cr_assert_eq(treecmp(a, b, TREECMP_SKIP_XFS_ACL_ALIAS, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(tb_call(&dst, "Get", &rep, "{\"Name\":\"mv\"}"), 0, "%s", client_err(&rep));
	/* Docker there asks Create with the volume's options (a swarm task, compose): the same volume, not a conflict. */
	cr_assert_eq(tb_call(&dst, "Create", &rep, "{\"Name\":\"mv\",\"Opts\":{\"uid\":\"1000\",\"mode\":\"0750\"}}"), 0,
		     "%s", client_err(&rep));
	cr_assert_eq(tb_call(&dst, "Mount", &rep, "{\"Name\":\"mv\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));

	/* The source is fenced: a Mount there is refused and says where the volume went; unfence is the way back. */
	cr_assert_neq(tb_call(&src, "Mount", &rep, "{\"Name\":\"mv\",\"ID\":\"c1\"}"), 0);
	cr_assert(strstr(client_err(&rep), "unfence"), "%s", client_err(&rep));
	cr_assert_eq(testbed_admin(&src, (const char *const[]){ "volume", "unfence", "mv", NULL }, out, sizeof(out), err,
				   sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"mv\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
}

Test(daemon_move, a_mounted_volume_with_final_now_is_refused_and_nothing_changes)
{
	char via[600];

	snprintf(via, sizeof(via), "%s/node2", src.dir);
	wrapper(via, 0);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"busy\",\"Opts\":{}}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"busy\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(move("busy", via, "--final-now --json"), 1, "%s", err);
	/* Who holds it: the count, and why the containers are not named (no Docker to ask). */
	cr_assert(strstr(err, "in use by 1 mount(s); the containers cannot be named") && strstr(err, "no-docker.sock"),
		  "%s", err);
	{
		json_t *j = json_loads(out, 0, NULL), *h = json_object_get(j, "holders");

		cr_assert_not_null(j, "not JSON: %s", out);
		cr_expect_eq(json_integer_value(json_object_get(h, "mount_count")), 1, "%s", out);
		cr_expect(json_is_string(json_object_get(h, "docker_unavailable")), "%s", out);
		cr_expect_null(json_object_get(h, "containers"), "%s", out);
		json_decref(j);
	}
	cr_assert_neq(tb_call(&dst, "Get", &rep, "{\"Name\":\"busy\"}"), 0, "the other node got a volume");
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"busy\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	cr_assert(!has_snapshots(&src, "busy"), "a snapshot of the refused move stayed");
}

Test(daemon_move, a_receiver_that_fails_midway_leaves_the_source_serving)
{
	char via[600], a[512];

	snprintf(via, sizeof(via), "%s/broken", src.dir);
	wrapper(via, 1000);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"half\",\"Opts\":{}}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&src, 0, "half", a, sizeof(a));
	put(a, "f", 1 << 20, 'z');
	cr_assert_eq(move("half", via, ""), 1, "%s", err);
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"half\",\"ID\":\"c1\"}"), 0, "the source must stay served: %s",
		     client_err(&rep));
	cr_assert(!has_snapshots(&src, "half"), "the failed pass's snapshot stayed");
	cr_assert_neq(tb_call(&dst, "Get", &rep, "{\"Name\":\"half\"}"), 0, "the other node got a volume");
}

Test(daemon_move, usage_errors_exit_2)
{
	cr_assert_eq(move("xx", "", ""), 2, "%s", err);
	cr_assert(strstr(err, "--via 'CMD' is required"), "%s", err);
	cr_assert_eq(move("xx", "/bin/true", "--small-seconds -1"), 2, "%s", err);
	cr_assert(strstr(err, "--small-seconds takes a number of seconds"), "%s", err);
	cr_assert_eq(move("xx", "/bin/true", "--small-seconds soon"), 2, "%s", err);
	cr_assert(strstr(err, "--small-seconds takes a number of seconds"), "%s", err);
}

static json_t *snapshots_json(Testbed *tb, const char *name)
{
	char o[16384], e[2048];
	json_t *j;

	cr_assert_eq(testbed_admin(tb, (const char *const[]){ "volume", "snapshots", name, "--json", NULL }, o, sizeof(o),
				   e, sizeof(e)),
		     0, "%s", e);
	j = json_loads(o, 0, NULL);
	cr_assert_not_null(j, "%s", o);
	return j;
}

static void admin_ok(Testbed *tb, const char *const *args)
{
	char o[8192], e[4096];

	cr_assert_eq(testbed_admin(tb, args, o, sizeof(o), e, sizeof(e)), 0, "%s %s: %s", args[0], args[1], e);
}

/* Mounted: a live full pass commits there, then the incremental pass after it drops. */
static void move_that_drops(const char *name, char *a, size_t alen)
{
	char via[600];

	snprintf(via, sizeof(via), "%s/flaky", src.dir);
	wrapper_after(via, 100, 1);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"%s\",\"Opts\":{}}", name), 0, "%s", client_err(&rep));
	testbed_volume_dir(&src, 0, name, a, alen);
	put(a, "big", 4 << 20, 'a');
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"c1\"}", name), 0, "%s", client_err(&rep));
	cr_assert_eq(move(name, via, "--small 1 --small-seconds 0 --passes 3"), 1, "%s", err);
	cr_assert(strstr(err, "fenced toward this node: run the move again"), "%s", err);
	/* Here: served, unfenced. There: the copy of the live pass, fenced toward here. */
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"c2\"}", name), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&dst, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	cr_assert_neq(tb_call(&dst, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"x\"}", name), 0,
		      "the copy of an unfinished move was mountable there");
	cr_assert(strstr(client_err(&rep), "was moved to"), "%s", client_err(&rep));
	cr_assert_eq(tb_call(&src, "Unmount", &rep, "{\"Name\":\"%s\",\"ID\":\"c2\"}", name), 0, "%s", client_err(&rep));
}

Test(daemon_move, a_rerun_after_a_drop_sends_only_the_changes_since_the_common_snapshot)
{
	char good[600], a[512], b[512], why[1024];
	json_t *j, *p;

	move_that_drops("rs", a, sizeof(a));
	put(a, "small", 8192, 'b');
	cr_assert_eq(tb_call(&src, "Unmount", &rep, "{\"Name\":\"rs\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));

	snprintf(good, sizeof(good), "%s/node2", src.dir);
	wrapper(good, 0);
	cr_assert_eq(move("rs", good, "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "not JSON: %s", out);
	cr_assert(json_is_string(json_object_get(j, "resumed_from")), "%s", out);
	cr_assert_eq(json_array_size(json_object_get(j, "passes")), 1, "%s", out);
	p = json_array_get(json_object_get(j, "passes"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(p, "from")),
			 json_string_value(json_object_get(j, "resumed_from")), "%s", out);
	/* Only the changes: the new file's 8 KiB, not the 4 MiB sent before. */
	cr_assert_eq(json_integer_value(json_object_get(p, "data_bytes")), 8192, "%s", out);
	cr_assert_lt(json_integer_value(json_object_get(p, "bytes")), 1 << 20, "%s", out);
	json_decref(j);

	testbed_volume_dir(&dst, 0, "rs", b, sizeof(b));
	cr_assert_eq(treecmp(a, b, TREECMP_SKIP_XFS_ACL_ALIAS, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(tb_call(&dst, "Mount", &rep, "{\"Name\":\"rs\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_neq(tb_call(&src, "Mount", &rep, "{\"Name\":\"rs\",\"ID\":\"c3\"}"), 0, "the source is not fenced");
}

Test(daemon_move, a_rerun_refuses_a_copy_there_that_is_in_use_or_was_unfenced)
{
	char good[600], a[512], b[512], theirs[600];
	struct stat st;

	move_that_drops("rf", a, sizeof(a));
	cr_assert_eq(tb_call(&src, "Unmount", &rep, "{\"Name\":\"rf\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	snprintf(good, sizeof(good), "%s/node2", src.dir);
	wrapper(good, 0);

	/* Unfenced there and written: that data did not come from a move, and stays. */
	admin_ok(&dst, (const char *const[]){ "volume", "unfence", "rf", NULL });
	testbed_volume_dir(&dst, 0, "rf", b, sizeof(b));
	put(b, "theirs", 100, 'z');
	cr_assert_eq(tb_call(&dst, "Mount", &rep, "{\"Name\":\"rf\",\"ID\":\"t1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(move("rf", good, ""), 1, "%s", err);
	cr_assert(strstr(err, "in use there (1 mount(s))") && strstr(err, "Nothing was sent"), "%s", err);
	cr_assert_eq(tb_call(&dst, "Unmount", &rep, "{\"Name\":\"rf\",\"ID\":\"t1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(move("rf", good, ""), 1, "%s", err);
	cr_assert(strstr(err, "is not fenced toward") && strstr(err, "Nothing was sent"), "%s", err);

	snprintf(theirs, sizeof(theirs), "%s/theirs", b);
	cr_assert_eq(stat(theirs, &st), 0, "the copy there was overwritten");
	/* Here: still served, unfenced, with only the live pass's snapshot. */
	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"rf\",\"ID\":\"c4\"}"), 0, "%s", client_err(&rep));
	{
		json_t *j = snapshots_json(&src, "rf");

		cr_assert_eq(json_array_size(json_object_get(j, "snapshots")), 1, "a refused rerun left a snapshot");
		json_decref(j);
	}
}

/* A move of @name, mounted as c1, with @args: c1 unmounted once the move waits; its --json summary. */
static json_t *move_unmounted_when_it_waits(const char *name, const char *via, const char *args)
{
	pid_t pid;
	json_t *j;

	cr_assert_eq(tb_call(&src, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"c1\"}", name), 0, "%s", client_err(&rep));
	pid = move_start(name, via, args);
	move_says("waiting up to 120 s");
	cr_assert_eq(tb_call(&src, "Unmount", &rep, "{\"Name\":\"%s\",\"ID\":\"c1\"}", name), 0, "%s", client_err(&rep));
	cr_assert_eq(move_wait(pid), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "not JSON: %s", out);
	return j;
}

Test(daemon_move, live_passes_end_at_small_seconds_and_the_wait_says_who_holds_the_volume)
{
	char via[600], a[512];
	json_t *j, *w;

	snprintf(via, sizeof(via), "%s/node2", src.dir);
	wrapper(via, 0);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"lv\",\"Opts\":{}}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&src, 0, "lv", a, sizeof(a));
	put(a, "f", 1 << 20, 'q');

	/* Never small in bytes, but each pass is shorter than 1000 s: the first is the last live one. */
	j = move_unmounted_when_it_waits("lv", via, "--json --small 1 --small-seconds 1000 --passes 5 --timeout 120");
	cr_assert(strstr(err, "in use by 1 mount(s); the containers cannot be named: Docker does not answer"), "%s", err);
	cr_assert_str_eq(json_string_value(json_object_get(j, "live_passes_ended")), "small-seconds", "%s", out);
	cr_assert_eq(json_array_size(json_object_get(j, "passes")), 2, "%s", out);
	w = json_object_get(j, "waited_for");
	cr_assert_eq(json_integer_value(json_object_get(w, "mount_count")), 1, "%s", out);
	cr_assert(json_is_string(json_object_get(w, "docker_unavailable")), "%s", out);
	json_decref(j);

	/* The control: with --small-seconds 0 the live passes go on to --passes. */
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"lv2\",\"Opts\":{}}"), 0, "%s", client_err(&rep));
	j = move_unmounted_when_it_waits("lv2", via, "--json --small 1 --small-seconds 0 --passes 3 --timeout 120");
	cr_assert_str_eq(json_string_value(json_object_get(j, "live_passes_ended")), "passes", "%s", out);
	cr_assert_eq(json_array_size(json_object_get(j, "passes")), 4, "%s", out);
	json_decref(j);
}

Test(daemon_move, a_remove_takes_a_moves_snapshots_along_but_refuses_a_users)
{
	char via[600];
	json_t *j;

	snprintf(via, sizeof(via), "%s/node2", src.dir);
	wrapper(via, 0);
	cr_assert_eq(tb_call(&src, "Create", &rep, "{\"Name\":\"gone\",\"Opts\":{}}"), 0, "%s", client_err(&rep));
	cr_assert_eq(move("gone", via, ""), 0, "%s", err);

	/* Both sides keep the last snapshot, marked as a move's. */
	j = snapshots_json(&dst, "gone");
	cr_assert_eq(json_array_size(json_object_get(j, "snapshots")), 1, "%s", json_dumps(j, 0));
	cr_assert(json_is_true(json_object_get(json_array_get(json_object_get(j, "snapshots"), 0), "by_move")));
	json_decref(j);

	/* The fenced source: docker volume rm works, and takes the move's snapshot along. */
	cr_assert_eq(tb_call(&src, "Remove", &rep, "{\"Name\":\"gone\"}"), 0, "%s", client_err(&rep));
	cr_assert_neq(tb_call(&src, "Get", &rep, "{\"Name\":\"gone\"}"), 0);

	/* There, a snapshot the user took still refuses a Remove, and is named alone. */
	admin_ok(&dst, (const char *const[]){ "volume", "snapshot", "gone", "mine", NULL });
	cr_assert_neq(tb_call(&dst, "Remove", &rep, "{\"Name\":\"gone\"}"), 0);
	cr_assert(strstr(client_err(&rep), "1 snapshot(s): mine.") && !strstr(client_err(&rep), "move-"), "%s",
		  client_err(&rep));
	admin_ok(&dst, (const char *const[]){ "volume", "snapshot-rm", "gone", "mine", NULL });
	cr_assert_eq(tb_call(&dst, "Remove", &rep, "{\"Name\":\"gone\"}"), 0, "%s", client_err(&rep));
}
