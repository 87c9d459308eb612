/* SPDX-License-Identifier: MIT */
/*
 * The command line: `nvmevol COMMAND ...` (no arguments runs the daemon).
 * One getopt_long pass over every option of every command, with GNU
 * permutation (options anywhere, `--` ends them); then the command checks
 * which of them it takes. Exit status: 0 success, 1 failure, 2 usage error.
 */
#pragma once

#include <stdbool.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2

typedef enum CliOption {
	CLI_OPT_JSON = 1u << 0,
	CLI_OPT_PLUGIN = 1u << 1,
	CLI_OPT_SOCKET = 1u << 2,
	CLI_OPT_INODES = 1u << 3,
	CLI_OPT_SECONDS = 1u << 4,
	CLI_OPT_BUDGET_MS = 1u << 5,
	CLI_OPT_SIZE = 1u << 6,
	CLI_OPT_IODEPTH = 1u << 7,
	CLI_OPT_KEEP = 1u << 8,
	CLI_OPT_LABEL_PREFIX = 1u << 9,
	CLI_OPT_DEVICES = 1u << 10,
	CLI_OPT_REQUIRE_NVME = 1u << 11,
	CLI_OPT_HEALTH = 1u << 12,
	CLI_OPT_HISTORY = 1u << 13,
	CLI_OPT_SNAPSHOT = 1u << 14,
	CLI_OPT_O = 1u << 15, /* -o KEY=VALUE, repeated */
	CLI_OPT_TO = 1u << 16,
	CLI_OPT_COMPRESS = 1u << 17,
	CLI_OPT_VIA = 1u << 18,       /* volume move */
	CLI_OPT_NODE = 1u << 19,      /* volume move */
	CLI_OPT_FROM = 1u << 20,      /* volume send --from */
	CLI_OPT_FINAL_NOW = 1u << 21, /* volume move */
	CLI_OPT_TIMEOUT = 1u << 22,   /* volume move: the wait for an unmount */
	CLI_OPT_PASSES = 1u << 23,    /* volume move: live passes at most */
	CLI_OPT_SMALL = 1u << 24,     /* volume move: a live pass this small is the last */
	CLI_OPT_SMALL_SECONDS = 1u << 25, /* volume move: a live pass this short is the last */
	CLI_OPT_WAIT = 1u << 26,      /* partition evacuate: until no volume waits (--timeout) */
	/* Every command that talks to the plugin takes these. */
	CLI_OPTS_TARGET = CLI_OPT_JSON | CLI_OPT_PLUGIN | CLI_OPT_SOCKET,
} CliOption;

typedef struct CliArgs {
	unsigned given; /* CliOption bits */
	bool help, version;
	const char *plugin, *socket, *inodes, *seconds, *budget_ms, *size, *iodepth;
	const char *label_prefix, *devices, *require_nvme, *health; /* devices */
	const char *snapshot;                                       /* volume export */
	const char *to;                                             /* partition evacuate */
	const char *from;                                           /* volume send: the base snapshot */
	const char *compress;                                       /* volume export */
	const char *via, *node, *timeout, *passes, *small;          /* volume move */
	const char *small_seconds;                                  /* volume move */
	const char *o[64];                                          /* volume import: -o KEY=VALUE */
	int n_o;
	char **args; /* the words that are not options, in order: the command, then its arguments */
	int n_args;
	const char *command; /* "volume resize": for messages */
} CliArgs;

/* Runs the command line (argc >= 2). Returns the exit status. */
int cli_main(int argc, char **argv);

/* Prints "nvmevol COMMAND: message" and a hint to --help on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const CliArgs *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "nvmevol COMMAND: message" on stderr; returns CLI_EXIT_FAILURE. */
int cli_fail(const CliArgs *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
