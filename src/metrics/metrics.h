/* SPDX-License-Identifier: MIT */
/*
 * Metrics for Prometheus through node_exporter's textfile collector: a
 * snapshot of partitions, volumes and the process's counters rendered in the
 * text format (pure), and a writer thread that replaces <dir>/nvmevol.prom
 * atomically (temp file, rename: a reader never sees half a file) every
 * interval and soon after changes. The text is streamed into the temp file
 * through a fixed buffer, never built in memory: a write costs the snapshot
 * (about 100 bytes per volume with series, names included) and 32 KiB.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "metrics/stats.h"

#define METRICS_FILE "nvmevol.prom"
/* Per-volume series stop here (ten series each); the rest is counted in nvmevol_metrics_volumes_omitted. */
#define METRICS_VOLUMES_MAX 10000u
/*
 * Change-triggered writes are coalesced: the first change after a write is
 * written METRICS_SETTLE_MS later (so a burst, or a Create and the Mount that
 * follows it, is one write), and never sooner than METRICS_MIN_GAP_MS after
 * the last write. A burst of changes over T seconds is at most T + 2 writes
 * whatever its size; a change shows in the file within 1.25 s.
 */
#define METRICS_MIN_GAP_MS 1000u
#define METRICS_SETTLE_MS 250u

typedef struct MetricsPartition {
	char uuid[64], label[64], device[256];
	bool present, quota;
	bool cordoned;                   /* no new volumes (pool/cordon.h) */
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

/* Offsets into MetricsSnapshot.strings: metrics_str(s, v->name). */
typedef uint32_t MetricsStr;

typedef struct MetricsVolume {
	MetricsStr name, partition, partition_label; /* a volume of a known partition shares its strings */
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
	char *strings;                   /* NUL-terminated strings back to back */
	size_t strings_len, strings_cap;
} MetricsSnapshot;

void metrics_snapshot_done(MetricsSnapshot *s);
/* Copies @str into s->strings; -ENOMEM or 0 and its offset. */
int metrics_snapshot_add_string(MetricsSnapshot *s, const char *str, MetricsStr *ret);
static inline const char *metrics_str(const MetricsSnapshot *s, MetricsStr off)
{
	return s->strings + off;
}
/* Counts one more volume in @state (a static string) in s->by_state and s->vols_total. */
void metrics_snapshot_count_state(MetricsSnapshot *s, const char *state);

/* The whole file's text for @s and @st at @now (unix seconds), written to @f; 0 or -errno. */
int metrics_render_file(FILE *f, const MetricsSnapshot *s, const StatsSnapshot *st, int64_t now);
/* The same as one string (tests); NULL on OOM. */
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
/* After a change: the file is rewritten soon (coalesced, see METRICS_SETTLE_MS). Never blocks on I/O. NULL is fine. */
void metrics_writer_notify(MetricsWriter *w);
/* metrics_writer_notify() for the writer that runs in this process, if any: for code that has no handle. */
void metrics_notify(void);
/* Writes now, from the caller's thread; 0 or -errno. */
int metrics_writer_write(MetricsWriter *w);
/* What the writer did since it started (for nvmevol status and the scale benchmark). */
typedef struct MetricsWriterCounters {
	uint64_t writes;       /* files written (the one at start included) */
	uint64_t failures;     /* writes that failed */
	uint64_t changes;      /* metrics_writer_notify() calls: each would have been a write without coalescing */
	uint64_t cpu_ns;       /* the writer's CPU time in writes: snapshot, render, file */
	uint64_t last_cpu_ns;  /* of the last write */
	uint64_t last_bytes;   /* size of the last file written */
} MetricsWriterCounters;
/* The counters of this process's writer (one per process: the daemon's), set to zero when one starts. */
void metrics_counters(MetricsWriterCounters *ret);
/* Stops the thread and leaves a file saying nvmevol_up 0. NULL is fine. */
MetricsWriter *metrics_writer_stop(MetricsWriter *w);
