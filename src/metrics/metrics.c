/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metrics.h"
#include "metrics/prom.h"
#include "util/time-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

#define MIB 1048576.0

void metrics_snapshot_done(MetricsSnapshot *s)
{
	for (size_t i = 0; i < s->n_parts; i++)
		free(s->parts[i].history);
	free(s->parts);
	free(s->vols);
	free(s->strings);
	*s = (MetricsSnapshot){};
}

int metrics_snapshot_add_string(MetricsSnapshot *s, const char *str, MetricsStr *ret)
{
	size_t n = strlen(str) + 1;

	if (s->strings_len + n > UINT32_MAX)
		return -ENOMEM;
	if (s->strings_len + n > s->strings_cap) {
		size_t cap = s->strings_cap ? s->strings_cap * 2 : 4096;
		char *p;

		while (cap < s->strings_len + n)
			cap *= 2;
		p = realloc(s->strings, cap);
		if (!p)
			return -ENOMEM;
		s->strings = p;
		s->strings_cap = cap;
	}
	memcpy(s->strings + s->strings_len, str, n);
	*ret = (MetricsStr)s->strings_len;
	s->strings_len += n;
	return 0;
}

void metrics_snapshot_count_state(MetricsSnapshot *s, const char *state)
{
	size_t i;

	s->vols_total++;
	for (i = 0; i < s->n_states; i++)
		if (streq(s->by_state[i].state, state))
			break;
	if (i == s->n_states) {
		if (i == ELEMENTSOF(s->by_state))
			return;
		s->by_state[s->n_states++].state = state;
	}
	s->by_state[i].n++;
}

/* ---- Rendering ---- */

/* How a self-test figure is exported: family, the "op" label, a quantile, the factor to base units. */
typedef struct FigureExport {
	const char *family; /* without the "nvmevol_partition_selftest_" / "..._baseline_" prefix */
	const char *op;
	const char *quantile; /* percentile label, NULL: none (promtool reserves "quantile" for summaries) */
	double to_base;
} FigureExport;

static const FigureExport figure_export[_SELFTEST_FIG_MAX] = {
	[SELFTEST_FIG_SEQ_WRITE] = { "sequential_bytes_per_second", "write", NULL, MIB },
	[SELFTEST_FIG_SEQ_READ] = { "sequential_bytes_per_second", "read", NULL, MIB },
	[SELFTEST_FIG_RAND_WRITE_IOPS] = { "random_operations_per_second", "write", NULL, 1 },
	[SELFTEST_FIG_RAND_READ_IOPS] = { "random_operations_per_second", "read", NULL, 1 },
	[SELFTEST_FIG_WRITE_P50] = { "latency_seconds", "write", "50", 1e-3 },
	[SELFTEST_FIG_WRITE_P99] = { "latency_seconds", "write", "99", 1e-3 },
	[SELFTEST_FIG_READ_P50] = { "latency_seconds", "read", "50", 1e-3 },
	[SELFTEST_FIG_READ_P99] = { "latency_seconds", "read", "99", 1e-3 },
};

static const char *const family_help[][2] = {
	{ "sequential_bytes_per_second", "sequential 1 MiB O_DIRECT throughput (write includes its fdatasync), bytes per second" },
	{ "random_operations_per_second", "4 KiB O_DIRECT random I/O per second at the self-test's queue depth (label iodepth)" },
	{ "latency_seconds", "4 KiB O_DIRECT random I/O latency at queue depth 1, seconds, by percentile (50, 99)" },
};

static const char *help_of(const char *family)
{
	for (size_t i = 0; i < ELEMENTSOF(family_help); i++)
		if (streq(family_help[i][0], family))
			return family_help[i][1];
	return "";
}

/* Starts family @name before its first sample only: a family without samples is left out. */
static void family_once(Prom *pr, bool *begun, const char *name, const char *type, const char *help)
{
	if (!*begun)
		prom_family(pr, name, type, help);
	*begun = true;
}

typedef const SelftestResult *(*FiguresOf)(const MetricsPartition *p);

static const SelftestResult *last_run_of(const MetricsPartition *p)
{
	return p->has_selftest ? &p->selftest : NULL;
}

static const SelftestResult *baseline_of(const MetricsPartition *p)
{
	return p->history && p->history->baseline.runs > 0 ? &p->history->baseline.fig : NULL;
}

/* The three families of figures (throughput, IOPS, latency) for every partition that has them. */
static void render_figures(Prom *pr, const MetricsSnapshot *s, const char *prefix, const char *what, FiguresOf figures_of)
{
	static const char *const families[] = { "sequential_bytes_per_second", "random_operations_per_second",
						"latency_seconds" };

	for (size_t k = 0; k < ELEMENTSOF(families); k++) {
		char name[128], help[256];
		bool begun = false;

		snprintf(name, sizeof(name), "%s%s", prefix, families[k]);
		snprintf(help, sizeof(help), "%s: %s", what, help_of(families[k]));
		for (size_t i = 0; i < s->n_parts; i++) {
			const MetricsPartition *p = &s->parts[i];
			const SelftestResult *r = figures_of(p);
			char iodepth[16];

			if (!r)
				continue;
			snprintf(iodepth, sizeof(iodepth), "%u", r->iodepth);
			for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
				const FigureExport *fx = &figure_export[f];
				double v = selftest_figure(r, f) * fx->to_base;

				if (!streq(fx->family, families[k]))
					continue;
				/* A latency of 0 is no figure (a p99 from too few samples). */
				if (fx->quantile && v <= 0)
					continue;
				family_once(pr, &begun, name, "gauge", help);
				if (fx->quantile)
					prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "op", fx->op,
									 "percentile", fx->quantile), v);
				else if (k == 1)
					prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "op", fx->op,
									 "iodepth", iodepth), v);
				else
					prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "op", fx->op), v);
			}
		}
	}
}

#define PART_LABELS(p) PROM_LABELS("partition", (p)->uuid, "partition_label", (p)->label)

/* A gauge with one sample per partition for which @get returns true. */
typedef bool (*PartValue)(const MetricsPartition *p, double *ret);

static void render_part_gauge(Prom *pr, const MetricsSnapshot *s, const char *name, const char *type, const char *help,
			      PartValue get)
{
	bool begun = false;

	for (size_t i = 0; i < s->n_parts; i++) {
		double v;

		if (!get(&s->parts[i], &v))
			continue;
		family_once(pr, &begun, name, type, help);
		prom_sample(pr, "", PART_LABELS(&s->parts[i]), v);
	}
}

/* A PartValue or VolValue: @expr of the partition p / volume v where @cond holds. */
#define GETTER(fn, Type, var, cond, expr)                       \
	static bool fn(const Type *var, double *ret)            \
	{                                                       \
		if (!(cond))                                    \
			return false;                           \
		*ret = (double)(expr);                          \
		return true;                                    \
	}
#define PART_GETTER(fn, cond, expr) GETTER(fn, MetricsPartition, p, cond, expr)

PART_GETTER(get_present, true, p->present)
PART_GETTER(get_quota, p->present, p->quota)
PART_GETTER(get_cordoned, p->present, p->cordoned)
PART_GETTER(get_size, p->has_space, p->size_bytes)
PART_GETTER(get_free, p->has_space, p->free_bytes)
PART_GETTER(get_inodes, p->has_space, p->inodes)
PART_GETTER(get_inodes_free, p->has_space, p->inodes_free)
PART_GETTER(get_volumes, true, p->volumes)
PART_GETTER(get_health, p->health >= 0, p->health)
PART_GETTER(get_st_time, p->has_selftest, p->selftest_at)
PART_GETTER(get_st_duration, p->has_selftest, (double)p->selftest.duration_ms / 1000)
PART_GETTER(get_st_errors, p->has_selftest, p->selftest.verify_errors)
PART_GETTER(get_runs, p->history, p->history->total)
PART_GETTER(get_established, p->history, p->history->baseline.runs > 0)

static void render_partitions(Prom *pr, const MetricsSnapshot *s)
{
	bool begun = false;

	prom_family(pr, "nvmevol_partition_info", "gauge",
		    "A partition of the pool (value 1); labels: filesystem UUID, label, block device");
	for (size_t i = 0; i < s->n_parts; i++) {
		const MetricsPartition *p = &s->parts[i];

		prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "device", p->device), 1);
	}
	render_part_gauge(pr, s, "nvmevol_partition_present", "gauge",
			  "1 when the partition is mounted and verified, 0 when it is missing", get_present);
	render_part_gauge(pr, s, "nvmevol_partition_project_quota", "gauge", "1 when XFS project quota is enforced",
			  get_quota);
	render_part_gauge(pr, s, "nvmevol_partition_cordoned", "gauge",
			  "1 when the partition is cordoned (no new volumes: by the admin, evacuate or the health policy)",
			  get_cordoned);
	render_part_gauge(pr, s, "nvmevol_partition_size_bytes", "gauge", "Size of the filesystem, bytes", get_size);
	render_part_gauge(pr, s, "nvmevol_partition_free_bytes", "gauge", "Free space, bytes", get_free);
	render_part_gauge(pr, s, "nvmevol_partition_inodes", "gauge", "Inodes of the filesystem", get_inodes);
	render_part_gauge(pr, s, "nvmevol_partition_inodes_free", "gauge", "Free inodes", get_inodes_free);
	render_part_gauge(pr, s, "nvmevol_partition_volumes", "gauge", "Volumes on the partition", get_volumes);
	render_part_gauge(pr, s, "nvmevol_partition_device_healthy", "gauge",
			  "1 when the device reports no warning, 0 when it does (only where the device's health is known)",
			  get_health);

	render_part_gauge(pr, s, "nvmevol_partition_selftest_timestamp_seconds", "gauge",
			  "When the last self-test of the partition ran, seconds since the epoch", get_st_time);
	render_part_gauge(pr, s, "nvmevol_partition_selftest_duration_seconds", "gauge",
			  "Wall time of the last self-test, seconds", get_st_duration);
	render_figures(pr, s, "nvmevol_partition_selftest_", "Last self-test", last_run_of);
	render_part_gauge(pr, s, "nvmevol_partition_selftest_verify_errors", "gauge",
			  "4 KiB blocks the last self-test read back wrong", get_st_errors);

	for (size_t i = 0; i < s->n_parts; i++) {
		const MetricsPartition *p = &s->parts[i];

		if (!p->has_selftest)
			continue;
		family_once(pr, &begun, "nvmevol_partition_selftest_verdict", "gauge",
			    "Verdict of the last self-test against the pool-wide thresholds (1 for the current one)");
		for (int v = 0; v < _SELFTEST_VERDICT_MAX; v++)
			prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "verdict",
							 selftest_verdict_to_string((SelftestVerdict)v)),
				    p->verdict == v);
	}

	render_part_gauge(pr, s, "nvmevol_partition_selftest_runs_total", "counter",
			  "Self-tests recorded in the partition's history (it travels with the disk)", get_runs);
	render_part_gauge(pr, s, "nvmevol_partition_selftest_baseline_established", "gauge",
			  "1 once the partition's baseline (median of its first healthy runs) exists", get_established);
	render_figures(pr, s, "nvmevol_partition_selftest_baseline_", "Baseline", baseline_of);

	begun = false;
	for (size_t i = 0; i < s->n_parts; i++) {
		const MetricsPartition *p = &s->parts[i];
		const SelftestResult *b;

		if (!p->has_selftest || !p->history ||
		    !(b = selftest_history_baseline_for(p->history, p->budget_ms, p->selftest.iodepth)))
			continue;
		for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
			double bv = selftest_figure(b, f);

			if (bv <= 0)
				continue;
			family_once(pr, &begun, "nvmevol_partition_selftest_baseline_ratio", "gauge",
				    "Last self-test figure divided by the partition's baseline (label figure)");
			prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "figure",
							 selftest_figure_info(f)->key),
				    selftest_figure(&p->selftest, f) / bv);
		}
	}

	begun = false;
	for (size_t i = 0; i < s->n_parts; i++) {
		const MetricsPartition *p = &s->parts[i];

		if (!p->history || p->history->baseline.runs == 0)
			continue;
		for (SelftestFigure f = 0; f < _SELFTEST_FIG_MAX; f++) {
			double recent;
			SelftestTrend t;

			selftest_history_trend(p->history, f, &recent, &t);
			family_once(pr, &begun, "nvmevol_partition_selftest_trend", "gauge",
				    "Direction of each figure over the last comparable runs (1 for the current one)");
			for (int d = 0; d < _SELFTEST_TREND_MAX; d++)
				prom_sample(pr, "", PROM_LABELS("partition", p->uuid, "partition_label", p->label, "figure",
								 selftest_figure_info(f)->key, "direction",
								 selftest_trend_to_string((SelftestTrend)d)),
					    (int)t == d);
		}
	}
}

typedef bool (*VolValue)(const MetricsVolume *v, double *ret);

static void render_vol_gauge(Prom *pr, const MetricsSnapshot *s, const char *name, const char *help, VolValue get)
{
	bool begun = false;

	for (size_t i = 0; i < s->n_vols; i++) {
		const MetricsVolume *v = &s->vols[i];
		double x;

		if (!get(v, &x))
			continue;
		family_once(pr, &begun, name, "gauge", help);
		prom_sample(pr, "", PROM_LABELS("volume", metrics_str(s, v->name), "partition", metrics_str(s, v->partition)), x);
	}
}

#define VOL_GETTER(fn, cond, expr) GETTER(fn, MetricsVolume, v, cond, expr)

VOL_GETTER(get_mounts, true, v->mounts)
VOL_GETTER(get_size_limit, v->size_limit > 0, v->size_limit)
VOL_GETTER(get_inode_limit, v->inode_limit > 0, v->inode_limit)
VOL_GETTER(get_used_bytes, v->has_usage, v->used_bytes)
VOL_GETTER(get_used_inodes, v->has_usage, v->used_inodes)
VOL_GETTER(get_created, v->created_at > 0, v->created_at)

static void render_volumes(Prom *pr, const MetricsSnapshot *s)
{
	bool begun = false;

	prom_family(pr, "nvmevol_volume_info", "gauge",
		    "A volume (value 1); labels: name, partition UUID and label, state (ready, mounted, partition-missing, record-unreadable, ...)");
	for (size_t i = 0; i < s->n_vols; i++) {
		const MetricsVolume *v = &s->vols[i];

		prom_sample(pr, "", PROM_LABELS("volume", metrics_str(s, v->name), "partition", metrics_str(s, v->partition),
						 "partition_label", metrics_str(s, v->partition_label), "state",
						 v->state ? v->state : "unknown"),
			    1);
	}
	render_vol_gauge(pr, s, "nvmevol_volume_mounts", "Mounts of the volume Docker holds (0 when unmounted)", get_mounts);
	render_vol_gauge(pr, s, "nvmevol_volume_size_limit_bytes", "Hard limit of the volume's project quota, bytes (size=)",
			 get_size_limit);
	render_vol_gauge(pr, s, "nvmevol_volume_inode_limit", "Hard limit on files and directories (inodes=)", get_inode_limit);
	render_vol_gauge(pr, s, "nvmevol_volume_used_bytes", "Bytes used by the volume, from quota accounting", get_used_bytes);
	render_vol_gauge(pr, s, "nvmevol_volume_used_inodes", "Inodes used by the volume, from quota accounting",
			 get_used_inodes);
	render_vol_gauge(pr, s, "nvmevol_volume_created_timestamp_seconds", "When the volume was created, seconds since the epoch",
			 get_created);
	for (size_t i = 0; i < s->n_vols; i++) {
		const MetricsVolume *v = &s->vols[i];

		if (!v->has_verdict)
			continue;
		family_once(pr, &begun, "nvmevol_volume_selftest_verdict", "gauge",
			    "Self-test verdict of the volume's last mount against its own thresholds (value 1; label verdict)");
		prom_sample(pr, "", PROM_LABELS("volume", metrics_str(s, v->name), "partition", metrics_str(s, v->partition), "verdict",
						 selftest_verdict_to_string(v->verdict)),
			    1);
	}
}

/* nvmevol_up and when the file was written: all a stopped plugin's file says. */
static void render_up(Prom *pr, bool up, int64_t now)
{
	prom_family(pr, "nvmevol_up", "gauge", "1 while nvmevol runs; a graceful stop leaves 0");
	prom_sample(pr, "", NULL, up);
	prom_family(pr, "nvmevol_metrics_timestamp_seconds", "gauge", "When this file was written, seconds since the epoch");
	prom_sample(pr, "", NULL, (double)now);
}

static void render_process(Prom *pr, const MetricsSnapshot *s, const StatsSnapshot *st, int64_t now)
{
	render_up(pr, true, now);
	prom_family(pr, "nvmevol_build_info", "gauge", "The running nvmevol (value 1; label version)");
	prom_sample(pr, "", PROM_LABELS("version", PROJECT_VERSION), 1);
	prom_family(pr, "nvmevol_start_time_seconds", "gauge", "Start of the nvmevol process, seconds since the epoch");
	prom_sample(pr, "", NULL, (double)s->start_time);

	prom_family(pr, "nvmevol_volumes", "gauge", "Volumes nvmevol holds, by state");
	for (size_t k = 0; k < s->n_states; k++)
		prom_sample(pr, "", PROM_LABELS("state", s->by_state[k].state), (double)s->by_state[k].n);
	prom_family(pr, "nvmevol_metrics_volumes_omitted", "gauge",
		    "Volumes without per-volume series (beyond the first 10000 by name)");
	prom_sample(pr, "", NULL, (double)(s->vols_total - s->n_vols));

	prom_family(pr, "nvmevol_errors_total", "counter", "Failures since start, by kind");
	for (int k = 0; k < _STATS_ERROR_MAX; k++)
		prom_sample(pr, "", PROM_LABELS("kind", stats_error_kind_to_string((StatsErrorKind)k)), (double)st->errors[k]);

	prom_family(pr, "nvmevol_requests_total", "counter",
		    "Requests on the plugin socket by endpoint and result (ok, error: an Err from the operation, refused: a 4xx)");
	for (int e = 0; e < (int)STATS_ENDPOINTS; e++) {
		const char *path = api_endpoint_to_path((ApiEndpoint)e);
		const char *name = path ? path + 1 : "unknown";

		for (int r = 0; r < _STATS_RESULT_MAX; r++)
			prom_sample(pr, "", PROM_LABELS("endpoint", name, "result", stats_result_to_string((StatsResult)r)),
				    (double)st->requests[e][r]);
	}
	prom_family(pr, "nvmevol_request_duration_seconds", "histogram", "Time to answer a request, seconds, by endpoint");
	for (int e = 0; e < (int)STATS_ENDPOINTS; e++) {
		const char *path = api_endpoint_to_path((ApiEndpoint)e);

		prom_histogram(pr, PROM_LABELS("endpoint", path ? path + 1 : "unknown"), stats_latency_bounds, st->buckets[e],
			       STATS_LATENCY_BUCKETS, (double)st->latency_sum_ns[e] / 1e9);
	}
}

int metrics_render_file(FILE *f, const MetricsSnapshot *s, const StatsSnapshot *st, int64_t now)
{
	Prom pr;

	prom_begin_file(&pr, f);
	render_process(&pr, s, st, now);
	render_partitions(&pr, s);
	render_volumes(&pr, s);
	return prom_end_file(&pr);
}

char *metrics_render(const MetricsSnapshot *s, const StatsSnapshot *st, int64_t now, size_t *ret_len)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int r;

	if (!f)
		return NULL;
	r = metrics_render_file(f, s, st, now);
	if (fclose(f) != 0 || r < 0) {
		free(buf);
		return NULL;
	}
	if (ret_len)
		*ret_len = len;
	return buf;
}

/* nvmevol_up 0 and when: the file a stopped plugin leaves. */
static int render_stopped(FILE *f, int64_t now)
{
	Prom pr;

	prom_begin_file(&pr, f);
	render_up(&pr, false, now);
	return prom_end_file(&pr);
}

/* ---- The writer ---- */

struct MetricsWriter {
	int dirfd;
	char *dir;
	unsigned interval_s;
	MetricsCollect collect;
	void *userdata;
	int64_t start_time;

	pthread_t thread;
	bool started;
	pthread_mutex_t lock; /* guards dirty, dirty_since_ms, stop and last_write_ms */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC */
	bool dirty, stop;
	uint64_t dirty_since_ms; /* the first change not written yet */
	uint64_t last_write_ms;

	pthread_mutex_t write_lock; /* one write at a time; guards failing and iobuf */
	bool failing;               /* the last write failed: log the next failure only at debug level */
	char iobuf[32768];          /* the stream's buffer: the file is written through it, never held whole */
};

/* MetricsWriterCounters, process-wide (one writer per process), so a reader never needs the writer. */
static _Atomic uint64_t count_writes, count_failures, count_changes, count_cpu_ns, count_last_cpu_ns, count_last_bytes;

void metrics_counters(MetricsWriterCounters *ret)
{
	*ret = (MetricsWriterCounters){
		.writes = atomic_load(&count_writes),
		.failures = atomic_load(&count_failures),
		.changes = atomic_load(&count_changes),
		.cpu_ns = atomic_load(&count_cpu_ns),
		.last_cpu_ns = atomic_load(&count_last_cpu_ns),
		.last_bytes = atomic_load(&count_last_bytes),
	};
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef int (*RenderFn)(FILE *f, void *userdata);

/*
 * Streams @render's text into a temp file and renames it over the file.
 * 0644: node_exporter usually runs unprivileged. The temp name never matches
 * *.prom. A report, not state: atomic for readers, no fsync (after a crash the
 * next write replaces it anyway). Called with write_lock held (iobuf).
 */
static int write_streamed(MetricsWriter *w, RenderFn render, void *userdata, uint64_t *ret_bytes)
{
	char tmp[REPLACE_TMP_NAME_MAX];
	FILE *f;
	int fd, r;
	off_t end;

	fd = replace_tmp_open_at(w->dirfd, METRICS_FILE, 0644, tmp);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "w");
	if (!f) {
		r = negative_errno();
		(void)close(fd);
		return replace_tmp_finish_at(w->dirfd, tmp, METRICS_FILE, r, false);
	}
	(void)setvbuf(f, w->iobuf, _IOFBF, sizeof(w->iobuf));
	r = render(f, userdata);
	if (r >= 0 && fflush(f) != 0)
		r = negative_errno();
	end = ftello(f);
	if (fclose(f) != 0 && r >= 0)
		r = negative_errno();
	if (r >= 0 && ret_bytes)
		*ret_bytes = end > 0 ? (uint64_t)end : 0;
	return replace_tmp_finish_at(w->dirfd, tmp, METRICS_FILE, r, false);
}

typedef struct RenderArgs {
	const MetricsSnapshot *snap;
	const StatsSnapshot *st;
	int64_t now;
} RenderArgs;

static int render_running(FILE *f, void *userdata)
{
	const RenderArgs *a = userdata;

	return metrics_render_file(f, a->snap, a->st, a->now);
}

static int render_final(FILE *f, void *userdata)
{
	return render_stopped(f, *(const int64_t *)userdata);
}

int metrics_writer_write(MetricsWriter *w)
{
	MetricsSnapshot snap = {};
	StatsSnapshot st;
	uint64_t cpu0, bytes = 0;
	int r;

	pthread_mutex_lock(&w->write_lock);
	cpu0 = thread_cpu_ns();
	r = w->collect(w->userdata, &snap);
	if (r >= 0) {
		RenderArgs a = { .snap = &snap, .st = &st, .now = (int64_t)time(NULL) };

		snap.start_time = w->start_time;
		stats_snapshot(&st);
		r = write_streamed(w, render_running, &a, &bytes);
	}
	metrics_snapshot_done(&snap);
	/* The snapshot's blocks, and what requests freed since the last write, back to the kernel. */
	(void)malloc_trim(0);
	{
		uint64_t cpu = thread_cpu_ns() - cpu0;

		atomic_fetch_add(&count_cpu_ns, cpu);
		atomic_store(&count_last_cpu_ns, cpu);
	}
	if (r < 0) {
		atomic_fetch_add(&count_failures, 1);
		stats_error(STATS_ERROR_METRICS_WRITE);
		if (!w->failing)
			log_warning_errno(r, "cannot write the metrics file %s/%s", w->dir, METRICS_FILE);
		w->failing = true;
	} else {
		atomic_fetch_add(&count_writes, 1);
		atomic_store(&count_last_bytes, bytes);
		if (w->failing)
			log_info("metrics file %s/%s written again", w->dir, METRICS_FILE);
		w->failing = false;
	}
	pthread_mutex_unlock(&w->write_lock);
	return r;
}

static void *writer_main(void *arg)
{
	MetricsWriter *w = arg;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		uint64_t due = w->last_write_ms + (uint64_t)w->interval_s * 1000, now;
		struct timespec ts;

		if (w->dirty) {
			uint64_t settled = w->dirty_since_ms + METRICS_SETTLE_MS, gap = w->last_write_ms + METRICS_MIN_GAP_MS;
			uint64_t soonest = settled > gap ? settled : gap;

			if (soonest < due)
				due = soonest;
		}
		now = now_mono_ms();
		if (now < due) {
			ts.tv_sec = (time_t)(due / 1000);
			ts.tv_nsec = (long)(due % 1000) * 1000000;
			(void)pthread_cond_timedwait(&w->cond, &w->lock, &ts);
			continue;
		}
		w->dirty = false;
		w->last_write_ms = now;
		pthread_mutex_unlock(&w->lock);
		(void)metrics_writer_write(w);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* The writer metrics_notify() wakes: set while one runs (one per process: the daemon's). */
static MetricsWriter *_Atomic running_writer;

void metrics_notify(void)
{
	metrics_writer_notify(atomic_load(&running_writer));
}

void metrics_writer_notify(MetricsWriter *w)
{
	if (!w)
		return;
	atomic_fetch_add(&count_changes, 1);
	pthread_mutex_lock(&w->lock);
	if (!w->dirty) {
		/* Only the first change of a burst wakes the thread: it sleeps until the burst settled. */
		w->dirty = true;
		w->dirty_since_ms = now_mono_ms();
		pthread_cond_signal(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
}

static MetricsWriter *writer_free(MetricsWriter *w)
{
	if (w->dirfd >= 0)
		(void)close(w->dirfd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->write_lock);
	free(w->dir);
	free(w);
	return NULL;
}

int metrics_writer_start(const char *dir, unsigned interval_s, MetricsCollect collect, void *userdata,
			 MetricsWriter **ret, char **reterr_msg)
{
	MetricsWriter *w;
	pthread_condattr_t ca;
	int r;

	if (interval_s < 1)
		return errmsg_set(reterr_msg, -EINVAL, "metrics interval must be at least 1 second");
	w = calloc(1, sizeof(*w));
	if (!w || !(w->dir = strdup(dir))) {
		free(w);
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	}
	w->dirfd = -EBADF;
	w->interval_s = interval_s;
	w->collect = collect;
	w->userdata = userdata;
	w->start_time = (int64_t)time(NULL);
	atomic_store(&count_writes, 0);
	atomic_store(&count_failures, 0);
	atomic_store(&count_changes, 0);
	atomic_store(&count_cpu_ns, 0);
	atomic_store(&count_last_cpu_ns, 0);
	atomic_store(&count_last_bytes, 0);
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->write_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);

	/* The parent must exist (a typo must not create a tree somewhere); the directory itself may be made. */
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot create the metrics directory %s: %m", dir);
		writer_free(w);
		return r;
	}
	w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->dirfd < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot open the metrics directory %s: %m", dir);
		writer_free(w);
		return r;
	}
	(void)remove_atomic_tmp_files(w->dirfd);
	r = metrics_writer_write(w);
	if (r < 0) {
		writer_free(w);
		errno = -r;
		return errmsg_set(reterr_msg, r, "cannot write %s/%s: %m", dir, METRICS_FILE);
	}
	w->last_write_ms = now_mono_ms();
	r = -pthread_create(&w->thread, NULL, writer_main, w);
	if (r < 0) {
		writer_free(w);
		errno = -r;
		return errmsg_set(reterr_msg, r, "cannot start the metrics thread: %m");
	}
	w->started = true;
	atomic_store(&running_writer, w);
	*ret = w;
	return 0;
}

MetricsWriter *metrics_writer_stop(MetricsWriter *w)
{
	int64_t now;

	if (!w)
		return NULL;
	{
		MetricsWriter *expected = w;

		(void)atomic_compare_exchange_strong(&running_writer, &expected, NULL);
	}
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->started)
		(void)pthread_join(w->thread, NULL);

	/* What a scrape of a stopped plugin should say: not up, and since when. */
	now = (int64_t)time(NULL);
	pthread_mutex_lock(&w->write_lock);
	if (write_streamed(w, render_final, &now, NULL) < 0)
		log_warning("cannot write the final metrics file %s/%s", w->dir, METRICS_FILE);
	pthread_mutex_unlock(&w->write_lock);
	return writer_free(w);
}
