/* SPDX-License-Identifier: MIT */
/*
 * Direct-I/O self-test engine. See selftest.h for what is measured and in
 * which order. Conventions: functions return 0 or -errno; the first failure
 * writes its message into Run.err and everything else only propagates it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/aio_abi.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "selftest/selftest.h"
#include "selftest/selftest-stats.h"
#include "util/errmsg.h"
#include "util/macro.h"

#define UNIT 4096u /* pattern granularity: what one verified "block" is */
#define WORDS_PER_UNIT (UNIT / sizeof(uint64_t))
#define MIB (1024u * 1024u)
#define NSEC_PER_MSEC UINT64_C(1000000)
#define NSEC_PER_SEC UINT64_C(1000000000)

#define SEQ_MIN_DEFAULT (8 * (uint64_t)MIB)
/* Keeps the generation table (2 bytes per 4 KiB) and the run length bounded on big, fast disks. */
#define SEQ_MAX_DEFAULT (UINT64_C(4) << 30)
/* Read back early in the sequential write to estimate how long reading the whole file back will take. */
#define PROBE_BYTES (4 * (uint64_t)MIB)
/* Exact percentiles need every sample; beyond this, reservoir sampling keeps memory bounded (4 MiB). */
#define LAT_SAMPLES_MAX (1u << 20)
/* Enough samples that p99 is not simply the maximum of a handful, on slow devices too. */
#define QD1_MIN_OPS 64u
#define QDN_MIN_OPS_PER_THREAD 2u
#define WORKER_STACK_SIZE (256u * 1024u)

/*
 * Share of the budget: the sequential write plus reading the file back get
 * SEQ_SHARE; what is left after them is split between the random phases by
 * weight. The queue-depth-1 phases weigh more because their p99 needs
 * SELFTEST_P99_MIN_SAMPLES (about 1300 per phase at 40 us an I/O on an idle
 * disk); a rate at queue depth 16 settles within a few thousand I/Os.
 */
#define SEQ_SHARE 0.35
#define W_RAND_WRITE_QD1 0.35
#define W_RAND_WRITE_QDN 0.15
#define W_RAND_READ_QD1 0.35
#define W_RAND_READ_QDN 0.15

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void (*read_hook)(void *buf, size_t len, uint64_t offset) = NULL;

void selftest_set_read_hook(void (*hook)(void *buf, size_t len, uint64_t offset))
{
	read_hook = hook;
}

typedef struct Run {
	int fd;
	uint64_t seed;
	uint64_t t_start, t_end; /* CLOCK_MONOTONIC ns: start of the run, end of the budget */
	size_t mem_align;
	unsigned rbs;            /* random I/O size: 4 KiB, or the DIO offset alignment if larger */
	unsigned iodepth;
	uint64_t file_bytes;     /* bytes written sequentially so far; the region of the random phases */
	uint64_t seq_min, seq_max;
	uint16_t *gen;           /* write generation of every 4 KiB unit; 0 = never written */
	void (*hook)(void *buf, size_t len, uint64_t offset);
	atomic_bool corrupt_once; /* NVMEVOL_TEST_SELFTEST_CORRUPT: flip one byte after one read */
	bool no_aio;              /* NVMEVOL_TEST_SELFTEST_NO_AIO: the thread fallback of the IOPS phases */
	SelftestResult *res;
	char *err;
} Run;

static uint64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

_printf_(3, 4) static int run_fail(Run *run, int r, const char *fmt, ...)
{
	va_list ap;

	/* Only the first failure is reported: later ones are its consequences. */
	if (!run->err) {
		va_start(ap, fmt);
		if (vasprintf(&run->err, fmt, ap) < 0)
			run->err = NULL;
		va_end(ap);
	}
	return r;
}

/* splitmix64's finaliser: a bijection, so distinct inputs never collide. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

static inline uint64_t rng_next(uint64_t *state)
{
	*state += UINT64_C(0x9e3779b97f4a7c15);
	return mix64(*state);
}

/* Uniform in [0, n) without a division (Lemire's multiply-shift; the bias is < n / 2^64). */
static inline uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(state) * n) >> 64);
}

/*
 * Every 4 KiB unit is an arithmetic sequence of 64-bit words starting at a
 * value derived from (seed, unit number, generation): a stale unit (older
 * generation), a misplaced one (other offset), one from another run (other
 * seed), zeroes or a single flipped bit all fail the comparison.
 */
#define PATTERN_STEP UINT64_C(0x9e3779b97f4a7c15)

static inline uint64_t unit_base(uint64_t seed, uint64_t offset, uint16_t gen)
{
	return mix64(seed ^ mix64((offset / UNIT) ^ ((uint64_t)gen << 48)));
}

static void pattern_fill(const Run *run, void *buf, size_t len, uint64_t offset)
{
	uint64_t *w = buf;

	for (size_t u = 0; u < len / UNIT; u++, w += WORDS_PER_UNIT) {
		uint64_t o = offset + (uint64_t)u * UNIT;
		uint64_t base = unit_base(run->seed, o, run->gen[o / UNIT]);

		for (size_t i = 0; i < WORDS_PER_UNIT; i++)
			w[i] = base + i * PATTERN_STEP;
	}
}

typedef struct VerifyCount {
	uint64_t verified, errors, first_error;
} VerifyCount;

static void pattern_check(const Run *run, const void *buf, size_t len, uint64_t offset, VerifyCount *vc)
{
	const uint64_t *w = buf;

	for (size_t u = 0; u < len / UNIT; u++, w += WORDS_PER_UNIT) {
		uint64_t o = offset + (uint64_t)u * UNIT;
		uint64_t base = unit_base(run->seed, o, run->gen[o / UNIT]);
		uint64_t diff = 0;

		for (size_t i = 0; i < WORDS_PER_UNIT; i++)
			diff |= w[i] ^ (base + i * PATTERN_STEP);
		vc->verified++;
		if (diff != 0) {
			if (vc->errors == 0 || o < vc->first_error)
				vc->first_error = o;
			vc->errors++;
		}
	}
}

static void verify_count_add(VerifyCount *to, const VerifyCount *from)
{
	if (from->errors > 0 && (to->errors == 0 || from->first_error < to->first_error))
		to->first_error = from->first_error;
	to->verified += from->verified;
	to->errors += from->errors;
}

static void verify_count_commit(Run *run, const VerifyCount *vc)
{
	SelftestResult *r = run->res;

	if (vc->errors > 0 && (r->verify_errors == 0 || vc->first_error < r->first_error_offset))
		r->first_error_offset = vc->first_error;
	r->blocks_verified += vc->verified;
	r->verify_errors += vc->errors;
}

/* Called after every successful read, before the check. */
static void after_read(Run *run, void *buf, size_t len, uint64_t offset)
{
	if (run->hook)
		run->hook(buf, len, offset);
	if (atomic_load_explicit(&run->corrupt_once, memory_order_relaxed) &&
	    atomic_exchange(&run->corrupt_once, false))
		((uint8_t *)buf)[len / 2] ^= 0x5a;
}

/* One positioned O_DIRECT transfer, all or nothing; a short transfer is an I/O error. */
static int xfer(int fd, bool write, void *buf, size_t len, uint64_t offset, ssize_t *ret_n)
{
	ssize_t n;

	do {
		n = write ? pwrite(fd, buf, len, (off_t)offset) : pread(fd, buf, len, (off_t)offset);
	} while (n < 0 && errno == EINTR);
	*ret_n = n;
	if (n < 0)
		return negative_errno();
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

static int xfer_fail(Run *run, int r, const char *phase, bool write, size_t len, uint64_t offset, ssize_t n)
{
	if (r == -EIO && n >= 0)
		return run_fail(run, r, "short %s during %s at offset %" PRIu64 ": %zd of %zu bytes",
				write ? "write" : "read", phase, offset, n, len);
	if (r == -EINVAL)
		return run_fail(run, r, "O_DIRECT %s refused during %s at offset %" PRIu64 " (%zu bytes, alignment %u): %s",
				write ? "write" : "read", phase, offset, len, run->res->alignment, errno_str(r));
	if (r == -ENOSPC)
		return run_fail(run, r, "no space left on the filesystem during %s at offset %" PRIu64, phase, offset);
	return run_fail(run, r, "I/O error during %s at offset %" PRIu64 ": %s", phase, offset, errno_str(r));
}

static int alloc_buffer(const Run *run, size_t len, void **ret)
{
	void *p = NULL;
	int r;

	r = posix_memalign(&p, run->mem_align, len);
	if (r != 0)
		return -r;
	/* Touch it now, so that page faults are not timed as I/O. */
	memset(p, 0, len);
	*ret = p;
	return 0;
}

/*
 * Time left for the phase, given the weights of the phases still to run and
 * time already promised to work that must happen anyway (@reserved_ns).
 */
static uint64_t phase_deadline(const Run *run, double weight, double weights_left, uint64_t reserved_ns)
{
	uint64_t now = now_ns(), avail = 0;

	if (run->t_end > now + reserved_ns)
		avail = run->t_end - now - reserved_ns;
	return now + (uint64_t)((double)avail * (weight / weights_left));
}

/* ---- Sequential phases ---- */

static int seq_read_range(Run *run, void *buf, uint64_t from, uint64_t to, const char *phase,
			  uint64_t *io_ns)
{
	VerifyCount vc = {};
	int r = 0;

	for (uint64_t off = from; off < to; off += SELFTEST_SEQ_BLOCK_SIZE) {
		size_t len = (size_t)min_u64(SELFTEST_SEQ_BLOCK_SIZE, to - off);
		uint64_t t0;
		ssize_t n;

		t0 = now_ns();
		r = xfer(run->fd, false, buf, len, off, &n);
		*io_ns += now_ns() - t0;
		if (r < 0) {
			r = xfer_fail(run, r, phase, false, len, off, n);
			break;
		}
		run->res->bytes_read += len;
		after_read(run, buf, len, off);
		pattern_check(run, buf, len, off, &vc);
	}
	verify_count_commit(run, &vc);
	return r;
}

static int phase_seq_write(Run *run, uint64_t *ret_read_est_ns)
{
	_cleanup_free_ void *buf = NULL;
	uint64_t write_ns = 0, probe_ns = 0, probe_bytes = 0, fsync_ns, t0;
	uint64_t deadline = run->t_start + (uint64_t)((double)(run->t_end - run->t_start) * SEQ_SHARE);
	int r;

	r = alloc_buffer(run, SELFTEST_SEQ_BLOCK_SIZE, &buf);
	if (r < 0)
		return run_fail(run, r, "cannot allocate the I/O buffer: %s", errno_str(r));

	for (uint64_t off = 0; off < run->seq_max; off += SELFTEST_SEQ_BLOCK_SIZE) {
		ssize_t n;

		if (off >= run->seq_min && probe_bytes > 0) {
			/*
			 * Stop when writing one more block and then reading the
			 * whole file back would overrun the sequential share.
			 */
			double per_block_write = (double)write_ns / (double)(off / SELFTEST_SEQ_BLOCK_SIZE);
			double read_all = (double)probe_ns * (double)(off + SELFTEST_SEQ_BLOCK_SIZE) / (double)probe_bytes;

			if ((double)now_ns() + per_block_write + read_all > (double)deadline)
				break;
		}

		for (uint64_t u = off / UNIT; u < (off + SELFTEST_SEQ_BLOCK_SIZE) / UNIT; u++)
			run->gen[u] = 1;
		pattern_fill(run, buf, SELFTEST_SEQ_BLOCK_SIZE, off);

		t0 = now_ns();
		r = xfer(run->fd, true, buf, SELFTEST_SEQ_BLOCK_SIZE, off, &n);
		write_ns += now_ns() - t0;
		if (r < 0)
			return xfer_fail(run, r, "sequential write", true, SELFTEST_SEQ_BLOCK_SIZE, off, n);
		run->file_bytes = off + SELFTEST_SEQ_BLOCK_SIZE;
		run->res->bytes_written += SELFTEST_SEQ_BLOCK_SIZE;

		if (probe_bytes == 0 && (run->file_bytes >= PROBE_BYTES || run->file_bytes >= run->seq_max)) {
			_cleanup_free_ void *rbuf = NULL;

			/* Read back what is written so far: an estimate of the read rate, and verified data. */
			r = alloc_buffer(run, SELFTEST_SEQ_BLOCK_SIZE, &rbuf);
			if (r < 0)
				return run_fail(run, r, "cannot allocate the I/O buffer: %s", errno_str(r));
			r = seq_read_range(run, rbuf, 0, run->file_bytes, "sequential read", &probe_ns);
			if (r < 0)
				return r;
			probe_bytes = run->file_bytes;
		}
	}

	t0 = now_ns();
	r = fdatasync(run->fd) < 0 ? negative_errno() : 0;
	fsync_ns = now_ns() - t0;
	if (r < 0)
		return run_fail(run, r, "I/O error during fdatasync after the sequential write: %s", errno_str(r));

	run->res->fdatasync_ms = (double)fsync_ns / (double)NSEC_PER_MSEC;
	run->res->seq_write_mbps = (double)run->file_bytes / MIB / ((double)(write_ns + fsync_ns) / NSEC_PER_SEC);
	*ret_read_est_ns = probe_bytes > 0 ? (uint64_t)((double)probe_ns * (double)run->file_bytes / (double)probe_bytes) : 0;
	return 0;
}

static int phase_seq_read(Run *run)
{
	_cleanup_free_ void *buf = NULL;
	uint64_t read_ns = 0;
	int r;

	r = alloc_buffer(run, SELFTEST_SEQ_BLOCK_SIZE, &buf);
	if (r < 0)
		return run_fail(run, r, "cannot allocate the I/O buffer: %s", errno_str(r));
	r = seq_read_range(run, buf, 0, run->file_bytes, "sequential read", &read_ns);
	if (r < 0)
		return r;
	run->res->seq_read_mbps = (double)run->file_bytes / MIB / ((double)read_ns / NSEC_PER_SEC);
	return 0;
}

/* ---- Random phases ---- */

typedef struct Samples {
	uint32_t *v;
	size_t n, cap;
	uint64_t seen;
	uint64_t rng;
} Samples;

static void samples_add(Samples *s, uint64_t ns)
{
	uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;

	s->seen++;
	if (s->n < s->cap) {
		s->v[s->n++] = v;
		return;
	}
	if (s->cap < LAT_SAMPLES_MAX) {
		size_t cap = s->cap ? s->cap * 2 : 4096;
		uint32_t *p = realloc(s->v, cap * sizeof(uint32_t));

		if (p) {
			s->v = p;
			s->cap = cap;
			s->v[s->n++] = v;
			return;
		}
	}
	/* Reservoir sampling (Algorithm R): each sample kept with probability cap/seen. */
	if (s->n > 0) {
		uint64_t j = rng_below(&s->rng, s->seen);

		if (j < s->n)
			s->v[j] = v;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static double samples_percentile_ms(const Samples *s, unsigned permille)
{
	return (double)selftest_percentile(s->v, s->n, permille) / (double)NSEC_PER_MSEC;
}

static void mark_written(Run *run, uint64_t offset, size_t len)
{
	for (uint64_t u = offset / UNIT; u < (offset + len) / UNIT; u++)
		run->gen[u]++;
	/* 0 means "never written" in the table; skip it when the counter wraps. */
	for (uint64_t u = offset / UNIT; u < (offset + len) / UNIT; u++)
		if (run->gen[u] == 0)
			run->gen[u] = 1;
}

/*
 * Sets *ret_p99 only from enough samples (selftest-stats.h); otherwise leaves
 * it 0 and sets *ret_unreported. *ret_samples: the latencies counted.
 */
static int phase_rand_qd1(Run *run, bool write, uint64_t deadline, double *ret_p50, double *ret_p99,
			  uint64_t *ret_samples, bool *ret_unreported)
{
	_cleanup_free_ void *buf = NULL;
	Samples s = { .rng = run->seed ^ 0x51 };
	uint64_t nblocks = run->file_bytes / run->rbs, rng = mix64(run->seed + (write ? 1 : 2));
	const char *phase = write ? "random write" : "random read";
	VerifyCount vc = {};
	int r;

	r = alloc_buffer(run, run->rbs, &buf);
	if (r < 0)
		return run_fail(run, r, "cannot allocate the I/O buffer: %s", errno_str(r));

	for (uint64_t ops = 0;; ops++) {
		uint64_t off = rng_below(&rng, nblocks) * run->rbs, t0, t1;
		ssize_t n;

		if (write) {
			mark_written(run, off, run->rbs);
			pattern_fill(run, buf, run->rbs, off);
		}
		t0 = now_ns();
		r = xfer(run->fd, write, buf, run->rbs, off, &n);
		t1 = now_ns();
		if (r < 0) {
			r = xfer_fail(run, r, phase, write, run->rbs, off, n);
			break;
		}
		/* The first I/O of the phase is not counted: it pays for the switch from the previous one. */
		if (ops > 0)
			samples_add(&s, t1 - t0);
		if (write)
			run->res->bytes_written += run->rbs;
		else {
			run->res->bytes_read += run->rbs;
			after_read(run, buf, run->rbs, off);
			pattern_check(run, buf, run->rbs, off, &vc);
		}
		if (t1 >= deadline && ops >= QD1_MIN_OPS)
			break;
	}
	verify_count_commit(run, &vc);
	if (r >= 0 && s.n > 0) {
		/* s.v is NULL when allocation failed: qsort(NULL, 0) is undefined. */
		qsort(s.v, s.n, sizeof(uint32_t), cmp_u32);
		*ret_p50 = samples_percentile_ms(&s, 500);
		if (selftest_p99_reportable(s.n))
			*ret_p99 = samples_percentile_ms(&s, 990);
	}
	*ret_samples = s.seen;
	*ret_unreported = !selftest_p99_reportable(s.n);
	free(s.v);
	return r;
}


/*
 * Queue depth N with Linux native AIO (io_submit on an O_DIRECT file, what
 * fio's ioengine=libaio iodepth=N does): one thread keeps N I/Os in flight,
 * so no thread start-up or N-thread scheduling is measured. The kernel
 * interface is used through raw system calls (no libaio).
 */
/*
 * AIO contexts are kept for the next run instead of destroyed: io_destroy()
 * waits for an RCU grace period (30 ms on the development VM, a tenth of the
 * default budget). At most AIO_POOL_MAX idle contexts are kept; each is
 * idle (nothing in flight, no completion pending) while in the pool.
 */
#define AIO_POOL_MAX 8u

static pthread_mutex_t aio_pool_lock = PTHREAD_MUTEX_INITIALIZER; /* guards aio_pool, aio_pool_n */
static struct {
	aio_context_t ctx;
	unsigned depth;
} aio_pool[AIO_POOL_MAX];
static unsigned aio_pool_n;

/* A context for at least @depth I/Os; *ret_depth: what it was made for (give that back to aio_ctx_put). */
static int aio_ctx_get(unsigned depth, aio_context_t *ret, unsigned *ret_depth)
{
	aio_context_t ctx = 0;

	pthread_mutex_lock(&aio_pool_lock);
	for (unsigned i = 0; i < aio_pool_n; i++)
		if (aio_pool[i].depth >= depth) {
			*ret = aio_pool[i].ctx;
			*ret_depth = aio_pool[i].depth;
			aio_pool[i] = aio_pool[--aio_pool_n];
			pthread_mutex_unlock(&aio_pool_lock);
			return 0;
		}
	pthread_mutex_unlock(&aio_pool_lock);
	if (syscall(SYS_io_setup, depth, &ctx) < 0)
		return negative_errno();
	*ret = ctx;
	*ret_depth = depth;
	return 0;
}

static void aio_ctx_put(aio_context_t ctx, unsigned depth)
{
	pthread_mutex_lock(&aio_pool_lock);
	if (aio_pool_n < AIO_POOL_MAX) {
		aio_pool[aio_pool_n].ctx = ctx;
		aio_pool[aio_pool_n].depth = depth;
		aio_pool_n++;
		ctx = 0;
	}
	pthread_mutex_unlock(&aio_pool_lock);
	if (ctx)
		(void)syscall(SYS_io_destroy, ctx);
}

typedef struct AioQueue {
	aio_context_t ctx;
	unsigned depth;
	struct iocb *cbs;
	struct iocb **ptrs;
	struct io_event *events;
	unsigned ctx_depth; /* what ctx was made for: a pooled one may be deeper */
	uint64_t *offs;   /* in-flight offset of each slot; UINT64_MAX when idle */
	uint8_t *bufs;    /* depth buffers of run->rbs bytes */
	unsigned inflight;
} AioQueue;

static int aio_queue_init(Run *run, AioQueue *q, unsigned depth)
{
	void *bufs = NULL;
	int r;

	*q = (AioQueue){ .depth = depth };
	r = aio_ctx_get(depth, &q->ctx, &q->ctx_depth);
	if (r < 0)
		return r;
	q->cbs = calloc(depth, sizeof(struct iocb));
	q->ptrs = calloc(depth, sizeof(struct iocb *));
	q->events = calloc(depth, sizeof(struct io_event));
	q->offs = calloc(depth, sizeof(uint64_t));
	r = alloc_buffer(run, (size_t)depth * run->rbs, &bufs);
	q->bufs = bufs;
	if (r == 0 && (!q->cbs || !q->ptrs || !q->events || !q->offs))
		r = -ENOMEM;
	return r;
}

/* Waits for everything in flight (their buffers are about to be freed), then frees. */
static void aio_queue_done(AioQueue *q)
{
	bool idle = true;

	while (q->inflight > 0) {
		long n = syscall(SYS_io_getevents, q->ctx, 1L, (long)q->depth, q->events, NULL);

		if (n < 0 && errno != EINTR) {
			idle = false;
			break;
		}
		if (n > 0)
			q->inflight -= (unsigned)n;
	}
	/* A context that may still hold I/O is destroyed (io_destroy waits for it), never reused. */
	if (q->ctx && idle)
		aio_ctx_put(q->ctx, q->ctx_depth);
	else if (q->ctx)
		(void)syscall(SYS_io_destroy, q->ctx);
	free(q->cbs);
	free(q->ptrs);
	free(q->events);
	free(q->offs);
	free(q->bufs);
	*q = (AioQueue){};
}

/* Submits @n prepared iocbs from q->ptrs, retrying partial submissions. */
static int aio_submit_all(AioQueue *q, unsigned n)
{
	unsigned done = 0;

	while (done < n) {
		long k = syscall(SYS_io_submit, q->ctx, (long)(n - done), q->ptrs + done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k == 0)
			return -EAGAIN;
		done += (unsigned)k;
		q->inflight += (unsigned)k;
	}
	return 0;
}

/* A random block for slot @i; a write never targets a block another slot has in flight. */
static uint64_t aio_pick(Run *run, AioQueue *q, bool write, unsigned i, uint64_t *rng)
{
	uint64_t nblocks = run->file_bytes / run->rbs;

	for (;;) {
		uint64_t off = rng_below(rng, nblocks) * run->rbs;
		bool busy = false;

		for (unsigned k = 0; write && k < q->depth && !busy; k++)
			busy = k != i && q->offs[k] == off;
		if (!busy)
			return off;
	}
}

static void aio_prepare(Run *run, AioQueue *q, bool write, unsigned i, uint64_t off)
{
	void *buf = q->bufs + (size_t)i * run->rbs;

	q->offs[i] = off;
	if (write) {
		mark_written(run, off, run->rbs);
		pattern_fill(run, buf, run->rbs, off);
	}
	q->cbs[i] = (struct iocb){
		.aio_data = i,
		.aio_lio_opcode = write ? IOCB_CMD_PWRITE : IOCB_CMD_PREAD,
		.aio_fildes = (uint32_t)run->fd,
		.aio_buf = (uint64_t)(uintptr_t)buf,
		.aio_nbytes = run->rbs,
		.aio_offset = (int64_t)off,
	};
}

/*
 * When the kernel refuses an AIO context (no CONFIG_AIO, fs.aio-max-nr used
 * up, a seccomp filter), sets *ret_unavailable and returns that error without
 * a message, so that the caller can use threads instead; any other error is
 * a failure of the run, with its message set.
 */
static int phase_rand_aio(Run *run, bool write, unsigned depth, double weight, double weights_left,
			  uint64_t reserved_ns, double *ret_iops, bool *ret_unavailable)
{
	const char *phase = write ? "random write" : "random read";
	uint64_t rng = mix64(run->seed ^ ((uint64_t)(write ? 3 : 4) << 32));
	uint64_t t0, t1 = 0, t_warm = 0, deadline, ops = 0, ops_warm = 0, err_off = 0;
	VerifyCount vc = {};
	AioQueue q;
	bool stop = false;
	ssize_t err_n = 0;
	int r, err = 0;

	*ret_unavailable = false;
	r = aio_queue_init(run, &q, depth);
	if (r < 0) {
		aio_queue_done(&q);
		if (r == -ENOMEM)
			return run_fail(run, r, "out of memory");
		*ret_unavailable = true;
		return r;
	}
	for (unsigned i = 0; i < depth; i++)
		q.offs[i] = UINT64_MAX;
	for (unsigned i = 0; i < depth; i++) {
		aio_prepare(run, &q, write, i, aio_pick(run, &q, write, i, &rng));
		q.ptrs[i] = &q.cbs[i];
	}

	t0 = now_ns();
	deadline = phase_deadline(run, weight, weights_left, reserved_ns);
	r = aio_submit_all(&q, depth);
	if (r < 0) {
		aio_queue_done(&q);
		return run_fail(run, r, "cannot queue %s I/O: %s", phase, errno_str(r));
	}

	while (q.inflight > 0) {
		long n;

		n = syscall(SYS_io_getevents, q.ctx, 1L, (long)depth, q.events, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = negative_errno();
			aio_queue_done(&q);
			return run_fail(run, r, "I/O error during %s: waiting for completions: %s", phase, errno_str(r));
		}
		t1 = now_ns();
		q.inflight -= (unsigned)n;
		for (long e = 0; e < n; e++) {
			unsigned i = (unsigned)q.events[e].data;
			int64_t res = q.events[e].res;
			uint64_t off = q.offs[i];

			q.offs[i] = UINT64_MAX;
			if (res != (int64_t)run->rbs) {
				if (err == 0) {
					err = res < 0 ? (int)res : -EIO;
					err_off = off;
					err_n = res < 0 ? -1 : (ssize_t)res;
				}
				stop = true;
				continue;
			}
			ops++;
			/* The rate counts from the first turnover of the queue: the ramp-up is not the disk's speed. */
			if (ops == depth) {
				t_warm = t1;
				ops_warm = ops;
			}
			if (!write) {
				void *buf = q.bufs + (size_t)i * run->rbs;

				after_read(run, buf, run->rbs, off);
				pattern_check(run, buf, run->rbs, off, &vc);
			}
			if (stop || (t1 >= deadline && ops >= 2 * (uint64_t)depth)) {
				stop = true;
				continue;
			}
			/*
			 * Each I/O on its own, as soon as its slot is free: fio's libaio
			 * default (iodepth_batch_submit=1), what "QD16" means to its users.
			 * One io_submit for everything reaped at once measured 1.5-1.8x
			 * fio's random-read rate on a VM, where each submission notifies
			 * the virtual disk (SELFTEST_METHOD 1; selftest-vs-fio.md).
			 */
			aio_prepare(run, &q, write, i, aio_pick(run, &q, write, i, &rng));
			q.ptrs[0] = &q.cbs[i];
			r = aio_submit_all(&q, 1);
			if (r < 0 && err == 0) {
				err = r;
				err_off = (uint64_t)q.ptrs[0]->aio_offset;
				err_n = -1;
			}
			if (r < 0)
				stop = true;
		}
	}
	aio_queue_done(&q);
	verify_count_commit(run, &vc);
	if (err < 0)
		return xfer_fail(run, err, phase, write, run->rbs, err_off, err_n < 0 ? -1 : err_n);

	if (write)
		run->res->bytes_written += ops * run->rbs;
	else
		run->res->bytes_read += ops * run->rbs;
	if (t_warm > 0 && t1 > t_warm)
		*ret_iops = (double)(ops - ops_warm) / ((double)(t1 - t_warm) / NSEC_PER_SEC);
	else
		*ret_iops = t1 > t0 ? (double)ops / ((double)(t1 - t0) / NSEC_PER_SEC) : 0;
	return 0;
}

typedef struct Phase Phase;

typedef struct Worker {
	Phase *phase;
	pthread_t thread;
	unsigned index;
	uint64_t rng;
	uint64_t ops, last_ns;
	VerifyCount vc;
	int error;
	uint64_t error_offset;
	ssize_t error_n;
} Worker;

struct Phase {
	Run *run;
	bool write;
	unsigned nthreads;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool go;
	uint64_t deadline;
	atomic_bool stop;
	Worker *workers;
};

static void *worker_main(void *p)
{
	Worker *w = p;
	Phase *ph = w->phase;
	Run *run = ph->run;
	uint64_t nblocks = run->file_bytes / run->rbs;
	/* Writers own the blocks congruent to their index: no two threads ever write the same unit. */
	uint64_t owned = (nblocks - w->index + ph->nthreads - 1) / ph->nthreads;
	_cleanup_free_ void *buf = NULL;
	int r;

	r = alloc_buffer(run, run->rbs, &buf);

	pthread_mutex_lock(&ph->lock);
	while (!ph->go)
		pthread_cond_wait(&ph->cond, &ph->lock);
	pthread_mutex_unlock(&ph->lock);

	if (r < 0) {
		w->error = r;
		atomic_store(&ph->stop, true);
		return NULL;
	}

	while (!atomic_load_explicit(&ph->stop, memory_order_relaxed)) {
		uint64_t off, t1;
		ssize_t n;

		if (ph->write) {
			off = (rng_below(&w->rng, owned) * ph->nthreads + w->index) * run->rbs;
			mark_written(run, off, run->rbs);
			pattern_fill(run, buf, run->rbs, off);
		} else
			off = rng_below(&w->rng, nblocks) * run->rbs;

		r = xfer(run->fd, ph->write, buf, run->rbs, off, &n);
		t1 = now_ns();
		if (r < 0) {
			w->error = r;
			w->error_offset = off;
			w->error_n = n;
			atomic_store(&ph->stop, true);
			break;
		}
		w->ops++;
		w->last_ns = t1;
		if (!ph->write) {
			after_read(run, buf, run->rbs, off);
			pattern_check(run, buf, run->rbs, off, &w->vc);
		}
		if (t1 >= ph->deadline && w->ops >= QDN_MIN_OPS_PER_THREAD)
			break;
	}
	return NULL;
}

static int phase_rand_threads(Run *run, bool write, double weight, double weights_left, uint64_t reserved_ns,
			      double *ret_iops)
{
	const char *name = write ? "random write" : "random read";
	uint64_t nblocks = run->file_bytes / run->rbs, t0, t_last = 0, ops = 0;
	Phase ph = {
		.run = run,
		.write = write,
		.nthreads = (unsigned)min_u64(run->iodepth, nblocks),
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	pthread_attr_t attr;
	VerifyCount vc = {};
	unsigned started = 0;
	int r = 0;

	ph.workers = calloc(ph.nthreads, sizeof(Worker));
	if (!ph.workers)
		return run_fail(run, -ENOMEM, "out of memory");
	r = -pthread_attr_init(&attr);
	if (r < 0) {
		free(ph.workers);
		return run_fail(run, r, "cannot start I/O threads: %s", errno_str(r));
	}
	(void)pthread_attr_setstacksize(&attr, WORKER_STACK_SIZE);

	for (unsigned i = 0; i < ph.nthreads; i++) {
		ph.workers[i] = (Worker){
			.phase = &ph,
			.index = i,
			.rng = mix64(run->seed ^ ((uint64_t)(write ? 3 : 4) << 32) ^ i),
		};
		r = -pthread_create(&ph.workers[i].thread, &attr, worker_main, &ph.workers[i]);
		if (r < 0)
			break;
		started++;
	}
	(void)pthread_attr_destroy(&attr);

	/* The clock starts when every thread is ready, as with fio's group start. */
	pthread_mutex_lock(&ph.lock);
	if (r < 0)
		atomic_store(&ph.stop, true);
	t0 = now_ns();
	ph.deadline = phase_deadline(run, weight, weights_left, reserved_ns);
	ph.go = true;
	pthread_cond_broadcast(&ph.cond);
	pthread_mutex_unlock(&ph.lock);

	for (unsigned i = 0; i < started; i++)
		(void)pthread_join(ph.workers[i].thread, NULL);
	(void)pthread_cond_destroy(&ph.cond);
	(void)pthread_mutex_destroy(&ph.lock);

	if (r < 0) {
		free(ph.workers);
		return run_fail(run, r, "cannot start I/O threads: %s", errno_str(r));
	}

	for (unsigned i = 0; i < ph.nthreads; i++) {
		Worker *w = &ph.workers[i];

		if (w->error < 0 && r == 0) {
			if (w->error == -ENOMEM)
				r = run_fail(run, w->error, "cannot allocate the I/O buffer: %s", errno_str(ENOMEM));
			else
				r = xfer_fail(run, w->error, name, write, run->rbs, w->error_offset, w->error_n);
		}
		ops += w->ops;
		if (w->last_ns > t_last)
			t_last = w->last_ns;
		verify_count_add(&vc, &w->vc);
	}
	free(ph.workers);
	verify_count_commit(run, &vc);
	if (r < 0)
		return r;

	if (write)
		run->res->bytes_written += ops * run->rbs;
	else
		run->res->bytes_read += ops * run->rbs;
	*ret_iops = t_last > t0 ? (double)ops / ((double)(t_last - t0) / NSEC_PER_SEC) : 0;
	return 0;
}

/* The IOPS phase: AIO at the queue depth, or as many threads where the kernel has no AIO for us. */
static int phase_rand_qdn(Run *run, bool write, double weight, double weights_left, uint64_t reserved_ns,
			  double *ret_iops)
{
	uint64_t nblocks = run->file_bytes / run->rbs;
	unsigned depth = (unsigned)min_u64(run->iodepth, nblocks);
	bool unavailable = true;
	int r;

	if (!run->no_aio) {
		r = phase_rand_aio(run, write, depth, weight, weights_left, reserved_ns, ret_iops, &unavailable);
		if (!unavailable)
			return r;
	}
	run->res->qd_threads = true;
	return phase_rand_threads(run, write, weight, weights_left, reserved_ns, ret_iops);
}

/* ---- Setup ---- */

static int open_named_scratch(Run *run, int dirfd, int flags)
{
	for (unsigned attempt = 0; attempt < 16; attempt++) {
		char name[sizeof(SELFTEST_SCRATCH_PREFIX) + 40];
		uint64_t rnd = mix64(run->seed + attempt);
		int fd;

		(void)snprintf(name, sizeof(name), SELFTEST_SCRATCH_PREFIX "%ld.%016" PRIx64, (long)getpid(), rnd);
		fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return negative_errno();
		/* Unnamed from now on: a crash after this leaves nothing behind. */
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
			int r = negative_errno();

			(void)close(fd);
			return r;
		}
		return fd;
	}
	return -EEXIST;
}

static int open_scratch(Run *run, int dirfd)
{
	const int flags = O_RDWR | O_DIRECT | O_CLOEXEC;
	int fd, r;

	fd = openat(dirfd, ".", flags | O_TMPFILE, 0600);
	if (fd >= 0)
		return fd;
	r = negative_errno();
	if (r == -EINVAL) {
		/* Did the filesystem refuse O_DIRECT or O_TMPFILE? */
		fd = openat(dirfd, ".", (flags & ~O_DIRECT) | O_TMPFILE, 0600);
		if (fd >= 0) {
			(void)close(fd);
			return run_fail(run, -EINVAL, "O_DIRECT is not supported on this filesystem (tmpfs?)");
		}
	} else if (r != -EOPNOTSUPP && r != -EISDIR)
		return run_fail(run, r, "cannot create the scratch file: %s", errno_str(r));

	/* O_TMPFILE refused: a named file, unlinked right after it is opened. */
	run->res->named_scratch = true;
	fd = open_named_scratch(run, dirfd, flags);
	if (fd == -EINVAL)
		return run_fail(run, -EINVAL, "O_DIRECT is not supported on this filesystem (tmpfs?)");
	if (fd < 0)
		return run_fail(run, fd, "cannot create the scratch file: %s", errno_str(fd));
	return fd;
}

static int setup_alignment(Run *run, const SelftestConfig *cfg)
{
	struct statx stx = {};
	struct statfs sfs = {};
	unsigned offset_align = 0, mem_align = 0;
	long page = sysconf(_SC_PAGESIZE);

	if (fstatfs(run->fd, &sfs) == 0 && (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC))
		/*
		 * tmpfs accepts O_DIRECT since Linux 6.6, but the data still
		 * lives in the page cache: nothing would be measured.
		 */
		return run_fail(run, -EINVAL, "O_DIRECT is not supported on this filesystem (tmpfs: direct I/O is only emulated through the page cache)");

	if (statx(run->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN)) {
		if (stx.stx_dio_offset_align == 0)
			return run_fail(run, -EINVAL, "O_DIRECT is not supported on this filesystem (statx reports no direct I/O alignment)");
		offset_align = stx.stx_dio_offset_align;
		mem_align = stx.stx_dio_mem_align;
	} else
		offset_align = mem_align = cfg->block_align ? cfg->block_align : 4096;

	if ((offset_align & (offset_align - 1)) != 0 || offset_align > SELFTEST_SEQ_BLOCK_SIZE ||
	    (mem_align & (mem_align - 1)) != 0 || mem_align > SELFTEST_SEQ_BLOCK_SIZE)
		return run_fail(run, -EINVAL, "unsupported direct I/O alignment (offset %u, memory %u)",
				offset_align, mem_align);

	run->res->alignment = offset_align > mem_align ? offset_align : mem_align;
	run->rbs = offset_align > SELFTEST_RAND_BLOCK_SIZE ? offset_align : SELFTEST_RAND_BLOCK_SIZE;
	/* Page-aligned buffers at least: cheaper for the kernel to pin, and valid for any smaller requirement. */
	run->mem_align = (size_t)(page > 0 ? page : 4096);
	if (mem_align > run->mem_align)
		run->mem_align = mem_align;
	return 0;
}

static int setup_sizes(Run *run, const SelftestConfig *cfg)
{
	struct statvfs sv;
	uint64_t avail, cap;

	if (fstatvfs(run->fd, &sv) < 0)
		return run_fail(run, negative_errno(), "cannot query free space: %s", errno_str(errno));
	avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;

	run->seq_max = cfg->seq_bytes_max ? cfg->seq_bytes_max : SEQ_MAX_DEFAULT;
	run->seq_max -= run->seq_max % SELFTEST_SEQ_BLOCK_SIZE;
	if (run->seq_max < SELFTEST_SEQ_BLOCK_SIZE)
		run->seq_max = SELFTEST_SEQ_BLOCK_SIZE;
	/*
	 * The filesystem is in use: grow adaptively into at most half of the
	 * free space, but honour an explicit minimum up to 90% of it.
	 */
	cap = avail / 2;
	cap -= cap % SELFTEST_SEQ_BLOCK_SIZE;

	run->seq_min = cfg->seq_bytes_min ? cfg->seq_bytes_min : SEQ_MIN_DEFAULT;
	run->seq_min = (run->seq_min + SELFTEST_SEQ_BLOCK_SIZE - 1) / SELFTEST_SEQ_BLOCK_SIZE * SELFTEST_SEQ_BLOCK_SIZE;
	if (run->seq_min > run->seq_max)
		run->seq_min = run->seq_max;
	if (run->seq_min > cap) {
		if (run->seq_min > avail / 10 * 9)
			return run_fail(run, -ENOSPC, "not enough free space for the self-test: %" PRIu64 " MiB needed, %" PRIu64 " MiB available",
					run->seq_min / MIB, avail / MIB);
		cap = run->seq_min;
	}
	if (run->seq_max > cap)
		run->seq_max = cap;

	run->gen = calloc(run->seq_max / UNIT, sizeof(uint16_t));
	if (!run->gen)
		return run_fail(run, -ENOMEM, "out of memory");
	return 0;
}

static uint64_t make_seed(void)
{
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	return mix64(now_ns() ^ ((uint64_t)getpid() << 32));
}

static bool test_hook_requested(const char *name)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv(name);

	return e && streq(e, "1");
#else
	return false;
#endif
}

static int run_phases(Run *run)
{
	SelftestResult *res = run->res;
	uint64_t read_est_ns = 0;
	double left = W_RAND_WRITE_QD1 + W_RAND_WRITE_QDN + W_RAND_READ_QD1 + W_RAND_READ_QDN;
	int r;

	r = phase_seq_write(run, &read_est_ns);
	if (r < 0)
		return r;
	res->file_bytes = run->file_bytes;

	/* The random writes go before the sequential read, so that it verifies them too. */
	r = phase_rand_qd1(run, true, phase_deadline(run, W_RAND_WRITE_QD1, left, read_est_ns),
			   &res->write_p50_ms, &res->write_p99_ms, &res->write_samples, &res->write_p99_unreported);
	if (r < 0)
		return r;
	left -= W_RAND_WRITE_QD1;

	r = phase_rand_qdn(run, true, W_RAND_WRITE_QDN, left, read_est_ns, &res->rand_write_iops);
	if (r < 0)
		return r;
	left -= W_RAND_WRITE_QDN;

	/*
	 * Not timed: the random writes may still sit in the device's (or the
	 * host's) write cache; flushing it now keeps its write-back out of the
	 * sequential read, as fio's runs are kept apart.
	 */
	if (fdatasync(run->fd) < 0)
		return run_fail(run, negative_errno(), "I/O error during fdatasync after the random writes: %m");

	r = phase_seq_read(run);
	if (r < 0)
		return r;

	r = phase_rand_qd1(run, false, phase_deadline(run, W_RAND_READ_QD1, left, 0),
			   &res->read_p50_ms, &res->read_p99_ms, &res->read_samples, &res->read_p99_unreported);
	if (r < 0)
		return r;
	left -= W_RAND_READ_QD1;

	return phase_rand_qdn(run, false, W_RAND_READ_QDN, left, 0, &res->rand_read_iops);
}

int selftest_run(int scratch_dirfd, const SelftestConfig *cfg, SelftestResult *ret, char **reterr_msg)
{
	static const SelftestConfig defaults = {};
	SelftestResult res = {};
	Run run = {
		.fd = -EBADF,
		.res = &res,
		.hook = read_hook,
	};
	uint64_t budget_ms;
	int r;

	if (!ret)
		return -EINVAL;
	if (!cfg)
		cfg = &defaults;

	run.t_start = now_ns();
	budget_ms = cfg->budget_ms ? cfg->budget_ms : SELFTEST_BUDGET_MS_DEFAULT;
	run.t_end = run.t_start + budget_ms * NSEC_PER_MSEC;
	run.iodepth = cfg->iodepth ? cfg->iodepth : SELFTEST_IODEPTH_DEFAULT;
	if (run.iodepth > SELFTEST_IODEPTH_MAX)
		run.iodepth = SELFTEST_IODEPTH_MAX;
	res.iodepth = run.iodepth;
	res.method = SELFTEST_METHOD;
	run.seed = make_seed();
	atomic_init(&run.corrupt_once, test_hook_requested("NVMEVOL_TEST_SELFTEST_CORRUPT"));
	run.no_aio = test_hook_requested("NVMEVOL_TEST_SELFTEST_NO_AIO");

	if (scratch_dirfd < 0)
		r = run_fail(&run, -EBADF, "invalid scratch directory");
	else {
		run.fd = open_scratch(&run, scratch_dirfd);
		r = run.fd < 0 ? run.fd : 0;
	}
	if (r >= 0)
		r = setup_alignment(&run, cfg);
	if (r >= 0)
		r = setup_sizes(&run, cfg);
	if (r >= 0)
		r = run_phases(&run);

	if (run.fd >= 0)
		(void)close(run.fd);
	free(run.gen);
	res.duration_ms = (now_ns() - run.t_start + NSEC_PER_MSEC / 2) / NSEC_PER_MSEC;

	if (r < 0) {
		if (reterr_msg)
			*reterr_msg = TAKE_PTR(run.err);
		free(run.err);
		return r;
	}
	free(run.err);
	*ret = res;
	return 0;
}

/* ---- Leftovers ---- */

/* SELFTEST_SCRATCH_PREFIX, decimal pid, '.', 16 lowercase hex digits: exactly what open_named_scratch() makes. */
static bool is_scratch_name(const char *name)
{
	const char *p;
	size_t digits = 0, hex = 0;

	if (strncmp(name, SELFTEST_SCRATCH_PREFIX, strlen(SELFTEST_SCRATCH_PREFIX)) != 0)
		return false;
	p = name + strlen(SELFTEST_SCRATCH_PREFIX);
	for (; *p >= '0' && *p <= '9'; p++)
		digits++;
	if (digits == 0 || digits > 10 || *p != '.')
		return false;
	for (p++; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		hex++;
	return hex == 16 && *p == '\0';
}

int selftest_clean_scratch(int scratch_dirfd)
{
	DIR *d;
	struct dirent *de;
	int fd, removed = 0, r = 0;

	/* A fresh open gets a private directory offset, unlike a dup(). */
	fd = openat(scratch_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	d = fdopendir(fd);
	if (!d) {
		r = negative_errno();
		(void)close(fd);
		return r;
	}

	for (;;) {
		struct stat st;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno != 0)
				r = negative_errno();
			break;
		}
		if (!is_scratch_name(de->d_name))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			r = negative_errno();
			break;
		}
		if (S_ISDIR(st.st_mode))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
			if (errno == ENOENT)
				continue;
			r = negative_errno();
			break;
		}
		removed++;
	}
	(void)closedir(d);
	return r < 0 ? r : removed;
}
