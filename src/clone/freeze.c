/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clone/freeze.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

/* One freeze at a time in this process: a guardian may only ever thaw its own freeze. */
static pthread_mutex_t freeze_lock = PTHREAD_MUTEX_INITIALIZER;

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

int freeze_begin(Freeze *f, int fs_fd, unsigned budget_ms)
{
	int pfd[2]; /* [0] the guardian's end, [1] ours */
	pid_t pid;
	uint64_t t0;
	int r;

	*f = (Freeze){ .fs_fd = fs_fd, .guard_fd = -EBADF, .guardian = -1 };
	/* Flush dirty data while writers can still run: FIFREEZE's own sync then has little left. */
	if (syncfs(fs_fd) < 0)
		return negative_errno();

	pthread_mutex_lock(&freeze_lock);
	/* A socket, not a pipe: telling a guardian that already exited must not raise SIGPIPE. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pfd) < 0) {
		r = negative_errno();
		goto fail_unlock;
	}
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
	return 0;

fail_unlock:
	pthread_mutex_unlock(&freeze_lock);
	*f = (Freeze){ .fs_fd = -EBADF, .guard_fd = -EBADF, .guardian = -1 };
	return r;
}

int freeze_end(Freeze *f, uint64_t *ret_frozen_us)
{
	int r = 0, status = 0;

	if (!f->active)
		return 0;
	r = thaw_retrying(f->fs_fd);
	if (r == -EINVAL)
		r = -ESTALE; /* someone else thawed it */
	if (ret_frozen_us)
		*ret_frozen_us = freeze_now_us() - f->started_us;
	if (r < 0 && r != -ESTALE)
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
		} else
			r = -ESTALE; /* its deadline passed and it thawed, before us */
	}
	f->active = false;
	f->guard_fd = -EBADF;
	f->guardian = -1;
	pthread_mutex_unlock(&freeze_lock);
	return r;
}

int freeze_thaw_leftover(int fs_fd)
{
	if (ioctl(fs_fd, FITHAW, 0) == 0)
		return 1;
	/* EINVAL: not frozen (the normal case). */
	return errno == EINVAL ? 0 : negative_errno();
}
