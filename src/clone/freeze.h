/* SPDX-License-Identifier: MIT */
/*
 * Freezing a filesystem (FIFREEZE) for a bounded time and always thawing it
 * (FITHAW). While frozen, every write to it waits: nvmevol's own writes too,
 * so nothing may be written there between freeze_begin() and freeze_end().
 *
 * Three things thaw a freeze that its holder does not end:
 *  - a guardian process (forked with _Fork(): no atfork handlers, only
 *    async-signal-safe calls in the child) if the daemon dies or hangs past
 *    the budget plus FREEZE_GUARD_GRACE_MS. It cannot outlive a daemon that is
 *    PID 1 of its namespace (a managed plugin: the kernel kills the namespace
 *    with it);
 *  - freeze_abort_all(), from the thread that takes SIGTERM: Docker follows
 *    it with SIGKILL, which nothing survives;
 *  - freeze_recover() at the next start, through the marker.
 *
 * The marker: a file written (FreezeMarker) before FIFREEZE and removed after
 * FITHAW, holding this boot's ID. It lives in the host's state directory,
 * never on the filesystem frozen (that one takes no write while frozen, and an
 * attach must be able to mark a partition whose state it does not know yet).
 * It needs no fsync: a freeze does not outlive the kernel, and a process crash
 * keeps the page cache. Only a marker of this boot makes freeze_recover()
 * thaw: a filesystem frozen by anyone else (an admin's fsfreeze) is left alone.
 *
 * One freeze at a time in the process (a mutex inside), so a guardian can
 * never thaw someone else's freeze.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FREEZE_GUARD_GRACE_MS 1000
#define FREEZE_MARKER_NAME_MAX 64

/* Where a freeze is marked: @name (the partition's UUID) in @dir_fd. */
typedef struct FreezeMarker {
	int dir_fd;
	const char *name;
} FreezeMarker;

typedef struct Freeze {
	int fs_fd;
	pid_t guardian;
	int guard_fd;        /* our end of the guardian's socket */
	uint64_t started_us; /* CLOCK_MONOTONIC before FIFREEZE */
	uint64_t freeze_call_us; /* how long FIFREEZE itself took (it syncs the filesystem) */
	int marker_fd;       /* the marker's directory, or -EBADF (none) */
	char marker_name[FREEZE_MARKER_NAME_MAX];
	bool active;
} Freeze;

/*
 * Writes the marker (@marker NULL: none, for tests), syncs the filesystem of
 * @fs_fd (writers are not held during that), starts the guardian with a
 * deadline of @budget_ms + FREEZE_GUARD_GRACE_MS and freezes. -EBUSY if it is
 * already frozen, -ECANCELED after freeze_abort_all(). On failure nothing is
 * frozen and no marker is left.
 */
int freeze_begin(Freeze *f, int fs_fd, const FreezeMarker *marker, unsigned budget_ms);

/*
 * Thaws, stops the guardian and removes the marker (kept if the thaw failed:
 * the next start thaws). *ret_frozen_us: from before FIFREEZE to after FITHAW
 * (what writers waited at most). -ESTALE when the filesystem was no longer
 * frozen: someone (the guardian, past its deadline, or an admin) thawed it, so
 * it was not frozen for the whole time; -ECANCELED when freeze_abort_all()
 * thawed it. A no-op when not active.
 */
int freeze_end(Freeze *f, uint64_t *ret_frozen_us);

/*
 * The stop: thaws the freeze in progress, if any (its holder sees
 * freeze_aborted() and freeze_end() answers -ECANCELED), and makes every
 * later freeze_begin() fail. Takes no lock a freeze holds for long; call it
 * from the signal-taking thread before waiting for the request threads.
 */
void freeze_abort_all(void);
bool freeze_aborted(void);

/*
 * Around each write of a thread of this process that may run while another
 * thread holds a freeze (the trash worker): waits while a freeze is held.
 * Such a write would otherwise wait inside the kernel, where a SIGKILL does
 * not end it, and a daemon killed inside its freeze (no guardian left, as PID
 * 1 of a plugin) could never exit: no restart, no start-up thaw, every
 * request and the next receive hanging. Never call it while holding a freeze.
 * A write that waits on someone else's freeze holds freezes off: after
 * FREEZE_GATE_WAIT_MS, freeze_begin() answers -EBUSY (as FIFREEZE would).
 */
#define FREEZE_GATE_WAIT_MS 2000 /* a freeze_begin() waits that long for such a write, then answers -EBUSY */
void freeze_writes_enter(void);
void freeze_writes_leave(void);

/*
 * At attach, before anything is written to the filesystem of @fs_fd: thaws it
 * if @marker says nvmevol froze it in this boot (1: it was frozen; 0: it was
 * not), and removes the marker (one of an earlier boot is removed unread).
 * Never blocks on a frozen filesystem, and leaves anyone else's freeze alone:
 * freeze_probe_writes() tells whether there is one.
 */
int freeze_recover(int fs_fd, const FreezeMarker *marker);

/*
 * How long freeze_probe_writes() waits. On a filesystem that takes writes the
 * probe answers in microseconds, or after one directory read (or one
 * directory made, on a new partition) when the name is not cached; on a host
 * whose disks are busy that can take hundreds of ms (seen in CI: a partition
 * refused at 500 ms), so the deadline is the device probe's (2 s). It is paid
 * once per attach of a partition that does not take writes (start-up waits
 * for it), and a probe that was merely slow is made good by the rescan its
 * late answer causes (deadline_call_released()).
 */
#define FREEZE_PROBE_DEADLINE_MS 2000

/*
 * Whether the filesystem of @fs_fd takes writes, without freezing it (a
 * FIFREEZE would sync the whole filesystem while holding every writer) and
 * without changing it: mkdirat() of @dir_name, a directory under @fs_fd,
 * takes the mount's write access (sb_start_write) before it looks the name
 * up, so it waits while the filesystem is frozen and otherwise answers EEXIST
 * at once (a @dir_name that does not exist yet is made with @mode, as the
 * caller would). That wait is uninterruptible (6.18 XFS: D state in
 * percpu_rwsem_wait, SIGKILL does not end it before the thaw), so it runs in
 * a worker (util/deadline-call.h) on its own copy of @fs_fd.
 *
 * 0: it takes writes. -ETIMEDOUT: no answer within FREEZE_PROBE_DEADLINE_MS
 * (frozen by someone else, or a device that does not answer), or an earlier
 * probe of this filesystem still has not answered; the worker finishes on its
 * own and deadline_call_released() counts it then. Else -errno of mkdirat.
 */
int freeze_probe_writes(int fs_fd, const char *dir_name, mode_t mode);

/*
 * Below this FIFREEZE's own writeback took 75-380 ms at load 8-10 (17,000 files: 10-16 MiB), well
 * inside the 1 s freeze budget, and a wait of up to 30 s would buy little; at 56 MiB (100,000 files)
 * it took 560 ms and the freeze 930 ms: near the budget (tests/bench/RESULTS.md, section 10).
 */
#define FREEZE_WRITEBACK_MIN_BYTES (32u << 20)
/*
 * FIFREEZE writes back in place all the metadata that is only in XFS's log
 * so far, holding every writer meanwhile: after a live pass that made 100,000
 * files, hundreds of ms. XFS writes it back by itself, writers going on (its
 * log worker pushes everything every fs.xfs.xfssyncd_centisecs, 30 s by
 * default), and nothing else asks it to without holding writers. So when more
 * than FREEZE_WRITEBACK_MIN_BYTES of log wait for that, this waits, at most
 * @max_ms, until the log's tail has passed its head as of now (after a log
 * force). *ret_waited_us: how long; *ret_backlog_bytes: what there was. 0 as
 * well when there is little or the log cannot be read (not XFS, no sysfs);
 * -ETIMEDOUT past @max_ms; -ECANCELED after freeze_abort_all().
 */
#define FREEZE_WRITEBACK_POLL_MS 20
int freeze_wait_writeback(int fs_fd, unsigned max_ms, uint64_t *ret_waited_us, uint64_t *ret_backlog_bytes);

/* FITHAW, whoever froze it: 1 if it was frozen, 0 if not, or -errno. For tests and for freeze_recover(). */
int freeze_thaw_leftover(int fs_fd);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t freeze_now_us(void);
