/* SPDX-License-Identifier: MIT */
/* `nvmevol selftest [--json] [--seconds N | --budget-ms N] [--size SIZE] [--iodepth N] PATH` */
#pragma once

/*
 * @argv[0] is "selftest". Runs the direct-I/O self-test in the directory PATH
 * and prints a table (or JSON with --json) on stdout, errors on stderr.
 * Returns the process exit code: 0 pass, 1 data error or failure, 2 usage error.
 */
int cmd_selftest(int argc, char **argv);
