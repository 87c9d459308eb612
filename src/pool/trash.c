/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "clone/freeze.h"
#include "pool/trash.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct TrashJob {
	struct TrashJob *next;
	PartitionFs *fs;
	char uuid[64];
	char entry[NAME_MAX + 1];
} TrashJob;

struct Trash {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* work queued, or stop; and "idle" for trash_wait_idle() */
	TrashJob *head, *tail;
	bool busy, stop, started;
	pthread_t thread;
};

int trash_new(Trash **ret)
{
	Trash *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	*ret = t;
	return 0;
}

int trash_move_in(PartitionFs *fs, int from_fd, const char *name, char ret_entry[static TRASH_ENTRY_MAX])
{
	uint64_t rnd = 0;

	if (strlen(name) > 128)
		return -ENAMETOOLONG;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)ret_entry; /* only needs to differ from other trash names */
	snprintf(ret_entry, TRASH_ENTRY_MAX, "%s.%016llx", name, (unsigned long long)rnd);
	if (renameat(from_fd, name, fs->trash_fd, ret_entry) < 0)
		return negative_errno();
	return 0;
}

/* The trash deletes beside freezes of its partition: it waits between its writes, never inside one (freeze.h). */
static const RmRfGate freeze_gate = { .enter = freeze_writes_enter, .leave = freeze_writes_leave };

static void job_free(TrashJob *j)
{
	partition_fs_put(j->fs);
	free(j);
}

static void *worker(void *arg)
{
	Trash *t = arg;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		TrashJob *j;
		int r;

		while (!t->head && !t->stop)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->stop)
			break;
		j = t->head;
		t->head = j->next;
		if (!t->head)
			t->tail = NULL;
		t->busy = true;
		pthread_mutex_unlock(&t->lock);

		r = rm_rf_at_gated(j->fs->trash_fd, j->entry, &freeze_gate);
		if (r < 0)
			log_warning_errno(r, "partition %s: deleting trash/%s failed; retried at the next start", j->uuid,
					  j->entry);
		else
			log_debug("partition %s: trash/%s deleted", j->uuid, j->entry);
		freeze_writes_enter();
		(void)fsync(j->fs->trash_fd);
		freeze_writes_leave();
		job_free(j);
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
		{
			/* Tests widen the window after a deletion (a slow trash, a race with a new volume). */
			const char *e = getenv("NVMEVOL_TEST_TRASH_PAUSE_MS");
			if (e)
				usleep((useconds_t)atoi(e) * 1000);
		}
#endif

		pthread_mutex_lock(&t->lock);
		t->busy = false;
		pthread_cond_broadcast(&t->cond);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

Trash *trash_free(Trash *t)
{
	if (!t)
		return NULL;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	if (t->started)
		pthread_join(t->thread, NULL);
	while (t->head) {
		TrashJob *j = t->head;
		t->head = j->next;
		job_free(j);
	}
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return NULL;
}

int trash_enqueue(Trash *t, PartitionFs *fs, const char *partition_uuid, const char *entry)
{
	TrashJob *j = calloc(1, sizeof(*j));
	int r = 0;

	if (!j)
		return -ENOMEM;
	__atomic_add_fetch(&fs->refs, 1, __ATOMIC_ACQ_REL);
	j->fs = fs;
	snprintf(j->uuid, sizeof(j->uuid), "%s", partition_uuid);
	snprintf(j->entry, sizeof(j->entry), "%s", entry);

	pthread_mutex_lock(&t->lock);
	if (!t->started && !t->stop) {
		r = -pthread_create(&t->thread, NULL, worker, t);
		t->started = r == 0;
	}
	if (r == 0 && !t->stop) {
		if (t->tail)
			t->tail->next = j;
		else
			t->head = j;
		t->tail = j;
		j = NULL;
		pthread_cond_broadcast(&t->cond);
	}
	pthread_mutex_unlock(&t->lock);
	if (j) {
		/* Not queued: it stays in the trash for the next start. */
		job_free(j);
		return r < 0 ? r : -ESHUTDOWN;
	}
	return 0;
}

int trash_enqueue_all(Trash *t, PartitionFs *fs, const char *partition_uuid)
{
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (fs->trash_fd < 0 || fs->read_only)
		return 0;
	d = opendir_fd(fs->trash_fd);
	if (!d)
		return negative_errno();
	while ((de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, "..") &&
		    trash_enqueue(t, fs, partition_uuid, de->d_name) == 0)
			n++;
	closedir(d);
	return n;
}

void trash_wait_idle(Trash *t)
{
	pthread_mutex_lock(&t->lock);
	while ((t->head || t->busy) && !t->stop)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}
