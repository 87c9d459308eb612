/* SPDX-License-Identifier: MIT */
/* `nvmevol selftest PATH`: the self-test engine on any directory, as a table or JSON. */
#pragma once

#include "cli/cli.h"

int cmd_selftest(const CliArgs *a, char **args, int n);
