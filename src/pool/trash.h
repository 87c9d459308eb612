/* SPDX-License-Identifier: MIT */
/*
 * Deleting removed volumes in the background. Remove moves a volume's
 * directory into its partition's nvmevol/trash (one atomic rename) and
 * queues it here; start-up queues whatever an earlier run left there, so a
 * removed volume with millions of files never delays serving. One worker
 * thread, joined by trash_free(), so nothing outlives the partitions it uses.
 * A deletion that fails stays in the trash and is retried at the next start.
 */
#pragma once

#include "pool/pool.h"

typedef struct Trash Trash;

int trash_new(Trash **ret);
/* Stops the worker after the entry it is deleting; queued entries stay on disk for the next start. */
Trash *trash_free(Trash *t);

/* A trash entry's name: the name it had, a dot and 16 hex digits. */
#define TRASH_ENTRY_MAX (128 + 18)
/*
 * Moves @name of directory @from_fd (on @fs) into @fs's trash under a new
 * name (*@ret_entry), one atomic rename: deleting its contents can take long,
 * the worker does it once queued. Syncs neither directory.
 */
int trash_move_in(PartitionFs *fs, int from_fd, const char *name, char ret_entry[static TRASH_ENTRY_MAX]);

/* Queues trash entry @entry of @fs (the queue keeps its own reference to @fs). */
int trash_enqueue(Trash *t, PartitionFs *fs, const char *partition_uuid, const char *entry);
/* Queues every entry of @fs's trash directory. Returns how many. */
int trash_enqueue_all(Trash *t, PartitionFs *fs, const char *partition_uuid);
/* Blocks until nothing is queued or being deleted (tests and tools). */
void trash_wait_idle(Trash *t);
