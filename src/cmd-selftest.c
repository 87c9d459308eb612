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

#include "cli.h"
#include "cmd-selftest.h"
#include "selftest-report.h"
#include "selftest.h"
#include "util/macro.h"
#include "util/strutil.h"

/* An hour: beyond that a typo is more likely than a wish. */
#define BUDGET_MS_MAX (3600u * 1000u)

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
		fprintf(stderr, "nvmevol selftest: cannot open directory '%s': %s\n", path, strerror(errno));
		return EXIT_FAILURE;
	}
	/* Only names the engine itself makes; anything else in PATH is left alone. */
	(void)selftest_clean_scratch(dirfd);

	r = selftest_run(dirfd, &cfg, &res, &err);
	if (r < 0) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, err ? err : strerror(-r));
		return EXIT_FAILURE;
	}

	verdict = selftest_judge(&res, NULL, &verdict_msg);
	if (json) {
		json_t *o = selftest_result_to_json(&res);

		if (!o || json_object_set_new(o, "path", json_string(path)) < 0 ||
		    json_object_set_new(o, "verdict", json_string(selftest_verdict_to_string(verdict))) < 0 ||
		    json_dumpf(o, stdout, JSON_INDENT(2)) < 0) {
			json_decref(o);
			fprintf(stderr, "nvmevol selftest: cannot write the JSON result\n");
			return EXIT_FAILURE;
		}
		json_decref(o);
		fputc('\n', stdout);
	} else
		selftest_print_table(stdout, &res, path);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "nvmevol selftest: cannot write the result: %s\n", strerror(errno));
		return EXIT_FAILURE;
	}

	if (verdict != SELFTEST_VERDICT_PASS) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, verdict_msg ? verdict_msg : "data error");
		return EXIT_FAILURE;
	}
	return 0;
}
