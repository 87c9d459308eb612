/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "pool/projid.h"
#include "pool/quota.h"
#include "util/alloc-util.h"

void projid_set_add(ProjidSet *s, uint32_t id)
{
	if (s->err || id == 0)
		return;
	if (GROW_ARRAY(s->ids, s->cap, s->n + 1, 64) < 0) {
		s->err = -ENOMEM;
		return;
	}
	s->ids[s->n++] = id;
}

void projid_alloc_init(ProjidAlloc *a)
{
	*a = (ProjidAlloc){ .held = NULL };
	pthread_mutex_init(&a->lock, NULL);
}

void projid_alloc_done(ProjidAlloc *a)
{
	pthread_mutex_destroy(&a->lock);
	free(a->held);
	a->held = NULL;
	a->n_held = a->cap_held = 0;
}

int projid_reserve(ProjidAlloc *a, const void *space, uint32_t min_id, ProjidCollectFn collect, void *userdata,
		   uint32_t *ret_id)
{
	ProjidSet used = { .ids = NULL };
	uint32_t id = 0;
	int r = 0;

	*ret_id = 0;
	pthread_mutex_lock(&a->lock);
	collect(&used, userdata);
	for (size_t i = 0; i < a->n_held; i++)
		if (a->held[i].space == space)
			projid_set_add(&used, a->held[i].id);
	if (used.err)
		r = used.err;
	else if (GROW_ARRAY(a->held, a->cap_held, a->n_held + 1, 16) < 0)
		r = -ENOMEM;
	else {
		id = quota_next_free_id(used.ids, used.n, min_id);
		if (id == 0)
			r = -ENOSPC;
		else
			a->held[a->n_held++] = (ProjidHeld){ .space = space, .id = id };
	}
	pthread_mutex_unlock(&a->lock);
	free(used.ids);
	*ret_id = id;
	return r;
}

static void drop(ProjidAlloc *a, const void *space, uint32_t id)
{
	if (id == 0)
		return;
	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_held; i++)
		if (a->held[i].space == space && a->held[i].id == id) {
			a->held[i] = a->held[--a->n_held];
			break;
		}
	pthread_mutex_unlock(&a->lock);
}

void projid_commit(ProjidAlloc *a, const void *space, uint32_t id)
{
	drop(a, space, id);
}

void projid_release(ProjidAlloc *a, const void *space, uint32_t id)
{
	drop(a, space, id);
}

bool projid_is_reserved(ProjidAlloc *a, const void *space, uint32_t id)
{
	bool found = false;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->n_held && !found; i++)
		found = a->held[i].space == space && a->held[i].id == id;
	pthread_mutex_unlock(&a->lock);
	return found;
}
