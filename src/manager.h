/* SPDX-License-Identifier: MIT */
/*
 * The volume manager: the registry of volumes, their records on the
 * partitions and the index in the state directory, and the operations the
 * plugin API exposes. Every operation returns 0 or -errno; on failure
 * *reterr_msg (malloc'd) holds the text for Docker's "Err".
 *
 * Locking: reg_lock (rwlock) guards the registry and every volume's fields;
 * it is only held for memory work. Each volume's op_lock serialises its slow
 * operations (mount, self-test, unmount, remove) without blocking Get, List,
 * Capabilities or operations on other volumes.
 */
#pragma once

#include <jansson.h>

#include "config.h"
#include "options.h"

typedef struct Manager Manager;

int manager_new(const Config *cfg, Manager **ret);
Manager *manager_free(Manager *m);

/* Takes the state lock, discovers partitions, loads records, reconciles with mountinfo. */
int manager_start(Manager *m, char **reterr_msg);

int manager_create(Manager *m, const char *name, const VolumeOptions *opts, char **reterr_msg);
int manager_remove(Manager *m, const char *name, char **reterr_msg);
int manager_mount(Manager *m, const char *name, const char *id, char **ret_mountpoint, char **reterr_msg);
int manager_unmount(Manager *m, const char *name, const char *id, char **reterr_msg);
/* *ret_mountpoint is NULL when the volume is not mounted. */
int manager_path(Manager *m, const char *name, char **ret_mountpoint, char **reterr_msg);
/* {"Name","Mountpoint"?,"CreatedAt","Status"} */
int manager_get(Manager *m, const char *name, json_t **ret_volume, char **reterr_msg);
/*
 * Calls @cb for every volume, sorted by name, with its mountpoint or NULL when
 * not mounted. Runs under the registry's read lock: @cb must not call back into
 * the manager. List is built this way so 10,000 volumes cost no JSON tree.
 */
typedef void (*ManagerListCallback)(const char *name, const char *mountpoint, void *userdata);
int manager_list(Manager *m, ManagerListCallback cb, void *userdata);

/* For tests and tools: number of volumes in the registry. */
size_t manager_count(Manager *m);
