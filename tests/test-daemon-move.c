/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume move` between two real daemons on loop-backed XFS (two
 * testbeds: two state directories, sockets and partitions), the other node
 * reached through a wrapper script as --via, as `ssh node2` would be: an
 * idle move compared with the independent comparator (treecmp) and the
 * source fenced after it; a mounted volume with --final-now refused with
 * nothing changed; a receiver that fails midway leaving the source serving,
 * unfenced, without the pass's snapshot.
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
 * build's binary with ARGS against the second daemon; with @fail_after, it
 * reads that many bytes of the stream and fails, as a link that drops.
 */
static void wrapper(const char *path, long fail_after)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fprintf(f, "#!/bin/sh\nshift\n");
	/* Only the receive breaks: the other node answers its status. */
	if (fail_after > 0)
		fprintf(f, "if [ \"$2\" = receive ]; then head -c %ld >/dev/null; exit 1; fi\n", fail_after);
	fprintf(f, "exec '%s' \"$@\" --socket '%s/nvmevol-admin.sock'\n", bin(), dst.dir);
	fclose(f);
	cr_assert_eq(chmod(path, 0755), 0);
}

/* `nvmevol volume move NAME --via WRAPPER ARGS` on the first daemon: its exit status; stdout in out, stderr in err. */
static int move(const char *name, const char *via, const char *args)
{
	char cmd[4096], outf[600], errf[600];
	int st;

	snprintf(outf, sizeof(outf), "%s/move.out", src.dir);
	snprintf(errf, sizeof(errf), "%s/move.err", src.dir);
	snprintf(cmd, sizeof(cmd), "'%s' volume move %s --via '%s' %s --socket '%s/nvmevol-admin.sock' > '%s' 2> '%s'",
		 bin(), name, via, args, src.dir, outf, errf);
	st = system(cmd);
	slurp(outf, out, sizeof(out));
	slurp(errf, err, sizeof(err));
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void put(const char *dir, const char *rel, size_t len, char fill)
{
	char path[1024], *buf = malloc(len);
	int fd;

	cr_assert_not_null(buf);
	memset(buf, fill, len);
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
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
	cr_assert_eq(move("busy", via, "--final-now"), 1, "%s", err);
	cr_assert(strstr(err, "in use"), "%s", err);
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
	cr_assert_eq(move("x", "", ""), 2, "%s", err);
}
