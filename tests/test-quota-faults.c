/* SPDX-License-Identifier: MIT */
/*
 * Limits under failure (issue 24): every call that Create with size=/inodes=,
 * `volume resize` (grow, shrink, an unlimited volume getting its first limit),
 * Remove of a limited volume and start-up's limit repair make to the file
 * system and the quota system is, in turn, failed with EIO and killed with
 * SIGKILL (strace -e inject=SYSCALL:error=EIO|signal=KILL:when=N). After each
 * point, right away (EIO: the daemon lives on) and after a restart:
 *   - an Err changed nothing: the old limit holds (record and kernel agree);
 *     a success took effect; a killed operation is one or the other;
 *   - a volume is whole (record, directory, index entry; its directory
 *     carries the record's project ID with PROJINHERIT; the kernel's hard
 *     limits of that ID are the record's, and a write past the size fails
 *     with EDQUOT/ENOSPC; an unlimited volume is limited by nothing) or gone
 *     (no record, directory or index entry; after an Err, no limit left on
 *     the ID the failed create had set);
 *   - nothing is left behind: no temp file, nothing in quarantine/, nothing
 *     in volumes/ or meta/ but whole volumes, an empty trash once the worker
 *     is done;
 *   - the daemon only dies of the injected SIGKILL, and a SIGTERM stops it
 *     with status 0.
 * Needs XFS project quota: runs in the qemu guest (tests/qemu/run-quota-tests.sh)
 * and skips with that reason elsewhere.
 *
 * CI samples the points to fit about a minute of guest time;
 * NVMEVOL_QUOTA_FAULTS=full runs every occurrence of every syscall;
 * NVMEVOL_QUOTA_FAULTS_OPS=remove,repair (names of op_names) runs only those
 * operations, so that a full run can be split over several guests.
 * NVMEVOL_QUOTA_FAULTS_SABOTAGE=1 clears the volume's limit behind the
 * daemon's back before each check: every such check must then be reported
 * (the test passes only if none was missed). The suite's last test always
 * runs a short sabotage of each kind of invariant.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"
#include "pool/quota.h"
#include "util/macro.h"
#include "volume/volume.h"

DEFINE_CLEANUP_FUNC(Volume *, volume_unref)

#define LIM "qflim"  /* the limited volume */
#define FREE "qffree" /* the volume created without limits, for the first resize */
#define MIB (1ULL << 20)
#define INODES 64
#define SYSCALLS_ALL "openat,write,fsync,fdatasync,renameat,renameat2,mkdirat,unlinkat,fchown,fchmod,ioctl,quotactl_fd,quotactl"
/* CI: the calls that carry the limits and the commit points; the rest of the file calls only in full mode. */
#define SYSCALLS_CI "mkdirat,renameat,renameat2,fsync,ioctl,quotactl_fd,quotactl"
#define MAX_SC 16
/* CI: points per operation, spread over its calls (about a minute of guest time in all). */
#define CI_POINTS_PER_OP 8

extern char **environ;

static Testbed tb;
static ClientReply rep;
static char out[64 * 1024], err[8192], real_binary[PATH_MAX], wrapper[400];
static const char *const env_off[] = { "NVMEVOL_SELFTEST=off", NULL };
static const char *const deleted_names[] = { LIM, FREE };

typedef enum Op { OP_CREATE, OP_GROW, OP_SHRINK, OP_FIRST_LIMIT, OP_REMOVE, OP_REPAIR, OP_MAX } Op;
static const char *const op_names[] = { "create", "grow", "shrink", "first-limit", "remove", "repair" };

typedef enum Outcome { OUT_OK, OUT_ERR, OUT_KILLED } Outcome;

/* What a volume may be after a point: absent, or present with exactly these limits (0 bytes 0 inodes: none). */
typedef struct Want {
	bool absent_ok;
	int n_limits;
	struct {
		uint64_t bytes, inodes;
	} limits[2];
} Want;

typedef struct Stats {
	unsigned points, reached, violations, sabotaged, sabotage_reported;
} Stats;

static Stats st;
static bool sabotage;
static bool worker_faulted; /* the point in progress failed a call after Remove answered (the trash worker's) */

/* A start that waits for strace: the shell stops itself, then execs the daemon (same PID, traced from its first call). */
static void write_wrapper(void)
{
	FILE *f;

	snprintf(wrapper, sizeof(wrapper), "%s/stopped-start.sh", tb.dir);
	f = fopen(wrapper, "we");
	cr_assert_not_null(f);
	fprintf(f, "#!/bin/sh\nkill -STOP $$\nexec '%s' \"$@\"\n", real_binary);
	fclose(f);
	cr_assert_eq(chmod(wrapper, 0755), 0);
}

static void setup(void)
{
	const char *b = getenv("NVMEVOL_BINARY");

	testbed_setup_quota(&tb, env_off);
	/* An absolute path: the wrapper script execs it from wherever. */
	cr_assert_not_null(realpath(b ? b : "build/src/nvmevol", real_binary), "no daemon binary");
	write_wrapper();
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"probe\"}"), 0);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(quota_faults, .init = setup, .fini = teardown, .timeout = 3600);

/* ---- the world as it is on disk and in the kernel ---- */

static void violation(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static unsigned reported; /* violations of the check in progress */

static void violation(const char *label, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reported++;
	st.violations++;
	if (st.violations <= 40)
		fprintf(stderr, "quota-faults: VIOLATION %s: %s\n", label, msg);
}

static void sub_path(const char *sub, const char *name, char *buf, size_t len)
{
	char mp[400];

	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(buf, len, "%s/nvmevol/%s%s%s", mp, sub, name ? "/" : "", name ? name : "");
}

static int open_root(void)
{
	char mp[400];
	int fd;

	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	fd = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s: %s", mp, strerror(errno));
	return fd;
}

/* The record of @name on the partition (the caller's), or NULL if there is none; a bad record is a violation. */
static Volume *read_record(const char *label, const char *name)
{
	char p[600], fn[200], *buf = NULL;
	size_t len = 0;
	Volume *v = NULL;
	char *perr = NULL;
	FILE *f;

	snprintf(fn, sizeof(fn), "%s.json", name);
	sub_path("meta", fn, p, sizeof(p));
	f = fopen(p, "re");
	if (!f) {
		if (errno != ENOENT)
			violation(label, "cannot read the record %s: %s", p, strerror(errno));
		return NULL;
	}
	if (getdelim(&buf, &len, '\0', f) < 0 || volume_record_parse(buf, strlen(buf), &v, &perr) < 0) {
		violation(label, "record of %s unreadable: %s", name, perr ? perr : "empty");
		v = NULL;
	}
	free(perr);
	free(buf);
	fclose(f);
	return v;
}

static bool path_exists(const char *p)
{
	struct stat s;

	return lstat(p, &s) == 0;
}

/* Writes past @bytes into a new file in @dir: EDQUOT/ENOSPC at most @bytes in, or the byte count if it went through. */
static bool write_past_is_refused(const char *dir, uint64_t bytes, long long *ret_written, int *ret_errno)
{
	char p[700];

	snprintf(p, sizeof(p), "%s/.quota-faults-probe", dir);
	*ret_written = testbed_write_bytes(p, (long long)(bytes + MIB), false, ret_errno);
	(void)unlink(p);
	return (*ret_errno == EDQUOT || *ret_errno == ENOSPC) && *ret_written <= (long long)bytes;
}

static bool limits_allowed(const Want *w, uint64_t bytes, uint64_t inodes)
{
	for (int i = 0; i < w->n_limits; i++)
		if (w->limits[i].bytes == bytes && w->limits[i].inodes == inodes)
			return true;
	return false;
}

/*
 * Checks volume @name against @w: whole with allowed limits that the kernel
 * enforces, or (if allowed) gone. @live: the daemon runs (Get must agree).
 * @cleared_after_err: the ID of a create that failed, whose limit must be gone (0: none).
 */
static void check_volume(const char *label, const char *name, const Want *w, bool live, uint32_t cleared_after_err)
{
	_cleanup_(volume_unrefp) Volume *v = read_record(label, name);
	char dir[600], idx[600], fn[200];
	bool has_dir, has_idx;
	int rootfd = open_root();

	sub_path("volumes", name, dir, sizeof(dir));
	snprintf(fn, sizeof(fn), "%s/index/%s.json", tb.state, name);
	snprintf(idx, sizeof(idx), "%s", fn);
	has_dir = path_exists(dir);
	has_idx = path_exists(idx);
	if (live) {
		bool got = tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name) == 0;
		if (got != (v != NULL))
			violation(label, "%s: Get %s but the record is %s", name, got ? "answers" : "fails", v ? "there" : "gone");
	}
	if (!v) {
		if (!w->absent_ok)
			violation(label, "%s is gone", name);
		if (has_dir || has_idx)
			violation(label, "%s half-gone: no record but%s%s", name, has_dir ? " its directory" : "",
				  has_idx ? " its index entry" : "");
		if (cleared_after_err) {
			QuotaUsage u = { 0 };
			if (quota_get(rootfd, cleared_after_err, &u) == 0 && (u.bytes_hard || u.inodes_hard))
				violation(label, "%s: the failed create left the limit of project %u set (%llu bytes %llu inodes)",
					  name, cleared_after_err, (unsigned long long)u.bytes_hard,
					  (unsigned long long)u.inodes_hard);
		}
		close(rootfd);
		return;
	}
	if (!has_dir || !has_idx)
		violation(label, "%s half-there: a record but no %s", name, !has_dir ? "directory" : "index entry");
	if (!limits_allowed(w, v->opts->size_bytes, v->opts->inodes))
		violation(label, "%s: the record's limit is %llu bytes %llu inodes, not what the outcome allows", name,
			  (unsigned long long)v->opts->size_bytes, (unsigned long long)v->opts->inodes);
	if (has_dir) {
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		uint32_t id = 0;
		bool inherit = false;
		QuotaUsage u = { 0 };

		cr_assert_geq(dfd, 0);
		cr_assert_eq(quota_get_project(dfd, &id, &inherit), 0);
		close(dfd);
		if ((v->opts->size_bytes || v->opts->inodes) && (id != v->projid || !inherit || !v->projid))
			violation(label, "%s: its directory carries project %u%s, its record %u", name, id,
				  inherit ? "" : " without PROJINHERIT", v->projid);
		if (v->projid && quota_get(rootfd, v->projid, &u) < 0)
			violation(label, "%s: Q_XGETQUOTA of project %u failed", name, v->projid);
		else if (u.bytes_hard != v->opts->size_bytes || u.inodes_hard != v->opts->inodes)
			violation(label, "%s: the kernel's limit of project %u is %llu bytes %llu inodes, the record's %llu bytes "
				  "%llu inodes", name, v->projid, (unsigned long long)u.bytes_hard,
				  (unsigned long long)u.inodes_hard, (unsigned long long)v->opts->size_bytes,
				  (unsigned long long)v->opts->inodes);
		if (v->opts->size_bytes) {
			long long n;
			int e;
			if (!write_past_is_refused(dir, v->opts->size_bytes, &n, &e))
				violation(label, "%s: a write past its %llu bytes got %lld bytes in and '%s'", name,
					  (unsigned long long)v->opts->size_bytes, n, e ? strerror(e) : "no error");
		} else {
			/* Limited by nothing: more than any limit this test sets must fit. */
			long long n;
			int e;
			if (write_past_is_refused(dir, 4 * MIB, &n, &e) || e != 0)
				violation(label, "%s has no limit but a %llu-byte write stopped after %lld bytes: %s", name,
					  5 * MIB, n, strerror(e));
		}
	}
	close(rootfd);
}

static bool dir_is_empty(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *de;
	bool empty = true;

	if (!d)
		return true;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

/* Waits for the trash worker (up to 10 s); whether the trash is empty. */
static bool trash_drains(void)
{
	char p[600];

	sub_path("trash", NULL, p, sizeof(p));
	for (int i = 0; i < 200; i++) {
		if (dir_is_empty(p))
			return true;
		usleep(50 * 1000);
	}
	return false;
}

/* Temp files, quarantined directories, a full trash, and entries of volumes/ and meta/ that are no whole volume. */
static void check_leftovers(const char *label, bool live)
{
	static const char *const subs[] = { "volumes", "meta", "quarantine" };
	char p[600], q[700];

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		DIR *d;
		struct dirent *de;

		sub_path(subs[i], NULL, p, sizeof(p));
		d = opendir(p);
		if (!d) {
			violation(label, "cannot list %s: %s", p, strerror(errno));
			continue;
		}
		while ((de = readdir(d))) {
			bool ours = false;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			for (size_t k = 0; k < 2; k++) {
				char rec[200];
				snprintf(rec, sizeof(rec), "%s.json", deleted_names[k]);
				if (!strcmp(de->d_name, deleted_names[k]) || !strcmp(de->d_name, rec))
					ours = true;
			}
			if (strstr(de->d_name, ".tmp") || i == 2 || !ours)
				violation(label, "left behind: nvmevol/%s/%s", subs[i], de->d_name);
		}
		closedir(d);
	}
	snprintf(q, sizeof(q), "%s/index", tb.state);
	{
		DIR *d = opendir(q);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (strstr(de->d_name, ".tmp"))
				violation(label, "left behind: state/index/%s", de->d_name);
		if (d)
			closedir(d);
	}
	/*
	 * The worker runs only while the daemon does; a deletion it failed stays
	 * in the trash for the next start (trash.h), so right after a point that
	 * failed a call of the worker the trash may stay full: the check after
	 * the restart is the strict one.
	 */
	if (live && !trash_drains()) {
		if (worker_faulted)
			fprintf(stderr, "quota-faults: %s: the trash stays full until the restart (the worker's call failed)\n",
				label);
		else
			violation(label, "the trash was not emptied");
	}
}

/* ---- the daemon, through strace ---- */

static int nv(const char *const *args)
{
	return testbed_admin(&tb, args, out, sizeof(out), err, sizeof(err));
}
#define NV(...) nv((const char *const[]){ __VA_ARGS__, NULL })

/* strace -f attached to @pid (all threads); returns strace's pid once it says so. */
static pid_t strace_attach(pid_t pid, const char *trace, const char *inject, const char *log)
{
	char p[32], t[256], inj[256], errlog[600];
	const char *argv[16];
	posix_spawn_file_actions_t fa;
	pid_t spid;
	int n = 0;

	snprintf(p, sizeof(p), "%d", pid);
	snprintf(t, sizeof(t), "trace=%s", trace);
	snprintf(errlog, sizeof(errlog), "%s.err", log);
	argv[n++] = "strace";
	argv[n++] = "-f";
	argv[n++] = "-o";
	argv[n++] = log;
	argv[n++] = "-e";
	argv[n++] = t;
	if (inject) {
		snprintf(inj, sizeof(inj), "inject=%s", inject);
		argv[n++] = "-e";
		argv[n++] = inj;
	}
	argv[n++] = "-p";
	argv[n++] = p;
	argv[n] = NULL;
	(void)unlink(errlog);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	cr_assert_eq(posix_spawnp(&spid, "strace", &fa, NULL, (char *const *)argv, environ), 0, "cannot run strace");
	posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 1000; i++) {
		char buf[4096] = "";
		FILE *f = fopen(errlog, "re");
		if (f) {
			size_t k = fread(buf, 1, sizeof(buf) - 1, f);
			buf[k] = '\0';
			fclose(f);
		}
		if (strstr(buf, "attached"))
			return spid;
		if (waitpid(spid, NULL, WNOHANG) == spid)
			cr_assert_fail("strace did not attach: %s", buf);
		usleep(10 * 1000);
	}
	cr_assert_fail("strace did not attach within 10 s");
	return -1;
}

static void strace_detach(pid_t spid)
{
	kill(spid, SIGINT);
	while (waitpid(spid, NULL, 0) < 0 && errno == EINTR)
		;
}

typedef struct Count {
	char name[32];
	unsigned n; /* the most calls of it one thread made */
} Count;

/* Per syscall, the highest per-thread number of calls in a `strace -f -o` log (injections count per thread). */
static int count_calls(const char *log, Count *c, int max)
{
	char line[8192];
	struct {
		int pid;
		char name[32];
		unsigned n;
	} per[512];
	int n_per = 0, n = 0;
	FILE *f = fopen(log, "re");

	cr_assert_not_null(f, "%s: %s", log, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char name[32];
		int pid, i;

		if (sscanf(line, "%d %31[a-z0-9_](", &pid, name) != 2 || !strchr(line, '('))
			continue;
		for (i = 0; i < n_per; i++)
			if (per[i].pid == pid && !strcmp(per[i].name, name))
				break;
		if (i == n_per) {
			if (n_per == 512)
				continue;
			per[n_per].pid = pid;
			snprintf(per[n_per].name, sizeof(per[0].name), "%s", name);
			per[n_per++].n = 0;
		}
		per[i].n++;
	}
	fclose(f);
	for (int i = 0; i < n_per; i++) {
		int k;
		for (k = 0; k < n; k++)
			if (!strcmp(c[k].name, per[i].name))
				break;
		if (k == n) {
			if (n == max)
				continue;
			snprintf(c[n].name, sizeof(c[0].name), "%s", per[i].name);
			c[n++].n = 0;
		}
		if (per[i].n > c[k].n)
			c[k].n = per[i].n;
	}
	return n;
}

static bool log_has(const char *log, const char *what)
{
	char line[8192];
	bool found = false;
	FILE *f = fopen(log, "re");

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, what) != NULL;
	if (f)
		fclose(f);
	return found;
}

static void restart_clean(const char *label)
{
	int s = testbed_stop(&tb, SIGTERM);

	if (!WIFEXITED(s) || WEXITSTATUS(s) != 0)
		violation(label, "SIGTERM stopped the daemon with wait status 0x%x", s);
	cr_assert_eq(testbed_start(&tb, env_off), 0, "the daemon did not start again after %s", label);
}

/* testbed_spawn() through the wrapper; returns once the shell has stopped itself. */
static void spawn_stopped(void)
{
	const char *b = getenv("NVMEVOL_BINARY");
	char *saved = b ? strdup(b) : NULL, p[64], buf[512];

	setenv("NVMEVOL_BINARY", wrapper, 1);
	cr_assert_eq(testbed_spawn(&tb, env_off), 0);
	if (saved)
		setenv("NVMEVOL_BINARY", saved, 1);
	else
		unsetenv("NVMEVOL_BINARY");
	free(saved);
	snprintf(p, sizeof(p), "/proc/%d/stat", tb.pid);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(p, "re");
		char *e;
		size_t k = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[k] = '\0';
		e = strrchr(buf, ')');
		if (e && e[1] == ' ' && e[2] == 'T')
			return;
		usleep(10 * 1000);
	}
	cr_assert_fail("the start shell did not stop");
}

/* ---- operations ---- */

static bool exists(const char *name)
{
	return tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name) == 0;
}

static void remove_volume(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	cr_assert(trash_drains(), "the trash was not emptied");
}

static void create_limited(uint64_t bytes)
{
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"" LIM "\",\"Opts\":{\"size\":\"%llu\",\"inodes\":\"%d\"}}",
			     (unsigned long long)bytes, INODES), 0, "%s", client_err(&rep));
}

/* LIM with @bytes (and INODES) as the record says. */
static void ensure_limited(uint64_t bytes)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	char size[32];

	if (!exists(LIM)) {
		create_limited(bytes);
		return;
	}
	v = read_record("precondition", LIM);
	cr_assert_not_null(v);
	if (v->opts->size_bytes == bytes && v->opts->inodes == INODES)
		return;
	snprintf(size, sizeof(size), "%llu", (unsigned long long)bytes);
	cr_assert_eq(NV("volume", "resize", LIM, size, "--inodes", "64"), 0, "%s", err);
}

/*
 * FREE as made without limits, with files in it: a new one each time (the old
 * one's ID is free again, maybe with the old limit still on it in the kernel).
 */
static void make_free_volume(void)
{
	char dir[600], p[700];
	int e;

	if (exists(FREE))
		remove_volume(FREE);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"" FREE "\"}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, FREE, dir, sizeof(dir));
	snprintf(p, sizeof(p), "%s/sub", dir);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/sub/file", dir);
	testbed_write_bytes(p, (long long)(MIB / 2), false, &e);
	cr_assert_eq(e, 0);
}

/* The ID a create takes when nothing carries one (the create points start so). */
static uint32_t create_id_now(void)
{
	return QUOTA_PROJID_MIN;
}

static void precondition(Op op)
{
	if (exists(FREE) && op != OP_FIRST_LIMIT)
		remove_volume(FREE);
	switch (op) {
	case OP_CREATE: {
		int rootfd;

		if (exists(LIM))
			remove_volume(LIM);
		/*
		 * Nothing carries an ID now. A killed create leaves its limit on the
		 * free ID (harmless: every new user of an ID sets both limits), so
		 * clear it: after this create's Err, a limit there is this create's.
		 */
		rootfd = open_root();
		cr_assert_eq(quota_set_limit(rootfd, create_id_now(), 0, 0), 0);
		close(rootfd);
		break;
	}
	case OP_GROW:
	case OP_REMOVE:
	case OP_REPAIR:
		ensure_limited(2 * MIB);
		break;
	case OP_SHRINK:
		ensure_limited(4 * MIB);
		break;
	case OP_FIRST_LIMIT:
		if (exists(LIM))
			remove_volume(LIM);
		make_free_volume();
		break;
	default:
		break;
	}
}

/* The repair's precondition: the daemon stopped, the kernel limit gone (and, on odd points, the directory's ID). */
static void break_limit(unsigned point)
{
	_cleanup_(volume_unrefp) Volume *v = read_record("precondition", LIM);
	int rootfd, s;

	cr_assert_not_null(v);
	s = testbed_stop(&tb, SIGTERM);
	cr_assert(WIFEXITED(s) && WEXITSTATUS(s) == 0, "the daemon did not stop cleanly: 0x%x", s);
	rootfd = open_root();
	cr_assert_eq(quota_set_limit(rootfd, v->projid, 0, 0), 0);
	close(rootfd);
	if (point % 2) {
		char dir[600];
		int dfd;

		testbed_volume_dir(&tb, 0, LIM, dir, sizeof(dir));
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cr_assert_geq(dfd, 0);
		cr_assert_eq(quota_set_project(dfd, 0), 0);
		close(dfd);
	}
}

/* Sends the request of @op; OUT_OK or OUT_ERR (no answer at all counts as an Err: the caller reads the exit). */
static Outcome request(Op op)
{
	switch (op) {
	case OP_CREATE:
		return tb_call(&tb, "Create", &rep, "{\"Name\":\"" LIM "\",\"Opts\":{\"size\":\"2M\",\"inodes\":\"64\"}}") == 0
			       ? OUT_OK : OUT_ERR;
	case OP_GROW:
		return NV("volume", "resize", LIM, "4M") == 0 ? OUT_OK : OUT_ERR;
	case OP_SHRINK:
		return NV("volume", "resize", LIM, "2M") == 0 ? OUT_OK : OUT_ERR;
	case OP_FIRST_LIMIT:
		return NV("volume", "resize", FREE, "2M") == 0 ? OUT_OK : OUT_ERR;
	case OP_REMOVE:
		return tb_call(&tb, "Remove", &rep, "{\"Name\":\"" LIM "\"}") == 0 ? OUT_OK : OUT_ERR;
	default:
		return OUT_ERR;
	}
}

/* What the volume under @op may be after @o. */
static Want want_of(Op op, Outcome o)
{
	Want w = { 0 };
	uint64_t before = 0, after = 0, in_before = INODES, in_after = INODES;
	bool gone_before = false, gone_after = false;

	switch (op) {
	case OP_CREATE:
		gone_before = true, after = 2 * MIB;
		break;
	case OP_GROW:
		before = 2 * MIB, after = 4 * MIB;
		break;
	case OP_SHRINK:
		before = 4 * MIB, after = 2 * MIB;
		break;
	case OP_FIRST_LIMIT:
		before = 0, in_before = 0, after = 2 * MIB, in_after = 0;
		break;
	case OP_REMOVE:
		before = 2 * MIB, gone_after = true;
		break;
	case OP_REPAIR:
		before = after = 2 * MIB;
		break;
	default:
		break;
	}
	if (o != OUT_OK) { /* the old state */
		w.absent_ok = gone_before;
		if (!gone_before)
			w.limits[w.n_limits].bytes = before, w.limits[w.n_limits++].inodes = in_before;
	}
	if (o != OUT_ERR) { /* the new state */
		w.absent_ok = w.absent_ok || gone_after;
		if (!gone_after)
			w.limits[w.n_limits].bytes = after, w.limits[w.n_limits++].inodes = in_after;
	}
	return w;
}

/* Clears the limit of the volume under check behind the daemon's back (sabotage mode); whether it did. */
static bool sabotage_limit(const char *name)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	int rootfd;
	unsigned before = reported;

	if (!sabotage)
		return false;
	v = read_record("sabotage", name);
	reported = before;
	if (!v || !v->projid || !(v->opts->size_bytes || v->opts->inodes))
		return false;
	rootfd = open_root();
	cr_assert_eq(quota_set_limit(rootfd, v->projid, 0, 0), 0);
	close(rootfd);
	return true;
}

static void check_all(const char *label, Op op, Outcome o, bool live, uint32_t cleared_after_err)
{
	Want w = want_of(op, o), none = { .absent_ok = true };
	const char *name = op == OP_FIRST_LIMIT ? FREE : LIM;
	bool sab = sabotage_limit(name);

	reported = 0;
	check_volume(label, name, &w, live, cleared_after_err);
	if (op == OP_FIRST_LIMIT)
		check_volume(label, LIM, &none, live, 0);
	else
		check_volume(label, FREE, &none, live, 0);
	check_leftovers(label, live);
	if (sab) {
		st.sabotaged++;
		if (reported)
			st.sabotage_reported++;
		/* Expected findings: not counted as violations of the daemon. */
		st.violations -= reported;
		if (live) {
			/* Put the limit back through a restart (start-up's repair), so the next point starts whole. */
			restart_clean(label);
		}
	}
}

/* ---- points ---- */

static const char *trace_set(bool full)
{
	return full ? SYSCALLS_ALL : SYSCALLS_CI;
}

/* One traced run of @op (or of a start, for the repair) without injection: the calls to fail. */
static int count_op(Op op, bool full, Count *c)
{
	char log[400];
	pid_t spid;

	snprintf(log, sizeof(log), "%s/count.trace", tb.dir);
	precondition(op);
	if (op == OP_REPAIR) {
		break_limit(0);
		spawn_stopped();
		spid = strace_attach(tb.pid, trace_set(full), NULL, log);
		kill(tb.pid, SIGCONT);
		cr_assert_eq(testbed_wait_ready(&tb), 0, "the traced start failed");
	} else {
		spid = strace_attach(tb.pid, trace_set(full), NULL, log);
		cr_assert_eq(request(op), OUT_OK, "%s failed without a fault: %s %s", op_names[op], client_err(&rep), err);
	}
	usleep(200 * 1000);
	strace_detach(spid);
	return count_calls(log, c, MAX_SC);
}

static void run_point(Op op, const char *sc, unsigned n, bool kill_it, unsigned point_no)
{
	char label[160], log[400], spec[128];
	Outcome o;
	pid_t spid;
	int s = 0;
	bool died = false, served = true;

	snprintf(label, sizeof(label), "%s/%s#%u/%s", op_names[op], sc, n, kill_it ? "KILL" : "EIO");
	snprintf(log, sizeof(log), "%s/point.trace", tb.dir);
	snprintf(spec, sizeof(spec), "%s:%s:when=%u", sc, kill_it ? "signal=KILL" : "error=EIO", n);
	precondition(op);
	st.points++;

	if (op == OP_REPAIR) {
		break_limit(point_no);
		spawn_stopped();
		spid = strace_attach(tb.pid, sc, spec, log);
		kill(tb.pid, SIGCONT);
		served = testbed_wait_ready(&tb) == 0;
		strace_detach(spid);
		o = OUT_OK;
		if (!served) {
			s = tb.exit_status;
			died = true;
		}
	} else {
		spid = strace_attach(tb.pid, sc, spec, log);
		o = request(op);
		if (kill_it) {
			/* Answered: only a background thread (the trash worker) can still reach the point. */
			int tries = rep.status == 200 || o == OUT_OK ? 40 : 100;
			for (int i = 0; i < tries && !died; i++) {
				if (waitpid(tb.pid, &s, WNOHANG) == tb.pid)
					died = true;
				else
					usleep(50 * 1000);
			}
		}
		strace_detach(spid);
		if (!died && waitpid(tb.pid, &s, WNOHANG) == tb.pid)
			died = true;
	}
	if (died) {
		tb.pid = -1;
		if (kill_it && WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL)
			st.reached++;
		else if (WIFSIGNALED(s))
			violation(label, "the daemon died of signal %d", WTERMSIG(s));
		else if (op != OP_REPAIR)
			violation(label, "the daemon exited with status %d during the request", WEXITSTATUS(s));
		else
			st.reached++; /* start-up refused: allowed, the clean start below must repair */
		cr_assert_eq(testbed_start(&tb, env_off), 0, "the daemon did not start after %s", label);
		check_all(label, op, OUT_KILLED, true, 0);
		return;
	}
	if (kill_it) {
		/* This run made fewer calls than the count: nothing was injected. Reset to a known state. */
		restart_clean(label);
		return;
	}
	if (log_has(log, "(INJECTED)"))
		st.reached++;
	worker_faulted = op == OP_REMOVE && o == OUT_OK && log_has(log, "(INJECTED)");
	if (op == OP_REPAIR) {
		/* A repair that failed at start is retried at the first mount: a container never gets it unlimited. */
		if (tb_call(&tb, "Mount", &rep, "{\"Name\":\"" LIM "\",\"ID\":\"qfcheck\"}") < 0) {
			/* The documented degraded mode: a partition that failed to attach serves nothing until a restart. */
			if (!strstr(client_err(&rep), "is not available"))
				violation(label, "the first Mount after the start failed: %s", client_err(&rep));
			else
				fprintf(stderr, "quota-faults: %s: partition not attached (degraded, not served)\n", label);
		} else {
			check_all(label, op, o, true, 0);
			if (tb_call(&tb, "Unmount", &rep, "{\"Name\":\"" LIM "\",\"ID\":\"qfcheck\"}") < 0)
				violation(label, "Unmount failed: %s", client_err(&rep));
		}
	} else
		check_all(label, op, o, true, op == OP_CREATE && o == OUT_ERR ? create_id_now() : 0);
	restart_clean(label);
	worker_faulted = false;
	check_all(label, op, o, true, 0);
}

/* NVMEVOL_QUOTA_FAULTS_OPS=create,grow,...: only these operations (a full run in parts); unset: all. */
static bool op_selected(Op op)
{
	const char *ops = getenv("NVMEVOL_QUOTA_FAULTS_OPS");
	size_t n = strlen(op_names[op]);

	if (!ops || !*ops)
		return true;
	for (const char *p = ops; (p = strstr(p, op_names[op])); p += n)
		if ((p == ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

typedef struct Point {
	const char *sc;
	unsigned n;
	bool kill;
} Point;

Test(quota_faults, limits_hold_at_every_fault_point)
{
	const char *mode = getenv("NVMEVOL_QUOTA_FAULTS");
	bool full = mode && !strcmp(mode, "full");
	time_t t0 = time(NULL);
	unsigned point_no = 0;

	sabotage = getenv("NVMEVOL_QUOTA_FAULTS_SABOTAGE") != NULL;
	for (Op op = 0; op < OP_MAX; op++) {
		Count c[MAX_SC];

		if (!op_selected(op))
			continue;
		int nc = count_op(op, full, c);
		char line[512] = "";
		Point *pts = NULL;
		size_t n_pts = 0, step;

		for (int i = 0; i < nc; i++) {
			snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s=%u", c[i].name, c[i].n);
			pts = realloc(pts, (n_pts + 2 * c[i].n) * sizeof(*pts));
			cr_assert_not_null(pts);
			for (unsigned n = 1; n <= c[i].n; n++) {
				pts[n_pts++] = (Point){ c[i].name, n, false };
				pts[n_pts++] = (Point){ c[i].name, n, true };
			}
		}
		fprintf(stderr, "quota-faults: %s:%s (%zu points)\n", op_names[op], line, n_pts);
		/* CI: an even spread; an odd step alternates EIO and KILL. */
		step = full || n_pts <= CI_POINTS_PER_OP ? 1 : (n_pts + CI_POINTS_PER_OP - 1) / CI_POINTS_PER_OP;
		if (step > 1 && step % 2 == 0)
			step++;
		for (size_t i = (step - 1) / 2; i < n_pts; i += step)
			run_point(op, pts[i].sc, pts[i].n, pts[i].kill, ++point_no);
		free(pts);
	}
	fprintf(stderr, "quota-faults: points=%u reached=%u violations=%u seconds=%ld mode=%s%s\n", st.points, st.reached,
		st.violations, (long)(time(NULL) - t0), full ? "full" : "ci", sabotage ? " sabotage" : "");
	if (sabotage) {
		fprintf(stderr, "quota-faults: sabotaged=%u reported=%u\n", st.sabotaged, st.sabotage_reported);
		cr_assert_gt(st.sabotaged, 0, "no check was sabotaged");
		cr_assert_eq(st.sabotage_reported, st.sabotaged, "%u sabotaged checks were not reported",
			     st.sabotaged - st.sabotage_reported);
	}
	cr_assert_gt(st.reached, st.points / 2, "only %u of %u points were reached", st.reached, st.points);
	cr_assert_eq(st.violations, 0, "%u violations (see above)", st.violations);
}

/* The checker can fail: each kind of breakage, made by hand after a good operation, is reported. */
Test(quota_faults, checker_reports_each_sabotage)
{
	Want lim = want_of(OP_CREATE, OUT_OK), gone = { .absent_ok = true };
	_cleanup_(volume_unrefp) Volume *v = NULL;
	int rootfd, fd, dfd;
	char p[600];
	unsigned before;

	create_limited(2 * MIB);
	reported = 0;
	check_volume("clean", LIM, &lim, true, 0);
	check_leftovers("clean", true);
	cr_assert_eq(reported, 0, "a good create was reported");
	v = read_record("sabotage", LIM);
	cr_assert_not_null(v);
	rootfd = open_root();

	/* The kernel's limit cleared behind the daemon's back. */
	cr_assert_eq(quota_set_limit(rootfd, v->projid, 0, 0), 0);
	check_volume("sabotage/no-limit", LIM, &lim, true, 0);
	cr_assert_gt(reported, 0, "a cleared limit was not reported");
	/* A limit other than the record's. */
	reported = 0;
	cr_assert_eq(quota_set_limit(rootfd, v->projid, 3 * MIB, INODES), 0);
	check_volume("sabotage/other-limit", LIM, &lim, true, 0);
	cr_assert_gt(reported, 0, "a limit other than the record's was not reported");
	cr_assert_eq(quota_set_limit(rootfd, v->projid, 2 * MIB, INODES), 0);
	/* The directory out of its project. */
	reported = 0;
	testbed_volume_dir(&tb, 0, LIM, p, sizeof(p));
	dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(quota_set_project(dfd, 0), 0);
	check_volume("sabotage/no-project", LIM, &lim, true, 0);
	cr_assert_gt(reported, 0, "a directory without the project was not reported");
	cr_assert_eq(quota_set_project(dfd, v->projid), 0);
	close(dfd);
	/* A volume that must be gone, and a failed create's limit left set. */
	reported = 0;
	check_volume("sabotage/not-gone", LIM, &(Want){ .absent_ok = true, .n_limits = 0 }, true, 0);
	cr_assert_gt(reported, 0, "a volume with a disallowed limit was not reported");
	reported = 0;
	remove_volume(LIM);
	cr_assert_eq(quota_set_limit(rootfd, QUOTA_PROJID_MIN + 7, MIB, 0), 0);
	check_volume("sabotage/stale-limit", LIM, &gone, true, QUOTA_PROJID_MIN + 7);
	cr_assert_gt(reported, 0, "a limit left by a failed create was not reported");
	cr_assert_eq(quota_set_limit(rootfd, QUOTA_PROJID_MIN + 7, 0, 0), 0);
	/* A temp file in meta/, a stray directory in volumes/, a trash entry that stays. */
	before = reported = 0;
	sub_path("meta", ".x.json.tmp.1234", p, sizeof(p));
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	check_leftovers("sabotage/tmp", false);
	cr_assert_gt(reported, before, "a temp file was not reported");
	cr_assert_eq(unlink(p), 0);
	reported = 0;
	sub_path("volumes", LIM, p, sizeof(p));
	cr_assert_eq(mkdir(p, 0700), 0);
	check_volume("sabotage/half-gone", LIM, &gone, true, 0);
	cr_assert_gt(reported, 0, "a directory without a record was not reported");
	cr_assert_eq(rmdir(p), 0);
	close(rootfd);
	/* These findings were the point: the daemon broke nothing. */
	st.violations = 0;
}
