/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "volume/registry.h"
#include "util/macro.h"

struct Registry {
	pthread_rwlock_t lock;
	Volume **vols; /* sorted by name, except while bulk loading */
	size_t n, cap;
	Volume **shadows; /* unsorted: a handful at most */
	size_t n_shadows;
};

int registry_new(Registry **ret)
{
	Registry *reg = calloc(1, sizeof(*reg));

	if (!reg)
		return -ENOMEM;
	pthread_rwlock_init(&reg->lock, NULL);
	*ret = reg;
	return 0;
}

Registry *registry_free(Registry *reg)
{
	if (!reg)
		return NULL;
	for (size_t i = 0; i < reg->n; i++)
		volume_unref(reg->vols[i]);
	for (size_t i = 0; i < reg->n_shadows; i++)
		volume_unref(reg->shadows[i]);
	free(reg->vols);
	free(reg->shadows);
	pthread_rwlock_destroy(&reg->lock);
	free(reg);
	return NULL;
}

void registry_read_lock(Registry *reg)
{
	pthread_rwlock_rdlock(&reg->lock);
}

void registry_write_lock(Registry *reg)
{
	pthread_rwlock_wrlock(&reg->lock);
}

void registry_unlock(Registry *reg)
{
	pthread_rwlock_unlock(&reg->lock);
}

static size_t lower_bound(Registry *reg, const char *name)
{
	size_t lo = 0, hi = reg->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(reg->vols[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

Volume *registry_find_locked(Registry *reg, const char *name)
{
	size_t i = lower_bound(reg, name);
	return i < reg->n && streq(reg->vols[i]->name, name) ? reg->vols[i] : NULL;
}

Volume *registry_lookup(Registry *reg, const char *name)
{
	Volume *v;

	registry_read_lock(reg);
	v = registry_find_locked(reg, name);
	if (v)
		volume_ref(v);
	registry_unlock(reg);
	return v;
}

size_t registry_count(Registry *reg)
{
	size_t n;

	registry_read_lock(reg);
	n = reg->n;
	registry_unlock(reg);
	return n;
}

size_t registry_size_locked(Registry *reg)
{
	return reg->n;
}

Volume *registry_at_locked(Registry *reg, size_t i)
{
	return i < reg->n ? reg->vols[i] : NULL;
}

static int grow(Volume ***arr, size_t n, size_t *cap)
{
	Volume **na;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 64;
	na = realloc(*arr, c * sizeof(*na));
	if (!na)
		return -ENOMEM;
	*arr = na;
	*cap = c;
	return 0;
}

int registry_insert_locked(Registry *reg, Volume *v)
{
	size_t i = lower_bound(reg, v->name);

	if (i < reg->n && streq(reg->vols[i]->name, v->name))
		return -EEXIST;
	if (grow(&reg->vols, reg->n, &reg->cap) < 0)
		return -ENOMEM;
	memmove(&reg->vols[i + 1], &reg->vols[i], (reg->n - i) * sizeof(*reg->vols));
	reg->vols[i] = volume_ref(v);
	reg->n++;
	return 0;
}

void registry_remove_locked(Registry *reg, Volume *v)
{
	size_t i = lower_bound(reg, v->name);

	if (i < reg->n && reg->vols[i] == v) {
		memmove(&reg->vols[i], &reg->vols[i + 1], (reg->n - i - 1) * sizeof(*reg->vols));
		reg->n--;
		volume_unref(v);
	}
}

int registry_append_locked(Registry *reg, Volume *v)
{
	if (grow(&reg->vols, reg->n, &reg->cap) < 0)
		return -ENOMEM;
	reg->vols[reg->n++] = volume_ref(v);
	return 0;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp((*(Volume *const *)a)->name, (*(Volume *const *)b)->name);
}

int registry_sort_locked(Registry *reg, RegistryPreferFn prefer, void *userdata)
{
	size_t out = 0;
	int r = 0;

	if (reg->n > 1)
		qsort(reg->vols, reg->n, sizeof(*reg->vols), compare_names);
	for (size_t i = 0; i < reg->n; i++) {
		Volume *v = reg->vols[i];

		if (out > 0 && streq(reg->vols[out - 1]->name, v->name)) {
			/* Keep the preferred one in the array, the other as a shadow (its reference moves). */
			if (prefer(v, reg->vols[out - 1], userdata)) {
				Volume *t = reg->vols[out - 1];
				reg->vols[out - 1] = v;
				v = t;
			}
			if (registry_add_shadow_locked(reg, v) < 0)
				r = -ENOMEM;
			volume_unref(v); /* add_shadow took its own reference */
			continue;
		}
		reg->vols[out++] = v;
	}
	reg->n = out;
	return r;
}

int registry_add_shadow_locked(Registry *reg, Volume *v)
{
	Volume **ns = realloc(reg->shadows, (reg->n_shadows + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	reg->shadows = ns;
	reg->shadows[reg->n_shadows++] = volume_ref(v);
	return 0;
}

void registry_foreach_shadow_locked(Registry *reg, const char *name, void (*cb)(Volume *shadow, void *userdata),
				    void *userdata)
{
	for (size_t i = 0; i < reg->n_shadows; i++)
		if (!name || streq(reg->shadows[i]->name, name))
			cb(reg->shadows[i], userdata);
}

bool registry_has_shadow_locked(Registry *reg, const char *name, const void *part)
{
	for (size_t i = 0; i < reg->n_shadows; i++)
		if (streq(reg->shadows[i]->name, name) && (const void *)reg->shadows[i]->part == part)
			return true;
	return false;
}

Volume *registry_take_shadow_locked(Registry *reg, const char *name)
{
	for (size_t i = 0; i < reg->n_shadows; i++)
		if (streq(reg->shadows[i]->name, name)) {
			Volume *v = reg->shadows[i];
			reg->shadows[i] = reg->shadows[--reg->n_shadows];
			return v;
		}
	return NULL;
}

void registry_remove_shadow_locked(Registry *reg, Volume *v)
{
	for (size_t i = 0; i < reg->n_shadows; i++)
		if (reg->shadows[i] == v) {
			reg->shadows[i] = reg->shadows[--reg->n_shadows];
			volume_unref(v);
			return;
		}
}
