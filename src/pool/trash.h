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

/* Queues trash entry @entry of @fs (the queue keeps its own reference to @fs). */
int trash_enqueue(Trash *t, PartitionFs *fs, const char *partition_uuid, const char *entry);
/* Queues every entry of @fs's trash directory. Returns how many. */
int trash_enqueue_all(Trash *t, PartitionFs *fs, const char *partition_uuid);
/* Blocks until nothing is queued or being deleted (tests and tools). */
void trash_wait_idle(Trash *t);
