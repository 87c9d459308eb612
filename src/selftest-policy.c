/* SPDX-License-Identifier: MIT */
/*
 * The self-test on first mount: one run per partition at a time, results
 * cached per partition, judged per volume against its thresholds and policy.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager-internal.h"
#include "registry.h"
#include "selftest-report.h"
#include "selftest.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct SelftestCache {
	SelftestResult result;
	int64_t tested_at;   /* unix seconds, for Status */
	uint64_t tested_mono_ms;
} SelftestCache;

static uint64_t now_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void selftest_policy_clean_scratch(PartitionFs *fs, const char *partition_uuid)
{
	int n;

	if (fs->scratch_fd < 0 || fs->read_only)
		return;
	n = selftest_clean_scratch(fs->scratch_fd);
	if (n > 0)
		log_info("partition %s: removed %d self-test scratch file(s) left by a crash", partition_uuid, n);
}

static json_t *thresholds_json(const SelftestThresholds *t)
{
	json_t *j = json_object();

	if (t->min_write_mbps > 0)
		json_object_set_new(j, "min_write_mbps", json_real(t->min_write_mbps));
	if (t->min_read_mbps > 0)
		json_object_set_new(j, "min_read_mbps", json_real(t->min_read_mbps));
	if (t->min_iops > 0)
		json_object_set_new(j, "min_iops", json_real(t->min_iops));
	if (t->max_p99_ms > 0)
		json_object_set_new(j, "max_p99_ms", json_real(t->max_p99_ms));
	return j;
}

static void set_report(Manager *m, Volume *v, json_t *report)
{
	registry_write_lock(m->reg);
	json_decref(v->selftest);
	v->selftest = report;
	registry_unlock(m->reg);
}

static void skip(Manager *m, Volume *v, SelftestPolicy policy, const char *why)
{
	json_t *report = json_object();

	json_object_set_new(report, "policy", json_string(selftest_policy_to_string(policy)));
	json_object_set_new(report, "verdict", json_string("skipped"));
	json_object_set_new(report, "message", json_string(why));
	set_report(m, v, report);
}

int selftest_policy_before_mount(Manager *m, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	SelftestPolicy policy = v->opts.selftest != SELFTEST_POLICY_UNSET ? v->opts.selftest : m->cfg->selftest;
	Partition *part = v->part;
	PartitionInfo info;
	char pname[PARTITION_NAME_MAX];
	SelftestCache *cache;
	SelftestResult res;
	SelftestVerdict verdict;
	_cleanup_free_ char *msg = NULL;
	json_t *report;
	char stamp[40];
	bool cached = false;
	uint64_t age_s;
	int64_t tested_at;
	int r;

	if (policy == SELFTEST_POLICY_OFF) {
		report = json_object();
		json_object_set_new(report, "policy", json_string("off"));
		set_report(m, v, report);
		return 0;
	}

	partition_snapshot(m->pool, part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (fs->read_only || fs->scratch_fd < 0) {
		/* Not adopted yet: nothing may be written there, not even a scratch file. */
		skip(m, v, policy, "partition is read-only (not adopted): not measured");
		return 0;
	}

	/* One run per partition: a second Mount waits here, then reuses the fresh result. */
	pthread_mutex_lock(&part->selftest_lock);
	cache = part->selftest_cache;
	if (cache && m->cfg->selftest_cache_seconds > 0 &&
	    now_mono_ms() - cache->tested_mono_ms < m->cfg->selftest_cache_seconds * 1000) {
		res = cache->result;
		cached = true;
	} else {
		SelftestConfig sc = {
			.budget_ms = m->cfg->selftest_budget_ms,
			.block_align = info.logical_sector_size,
		};
		r = selftest_run(fs->scratch_fd, &sc, &res, &msg);
		if (r == -ENOSPC || r == -EDQUOT) {
			/*
			 * A full partition cannot be measured; refusing the mount would also keep
			 * the user from the container that could free space. Mount, and say so.
			 */
			pthread_mutex_unlock(&part->selftest_lock);
			skip(m, v, policy, "partition full: no room for the self-test's scratch file");
			log_warning("volume %s: partition %s is full; self-test skipped", v->name, pname);
			return 0;
		}
		if (r < 0) {
			pthread_mutex_unlock(&part->selftest_lock);
			log_error("volume %s: self-test of partition %s failed: %s", v->name, pname,
				  msg ? msg : errno_str(r));
			return errmsg_set(reterr_msg, r, "volume %s: self-test of partition %s failed: %s", v->name,
				       pname, msg ? msg : errno_str(r));
		}
		if (res.verify_errors == 0) {
			if (!cache)
				cache = part->selftest_cache = calloc(1, sizeof(SelftestCache));
			if (cache) {
				cache->result = res;
				cache->tested_at = (int64_t)time(NULL);
				cache->tested_mono_ms = now_mono_ms();
			}
		} else if (cache) {
			/* Never serve an old "good" result after the disk returned bad data. */
			free(part->selftest_cache);
			part->selftest_cache = cache = NULL;
		}
	}
	tested_at = cache ? cache->tested_at : (int64_t)time(NULL);
	age_s = cache ? (now_mono_ms() - cache->tested_mono_ms) / 1000 : 0;
	pthread_mutex_unlock(&part->selftest_lock);

	free(msg);
	msg = NULL;
	verdict = selftest_judge(&res, &v->opts.thresholds, NULL, &msg);

	report = selftest_result_to_json(&res);
	if (!report)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	format_rfc3339(tested_at, stamp, sizeof(stamp));
	json_object_set_new(report, "policy", json_string(selftest_policy_to_string(policy)));
	json_object_set_new(report, "verdict", json_string(selftest_verdict_to_string(verdict)));
	json_object_set_new(report, "tested_at", json_string(stamp));
	json_object_set_new(report, "cached", json_boolean(cached));
	if (cached)
		json_object_set_new(report, "cache_age_seconds", json_integer((json_int_t)age_s));
	json_object_set_new(report, "thresholds", thresholds_json(&v->opts.thresholds));
	if (msg)
		json_object_set_new(report, "message", json_string(msg));
	set_report(m, v, report);

	if (verdict == SELFTEST_VERDICT_DATA_ERROR)
		return errmsg_set(reterr_msg, -EIO, "volume %s: self-test of partition %s read back wrong data (%llu bad block(s)); refusing to mount: %s",
			       v->name, pname, (unsigned long long)res.verify_errors, msg ? msg : "");
	if (verdict == SELFTEST_VERDICT_BELOW_THRESHOLD) {
		if (policy == SELFTEST_POLICY_ENFORCE)
			return errmsg_set(reterr_msg, -EIO, "volume %s: partition %s is below the volume's thresholds (selftest=enforce): %s",
				       v->name, pname, msg ? msg : "");
		log_warning("volume %s: partition %s is below the volume's thresholds (selftest=warn, mounting anyway): %s",
			    v->name, pname, msg ? msg : "");
	}
	log_info("volume %s: self-test %s%s: write %.0f MiB/s, read %.0f MiB/s, %.0f/%.0f IOPS, p99 %.2f/%.2f ms",
		 v->name, selftest_verdict_to_string(verdict), cached ? " (cached)" : "", res.seq_write_mbps,
		 res.seq_read_mbps, res.rand_write_iops, res.rand_read_iops, res.write_p99_ms, res.read_p99_ms);
	return 0;
}
