/* SPDX-License-Identifier: MIT */
/*
 * Cordons: a partition that takes no new volumes (pool/cordon.h), set by the
 * admin, by evacuate, or by the health policy when the NVMe controller
 * reports a critical warning; the check of a Create pinned to one; its part
 * of Status.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "manager/manager-internal.h"
#include "device/nvme-health.h"
#include "util/time-util.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strutil.h"

/* Two writers of one partition's cordon.json (the admin, the health policy) one at a time. */
static pthread_mutex_t cordon_write_lock = PTHREAD_MUTEX_INITIALIZER;

int manager_cordon_set(Manager *m, Partition *part, const PartitionCordon *c, char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX];
	PartitionInfo info;
	PartitionFs *fs;
	int r;

	partition_snapshot(m->pool, part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	fs = partition_fs_get(m->pool, part);
	if (!fs || !info.present)
		r = errmsg_set(reterr_msg, -ENODEV, "partition %s (UUID %s) is not present (%s): its cordon is kept on the "
			       "disk itself, so attach it first", pname, info.uuid, info.problem[0] ? info.problem : "not detected");
	else if (fs->read_only)
		r = errmsg_set(reterr_msg, -EROFS, "partition %s (UUID %s) is mounted read-only until it is adopted, and "
			       "gets no new volumes anyway: run 'nvmevol partition adopt %s' first", pname, info.uuid,
			       info.uuid);
	else {
		pthread_mutex_lock(&cordon_write_lock);
		/* On the disk first: what Status shows is what a restart will find. */
		r = cordon_write(fs->tree_fd, c);
		if (r == 0)
			partition_set_cordon(m->pool, part, c);
		pthread_mutex_unlock(&cordon_write_lock);
		if (r < 0)
			r = errmsg_set(reterr_msg, r, "cannot write nvmevol/%s on partition %s: %s", CORDON_RECORD, pname,
				       errno_str(r));
	}
	partition_fs_put(fs);
	return r;
}

/* {"cordoned":BOOL,"cordon":{"by","since","reason"}} (the second only while cordoned). */
static json_t *cordon_json(const PartitionCordon *c)
{
	char stamp[40];

	if (!c->on)
		return json_pack("{s:b}", "cordoned", false);
	format_rfc3339(c->since, stamp, sizeof(stamp));
	return json_pack("{s:b,s:{s:s,s:s,s:s}}", "cordoned", true, "cordon", "by", cordon_source_to_string(c->by),
			 "since", stamp, "reason", c->reason);
}

int manager_partition_cordon(Manager *m, const char *ref, bool on, const char *reason, json_t **ret_result,
			     char **reterr_msg)
{
	PartitionCordon c = { .on = on, .by = CORDON_BY_ADMIN, .since = (int64_t)time(NULL) };
	PartitionInfo info;
	Partition *part;
	json_t *j;
	int r;

	/* Under create_lock: a Create that picked the partition finishes before the cordon, or sees it. */
	pthread_mutex_lock(&m->create_lock);
	part = pool_find_ref(m->pool, ref, false);
	if (!part) {
		pthread_mutex_unlock(&m->create_lock);
		return errmsg_set(reterr_msg, -ENOENT, "no partition has the label or UUID '%s'; 'nvmevol partition' lists "
				  "them", ref);
	}
	partition_snapshot(m->pool, part, &info);
	if (on && info.cordon.on)
		c = info.cordon; /* already cordoned: keep since when, who and why */
	else if (on)
		snprintf(c.reason, sizeof(c.reason), "%s", reason ? reason : "");
	r = on == info.cordon.on && on ? 0 : manager_cordon_set(m, part, &c, reterr_msg);
	pthread_mutex_unlock(&m->create_lock);
	if (r < 0)
		return r;
	j = cordon_json(&c);
	if (!j || json_object_set_new(j, "partition", json_string(info.uuid)) < 0 ||
	    json_object_set_new(j, "result", json_string(on ? (info.cordon.on ? "already cordoned" : "cordoned")
							 : (info.cordon.on ? "uncordoned" : "not cordoned"))) < 0) {
		json_decref(j);
		return -ENOMEM;
	}
	if (on != info.cordon.on)
		log_info("partition %s: %s%s%s", info.uuid, on ? "cordoned, no new volumes" : "uncordoned",
			 on && c.reason[0] ? ": " : "", on ? c.reason : "");
	*ret_result = j;
	return 0;
}

void manager_cordon_for_health(Manager *m, Partition *part, uint8_t critical_warning)
{
	_cleanup_free_ char *err = NULL;
	PartitionCordon c = { .on = true, .by = CORDON_BY_HEALTH, .since = (int64_t)time(NULL) };
	PartitionInfo info;
	size_t n = 0;
	int r;

	partition_snapshot(m->pool, part, &info);
	if (info.cordon.on || !info.present || info.read_only)
		return;
	n = (size_t)snprintf(c.reason, sizeof(c.reason), "NVMe critical warning 0x%02x:", critical_warning);
	for (unsigned bit = 0; bit < 8 && n < sizeof(c.reason); bit++)
		if (critical_warning & (1u << bit))
			n += (size_t)snprintf(c.reason + n, sizeof(c.reason) - n, " %s", nvme_critical_warning_name(bit));
	r = manager_cordon_set(m, part, &c, &err);
	if (r < 0)
		log_error("partition %s: %s, but it cannot be cordoned: %s", info.uuid, c.reason, err ? err : errno_str(r));
	else
		log_warning("partition %s cordoned by the health policy (%s): no new volumes are placed there; move its "
			    "volumes away with 'nvmevol partition evacuate %s', or 'nvmevol partition uncordon %s'",
			    info.uuid, c.reason, info.uuid, info.uuid);
}

int manager_cordon_check_create(const PartitionInfo *info, const char *pname, const char *name, char **reterr_msg)
{
	if (!info->cordon.on)
		return 0;
	return errmsg_set(reterr_msg, -EPERM,
			  "volume %s: partition %s (UUID %s) is cordoned (by %s%s%s) and takes no new volumes: leave out "
			  "partition= to place it elsewhere, or run 'nvmevol partition uncordon %s'",
			  name, pname, info->uuid, cordon_source_to_string(info->cordon.by), info->cordon.reason[0] ? ": " : "",
			  info->cordon.reason, info->uuid);
}

void manager_cordon_add_status(const PartitionInfo *info, json_t *partition)
{
	json_t *j = cordon_json(&info->cordon);

	if (!j)
		return;
	json_object_update(partition, j);
	json_decref(j);
}
