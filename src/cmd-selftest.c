/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd-selftest.h"
#include "selftest-history.h"
#include "selftest-report.h"
#include "selftest.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

#define EXIT_USAGE 2

/* An hour: beyond that a typo is more likely than a wish. */
#define BUDGET_MS_MAX (3600u * 1000u)

static void help(FILE *f)
{
	fputs("Usage: nvmevol selftest [OPTIONS] PATH\n"
	      "\n"
	      "Measures the filesystem holding the directory PATH with O_DIRECT I/O on an\n"
	      "unnamed scratch file, and verifies every block it wrote:\n"
	      "sequential 1 MiB write (+ fdatasync) and read, 4 KiB random write and read\n"
	      "latency at queue depth 1 (p50, p99) and IOPS at a higher queue depth.\n"
	      "\n"
	      "Options:\n"
	      "  --json             print the result as JSON\n"
	      "  --budget-ms N      wall-clock budget of the whole run (default 300)\n"
	      "  --seconds N        the same in seconds (may be fractional), for a longer,\n"
	      "                     more accurate run\n"
	      "  --size SIZE        write exactly SIZE sequentially (K, M, G suffixes;\n"
	      "                     rounded up to 1 MiB), whatever the budget\n"
	      "  --iodepth N        queue depth of the IOPS phases (default 16, max 256)\n"
	      "  --history          measure nothing: print the self-test history that nvmevol\n"
	      "                     keeps on the partition mounted at PATH (its baseline,\n"
	      "                     every kept run with ratios to the baseline, the trend)\n"
	      "  -h, --help         show this help\n"
	      "\n"
	      "Exit status: 0 pass, 1 data error or failure, 2 usage error.\n",
	      f);
}

_printf_(1, 2) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("nvmevol selftest: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'nvmevol selftest --help'.\n", stderr);
	return EXIT_USAGE;
}

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

int cmd_selftest(int argc, char **argv)
{
	enum { ARG_JSON = 0x100, ARG_SECONDS, ARG_BUDGET_MS, ARG_SIZE, ARG_IODEPTH, ARG_HISTORY };
	static const struct option options[] = {
		{ "json", no_argument, NULL, ARG_JSON },
		{ "seconds", required_argument, NULL, ARG_SECONDS },
		{ "budget-ms", required_argument, NULL, ARG_BUDGET_MS },
		{ "size", required_argument, NULL, ARG_SIZE },
		{ "iodepth", required_argument, NULL, ARG_IODEPTH },
		{ "history", no_argument, NULL, ARG_HISTORY },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	SelftestConfig cfg = {};
	SelftestResult res = {};
	_cleanup_free_ char *err = NULL, *verdict_msg = NULL;
	_cleanup_close_ int dirfd = -EBADF;
	bool json = false, has_seconds = false, has_budget = false, history = false;
	SelftestVerdict verdict;
	const char *path;
	int c, r;

	/* main() may have run getopt already: 0 makes glibc start over. */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0) {
		switch (c) {
		case ARG_JSON:
			json = true;
			break;
		case ARG_SECONDS: {
			double s;

			if (parse_decimal(optarg, &s) < 0 || s <= 0 || s * 1000 > BUDGET_MS_MAX)
				return usage_error("invalid --seconds '%s' (a number of seconds, > 0, at most 3600)", optarg);
			cfg.budget_ms = (uint64_t)ceil(s * 1000);
			has_seconds = true;
			break;
		}
		case ARG_BUDGET_MS: {
			uint64_t v;

			if (parse_u64(optarg, &v) < 0 || v == 0 || v > BUDGET_MS_MAX)
				return usage_error("invalid --budget-ms '%s' (1 to 3600000)", optarg);
			cfg.budget_ms = v;
			has_budget = true;
			break;
		}
		case ARG_SIZE: {
			uint64_t v;

			if (parse_size(optarg, &v) < 0 || v == 0)
				return usage_error("invalid --size '%s' (e.g. 64M, 1G)", optarg);
			cfg.seq_bytes_min = cfg.seq_bytes_max = v;
			break;
		}
		case ARG_IODEPTH: {
			uint32_t v;

			if (parse_u32(optarg, &v) < 0 || v == 0 || v > SELFTEST_IODEPTH_MAX)
				return usage_error("invalid --iodepth '%s' (1 to 256)", optarg);
			cfg.iodepth = v;
			break;
		}
		case ARG_HISTORY:
			history = true;
			break;
		case 'h':
			help(stdout);
			return 0;
		case '?':
			if (optopt > 0 && optopt < 0x100)
				return usage_error("unknown or incomplete option '-%c'", optopt);
			return usage_error("unknown or incomplete option '%s'", argv[optind - 1]);
		default:
			return usage_error("unexpected option");
		}
	}
	if (has_seconds && has_budget)
		return usage_error("--seconds and --budget-ms are exclusive");
	if (optind != argc - 1)
		return usage_error("%s", optind >= argc ? "missing PATH" : "too many arguments");
	path = argv[optind];

	if (history)
		return show_history(path, json);

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
		fprintf(stderr, "nvmevol selftest: cannot write the result: %s\n", strerror(errno));
		return EXIT_FAILURE;
	}

	if (verdict != SELFTEST_VERDICT_PASS) {
		fprintf(stderr, "nvmevol selftest: '%s': %s\n", path, verdict_msg ? verdict_msg : "data error");
		return EXIT_FAILURE;
	}
	return 0;
}
