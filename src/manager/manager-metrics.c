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

/* Used bytes and inodes from quota accounting, as Status shows them; one reference per partition in a row. */
static void volumes_usage(Manager *m, const UsageWanted *usage, size_t n, MetricsSnapshot *s)
{
	Partition *part = NULL;
	PartitionFs *fs = NULL;

	for (size_t i = 0; i < n; i++) {
		MetricsVolume *mv = &s->vols[usage[i].vol];

		if (usage[i].part != part) {
			partition_fs_put(fs);
			part = usage[i].part;
			fs = partition_fs_get(m->pool, part);
		}
		/* What Status's quota object shows as used_bytes/used_inodes: only where quota is enforced. */
		if (fs && fs->quota && sizelimit_usage(fs, usage[i].projid, &mv->used_bytes, &mv->used_inodes) == 0)
			mv->has_usage = true;
	}
	partition_fs_put(fs);
}

/* A partition's UUID and escaped label in the snapshot's strings, shared by its volumes' series. */
typedef struct PartStrings {
	MetricsStr uuid, label;
} PartStrings;

/*
 * The name and partition strings of @v's series: its partition's own when the
 * record's UUID and label are the partition's (the usual case), copies otherwise.
 */
static int volume_strings(MetricsSnapshot *s, const Volume *v, const PartitionInfo *info, const PartStrings *ps,
			  MetricsVolume *mv)
{
	char label[64];
	int r;

	r = metrics_snapshot_add_string(s, v->name, &mv->name);
	if (r < 0)
		return r;
	if (ps && streq(metrics_str(s, ps->uuid), v->partition_uuid))
		mv->partition = ps->uuid;
	else if ((r = metrics_snapshot_add_string(s, v->partition_uuid, &mv->partition)) < 0)
		return r;
	label_escape(info && info->label[0] ? info->label : v->partition_label, label, sizeof(label));
	if (ps && streq(metrics_str(s, ps->label), label))
		mv->partition_label = ps->label;
	else if ((r = metrics_snapshot_add_string(s, label, &mv->partition_label)) < 0)
		return r;
	return 0;
}

int manager_metrics_snapshot(Manager *m, MetricsSnapshot *ret)
{
	MetricsSnapshot s = {};
	Partition **parts = NULL;
	PartitionInfo *infos = NULL;
	PartStrings *pstr = NULL;
	UsageWanted *usage = NULL;
	size_t n_usage = 0;
	int r = -ENOMEM;

	/* Pool first (partition facts, free space, the self-test state), registry second. */
	s.n_parts = pool_size(m->pool);
	s.parts = calloc(s.n_parts ? s.n_parts : 1, sizeof(MetricsPartition));
	parts = calloc(s.n_parts ? s.n_parts : 1, sizeof(Partition *));
	infos = calloc(s.n_parts ? s.n_parts : 1, sizeof(PartitionInfo));
	pstr = calloc(s.n_parts ? s.n_parts : 1, sizeof(PartStrings));
	if (!s.parts || !parts || !infos || !pstr)
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
		mp->cordoned = infos[i].cordon.on;
		mp->quota = infos[i].quota;
		fs = partition_fs_get(m->pool, parts[i]);
		partition_space(fs, mp);
		partition_fs_put(fs);
		if (metrics_snapshot_add_string(&s, mp->uuid, &pstr[i].uuid) < 0 ||
		    metrics_snapshot_add_string(&s, mp->label, &pstr[i].label) < 0)
			goto out;
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
			const PartStrings *ps = NULL;
			const char *state;

			for (size_t i = 0; i < s.n_parts; i++)
				if (parts[i] == v->part) {
					info = &infos[i];
					mp = &s.parts[i];
					ps = &pstr[i];
				}
			state = info ? manager_volume_condition(v, info) : "partition-missing";
			metrics_snapshot_count_state(&s, state);
			if (mp)
				mp->volumes++;
			if (k >= keep)
				continue;

			MetricsVolume *mv = &s.vols[s.n_vols++];
			if (volume_strings(&s, v, info, ps, mv) < 0) {
				registry_unlock(m->reg);
				goto out;
			}
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
				usage[n_usage++] = (UsageWanted){ .vol = s.n_vols - 1, .part = v->part, .projid = v->projid };
		}
	}
	registry_unlock(m->reg);

	/* One quotactl per limited volume, outside every lock. */
	volumes_usage(m, usage, n_usage, &s);

	*ret = s;
	s = (MetricsSnapshot){};
	r = 0;
out:
	metrics_snapshot_done(&s);
	free(parts);
	free(infos);
	free(pstr);
	free(usage);
	return r;
}
