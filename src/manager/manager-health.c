/* SPDX-License-Identifier: MIT */
/*
 * The device checks of the manager: the NVMe health of each partition's
 * controller, read with nvme-health.c and cached per partition
 * (NVMEVOL_HEALTH_CACHE_SECONDS), refreshed before a volume's first mount and
 * before placement; the device policy (device-policy.c) applied at Mount and
 * Create; and the device part of Status.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device-report.h"
#include "manager/manager-internal.h"
#include "device/nvme-health.h"
#include "util/time-util.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

/* One reading of a controller's health. */
typedef struct HealthReading {
	bool ok;                /* health holds a reading; else error says why not */
	NvmeHealth health;
	char error[256];
	int64_t read_at;        /* unix seconds, for Status */
	uint64_t read_mono_ms;
} HealthReading;

/* Guarded by the partition's health_lock. */
typedef struct HealthCache {
	bool valid;          /* last holds a published reading */
	HealthReading last;
	bool reading;        /* one thread is reading, without health_lock: the others use the last one */
	pthread_cond_t done; /* broadcast when a reading is published */
	uint8_t cordoned_for; /* the critical warning this run cordoned the partition for (0: none) */
} HealthCache;


static bool is_nvme(const PartitionDevice *dev)
{
	return dev->has_facts && dev->facts.nvme_controller[0];
}

/* The cache of @part (health_lock held), made on first use; NULL on ENOMEM. */
static HealthCache *cache_locked(Partition *part)
{
	HealthCache *c = part->health_cache;

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		pthread_cond_init(&c->done, NULL);
		part->health_cache = c;
	}
	return c;
}

/* The admin commands (seconds on a busy or resetting controller): called without any lock. */
static void read_health(Partition *part, const PartitionDevice *dev, HealthReading *ret)
{
	_cleanup_free_ char *err = NULL;

	ret->ok = nvme_health_read(dev->facts.nvme_controller, dev->facts.nvme_controller_devnum, &ret->health,
				   &err) == 0;
	snprintf(ret->error, sizeof(ret->error), "%s", ret->ok ? "" : err ? err : "unknown error");
	ret->read_at = (int64_t)time(NULL);
	ret->read_mono_ms = now_mono_ms();
	if (!ret->ok)
		log_warning("partition UUID %s: %s", part->uuid, ret->error);
}

/*
 * A copy of the partition's health, read anew when the cached one is older
 * than @max_age_ms (0 = always) and @read is set; *ret_cached is false only
 * when this call read it. False when it is not on NVMe or nothing was ever
 * read. The reading runs without health_lock, one at a time per partition:
 * Get and the metrics meanwhile copy the last one; a caller that needs a
 * reading and has none waits for the one in flight.
 */
static bool get_health(Manager *m, Partition *part, const PartitionDevice *dev, uint64_t max_age_ms, bool read,
		       HealthReading *ret, bool *ret_cached)
{
	HealthReading fresh;
	HealthCache *c;
	bool have;

	*ret_cached = true;
	if (!is_nvme(dev))
		return false;
	pthread_mutex_lock(&part->health_lock);
	c = read ? cache_locked(part) : part->health_cache;
	while (read && c && c->reading && !c->valid)
		pthread_cond_wait(&c->done, &part->health_lock);
	if (read && c && !c->reading && !(c->valid && now_mono_ms() - c->last.read_mono_ms < max_age_ms)) {
		c->reading = true;
		pthread_mutex_unlock(&part->health_lock);
		read_health(part, dev, &fresh);
		pthread_mutex_lock(&part->health_lock);
		c->last = fresh;
		c->valid = true;
		c->reading = false;
		pthread_cond_broadcast(&c->done);
		*ret_cached = false;
	}
	have = c && c->valid;
	if (have)
		*ret = c->last;
	pthread_mutex_unlock(&part->health_lock);
	return have;
}

static DevicePolicySettings settings_for(Manager *m, const VolumeOptions *o)
{
	bool own = o && o->health != DEVICE_POLICY_UNSET;

	return (DevicePolicySettings){
		.require_nvme = m->cfg->require_nvme,
		.health = own ? o->health : m->cfg->health,
		.health_setting = own ? "volume option health" : "NVMEVOL_HEALTH",
	};
}

static void evaluate(Manager *m, const PartitionInfo *info, const PartitionDevice *dev, const HealthReading *h, bool have_h,
		     const VolumeOptions *o, DeviceDecision *ret)
{
	DevicePolicySettings s = settings_for(m, o);

	device_policy_evaluate(&s,
			       &(DeviceInputs){
				       .facts = &dev->facts,
				       .uuid = info->uuid,
				       .listed = dev->listed,
				       .xfs = dev->has_xfs ? &dev->xfs : NULL,
				       .health = have_h && h->ok ? &h->health : NULL,
				       .health_error = have_h && !h->ok ? h->error : NULL,
			       },
			       ret);
}

/*
 * True the first time a reading shows critical warning @cw (0 resets): an
 * admin's uncordon then holds until the controller reports another warning
 * (or the plugin restarts), instead of being undone by the next reading.
 */
static bool new_critical_warning(Partition *part, uint8_t cw)
{
	HealthCache *c;
	bool first;

	pthread_mutex_lock(&part->health_lock);
	c = part->health_cache;
	first = c && cw && c->cordoned_for != cw;
	if (c)
		c->cordoned_for = cw;
	pthread_mutex_unlock(&part->health_lock);
	return first;
}

/* Placement order from a fresh reading (pool.h): refused under the plugin-wide settings goes last. */
static void set_rank(Manager *m, Partition *part, const PartitionInfo *info, const PartitionDevice *dev,
		     const HealthReading *h)
{
	PartitionHealthRank rank = PARTITION_HEALTH_UNKNOWN_OR_OK;
	DeviceDecision d;

	if (h->ok) {
		switch (nvme_health_judge(&h->health, NULL, 0)) {
		case NVME_HEALTH_WARNING:
			rank = PARTITION_HEALTH_WARNING;
			break;
		case NVME_HEALTH_CRITICAL:
			rank = PARTITION_HEALTH_CRITICAL;
			break;
		default:
			break;
		}
		evaluate(m, info, dev, h, true, NULL, &d);
		if (d.verdict == DEVICE_VERDICT_REFUSE)
			rank = PARTITION_HEALTH_REFUSED;
	}
	partition_set_health_rank(m->pool, part, rank);
	/* A failing controller gets no new volumes, under warn as under enforce (off: nvmevol does not judge). */
	if (h->ok && new_critical_warning(part, h->health.critical_warning) &&
	    (m->cfg->health == DEVICE_POLICY_WARN || m->cfg->health == DEVICE_POLICY_ENFORCE))
		manager_cordon_for_health(m, part, h->health.critical_warning);
}

void manager_health_refresh_all(Manager *m)
{
	uint64_t max_age = m->cfg->health_cache_seconds * 1000;

	for (size_t i = 0; i < pool_size(m->pool); i++) {
		Partition *part = pool_get(m->pool, i);
		PartitionDevice dev;
		PartitionInfo info;
		HealthReading h;
		bool cached;

		partition_snapshot(m->pool, part, &info);
		if (!info.present)
			continue;
		partition_device_snapshot(m->pool, part, &dev);
		if (get_health(m, part, &dev, max_age, true, &h, &cached) && !cached)
			set_rank(m, part, &info, &dev, &h);
	}
}

/* Err text for a refusal: the volume, the partition and every refusing reason. */
static int refuse(const char *what, const char *name, const PartitionInfo *info, const DeviceDecision *d,
		  char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX], line[2048];

	partition_display_name(info, pname, sizeof(pname));
	device_decision_format(d, DEVICE_VERDICT_REFUSE, line, sizeof(line));
	log_warning("%s of volume %s refused on partition %s (UUID %s): %s", what, name, pname, info->uuid, line);
	return errmsg_set(reterr_msg, -EIO, "volume %s: partition %s (UUID %s) refused: %s", name, pname, info->uuid, line);
}

int manager_health_before_mount(Manager *m, Volume *v, char **reterr_msg)
{
	PartitionDevice dev;
	PartitionInfo info;
	HealthReading h;
	DeviceDecision d;
	VolumeOptions o;
	bool have_h, cached;
	char line[2048];

	partition_snapshot(m->pool, v->part, &info);
	partition_device_snapshot(m->pool, v->part, &dev);
	if (!dev.has_facts)
		return 0;
	registry_read_lock(m->reg);
	o = v->opts;
	registry_unlock(m->reg);
	/* The first mount refreshes a reading older than the cache time, like the self-test. */
	have_h = settings_for(m, &o).health != DEVICE_POLICY_OFF &&
		 get_health(m, v->part, &dev, m->cfg->health_cache_seconds * 1000, true, &h, &cached);
	if (have_h && !cached)
		set_rank(m, v->part, &info, &dev, &h);
	evaluate(m, &info, &dev, &h, have_h, &o, &d);
	if (d.verdict == DEVICE_VERDICT_REFUSE)
		return refuse("mount", v->name, &info, &d, reterr_msg);
	if (d.verdict == DEVICE_VERDICT_WARN) {
		device_decision_format(&d, DEVICE_VERDICT_WARN, line, sizeof(line));
		log_warning("volume %s: mounting on partition UUID %s despite: %s", v->name, info.uuid, line);
	}
	return 0;
}

int manager_health_check_create(Manager *m, Partition *part, const char *name, const VolumeOptions *o, char **reterr_msg)
{
	PartitionDevice dev;
	PartitionInfo info;
	HealthReading h;
	DeviceDecision d;
	bool have_h, cached;

	partition_snapshot(m->pool, part, &info);
	partition_device_snapshot(m->pool, part, &dev);
	if (!dev.has_facts)
		return 0;
	have_h = settings_for(m, o).health != DEVICE_POLICY_OFF &&
		 get_health(m, part, &dev, m->cfg->health_cache_seconds * 1000, true, &h, &cached);
	if (have_h && !cached)
		set_rank(m, part, &info, &dev, &h);
	evaluate(m, &info, &dev, &h, have_h, o, &d);
	if (d.verdict == DEVICE_VERDICT_REFUSE)
		return refuse("create", name, &info, &d, reterr_msg);
	return 0;
}

void manager_health_add_status(Manager *m, Partition *part, const VolumeOptions *o, json_t *partition)
{
	PartitionDevice dev;
	PartitionInfo info;
	HealthReading h;
	DeviceDecision d;
	bool have_h, cached;

	partition_device_snapshot(m->pool, part, &dev);
	if (!dev.has_facts) {
		if (dev.facts_error[0])
			json_object_set_new(partition, "device", json_pack("{s:s}", "problem", dev.facts_error));
		return;
	}
	partition_snapshot(m->pool, part, &info);
	json_object_set_new(partition, "device", device_facts_to_json(&dev.facts));
	if (dev.has_xfs)
		json_object_set_new(partition, "xfs", xfs_geometry_to_json(&dev.xfs));
	/* Get never issues the ioctl: it shows the last reading and its age. */
	have_h = get_health(m, part, &dev, UINT64_MAX, false, &h, &cached);
	if (have_h) {
		json_t *j = h.ok ? nvme_health_to_json(&h.health) : json_pack("{s:s,s:s}", "verdict", "unknown", "error", h.error);
		char stamp[40];

		format_rfc3339(h.read_at, stamp, sizeof(stamp));
		json_object_set_new(j, "read_at", json_string(stamp));
		json_object_set_new(j, "age_seconds", json_integer((json_int_t)((now_mono_ms() - h.read_mono_ms) / 1000)));
		json_object_set_new(partition, "health", j);
	} else if (is_nvme(&dev))
		json_object_set_new(partition, "health", json_pack("{s:s}", "verdict", "not read yet"));
	evaluate(m, &info, &dev, &h, have_h, o, &d);
	json_object_set_new(partition, "policy", device_decision_to_json(&d));
}

int manager_health_metric(Manager *m, Partition *part)
{
	PartitionDevice dev;
	HealthReading h;
	bool cached;

	partition_device_snapshot(m->pool, part, &dev);
	/* The last reading only: the metrics never issue the ioctl. */
	if (!get_health(m, part, &dev, UINT64_MAX, false, &h, &cached) || !h.ok)
		return -1;
	return nvme_health_judge(&h.health, NULL, 0) == NVME_HEALTH_OK ? 1 : 0;
}
