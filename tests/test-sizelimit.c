/* SPDX-License-Identifier: MIT */
/*
 * Which project IDs sizelimit.c counts as in use, against a real XFS on a
 * loop device: the registry's volumes, and what the top directories of
 * volumes/, trash/ and quarantine/ really carry on disk (a volume whose
 * record is unreadable, a directory being deleted, one kept for the admin).
 * Project IDs are stored in the inode with or without quota, so this runs
 * on a host kernel without CONFIG_XFS_QUOTA. Needs root; skips without it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "pool/quota.h"
#include "pool/sizelimit.h"

static LoopXfs lx;
static PartitionFs fs;
static Registry *reg;
static ProjidAlloc ids;
static Partition part; /* only its address: the ID space */

static int subdir(int dfd, const char *name)
{
	int fd;

	cr_assert_eq(mkdirat(dfd, name, 0700), 0, "mkdir %s: %s", name, strerror(errno));
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	return fd;
}

static void setup(void)
{
	int r;

	if (geteuid() != 0)
		cr_skip_test("needs root for a loop device and a mount");
	if (access("/usr/sbin/mkfs.xfs", X_OK) != 0 && access("/sbin/mkfs.xfs", X_OK) != 0)
		cr_skip_test("needs mkfs.xfs (package xfsprogs)");
	r = loopxfs_create(&lx, NULL, 300);
	cr_assert_eq(r, 0, "loopxfs_create: %s", strerror(-r));
	fs = (PartitionFs){ .meta_fd = -EBADF, .scratch_fd = -EBADF };
	fs.root_fd = open(lx.mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fs.root_fd, 0);
	fs.tree_fd = subdir(fs.root_fd, "nvmevol");
	fs.volumes_fd = subdir(fs.tree_fd, "volumes");
	fs.trash_fd = subdir(fs.tree_fd, "trash");
	fs.quarantine_fd = subdir(fs.tree_fd, "quarantine");
	cr_assert_eq(registry_new(&reg), 0);
	projid_alloc_init(&ids);
}

static void teardown(void)
{
	int *fds[] = { &fs.volumes_fd, &fs.trash_fd, &fs.quarantine_fd, &fs.tree_fd, &fs.root_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0)
			(void)close(*fds[i]);
	fs = (PartitionFs){ .root_fd = -EBADF };
	if (reg)
		reg = registry_free(reg);
	projid_alloc_done(&ids);
	loopxfs_destroy(&lx);
}

TestSuite(sizelimit, .init = setup, .fini = teardown, .timeout = 120);

/* A directory @name in @dfd carrying project @id. */
static void plant(int dfd, const char *name, uint32_t id)
{
	int fd = subdir(dfd, name);
	int r = quota_set_project(fd, id);

	cr_assert_eq(r, 0, "set project %u on %s: %s", id, name, strerror(-r));
	close(fd);
}

static uint32_t reserve(void)
{
	uint32_t id = 0;
	int r = sizelimit_reserve_id(&ids, reg, &part, &fs, &id);

	cr_assert_eq(r, 0, "sizelimit_reserve_id: %s", strerror(-r));
	return id;
}

Test(sizelimit, ids_carried_on_disk_are_never_handed_out)
{
	uint32_t got[4];

	/* volumes/: a volume whose record is unreadable (its placeholder in the registry has ID 0). */
	plant(fs.volumes_fd, "unreadable", QUOTA_PROJID_MIN);
	plant(fs.trash_fd, "v1-0123456789abcdef", QUOTA_PROJID_MIN + 1);
	plant(fs.quarantine_fd, "orphan.1700000000", QUOTA_PROJID_MIN + 3);
	/* Not IDs we hand out: a file, an unlimited volume (ID 0). */
	close(openat(fs.trash_fd, "a-file", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	plant(fs.volumes_fd, "unlimited", 0);

	for (int i = 0; i < 4; i++)
		got[i] = reserve();
	cr_expect_eq(got[0], QUOTA_PROJID_MIN + 2);
	cr_expect_eq(got[1], QUOTA_PROJID_MIN + 4);
	cr_expect_eq(got[2], QUOTA_PROJID_MIN + 5);
	cr_expect_eq(got[3], QUOTA_PROJID_MIN + 6);
}

/* A failed create releases its ID: free again once its directory is gone. */
Test(sizelimit, a_released_id_is_free_once_nothing_carries_it)
{
	uint32_t id = reserve();

	plant(fs.volumes_fd, "new", id);
	sizelimit_release(&ids, &part, &fs, id);
	cr_expect_eq(reserve(), id + 1, "the rollback's directory still carries it");
	projid_release(&ids, &part, id + 1);
	cr_assert_eq(unlinkat(fs.volumes_fd, "new", AT_REMOVEDIR), 0);
	cr_expect_eq(reserve(), id);
}
