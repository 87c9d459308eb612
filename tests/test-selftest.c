/* SPDX-License-Identifier: MIT */
/*
 * The direct-I/O self-test engine, its report/judge and `nvmevol selftest`.
 * Suite "selftest" needs root: it runs the engine on a real loop-backed XFS
 * (and a tmpfs). Suites "selftest_report" and "selftest_scratch" need nothing.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "helpers/loopxfs.h"
#include "selftest/selftest-report.h"
#include "selftest/selftest-stats.h"
#include "selftest/selftest.h"

/* From xfs_fs.h (not installed without xfslibs-dev): shut the filesystem down like `xfs_io -x -c shutdown`. */
#define XFS_IOC_GOINGDOWN _IOR('X', 125, uint32_t)
#define XFS_FSOP_GOING_FLAGS_NOLOGFLUSH 2u

static LoopXfs lx;
static int scratch_fd = -1;
static char scratch_path[PATH_MAX + 16];

static void require_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for loop devices");
	if (access("/usr/sbin/mkfs.xfs", X_OK) != 0 && access("/sbin/mkfs.xfs", X_OK) != 0)
		cr_skip_test("needs mkfs.xfs (package xfsprogs)");
}

static void open_scratch(void)
{
	(void)snprintf(scratch_path, sizeof(scratch_path), "%s/selftest", lx.mountpoint);
	cr_assert_eq(mkdir(scratch_path, 0700), 0, "mkdir %s: %s", scratch_path, strerror(errno));
	scratch_fd = open(scratch_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(scratch_fd, 0, "open %s: %s", scratch_path, strerror(errno));
}

static void setup(void)
{
	int r;

	require_root();
	r = loopxfs_create(&lx, NULL, 512);
	cr_assert_eq(r, 0, "loopxfs_create: %s", strerror(-r));
	open_scratch();
}

static void teardown(void)
{
	selftest_set_read_hook(NULL);
	if (scratch_fd >= 0)
		(void)close(scratch_fd);
	scratch_fd = -1;
	loopxfs_destroy(&lx);
}

TestSuite(selftest, .init = setup, .fini = teardown, .timeout = 120);

static size_t dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	size_t n = 0;

	cr_assert_not_null(d, "opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void assert_plausible(const SelftestResult *r, uint64_t budget_ms)
{
	const double figures[] = { r->seq_write_mbps, r->seq_read_mbps, r->rand_write_iops, r->rand_read_iops,
				   r->write_p50_ms, r->read_p50_ms };

	for (size_t i = 0; i < sizeof(figures) / sizeof(figures[0]); i++)
		cr_assert(isfinite(figures[i]) && figures[i] > 0, "figure %zu is %g", i, figures[i]);
	/* A p99 exactly when its phase had the samples for one (a loaded machine gets fewer). */
	cr_assert_eq(r->write_p99_unreported, !selftest_p99_reportable(r->write_samples), "%llu samples",
		     (unsigned long long)r->write_samples);
	cr_assert_eq(r->read_p99_unreported, !selftest_p99_reportable(r->read_samples), "%llu samples",
		     (unsigned long long)r->read_samples);
	cr_assert_eq(r->write_p99_ms > 0, !r->write_p99_unreported, "write p99 %g", r->write_p99_ms);
	cr_assert_eq(r->read_p99_ms > 0, !r->read_p99_unreported, "read p99 %g", r->read_p99_ms);
	/* A loop device in RAM-backed page cache can be fast, but not this fast or slow. */
	cr_assert_lt(r->seq_write_mbps, 1e6);
	cr_assert_lt(r->seq_read_mbps, 1e6);
	cr_assert_lt(r->rand_write_iops, 1e8);
	cr_assert_lt(r->write_p99_ms, 10000);
	cr_assert(r->write_p99_unreported || r->write_p50_ms <= r->write_p99_ms);
	cr_assert(r->read_p99_unreported || r->read_p50_ms <= r->read_p99_ms);
	cr_assert_eq(r->verify_errors, 0);
	cr_assert_geq(r->file_bytes, 1024 * 1024);
	cr_assert_eq(r->file_bytes % (1024 * 1024), 0);
	cr_assert_geq(r->bytes_written, r->file_bytes);
	/* Everything written is read back at least once: the whole file in the sequential read. */
	cr_assert_geq(r->bytes_read, r->file_bytes);
	cr_assert_geq(r->blocks_verified, r->file_bytes / 4096);
	cr_assert(r->alignment >= 512 && (r->alignment & (r->alignment - 1)) == 0, "alignment %u", r->alignment);
	/* Catches an engine that ignores its budget (seconds), not scheduling noise on a loaded machine. */
	cr_assert_leq(r->duration_ms, 3 * budget_ms + 1000, "took %llu ms for a budget of %llu ms",
		      (unsigned long long)r->duration_ms, (unsigned long long)budget_ms);
	cr_assert_geq(r->duration_ms, budget_ms / 2);
	cr_assert(!r->named_scratch, "XFS supports O_TMPFILE");
}

Test(selftest, default_run_is_plausible_verified_and_leaves_nothing)
{
	SelftestResult r = {};
	char *err = NULL, *msg = (char *)"unset";
	int ret;

	ret = selftest_run(scratch_fd, NULL, &r, &err);
	cr_assert_eq(ret, 0, "selftest_run: %s (%s)", strerror(-ret), err ? err : "");
	cr_assert_null(err);
	assert_plausible(&r, SELFTEST_BUDGET_MS_DEFAULT);
	cr_assert_eq(r.iodepth, SELFTEST_IODEPTH_DEFAULT);
	cr_assert_eq(selftest_judge(&r, NULL, NULL, &msg), SELFTEST_VERDICT_PASS);
	cr_assert_null(msg);
	cr_assert_eq(dir_entries(scratch_path), 0);
	cr_assert_eq(dir_entries(lx.mountpoint), 1, "only the scratch directory");
}

Test(selftest, budget_is_respected)
{
	const uint64_t budgets[] = { 100, 600 };

	for (size_t i = 0; i < 2; i++) {
		SelftestConfig cfg = { .budget_ms = budgets[i], .iodepth = 4 };
		SelftestResult r = {};
		char *err = NULL;
		int ret = selftest_run(scratch_fd, &cfg, &r, &err);

		cr_assert_eq(ret, 0, "%s", err ? err : "");
		assert_plausible(&r, budgets[i]);
		cr_assert_eq(r.iodepth, 4);
	}
}

Test(selftest, explicit_size_and_iodepth_one)
{
	SelftestConfig cfg = { .budget_ms = 100, .seq_bytes_min = 20 << 20, .seq_bytes_max = 20 << 20, .iodepth = 1 };
	SelftestResult r = {};
	char *err = NULL;
	int ret = selftest_run(scratch_fd, &cfg, &r, &err);

	cr_assert_eq(ret, 0, "%s", err ? err : "");
	cr_assert_eq(r.file_bytes, 20 << 20);
	cr_assert_eq(r.iodepth, 1);
	cr_assert_gt(r.rand_read_iops, 0);
}

/* Where the kernel refuses an AIO context, the IOPS phases use one thread per outstanding I/O. */
Test(selftest, iops_phases_use_kernel_aio_or_threads)
{
	SelftestConfig cfg = { .budget_ms = 150 };
	SelftestResult r = {};
	char *err = NULL;
	int ret;

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs a build with -Dtest_hooks=true (NVMEVOL_TEST_SELFTEST_NO_AIO)");
	ret = selftest_run(scratch_fd, &cfg, &r, &err);
	cr_assert_eq(ret, 0, "%s", err ? err : "");
	cr_expect_not(r.qd_threads, "this kernel has AIO");
	assert_plausible(&r, 150);

	cr_assert_eq(setenv("NVMEVOL_TEST_SELFTEST_NO_AIO", "1", 1), 0);
	r = (SelftestResult){};
	ret = selftest_run(scratch_fd, &cfg, &r, &err);
	unsetenv("NVMEVOL_TEST_SELFTEST_NO_AIO");
	cr_assert_eq(ret, 0, "%s", err ? err : "");
	cr_expect(r.qd_threads);
	assert_plausible(&r, 150);
	cr_expect_eq(r.verify_errors, 0);
	cr_expect_gt(r.rand_write_iops, 0);
	cr_expect_gt(r.rand_read_iops, 0);
}

/* Several runs at once (the daemon tests partitions in parallel) share the engine's AIO contexts safely. */
static void *run_one(void *arg)
{
	SelftestConfig cfg = { .budget_ms = 100, .iodepth = (unsigned)(uintptr_t)arg };
	SelftestResult *r = calloc(1, sizeof(*r));
	char *err = NULL;

	if (selftest_run(scratch_fd, &cfg, r, &err) < 0) {
		free(err);
		free(r);
		return NULL;
	}
	return r;
}

Test(selftest, concurrent_runs)
{
	pthread_t t[4];

	for (uintptr_t i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, run_one, (void *)(4 + 4 * i)), 0);
	for (int i = 0; i < 4; i++) {
		SelftestResult *r = NULL;

		pthread_join(t[i], (void **)&r);
		cr_assert_not_null(r, "run %d failed", i);
		cr_expect_eq(r->verify_errors, 0);
		cr_expect_eq(r->iodepth, 4u + 4u * (unsigned)i);
		cr_expect_not(r->qd_threads);
		free(r);
	}
}

/* ---- A lying device, simulated in-process ---- */

static uint64_t corrupt_at; /* file offset of the 4 KiB unit to damage */
static unsigned hook_calls;

static void flip_one_byte(void *buf, size_t len, uint64_t offset)
{
	hook_calls++;
	if (corrupt_at >= offset && corrupt_at < offset + len)
		((unsigned char *)buf)[corrupt_at - offset + 123] ^= 0x01;
}

/* A device that returns the neighbouring block: misplaced data. */
static void swap_first_units(void *buf, size_t len, uint64_t offset)
{
	unsigned char tmp[4096];

	if (len >= 2 * 4096 && offset == 0) {
		memcpy(tmp, buf, 4096);
		memcpy(buf, (unsigned char *)buf + 4096, 4096);
		memcpy((unsigned char *)buf + 4096, tmp, 4096);
	}
}

/* A device that drops writes: returns zeroes for one unit. */
static void zero_unit(void *buf, size_t len, uint64_t offset)
{
	if (corrupt_at >= offset && corrupt_at < offset + len)
		memset((unsigned char *)buf + (corrupt_at - offset), 0, 4096);
}

static void assert_data_error(const SelftestResult *r, uint64_t first)
{
	SelftestThresholds none = {};
	char *msg = NULL;

	cr_assert_gt(r->verify_errors, 0);
	cr_assert_eq(r->first_error_offset, first, "first error at %llu", (unsigned long long)r->first_error_offset);
	cr_assert_eq(selftest_judge(r, &none, NULL, &msg), SELFTEST_VERDICT_DATA_ERROR);
	cr_assert_not_null(msg);
	cr_assert(strstr(msg, "data verification failed"), "%s", msg);
	free(msg);
}

Test(selftest, corrupted_read_is_detected)
{
	SelftestConfig cfg = { .budget_ms = 150 };
	SelftestResult r = {};
	char *err = NULL;

	corrupt_at = 3 * 1024 * 1024 + 8192;
	selftest_set_read_hook(flip_one_byte);
	cr_assert_eq(selftest_run(scratch_fd, &cfg, &r, &err), 0, "%s", err ? err : "");
	cr_assert_gt(hook_calls, 0);
	assert_data_error(&r, corrupt_at);
	cr_assert_eq(dir_entries(scratch_path), 0);
}

Test(selftest, misplaced_and_lost_data_are_detected)
{
	SelftestConfig cfg = { .budget_ms = 100 };
	SelftestResult r = {};
	char *err = NULL;

	selftest_set_read_hook(swap_first_units);
	cr_assert_eq(selftest_run(scratch_fd, &cfg, &r, &err), 0, "%s", err ? err : "");
	assert_data_error(&r, 0);
	/* Both units of every swapped read are wrong. */
	cr_assert_eq(r.verify_errors % 2, 0);

	corrupt_at = 5 * 4096;
	selftest_set_read_hook(zero_unit);
	memset(&r, 0, sizeof(r));
	cr_assert_eq(selftest_run(scratch_fd, &cfg, &r, &err), 0, "%s", err ? err : "");
	assert_data_error(&r, corrupt_at);
}

#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
Test(selftest, corrupt_env_hook_flips_one_block)
{
	SelftestConfig cfg = { .budget_ms = 100 };
	SelftestResult r = {};
	char *err = NULL;
	int ret;

	cr_assert_eq(setenv("NVMEVOL_TEST_SELFTEST_CORRUPT", "1", 1), 0);
	ret = selftest_run(scratch_fd, &cfg, &r, &err);
	(void)unsetenv("NVMEVOL_TEST_SELFTEST_CORRUPT");
	cr_assert_eq(ret, 0, "%s", err ? err : "");
	cr_assert_eq(r.verify_errors, 1);
}
#endif

Test(selftest, impossible_thresholds_are_below_threshold_with_figures)
{
	SelftestThresholds t = { .min_write_mbps = 99999999, .min_read_mbps = 99999999, .min_iops = 99999999,
				 .max_p99_ms = 0.0001 };
	SelftestConfig cfg = { .budget_ms = 100 };
	SelftestResult r = {};
	char *err = NULL, *msg = NULL, want[128];

	cr_assert_eq(selftest_run(scratch_fd, &cfg, &r, &err), 0, "%s", err ? err : "");
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_assert_not_null(msg);
	(void)snprintf(want, sizeof(want), "sequential write %.1f MiB/s is below min_write_mbps=99999999", round(r.seq_write_mbps * 10) / 10);
	cr_assert(strstr(msg, want), "'%s' not in '%s'", want, msg);
	(void)snprintf(want, sizeof(want), "sequential read %.1f MiB/s is below min_read_mbps=99999999", round(r.seq_read_mbps * 10) / 10);
	cr_assert(strstr(msg, want), "'%s' not in '%s'", want, msg);
	cr_assert(strstr(msg, "is below min_iops=99999999"), "%s", msg);
	/* A p99 from too few samples is not judged: 100 ms on a loaded machine may have none. */
	if (!r.write_p99_unreported || !r.read_p99_unreported)
		cr_assert(strstr(msg, "is above max_p99_ms=0.0001"), "%s", msg);
	else
		cr_assert_null(strstr(msg, "max_p99_ms"), "%s", msg);
	free(msg);
}

/* ---- Failures ---- */

static void shut_down_fs(void *buf, size_t len, uint64_t offset)
{
	uint32_t flags = XFS_FSOP_GOING_FLAGS_NOLOGFLUSH;

	if (hook_calls++ == 0)
		cr_assert_eq(ioctl(scratch_fd, XFS_IOC_GOINGDOWN, &flags), 0, "XFS_IOC_GOINGDOWN: %s", strerror(errno));
}

Test(selftest, io_error_mid_run_fails_cleanly_and_leaves_nothing)
{
	SelftestConfig cfg = { .budget_ms = 200 };
	SelftestResult r = { .seq_write_mbps = 42 };
	char *err = NULL;
	int ret, fd;

	/* The shutdown drops the unflushed log: make the scratch directory itself durable first. */
	cr_assert_eq(syncfs(scratch_fd), 0);
	selftest_set_read_hook(shut_down_fs);
	ret = selftest_run(scratch_fd, &cfg, &r, &err);
	cr_assert_lt(ret, 0);
	cr_assert_not_null(err);
	cr_assert(strstr(err, "I/O error during") || strstr(err, "fdatasync"), "%s", err);
	cr_assert_eq(r.seq_write_mbps, 42, "the result is not touched on failure");
	free(err);

	/* Like a crash: remount (log recovery) and look. */
	(void)close(scratch_fd);
	scratch_fd = -1;
	cr_assert_eq(loopxfs_umount(&lx), 0);
	cr_assert_eq(loopxfs_mount(&lx, NULL), 0);
	cr_assert_eq(dir_entries(scratch_path), 0);
	fd = open(scratch_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(selftest_clean_scratch(fd), 0);
	(void)close(fd);
}

Test(selftest, full_filesystem_gives_enospc_and_leaves_nothing)
{
	char filler[PATH_MAX + 16], *err = NULL;
	SelftestResult r = {};
	int fd, ret;

	/* Leave less than the 16 MiB the default minimum needs. */
	(void)snprintf(filler, sizeof(filler), "%s/filler", lx.mountpoint);
	fd = open(filler, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	for (off_t sz = 512ll << 20; sz > 0; sz -= 4 << 20)
		if (fallocate(fd, 0, 0, sz) == 0)
			break;
	(void)close(fd);

	ret = selftest_run(scratch_fd, NULL, &r, &err);
	cr_assert_eq(ret, -ENOSPC, "%d %s", ret, err ? err : "");
	cr_assert(strstr(err, "free space"), "%s", err);
	free(err);
	cr_assert_eq(dir_entries(scratch_path), 0);
}

Test(selftest, invalid_fd)
{
	SelftestResult r = {};
	char *err = NULL;

	cr_assert_eq(selftest_run(-1, NULL, &r, &err), -EBADF);
	cr_assert_not_null(err);
	free(err);
}

/* ---- tmpfs ---- */

Test(selftest_tmpfs, tmpfs_is_refused_with_a_clear_message)
{
	char dir[] = "/tmp/nvmevol-test-tmpfs.XXXXXX", *err = NULL;
	SelftestResult r = {};
	int fd, ret;

	if (geteuid() != 0)
		cr_skip_test("needs root to mount a tmpfs");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(mount("tmpfs", dir, "tmpfs", 0, "size=64m"), 0, "mount tmpfs: %s", strerror(errno));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ret = fd >= 0 ? selftest_run(fd, NULL, &r, &err) : -errno;
	if (fd >= 0)
		(void)close(fd);
	(void)umount2(dir, 0);
	(void)rmdir(dir);
	cr_assert_eq(ret, -EINVAL, "%d", ret);
	cr_assert_not_null(err);
	cr_assert(strstr(err, "O_DIRECT"), "%s", err);
	cr_assert(strstr(err, "tmpfs"), "%s", err);
	free(err);
}

/* ---- The command ---- */

/* The whole command line, as main() runs it: "nvmevol selftest ...". */
static int cmd(const char *const *argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	return cli_main(argc, (char **)argv);
}
#define CMD(...) cmd((const char *const[]){ "nvmevol", "selftest", __VA_ARGS__, NULL })

Test(selftest, command_exit_codes)
{
	cr_redirect_stdout();
	cr_redirect_stderr();
	cr_assert_eq(CMD("--budget-ms", "100", scratch_path), 0);
	cr_assert_eq(CMD("--json", "--seconds", "0.1", "--iodepth", "2", scratch_path), 0);
	cr_assert_eq(CMD("--size", "12M", "--budget-ms", "50", scratch_path), 0);
	cr_assert_eq(CMD("/nonexistent/nvmevol"), 1);
	cr_assert_eq(cmd((const char *const[]){ "nvmevol", "selftest", NULL }), 2);
	/* Options after the path, as GNU tools take them (issue 13). */
	cr_assert_eq(CMD(scratch_path, "--json", "--budget-ms", "50"), 0);
	cr_assert_eq(CMD("--budget-ms", "50", scratch_path, "--", "--json"), 2);
	cr_assert_eq(CMD("--iodepth", "0", scratch_path), 2);
	cr_assert_eq(CMD("--iodepth", "x", scratch_path), 2);
	cr_assert_eq(CMD("--seconds", "1", "--budget-ms", "5", scratch_path), 2);
	cr_assert_eq(CMD("--size", "huge", scratch_path), 2);
	cr_assert_eq(CMD("--bogus", scratch_path), 2);
	cr_assert_eq(CMD(scratch_path, scratch_path), 2);
	cr_assert_eq(dir_entries(scratch_path), 0);
}

/*
 * 1 ms leaves each QD1 phase its 64-I/O minimum (63 counted), whose "p99" is
 * the slowest I/O: not reported, and said why. Runs the built binary, so that
 * NVMEVOL_BINARY=<old build> shows the old behaviour (a number).
 */
Test(selftest, p99_from_too_few_samples_is_not_reported)
{
	const char *bin = getenv("NVMEVOL_BINARY") ?: "build/src/nvmevol";
	char cmdline[PATH_MAX * 2 + 64], out[8192];
	json_error_t jerr;
	json_t *o;
	size_t n;
	FILE *p;

	(void)snprintf(cmdline, sizeof(cmdline), "'%s' selftest --json --budget-ms 1 '%s'", bin, scratch_path);
	p = popen(cmdline, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	cr_assert_eq(pclose(p), 0, "%s: %s", cmdline, out);
	o = json_loads(out, 0, &jerr);
	cr_assert_not_null(o, "%s: %s", jerr.text, out);
	for (int i = 0; i < 2; i++) {
		const char *key = i ? "read_p99_ms" : "write_p99_ms", *count = i ? "read_samples" : "write_samples";

		cr_expect(json_is_null(json_object_get(o, key)), "%s from %lld samples: %s", key,
			  (long long)json_integer_value(json_object_get(o, count)), out);
		cr_expect(json_is_integer(json_object_get(o, count)) && json_integer_value(json_object_get(o, count)) < 1000,
			  "%s", out);
	}
	cr_expect(json_is_real(json_object_get(o, "write_p50_ms")), "%s", out);
	cr_expect(json_is_string(json_object_get(o, "p99_not_reported")), "%s", out);
	json_decref(o);
	cr_assert_eq(dir_entries(scratch_path), 0);
}

Test(selftest, command_reports_data_errors)
{
	cr_redirect_stdout();
	cr_redirect_stderr();
	corrupt_at = 0;
	selftest_set_read_hook(flip_one_byte);
	cr_assert_eq(CMD("--budget-ms", "50", scratch_path), 1);
}

Test(selftest_cmd, help_and_usage_need_nothing)
{
	cr_redirect_stdout();
	cr_redirect_stderr();
	cr_assert_eq(CMD("--help"), 0);
	cr_assert_eq(CMD("-h"), 0);
	cr_assert_eq(CMD("--json"), 2);
}

/* ---- Leftovers ---- */

Test(selftest_scratch, clean_removes_only_the_engines_leftovers)
{
	const char *base = getenv("NVMEVOL_TEST_TMPDIR");
	char dir[PATH_MAX], p[PATH_MAX + 64], target[PATH_MAX + 64];
	static const char *const keep[] = {
		"keep.txt",
		".nvmevol-selftest.x",
		".nvmevol-selftest.1234.0123456789abcdeg",
		".nvmevol-selftest.1234.0123456789ABCDEF",
		".nvmevol-selftest.1234.0123456789abcde",
		".nvmevol-selftest..0123456789abcdef",
		"x.nvmevol-selftest.1234.0123456789abcdef",
	};
	int fd, dfd;

	(void)snprintf(dir, sizeof(dir), "%s/nvmevol-test-scratch.XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		(void)snprintf(p, sizeof(p), "%s/%s", dir, keep[i]);
		fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		cr_assert_geq(fd, 0, "%s", p);
		(void)close(fd);
	}
	/* Leftovers: a file, and a symlink (unlinked itself, its target untouched). */
	(void)snprintf(p, sizeof(p), "%s/.nvmevol-selftest.1234.0123456789abcdef", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	(void)close(fd);
	(void)snprintf(p, sizeof(p), "%s/.nvmevol-selftest.99.fedcba9876543210", dir);
	(void)snprintf(target, sizeof(target), "%s/keep.txt", dir);
	cr_assert_eq(symlink(target, p), 0);
	/* A directory with a matching name is not ours to remove. */
	(void)snprintf(p, sizeof(p), "%s/.nvmevol-selftest.7.00000000000000aa", dir);
	cr_assert_eq(mkdir(p, 0700), 0);

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(selftest_clean_scratch(dfd), 2);
	cr_assert_eq(selftest_clean_scratch(dfd), 0);
	(void)close(dfd);

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		(void)snprintf(p, sizeof(p), "%s/%s", dir, keep[i]);
		cr_assert_eq(access(p, F_OK), 0, "%s was removed", keep[i]);
		cr_assert_eq(unlink(p), 0);
	}
	(void)snprintf(p, sizeof(p), "%s/.nvmevol-selftest.7.00000000000000aa", dir);
	cr_assert_eq(rmdir(p), 0);
	cr_assert_eq(rmdir(dir), 0, "only what the test made was left");
}

Test(selftest_scratch, clean_on_bad_fd)
{
	cr_assert_eq(selftest_clean_scratch(-1), -EBADF);
}

/* ---- Report and judge (pure) ---- */

static SelftestResult sample_result(void)
{
	return (SelftestResult){
		.seq_write_mbps = 41.24, .seq_read_mbps = 812.96,
		.rand_write_iops = 12345.6, .rand_read_iops = 23456.4,
		.write_p50_ms = 0.12345, .write_p99_ms = 3.1, .read_p50_ms = 0.1, .read_p99_ms = 0.9996,
		.bytes_written = 48 << 20, .bytes_read = 52 << 20, .file_bytes = 40 << 20,
		.blocks_verified = 13480, .duration_ms = 301, .alignment = 512, .iodepth = 16,
	};
}

Test(selftest_report, verdict_strings)
{
	cr_assert_str_eq(selftest_verdict_to_string(SELFTEST_VERDICT_PASS), "pass");
	cr_assert_str_eq(selftest_verdict_to_string(SELFTEST_VERDICT_BELOW_THRESHOLD), "below-threshold");
	cr_assert_str_eq(selftest_verdict_to_string(SELFTEST_VERDICT_DATA_ERROR), "data-error");
	cr_assert_null(selftest_verdict_to_string(_SELFTEST_VERDICT_MAX));
	cr_assert_null(selftest_verdict_to_string(_SELFTEST_VERDICT_INVALID));
}

Test(selftest_report, json_keys_and_rounding)
{
	SelftestResult r = sample_result();
	json_t *o = selftest_result_to_json(&r);
	static const char *const keys[] = { "seq_write_mbps", "seq_read_mbps", "rand_write_iops", "rand_read_iops",
					    "write_p50_ms", "write_p99_ms", "read_p50_ms", "read_p99_ms",
					    "duration_ms", "bytes_written", "blocks_verified", "verify_errors",
					    "alignment", "iodepth" };

	cr_assert_not_null(o);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_not_null(json_object_get(o, keys[i]), "missing %s", keys[i]);
	cr_assert_float_eq(json_real_value(json_object_get(o, "seq_write_mbps")), 41.2, 1e-9);
	cr_assert_float_eq(json_real_value(json_object_get(o, "seq_read_mbps")), 813.0, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(o, "rand_write_iops")), 12346);
	cr_assert_eq(json_integer_value(json_object_get(o, "rand_read_iops")), 23456);
	cr_assert_float_eq(json_real_value(json_object_get(o, "write_p50_ms")), 0.123, 1e-9);
	cr_assert_float_eq(json_real_value(json_object_get(o, "read_p99_ms")), 1.0, 1e-9);
	cr_assert_eq(json_integer_value(json_object_get(o, "bytes_written")), 48 << 20);
	cr_assert_eq(json_integer_value(json_object_get(o, "verify_errors")), 0);
	cr_assert_null(json_object_get(o, "first_error_offset"));
	json_decref(o);

	r.verify_errors = 3;
	r.first_error_offset = 8192;
	o = selftest_result_to_json(&r);
	cr_assert_eq(json_integer_value(json_object_get(o, "first_error_offset")), 8192);
	json_decref(o);
}

Test(selftest_report, judge)
{
	SelftestResult r = sample_result();
	SelftestThresholds t = {};
	char *msg = (char *)"unset";

	/* No thresholds at all, or all zero: pass. */
	cr_assert_eq(selftest_judge(&r, NULL, NULL, &msg), SELFTEST_VERDICT_PASS);
	cr_assert_null(msg);
	cr_assert_eq(selftest_judge(&r, &t, NULL, NULL), SELFTEST_VERDICT_PASS);

	/* The brief's example. */
	t = (SelftestThresholds){ .min_write_mbps = 500, .max_p99_ms = 1 };
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_assert_str_eq(msg, "sequential write 41.2 MiB/s is below min_write_mbps=500; "
			      "p99 latency 3.100 ms (random write, QD1) is above max_p99_ms=1");
	free(msg);

	/* min_iops: the lower of read and write; max_p99_ms: the higher. */
	t = (SelftestThresholds){ .min_iops = 20000 };
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_assert_str_eq(msg, "random write 12346 IOPS at QD16 is below min_iops=20000");
	free(msg);
	t = (SelftestThresholds){ .min_iops = 12000, .max_p99_ms = 3.5, .min_read_mbps = 800, .min_write_mbps = 41 };
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_PASS);
	cr_assert_null(msg);

	/* Equal to the threshold as reported passes. */
	t = (SelftestThresholds){ .min_write_mbps = 41.2, .max_p99_ms = 3.1, .min_iops = 12346 };
	cr_assert_eq(selftest_judge(&r, &t, NULL, NULL), SELFTEST_VERDICT_PASS);

	/* Read slower than write and the read p99 higher. */
	r.rand_read_iops = 100;
	r.read_p99_ms = 7.25;
	t = (SelftestThresholds){ .min_iops = 1000, .max_p99_ms = 5, .min_read_mbps = 1000 };
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_BELOW_THRESHOLD);
	cr_assert_str_eq(msg, "sequential read 813.0 MiB/s is below min_read_mbps=1000; "
			      "random read 100 IOPS at QD16 is below min_iops=1000; "
			      "p99 latency 7.250 ms (random read, QD1) is above max_p99_ms=5");
	free(msg);

	/* Data errors win over everything. */
	r.verify_errors = 2;
	r.first_error_offset = 4096;
	cr_assert_eq(selftest_judge(&r, &t, NULL, &msg), SELFTEST_VERDICT_DATA_ERROR);
	cr_assert(strstr(msg, "2 of 13480 blocks"), "%s", msg);
	cr_assert(strstr(msg, "offset 4096"), "%s", msg);
	free(msg);
	cr_assert_eq(selftest_judge(&r, NULL, NULL, NULL), SELFTEST_VERDICT_DATA_ERROR);
}

Test(selftest_report, table)
{
	SelftestResult r = sample_result();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	selftest_print_table(f, &r, "/srv/x");
	cr_assert_eq(fclose(f), 0);
	cr_assert(strstr(buf, "'/srv/x'"), "%s", buf);
	cr_assert(strstr(buf, "41.2 MiB/s"), "%s", buf);
	cr_assert(strstr(buf, "12346 IOPS"), "%s", buf);
	cr_assert(strstr(buf, "p99 3.100 ms"), "%s", buf);
	cr_assert(strstr(buf, "13480 blocks"), "%s", buf);
	free(buf);
}
