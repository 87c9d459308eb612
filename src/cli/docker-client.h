/* SPDX-License-Identifier: MIT */
/*
 * What the command line asks Docker's API (on the host's Docker socket):
 * which nvmevol plugins are installed, which containers use a volume, where
 * Docker keeps its data. GET requests only: nothing here changes Docker.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#define DOCKER_DEFAULT_SOCKET "/var/run/docker.sock"

/* The socket of $DOCKER_HOST (unix:// only) or DOCKER_DEFAULT_SOCKET; "unix://..." for messages in *ret_display. */
int docker_socket(char **ret_path, char **ret_display, char **reterr_msg);

/*
 * GET @path from Docker; the JSON reply in *ret. Errors say what to do:
 * Docker not answering, permission denied (not root, not in group docker),
 * an error status with Docker's message. A connection failure returns the
 * connect() errno (-ENOENT, -ECONNREFUSED, -EACCES) so callers can fall back.
 */
int docker_get(const char *path, json_t **ret, char **reterr_msg);

typedef struct DockerPlugin {
	char *id;        /* 64 hex */
	char *name;      /* e.g. "nvmevol:latest" */
	char *reference; /* where it was installed from */
	bool enabled;
	char *state_source; /* the `state` mount's source ("/dev": not set) */
} DockerPlugin;

void docker_plugins_free(DockerPlugin *p, size_t n);

/* Pure: the nvmevol plugins (Entrypoint /usr/bin/nvmevol) of a GET /plugins reply. */
int docker_plugins_parse(const json_t *reply, DockerPlugin **ret, size_t *ret_n);

/* Installed nvmevol plugins, enabled or not. */
int docker_nvmevol_plugins(DockerPlugin **ret, size_t *ret_n, char **reterr_msg);

/* Containers (running or not) that reference volume @name: the array of GET /containers/json. */
int docker_containers_using(const char *volume, json_t **ret, char **reterr_msg);

/* Pure, on one element of that array: whether it holds its mounts (running, paused, restarting, removing). */
bool docker_container_running(const json_t *c);
/* Pure: its name without the leading '/', else its ID. */
const char *docker_container_name(const json_t *c);

/* Docker's data root (DockerRootDir of GET /info). */
int docker_root_dir(char **ret, char **reterr_msg);

/* "nvmevol" → "nvmevol:latest", as Docker names plugins. */
char *docker_plugin_name_normalize(const char *name);
