/* SPDX-License-Identifier: MIT */
/*
 * What a clone must still change so that it matches its source at the instant
 * the filesystem was frozen: recorded while frozen (nothing can be written
 * then, nvmevol's own writes included), applied after the thaw. Operations
 * are relative to a cursor that ENTER and LEAVE move through the clone's
 * tree; the bytes of WRITE operations are kept in memory, at most
 * ClonePlan.data_max of them (-E2BIG past it).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clone/clone-meta.h"

typedef enum ClonePlanOpType {
	CLONE_PLAN_ENTER,   /* name: a directory */
	CLONE_PLAN_LEAVE,
	CLONE_PLAN_REMOVE,  /* name: anything, directories recursively */
	CLONE_PLAN_MKDIR,   /* name */
	CLONE_PLAN_CREATE,  /* name: an empty regular file */
	CLONE_PLAN_WRITE,   /* name, offset, length, data */
	CLONE_PLAN_PUNCH,   /* name, offset, length */
	CLONE_PLAN_SIZE,    /* name, length = the size */
	CLONE_PLAN_SYMLINK, /* name, target */
	CLONE_PLAN_MKNOD,   /* name, mode (type), rdev */
	CLONE_PLAN_LINK,    /* name, target = path of the first link from the clone's root */
	CLONE_PLAN_META,    /* name, or NULL for the current directory; meta */
	_CLONE_PLAN_OP_MAX,
} ClonePlanOpType;

typedef struct ClonePlanOp {
	ClonePlanOpType type;
	char *name;
	char *target;
	uint64_t offset, length;
	size_t data_off;
	mode_t mode;
	dev_t rdev;
	CloneMeta meta;
} ClonePlanOp;

typedef struct ClonePlan {
	ClonePlanOp *ops;
	size_t n, cap;
	char *data;
	size_t data_len, data_cap, data_max;
	size_t op_bytes; /* what the operations take (names, targets, attributes), counted against data_max */
} ClonePlan;

void clone_plan_init(ClonePlan *p, size_t data_max);
void clone_plan_done(ClonePlan *p);

/* Appends an operation; copies @name and @target, takes @meta's attributes (if not NULL). -E2BIG when full. */
int clone_plan_add(ClonePlan *p, ClonePlanOpType type, const char *name, const char *target, CloneMeta *meta);
/* The last operation added, to fill in numbers. */
ClonePlanOp *clone_plan_last(ClonePlan *p);
/* Room for @len bytes of data: *ret_off is where they go (p->data + off); -E2BIG past data_max. */
int clone_plan_reserve(ClonePlan *p, size_t len, size_t *ret_off);

/*
 * Applies the plan to the clone rooted at @dst_fd. On failure the clone is
 * left half-changed: the caller discards it. *reterr_msg names the operation.
 */
int clone_plan_apply(const ClonePlan *p, int dst_fd, char **reterr_msg);

/*
 * Opens the directory that holds @path (relative to @root_fd, '/'-separated,
 * no symlink followed, no mount crossed) and sets *ret_leaf to the last
 * component. Used for hard links, whose first name can be anywhere.
 */
int clone_plan_open_parent(int root_fd, const char *path, int *ret_fd, const char **ret_leaf);
