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

/*
 * For cmd-send.c: the plugin found and asked (errors printed, CLI exit
 * status returned), the directory it bound opened on this host (checked to
 * be that bind), JSON on standard output.
 */
#include <jansson.h>
#include "cli/admin-client.h"
int cmd_admin_ask(const CliArgs *a, AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret);
int cmd_admin_call(const CliArgs *a, const AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret);
int cmd_admin_open_bound(const CliArgs *a, const AdminTarget *t, const json_t *j, int flags, int *ret_fd);
int cmd_admin_print_json(const json_t *j);
/* The -o KEY=VALUE options into @opts; a usage error for one without '='. */
int cmd_admin_parse_o(const CliArgs *a, json_t *opts);
