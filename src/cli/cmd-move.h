/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume move NAME --via 'CMD'`: send passes here piped into receive
 * passes on another node (through the user's command), then the fence.
 */
#pragma once

#include "cli/cli.h"

int cmd_volume_move(const CliArgs *a, char **args, int n);
