/* SPDX-License-Identifier: MIT */
/*
 * A partition's cordon: while it is cordoned, placement gives it no new
 * volumes (its own volumes are served as before). The state is the file
 * nvmevol/cordon.json on the partition itself, so it travels with the disk
 * like the records do; pool.c reads it at each attach into Partition.cordon.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define CORDON_RECORD "cordon.json"
#define CORDON_REASON_MAX 256

typedef enum CordonSource {
	CORDON_BY_ADMIN,  /* nvmevol partition cordon (or evacuate) */
	CORDON_BY_HEALTH, /* the health policy: the NVMe controller reported a critical warning */
	_CORDON_SOURCE_MAX,
	_CORDON_SOURCE_INVALID = -22,
} CordonSource;

typedef struct PartitionCordon {
	bool on;
	CordonSource by;
	int64_t since;                  /* unix seconds */
	char reason[CORDON_REASON_MAX]; /* printable; "" when the admin gave none */
} PartitionCordon;

const char *cordon_source_to_string(CordonSource s);

/* Reads nvmevol/cordon.json of @tree_fd: ret->on false if there is none; -EUCLEAN if it is damaged. */
int cordon_read(int tree_fd, PartitionCordon *ret);
/* Writes it durably (temp file, fsync, rename, fsync of nvmevol/); @c->on false removes it durably. */
int cordon_write(int tree_fd, const PartitionCordon *c);
