/* SPDX-License-Identifier: MIT */
/*
 * The admin protocol, client side: finds the running nvmevol plugin (Docker's
 * list of plugins, or the plugin runtime directories when Docker does not
 * answer) and calls its admin endpoints (admin.h) over the root-only socket.
 * Every error says what to do: no plugin, several, disabled, not root, a
 * plugin older than the admin endpoints.
 */
#pragma once

#include <jansson.h>

/* Where Docker creates each managed plugin's runtime directory (hard-coded by Docker on Linux). */
#define ADMIN_PLUGIN_RUNTIME_DIR "/run/docker/plugins"

typedef struct AdminTarget {
	char *socket;       /* the admin socket */
	char *plugin;       /* Docker's name of the plugin, NULL when not found through Docker */
	char *plugin_id;    /* NULL when given by --socket */
	char *reference;    /* where the plugin was installed from, if known */
	char *state_source; /* the plugin's `state` mount source, if known ("/dev": not set) */
} AdminTarget;

void admin_target_done(AdminTarget *t);

/*
 * Finds the plugin: @socket_path if given; else through Docker (the one
 * nvmevol plugin that is enabled, or @plugin_name); else, if Docker does not
 * answer, the one admin socket under the runtime directory
 * ($NVMEVOL_PLUGIN_RUNTIME_DIR, default ADMIN_PLUGIN_RUNTIME_DIR).
 */
int admin_client_find(const char *plugin_name, const char *socket_path, AdminTarget *ret, char **reterr_msg);

/*
 * POSTs @request (an object; NULL for {}) to admin endpoint @endpoint and
 * returns the JSON result. @command is logged by the plugin as what the
 * client ran.
 */
int admin_client_call(const AdminTarget *t, const char *endpoint, const json_t *request, const char *command,
		      json_t **ret, char **reterr_msg);
