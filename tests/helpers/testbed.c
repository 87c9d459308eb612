/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/teardown.h"
#include "device/probe.h"
#include "testbed.h"

extern char **environ;

int run_cmd(const char *const *argv)
{
	return loopxfs_spawn(argv, NULL, 0);
}

void testbed_require_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (loop devices, mount)");
	if (access("/usr/sbin/mkfs.xfs", X_OK) != 0 && access("/sbin/mkfs.xfs", X_OK) != 0)
		cr_skip_test("needs mkfs.xfs (package xfsprogs)");
}

static const char *daemon_binary(void)
{
	const char *b = getenv("NVMEVOL_BINARY");
	return b ? b : "build/src/nvmevol";
}

static int losetup_show(const char *image, bool direct, char *dev, size_t len)
{
	/* util-linux's losetup by path: a busybox one first in PATH (the qemu guest) lacks --show. */
	const char *losetup = access("/usr/sbin/losetup", X_OK) == 0 ? "/usr/sbin/losetup" : "losetup";
	const char *argv[] = { losetup, "--find", "--show", direct ? "--direct-io=on" : "--direct-io=off", image, NULL };

	if (loopxfs_spawn(argv, dev, len) != 0 || dev[0] == '\0')
		return -EIO;
	return 0;
}

int tb_get_eventually(Testbed *tb, const char *name, ClientReply *ret, unsigned timeout_ms)
{
	int r;

	for (unsigned waited = 0;; waited += 100) {
		r = tb_call(tb, "Get", ret, "{\"Name\":\"%s\"}", name);
		if (r == 0 || waited >= timeout_ms)
			return r;
		usleep(100 * 1000);
	}
}

void testbed_replug_while_running(Testbed *tb, int i, const char *const *extra_env)
{
	char mp[400];

	testbed_stop(tb, SIGTERM);
	testbed_part_mountpoint(tb, i, mp, sizeof(mp));
	(void)umount2(mp, MNT_DETACH);
	cr_assert_eq(testbed_detach(tb, i), 0, "cannot detach partition %d", i);
	cr_assert_eq(testbed_start(tb, extra_env), 0, "the daemon did not start again");
	cr_assert_eq(testbed_attach(tb, i), 0, "cannot attach partition %d again", i);
}

int testbed_attach(Testbed *tb, int i)
{
	TestbedPartition *p = &tb->parts[i];

	/* Direct I/O on the backing file where its filesystem allows (not on tmpfs). */
	if (losetup_show(p->image, true, p->device, sizeof(p->device)) < 0 &&
	    losetup_show(p->image, false, p->device, sizeof(p->device)) < 0)
		return -EIO;
	p->attached = true;
	return 0;
}

/*
 * A loop device still in use (a lazily detached mount not yet gone) is only
 * marked autoclear: it stays bound, and a daemon started now would find the
 * filesystem again. loopxfs_detach() waits until the kernel has let it go.
 */
static int detach_part(TestbedPartition *p, char *why, size_t why_len)
{
	int r;

	if (!p->attached)
		return 0;
	r = loopxfs_detach(p->device, p->image, why, why_len);
	if (r == 0)
		p->attached = false;
	return r;
}

int testbed_detach(Testbed *tb, int i)
{
	char why[1024];
	int r = detach_part(&tb->parts[i], why, sizeof(why));

	if (r < 0)
		cr_log_error("%s", why);
	return r;
}

static void destroy_tracked(void *tb)
{
	testbed_destroy(tb);
}

int testbed_init(Testbed *tb, int n_parts)
{
	uint32_t rnd = 0;
	const char *base = teardown_tmpdir("/tmp");

	memset(tb, 0, sizeof(*tb));
	tb->pid = -1;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)getpid();
	snprintf(tb->prefix, sizeof(tb->prefix), "nvt%05u", rnd % 100000);
	snprintf(tb->dir, sizeof(tb->dir), "%s/nvmevol-test.XXXXXX", base);
	if (!mkdtemp(tb->dir))
		return -errno;
	snprintf(tb->sock, sizeof(tb->sock), "%s/s.sock", tb->dir);
	snprintf(tb->state, sizeof(tb->state), "%s/state", tb->dir);
	snprintf(tb->prop, sizeof(tb->prop), "%s/prop", tb->dir);
	snprintf(tb->parts_root, sizeof(tb->parts_root), "%s/parts", tb->dir);
	snprintf(tb->log, sizeof(tb->log), "%s/daemon.log", tb->dir);
	/* A failed assertion in a suite's .init, or a skip, runs no .fini: live testbeds go at exit. */
	teardown_track(destroy_tracked, tb);

	for (int i = 0; i < n_parts; i++) {
		TestbedPartition *p = &tb->parts[i];
		ProbedDevice d = { 0 };
		int fd, r;

		snprintf(p->image, sizeof(p->image), "%s/part%d.img", tb->dir, i);
		snprintf(p->label, sizeof(p->label), "%s%c", tb->prefix, 'a' + i);
		fd = open(p->image, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, 320LL << 20) < 0) {
			cr_log_error("cannot create %s: %s", p->image, strerror(errno));
			return -errno;
		}
		close(fd);
		if (testbed_attach(tb, i) < 0) {
			cr_log_error("losetup of %s failed", p->image);
			return -EIO;
		}
		tb->n_parts++;
		if ((r = RUN("mkfs.xfs", "-q", "-f", "-L", p->label, p->device)) != 0) {
			cr_log_error("mkfs.xfs on %s failed: %d", p->device, r);
			return -EIO;
		}
		if ((r = probe_device(p->device, &d)) < 0 || !d.uuid) {
			cr_log_error("blkid probe of %s failed: %s", p->device, strerror(-r));
			return -EIO;
		}
		snprintf(p->uuid, sizeof(p->uuid), "%s", d.uuid);
		probed_device_done(&d);
	}
	return 0;
}

int testbed_spawn(Testbed *tb, const char *const *extra_env)
{
	char *env[64];
	char e_sock[400], e_state[400], e_prop[400], e_parts[400], e_prefix[64];
	const char *argv[] = { daemon_binary(), NULL };
	posix_spawn_file_actions_t fa;
	int n = 0, r;

	snprintf(e_sock, sizeof(e_sock), "NVMEVOL_SOCKET=%s", tb->sock);
	snprintf(e_state, sizeof(e_state), "NVMEVOL_STATE_DIR=%s", tb->state);
	snprintf(e_prop, sizeof(e_prop), "NVMEVOL_PROPAGATED_MOUNT=%s", tb->prop);
	snprintf(e_parts, sizeof(e_parts), "NVMEVOL_PARTITION_ROOT=%s", tb->parts_root);
	snprintf(e_prefix, sizeof(e_prefix), "NVMEVOL_LABEL_PREFIX=%s", tb->prefix);
	env[n++] = e_sock;
	env[n++] = e_state;
	env[n++] = e_prop;
	env[n++] = e_parts;
	env[n++] = e_prefix;
	env[n++] = (char *)"NVMEVOL_LOG_LEVEL=debug";
	env[n++] = (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	for (const char *const *e = extra_env; e && *e && n < 60; e++)
		env[n++] = (char *)*e;
	/* Sanitizer settings of the test run apply to the daemon too. */
	if (getenv("ASAN_OPTIONS")) {
		static char a[512];
		snprintf(a, sizeof(a), "ASAN_OPTIONS=%s", getenv("ASAN_OPTIONS"));
		env[n++] = a;
	}
	if (getenv("UBSAN_OPTIONS")) {
		static char u[512];
		snprintf(u, sizeof(u), "UBSAN_OPTIONS=%s", getenv("UBSAN_OPTIONS"));
		env[n++] = u;
	}
	env[n] = NULL;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, tb->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, tb->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	r = posix_spawn(&tb->pid, argv[0], &fa, NULL, (char *const *)argv, env);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0) {
		tb->pid = -1;
		return -r;
	}
	return 0;
}

int testbed_wait_ready(Testbed *tb)
{
	tb->exit_status = -1;
	/* Ready when List is answered: it waits for the state (Activate and Capabilities are answered before). */
	for (int i = 0; i < 200; i++) {
		ClientReply rep = { 0 };

		if (client_post(tb->sock, "/VolumeDriver.List", &rep, "{}") == 0 && rep.status == 200) {
			client_reply_done(&rep);
			return 0;
		}
		client_reply_done(&rep);
		if (waitpid(tb->pid, &tb->exit_status, WNOHANG) == tb->pid) {
			tb->pid = -1;
			return -ECHILD;
		}
		usleep(50 * 1000);
	}
	return -ETIMEDOUT;
}

int testbed_start(Testbed *tb, const char *const *extra_env)
{
	int r = testbed_spawn(tb, extra_env);

	return r < 0 ? r : testbed_wait_ready(tb);
}

int testbed_start_traced(Testbed *tb, const char *strace_args, const char *trace, const char *const *extra_env)
{
	char real[PATH_MAX], wrapper[600];
	char *saved = getenv("NVMEVOL_BINARY") ? strdup(getenv("NVMEVOL_BINARY")) : NULL;
	FILE *f;
	int r;

	if (!realpath(daemon_binary(), real)) {
		free(saved);
		return -errno;
	}
	snprintf(wrapper, sizeof(wrapper), "%s/traced-daemon", tb->state);
	f = fopen(wrapper, "we");
	if (!f) {
		free(saved);
		return -errno;
	}
	/* LeakSanitizer cannot run under ptrace (it aborts at exit): an ASan daemon skips only the leak check here. */
	fprintf(f, "#!/bin/sh\nASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\"; export ASAN_OPTIONS\n"
		   "exec strace -D -f -q %s -o '%s' -- '%s' \"$@\"\n", strace_args, trace, real);
	if (fclose(f) != 0 || chmod(wrapper, 0700) != 0) {
		free(saved);
		return -EIO;
	}
	setenv("NVMEVOL_BINARY", wrapper, 1);
	r = testbed_start(tb, extra_env);
	if (saved)
		setenv("NVMEVOL_BINARY", saved, 1);
	else
		unsetenv("NVMEVOL_BINARY");
	free(saved);
	return r;
}

int testbed_stop(Testbed *tb, int sig)
{
	int st = 0;

	if (tb->pid <= 0)
		return 0;
	kill(tb->pid, sig);
	while (waitpid(tb->pid, &st, 0) < 0 && errno == EINTR)
		;
	tb->pid = -1;
	return st;
}

/* Unmounts everything below the testbed directory, deepest first: 0, or -EBUSY with the first one left in @why. */
static int unmount_below(const char *dir, char *why, size_t why_len)
{
	for (int pass = 0; pass < 9; pass++) {
		char line[4096], targets[64][512];
		int n = 0;
		FILE *f = fopen("/proc/self/mountinfo", "r");

		if (!f) {
			int r = -errno;

			snprintf(why, why_len, "/proc/self/mountinfo: %s", strerror(-r));
			return r;
		}
		while (fgets(line, sizeof(line), f) && n < 64) {
			char target[512];
			if (sscanf(line, "%*d %*d %*s %*s %511s", target) == 1 && strncmp(target, dir, strlen(dir)) == 0)
				snprintf(targets[n++], sizeof(targets[0]), "%s", target);
		}
		fclose(f);
		if (n == 0)
			return 0;
		if (pass == 8) {
			snprintf(why, why_len, "%d mount(s) below %s remain, e.g. %s", n, dir, targets[0]);
			return -EBUSY;
		}
		for (int i = n - 1; i >= 0; i--)
			(void)umount2(targets[i], MNT_DETACH);
	}
	return 0;
}

void testbed_destroy(Testbed *tb)
{
	char why[2048] = "", msg[1024];
	int r;

	teardown_untrack(tb);
	if (!tb->dir[0])
		return;
	testbed_stop(tb, SIGKILL);
	if (unmount_below(tb->dir, msg, sizeof(msg)) < 0)
		teardown_note(why, sizeof(why), "%s", msg);
	for (int i = 0; i < tb->n_parts; i++)
		if (detach_part(&tb->parts[i], msg, sizeof(msg)) < 0)
			teardown_note(why, sizeof(why), "%s", msg);
	if (getenv("NVMEVOL_TEST_KEEP") == NULL && (r = RUN("rm", "-rf", tb->dir)) != 0)
		teardown_note(why, sizeof(why), "rm -rf %s exited %d", tb->dir, r);
	if (why[0])
		teardown_fail("testbed %s (labels %s*): %s", tb->dir, tb->prefix, why);
	tb->dir[0] = '\0';
}

void testbed_part_mountpoint(Testbed *tb, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", tb->parts_root, tb->parts[i].uuid);
}

void testbed_volume_dir(Testbed *tb, int i, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/nvmevol/volumes/%s", tb->parts_root, tb->parts[i].uuid, name);
}

int tb_call(Testbed *tb, const char *endpoint, ClientReply *ret, const char *fmt, ...)
{
	char path[128], *body = NULL;
	va_list ap;
	int r;

	snprintf(path, sizeof(path), "/VolumeDriver.%s", endpoint);
	va_start(ap, fmt);
	r = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -1;
	r = client_request(tb->sock, "POST", path, body, strlen(body), ret);
	free(body);
	if (r < 0)
		return -1;
	return ret->status == 200 && client_err(ret)[0] == '\0' ? 0 : -1;
}

int testbed_admin(const Testbed *tb, const char *const *args, char *out, size_t out_len, char *err, size_t err_len)
{
	char sock[sizeof(tb->dir) + 32];
	const char *argv[32];
	int n = 0;

	snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb->dir);
	argv[n++] = daemon_binary();
	for (; *args && n < 28; args++)
		argv[n++] = *args;
	argv[n++] = "--socket";
	argv[n++] = sock;
	argv[n] = NULL;
	return loopxfs_spawn_capture(argv, out, out_len, err, err_len);
}

int testbed_shell(const Testbed *tb, const char *args, const char *in, const char *outfile, char *out, size_t out_len,
		  char *err, size_t err_len)
{
	char *cmd = NULL;
	int st;

	cr_assert_geq(asprintf(&cmd, "'%s' %s --socket '%s/nvmevol-admin.sock' < '%s'%s%s%s", daemon_binary(), args,
			       tb->dir, in ? in : "/dev/null", outfile ? " > '" : "", outfile ? outfile : "",
			       outfile ? "'" : ""),
		      0);
	st = loopxfs_spawn_capture((const char *const[]){ "/bin/sh", "-c", cmd, NULL }, out, out_len, err, err_len);
	free(cmd);
	return st;
}

int testbed_count_entries(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int n = 0;

	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

bool testbed_dir_holds(const char *path, const char *prefix)
{
	struct dirent *de;
	bool found = false;
	DIR *d = opendir(path);

	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((de = readdir(d)) && !found)
		found = strncmp(de->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return found;
}

char *testbed_log_text(const Testbed *tb)
{
	FILE *f = fopen(tb->log, "r");
	char *buf = NULL;
	size_t len = 0;

	cr_assert_not_null(f, "%s: %s", tb->log, strerror(errno));
	/* getdelim reads to the end: the log has no NUL, and an empty log gives -1 with no buffer. */
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = strdup("");
	}
	fclose(f);
	cr_assert_not_null(buf);
	return buf;
}

char *mountinfo_line(const char *target)
{
	char line[4096], t[512], *found = NULL;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d %*d %*s %*s %511s", t) == 1 && strcmp(t, target) == 0) {
			free(found);
			found = strdup(line);
		}
	fclose(f);
	return found;
}

void testbed_init_or_fail(Testbed *tb, int n_parts)
{
	int r = testbed_init(tb, n_parts);

	if (r < 0) {
		testbed_destroy(tb);
		cr_assert_fail("cannot create %d loop XFS partition(s): %s", n_parts, strerror(-r));
	}
}

void testbed_start_or_fail(Testbed *tb, const char *const *extra_env)
{
	char tail[2048] = "";
	FILE *f;
	int r;

	r = testbed_start(tb, extra_env);
	if (r == 0)
		return;
	/* The log goes with the testbed: keep its end in the failure message. */
	f = fopen(tb->log, "r");
	if (f) {
		long size;
		size_t n;
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fseek(f, size > (long)sizeof(tail) - 1 ? size - (long)sizeof(tail) + 1 : 0, SEEK_SET);
		n = fread(tail, 1, sizeof(tail) - 1, f);
		tail[n] = '\0';
		fclose(f);
	}
	testbed_destroy(tb);
	cr_assert_fail("daemon did not start (%s); its log ends with:\n%s", strerror(-r), tail);
}

void testbed_setup(Testbed *tb, int n_parts, const char *const *extra_env)
{
	testbed_init_or_fail(tb, n_parts);
	testbed_start_or_fail(tb, extra_env);
}

long long testbed_write_bytes(const char *path, long long bytes, bool append, int *ret_errno)
{
	static char buf[1 << 20];
	long long done = 0;
	int fd = open(path, O_CREAT | O_WRONLY | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);

	*ret_errno = 0;
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	memset(buf, 'q', sizeof(buf));
	while (done < bytes) {
		ssize_t n = write(fd, buf, (size_t)(bytes - done < (long long)sizeof(buf) ? bytes - done : (long long)sizeof(buf)));
		if (n < 0) {
			*ret_errno = errno;
			break;
		}
		done += n;
	}
	if (*ret_errno == 0 && fsync(fd) < 0)
		*ret_errno = errno;
	close(fd);
	return done;
}

void testbed_setup_quota(Testbed *tb, const char *const *extra_env)
{
	testbed_setup_quota_parts(tb, 1, extra_env);
}

void testbed_setup_quota_parts(Testbed *tb, int n_parts, const char *const *extra_env)
{
	ClientReply rep = { 0 };
	json_t *part;
	bool quota;

	testbed_require_root();
	testbed_setup(tb, n_parts, extra_env);
	cr_assert_eq(tb_call(tb, "Create", &rep, "{\"Name\":\"probe\",\"Opts\":{\"partition\":\"%s\"}}", tb->parts[0].uuid), 0);
	cr_assert_eq(tb_call(tb, "Get", &rep, "{\"Name\":\"probe\"}"), 0);
	part = json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "partition");
	quota = json_is_true(json_object_get(part, "project_quota"));
	client_reply_done(&rep);
	if (!quota) {
		/* Criterion runs no .fini after a skip in .init: clean up here. */
		testbed_destroy(tb);
		cr_skip_test("kernel without XFS project quota (CONFIG_XFS_QUOTA); runs in the qemu guest via tests/qemu/run-quota-tests.sh");
	}
}

json_t *testbed_devices_json(const char *const *extra_env, const char *const *args)
{
	const char *argv[24] = { "env" };
	static char out[1 << 20];
	size_t n = 1;
	json_error_t jerr;
	json_t *j;

	for (const char *const *e = extra_env; e && *e; e++)
		argv[n++] = *e;
	argv[n++] = daemon_binary();
	argv[n++] = "devices";
	for (const char *const *a = args; a && *a; a++)
		argv[n++] = *a;
	argv[n++] = "--json";
	argv[n] = NULL;
	cr_assert_lt(n, sizeof(argv) / sizeof(argv[0]), "too many arguments");
	cr_assert_eq(loopxfs_spawn(argv, out, sizeof(out)), 0, "nvmevol devices failed");
	j = json_loads(out, 0, &jerr);
	cr_assert(json_is_array(j), "not a JSON array: %s: %.400s", jerr.text, out);
	return j;
}

json_t *testbed_devices_entry(json_t *arr, const char *device)
{
	size_t i;
	json_t *e;

	json_array_foreach(arr, i, e)
		if (strcmp(json_string_value(json_object_get(e, "device")), device) == 0)
			return e;
	cr_assert_fail("%s is not listed by nvmevol devices", device);
	return NULL;
}

bool testbed_devices_has_reason(json_t *entry, const char *code, const char *setting)
{
	size_t i;
	json_t *r;

	json_array_foreach(json_object_get(json_object_get(entry, "policy"), "reasons"), i, r)
		if (strcmp(json_string_value(json_object_get(r, "code")), code) == 0 &&
		    (!setting || strcmp(json_string_value(json_object_get(r, "setting")), setting) == 0))
			return true;
	return false;
}
