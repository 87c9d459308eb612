/* SPDX-License-Identifier: MIT */
/*
 * clonetool SRC DST [FREEZE_DIR [BUDGET_MS]]: runs the clone engine once, as
 * the daemon would (DST must be an empty directory on SRC's filesystem;
 * FREEZE_DIR, the filesystem to freeze when SRC is in use), and prints its
 * figures as one JSON line; "before_freeze_at" is CLOCK_MONOTONIC (seconds)
 * right before the last freeze began, for a benchmark to tell the freeze
 * from the live pass. For benchmarks and debugging; not installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clone/clone.h"

static double before_freeze_at;

static void note_before_freeze(void *userdata, unsigned attempt)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	before_freeze_at = (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	CloneParams p = { .freeze_fd = -1, .freeze_budget_ms = 1000, .writeback_wait_ms = CLONE_WRITEBACK_WAIT_MS };
	CloneStats st = { 0 };
	char *err = NULL;
	int r;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: %s SRC DST [FREEZE_DIR [BUDGET_MS]]\n", argv[0]);
		return 2;
	}
	p.src_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	p.dst_fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (argc >= 4)
		p.freeze_fd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (argc == 5)
		p.freeze_budget_ms = (unsigned)strtoul(argv[4], NULL, 10);
	if (p.src_fd < 0 || p.dst_fd < 0 || (argc >= 4 && p.freeze_fd < 0)) {
		perror("open");
		return 2;
	}
	clone_set_before_freeze_hook(note_before_freeze, NULL);
	r = clone_tree(&p, &st, &err);
	printf("{\"result\":%d,\"error\":\"%s\",\"files\":%llu,\"dirs\":%llu,\"symlinks\":%llu,\"specials\":%llu,"
	       "\"hardlinks\":%llu,\"bytes\":%llu,\"reflinked\":%llu,\"copied\":%llu,\"delta_bytes\":%llu,"
	       "\"freezes\":%u,\"frozen_ms\":%.3f,\"freeze_call_ms\":%.3f,\"frozen_checked\":%llu,"
	       "\"frozen_compared\":%llu,\"frozen_check_ms\":%.3f,\"frozen_cpu_ms\":%.3f,\"writeback_wait_ms\":%.3f,\"writeback_backlog_bytes\":%llu,\"before_freeze_at\":%.6f,\"elapsed_ms\":%.3f}\n",
	       r, err ? err : "", (unsigned long long)st.files, (unsigned long long)st.dirs,
	       (unsigned long long)st.symlinks, (unsigned long long)st.specials, (unsigned long long)st.hardlinks,
	       (unsigned long long)st.bytes, (unsigned long long)st.reflinked, (unsigned long long)st.copied,
	       (unsigned long long)st.delta_bytes, st.freezes, st.frozen_us / 1000.0, st.freeze_call_us / 1000.0,
	       (unsigned long long)st.frozen_checked, (unsigned long long)st.frozen_compared,
	       st.frozen_check_us / 1000.0, st.frozen_cpu_us / 1000.0, st.writeback_wait_us / 1000.0, (unsigned long long)st.writeback_backlog, before_freeze_at,
	       st.elapsed_us / 1000.0);
	free(err);
	return r < 0 ? 1 : 0;
}
