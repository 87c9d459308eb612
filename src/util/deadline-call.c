/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "util/deadline-call.h"

/* A worker needs little: probe and system calls, no deep recursion. */
#define WORKER_STACK_SIZE (256 * 1024)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static DeadlineCall *abandoned; /* calls still running after their caller gave up */
static uint64_t released;

static void *worker(void *userdata)
{
	DeadlineCall *c = userdata;
	int r = c->run(c);

	pthread_mutex_lock(&lock);
	c->r = r;
	c->done = true;
	if (!c->abandoned) {
		/* The caller frees @c once it sees done: not touched after the unlock. */
		pthread_cond_broadcast(&finished);
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	for (DeadlineCall **q = &abandoned; *q; q = &(*q)->next)
		if (*q == c) {
			*q = c->next;
			break;
		}
	released++;
	pthread_mutex_unlock(&lock);
	c->free(c);
	return NULL;
}

static bool still_running_locked(const DeadlineCall *c)
{
	for (const DeadlineCall *q = abandoned; q; q = q->next)
		if (q->same == c->same && c->same(q, c))
			return true;
	return false;
}

int deadline_call(DeadlineCall *c, unsigned timeout_ms)
{
	struct timespec deadline;
	pthread_attr_t attr;
	pthread_t t;
	int r;

	c->done = c->abandoned = false;
	c->next = NULL;
	pthread_mutex_lock(&lock);
	if (still_running_locked(c)) {
		pthread_mutex_unlock(&lock);
		c->free(c);
		return -ETIMEDOUT;
	}
	r = -pthread_attr_init(&attr);
	if (r == 0) {
		/* Detached: nobody joins a worker that may never return. */
		(void)pthread_attr_setstacksize(&attr, WORKER_STACK_SIZE);
		(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = -pthread_create(&t, &attr, worker, c);
		pthread_attr_destroy(&attr);
	}
	if (r < 0) {
		pthread_mutex_unlock(&lock);
		return r;
	}
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while (!c->done && pthread_cond_timedwait(&finished, &lock, &deadline) != ETIMEDOUT)
		;
	if (!c->done) {
		c->abandoned = true;
		c->next = abandoned;
		abandoned = c;
		pthread_mutex_unlock(&lock);
		return -ETIMEDOUT;
	}
	pthread_mutex_unlock(&lock);
	return c->r;
}

uint64_t deadline_call_released(void)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = released;
	pthread_mutex_unlock(&lock);
	return n;
}
