/* SPDX-License-Identifier: MIT */
/*
 * The admin socket and the `nvmevol` admin command against the real daemon
 * on loop-backed XFS: every subcommand, its table and JSON, its refusals,
 * what it persists (records on the partition, the index, mount counts), the
 * log of who changed what, and the command-line conventions. The quota side
 * of `volume resize` runs in the qemu guest (test-admin-quota.c).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"
#include "pool/mount-users.h"

static Testbed tb;
static ClientReply rep;
static char admin_sock[400];
static char out[256 * 1024], err[16 * 1024];
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void setup2(void)
{
	testbed_require_root();
	testbed_setup(&tb, 2, selftest_off);
	snprintf(admin_sock, sizeof(admin_sock), "%s/nvmevol-admin.sock", tb.dir);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(admin, .init = setup2, .fini = teardown, .timeout = 180);

static const char *binary(void)
{
	const char *b = getenv("NVMEVOL_BINARY");
	return b ? b : "build/src/nvmevol";
}

/* Runs `nvmevol ARGS...` (or ARGS as they are); stdout in out[], stderr in err[]; returns the exit status. */
static int run_argv(bool nvmevol, const char *const *args)
{
	const char *argv[64];
	int n = 0;

	if (nvmevol)
		argv[n++] = binary();
	for (; *args && n < 62; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return loopxfs_spawn_capture(argv, out, sizeof(out), err, sizeof(err));
}
#define NV(...) run_argv(true, (const char *const[]){ __VA_ARGS__, NULL })
#define EX(...) run_argv(false, (const char *const[]){ __VA_ARGS__, NULL })
/* The same, talking to this testbed's daemon (--socket last: options go anywhere). */
#define NVS(...) run_argv(true, (const char *const[]){ __VA_ARGS__, "--socket", admin_sock, NULL })

static json_t *out_json(void)
{
	json_error_t e;
	json_t *j = json_loads(out, 0, &e);

	cr_assert_not_null(j, "stdout is not JSON (%s): %s", e.text, out);
	return j;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void part_path(int i, const char *rest, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/nvmevol/%s", tb.parts_root, tb.parts[i].uuid, rest);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_geq(getdelim(&buf, &len, '\0', f), 0);
	fclose(f);
	return buf;
}

static void restart(void)
{
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0, "daemon did not start again");
}

static void create(const char *name, int part)
{
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\",\"Opts\":{\"partition\":\"%s\"}}", name,
			     tb.parts[part].label), 0, "%s", client_err(&rep));
}

/* ---- status and show ---- */

/* Every setting config.json offers to `docker plugin set` is in Status: a new
 * setting added to config.json and the parser but not to the report fails here. */
static void assert_every_setting_reported(json_t *settings)
{
	json_error_t jerr;
	json_t *cfg = json_load_file(NVMEVOL_SOURCE_ROOT "/config.json", 0, &jerr), *e;
	size_t i, n = 0;

	cr_assert_not_null(cfg, "config.json: %s", jerr.text);
	json_array_foreach(json_object_get(cfg, "Env"), i, e) {
		const char *name = json_string_value(json_object_get(e, "Name"));

		cr_assert_not_null(json_object_get(settings, name), "status --json has no setting %s (config.json has)", name);
		n++;
	}
	cr_assert_gt(n, 10, "config.json lists only %zu settings", n);
	json_decref(cfg);
}

Test(admin, status_json_and_table)
{
	json_t *j, *p, *v, *s;

	create("alpha", 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"alpha\",\"ID\":\"m1\"}"), 0);
	cr_assert_eq(NVS("status", "--json"), 0, "%s", err);
	j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(j, "version")), PROJECT_VERSION);
	cr_assert_eq(json_integer_value(json_object_get(j, "admin_api")), 1);
	s = json_object_get(j, "settings");
	cr_assert_str_eq(json_string_value(json_object_get(s, "NVMEVOL_LABEL_PREFIX")), tb.prefix);
	cr_assert_str_eq(json_string_value(json_object_get(s, "NVMEVOL_SELFTEST")), "off");
	assert_every_setting_reported(s);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "state"), "location")), "NVMEVOL_STATE_DIR");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "state"), "dir")), tb.state);
	cr_assert_eq(json_array_size(json_object_get(j, "partitions")), 2);
	p = json_array_get(json_object_get(j, "partitions"), 0);
	for (const char *const *k = (const char *const[]){ "uuid", "label", "device", "present", "adopted", "read_only",
							   "project_quota", "volumes", "size_bytes", "free_bytes", NULL };
	     *k; k++)
		cr_assert_not_null(json_object_get(p, *k), "partition has no '%s': %s", *k, out);
	cr_assert_eq(json_array_size(json_object_get(j, "volumes")), 1);
	v = json_array_get(json_object_get(j, "volumes"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(v, "Name")), "alpha");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "Status"), "state")), "mounted");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(v, "Status"), "mount_count")), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "plugin"), "admin_socket")), admin_sock);
	json_decref(j);

	/* The table: options anywhere, headers and one row per partition and volume. */
	cr_assert_eq(NV("--socket", admin_sock, "status"), 0, "%s", err);
	cr_assert(strstr(out, "PARTITION") && strstr(out, "VOLUME") && strstr(out, "MOUNTS"), "%s", out);
	cr_assert(strstr(out, tb.parts[0].label) && strstr(out, tb.parts[1].label), "%s", out);
	cr_assert(strstr(out, "\nalpha ") && strstr(out, "mounted"), "%s", out);
	cr_assert(strstr(out, "Version:   nvmevol " PROJECT_VERSION), "%s", out);
}

Test(admin, volume_show_has_the_real_options_and_mount_ids)
{
	json_t *j, *adm;
	char dev[32];
	struct stat st;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"pgdata\",\"Opts\":{\"uid\":\"999\",\"mode\":\"0700\"}}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"pgdata\",\"ID\":\"c1\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"pgdata\",\"ID\":\"c1\"}"), 0);
	cr_assert_eq(NVS("volume", "show", "--json", "pgdata"), 0, "%s", err);
	j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(j, "Status"), "options"), "uid")), "999");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(j, "Status"), "options"), "mode")), "0700");
	adm = json_object_get(j, "Admin");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(adm, "mount_ids"), "c1")), 2, "%s", out);
	cr_assert_str_eq(json_string_value(json_object_get(adm, "root")), "/nvmevol/volumes/pgdata");
	cr_assert(json_is_true(json_object_get(adm, "mounted")));
	/* The device as mountinfo shows the bind. */
	cr_assert_eq(stat(json_string_value(json_object_get(adm, "mountpoint")), &st), 0);
	snprintf(dev, sizeof(dev), "%u:%u", major(st.st_dev), minor(st.st_dev));
	cr_assert_str_eq(json_string_value(json_object_get(adm, "dev")), dev);
	json_decref(j);

	cr_assert_eq(NVS("volume", "show", "pgdata"), 0, "%s", err);
	cr_assert(strstr(out, "Options:    uid=999 mode=0700"), "%s", out);
	cr_assert(strstr(out, "Mounts:     2 (ID c1: 2)"), "%s", out);

	cr_assert_eq(NVS("volume", "show", "nosuch"), 1);
	cr_assert(strstr(err, "no such volume: nosuch"), "%s", err);
	cr_assert_eq(NVS("volume", "show", "../etc"), 2);
	cr_assert(strstr(err, "invalid volume name"), "%s", err);
}

/* ---- set ---- */

Test(admin, volume_set_changes_the_record_and_takes_effect_at_the_next_mount)
{
	char rec[700], log_has[200];
	char *text;
	json_t *j;

	create("st", 0);
	cr_assert_eq(NVS("volume", "set", "st", "selftest=enforce", "min_iops=1000000000", "--json"), 0, "%s", err);
	j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "after"), "selftest")), "enforce");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "after"), "min_iops")), "1000000000");
	cr_assert_eq(json_object_size(json_object_get(j, "before")), 1, "%s", out); /* partition= only */
	json_decref(j);
	/* On the partition, in the record (the authority), and in Get. */
	part_path(0, "meta/st.json", rec, sizeof(rec));
	text = read_text(rec);
	cr_assert(strstr(text, "\"selftest\":\"enforce\"") && strstr(text, "\"min_iops\":\"1000000000\""), "%s", text);
	free(text);
	/* The next first mount applies it: no disk does a billion IOPS. */
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"st\",\"ID\":\"x\"}"), 0);
	cr_assert(strstr(client_err(&rep), "min_iops"), "%s", client_err(&rep));

	/* Kept across a restart; "none" clears. */
	restart();
	cr_assert_eq(NVS("volume", "show", "st", "--json"), 0);
	j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(j, "Status"), "options"), "selftest")), "enforce");
	json_decref(j);
	cr_assert_eq(NVS("volume", "set", "st", "selftest=none", "min_iops=none"), 0, "%s", err);
	cr_assert(strstr(out, "options now:  partition="), "%s", out);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"st\",\"ID\":\"x\"}"), 0, "%s", client_err(&rep));

	/* Refusals: what cannot change here, bad values, bad syntax. */
	cr_assert_eq(NVS("volume", "set", "st", "uid=5"), 1);
	cr_assert(strstr(err, "'uid' cannot be changed here") && strstr(err, "selftest, min_write_mbps"), "%s", err);
	cr_assert_eq(NVS("volume", "set", "st", "selftest=maybe"), 1);
	cr_assert(strstr(err, "expected off, warn or enforce"), "%s", err);
	cr_assert_eq(NVS("volume", "set", "st", "min_iops=0.0001"), 1);
	cr_assert_eq(NVS("volume", "set", "st", "selftest"), 2);
	cr_assert_eq(NVS("volume", "set", "st", "min_iops=1", "min_iops=2"), 2);
	cr_assert_eq(NVS("volume", "set", "st"), 2);

	/* Who and what, in the daemon's log. */
	text = read_text(tb.log);
	snprintf(log_has, sizeof(log_has), "admin: /Admin.VolumeSet st by uid 0 gid 0 pid ");
	cr_assert(strstr(text, log_has), "no audit line in the log");
	cr_assert(strstr(text, "command=volume set\" done: {\"name\":\"st\",\"before\""), "no result in the log");
	cr_assert(strstr(text, "'uid' cannot be changed here"), "refusal not logged");
	free(text);
}

Test(admin, volume_resize_without_quota_says_why)
{
	create("rz", 0);
	cr_assert_eq(NVS("volume", "resize", "rz", "10M"), 1);
	cr_assert(strstr(err, "without XFS project quota"), "%s", err);
	cr_assert_eq(NVS("volume", "resize", "rz"), 2);
	cr_assert(strstr(err, "give a new SIZE, --inodes N, or both"), "%s", err);
	cr_assert_eq(NVS("volume", "resize", "rz", "1K"), 1);
	cr_assert(strstr(err, "the smallest limit is 1M"), "%s", err);
	cr_assert_eq(NVS("volume", "resize", "rz", "--inodes", "-3"), 1);
	cr_assert_eq(NVS("volume", "resize", "rz", "10M", "20M"), 2);
	/* Removing limits a volume never had: only the record changes. */
	cr_assert_eq(NVS("volume", "resize", "rz", "none", "--inodes", "none"), 0, "%s", err);
}

/* ---- forget ---- */

Test(admin, volume_forget_only_when_the_partition_is_gone_and_the_volume_comes_back)
{
	char mp[400], idx[500], rec[700];

	create("gone", 1);
	cr_assert_eq(NVS("volume", "forget", "gone"), 1);
	cr_assert(strstr(err, "which is present") && strstr(err, "docker volume rm gone"), "%s", err);

	testbed_stop(&tb, SIGTERM);
	testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
	(void)umount2(mp, MNT_DETACH);
	cr_assert_eq(testbed_detach(&tb, 1), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"gone\"}"), 0, "an index-only volume must answer Get");

	cr_assert_eq(NVS("volume", "forget", "gone", "--json"), 0, "%s", err);
	json_t *j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(j, "result")), "forgotten");
	cr_assert_str_eq(json_string_value(json_object_get(j, "partition_uuid")), tb.parts[1].uuid);
	json_decref(j);
	snprintf(idx, sizeof(idx), "%s/index/gone.json", tb.state);
	cr_assert(!exists(idx), "index entry still there");
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"gone\"}"), 0);
	cr_assert_eq(NVS("volume", "forget", "gone"), 1);
	cr_assert(strstr(err, "no such volume"), "%s", err);

	/* The disk returns: the record on it brings the volume back (data untouched). */
	cr_assert_eq(testbed_attach(&tb, 1), 0);
	/* Found by the background rescan, within a few seconds (Get waits for it only briefly). */
	cr_assert_eq(tb_get_eventually(&tb, "gone", &rep, 3000), 0, "the volume did not come back: %s",
		     client_err(&rep));
	part_path(1, "meta/gone.json", rec, sizeof(rec));
	cr_assert(exists(rec));
}

/* ---- release ---- */

/* The body of a release request: {"Name": @name, "Expect": @ids}. */
static char *release_body(const char *name, json_t *ids)
{
	json_t *req = json_pack("{s:s,s:O}", "Name", name, "Expect", ids);
	char *body = json_dumps(req, JSON_COMPACT);

	json_decref(req);
	cr_assert_not_null(body);
	return body;
}

static json_t *mount_ids(const char *name)
{
	cr_assert_eq(NVS("volume", "show", name, "--json"), 0, "%s", err);
	json_t *j = out_json(), *ids = json_incref(json_object_get(json_object_get(j, "Admin"), "mount_ids"));
	json_decref(j);
	return ids;
}

Test(admin, release_clears_counts_only_if_they_are_still_the_checked_ones)
{
	char mp[400], counts[500], *body, *line;
	json_t *ids;

	create("oc", 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"oc\",\"ID\":\"a\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"oc\",\"ID\":\"a\"}"), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"oc\",\"ID\":\"b\"}"), 0);
	snprintf(mp, sizeof(mp), "%s/oc", tb.prop);
	snprintf(counts, sizeof(counts), "%s/mounts/oc.json", tb.state);
	cr_assert(exists(counts));

	/* Counts that changed since the check: refused, nothing changes. */
	ids = mount_ids("oc");
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"oc\",\"ID\":\"b\"}"), 0);
	body = release_body("oc", ids);
	cr_assert_eq(client_post(admin_sock, "/Admin.VolumeRelease", &rep, "%s", body), 0);
	free(body);
	json_decref(ids);
	cr_assert_eq(rep.status, 409, "%u %s", rep.status, rep.body);
	cr_assert(strstr(client_err(&rep), "changed while they were being checked"), "%s", client_err(&rep));
	line = mountinfo_line(mp);
	cr_assert_not_null(line, "the bind went away on a refused release");
	free(line);

	/* The checked counts: cleared, the bind unmounted, the counts file gone. */
	ids = mount_ids("oc");
	body = release_body("oc", ids);
	cr_assert_eq(client_post(admin_sock, "/Admin.VolumeRelease", &rep, "%s", body), 0);
	free(body);
	json_decref(ids);
	cr_assert_eq(rep.status, 200, "%s", rep.body);
	cr_assert_eq(json_integer_value(json_object_get(rep.json, "total_before")), 2);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(rep.json, "cleared"), "a")), 2);
	cr_assert(json_is_true(json_object_get(rep.json, "unmounted")));
	cr_assert_null(mountinfo_line(mp), "bind still mounted");
	cr_assert(!exists(counts), "counts file still there");
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"oc\"}"), 0, "%s", client_err(&rep));
}

Test(admin, release_command_needs_dockers_answer)
{
	create("nd", 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"nd\",\"ID\":\"a\"}"), 0);
	cr_assert_eq(EX("env", "DOCKER_HOST=unix:///nonexistent/docker.sock", binary(), "volume", "release", "nd", "--socket",
			admin_sock), 1);
	cr_assert(strstr(err, "cannot ask Docker whether a container uses nd") && strstr(err, "nothing was changed"), "%s",
		  err);
	cr_assert_eq(EX("env", "DOCKER_HOST=tcp://127.0.0.1:2375", binary(), "volume", "release", "nd", "--socket", admin_sock),
		     1);
	cr_assert(strstr(err, "unix socket only"), "%s", err);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"nd\"}"), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"),
							"mount_count")), 1);
}

/* A process in a mount namespace of its own that holds a copy of the host's mounts. */
static pid_t hold_namespace(int *ready_fd)
{
	int p[2];
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(1);
		(void)!write(p[1], "x", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	*ready_fd = p[0];
	return pid;
}

Test(admin, mount_users_finds_a_namespace_that_holds_the_bind)
{
	MountUser *u = NULL;
	size_t n = 0, scanned = 0;
	struct stat self, st;
	char mp[400], c;
	pid_t child;
	int fd;
	bool found = false;

	create("ns", 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"ns\",\"ID\":\"a\"}"), 0);
	snprintf(mp, sizeof(mp), "%s/ns", tb.prop);
	cr_assert_eq(stat(mp, &st), 0);
	cr_assert_eq(stat("/proc/self/ns/mnt", &self), 0);

	child = hold_namespace(&fd);
	cr_assert_eq(read(fd, &c, 1), 1, "the child could not unshare");
	close(fd);
	cr_assert_eq(mount_users_find("/proc", st.st_dev, "/nvmevol/volumes/ns", self.st_ino, NULL, &u, &n, &scanned), 0);
	cr_assert_geq(scanned, 2);
	for (size_t i = 0; i < n; i++)
		if (u[i].pid == child) {
			found = true;
			cr_assert_str_eq(u[i].target, mp);
		}
	mount_users_free(u, n);
	cr_assert(found, "the namespace of pid %d was not reported", (int)child);

	/* A suffix that names where the copy is (Docker's host-side copy) is not a user. */
	cr_assert_eq(mount_users_find("/proc", st.st_dev, "/nvmevol/volumes/ns", self.st_ino, "/prop/ns", &u, &n, &scanned), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_neq(u[i].pid, child);
	mount_users_free(u, n);

	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	cr_assert_eq(mount_users_find("/proc", st.st_dev, "/nvmevol/volumes/ns", self.st_ino, NULL, &u, &n, &scanned), 0);
	for (size_t i = 0; i < n; i++)
		cr_assert_neq(u[i].pid, child, "a dead process reported");
	mount_users_free(u, n);
}

/* Processes a test started (a namespace holder, a fake Docker): killed by the suite's .fini even after a failed assertion. */
static pid_t helpers[4];

static void remember_helper(pid_t pid)
{
	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (helpers[i] <= 0) {
			helpers[i] = pid;
			return;
		}
	cr_assert_fail("too many helper processes");
}

static void kill_helper(pid_t pid)
{
	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (helpers[i] == pid && pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			helpers[i] = 0;
		}
}

static void teardown_helpers(void)
{
	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		kill_helper(helpers[i]);
	teardown();
}

/* A Docker that knows no container: every request on unix socket @path is answered 200 "[]". */
static pid_t fake_docker(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid_t pid;

	cr_assert_geq(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	cr_assert_eq(listen(fd, 8), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
					    "Connection: close\r\n\r\n[]";
		for (;;) {
			char req[8192];
			size_t n = 0;
			ssize_t k;
			int c = accept(fd, NULL, NULL);

			if (c < 0)
				continue;
			while (n < sizeof(req) - 1 && (k = read(c, req + n, sizeof(req) - 1 - n)) > 0) {
				n += (size_t)k;
				req[n] = '\0';
				if (strstr(req, "\r\n\r\n"))
					break;
			}
			(void)!write(c, reply, sizeof(reply) - 1);
			close(c);
		}
	}
	close(fd);
	remember_helper(pid);
	return pid;
}

/* The partition is missing for the plugin, a container's namespace still has the bind: release refuses. */
Test(admin, release_checks_namespaces_when_the_partition_is_missing, .fini = teardown_helpers)
{
	char mp[400], dsock[400], dhost[420], pid_text[32];
	json_t *j;
	pid_t child;
	int fd;
	char c;

	create("gone", 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"gone\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	child = hold_namespace(&fd);
	remember_helper(child);
	cr_assert_eq(read(fd, &c, 1), 1, "the child could not unshare");
	close(fd);
	snprintf(dsock, sizeof(dsock), "%s/docker.sock", tb.dir);
	snprintf(dhost, sizeof(dhost), "DOCKER_HOST=unix://%s", dsock);
	fake_docker(dsock);

	/* The partition's mount goes away under the plugin; the binds (here and in the child) keep the filesystem. */
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	cr_assert_eq(umount2(mp, MNT_DETACH), 0, "%s", strerror(errno));
	cr_assert_eq(NVS("volume", "show", "gone", "--json"), 0, "%s", err);
	j = out_json();
	cr_assert_null(json_object_get(json_object_get(j, "Admin"), "dev"), "the plugin still sees the partition: %s", out);
	json_decref(j);

	cr_assert_eq(EX("env", dhost, binary(), "volume", "release", "gone", "--socket", admin_sock), 1,
		     "released although a namespace holds the bind: %s", out);
	snprintf(pid_text, sizeof(pid_text), "process %d ", (int)child);
	cr_assert(strstr(err, "still mounted on this host") && strstr(err, pid_text), "%s", err);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"gone\"}"), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"),
							"mount_count")), 1, "counts changed on a refused release");

	/* Nobody else has it: released, the plugin's own bind unmounted. */
	kill_helper(child);
	cr_assert_eq(EX("env", dhost, binary(), "volume", "release", "gone", "--socket", admin_sock), 0, "%s", err);
	cr_assert(strstr(out, "from any device"), "%s", out);
	snprintf(mp, sizeof(mp), "%s/gone", tb.prop);
	cr_assert_null(mountinfo_line(mp), "the plugin's bind is still mounted");
}

/* ---- adopt ---- */

Test(admin, partition_adopt_lets_a_hot_plugged_partition_take_volumes)
{
	json_t *j;

	testbed_replug_while_running(&tb, 1, selftest_off);
	/* A create that names it rescans, finds it, and is refused: read-only until adopted. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"late\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0);
	cr_assert(strstr(client_err(&rep), "nvmevol partition adopt"), "%s", client_err(&rep));
	cr_assert_eq(NVS("status", "--json"), 0);
	j = out_json();
	cr_assert(strstr(out, "read-only until"), "%s", out);
	json_decref(j);

	cr_assert_eq(NVS("partition", "adopt", "nosuch"), 1);
	cr_assert(strstr(err, "no partition has the label or UUID 'nosuch'"), "%s", err);
	cr_assert_eq(NVS("partition", "adopt", "a/b"), 1);
	cr_assert_eq(NVS("partition", "adopt", tb.parts[1].label), 0, "%s", err);
	cr_assert(strstr(out, "adopted"), "%s", out);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"late\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[1].label), 0,
		     "%s", client_err(&rep));
}

/* ---- state import ---- */

Test(admin, state_import_brings_back_volumes_of_a_missing_partition)
{
	char legacy[400], idx[400], src[600], dst[600], mp[400], cmd_dir[500];
	json_t *j;

	create("onmissing", 1);
	create("onhere", 0);
	/* An old state directory: the index of both, plus one of a volume removed since. */
	snprintf(legacy, sizeof(legacy), "%s/legacy", tb.dir);
	snprintf(idx, sizeof(idx), "%s/index", legacy);
	cr_assert_eq(RUN("mkdir", "-p", idx), 0);
	snprintf(src, sizeof(src), "%s/index/onmissing.json", tb.state);
	cr_assert_eq(RUN("cp", src, idx), 0);
	snprintf(src, sizeof(src), "%s/index/onhere.json", tb.state);
	cr_assert_eq(RUN("cp", src, idx), 0);
	create("removed", 0);
	snprintf(src, sizeof(src), "%s/index/removed.json", tb.state);
	cr_assert_eq(RUN("cp", src, idx), 0);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"removed\"}"), 0);
	snprintf(dst, sizeof(dst), "%s/broken.json", idx);
	cr_assert_eq(RUN("sh", "-c", "echo '{\"version\":1}' >\"$0\"", dst), 0);

	/* This host loses its index (a reinstall) while partition 1 is away. */
	testbed_stop(&tb, SIGTERM);
	testbed_part_mountpoint(&tb, 1, mp, sizeof(mp));
	(void)umount2(mp, MNT_DETACH);
	cr_assert_eq(testbed_detach(&tb, 1), 0);
	cr_assert_eq(RUN("rm", "-rf", tb.state), 0);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"onmissing\"}"), 0);

	cr_assert_eq(NVS("state", "import", legacy, "--json"), 1, "an unreadable entry must make it fail: %s", out);
	j = out_json();
	cr_assert_eq(json_array_size(json_object_get(j, "imported")), 1, "%s", out);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "imported"), 0)), "onmissing");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "known"), 0)), "onhere");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "stale"), 0)), "removed");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "invalid"), 0), "name")), "broken");
	cr_assert_null(json_object_get(j, "renamed_to"), "renamed although an entry was not imported");
	json_decref(j);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"onmissing\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"),
							  "state")), "partition-missing");
	snprintf(dst, sizeof(dst), "%s/index/onmissing.json", tb.state);
	cr_assert(exists(dst), "the imported entry is not in the state directory");

	/* Again, without the broken entry: everything known now, and the directory is renamed. */
	snprintf(dst, sizeof(dst), "%s/broken.json", idx);
	cr_assert_eq(unlink(dst), 0);
	cr_assert_eq(NVS("state", "import", legacy), 0, "%s", err);
	cr_assert(strstr(out, "0 imported") && strstr(out, "renamed to"), "%s", out);
	cr_assert(!exists(legacy));
	snprintf(cmd_dir, sizeof(cmd_dir), "%s/nothing-here", tb.dir);
	cr_assert_eq(NVS("state", "import", cmd_dir), 1);
	cr_assert_eq(NVS("state", "import", tb.dir), 1);
	cr_assert(strstr(err, "not an nvmevol state directory"), "%s", err);

	/* The partition returns: its record takes over from the imported entry. */
	cr_assert_eq(testbed_attach(&tb, 1), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"onmissing\",\"ID\":\"z\"}"), 0, "%s", client_err(&rep));
}

/* ---- who may, and which plugin ---- */

Test(admin, only_root_and_the_error_says_so)
{
	struct stat st;

	cr_assert_eq(stat(admin_sock, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "admin socket mode %o", st.st_mode & 0777);
	cr_assert_eq(EX("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary(), "status", "--socket",
			admin_sock), 1);
	cr_assert(strstr(err, "permission denied") && strstr(err, "root only") && strstr(err, "not root"), "%s", err);
	/* A non-root peer that got a connected socket anyway: the daemon checks SO_PEERCRED too. */
	cr_assert_eq(chmod(tb.dir, 0711), 0);
	cr_assert_eq(chmod(admin_sock, 0666), 0);
	cr_assert_eq(EX("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary(), "status", "--socket",
			admin_sock), 1);
	(void)chmod(admin_sock, 0600);
	(void)chmod(tb.dir, 0700);
	cr_assert(strstr(err, "for root only"), "%s", err);
	char *text = read_text(tb.log);
	cr_assert(strstr(text, "admin: refused /Admin.Status from uid 65534"), "refusal not logged");
	free(text);
}

static void fake_plugin_dir(const char *base, const char *id, const char *target_sock, bool admin)
{
	char dir[600], link[700];

	snprintf(dir, sizeof(dir), "%s/%s", base, id);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(link, sizeof(link), "%s/%s", dir, admin ? "nvmevol-admin.sock" : "nvmevol.sock");
	cr_assert_eq(symlink(target_sock, link), 0);
}

/* A runtime directory whose plugin was killed: its admin socket file stays, bound by nobody. */
static void stale_plugin_dir(const char *base, const char *id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[600];
	int fd;

	snprintf(dir, sizeof(dir), "%s/%s", base, id);
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_lt(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/nvmevol-admin.sock", dir), (int)sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

Test(admin, finding_the_plugin_without_docker)
{
	char base[] = "/tmp/nvrt.XXXXXX", env_dir[500], id_a[65], id_b[65], id_c[65];
	const char *nodocker = "DOCKER_HOST=unix:///nonexistent/docker.sock";

	/* Short: <base>/<64 hex>/nvmevol-admin.sock must fit in a socket address, as under /run/docker/plugins. */
	cr_assert_not_null(mkdtemp(base));
	snprintf(env_dir, sizeof(env_dir), "NVMEVOL_PLUGIN_RUNTIME_DIR=%s", base);
	memset(id_a, 'a', 64);
	memset(id_b, 'b', 64);
	memset(id_c, 'c', 64);
	id_a[64] = id_b[64] = id_c[64] = '\0';

	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status"), 1);
	cr_assert(strstr(err, "Docker does not answer") && strstr(err, "no running nvmevol plugin was found"), "%s", err);
	/* One plugin: found by scanning. */
	fake_plugin_dir(base, id_a, admin_sock, true);
	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status", "--json"), 0, "%s", err);
	/* Beside it what a killed plugin leaves: a socket file nobody listens on. Not a second plugin. */
	stale_plugin_dir(base, id_c);
	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status", "--json"), 0, "%s", err);
	/* Two: the error names them and says how to choose. */
	fake_plugin_dir(base, id_b, admin_sock, true);
	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status"), 1);
	cr_assert(strstr(err, "several nvmevol plugins run") && strstr(err, "--plugin ID") && strstr(err, "aaaaaaaaaaaa"),
		  "%s", err);
	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status", "--plugin", "bbbbbbbbbbbb"), 0, "%s", err);
	cr_assert_eq(EX("env", nodocker, env_dir, binary(), "status", "--plugin", "cccccccccccc"), 1);
	cr_assert_eq(RUN("rm", "-r", "--one-file-system", base), 0);
}

Test(admin, a_plugin_without_admin_socket_is_called_old)
{
	char base[] = "/tmp/nvold.XXXXXX", dir[500], sock[600];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	/* What nvmevol 0.1 leaves in its runtime directory: the plugin socket only. Short, as /run/docker/plugins:
	 * <base>/<64 hex>/nvmevol-admin.sock must fit in a socket address wherever the testbed lives. */
	cr_assert_not_null(mkdtemp(base));
	snprintf(dir, sizeof(dir), "%s/%064d", base, 0);
	cr_assert_eq(mkdir(dir, 0700), 0);
	snprintf(sock, sizeof(sock), "%s/nvmevol.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", dir);
	cr_assert_eq(NV("status", "--socket", sock), 1);
	close(fd);
	cr_assert_eq(RUN("rm", "-r", "--one-file-system", base), 0);
	cr_assert(strstr(err, "has no admin socket: it is older than nvmevol 0.2") && strstr(err, "docker plugin upgrade"),
		  "%s", err);
}

/* ---- command-line conventions ---- */

Test(admin, usage_help_version_and_exit_codes)
{
	static const char *const cmds[][2] = { { "selftest", NULL },	  { "status", NULL },	      { "volume", "show" },
					       { "volume", "resize" }, { "volume", "set" },      { "volume", "forget" },
					       { "volume", "release" }, { "partition", "adopt" }, { "state", "import" } };
	char want[64];

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		int r = cmds[i][1] ? NV(cmds[i][0], cmds[i][1], "--help") : NV(cmds[i][0], "--help");
		cr_assert_eq(r, 0, "%s %s --help", cmds[i][0], cmds[i][1] ? cmds[i][1] : "");
		snprintf(want, sizeof(want), "Usage: nvmevol %s%s%s ", cmds[i][0], cmds[i][1] ? " " : "",
			 cmds[i][1] ? cmds[i][1] : "");
		cr_assert(strncmp(out, want, strlen(want)) == 0, "%s", out);
		cr_assert(strstr(out, "Exit status: 0"), "%s", out);
		/* Help anywhere on the line. */
		r = cmds[i][1] ? NV("-h", cmds[i][0], cmds[i][1]) : NV(cmds[i][0], "-h");
		cr_assert_eq(r, 0);
	}
	cr_assert_eq(NV("--help"), 0);
	cr_assert(strstr(out, "nvmevol volume release NAME") && strstr(out, "nvmevol state import"), "%s", out);
	cr_assert_eq(NV("--version"), 0);
	cr_assert_str_eq(out, "nvmevol " PROJECT_VERSION);
	cr_assert_eq(NV("-V"), 0);
	cr_assert_eq(NV("volume", "--help"), 0);
	cr_assert_eq(NV("volume"), 2);
	cr_assert_eq(NV("volume", "frobnicate", "x"), 2);
	cr_assert(strstr(err, "unknown command 'frobnicate'"), "%s", err);
	cr_assert_eq(NV("frobnicate"), 2);
	cr_assert_eq(NV("status", "--bogus"), 2);
	cr_assert(strstr(err, "unknown or incomplete option '--bogus'"), "%s", err);
	cr_assert_eq(NV("status", "--inodes", "5"), 2);
	cr_assert(strstr(err, "--inodes is not an option of this command"), "%s", err);
	cr_assert_eq(NV("status", "extra"), 2);
	cr_assert_eq(NV("volume", "show"), 2);
	cr_assert_eq(NV("status", "--plugin", "x", "--socket", "/y"), 2);
	cr_assert_eq(NV("status", "--socket"), 2);
	cr_assert_eq(NV("--version", "status"), 2);
	/* Options before the command, between its words, after its arguments. */
	cr_assert_eq(NV("--json", "volume", "--socket", admin_sock, "show", "x1"), 1);
	cr_assert(strstr(err, "no such volume: x1"), "%s", err);
}

/* ---- labels with terminal controls ---- */

/* Two partitions whose labels carry ESC and U+009B (CSI): the prefix, then 4 bytes (XFS labels hold 12). */
static void setup_control_labels(void)
{
	static const char *const tails[] = { "\x1b[2J", "\xc2\x9b" "2J" };

	testbed_require_root();
	testbed_init_or_fail(&tb, 2);
	for (int i = 0; i < 2; i++) {
		snprintf(tb.parts[i].label, sizeof(tb.parts[i].label), "%s%s", tb.prefix, tails[i]);
		cr_assert_eq(RUN("xfs_admin", "-L", tb.parts[i].label, tb.parts[i].device), 0, "xfs_admin -L failed");
	}
	testbed_start_or_fail(&tb, selftest_off);
	snprintf(admin_sock, sizeof(admin_sock), "%s/nvmevol-admin.sock", tb.dir);
}

static void assert_no_controls(const char *what, const char *text)
{
	cr_assert_null(strchr(text, '\x1b'), "%s holds a raw ESC: %s", what, text);
	cr_assert_null(strstr(text, "\xc2\x9b"), "%s holds a raw U+009B: %s", what, text);
}

Test(labels, terminal_controls_are_escaped_in_status_devices_and_the_log, .init = setup_control_labels,
     .fini = teardown, .timeout = 180)
{
	char esc[64], csi[64], *log;
	json_t *j, *p;
	size_t i;

	snprintf(esc, sizeof(esc), "%s\\x1b[2J", tb.prefix);
	snprintf(csi, sizeof(csi), "%s\\xc2\\x9b2J", tb.prefix);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"ctl\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].uuid), 0,
		     "%s", client_err(&rep));

	cr_assert_eq(NVS("status"), 0, "%s", err);
	assert_no_controls("nvmevol status", out);
	cr_assert(strstr(out, esc) && strstr(out, csi), "labels not shown escaped: %s", out);

	cr_assert_eq(NVS("status", "--json"), 0, "%s", err);
	assert_no_controls("nvmevol status --json", out);
	j = out_json();
	json_array_foreach(json_object_get(j, "partitions"), i, p) {
		const char *l = json_string_value(json_object_get(p, "label"));
		cr_assert(l && (strcmp(l, esc) == 0 || strcmp(l, csi) == 0), "partition label %s", l ? l : "(none)");
	}
	json_decref(j);

	cr_assert_eq(NV("devices", "--label-prefix", tb.prefix), 0, "%s", err);
	assert_no_controls("nvmevol devices", out);
	cr_assert(strstr(out, esc) && strstr(out, csi), "labels not shown escaped: %s", out);
	cr_assert_eq(NV("devices", "--label-prefix", tb.prefix, "--json"), 0, "%s", err);
	j = out_json();
	cr_assert_str_eq(json_string_value(json_object_get(testbed_devices_entry(j, tb.parts[0].device), "label")), esc);
	cr_assert_str_eq(json_string_value(json_object_get(testbed_devices_entry(j, tb.parts[1].device), "label")), csi);
	json_decref(j);

	log = testbed_log_text(&tb);
	assert_no_controls("the daemon's log", log);
	cr_assert(strstr(log, esc), "the log does not name the partition: %s", log);
	free(log);
}
