/* SPDX-License-Identifier: MIT */
/* The admin commands of `nvmevol` (status, volume ..., partition adopt, state import), run on the Docker host. */
#pragma once

#include "cli/cli.h"

int cmd_status(const CliArgs *a, char **args, int n);
int cmd_volume_show(const CliArgs *a, char **args, int n);
int cmd_volume_resize(const CliArgs *a, char **args, int n);
int cmd_volume_set(const CliArgs *a, char **args, int n);
int cmd_volume_forget(const CliArgs *a, char **args, int n);
int cmd_volume_release(const CliArgs *a, char **args, int n);
int cmd_volume_snapshot(const CliArgs *a, char **args, int n);
int cmd_volume_snapshots(const CliArgs *a, char **args, int n);
int cmd_volume_snapshot_rm(const CliArgs *a, char **args, int n);
int cmd_volume_rollback(const CliArgs *a, char **args, int n);
int cmd_volume_export(const CliArgs *a, char **args, int n);
int cmd_volume_import(const CliArgs *a, char **args, int n);
int cmd_partition_adopt(const CliArgs *a, char **args, int n);
int cmd_partition_cordon(const CliArgs *a, char **args, int n);
int cmd_partition_uncordon(const CliArgs *a, char **args, int n);
int cmd_partition_evacuate(const CliArgs *a, char **args, int n);
int cmd_volume_fence(const CliArgs *a, char **args, int n);
int cmd_volume_unfence(const CliArgs *a, char **args, int n);
int cmd_state_import(const CliArgs *a, char **args, int n);
