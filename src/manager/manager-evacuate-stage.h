/* SPDX-License-Identifier: MIT */
/*
 * An evacuation's passes and the stage they build on the target partition T
 * (manager-evacuate.c runs them and makes the switch). A volume of P travels
 * through snapshots of it on P, which share blocks with each other, so that
 * after the first copy only what changed travels (stream/tree-apply.h: the
 * changes between two snapshots, found by their physical extents, applied on
 * T). The stage is T's nvmevol/snapshots/.evacuating/VOLUME/: one directory
 * per tree, named by its snapshot's ID, listed in state.json (with P's UUID
 * and the volume's creation time, so that a namesake is never taken for it)
 * once whole; a directory not listed is half-built and discarded. It holds:
 *   - each snapshot of the volume, oldest first: a block-sharing copy of the
 *     one before it on T changed by the difference between the two on P (the
 *     first: a full copy), so that they share blocks on T as they did on P;
 *   - the volume as of the last pass ("live"): a snapshot "evacuate-N" of it
 *     (marked "evacuation" in its record, never moved with it), staged as the
 *     previous live tree changed in place, or from the newest staged
 *     snapshot's tree (a copy), or in full.
 * Everything here runs under the volume's op_lock where it says so, else
 * under no lock of the volume: one evacuation runs at a time, and only
 * evacuations and start-up touch a stage.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "manager/manager-internal.h"
#include "pool/snapstore.h"

typedef struct StagedTree {
	char snapshot[VOLUME_NAME_MAX + 1]; /* its snapshot on P */
	char id[SNAPSHOT_ID_LEN + 1];       /* that snapshot's ID: the tree's directory */
	bool live;                          /* the volume as of a pass, not a snapshot to keep */
} StagedTree;

typedef struct Stage {
	int root_fd; /* T:nvmevol/snapshots/.evacuating */
	int fd;      /* .../VOLUME */
	char from[64];
	int64_t created_at;
	StagedTree *trees;
	size_t n;
} Stage;

typedef struct EvacuatePass {
	Manager *m;
	PartitionFs *sfs; /* P's (borrowed) */
	char from[64];    /* P's UUID */
	char name[VOLUME_NAME_MAX + 1];
	int64_t created_at;
	/* T: set by the caller. */
	Partition *to;
	PartitionFs *tfs; /* a reference, dropped by evacuate_pass_done() */
	PartitionInfo tinfo;
	char tname[PARTITION_NAME_MAX];
	VolumeSnapshot *snaps; /* a copy of the volume's snapshots on P, oldest first */
	size_t n;
	VolumeSnapshot top;    /* the pass's own snapshot */
	Stage st;
	SnapDir src;           /* P:snapshots/VOLUME */
	/*
	 * The pass's figures, every tree it staged together: @full when one was
	 * a full copy; @bytes copied (allocated, for a full copy) or written (the
	 * changes); @entries of the volume as of the pass.
	 */
	bool full;
	uint64_t bytes, entries, us;
	unsigned moved_snaps;  /* snapshots staged by this pass */
} EvacuatePass;

void evacuate_pass_init(EvacuatePass *p, Manager *m, PartitionFs *sfs, const char *from);
void evacuate_pass_done(EvacuatePass *p);
/* Whether @s is one of the volume's own snapshots, moved with it. */
bool evacuate_snapshot_moves(const VolumeSnapshot *s);
/* Takes the pass's snapshot "evacuate-N" of @v and copies @v's snapshot list (op_lock held). */
int evacuate_pass_take(EvacuatePass *p, Volume *v, char **reterr_msg);
/* Stages every snapshot not staged yet, then the pass's own as the live tree (no lock of the volume needed). */
int evacuate_pass_stage(EvacuatePass *p, char **reterr_msg);
/* The evacuation snapshot the stage's live tree shows (to keep: the next pass's base), or NULL. */
const char *evacuate_pass_staged_top(const EvacuatePass *p);
/* {"kind","snapshot","bytes","entries","ms","frozen_ms","snapshots_staged"} of the pass. */
json_t *evacuate_pass_json(const EvacuatePass *p);
/*
 * The switch's step 3: the staged snapshots into T:snapshots/VOLUME with
 * their records, the live tree to T:volumes/VOLUME with @nv's new project ID
 * and limits on every file; synced. *@made_dir, *@made_snaps: what to undo.
 */
int evacuate_pass_place(EvacuatePass *p, Volume *nv, bool *made_dir, bool *made_snaps, char **reterr_msg);

/* Removes @v's evacuation snapshots but @keep (op_lock held). */
void evacuate_drop_old_tops(Manager *m, Volume *v, const char *keep);
/* Moves @name of @dirfd on @fs (partition @uuid) to the trash and queues it: 0 (also if it is not there), or -errno. */
int evacuate_discard(Manager *m, PartitionFs *fs, const char *uuid, int dirfd, const char *name);
/* The stage of @volume on @fs, whole, to the trash. */
void evacuate_stage_drop(Manager *m, PartitionFs *fs, const char *uuid, const char *volume);
/* Trashes what evacuate_pass_place() put on T (@made_dir, @made_snaps) and the stage: an undo. */
void evacuate_unplace(Manager *m, PartitionFs *tfs, const char *tuuid, const char *name, bool made_dir,
		      bool made_snaps);
/* Whether partition @part has a stage of @volume from partition @from. */
bool evacuate_stage_held(Manager *m, Partition *part, const char *volume, const char *from);
/* Start-up: deletes the stages whose volume is no longer served from their source. */
void evacuate_sweep_stages(Manager *m);
