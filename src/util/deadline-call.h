/* SPDX-License-Identifier: MIT */
/*
 * A call that can block in the kernel for good, in a state no signal ends (a
 * read of a device that does not answer, a write to a frozen filesystem),
 * run in a worker thread and waited for a bounded time. A worker that misses
 * its deadline is left to finish on its own and frees its job when it does;
 * until then, a new call for the same thing (DeadlineCall.same) is answered
 * -ETIMEDOUT at once, so that no second worker piles up behind the first.
 *
 * Process-wide state under one mutex of this file's own; a job's functions
 * run without it, and nothing else is taken while it is held.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct DeadlineCall DeadlineCall;
struct DeadlineCall {
	int (*run)(DeadlineCall *c);    /* in the worker: the call's result */
	void (*free)(DeadlineCall *c);  /* frees the job that embeds @c */
	bool (*same)(const DeadlineCall *a, const DeadlineCall *b); /* both are about one thing */
	/* private, under the file's mutex */
	int r;
	bool done;
	bool abandoned;
	DeadlineCall *next; /* in the list of abandoned calls */
};

/*
 * c->run(c) in a worker, waited for at most @timeout_ms: its result, and @c is
 * the caller's again (to read and free). -ETIMEDOUT when it did not answer in
 * time, or an earlier call for the same thing still has not: @c is then no
 * longer the caller's (its worker, or this call, frees it). Any other error:
 * no worker ran, @c is the caller's.
 */
int deadline_call(DeadlineCall *c, unsigned timeout_ms);

/* Counts the calls that missed their deadline and have finished since: what they were about may answer now. */
uint64_t deadline_call_released(void);
