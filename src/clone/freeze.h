/* SPDX-License-Identifier: MIT */
/*
 * Freezing a filesystem (FIFREEZE) for a bounded time and always thawing it
 * (FITHAW). While frozen, every write to it waits: nvmevol's own writes too,
 * so nothing may be written between freeze_begin() and freeze_end().
 *
 * A guardian process (forked with _Fork(): no atfork handlers, only
 * async-signal-safe calls in the child) thaws the filesystem if the daemon
 * dies or hangs past the budget plus FREEZE_GUARD_GRACE_MS. It cannot outlive
 * a daemon that is PID 1 of its namespace (a managed plugin: the kernel kills
 * the namespace with it); start-up then thaws with freeze_thaw_leftover().
 *
 * One freeze at a time in the process (a mutex inside), so a guardian can
 * never thaw someone else's freeze.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define FREEZE_GUARD_GRACE_MS 1000

typedef struct Freeze {
	int fs_fd;
	pid_t guardian;
	int guard_fd;        /* our end of the guardian's socket */
	uint64_t started_us; /* CLOCK_MONOTONIC before FIFREEZE */
	uint64_t freeze_call_us; /* how long FIFREEZE itself took (it syncs the filesystem) */
	bool active;
} Freeze;

/*
 * Syncs the filesystem of @fs_fd (writers are not held during that), starts the
 * guardian with a deadline of @budget_ms + FREEZE_GUARD_GRACE_MS and freezes.
 * -EBUSY if it is already frozen. On failure nothing is frozen.
 */
int freeze_begin(Freeze *f, int fs_fd, unsigned budget_ms);

/*
 * Thaws and stops the guardian. *ret_frozen_us: from before FIFREEZE to after
 * FITHAW (what writers waited at most). -ESTALE when the filesystem was no
 * longer frozen: someone (the guardian, past its deadline, or an admin)
 * thawed it, so it was not frozen for the whole time. A no-op when not active.
 */
int freeze_end(Freeze *f, uint64_t *ret_frozen_us);

/* Thaws a filesystem a crash left frozen: 1 if it was frozen, 0 if not, or -errno. */
int freeze_thaw_leftover(int fs_fd);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t freeze_now_us(void);
