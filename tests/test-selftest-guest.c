/* SPDX-License-Identifier: MIT */
/*
 * The self-test's verification against devices that really misbehave, inside
 * the qemu guest of tests/qemu/run-nvme-tests.sh (the in-process read hook of
 * test-daemon-selftest proves the engine; this proves the block layer's wrong
 * bytes and errors reach it). The pool partition, label nvs-pool, is a
 * device-mapper table over a virtio disk (serial NVSPOOL). Once the daemon has
 * laid out its tree, the file system's free extents (xfs_spaceman freesp) are
 * where the self-test's scratch file will go, and only they are remapped, so
 * XFS's own metadata never passes through a fault:
 *   - dm-flakey, always down, corrupt_bio_byte on writes that carry REQ_SYNC
 *     and REQ_IDLE (O_DIRECT data writes; XFS's metadata and buffered
 *     writeback carry no REQ_IDLE): the disk stores, and returns, wrong bytes.
 *     Debian 6.1's dm-flakey does not corrupt reads (its end_io walks the spent
 *     bio iterator), hence writes;
 *   - a virtio disk behind qemu's blkdebug (serial NVSEIO) that fails every
 *     read touching a 1 MiB boundary past its first 32 MiB with EIO while
 *     writes succeed (Debian's kernel has no dm-dust).
 * Each has its control: the same mapping without the fault (flakey always up;
 * the same extents on a plain disk, serial NVSCLEAN) must pass. After each
 * case xfs_repair -n finds the file system clean, and a restarted daemon
 * reads its records back and mounts both volumes.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "helpers/testbed.h"

#define DM_NAME "nvs-pool"
#define DM_DEV "/dev/mapper/" DM_NAME
#define MAX_EXT 256
/*
 * The pool starts 1 MiB into its disk: at 0 the disk itself would carry the
 * same XFS superblock, and the daemon rightly refuses a file system seen twice.
 */
#define POOL_OFF 2048ULL
/*
 * The remapped extents start 32 MiB into the disks they move to: the failing
 * disk's errors start there, past what the kernel's and blkid's probes read.
 */
#define REMAP_OFF 65536ULL
/* REQ_SYNC | REQ_IDLE in Linux 6.1 (include/linux/blk_types.h: bits 11 and 15): what iomap's O_DIRECT writes carry. */
#define DIO_WRITE_FLAGS "34816"

static ClientReply rep;
static Testbed tb;
static char pool_disk[32];

typedef struct Extent {
	unsigned long long start, len; /* 512-byte sectors */
} Extent;

static Extent ext[MAX_EXT];
static size_t n_ext;

static void require_guest(void)
{
	if (!getenv("NVMEVOL_QEMU_GUEST") || access("/sys/module/dm_flakey", F_OK) != 0)
		cr_skip_test("runs in the qemu guest with dm-flakey and a blkdebug disk: tests/qemu/run-nvme-tests.sh (qemu stage)");
}

/* /dev/vdX whose virtio serial is @serial. */
static void disk_by_serial(const char *serial, char *buf, size_t len)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	char p[300], s[64];

	buf[0] = 0;
	while (d && (e = readdir(d))) {
		FILE *f;

		snprintf(p, sizeof(p), "/sys/block/%s/serial", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(s, sizeof(s), f) && strncmp(s, serial, strlen(serial)) == 0)
			snprintf(buf, len, "/dev/%s", e->d_name);
		fclose(f);
	}
	if (d)
		closedir(d);
	cr_assert(buf[0], "no virtio disk with serial %s", serial);
}

static unsigned long long disk_sectors(const char *dev)
{
	char p[300];
	unsigned long long n = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/block/%s/size", strrchr(dev, '/') + 1);
	f = fopen(p, "r");
	cr_assert(f && fscanf(f, "%llu", &n) == 1, "cannot read %s", p);
	fclose(f);
	return n;
}

/* The daemon's mount of the partition (root "/" under parts_root; the binds have other roots). */
static void partition_mountpoint(char *buf, size_t len)
{
	char line[4096], root[512], target[512];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	buf[0] = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d %*d %*s %511s %511s", root, target) == 2 && strcmp(root, "/") == 0 &&
		    strncmp(target, tb.parts_root, strlen(tb.parts_root)) == 0)
			snprintf(buf, len, "%s", target);
	if (f)
		fclose(f);
	cr_assert(buf[0], "the partition is not mounted under %s", tb.parts_root);
}

typedef enum Fault { F_LINEAR, F_FLAKEY_UP, F_FLAKEY_CORRUPT, F_REMAP } Fault;

/* Reads the free extents (as sectors) of the mounted file system at @mp into ext[]. */
static void read_free_extents(const char *mp)
{
	char cmd[700], line[256];
	unsigned long long agsize = 0, bsize = 0, ag, agbno, len;
	char extra;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "/usr/sbin/xfs_spaceman -c info '%s'", mp);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *a = strstr(line, "agsize="), *b = strstr(line, "bsize=");

		if (a)
			agsize = strtoull(a + 7, NULL, 10);
		if (b && !bsize && strstr(line, "data"))
			bsize = strtoull(b + 6, NULL, 10);
	}
	pclose(p);
	cr_assert(agsize > 0 && bsize >= 512, "xfs_spaceman info: agsize %llu bsize %llu", agsize, bsize);

	snprintf(cmd, sizeof(cmd), "/usr/sbin/xfs_spaceman -c 'freesp -d' '%s'", mp);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n_ext = 0;
	/* "agno agbno len" per free extent, then a histogram with five columns. */
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "%llu %llu %llu %c", &ag, &agbno, &len, &extra) == 3) {
			cr_assert_lt(n_ext, MAX_EXT);
			ext[n_ext++] = (Extent){ (ag * agsize + agbno) * (bsize / 512), len * (bsize / 512) };
		}
	pclose(p);
	cr_assert_gt(n_ext, 0, "no free extent reported");
	for (size_t k = 1; k < n_ext; k++)
		cr_assert_gt(ext[k].start, ext[k - 1].start, "free extents out of order");
}

/* Loads a table: the free extents through @fault (for F_REMAP, laid end to end on @remap_dev), the rest linear. */
static void load_table(Fault fault, const char *remap_dev)
{
	char path[] = "/tmp/nvs-table.XXXXXX";
	unsigned long long pos = 0, rpos = REMAP_OFF, size = disk_sectors(pool_disk) - POOL_OFF;
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");

	cr_assert_not_null(f);
	for (size_t k = 0; k < n_ext && fault != F_LINEAR; k++) {
		const Extent *e = &ext[k];

		if (e->start > pos)
			fprintf(f, "%llu %llu linear %s %llu\n", pos, e->start - pos, pool_disk, POOL_OFF + pos);
		if (fault == F_FLAKEY_UP) /* up for a day, never down: plain pass-through */
			fprintf(f, "%llu %llu flakey %s %llu 86400 0\n", e->start, e->len, pool_disk, POOL_OFF + e->start);
		else if (fault == F_FLAKEY_CORRUPT) /* down for a day: byte 1 of each matching write becomes 0 */
			fprintf(f, "%llu %llu flakey %s %llu 0 86400 5 corrupt_bio_byte 1 w 0 " DIO_WRITE_FLAGS "\n",
				e->start, e->len, pool_disk, POOL_OFF + e->start);
		else {
			fprintf(f, "%llu %llu linear %s %llu\n", e->start, e->len, remap_dev, rpos);
			rpos += e->len;
		}
		pos = e->start + e->len;
	}
	if (pos < size)
		fprintf(f, "%llu %llu linear %s %llu\n", pos, size - pos, pool_disk, POOL_OFF + pos);
	cr_assert_eq(fclose(f), 0);
	if (remap_dev)
		cr_assert_leq(rpos, disk_sectors(remap_dev), "%s is too small for the free space", remap_dev);
	cr_assert_eq(RUN("/usr/sbin/dmsetup", "load", DM_NAME, path), 0, "dmsetup load failed");
	cr_assert_eq(RUN("/usr/sbin/dmsetup", "resume", DM_NAME), 0, "dmsetup resume failed");
	unlink(path);
}

/* XFS's complaints in the kernel log since boot: none is allowed (the faults must only hit the scratch file). */
static void expect_xfs_quiet(void)
{
	char line[1024];
	FILE *p = popen("dmesg", "r");
	bool bad = false;

	cr_assert_not_null(p);
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "XFS (") && (strstr(line, "orrupt") || strstr(line, "shut") || strstr(line, "rror"))) {
			fprintf(stderr, "selftest-guest: kernel: %s", line);
			bad = true;
		}
	pclose(p);
	cr_expect_not(bad, "XFS reported trouble (above)");
}

static void unmount_partitions(void)
{
	char line[4096], target[512];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d %*d %*s %*s %511s", target) == 1 &&
		    strncmp(target, tb.parts_root, strlen(tb.parts_root)) == 0)
			(void)umount2(target, MNT_DETACH);
	if (f)
		fclose(f);
}

static void start_daemon(void)
{
	testbed_start_or_fail(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=warn", "NVMEVOL_SELFTEST_CACHE_SECONDS=0",
							  NULL });
}

static void mount_passes(const char *name, const char *what);

/*
 * Stops the daemon, takes its mounts away, drops the caches and checks the
 * file system offline; then a restarted daemon reads every record back from
 * the disk and mounts both volumes (whatever the fault phase wrote is there).
 */
static void expect_fs_clean(void)
{
	FILE *f;

	testbed_stop(&tb, SIGTERM);
	unmount_partitions();
	f = fopen("/proc/sys/vm/drop_caches", "w");
	cr_assert(f && fputs("3", f) >= 0 && fclose(f) == 0, "cannot drop the caches");
	/* Its report only on failure: a clean run is 30 lines of phases. */
	cr_expect_eq(system("/usr/sbin/xfs_repair -n " DM_DEV " >/tmp/nvs-repair.log 2>&1 || "
			    "{ cat /tmp/nvs-repair.log >&2; exit 1; }"),
		     0, "xfs_repair -n found damage on " DM_DEV " (its report above)");
	start_daemon();
	mount_passes("sv", "after a restart");
	mount_passes("se", "after a restart (enforce)");
}

static void fini(void)
{
	client_reply_done(&rep);
	if (tb.pid > 0)
		testbed_stop(&tb, SIGTERM);
	unmount_partitions();
	testbed_destroy(&tb);
	for (int k = 0; k < 50 && RUN("/usr/sbin/dmsetup", "remove", DM_NAME) != 0; k++)
		usleep(100000);
}

static json_t *selftest_report(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "selftest");
}

static long long num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	cr_assert(json_is_integer(v), "no integer %s in %s", k, o ? json_dumps(o, 0) : rep.body);
	return json_integer_value(v);
}

/* Mounts @name (a fresh self-test: no cache) and expects it to pass verification; unmounts it. */
static void mount_passes(const char *name, const char *what)
{
	json_t *st;

	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"m\"}", name), 0, "%s: %s", what,
		     client_err(&rep));
	st = selftest_report(name);
	cr_expect_eq(num(st, "verify_errors"), 0, "%s: %s", what, json_dumps(st, 0));
	cr_expect_gt(num(st, "blocks_verified"), 0, "%s: %s", what, json_dumps(st, 0));
	cr_expect(json_is_false(json_object_get(st, "cached")), "%s: %s", what, json_dumps(st, 0));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"%s\",\"ID\":\"m\"}", name), 0, "%s", client_err(&rep));
}

/* A fresh XFS on the linear table, the daemon on it, volume "sv" (selftest=warn) and "se" (selftest=enforce). */
static void start_pool(void)
{
	char mp[512];

	cr_assert_eq(RUN("/usr/sbin/mkfs.xfs", "-q", "-f", "-L", DM_NAME, DM_DEV), 0, "mkfs.xfs " DM_DEV);
	cr_assert_eq(testbed_init(&tb, 0), 0);
	snprintf(tb.prefix, sizeof(tb.prefix), "nvs");
	start_daemon();
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"sv\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"se\",\"Opts\":{\"selftest\":\"enforce\"}}"), 0, "%s",
		     client_err(&rep));
	/* One self-test on the plain table: its history file and the tree now hold their blocks. */
	mount_passes("sv", "on the linear table");
	partition_mountpoint(mp, sizeof(mp));
	read_free_extents(mp);
}

static void create_dm(void)
{
	char table[200];

	require_guest();
	setenv("DM_DISABLE_UDEV", "1", 1); /* no udev in the guest: libdevmapper makes the nodes */
	disk_by_serial("NVSPOOL", pool_disk, sizeof(pool_disk));
	n_ext = 0;
	snprintf(table, sizeof(table), "0 %llu linear %s %llu", disk_sectors(pool_disk) - POOL_OFF, pool_disk, POOL_OFF);
	cr_assert_eq(RUN("/usr/sbin/dmsetup", "create", DM_NAME, "--table", table), 0, "dmsetup create failed");
	for (int k = 0; k < 50 && access(DM_DEV, F_OK) != 0; k++)
		usleep(20000);
	cr_assert_eq(access(DM_DEV, F_OK), 0, "no " DM_DEV);
}

TestSuite(selftest_device, .init = create_dm, .fini = fini, .timeout = 300);

/* The disk stores wrong bytes: verification fails, the Mount is refused under warn and enforce, XFS is untouched. */
Test(selftest_device, a_corrupting_disk_fails_verification_and_the_mount)
{
	json_t *st;

	start_pool();

	/* Control: the same segments through dm-flakey, never down. */
	load_table(F_FLAKEY_UP, NULL);
	mount_passes("sv", "flakey always up (control)");

	load_table(F_FLAKEY_CORRUPT, NULL);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"sv\",\"ID\":\"a\"}"), 0, "a corrupting disk was mounted");
	cr_expect(strstr(client_err(&rep), "read back wrong data"), "%s", client_err(&rep));
	st = selftest_report("sv");
	cr_expect_gt(num(st, "verify_errors"), 0, "%s", json_dumps(st, 0));
	cr_expect_str_eq(json_string_value(json_object_get(st, "verdict")), "data-error", "%s", json_dumps(st, 0));
	fprintf(stderr, "selftest-guest: corrupting disk: %lld of %lld blocks wrong\n", num(st, "verify_errors"),
		num(st, "blocks_verified"));
	/* Never cached: the next Mount tests again and is refused again; enforce refuses alike. */
	cr_expect_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"sv\",\"ID\":\"b\"}"), 0);
	cr_expect_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"se\",\"ID\":\"a\"}"), 0);
	cr_expect(strstr(client_err(&rep), "read back wrong data"), "%s", client_err(&rep));

	/* The disk, not XFS, was at fault: on the plain table the same volumes pass. */
	load_table(F_LINEAR, NULL);
	mount_passes("sv", "linear again");
	expect_xfs_quiet();
	expect_fs_clean();
}

/* The disk fails reads with EIO: the Mount is refused with the I/O error, the daemon serves on, XFS is untouched. */
Test(selftest_device, read_errors_fail_the_mount)
{
	char eio[32], clean[32];

	disk_by_serial("NVSEIO", eio, sizeof(eio));
	disk_by_serial("NVSCLEAN", clean, sizeof(clean));
	start_pool();

	/*
	 * The failing disk first: a failed self-test writes nothing else, so the
	 * free extents hold no file system block when they move to the plain disk
	 * (whatever they held stays behind on the disk they leave).
	 */
	load_table(F_REMAP, eio);
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"sv\",\"ID\":\"a\"}"), 0, "a disk failing reads was mounted");
	cr_expect(strstr(client_err(&rep), "I/O error during sequential read") &&
			  strstr(client_err(&rep), "Input/output error"),
		  "%s", client_err(&rep));
	fprintf(stderr, "selftest-guest: failing disk: %s\n", client_err(&rep));
	cr_expect_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"se\",\"ID\":\"a\"}"), 0);
	cr_expect_eq(tb_call(&tb, "List", &rep, "{}"), 0, "the daemon stopped serving: %s", client_err(&rep));

	/* Control: the same extents on a disk without errors. */
	load_table(F_REMAP, clean);
	mount_passes("sv", "remapped to the plain disk (control)");
	expect_xfs_quiet();
	expect_fs_clean();
}
