/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "device/probe-deadline.h"
#include "util/macro.h"

typedef struct Probe {
	char *devname;
	dev_t rdev;         /* 0 when @devname is not a block device (an image file) */
	ProbedDevice result;
	int r;
	bool done;          /* guarded by lock */
	bool abandoned;     /* its caller gave up: the worker frees it */
	struct Probe *next; /* in the list of abandoned probes */
} Probe;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static Probe *abandoned; /* probes still blocked after their caller gave up */
static uint64_t released;

static void probe_free(Probe *p)
{
	probed_device_done(&p->result);
	free(p->devname);
	free(p);
}

static void *worker(void *userdata)
{
	Probe *p = userdata;
	int r = probe_device(p->devname, &p->result);

	pthread_mutex_lock(&lock);
	p->r = r;
	p->done = true;
	if (p->abandoned) {
		for (Probe **q = &abandoned; *q; q = &(*q)->next)
			if (*q == p) {
				*q = p->next;
				break;
			}
		released++;
		probe_free(p);
	} else
		pthread_cond_broadcast(&finished);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static bool still_blocked_locked(const char *devname, dev_t rdev)
{
	for (Probe *q = abandoned; q; q = q->next)
		if ((rdev && q->rdev == rdev) || streq(q->devname, devname))
			return true;
	return false;
}

int probe_device_deadline(const char *devname, unsigned timeout_ms, ProbedDevice *ret)
{
	struct timespec deadline;
	pthread_attr_t attr;
	pthread_t t;
	struct stat st;
	Probe *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->devname = strdup(devname);
	if (!p->devname) {
		free(p);
		return -ENOMEM;
	}
	/* The node's inode: stat never reads the device. */
	if (stat(devname, &st) == 0 && S_ISBLK(st.st_mode))
		p->rdev = st.st_rdev;

	pthread_mutex_lock(&lock);
	if (still_blocked_locked(devname, p->rdev)) {
		pthread_mutex_unlock(&lock);
		probe_free(p);
		return -ETIMEDOUT;
	}
	r = -pthread_attr_init(&attr);
	if (r == 0) {
		/* Small stack: libblkid needs little; detached: nobody joins a worker that may never return. */
		(void)pthread_attr_setstacksize(&attr, 256 * 1024);
		(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = -pthread_create(&t, &attr, worker, p);
		pthread_attr_destroy(&attr);
	}
	if (r < 0) {
		pthread_mutex_unlock(&lock);
		probe_free(p);
		return r;
	}
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_ms / 1000;
	deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	while (!p->done && pthread_cond_timedwait(&finished, &lock, &deadline) != ETIMEDOUT)
		;
	if (!p->done) {
		p->abandoned = true;
		p->next = abandoned;
		abandoned = p;
		pthread_mutex_unlock(&lock);
		return -ETIMEDOUT;
	}
	pthread_mutex_unlock(&lock);
	r = p->r;
	if (r == 0) {
		*ret = p->result;
		p->result = (ProbedDevice){ 0 };
	}
	probe_free(p);
	return r;
}

uint64_t probe_deadline_released(void)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = released;
	pthread_mutex_unlock(&lock);
	return n;
}
