/* SPDX-License-Identifier: MIT */
/*
 * Clones and size limits through the real daemon: a clone is charged to its
 * own XFS project (XFS counts shared blocks in each project), inherits its
 * source's limits unless given, is held to them, and is refused up front when
 * its source's usage does not fit. Needs a kernel with XFS quota: it runs in
 * the qemu guest (tests/qemu/run-clone-quota-tests.sh) and skips elsewhere.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "pool/quota.h"

static Testbed tb;
static ClientReply rep;

static void setup(void)
{
	testbed_setup_quota(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(clone_quota, .init = setup, .fini = teardown, .timeout = 600);

static json_t *status_of(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_object_get(json_object_get(rep.json, "Volume"), "Status");
}

static long long quota_field(const char *name, const char *key)
{
	json_t *v = json_object_get(json_object_get(status_of(name), "quota"), key);
	cr_assert(json_is_integer(v), "no quota.%s for %s: %s", key, name, rep.body);
	return json_integer_value(v);
}

static void vol_path(const char *name, const char *file, char *buf, size_t len)
{
	char dir[700];
	testbed_volume_dir(&tb, 0, name, dir, sizeof(dir));
	snprintf(buf, len, "%s/%s", dir, file);
}

static void fill(const char *name, long long bytes, int files)
{
	char p[800];
	int err;

	vol_path(name, "data", p, sizeof(p));
	cr_assert_eq(testbed_write_bytes(p, bytes, false, &err), bytes, "filling %s: %s", name, strerror(err));
	for (int i = 0; i < files; i++) {
		char f[32];
		snprintf(f, sizeof(f), "small.%d", i);
		vol_path(name, f, p, sizeof(p));
		cr_assert_eq(testbed_write_bytes(p, 100, false, &err), 100);
	}
}

/* Allocated bytes of the whole partition, after a sync (delayed allocation settled). */
static long long partition_used(void)
{
	char root[400];
	struct statvfs sv;
	int fd;

	testbed_part_mountpoint(&tb, 0, root, sizeof(root));
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(syncfs(fd), 0);
	close(fd);
	cr_assert_eq(statvfs(root, &sv), 0);
	return (long long)(sv.f_blocks - sv.f_bfree) * (long long)sv.f_frsize;
}

Test(clone_quota, a_clone_is_charged_to_its_own_project_inherits_the_limit_and_is_held_to_it)
{
	long long src_used, used_before, n;
	char p[800];
	int err;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"src\",\"Opts\":{\"size\":\"32M\",\"inodes\":\"500\"}}"), 0,
		     "%s", client_err(&rep));
	fill("src", 12 << 20, 5);
	src_used = quota_field("src", "used_bytes");
	cr_assert_geq(src_used, 12 << 20);
	used_before = partition_used();

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"twin\",\"Opts\":{\"from\":\"src\"}}"), 0, "%s",
		     client_err(&rep));
	/* Its own project, the source's limits, the source's usage charged in full. */
	cr_assert_neq(quota_field("twin", "project_id"), quota_field("src", "project_id"));
	cr_assert_eq(quota_field("twin", "enforced_limit_bytes"), 32 << 20);
	cr_assert_eq(quota_field("twin", "enforced_limit_inodes"), 500);
	cr_assert_geq(quota_field("twin", "used_bytes"), 12 << 20, "%s", rep.body);
	cr_assert_leq(quota_field("twin", "used_bytes"), src_used + (1 << 20));
	cr_assert_geq(quota_field("twin", "used_inodes"), 7);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(status_of("twin"), "options"), "size")), "32M");
	/* ...while the partition paid only for metadata: the blocks are shared. */
	cr_assert_lt(partition_used() - used_before, 4 << 20, "the clone took %lld bytes of the partition",
		     partition_used() - used_before);
	cr_assert_eq(quota_field("src", "used_bytes"), src_used, "the source's usage changed");

	/* Held to its limit: 12 MiB are in, 20 MiB more are not allowed. */
	vol_path("twin", "more", p, sizeof(p));
	n = testbed_write_bytes(p, 24 << 20, false, &err);
	cr_assert(err == EDQUOT || err == ENOSPC, "writing past the clone's limit gave '%s'", strerror(err));
	cr_assert_leq(n, 20 << 20, "%lld bytes landed in a clone with 20 MiB left", n);
	cr_assert_leq(quota_field("twin", "used_bytes"), 32 << 20);
	cr_assert_eq(quota_field("src", "used_bytes"), src_used, "the clone's writes were charged to the source");
}

Test(clone_quota, a_clone_that_cannot_fit_is_refused_up_front)
{
	char p[800];
	struct stat st;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"big\",\"Opts\":{\"size\":\"32M\",\"inodes\":\"500\"}}"), 0);
	fill("big", 12 << 20, 30);
	/* A smaller size: from quota accounting. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"big\",\"size\":\"8M\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "uses") && strstr(client_err(&rep), "more than the new volume's size limit"),
		  "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"small\"}"), 0, "a refused clone exists");
	vol_path("small", "", p, sizeof(p));
	cr_assert_neq(stat(p, &st), 0, "a refused clone left its directory");
	/* Fewer inodes. */
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"big\",\"inodes\":\"10\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "inodes limit"), "%s", client_err(&rep));
	/* A source without limits is measured by walking it. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"free\"}"), 0);
	fill("free", 12 << 20, 0);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"free\",\"size\":\"8M\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "more than the new volume's size limit"), "%s", client_err(&rep));
	/* A size that fits is taken instead of the inherited one. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"big\",\"size\":\"16M\"}}"), 0,
		     "%s", client_err(&rep));
	cr_assert_eq(quota_field("small", "enforced_limit_bytes"), 16 << 20);
	cr_assert_eq(quota_field("small", "enforced_limit_inodes"), 500);
	/* The same request again is the same volume; with another size it is not. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"big\",\"size\":\"16M\"}}"), 0,
		     "%s", client_err(&rep));
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"small\",\"Opts\":{\"from\":\"big\",\"size\":\"20M\"}}"), 0);
	cr_assert(strstr(client_err(&rep), "different options"), "%s", client_err(&rep));
}

Test(clone_quota, a_mounted_source_under_quota_is_cloned_with_the_freeze)
{
	char p[800];
	int err;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"live\",\"Opts\":{\"size\":\"16M\"}}"), 0);
	fill("live", 4 << 20, 3);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"live\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"snap\",\"Opts\":{\"from\":\"live\"}}"), 0, "%s",
		     client_err(&rep));
	cr_assert(json_is_true(json_object_get(json_object_get(status_of("snap"), "clone"), "source_in_use")));
	cr_assert_geq(quota_field("snap", "used_bytes"), 4 << 20);
	/* The source is writable again (thawed) and still limited. */
	vol_path("live", "after", p, sizeof(p));
	cr_assert_eq(testbed_write_bytes(p, 1 << 20, false, &err), 1 << 20, "%s", strerror(err));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"live\",\"ID\":\"m\"}"), 0);
}

typedef struct SlowClone {
	ClientReply rep;
	int r;
	atomic_bool done;
} SlowClone;

static void *clone_thread(void *arg)
{
	SlowClone *c = arg;

	c->r = tb_call(&tb, "Create", &c->rep, "{\"Name\":\"twin\",\"Opts\":{\"from\":\"src\"}}");
	atomic_store(&c->done, true);
	return NULL;
}

/* The next open of a marked file (the daemon's, in the clone), within 60 s. */
static struct fanotify_event_metadata wait_open(int fan)
{
	struct fanotify_event_metadata ev;
	struct pollfd pfd = { .fd = fan, .events = POLLIN };

	cr_assert_eq(poll(&pfd, 1, 60000), 1, "the clone never opened the marked file");
	cr_assert_eq(read(fan, &ev, sizeof(ev)), (ssize_t)sizeof(ev));
	return ev;
}

static void answer(int fan, struct fanotify_event_metadata *ev, uint32_t response)
{
	struct fanotify_response resp = { .fd = ev->fd, .response = response };

	cr_assert_eq(write(fan, &resp, sizeof(resp)), (ssize_t)sizeof(resp));
	close(ev->fd);
}

/*
 * Issue 19 item 3: a Create joined the registry only after its clone, and a
 * resize took only its own volume's op_lock, so a resize of an unlimited
 * volume during a long clone took the same lowest free project ID; the
 * failed clone's rollback then cleared the limit the resized volume depended
 * on. The clone is held (a fanotify permission event on a source file) while
 * the resize runs through the admin socket, then its open is refused.
 */
Test(clone_quota, a_resize_during_a_clone_gets_another_id_and_keeps_its_limit_after_the_rollback)
{
	char p[800], admin_sock[400], twin_dir[700];
	struct fanotify_event_metadata ev;
	SlowClone c = { .r = 0 };
	ClientReply rz = { 0 };
	uint32_t twin_id = 0;
	long long plain_id;
	pthread_t t;
	int fan, fd;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"src\",\"Opts\":{\"size\":\"32M\"}}"), 0, "%s",
		     client_err(&rep));
	fill("src", 1 << 20, 3);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"plain\"}"), 0, "%s", client_err(&rep));
	fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);
	if (fan < 0)
		cr_skip_test("fanotify permission events unavailable: %s", strerror(errno));
	vol_path("src", "data", p, sizeof(p));
	cr_assert_eq(fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD, p), 0, "fanotify_mark: %s", strerror(errno));

	cr_assert_eq(pthread_create(&t, NULL, clone_thread, &c), 0);
	ev = wait_open(fan);
	/* The clone is under way: its directory has its (reserved) project ID. */
	testbed_volume_dir(&tb, 0, "twin", twin_dir, sizeof(twin_dir));
	fd = open(twin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "no clone directory while the clone runs: %s", strerror(errno));
	cr_assert_eq(quota_get_project(fd, &twin_id, NULL), 0);
	close(fd);
	cr_assert_geq(twin_id, QUOTA_PROJID_MIN, "the clone has no project ID of its own yet");

	snprintf(admin_sock, sizeof(admin_sock), "%s/nvmevol-admin.sock", tb.dir);
	cr_assert_geq(client_post(admin_sock, "/Admin.VolumeResize", &rz,
				  "{\"Name\":\"plain\",\"Changes\":{\"size\":\"16M\"}}"), 0);
	cr_assert_eq(rz.status, 200, "resize: %u %s", rz.status, rz.body);
	cr_assert_str_empty(client_err(&rz), "%s", client_err(&rz));
	plain_id = json_integer_value(json_object_get(rz.json, "project_id"));
	client_reply_done(&rz);

	/* Now the clone fails: its rollback clears the limit of its own ID. */
	answer(fan, &ev, FAN_DENY);
	while (!atomic_load(&c.done)) {
		struct pollfd pfd = { .fd = fan, .events = POLLIN };

		if (poll(&pfd, 1, 100) == 1) {
			ev = wait_open(fan);
			answer(fan, &ev, FAN_ALLOW);
		}
	}
	pthread_join(t, NULL);
	close(fan);
	cr_expect_neq(c.r, 0, "the clone did not fail: %s", c.rep.body);
	client_reply_done(&c.rep);

	cr_expect_neq(plain_id, (long long)twin_id, "the resize took the project ID that the clone held");
	cr_expect_eq(quota_field("plain", "project_id"), plain_id);
	cr_expect_eq(quota_field("plain", "enforced_limit_bytes"), 16 << 20,
		     "the failed clone's rollback cleared the resized volume's limit");
	cr_expect_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"twin\"}"), 0, "the failed clone exists");
}

/* `nvmevol ARGS...` against the testbed: the exit status; stderr in @err. */
static int admin(const char *const *args, char *err, size_t len)
{
	static char out[65536];

	return testbed_admin(&tb, args, out, sizeof(out), err, len);
}

Test(clone_quota, a_snapshot_is_never_charged_to_its_volume_and_a_rollback_is)
{
	long long used, n;
	char p[800], err[4096];
	int e;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"sv\",\"Opts\":{\"size\":\"32M\"}}"), 0, "%s",
		     client_err(&rep));
	fill("sv", 20 << 20, 0);
	used = quota_field("sv", "used_bytes");
	cr_assert_eq(admin((const char *const[]){ "volume", "snapshot", "sv", "s1", NULL }, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_leq(quota_field("sv", "used_bytes"), used + (1 << 20), "the snapshot was charged to the volume");

	/* All 20 MiB written anew: charged, the snapshot would leave 12 MiB; it is not, so it fits. */
	vol_path("sv", "data", p, sizeof(p));
	n = testbed_write_bytes(p, 20 << 20, false, &e);
	cr_assert_eq(n, 20 << 20, "a write the limit allows failed after a snapshot: %s", strerror(e));
	cr_assert_leq(quota_field("sv", "used_bytes"), 21 << 20);

	/* A rollback charges the restored files to the volume again, and the limit holds. */
	cr_assert_eq(admin((const char *const[]){ "volume", "rollback", "sv", "s1", NULL }, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_geq(quota_field("sv", "used_bytes"), 20 << 20, "the rolled-back files are not charged to the volume");
	cr_assert_leq(quota_field("sv", "used_bytes"), 21 << 20, "the previous state is still charged");
	vol_path("sv", "more", p, sizeof(p));
	n = testbed_write_bytes(p, 16 << 20, false, &e);
	cr_assert(e == EDQUOT || e == ENOSPC, "writing past the limit after a rollback gave '%s'", strerror(e));
	cr_assert_leq(n, 12 << 20);
}
