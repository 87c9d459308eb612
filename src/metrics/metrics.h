/* SPDX-License-Identifier: MIT */
/*
 * Metrics for Prometheus through node_exporter's textfile collector: a
 * snapshot of partitions, volumes and the process's counters rendered in the
 * text format (pure), and a writer thread that replaces <dir>/nvmevol.prom
 * atomically (temp file, rename: a reader never sees half a file) every
 * interval and soon after each change.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "metrics/stats.h"

#define METRICS_FILE "nvmevol.prom"
/* Per-volume series stop here (ten series each); the rest is counted in nvmevol_metrics_volumes_omitted. */
#define METRICS_VOLUMES_MAX 10000u
/* After a change the file is rewritten at most this often. */
#define METRICS_MIN_GAP_MS 1000u

typedef struct MetricsPartition {
	char uuid[64], label[64], device[256];
	bool present, quota;
	bool has_space;
	uint64_t size_bytes, free_bytes, inodes, inodes_free;
	unsigned volumes;
	bool has_selftest;               /* a run of this daemon, or the last run of the history */
	SelftestResult selftest;
	int64_t selftest_at;             /* unix seconds */
	SelftestVerdict verdict;         /* the partition against the pool-wide thresholds */
	SelftestHistory *history;        /* owned copy, or NULL when none is loaded */
	uint64_t budget_ms;              /* the budget runs are compared at */
	int health;                      /* device health: 1 ok, 0 warning, -1 unknown */
} MetricsPartition;

typedef struct MetricsVolume {
	char name[129];
	char partition[64], partition_label[64];
	const char *state;               /* static string: ready, mounted, partition-missing, ... */
	unsigned mounts;
	uint64_t size_limit, inode_limit; /* 0 = none */
	bool has_usage;
	uint64_t used_bytes, used_inodes;
	int64_t created_at;
	bool has_verdict;
	SelftestVerdict verdict;         /* of the volume's last mount */
} MetricsVolume;

typedef struct MetricsSnapshot {
	MetricsPartition *parts;
	size_t n_parts;
	MetricsVolume *vols;
	size_t n_vols;
	size_t vols_total;               /* n_vols plus those beyond METRICS_VOLUMES_MAX */
	struct {
		const char *state;       /* static string */
		size_t n;
	} by_state[8];                   /* every volume counted, omitted ones too */
	size_t n_states;
	int64_t start_time;              /* unix seconds */
} MetricsSnapshot;

void metrics_snapshot_done(MetricsSnapshot *s);
/* Counts one more volume in @state (a static string) in s->by_state and s->vols_total. */
void metrics_snapshot_count_state(MetricsSnapshot *s, const char *state);

/* The whole file's text for @s and @st at @now (unix seconds); NULL on OOM. */
char *metrics_render(const MetricsSnapshot *s, const StatsSnapshot *st, int64_t now, size_t *ret_len);

/* Fills a snapshot of the daemon's state; 0 or -errno. Called from the writer thread. */
typedef int (*MetricsCollect)(void *userdata, MetricsSnapshot *ret);

typedef struct MetricsWriter MetricsWriter;

/*
 * Creates <@dir> if needed (mode 0755; its parent must exist), writes the
 * file once, and starts the thread. @interval_s >= 1.
 */
int metrics_writer_start(const char *dir, unsigned interval_s, MetricsCollect collect, void *userdata,
			 MetricsWriter **ret, char **reterr_msg);
/* After a change: the file is rewritten within METRICS_MIN_GAP_MS. Never blocks on I/O. NULL is fine. */
void metrics_writer_notify(MetricsWriter *w);
/* metrics_writer_notify() for the writer that runs in this process, if any: for code that has no handle. */
void metrics_notify(void);
/* Writes now, from the caller's thread; 0 or -errno. */
int metrics_writer_write(MetricsWriter *w);
/* Stops the thread and leaves a file saying nvmevol_up 0. NULL is fine. */
MetricsWriter *metrics_writer_stop(MetricsWriter *w);
