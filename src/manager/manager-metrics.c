/* SPDX-License-Identifier: MIT */
/* The daemon's state as a MetricsSnapshot: partitions, their self-tests and history, volumes, quota usage. */
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "manager/manager-internal.h"
#include "metrics/metrics.h"
#include "pool/sizelimit.h"
#include "util/macro.h"
#include "util/strutil.h"

/* What is read under the registry lock for a volume whose usage needs a quotactl afterwards. */
typedef struct UsageWanted {
	size_t vol;          /* index in the snapshot's volumes */
	Partition *part;
	VolumeOptions opts;
	uint32_t projid;
} UsageWanted;

static void partition_space(PartitionFs *fs, MetricsPartition *mp)
{
	struct statvfs sv;

	if (!fs || fstatvfs(fs->root_fd, &sv) < 0)
		return;
	mp->has_space = true;
	mp->size_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
	mp->free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
	mp->inodes = sv.f_files;
	mp->inodes_free = sv.f_favail;
}

/* Reads used bytes and inodes from the same quota report Status shows. */
static void volume_usage(Manager *m, const UsageWanted *u, MetricsVolume *mv)
{
	PartitionFs *fs = partition_fs_get(m->pool, u->part);
	json_t *q, *b, *i;

	if (!fs)
		return;
	q = sizelimit_status(fs, &u->opts, u->projid);
	b = json_object_get(q, "used_bytes");
	i = json_object_get(q, "used_inodes");
	if (json_is_integer(b) && json_is_integer(i)) {
		mv->has_usage = true;
		mv->used_bytes = (uint64_t)json_integer_value(b);
		mv->used_inodes = (uint64_t)json_integer_value(i);
	}
	json_decref(q);
	partition_fs_put(fs);
}

int manager_metrics_snapshot(Manager *m, MetricsSnapshot *ret)
{
	MetricsSnapshot s = {};
	Partition **parts = NULL;
	PartitionInfo *infos = NULL;
	UsageWanted *usage = NULL;
	size_t n_usage = 0;
	int r = -ENOMEM;

	/* Pool first (partition facts, free space, the self-test state), registry second. */
	s.n_parts = pool_size(m->pool);
	s.parts = calloc(s.n_parts ? s.n_parts : 1, sizeof(MetricsPartition));
	parts = calloc(s.n_parts ? s.n_parts : 1, sizeof(Partition *));
	infos = calloc(s.n_parts ? s.n_parts : 1, sizeof(PartitionInfo));
	if (!s.parts || !parts || !infos)
		goto out;
	for (size_t i = 0; i < s.n_parts; i++) {
		MetricsPartition *mp = &s.parts[i];
		PartitionFs *fs;

		parts[i] = pool_get(m->pool, i);
		partition_snapshot(m->pool, parts[i], &infos[i]);
		snprintf(mp->uuid, sizeof(mp->uuid), "%s", infos[i].uuid);
		label_escape(infos[i].label, mp->label, sizeof(mp->label));
		snprintf(mp->device, sizeof(mp->device), "%s", infos[i].device);
		mp->present = infos[i].present;
		mp->quota = infos[i].quota;
		fs = partition_fs_get(m->pool, parts[i]);
		partition_space(fs, mp);
		partition_fs_put(fs);
		mp->health = manager_health_metric(m, parts[i]);
		if (manager_selftest_metrics(m, parts[i], mp) < 0)
			goto out;
	}

	registry_read_lock(m->reg);
	{
		size_t n = registry_size_locked(m->reg), keep = n < METRICS_VOLUMES_MAX ? n : METRICS_VOLUMES_MAX;

		s.vols = calloc(keep ? keep : 1, sizeof(MetricsVolume));
		usage = calloc(keep ? keep : 1, sizeof(UsageWanted));
		if (!s.vols || !usage) {
			registry_unlock(m->reg);
			goto out;
		}
		for (size_t k = 0; k < n; k++) {
			Volume *v = registry_at_locked(m->reg, k);
			const PartitionInfo *info = NULL;
			MetricsPartition *mp = NULL;
			const char *state;

			for (size_t i = 0; i < s.n_parts; i++)
				if (parts[i] == v->part) {
					info = &infos[i];
					mp = &s.parts[i];
				}
			state = info ? manager_volume_condition(v, info) : "partition-missing";
			metrics_snapshot_count_state(&s, state);
			if (mp)
				mp->volumes++;
			if (k >= keep)
				continue;

			MetricsVolume *mv = &s.vols[s.n_vols++];
			snprintf(mv->name, sizeof(mv->name), "%s", v->name);
			snprintf(mv->partition, sizeof(mv->partition), "%s", v->partition_uuid);
			label_escape(info && info->label[0] ? info->label : v->partition_label, mv->partition_label,
				     sizeof(mv->partition_label));
			mv->state = state;
			mv->mounts = volume_mount_total(v);
			mv->size_limit = v->opts.size_bytes;
			mv->inode_limit = v->opts.inodes;
			mv->created_at = v->created_at;
			if (v->selftest) {
				SelftestVerdict verdict =
					selftest_verdict_from_string(json_string_value(json_object_get(v->selftest, "verdict")));

				if (verdict >= 0) {
					mv->has_verdict = true;
					mv->verdict = verdict;
				}
			}
			if (v->projid && info && info->present)
				usage[n_usage++] = (UsageWanted){ .vol = s.n_vols - 1, .part = v->part, .opts = v->opts,
								  .projid = v->projid };
		}
	}
	registry_unlock(m->reg);

	/* One quotactl per limited volume, outside every lock. */
	for (size_t i = 0; i < n_usage; i++)
		volume_usage(m, &usage[i], &s.vols[usage[i].vol]);

	*ret = s;
	s = (MetricsSnapshot){};
	r = 0;
out:
	metrics_snapshot_done(&s);
	free(parts);
	free(infos);
	free(usage);
	return r;
}
