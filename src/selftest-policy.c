/* SPDX-License-Identifier: MIT */
/*
 * The self-test on first mount: one run per partition at a time, results
 * cached per partition, recorded in the partition's history, judged per
 * volume against its thresholds (absolute, and relative to the partition's
 * baseline) and policy.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager-internal.h"
#include "metrics.h"
#include "registry.h"
#include "selftest-history.h"
#include "selftest-report.h"
#include "selftest.h"
#include "stats.h"
#include "util/time-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

/*
 * What this file keeps per partition, in Partition.selftest_cache. Created
 * once (under states_lock) and published with a release store, freed only
 * with the pool. Its lock guards every field below and is held only to copy
 * in or out, never across I/O: Get and the metrics read it while a run
 * (serialised by Partition.selftest_lock) goes on.
 */
typedef struct SelftestState {
	pthread_mutex_t lock;
	bool has_cache;          /* a healthy result to reuse */
	SelftestResult cache;
	int64_t cache_at;        /* unix seconds, for Status */
	uint64_t cache_mono_ms;
	bool has_last;           /* the last run of this daemon, healthy or not */
	SelftestResult last;
	int64_t last_at;
	SelftestVerdict last_verdict; /* against the pool-wide thresholds */
	bool history_loaded;
	SelftestHistory history;
} SelftestState;

static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER; /* creation of SelftestStates */

static SelftestState *state_peek(Partition *part)
{
	return __atomic_load_n((SelftestState **)&part->selftest_cache, __ATOMIC_ACQUIRE);
}

static SelftestState *state_get(Partition *part)
{
	SelftestState *st = state_peek(part);

	if (st)
		return st;
	pthread_mutex_lock(&states_lock);
	st = state_peek(part);
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (st) {
			pthread_mutex_init(&st->lock, NULL);
			__atomic_store_n((SelftestState **)&part->selftest_cache, st, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&states_lock);
	return st;
}

/*
 * Reads the partition's history once (it travels with the disk); a damaged
 * file is kept aside and a new one begun. Its last run stands for the last
 * self-test until this daemon runs one (the metrics show it after a restart),
 * judged against the pool-wide thresholds @pool.
 */
static void history_ensure_loaded(SelftestState *st, PartitionFs *fs, const char *pname, const SelftestThresholds *pool)
{
	_cleanup_free_ SelftestHistory *h = NULL;
	_cleanup_free_ char *msg = NULL;
	bool loaded;
	int r;

	pthread_mutex_lock(&st->lock);
	loaded = st->history_loaded;
	pthread_mutex_unlock(&st->lock);
	if (loaded || !fs || fs->tree_fd < 0)
		return;
	h = calloc(1, sizeof(*h));
	if (!h)
		return;
	r = selftest_history_load(fs->tree_fd, h, &msg);
	if (r < 0 && r != -EUCLEAN) {
		log_warning("partition %s: cannot read its self-test history: %s", pname, msg ? msg : errno_str(r));
		return;
	}
	if (r == -EUCLEAN)
		log_warning("partition %s: %s", pname, msg ? msg : "self-test history damaged");
	pthread_mutex_lock(&st->lock);
	if (!st->history_loaded) {
		st->history = *h;
		st->history_loaded = true;
		if (!st->has_last && h->n > 0) {
			const SelftestRun *run = &h->runs[h->n - 1];

			st->has_last = true;
			st->last = run->fig;
			st->last_at = run->at;
			st->last_verdict = selftest_judge(&run->fig, pool,
							  selftest_history_baseline_for(h, run->budget_ms, run->fig.iodepth), NULL);
		}
	}
	pthread_mutex_unlock(&st->lock);
}


void selftest_policy_clean_scratch(PartitionFs *fs, const char *partition_uuid)
{
	int n;

	if (fs->scratch_fd < 0 || fs->read_only)
		return;
	n = selftest_clean_scratch(fs->scratch_fd);
	if (n > 0)
		log_info("partition %s: removed %d self-test scratch file(s) left by a crash", partition_uuid, n);
	/* A history write interrupted by a crash leaves its temp file in nvmevol/. */
	if (fs->tree_fd >= 0)
		(void)remove_atomic_tmp_files(fs->tree_fd);
}

static json_t *thresholds_json(const SelftestThresholds *t)
{
	json_t *j = json_object();
	const struct {
		const char *key;
		double v;
	} all[] = {
		{ "min_write_mbps", t->min_write_mbps }, { "min_read_mbps", t->min_read_mbps },
		{ "min_iops", t->min_iops }, { "max_p99_ms", t->max_p99_ms },
		{ "min_write_ratio", t->min_write_ratio }, { "min_read_ratio", t->min_read_ratio },
		{ "min_iops_ratio", t->min_iops_ratio }, { "max_p99_ratio", t->max_p99_ratio },
	};

	for (size_t i = 0; j && i < ELEMENTSOF(all); i++)
		if (all[i].v > 0)
			json_object_set_new(j, all[i].key, json_real(all[i].v));
	return j;
}

static bool has_relative(const SelftestThresholds *t)
{
	return t->min_write_ratio > 0 || t->min_read_ratio > 0 || t->min_iops_ratio > 0 || t->max_p99_ratio > 0;
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

/*
 * Records a fresh run: in memory under the state's lock, then in the
 * partition's file (the caller holds selftest_lock, so writes are serialised).
 */
static void record_run(Manager *m, SelftestState *st, PartitionFs *fs, const char *pname, const SelftestResult *res,
		       int64_t at)
{
	_cleanup_free_ SelftestHistory *copy = malloc(sizeof(SelftestHistory));
	const SelftestResult *base;
	SelftestResult base_copy;
	SelftestVerdict pv;
	bool established, has_base;
	int r;

	pthread_mutex_lock(&st->lock);
	established = selftest_history_add(&st->history, res, m->cfg->selftest_budget_ms, at);
	base = selftest_history_baseline_for(&st->history, m->cfg->selftest_budget_ms, res->iodepth);
	has_base = base != NULL;
	if (base)
		base_copy = *base;
	st->has_last = true;
	st->last = *res;
	st->last_at = at;
	if (copy)
		*copy = st->history;
	pthread_mutex_unlock(&st->lock);

	/* The partition's own verdict (metrics): its data and the pool-wide thresholds. */
	pv = selftest_judge(res, &m->cfg->selftest_pool, has_base ? &base_copy : NULL, NULL);
	pthread_mutex_lock(&st->lock);
	st->last_verdict = pv;
	pthread_mutex_unlock(&st->lock);

	if (established)
		log_info("partition %s: self-test baseline established (median of %d runs): write %.1f MiB/s, read %.1f MiB/s, %.0f/%.0f IOPS, p99 %.3f/%.3f ms",
			 pname, SELFTEST_BASELINE_RUNS, base_copy.seq_write_mbps, base_copy.seq_read_mbps,
			 base_copy.rand_write_iops, base_copy.rand_read_iops, base_copy.write_p99_ms, base_copy.read_p99_ms);
	if (!copy)
		return;
	r = selftest_history_save(fs->tree_fd, copy);
	if (r < 0) {
		stats_error(STATS_ERROR_HISTORY_WRITE);
		log_warning("partition %s: cannot save the self-test history: %s", pname, errno_str(r));
	}
}

int selftest_policy_before_mount(Manager *m, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	SelftestPolicy policy = v->opts.selftest != SELFTEST_POLICY_UNSET ? v->opts.selftest : m->cfg->selftest;
	Partition *part = v->part;
	PartitionInfo info;
	char pname[PARTITION_NAME_MAX];
	SelftestState *st;
	SelftestResult res, base;
	SelftestVerdict verdict;
	SelftestThresholds t = m->cfg->selftest_pool;
	_cleanup_free_ SelftestHistory *hist = NULL;
	_cleanup_free_ char *msg = NULL;
	json_t *report, *hj;
	char stamp[40];
	bool cached = false, has_base = false;
	unsigned pending = 0;
	uint64_t age_s = 0;
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

	st = state_get(part);
	hist = malloc(sizeof(*hist));
	if (!st || !hist)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	history_ensure_loaded(st, fs, pname, &m->cfg->selftest_pool);

	/* One run per partition: a second Mount waits here, then reuses the fresh result. */
	pthread_mutex_lock(&part->selftest_lock);
	pthread_mutex_lock(&st->lock);
	if (st->has_cache && m->cfg->selftest_cache_seconds > 0 &&
	    now_mono_ms() - st->cache_mono_ms < m->cfg->selftest_cache_seconds * 1000) {
		res = st->cache;
		cached = true;
		tested_at = st->cache_at;
		age_s = (now_mono_ms() - st->cache_mono_ms) / 1000;
	}
	pthread_mutex_unlock(&st->lock);
	if (!cached) {
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
		tested_at = (int64_t)time(NULL);
		pthread_mutex_lock(&st->lock);
		/* Never serve an old "good" result after the disk returned bad data. */
		st->has_cache = res.verify_errors == 0;
		st->cache = res;
		st->cache_at = tested_at;
		st->cache_mono_ms = now_mono_ms();
		pthread_mutex_unlock(&st->lock);
		record_run(m, st, fs, pname, &res, tested_at);
	}
	pthread_mutex_unlock(&part->selftest_lock);

	/* The volume's own thresholds win over the pool-wide ones. */
	selftest_thresholds_merge(&t, &v->opts.thresholds);
	pthread_mutex_lock(&st->lock);
	if (selftest_history_baseline_for(&st->history, m->cfg->selftest_budget_ms, res.iodepth)) {
		base = st->history.baseline.fig;
		has_base = true;
	}
	pending = selftest_history_pending(&st->history, m->cfg->selftest_budget_ms, res.iodepth);
	*hist = st->history;
	pthread_mutex_unlock(&st->lock);

	free(msg);
	msg = NULL;
	verdict = selftest_judge(&res, &t, has_base ? &base : NULL, &msg);

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
	json_object_set_new(report, "thresholds", thresholds_json(&t));
	if (msg)
		json_object_set_new(report, "message", json_string(msg));
	if (has_relative(&t) && !has_base)
		json_object_set_new(report, "baseline_note",
				    json_pack("{s:s,s:i,s:i}", "relative_thresholds", "not judged until the partition's baseline exists",
					      "healthy_runs", pending, "runs_needed", SELFTEST_BASELINE_RUNS));
	hj = selftest_history_status_json(hist, &res, m->cfg->selftest_budget_ms);
	if (hj)
		json_object_set_new(report, "history", hj);
	set_report(m, v, report);
	metrics_notify();

	if (verdict == SELFTEST_VERDICT_DATA_ERROR)
		return errmsg_set(reterr_msg, -EBADMSG, "volume %s: self-test of partition %s read back wrong data (%llu bad block(s)); refusing to mount: %s",
			       v->name, pname, (unsigned long long)res.verify_errors, msg ? msg : "");
	if (verdict == SELFTEST_VERDICT_BELOW_THRESHOLD || verdict == SELFTEST_VERDICT_BELOW_BASELINE) {
		const char *what = verdict == SELFTEST_VERDICT_BELOW_THRESHOLD ? "the volume's thresholds" : "its baseline";

		if (policy == SELFTEST_POLICY_ENFORCE)
			return errmsg_set(reterr_msg, -EPERM, "volume %s: partition %s is below %s (selftest=enforce): %s",
				       v->name, pname, what, msg ? msg : "");
		log_warning("volume %s: partition %s is below %s (selftest=warn, mounting anyway): %s",
			    v->name, pname, what, msg ? msg : "");
	}
	log_info("volume %s: self-test %s%s: write %.0f MiB/s, read %.0f MiB/s, %.0f/%.0f IOPS, p99 %.2f/%.2f ms",
		 v->name, selftest_verdict_to_string(verdict), cached ? " (cached)" : "", res.seq_write_mbps,
		 res.seq_read_mbps, res.rand_write_iops, res.rand_read_iops, res.write_p99_ms, res.read_p99_ms);
	return 0;
}

json_t *selftest_policy_partition_json(Partition *part)
{
	SelftestState *st = state_peek(part);
	json_t *j = NULL;
	char stamp[40];

	if (!st)
		return NULL;
	/* Never wait behind a running self-test: Status must stay quick. */
	if (pthread_mutex_trylock(&st->lock) != 0)
		return json_pack("{s:b}", "running", true);
	if (st->has_last) {
		j = selftest_result_to_json(&st->last);
		format_rfc3339(st->last_at, stamp, sizeof(stamp));
		if (j) {
			json_object_set_new(j, "tested_at", json_string(stamp));
			json_object_set_new(j, "age_seconds", json_integer((json_int_t)(time(NULL) - st->last_at)));
		}
	}
	pthread_mutex_unlock(&st->lock);
	return j;
}

int selftest_policy_metrics(Manager *m, Partition *part, MetricsPartition *ret)
{
	SelftestState *st = state_peek(part);
	PartitionFs *fs;

	ret->budget_ms = m->cfg->selftest_budget_ms;
	if (!st) {
		/* Nothing measured by this daemon yet: the disk may still bring its history. */
		fs = partition_fs_get(m->pool, part);
		if (!fs)
			return 0;
		st = state_get(part);
		if (st)
			history_ensure_loaded(st, fs, part->uuid, &m->cfg->selftest_pool);
		partition_fs_put(fs);
		if (!st)
			return -ENOMEM;
	}
	pthread_mutex_lock(&st->lock);
	ret->has_selftest = st->has_last;
	ret->selftest = st->last;
	ret->selftest_at = st->last_at;
	ret->verdict = st->last_verdict;
	if (st->history_loaded) {
		ret->history = malloc(sizeof(SelftestHistory));
		if (ret->history)
			*ret->history = st->history;
	}
	pthread_mutex_unlock(&st->lock);
	return st->history_loaded && !ret->history ? -ENOMEM : 0;
}

