/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd-selftest.h"
#include "selftest/selftest-history.h"
#include "selftest/selftest-report.h"
#include "selftest/selftest.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

/* An hour: beyond that a typo is more likely than a wish. */
#define BUDGET_MS_MAX (3600u * 1000u)

/*
 * Prints the history file of the partition mounted at @path (or of the
 * nvmevol directory itself). Read-only: a damaged file is reported, never
 * moved aside (the daemon does that).
 */
static int show_history(const char *path, bool json)
{
	_cleanup_close_ int fd = -EBADF, tree = -EBADF;
	_cleanup_free_ SelftestHistory *h = calloc(1, sizeof(SelftestHistory));
	_cleanup_free_ char *buf = NULL, *err = NULL;
	size_t len = 0;
	int r;

	if (!h)
		return EXIT_FAILURE;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "nvmevol selftest: cannot open directory '%s': %m\n", path);
		return EXIT_FAILURE;
	}
	tree = openat(fd, "nvmevol", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = read_file_at(tree >= 0 ? tree : fd, SELFTEST_HISTORY_FILE, SELFTEST_HISTORY_FILE_MAX, &buf, &len);
	if (r == -ENOENT) {
		fprintf(stderr, "nvmevol selftest: no self-test history in '%s' (nvmevol keeps it in <partition>/nvmevol/%s once a mount has measured the partition)\n",
			path, SELFTEST_HISTORY_FILE);
		return EXIT_FAILURE;
	}
	if (r < 0) {
		fprintf(stderr, "nvmevol selftest: cannot read %s in '%s': %s\n", SELFTEST_HISTORY_FILE, path, errno_str(r));
		return EXIT_FAILURE;
	}
	r = selftest_history_parse(buf, len, h, &err);
	if (r < 0) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, err ? err : errno_str(r));
		return EXIT_FAILURE;
	}
	if (json) {
		/* The file's own JSON, without its CRC member. */
		json_t *o = json_loadb(buf, len, 0, NULL);

		json_object_del(o, "crc");
		if (!o || json_dumpf(o, stdout, JSON_INDENT(2) | SELFTEST_JSON_REAL_PRECISION) < 0) {
			json_decref(o);
			return EXIT_FAILURE;
		}
		json_decref(o);
		fputc('\n', stdout);
	} else
		selftest_history_print_table(stdout, h, path);
	return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
}

int cmd_selftest(const CliArgs *a, char **args, int n)
{
	SelftestConfig cfg = {};
	SelftestResult res = {};
	_cleanup_free_ char *err = NULL, *verdict_msg = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	bool json = a->given & CLI_OPT_JSON, has_seconds = a->given & CLI_OPT_SECONDS,
	     has_budget = a->given & CLI_OPT_BUDGET_MS;
	SelftestVerdict verdict;
	const char *path = args[0];
	int r;

	if (a->given & CLI_OPT_HISTORY) {
		if (a->given & (CLI_OPT_SECONDS | CLI_OPT_BUDGET_MS | CLI_OPT_SIZE | CLI_OPT_IODEPTH))
			return cli_usage_error(a, "--history measures nothing: it takes no --seconds, --budget-ms, --size or --iodepth");
		return show_history(path, json);
	}

	if (has_seconds) {
		double s;

		if (parse_decimal(a->seconds, &s) < 0 || s <= 0 || s * 1000 > BUDGET_MS_MAX)
			return cli_usage_error(a, "invalid --seconds '%s' (a number of seconds, > 0, at most 3600)", a->seconds);
		cfg.budget_ms = (uint64_t)ceil(s * 1000);
	}
	if (has_budget) {
		uint64_t v;

		if (parse_u64(a->budget_ms, &v) < 0 || v == 0 || v > BUDGET_MS_MAX)
			return cli_usage_error(a, "invalid --budget-ms '%s' (1 to 3600000)", a->budget_ms);
		cfg.budget_ms = v;
	}
	if (a->given & CLI_OPT_SIZE) {
		uint64_t v;

		if (parse_size(a->size, &v) < 0 || v == 0)
			return cli_usage_error(a, "invalid --size '%s' (e.g. 64M, 1G)", a->size);
		cfg.seq_bytes_min = cfg.seq_bytes_max = v;
	}
	if (a->given & CLI_OPT_IODEPTH) {
		uint32_t v;

		if (parse_u32(a->iodepth, &v) < 0 || v == 0 || v > SELFTEST_IODEPTH_MAX)
			return cli_usage_error(a, "invalid --iodepth '%s' (1 to 256)", a->iodepth);
		cfg.iodepth = v;
	}
	if (has_seconds && has_budget)
		return cli_usage_error(a, "--seconds and --budget-ms are exclusive");
	(void)n;

	dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		fprintf(stderr, "nvmevol selftest: cannot open directory '%s': %s\n", path, errno_str(errno));
		return EXIT_FAILURE;
	}
	/* Only names the engine itself makes; anything else in PATH is left alone. */
	(void)selftest_clean_scratch(dirfd);

	r = selftest_run(dirfd, &cfg, &res, &err);
	if (r < 0) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, err ? err : errno_str(r));
		return EXIT_FAILURE;
	}

	verdict = selftest_judge(&res, NULL, NULL, &verdict_msg);
	if (json) {
		json_t *o = selftest_result_to_json(&res);

		if (!o || json_object_set_new(o, "path", json_string(path)) < 0 ||
		    json_object_set_new(o, "verdict", json_string(selftest_verdict_to_string(verdict))) < 0 ||
		    json_dumpf(o, stdout, JSON_INDENT(2) | SELFTEST_JSON_REAL_PRECISION) < 0) {
			json_decref(o);
			fprintf(stderr, "nvmevol selftest: cannot write the JSON result\n");
			return EXIT_FAILURE;
		}
		json_decref(o);
		fputc('\n', stdout);
	} else
		selftest_print_table(stdout, &res, path);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nvmevol selftest: cannot write the result: %s\n", errno_str(errno));
		return EXIT_FAILURE;
	}

	if (verdict != SELFTEST_VERDICT_PASS) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, verdict_msg ? verdict_msg : "data error");
		return EXIT_FAILURE;
	}
	return 0;
}
