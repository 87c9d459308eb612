/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/docker-client.h"
#include "cli/http-client.h"
#include "util/errmsg.h"
#include "util/macro.h"

#define DOCKER_TIMEOUT_S 60

int docker_socket(char **ret_path, char **ret_display, char **reterr_msg)
{
	const char *host = getenv("DOCKER_HOST");
	const char *path = DOCKER_DEFAULT_SOCKET;

	if (host && *host) {
		if (strncmp(host, "unix://", 7) != 0 || host[7] != '/')
			return errmsg_set(reterr_msg, -EPROTONOSUPPORT,
					  "DOCKER_HOST=%s: nvmevol talks to Docker over its unix socket only "
					  "(run it on the Docker host, with DOCKER_HOST unset or unix:///...)", host);
		path = host + 7;
	}
	*ret_path = strdup(path);
	if (asprintf(ret_display, "unix://%s", path) < 0)
		*ret_display = NULL;
	if (!*ret_path || !*ret_display) {
		free(*ret_path);
		free(*ret_display);
		return -ENOMEM;
	}
	return 0;
}

int docker_get(const char *path, json_t **ret, char **reterr_msg)
{
	_cleanup_free_ char *sock = NULL, *display = NULL;
	HttpClientReply rep = { 0 };
	json_error_t jerr;
	json_t *j;
	int r;

	r = docker_socket(&sock, &display, reterr_msg);
	if (r < 0)
		return r;
	r = http_client_request(sock, "GET", path, NULL, NULL, 0, DOCKER_TIMEOUT_S, &rep);
	if (r == -EACCES || r == -EPERM)
		return errmsg_set(reterr_msg, r, "permission denied on Docker's socket %s: run as root", display);
	if (r == -ENOENT || r == -ECONNREFUSED)
		return errmsg_set(reterr_msg, r, "Docker does not answer at %s (%s): is dockerd running? (DOCKER_HOST names "
				  "another daemon's socket)", display, errno_str(r));
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot talk to Docker at %s: %s", display, errno_str(r));
	j = json_loadb(rep.body, rep.len, 0, &jerr);
	if (rep.status != 200) {
		json_t *msg = j ? json_object_get(j, "message") : NULL;
		r = errmsg_set(reterr_msg, -EIO, "Docker answered %u to GET %s: %s", rep.status, path,
			       json_is_string(msg) ? json_string_value(msg) : rep.body);
		json_decref(j);
		http_client_reply_done(&rep);
		return r;
	}
	http_client_reply_done(&rep);
	if (!j)
		return errmsg_set(reterr_msg, -EPROTO, "Docker's reply to GET %s is not JSON: %s", path, jerr.text);
	*ret = j;
	return 0;
}

void docker_plugins_free(DockerPlugin *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].id);
		free(p[i].name);
		free(p[i].reference);
		free(p[i].state_source);
	}
	free(p);
}

static char *dup_string(const json_t *j)
{
	return json_is_string(j) ? strdup(json_string_value(j)) : NULL;
}

int docker_plugins_parse(const json_t *reply, DockerPlugin **ret, size_t *ret_n)
{
	DockerPlugin *out = NULL;
	size_t n = 0, i;
	json_t *p;

	if (!json_is_array(reply))
		return -EPROTO;
	json_array_foreach(reply, i, p) {
		json_t *cfg = json_object_get(p, "Config"), *mounts, *m;
		json_t *entry = json_array_get(json_object_get(cfg, "Entrypoint"), 0);
		DockerPlugin *no, *d;
		size_t k;

		/* An nvmevol plugin, under whatever name or alias it was installed. */
		if (!json_is_string(entry) || strcmp(json_string_value(entry), "/usr/bin/nvmevol") != 0)
			continue;
		no = realloc(out, (n + 1) * sizeof(*out));
		if (!no) {
			docker_plugins_free(out, n);
			return -ENOMEM;
		}
		out = no;
		d = &out[n++];
		*d = (DockerPlugin){
			.id = dup_string(json_object_get(p, "Id")),
			.name = dup_string(json_object_get(p, "Name")),
			.reference = dup_string(json_object_get(p, "PluginReference")),
			.enabled = json_is_true(json_object_get(p, "Enabled")),
		};
		/* Settings.Mounts says what is set; Docker 20.10 keeps an upgrade's reverted source in Config only. */
		mounts = json_object_get(cfg, "Mounts");
		json_array_foreach(mounts, k, m)
			if (json_is_string(json_object_get(m, "Name")) &&
			    strcmp(json_string_value(json_object_get(m, "Name")), "state") == 0)
				d->state_source = dup_string(json_object_get(m, "Source"));
		if (!d->id || !d->name || strlen(d->id) != 64) {
			docker_plugins_free(out, n);
			return -EPROTO;
		}
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

int docker_nvmevol_plugins(DockerPlugin **ret, size_t *ret_n, char **reterr_msg)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	int r;

	r = docker_get("/plugins", &j, reterr_msg);
	if (r < 0)
		return r;
	r = docker_plugins_parse(j, ret, ret_n);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "Docker's list of plugins is not what nvmevol expects");
	return 0;
}

/* %-escapes everything but unreserved characters (RFC 3986), for a query string. */
static char *url_escape(const char *s)
{
	char *out = malloc(strlen(s) * 3 + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~')
			*p++ = (char)c;
		else
			p += sprintf(p, "%%%02X", c);
	}
	*p = '\0';
	return out;
}

int docker_containers_using(const char *volume, json_t **ret, char **reterr_msg)
{
	_cleanup_free_ char *filter = NULL, *esc = NULL, *path = NULL;
	json_t *j = NULL;
	int r;

	/* Volume names are validated ([A-Za-z0-9_.-]): nothing to quote inside the JSON string. */
	if (asprintf(&filter, "{\"volume\":[\"%s\"]}", volume) < 0)
		return -ENOMEM;
	esc = url_escape(filter);
	if (!esc || asprintf(&path, "/containers/json?all=1&filters=%s", esc) < 0)
		return -ENOMEM;
	r = docker_get(path, &j, reterr_msg);
	if (r < 0)
		return r;
	if (!json_is_array(j)) {
		json_decref(j);
		return errmsg_set(reterr_msg, -EPROTO, "Docker's list of containers is not an array");
	}
	*ret = j;
	return 0;
}

bool docker_container_running(const json_t *c)
{
	const char *s = json_string_value(json_object_get(c, "State"));
	return !s || streq(s, "running") || streq(s, "paused") || streq(s, "restarting") || streq(s, "removing");
}

const char *docker_container_name(const json_t *c)
{
	const char *n = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
	return n ? (n[0] == '/' ? n + 1 : n) : json_string_value(json_object_get(c, "Id"));
}

int docker_root_dir(char **ret, char **reterr_msg)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	int r = docker_get("/info", &j, reterr_msg);

	if (r < 0)
		return r;
	*ret = dup_string(json_object_get(j, "DockerRootDir"));
	return *ret ? 0 : errmsg_set(reterr_msg, -EPROTO, "Docker's /info has no DockerRootDir");
}

char *docker_plugin_name_normalize(const char *name)
{
	const char *last = strrchr(name, '/');
	char *out;

	/* A tag is a ':' after the last '/' ("localhost:5000/nvmevol" has a port, no tag). */
	if (strchr(last ? last : name, ':'))
		return strdup(name);
	return asprintf(&out, "%s:latest", name) < 0 ? NULL : out;
}
