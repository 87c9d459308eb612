/* SPDX-License-Identifier: MIT */
/*
 * The registry: every volume nvmevol serves, by name, in a sorted array, and
 * the "shadowed" records of names that exist on two partitions (served from
 * one, kept on the other, reported in Status).
 *
 * Locking rule: one rwlock guards the array, the shadows and, as volume.h
 * says, the mutable fields of every registered Volume. It is held for memory
 * work only, never across I/O; the pool mutex may be taken inside it, nothing
 * else. Functions named *_locked expect the caller to hold it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "volume/volume.h"

typedef struct Registry Registry;

int registry_new(Registry **ret);
Registry *registry_free(Registry *reg);

void registry_read_lock(Registry *reg);
void registry_write_lock(Registry *reg);
void registry_unlock(Registry *reg);

/* A new reference to the volume called @name, or NULL. Takes the lock. */
Volume *registry_lookup(Registry *reg, const char *name);
size_t registry_count(Registry *reg);

Volume *registry_find_locked(Registry *reg, const char *name);
size_t registry_size_locked(Registry *reg);
Volume *registry_at_locked(Registry *reg, size_t i);
/* Adds a reference to @v in name order; -EEXIST if the name is taken. */
int registry_insert_locked(Registry *reg, Volume *v);
/* Drops @v (if it is the one registered under its name). */
void registry_remove_locked(Registry *reg, Volume *v);

/* Start-up: append unsorted, then sort once (a sorted insert each is O(n²) for 10,000 volumes). */
int registry_append_locked(Registry *reg, Volume *v);
/* Sorts; of several volumes with one name, @prefer picks the served one, the others become shadows. */
typedef bool (*RegistryPreferFn)(Volume *a, Volume *b, void *userdata); /* true: serve @a rather than @b */
int registry_sort_locked(Registry *reg, RegistryPreferFn prefer, void *userdata);

/* Keeps @v as a shadowed record: a second volume of a name that is served from elsewhere. */
int registry_add_shadow_locked(Registry *reg, Volume *v);
/* Calls @cb for each shadow of @name (of every name if @name is NULL). */
void registry_foreach_shadow_locked(Registry *reg, const char *name, void (*cb)(Volume *shadow, void *userdata),
				    void *userdata);
/* True if a shadow of @name from partition @part is kept already. */
bool registry_has_shadow_locked(Registry *reg, const char *name, const void *part);
/* Drops shadow @v (its record is gone: a finished evacuation's old copy). */
void registry_remove_shadow_locked(Registry *reg, Volume *v);
/* Removes and returns (with its reference) one shadow of @name, or NULL: it can be served now. */
Volume *registry_take_shadow_locked(Registry *reg, const char *name);
