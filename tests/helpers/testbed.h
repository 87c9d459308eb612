/* SPDX-License-Identifier: MIT */
/*
 * A throw-away world for privileged tests: a temporary directory, loop-backed
 * XFS partitions with a unique label prefix, and the real nvmevol daemon
 * started on a socket inside it. Everything is torn down by testbed_destroy().
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "client.h"

#define TESTBED_MAX_PARTS 4

typedef struct TestbedPartition {
	char image[512];
	char device[64];
	char label[16];
	char uuid[64];
	bool attached;
} TestbedPartition;

typedef struct Testbed {
	char dir[256];
	char sock[300];
	char state[300];
	char prop[300];
	char parts_root[300];
	char prefix[16];
	TestbedPartition parts[TESTBED_MAX_PARTS];
	int n_parts;
	pid_t pid;
	int exit_status; /* wait status of a daemon that exited during testbed_wait_ready(), else -1 */
	char log[300];
} Testbed;

/* Runs argv (NULL-terminated); returns the exit status, or -errno. */
int run_cmd(const char *const *argv);
#define RUN(...) run_cmd((const char *const[]){ __VA_ARGS__, NULL })

/* Skips the current Criterion test unless root and the tools exist. */
void testbed_require_root(void);

int testbed_init(Testbed *tb, int n_parts);
/* testbed_init(), or (after cleaning up) a failed assertion. */
void testbed_init_or_fail(Testbed *tb, int n_parts);
/* testbed_start(), or (after cleaning up) a failed assertion quoting the end of the daemon's log. */
void testbed_start_or_fail(Testbed *tb, const char *const *extra_env);
/* testbed_init_or_fail() + testbed_start_or_fail(). */
void testbed_setup(Testbed *tb, int n_parts, const char *const *extra_env);
/* testbed_setup() with one partition and a volume "probe"; skips (and cleans up) on a kernel without XFS project quota. */
void testbed_setup_quota(Testbed *tb, const char *const *extra_env);
/* The same with @n_parts partitions (the probe on the first). */
void testbed_setup_quota_parts(Testbed *tb, int n_parts, const char *const *extra_env);
/* Starts the daemon with the testbed's settings plus "NAME=value" strings in @extra_env (NULL-terminated). */
int testbed_start(Testbed *tb, const char *const *extra_env);
/* The two halves of testbed_start(): spawn only (tb->pid), then wait until it serves (-ECHILD: it exited). */
int testbed_spawn(Testbed *tb, const char *const *extra_env);
int testbed_wait_ready(Testbed *tb);
/*
 * testbed_start() with the daemon under `strace -D -f -q STRACE_ARGS -o TRACE`
 * (-D: the daemon stays the test's child, tb->pid; strace writes TRACE, and a
 * -c summary, once the daemon has exited). Needs /usr/bin/strace.
 */
int testbed_start_traced(Testbed *tb, const char *strace_args, const char *trace, const char *const *extra_env);
/* Sends @sig and waits; SIGKILL for a crash, SIGTERM for a clean stop. */
int testbed_stop(Testbed *tb, int sig);
void testbed_destroy(Testbed *tb);

/* Where the daemon mounted partition @i (<parts_root>/<uuid>). */
void testbed_part_mountpoint(Testbed *tb, int i, char *buf, size_t len);
/* <mountpoint of partition i>/nvmevol/volumes/<name> */
void testbed_volume_dir(Testbed *tb, int i, const char *name, char *buf, size_t len);
int testbed_detach(Testbed *tb, int i);
int testbed_attach(Testbed *tb, int i);
/*
 * Partition @i as a disk hot-plugged from elsewhere: the daemon is stopped,
 * the partition unmounted and detached, the daemon started again with
 * @extra_env (it no longer knows the partition), and the disk attached while
 * it runs. Fails the test on any error.
 */
void testbed_replug_while_running(Testbed *tb, int i, const char *const *extra_env);

/*
 * Get of @name until it answers without Err or @timeout_ms passed: for a disk
 * attached while the daemon runs (its background rescan notices within about
 * a second; Get itself never scans). Returns what the last Get returned.
 */
int tb_get_eventually(Testbed *tb, const char *name, ClientReply *ret, unsigned timeout_ms);

/* API shortcuts: return 0 on success (no Err), else -1 with *ret_err set (borrowed until the next call). */
int tb_call(Testbed *tb, const char *endpoint, ClientReply *ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/*
 * Writes @bytes to @path (appended, or replacing it) in 1 MiB writes, then
 * fsync; returns what was written before the first error, which goes to
 * *ret_errno (0 if none): how a test meets a quota.
 */
long long testbed_write_bytes(const char *path, long long bytes, bool append, int *ret_errno);

/*
 * Runs `nvmevol ARGS... --socket <tb's admin socket>` ($NVMEVOL_BINARY, else build/src/nvmevol; @args
 * NULL-terminated): the exit status, stdout in @out and stderr in @err (NUL-terminated).
 */
int testbed_admin(const Testbed *tb, const char *const *args, char *out, size_t out_len, char *err, size_t err_len);

/*
 * Runs `nvmevol ARGS --socket <tb's admin socket> < IN > OUT` through /bin/sh, for the streams of export,
 * import, send and receive (@args is shell text: quote what needs it): the exit status; stderr in @err,
 * stdout in @out unless @outfile takes it (then @out is ""). @in NULL reads /dev/null. Both buffers
 * NUL-terminated, trailing newlines removed (loopxfs_spawn_capture()).
 */
int testbed_shell(const Testbed *tb, const char *args, const char *in, const char *outfile, char *out, size_t out_len,
		  char *err, size_t err_len);

/* The number of entries of directory @path but "." and ".."; a failed assertion if it cannot be read. */
int testbed_count_entries(const char *path);

/* Whether directory @path has an entry whose name starts with @prefix; a failed assertion if it cannot be read. */
bool testbed_dir_holds(const char *path, const char *prefix);

/* The whole daemon log (malloc'd, NUL-terminated); a failed assertion if it cannot be read. */
char *testbed_log_text(const Testbed *tb);

/* The /proc/self/mountinfo line whose mount point is @target, or NULL (malloc'd). */
char *mountinfo_line(const char *target);

/*
 * Runs `env EXTRA_ENV... nvmevol devices ARGS... --json` ($NVMEVOL_BINARY, else build/src/nvmevol; both lists
 * NULL-terminated, may be NULL) and returns the parsed array (the caller's), or fails the test.
 */
json_t *testbed_devices_json(const char *const *extra_env, const char *const *args);
/* The entry of @device ("/dev/...") in such an array (borrowed), or fails the test. */
json_t *testbed_devices_entry(json_t *arr, const char *device);
/* Whether an entry's policy gives reason @code, set by @setting (NULL: any setting). */
bool testbed_devices_has_reason(json_t *entry, const char *code, const char *setting);
