/* SPDX-License-Identifier: MIT */
/* `nvmevol devices [--json] [--label-prefix P] [--devices LIST] [--require-nvme MODE] [--health MODE]` */
#pragma once

#include "cli/cli.h"

/*
 * Lists the partitions nvmevol would consider, with the
 * facts of the device under each, NVMe health, XFS geometry (when mounted
 * somewhere visible) and whether nvmevol would use it, and why not.
 * Returns the process exit code: 0 listed, 1 failure, 2 usage error.
 */
int cmd_devices(const CliArgs *a, char **args, int n);
