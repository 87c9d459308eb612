/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "volume/options-intern.h"
#include "util/macro.h"

/*
 * Chained hash table keyed by the options' fields (never their padding, which
 * a struct copy need not preserve). The entry is found again from the options'
 * address at release: options are the entry's first member.
 */
typedef struct Entry {
	VolumeOptions o;
	struct Entry *next;
	uint64_t hash;
	unsigned refs;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry **buckets;
static size_t n_buckets, n_entries;

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h;
}

/* Thresholds compare as bytes (8 doubles, no padding): at worst -0.0 and 0.0 are not shared. */
static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
	for (const unsigned char *c = p; n > 0; n--, c++)
		h = (h ^ *c) * 0x100000001b3ULL;
	return mix(h, 0xff);
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return mix(h, 0xff);
}

static uint64_t options_hash(const VolumeOptions *o)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	h = mix_str(h, o->partition);
	h = mix_str(h, o->node);
	h = mix(h, (uint64_t)o->has_uid | (uint64_t)o->has_gid << 1 | (uint64_t)o->has_mode << 2 |
			   (uint64_t)o->allow_suid << 3 | (uint64_t)o->allow_devices << 4);
	h = mix(h, (uint64_t)o->uid << 32 | o->gid);
	h = mix(h, o->mode);
	h = mix(h, o->size_bytes);
	h = mix(h, o->inodes);
	h = mix(h, (uint64_t)(uint32_t)o->selftest << 32 | (uint32_t)o->health);
	h = mix_bytes(h, &o->thresholds, sizeof(o->thresholds));
	return h;
}

static bool options_equal(const VolumeOptions *a, const VolumeOptions *b)
{
	return streq(a->partition, b->partition) && streq(a->node, b->node) && a->has_uid == b->has_uid &&
	       a->has_gid == b->has_gid && a->has_mode == b->has_mode && a->uid == b->uid && a->gid == b->gid &&
	       a->mode == b->mode && a->size_bytes == b->size_bytes && a->inodes == b->inodes &&
	       a->selftest == b->selftest && a->health == b->health && a->allow_suid == b->allow_suid &&
	       a->allow_devices == b->allow_devices &&
	       memcmp(&a->thresholds, &b->thresholds, sizeof(a->thresholds)) == 0;
}

/* Doubles the table when it is as full as it has buckets; a failed grow keeps the old one (longer chains). */
static void maybe_grow(void)
{
	size_t n = n_buckets ? n_buckets * 2 : 16;
	Entry **nb;

	if (n_entries < n_buckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < n_buckets; i++)
		for (Entry *e = buckets[i], *next; e; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	free(buckets);
	buckets = nb;
	n_buckets = n;
}

const VolumeOptions *volume_options_intern(const VolumeOptions *o)
{
	uint64_t h = options_hash(o);
	Entry *e;

	pthread_mutex_lock(&lock);
	maybe_grow();
	if (!buckets) {
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	for (e = buckets[h & (n_buckets - 1)]; e; e = e->next)
		if (e->hash == h && options_equal(&e->o, o)) {
			e->refs++;
			pthread_mutex_unlock(&lock);
			return &e->o;
		}
	e = calloc(1, sizeof(*e));
	if (e) {
		e->o = *o;
		e->hash = h;
		e->refs = 1;
		e->next = buckets[h & (n_buckets - 1)];
		buckets[h & (n_buckets - 1)] = e;
		n_entries++;
	}
	pthread_mutex_unlock(&lock);
	return e ? &e->o : NULL;
}

void volume_options_release(const VolumeOptions *o)
{
	Entry *e, **p;

	if (!o)
		return;
	e = (Entry *)((char *)o - offsetof(Entry, o));
	pthread_mutex_lock(&lock);
	if (--e->refs == 0) {
		for (p = &buckets[e->hash & (n_buckets - 1)]; *p != e; p = &(*p)->next)
			;
		*p = e->next;
		n_entries--;
		free(e);
	}
	pthread_mutex_unlock(&lock);
}

size_t volume_options_interned(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = n_entries;
	pthread_mutex_unlock(&lock);
	return n;
}
