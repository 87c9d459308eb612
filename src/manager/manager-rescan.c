/* SPDX-License-Identifier: MIT */
/*
 * The background rescan. A probe of a device that hangs costs this thread its
 * deadline (probe-deadline.h), never a request: Get answers from what is known,
 * Mount and Create wait for a scan only a bounded time.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "manager/manager-internal.h"
#include "util/log.h"
#include "util/macro.h"

#define POLL_MS 500 /* how often the devices' fingerprint is compared */

/* One scan and the loading of what it attached (rescan_lock; the caller holds nothing). */
static void scan_once(Manager *m)
{
	_cleanup_free_ Partition **attached = NULL;
	size_t n = 0;

	pthread_mutex_lock(&m->rescan_lock);
	if (pool_scan(m->pool, &attached, &n) == 0 && n > 0)
		manager_load_attached(m, attached, n);
	pthread_mutex_unlock(&m->rescan_lock);
}

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *rescan_thread(void *userdata)
{
	Manager *m = userdata;
	struct timespec ts;

	pthread_mutex_lock(&m->rescan_wait);
	while (!m->rescan_stop) {
		uint64_t asked;
		bool scan;

		if (m->rescan_requested == m->rescan_covered) {
			deadline_in(&ts, POLL_MS);
			(void)pthread_cond_timedwait(&m->rescan_wake, &m->rescan_wait, &ts);
		}
		if (m->rescan_stop)
			break;
		asked = m->rescan_requested;
		scan = asked != m->rescan_covered;
		pthread_mutex_unlock(&m->rescan_wait);

		/* The fingerprint reads /proc/partitions and sysfs, never a device. */
		if (scan || pool_devices_changed(m->pool))
			scan_once(m);

		pthread_mutex_lock(&m->rescan_wait);
		if (scan) {
			/* Every request made before this scan began is answered by it. */
			m->rescan_covered = asked;
			pthread_cond_broadcast(&m->rescan_done);
		}
	}
	pthread_mutex_unlock(&m->rescan_wait);
	return NULL;
}

int manager_rescan_start(Manager *m)
{
	int r;

	pthread_mutex_lock(&m->rescan_wait);
	m->rescan_stop = false;
	r = -pthread_create(&m->rescan_thread, NULL, rescan_thread, m);
	m->rescan_running = r == 0;
	pthread_mutex_unlock(&m->rescan_wait);
	return r;
}

void manager_rescan_stop(Manager *m)
{
	bool running;

	pthread_mutex_lock(&m->rescan_wait);
	running = m->rescan_running;
	m->rescan_stop = true;
	m->rescan_running = false;
	pthread_cond_broadcast(&m->rescan_wake);
	pthread_cond_broadcast(&m->rescan_done);
	pthread_mutex_unlock(&m->rescan_wait);
	/* At most one probe deadline: a scan in progress skips what does not answer. */
	if (running)
		pthread_join(m->rescan_thread, NULL);
}

bool manager_rescan(Manager *m, unsigned interval_ms, unsigned wait_ms)
{
	struct timespec ts;
	uint64_t mine;
	bool done;

	if (!pool_scan_is_stale(m->pool, interval_ms) && !pool_devices_changed(m->pool))
		return true;
	pthread_mutex_lock(&m->rescan_wait);
	if (!m->rescan_running) {
		/* Start-up, or a tool without the thread: scan here. */
		pthread_mutex_unlock(&m->rescan_wait);
		scan_once(m);
		return true;
	}
	mine = ++m->rescan_requested;
	pthread_cond_signal(&m->rescan_wake);
	deadline_in(&ts, wait_ms);
	while (wait_ms > 0 && m->rescan_covered < mine && !m->rescan_stop &&
	       pthread_cond_timedwait(&m->rescan_done, &m->rescan_wait, &ts) != ETIMEDOUT)
		;
	done = m->rescan_covered >= mine;
	pthread_mutex_unlock(&m->rescan_wait);
	return done;
}

void manager_rescan_kick(Manager *m, unsigned interval_ms)
{
	if (!pool_scan_is_stale(m->pool, interval_ms))
		return;
	pthread_mutex_lock(&m->rescan_wait);
	if (m->rescan_running && m->rescan_requested == m->rescan_covered) {
		m->rescan_requested++;
		pthread_cond_signal(&m->rescan_wake);
	}
	pthread_mutex_unlock(&m->rescan_wait);
}
