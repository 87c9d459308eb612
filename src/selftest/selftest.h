/* SPDX-License-Identifier: MIT */
/*
 * Direct-I/O self-test engine: measures a filesystem with O_DIRECT I/O in a
 * scratch directory and verifies every block it wrote. No jansson, no logging.
 *
 * What is measured, in this order, on one unnamed O_TMPFILE scratch file:
 *   1. sequential write, 1 MiB blocks, then fdatasync (what
 *      `dd bs=1M oflag=direct conv=fdatasync` measures; the fdatasync counts);
 *   2. 4 KiB random overwrites at queue depth 1 (latency p50/p99; the first
 *      I/O is not counted; the p99 only from SELFTEST_P99_MIN_SAMPLES);
 *   3. 4 KiB random overwrites at queue depth @iodepth (IOPS, counted from the
 *      first turnover of the queue): Linux native AIO from one thread, each I/O
 *      submitted as its slot frees, i.e. fio ioengine=libaio iodepth=@iodepth
 *      with its defaults; one thread per outstanding I/O (fio
 *      psync numjobs=@iodepth) only where the kernel refuses an AIO context;
 *   4. after an untimed fdatasync, sequential read of the whole file, 1 MiB
 *      blocks (throughput; it also verifies every block written by phases 1-3);
 *   5. 4 KiB random reads at queue depth 1 (latency p50/p99);
 *   6. 4 KiB random reads at queue depth @iodepth (IOPS).
 * Every 4 KiB unit holds a pattern derived from (run seed, file offset, write
 * generation), so stale, misplaced and corrupt data are all told apart from
 * good data. Throughput and latency figures count only the time spent in the
 * I/O system calls, never the pattern generation or checking (the IOPS phase:
 * completions over the wall time between them, as fio counts).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct SelftestConfig {
	uint64_t budget_ms;      /* wall-clock budget for the whole run; 0 means 300 */
	uint64_t seq_bytes_max;  /* cap for the sequential phase; 0 means adaptive only */
	unsigned iodepth;        /* queue depth of the IOPS phase; 0 means 16 */
	unsigned block_align;    /* fallback alignment when STATX_DIOALIGN is not available; 0 = 4096 */
	uint64_t seq_bytes_min;  /* write at least this much sequentially, budget or not; 0 = 8 MiB */
} SelftestConfig;

#define SELFTEST_BUDGET_MS_DEFAULT 300u
#define SELFTEST_IODEPTH_DEFAULT 16u
#define SELFTEST_IODEPTH_MAX 256u
#define SELFTEST_SEQ_BLOCK_SIZE (1024u * 1024u)
#define SELFTEST_RAND_BLOCK_SIZE 4096u
/*
 * How the figures are measured: a history's baseline is compared only with
 * runs of its own method (selftest-history.h), so that a change of method
 * in an upgrade is not taken for a change of the disk.
 *   1: the queue-depth phases submitted all the I/Os reaped at once in one
 *      io_submit (histories written before the field existed say 1);
 *   2: each I/O is submitted on its own as its slot frees, as fio's libaio
 *      engine does by default (issue 19: on a VM, 1 measured 1.5-1.8x fio's
 *      QD16 random reads).
 */
#define SELFTEST_METHOD 2u
/* Named scratch files (only when O_TMPFILE is refused) are ".nvmevol-selftest.<pid>.<hex>". */
#define SELFTEST_SCRATCH_PREFIX ".nvmevol-selftest."

typedef struct SelftestResult {
	double seq_write_mbps;   /* 1 MiB O_DIRECT writes + fdatasync, MiB/s */
	double seq_read_mbps;    /* 1 MiB O_DIRECT reads, MiB/s */
	double rand_write_iops;  /* 4 KiB O_DIRECT random writes at iodepth */
	double rand_read_iops;   /* 4 KiB O_DIRECT random reads at iodepth */
	double write_p50_ms, write_p99_ms; /* 4 KiB random write latency, QD1 */
	double read_p50_ms, read_p99_ms;   /* 4 KiB random read latency, QD1 */
	uint64_t bytes_written, bytes_read;
	uint64_t blocks_verified;
	uint64_t verify_errors;  /* blocks whose content did not match what was written */
	uint64_t duration_ms;    /* wall time of the whole run */
	unsigned alignment;      /* alignment used for buffers, offsets and sizes */
	unsigned iodepth;
	unsigned method;         /* SELFTEST_METHOD of the engine that measured it (1 when a record has none) */
	/* Added fields (informational). */
	uint64_t file_bytes;         /* size of the scratch file = the region of the random phases */
	double fdatasync_ms;         /* the fdatasync that ends the sequential write, included above */
	uint64_t first_error_offset; /* file offset of the first bad 4 KiB unit; valid if verify_errors > 0 */
	bool named_scratch;          /* O_TMPFILE was refused: a named, immediately unlinked file was used */
	bool qd_threads;             /* no kernel AIO: the IOPS phases used one thread per outstanding I/O */
	uint64_t write_samples, read_samples; /* latencies counted in the QD1 phases */
	/* Too few samples for a p99 (selftest-stats.h): its figure is 0 and is not reported or judged. */
	bool write_p99_unreported, read_p99_unreported;
} SelftestResult;

/*
 * Runs the self-test in @scratch_dirfd (a directory on the filesystem to test;
 * plugin-private, since its contents are not otherwise trusted). @cfg may be
 * NULL for the defaults. Returns 0 and fills @ret, even when data errors were
 * found (ret->verify_errors > 0: the caller judges), or -errno and, if
 * @reterr_msg is not NULL, a malloc'd human message (e.g. -EINVAL when the
 * filesystem does not do direct I/O). Never logs, never exits. Thread-safe
 * (several runs may go on at once) as long as the read hook is not changed.
 */
int selftest_run(int scratch_dirfd, const SelftestConfig *cfg, SelftestResult *ret, char **reterr_msg);

/*
 * Removes scratch files a crash may have left in @scratch_dirfd: only
 * non-directory entries named SELFTEST_SCRATCH_PREFIX "<pid>.<hex>" (nothing
 * else is ever touched; symlinks are unlinked, never followed). Returns the
 * number removed or -errno.
 */
int selftest_clean_scratch(int scratch_dirfd);

/*
 * TEST ONLY. Installs a function called after every successful O_DIRECT read
 * of the engine, before the data is verified, with the buffer, its length and
 * the file offset it was read from, so that a test can simulate a device that
 * returns wrong data. NULL removes it. Not synchronised: set it while no run is
 * in progress. The hook may be called from several threads at once.
 */
void selftest_set_read_hook(void (*hook)(void *buf, size_t len, uint64_t offset));
