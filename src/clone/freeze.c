/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clone/freeze.h"
#include "device/xfs-geometry.h"
#include "device/xfs-log.h"
#include "util/deadline-call.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

/* One freeze at a time in this process: a guardian may only ever thaw its own freeze. */
static pthread_mutex_t freeze_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * What freeze_abort_all() thaws: the filesystem of the freeze in progress.
 * active_lock guards active_fd and is held only around an ioctl (never while
 * FIFREEZE syncs), so the signal thread never waits for a freeze.
 */
static pthread_mutex_t active_lock = PTHREAD_MUTEX_INITIALIZER;
static int active_fd = -EBADF;
static atomic_bool aborted;

/*
 * The gate of this process's own writers that run beside a freeze (the trash):
 * each write passes it (freeze_writes_enter()), and a freeze holds it from
 * before FIFREEZE until after FITHAW. A thread that waits here ends with a
 * SIGKILL; one that waits inside the kernel on the frozen filesystem does not
 * (D state until the thaw) and keeps the whole killed process from exiting,
 * so no restart could thaw it. Writer-preferring: a busy trash cannot hold a
 * freeze off for more than the write it is in.
 */
static pthread_rwlock_t writes_gate = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"
#define MARKER_SIZE_MAX 256

uint64_t freeze_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Closes every descriptor but @a and @b (async-signal-safe: raw close_range). */
static void close_all_but(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	if (lo > 0)
		(void)close_range(0, (unsigned)lo - 1, 0);
	if (hi > lo + 1)
		(void)close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
	(void)close_range((unsigned)hi + 1, ~0u, 0);
}

/*
 * FITHAW until it takes (or the filesystem is not frozen): one failed thaw must
 * not leave every writer of the partition waiting. At most FREEZE_GUARD_GRACE_MS.
 * Async-signal-safe (the guardian uses it).
 */
static int thaw_retrying(int fs_fd)
{
	int r = 0;

	for (unsigned i = 0; i <= FREEZE_GUARD_GRACE_MS / 10; i++) {
		if (ioctl(fs_fd, FITHAW, 0) == 0)
			return 0;
		if (errno == EINVAL)
			return i == 0 ? -EINVAL : 0; /* not frozen (any more) */
		r = -errno;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	return r;
}

/* The guardian: waits for 'T' (thawed by the parent); EOF (the parent died or could not thaw) or the deadline thaws. */
static _Noreturn void guardian_main(int fs_fd, int rfd, uint64_t deadline_us)
{
	char c = 0;

	close_all_but(fs_fd, rfd);
	for (;;) {
		struct pollfd p = { .fd = rfd, .events = POLLIN };
		uint64_t now = freeze_now_us();
		int n;

		if (now >= deadline_us)
			break;
		n = poll(&p, 1, (int)((deadline_us - now + 999) / 1000));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 1 && recv(rfd, &c, 1, 0) == 1 && c == 'T')
			_exit(0);
		if (n != 0)
			break; /* EOF or error: the parent is gone, or could not thaw */
	}
	_exit(thaw_retrying(fs_fd) == 0 ? 3 : 4); /* 3: this guardian thawed it */
}

/*
 * Test builds: NVMEVOL_TEST_FREEZE_NO_GUARDIAN=1 freezes without a guardian,
 * as when the daemon is PID 1 of a managed plugin and dies with its children,
 * so that crash tests reach the start-up thaw.
 */
static bool guardian_wanted(void)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_FREEZE_NO_GUARDIAN");

	return !(e && streq(e, "1"));
#else
	return true;
#endif
}

/* This boot's ID ("" if the kernel does not say: every marker then counts as this boot's). */
static void boot_id(char *buf, size_t len)
{
	_cleanup_free_ char *s = NULL;

	buf[0] = '\0';
	if (read_file_at(AT_FDCWD, BOOT_ID_PATH, 64, &s, NULL) == 0)
		snprintf(buf, len, "%.*s", (int)strcspn(s, "\n"), s);
}

static int marker_write(const Freeze *f)
{
	char id[64], buf[MARKER_SIZE_MAX];
	int n;

	boot_id(id, sizeof(id));
	n = snprintf(buf, sizeof(buf), "boot %s\npid %ld\n", id, (long)getpid());
	return write_file_replace_at(f->marker_fd, f->marker_name, buf, (size_t)n, 0600);
}

static void marker_remove(int dir_fd, const char *name)
{
	if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
		log_warning("cannot remove the freeze marker %s: %s (the next start finds it and thaws nothing frozen)",
			    name, errno_str(errno));
}

/* 1: @m marks a freeze of this boot (the filesystem may still be frozen by us); 0: none (a stale one is removed). */
static int marker_is_ours(const FreezeMarker *m)
{
	_cleanup_free_ char *s = NULL;
	char id[64], want[80];
	int r;

	r = read_file_at(m->dir_fd, m->name, MARKER_SIZE_MAX, &s, NULL);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return 1; /* unreadable: it was written, so we may have frozen it */
	boot_id(id, sizeof(id));
	snprintf(want, sizeof(want), "boot %s\n", id);
	if (id[0] && strncmp(s, "boot ", 5) == 0 && strncmp(s, want, strlen(want)) != 0) {
		marker_remove(m->dir_fd, m->name); /* an earlier boot: its freeze ended with that kernel */
		return 0;
	}
	return 1;
}

void freeze_abort_all(void)
{
	pthread_mutex_lock(&active_lock);
	atomic_store(&aborted, true);
	if (active_fd >= 0 && ioctl(active_fd, FITHAW, 0) == 0)
		log_info("stopping: thawed the partition frozen for a clone (the clone is abandoned)");
	pthread_mutex_unlock(&active_lock);
}

bool freeze_aborted(void)
{
	return atomic_load(&aborted);
}

/*
 * Waits for the gate's write in progress, at most FREEZE_GATE_WAIT_MS: one that
 * does not end waits on a filesystem someone else froze (FIFREEZE would be
 * refused with EBUSY as well).
 */
static int gate_close(void)
{
	struct timespec until;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += FREEZE_GATE_WAIT_MS / 1000;
	r = pthread_rwlock_clockwrlock(&writes_gate, CLOCK_MONOTONIC, &until);
	if (r == ETIMEDOUT) {
		log_warning("a write of the trash did not end in %d s (a partition frozen by someone else?): no freeze "
			    "until it does", FREEZE_GATE_WAIT_MS / 1000);
		return -EBUSY;
	}
	return -r;
}

void freeze_writes_enter(void)
{
	(void)pthread_rwlock_rdlock(&writes_gate);
}

void freeze_writes_leave(void)
{
	(void)pthread_rwlock_unlock(&writes_gate);
}

static bool set_active(int fd)
{
	bool ok;

	pthread_mutex_lock(&active_lock);
	ok = fd < 0 || !atomic_load(&aborted);
	if (ok)
		active_fd = fd;
	pthread_mutex_unlock(&active_lock);
	return ok;
}

int freeze_begin(Freeze *f, int fs_fd, const FreezeMarker *marker, unsigned budget_ms)
{
	int pfd[2]; /* [0] the guardian's end, [1] ours */
	pid_t pid;
	uint64_t t0;
	bool gated = false;
	int r;

	*f = (Freeze){ .fs_fd = fs_fd, .guard_fd = -EBADF, .guardian = -1, .marker_fd = -EBADF };
	if (marker) {
		if (strlen(marker->name) >= sizeof(f->marker_name))
			return -ENAMETOOLONG;
		f->marker_fd = marker->dir_fd;
		strcpy(f->marker_name, marker->name);
	}
	/* Flush dirty data while writers can still run: FIFREEZE's own sync then has little left. */
	if (syncfs(fs_fd) < 0)
		return negative_errno();

	pthread_mutex_lock(&freeze_lock);
	if (!set_active(fs_fd)) {
		r = -ECANCELED;
		goto fail_unlock;
	}
	/* Before FIFREEZE, and where the freeze cannot hold it up: the next start thaws only what is marked. */
	if (f->marker_fd >= 0) {
		r = marker_write(f);
		if (r < 0)
			goto fail_unlock;
	}
	/* A socket, not a pipe: telling a guardian that already exited must not raise SIGPIPE. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pfd) < 0) {
		r = negative_errno();
		goto fail_unlock;
	}
	/* The trash's write in progress ends, its next one waits: none of ours waits on the frozen filesystem. */
	r = gate_close();
	if (r < 0)
		goto fail_unlock;
	gated = true;
	t0 = freeze_now_us();
	if (guardian_wanted()) {
		pid = _Fork();
		if (pid < 0) {
			r = negative_errno();
			(void)close(pfd[0]);
			(void)close(pfd[1]);
			goto fail_unlock;
		}
		if (pid == 0)
			guardian_main(fs_fd, pfd[0], t0 + ((uint64_t)budget_ms + FREEZE_GUARD_GRACE_MS) * 1000u);
		f->guardian = pid;
	}
	(void)close(pfd[0]);
	f->guard_fd = pfd[1];

	f->started_us = freeze_now_us();
	if (ioctl(fs_fd, FIFREEZE, 0) < 0) {
		r = negative_errno();
		/* Not frozen: tell the guardian it has nothing to thaw. */
		(void)send(f->guard_fd, "T", 1, MSG_NOSIGNAL);
		(void)close(f->guard_fd);
		if (f->guardian > 0)
			(void)waitpid(f->guardian, NULL, 0);
		goto fail_unlock;
	}
	f->freeze_call_us = freeze_now_us() - f->started_us;
	f->active = true;
	/* A stop during FIFREEZE may have found nothing to thaw: the holder sees freeze_aborted() and ends it. */
	return 0;

fail_unlock:
	if (gated)
		(void)pthread_rwlock_unlock(&writes_gate);
	if (f->marker_fd >= 0)
		marker_remove(f->marker_fd, f->marker_name);
	(void)set_active(-EBADF);
	pthread_mutex_unlock(&freeze_lock);
	*f = (Freeze){ .fs_fd = -EBADF, .guard_fd = -EBADF, .guardian = -1, .marker_fd = -EBADF };
	return r;
}

int freeze_end(Freeze *f, uint64_t *ret_frozen_us)
{
	int r = 0, status = 0;

	if (!f->active)
		return 0;
	(void)set_active(-EBADF);
	r = thaw_retrying(f->fs_fd);
	if (r == -EINVAL)
		r = freeze_aborted() ? -ECANCELED : -ESTALE; /* someone else thawed it */
	if (ret_frozen_us)
		*ret_frozen_us = freeze_now_us() - f->started_us;
	if (r < 0 && r != -ESTALE && r != -ECANCELED)
		log_error("cannot thaw a frozen partition (%s): its writers wait until it is thawed (fsfreeze --unfreeze)",
			  errno_str(r));
	/* Only a done thaw is announced: otherwise the guardian, seeing the socket close, tries again. */
	if (r == 0 || r == -ESTALE)
		(void)send(f->guard_fd, "T", 1, MSG_NOSIGNAL);
	(void)close(f->guard_fd);
	while (f->guardian > 0 && waitpid(f->guardian, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
		if (r < 0 && r != -ESTALE) {
			/* Our thaw failed and the guardian's worked: frozen for the whole time after all. */
			log_warning("the partition was thawed by the freeze guardian after a failed thaw");
			r = 0;
		} else if (r == 0)
			r = -ESTALE; /* its deadline passed and it thawed, before us */
	}
	/* Thawed (by anyone): nothing of ours is frozen. A failed thaw keeps the marker for the next start. */
	if (f->marker_fd >= 0 && (r == 0 || r == -ESTALE || r == -ECANCELED))
		marker_remove(f->marker_fd, f->marker_name);
	f->active = false;
	f->guard_fd = -EBADF;
	f->guardian = -1;
	(void)pthread_rwlock_unlock(&writes_gate);
	pthread_mutex_unlock(&freeze_lock);
	return r;
}

int freeze_recover(int fs_fd, const FreezeMarker *marker)
{
	int r;

	if (!marker || !marker_is_ours(marker))
		return 0;
	r = freeze_thaw_leftover(fs_fd);
	if (r >= 0)
		marker_remove(marker->dir_fd, marker->name);
	return r;
}

/* A write probe: its own descriptor (the caller's may be closed while it waits) and name. */
typedef struct WriteProbe {
	DeadlineCall call; /* first: a DeadlineCall * is the WriteProbe * */
	int fd;
	dev_t dev;
	mode_t mode;
	char name[];
} WriteProbe;

static int write_probe_run(DeadlineCall *c)
{
	WriteProbe *w = (WriteProbe *)c;

	if (mkdirat(w->fd, w->name, w->mode) < 0 && errno != EEXIST)
		return negative_errno();
	return 0;
}

static void write_probe_free(DeadlineCall *c)
{
	WriteProbe *w = (WriteProbe *)c;

	(void)close(w->fd);
	free(w);
}

static bool write_probe_same(const DeadlineCall *a, const DeadlineCall *b)
{
	return ((const WriteProbe *)a)->dev == ((const WriteProbe *)b)->dev;
}

int freeze_probe_writes(int fs_fd, const char *dir_name, mode_t mode)
{
	size_t len = strlen(dir_name) + 1;
	struct stat st;
	WriteProbe *w;
	int r;

	/* fstat takes no write access: it answers on a frozen filesystem. */
	if (fstat(fs_fd, &st) < 0)
		return negative_errno();
	w = malloc(sizeof(*w) + len);
	if (!w)
		return -ENOMEM;
	*w = (WriteProbe){ .call = { .run = write_probe_run, .free = write_probe_free, .same = write_probe_same },
			   .dev = st.st_dev, .mode = mode };
	memcpy(w->name, dir_name, len);
	w->fd = fcntl(fs_fd, F_DUPFD_CLOEXEC, 3);
	if (w->fd < 0) {
		free(w);
		return negative_errno();
	}
	r = deadline_call(&w->call, FREEZE_PROBE_DEADLINE_MS);
	if (r != -ETIMEDOUT)
		write_probe_free(&w->call); /* else the worker's now */
	return r;
}

int freeze_wait_writeback(int fs_fd, unsigned max_ms, uint64_t *ret_waited_us, uint64_t *ret_backlog_bytes)
{
	_cleanup_close_ int log_fd = -EBADF;
	uint64_t t0 = freeze_now_us(), backlog;
	XfsGeometry geo;
	XfsLsn head, tail;
	int r;

	*ret_waited_us = 0;
	*ret_backlog_bytes = 0;
	if (xfs_geometry_read(fs_fd, &geo) < 0 || geo.log_blocks == 0 || xfs_log_open(fs_fd, &log_fd) < 0)
		return 0; /* not XFS, an external log, or no sysfs: nothing to go by */
	/* The log force: what is only in memory (the CIL) goes to the log, so the head counts it. */
	if (syncfs(fs_fd) < 0)
		return negative_errno();
	if (xfs_log_read(log_fd, &head, &tail) < 0)
		return 0;
	backlog = xfs_lsn_distance(tail, head, (uint64_t)geo.log_blocks * geo.block_size / 512);
	if (backlog == UINT64_MAX)
		return 0;
	*ret_backlog_bytes = backlog * 512;
	if (*ret_backlog_bytes < FREEZE_WRITEBACK_MIN_BYTES)
		return 0;
	for (;;) {
		r = xfs_log_read(log_fd, &(XfsLsn){ 0 }, &tail);
		*ret_waited_us = freeze_now_us() - t0;
		if (r < 0 || xfs_lsn_reached(tail, head))
			return 0;
		if (freeze_aborted())
			return -ECANCELED;
		if (*ret_waited_us >= (uint64_t)max_ms * 1000u)
			return -ETIMEDOUT;
		(void)nanosleep(&(struct timespec){ .tv_nsec = FREEZE_WRITEBACK_POLL_MS * 1000 * 1000 }, NULL);
	}
}

int freeze_thaw_leftover(int fs_fd)
{
	if (ioctl(fs_fd, FITHAW, 0) == 0)
		return 1;
	/* EINVAL: not frozen (the normal case). */
	return errno == EINVAL ? 0 : negative_errno();
}
