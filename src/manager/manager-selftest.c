/* SPDX-License-Identifier: MIT */
/*
 * The self-test on first mount: one run per partition at a time, results
 * cached per partition, recorded in the partition's history, judged per
 * volume against its thresholds (absolute, and relative to the partition's
 * baseline) and policy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager/manager-internal.h"
#include "metrics/metrics.h"
#include "volume/registry.h"
#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "selftest/selftest.h"
#include "metrics/stats.h"
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
	return __atomic_load_n(&part->selftest_cache, __ATOMIC_ACQUIRE);
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
			__atomic_store_n(&part->selftest_cache, st, __ATOMIC_RELEASE);
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


void manager_selftest_clean_scratch(PartitionFs *fs, const char *partition_uuid)
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

	json_object_set_new(report, "policy", json_string(manager_selftest_to_string(policy)));
	json_object_set_new(report, "verdict", json_string("skipped"));
	json_object_set_new(report, "message", json_string(why));
	set_report(m, v, report);
}

/*
 * Records a fresh run: in memory under the state's lock, then in the
 * partition's file (the caller holds selftest_lock, so writes are serialised).
 */
/* A p99 for the log: "0.21", or "n/r" when it had too few samples (its figure is 0). */
static const char *p99_text(char buf[static 32], const SelftestResult *r, SelftestFigure f)
{
	double v = selftest_figure(r, f);

	if (v <= 0)
		return "n/r";
	(void)snprintf(buf, 32, "%.3f", v);
	return buf;
}

static void record_run(Manager *m, SelftestState *st, PartitionFs *fs, const char *pname, const SelftestResult *res,
		       int64_t at)
{
	_cleanup_free_ SelftestHistory *copy = malloc(sizeof(SelftestHistory));
	const SelftestResult *base;
	SelftestResult base_copy;
	char wp99[32], rp99[32];
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
		log_info("partition %s: self-test baseline established (median of %d runs): write %.1f MiB/s, read %.1f MiB/s, %.0f/%.0f IOPS, p99 %s/%s ms",
			 pname, SELFTEST_BASELINE_RUNS, base_copy.seq_write_mbps, base_copy.seq_read_mbps,
			 base_copy.rand_write_iops, base_copy.rand_read_iops, p99_text(wp99, &base_copy, SELFTEST_FIG_WRITE_P99),
			 p99_text(rp99, &base_copy, SELFTEST_FIG_READ_P99));
	if (!copy)
		return;
	r = selftest_history_save(fs->tree_fd, copy);
	if (r < 0) {
		stats_error(STATS_ERROR_HISTORY_WRITE);
		log_warning("partition %s: cannot save the self-test history: %s", pname, errno_str(r));
	}
}

/* What the mount's self-test measured, or the cached run it reused. */
typedef struct SelftestOutcome {
	SelftestResult res;
	int64_t tested_at;
	bool cached;
	uint64_t age_s; /* of the cached result */
} SelftestOutcome;

/*
 * Runs the partition's self-test, or reuses its fresh cached result: one run
 * per partition at a time (a second Mount waits on selftest_lock, then reuses
 * the first one's result). The lock is taken and dropped here only.
 * Returns 0 with @out filled, 1 when the partition is too full to measure,
 * or a negative errno with the error text.
 */
static int run_or_reuse(Manager *m, Partition *part, SelftestState *st, PartitionFs *fs, const PartitionInfo *info,
			const char *pname, SelftestOutcome *out, char **reterr_msg)
{
	_cleanup_free_ char *msg = NULL;
	int r = 0;

	pthread_mutex_lock(&part->selftest_lock);
	pthread_mutex_lock(&st->lock);
	if (st->has_cache && m->cfg->selftest_cache_seconds > 0 &&
	    now_mono_ms() - st->cache_mono_ms < m->cfg->selftest_cache_seconds * 1000) {
		out->res = st->cache;
		out->cached = true;
		out->tested_at = st->cache_at;
		out->age_s = (now_mono_ms() - st->cache_mono_ms) / 1000;
	}
	pthread_mutex_unlock(&st->lock);
	if (!out->cached) {
		SelftestConfig sc = {
			.budget_ms = m->cfg->selftest_budget_ms,
			.block_align = info->logical_sector_size,
		};
		r = selftest_run(fs->scratch_fd, &sc, &out->res, &msg);
		if (r == -ENOSPC || r == -EDQUOT)
			r = 1;
		else if (r < 0)
			r = errmsg_set(reterr_msg, r, "self-test of partition %s failed: %s", pname,
				       msg ? msg : errno_str(r));
		else {
			out->tested_at = (int64_t)time(NULL);
			pthread_mutex_lock(&st->lock);
			/* Never serve an old "good" result after the disk returned bad data. */
			st->has_cache = out->res.verify_errors == 0;
			st->cache = out->res;
			st->cache_at = out->tested_at;
			st->cache_mono_ms = now_mono_ms();
			pthread_mutex_unlock(&st->lock);
			record_run(m, st, fs, pname, &out->res, out->tested_at);
		}
	}
	pthread_mutex_unlock(&part->selftest_lock);
	return r;
}

/*
 * The volume's self-test report for Status: the figures, the verdict against
 * @t (the volume's thresholds over the pool's), the history. Judges the run
 * and returns the verdict and its message in *ret_verdict and *ret_msg.
 */
static json_t *report_json(Manager *m, SelftestState *st, SelftestPolicy policy, const SelftestOutcome *out,
			   const SelftestThresholds *t, SelftestVerdict *ret_verdict, char **ret_msg)
{
	_cleanup_free_ SelftestHistory *hist = malloc(sizeof(*hist));
	SelftestResult base;
	bool has_base = false;
	unsigned pending;
	json_t *report, *hj;
	char stamp[40];

	if (!hist)
		return NULL;
	pthread_mutex_lock(&st->lock);
	if (selftest_history_baseline_for(&st->history, m->cfg->selftest_budget_ms, out->res.iodepth)) {
		base = st->history.baseline.fig;
		has_base = true;
	}
	pending = selftest_history_pending(&st->history, m->cfg->selftest_budget_ms, out->res.iodepth);
	*hist = st->history;
	pthread_mutex_unlock(&st->lock);

	*ret_verdict = selftest_judge(&out->res, t, has_base ? &base : NULL, ret_msg);

	report = selftest_result_to_json(&out->res);
	if (!report)
		return NULL;
	format_rfc3339(out->tested_at, stamp, sizeof(stamp));
	json_object_set_new(report, "policy", json_string(manager_selftest_to_string(policy)));
	json_object_set_new(report, "verdict", json_string(selftest_verdict_to_string(*ret_verdict)));
	json_object_set_new(report, "tested_at", json_string(stamp));
	json_object_set_new(report, "cached", json_boolean(out->cached));
	if (out->cached)
		json_object_set_new(report, "cache_age_seconds", json_integer((json_int_t)out->age_s));
	json_object_set_new(report, "thresholds", thresholds_json(t));
	if (*ret_msg)
		json_object_set_new(report, "message", json_string(*ret_msg));
	if (has_relative(t) && !has_base)
		json_object_set_new(report, "baseline_note",
				    json_pack("{s:s,s:i,s:i}", "relative_thresholds", "not judged until the partition's baseline exists",
					      "healthy_runs", pending, "runs_needed", SELFTEST_BASELINE_RUNS));
	hj = selftest_history_status_json(hist, &out->res, m->cfg->selftest_budget_ms);
	if (hj)
		json_object_set_new(report, "history", hj);
	return report;
}

/* The policy's answer to a verdict: refuse (an Err), or mount, warning when it is below a threshold. */
static int apply_policy(Volume *v, SelftestPolicy policy, const char *pname, const SelftestOutcome *out,
			SelftestVerdict verdict, const char *msg, char **reterr_msg)
{
	char wp99[32], rp99[32];

	if (verdict == SELFTEST_VERDICT_DATA_ERROR)
		return errmsg_set(reterr_msg, -EBADMSG, "volume %s: self-test of partition %s read back wrong data (%llu bad block(s)); refusing to mount: %s",
			       v->name, pname, (unsigned long long)out->res.verify_errors, msg ? msg : "");
	if (verdict == SELFTEST_VERDICT_BELOW_THRESHOLD || verdict == SELFTEST_VERDICT_BELOW_BASELINE) {
		const char *what = verdict == SELFTEST_VERDICT_BELOW_THRESHOLD ? "the volume's thresholds" : "its baseline";

		if (policy == SELFTEST_POLICY_ENFORCE)
			return errmsg_set(reterr_msg, -EPERM, "volume %s: partition %s is below %s (selftest=enforce): %s",
				       v->name, pname, what, msg ? msg : "");
		log_warning("volume %s: partition %s is below %s (selftest=warn, mounting anyway): %s",
			    v->name, pname, what, msg ? msg : "");
	}
	log_info("volume %s: self-test %s%s: write %.0f MiB/s, read %.0f MiB/s, %.0f/%.0f IOPS, p99 %s/%s ms",
		 v->name, selftest_verdict_to_string(verdict), out->cached ? " (cached)" : "", out->res.seq_write_mbps,
		 out->res.seq_read_mbps, out->res.rand_write_iops, out->res.rand_read_iops,
		 p99_text(wp99, &out->res, SELFTEST_FIG_WRITE_P99), p99_text(rp99, &out->res, SELFTEST_FIG_READ_P99));
	return 0;
}

int manager_selftest_before_mount(Manager *m, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	SelftestPolicy policy = v->opts->selftest != SELFTEST_POLICY_UNSET ? v->opts->selftest : m->cfg->selftest;
	SelftestThresholds t = m->cfg->selftest_pool;
	SelftestOutcome out = {};
	_cleanup_free_ char *msg = NULL, *err = NULL;
	char pname[PARTITION_NAME_MAX];
	SelftestVerdict verdict;
	PartitionInfo info;
	SelftestState *st;
	json_t *report;
	int r;

	if (policy == SELFTEST_POLICY_OFF) {
		report = json_object();
		json_object_set_new(report, "policy", json_string("off"));
		set_report(m, v, report);
		return 0;
	}

	partition_snapshot(m->pool, v->part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (fs->read_only || fs->scratch_fd < 0) {
		/* Not adopted yet: nothing may be written there, not even a scratch file. */
		skip(m, v, policy, "partition is read-only (not adopted): not measured");
		return 0;
	}

	st = state_get(v->part);
	if (!st)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	history_ensure_loaded(st, fs, pname, &m->cfg->selftest_pool);

	r = run_or_reuse(m, v->part, st, fs, &info, pname, &out, &err);
	if (r == 1) {
		/*
		 * A full partition cannot be measured; refusing the mount would also keep
		 * the user from the container that could free space. Mount, and say so.
		 */
		skip(m, v, policy, "partition full: no room for the self-test's scratch file");
		log_warning("volume %s: partition %s is full; self-test skipped", v->name, pname);
		return 0;
	}
	if (r < 0)
		return errmsg_set(reterr_msg, r, "volume %s: %s", v->name, err ? err : errno_str(r));

	/* The volume's own thresholds win over the pool-wide ones. */
	selftest_thresholds_merge(&t, &v->opts->thresholds);
	report = report_json(m, st, policy, &out, &t, &verdict, &msg);
	if (!report)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	set_report(m, v, report);
	metrics_notify();
	return apply_policy(v, policy, pname, &out, verdict, msg, reterr_msg);
}

json_t *manager_selftest_partition_json(Partition *part)
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

int manager_selftest_metrics(Manager *m, Partition *part, MetricsPartition *ret)
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

