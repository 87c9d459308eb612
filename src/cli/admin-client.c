/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/admin-client.h"
#include "admin-protocol.h"
#include "cli/docker-client.h"
#include "cli/http-client.h"
#include "util/errmsg.h"
#include "util/macro.h"

/* Resizing a volume without a project ID walks all its files: allow for long runs. */
#define ADMIN_TIMEOUT_S 600

void admin_target_done(AdminTarget *t)
{
	free(t->socket);
	free(t->plugin);
	free(t->plugin_id);
	free(t->reference);
	free(t->state_source);
	*t = (AdminTarget){ 0 };
}

static const char *runtime_dir(void)
{
	const char *d = getenv("NVMEVOL_PLUGIN_RUNTIME_DIR");
	return d && *d ? d : ADMIN_PLUGIN_RUNTIME_DIR;
}

static const char *not_root_hint(void)
{
	return geteuid() == 0 ? "" : " (you are not root: run the command as root, e.g. with sudo)";
}

/* Checks that the admin socket is there, and says why not. */
static int check_socket(const char *path, const char *plugin, const char *reference, char **reterr_msg)
{
	_cleanup_free_ char *dir = strdup(path), *plugin_sock = NULL;
	struct stat st;

	if (!dir)
		return -ENOMEM;
	if (stat(path, &st) == 0)
		return S_ISSOCK(st.st_mode) ? 0 : errmsg_set(reterr_msg, -ENOTSOCK, "%s is not a socket", path);
	if (errno == EACCES || errno == EPERM)
		return errmsg_set(reterr_msg, -EACCES, "permission denied on %s: the nvmevol admin socket is for root only%s",
				  path, not_root_hint());
	if (errno != ENOENT)
		return errmsg_set(reterr_msg, negative_errno(), "cannot reach %s: %s", path, errno_str(errno));
	*strrchr(dir, '/') = '\0';
	if (asprintf(&plugin_sock, "%s/nvmevol.sock", dir) < 0)
		return -ENOMEM;
	if (stat(plugin_sock, &st) == 0)
		return errmsg_set(reterr_msg, -EPROTONOSUPPORT,
				  "plugin %s%s%s%s runs, but has no admin socket: it is older than nvmevol 0.2, which added "
				  "the admin commands. Upgrade it: docker plugin disable -f %s; docker plugin upgrade "
				  "--grant-all-permissions %s %s; docker plugin enable %s",
				  plugin ? plugin : dir, reference ? " (installed from " : "", reference ? reference : "",
				  reference ? ")" : "", plugin ? plugin : "NAME", plugin ? plugin : "NAME",
				  reference ? reference : "REGISTRY/nvmevol:NEW", plugin ? plugin : "NAME");
	return errmsg_set(reterr_msg, -ENOENT,
			  "no admin socket at %s: the plugin is not running there (starting, restarting, or this is not "
			  "the Docker host that runs it)", path);
}

static int target_from_plugin(const DockerPlugin *p, AdminTarget *ret, char **reterr_msg)
{
	int r;

	if (!p->enabled)
		return errmsg_set(reterr_msg, -ESRCH, "nvmevol plugin %s is installed but disabled: docker plugin enable %s",
				  p->name, p->name);
	*ret = (AdminTarget){
		.plugin = strdup(p->name),
		.plugin_id = strdup(p->id),
		.reference = p->reference ? strdup(p->reference) : NULL,
		.state_source = p->state_source ? strdup(p->state_source) : NULL,
	};
	if (asprintf(&ret->socket, "%s/%s/%s", runtime_dir(), p->id, ADMIN_SOCKET_NAME) < 0)
		ret->socket = NULL;
	if (!ret->socket || !ret->plugin || !ret->plugin_id) {
		admin_target_done(ret);
		return -ENOMEM;
	}
	r = check_socket(ret->socket, ret->plugin, ret->reference, reterr_msg);
	if (r < 0)
		admin_target_done(ret);
	return r;
}

static char *names_of(const DockerPlugin *p, size_t n, bool enabled_only)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool first = true;

	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!enabled_only || p[i].enabled) {
			fprintf(f, "%s%s%s", first ? "" : ", ", p[i].name, p[i].enabled ? "" : " (disabled)");
			first = false;
		}
	if (first)
		fputs("none", f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static int find_through_docker(const char *plugin_name, DockerPlugin *ps, size_t n, const char *display,
			       AdminTarget *ret, char **reterr_msg)
{
	_cleanup_free_ char *norm = NULL, *names = NULL;
	const DockerPlugin *pick = NULL;
	size_t enabled = 0;

	names = names_of(ps, n, false);
	if (plugin_name) {
		norm = docker_plugin_name_normalize(plugin_name);
		if (!norm)
			return -ENOMEM;
		for (size_t i = 0; i < n && !pick; i++)
			if (streq(ps[i].name, norm) ||
			    (strlen(plugin_name) >= 12 && strncmp(ps[i].id, plugin_name, strlen(plugin_name)) == 0))
				pick = &ps[i];
		if (!pick)
			return errmsg_set(reterr_msg, -ESRCH, "Docker at %s has no nvmevol plugin named %s (nvmevol plugins: %s)",
					  display, plugin_name, names ? names : "?");
		return target_from_plugin(pick, ret, reterr_msg);
	}
	for (size_t i = 0; i < n; i++)
		if (ps[i].enabled) {
			enabled++;
			pick = &ps[i];
		}
	if (enabled > 1) {
		_cleanup_free_ char *en = names_of(ps, n, true);
		return errmsg_set(reterr_msg, -ENOTUNIQ, "several nvmevol plugins are enabled (%s): choose one with --plugin NAME",
				  en ? en : "?");
	}
	if (enabled == 1)
		return target_from_plugin(pick, ret, reterr_msg);
	if (n > 0)
		return target_from_plugin(&ps[0], ret, reterr_msg); /* says it is disabled */
	return errmsg_set(reterr_msg, -ESRCH,
			  "no nvmevol plugin is installed in Docker at %s: install it (docker plugin install "
			  "--grant-all-permissions --alias nvmevol REGISTRY/nvmevol:TAG), or set DOCKER_HOST to the Docker "
			  "daemon that runs it",
			  display);
}

/* A socket file whose plugin was killed stays behind (Docker removes the runtime directory only on
 * a clean disable): it refuses connections and is not a running plugin. Anything else (listening,
 * a permission error, a full backlog) is one. */
static bool socket_is_stale(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -EBADF;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	return connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED;
}

/* Docker does not answer: the admin sockets in the plugin runtime directories. */
static int find_by_scanning(const char *plugin_name, const char *docker_err, AdminTarget *ret, char **reterr_msg)
{
	_cleanup_free_ char *found = NULL, *list = NULL;
	size_t n = 0, len = 0;
	struct dirent *de;
	FILE *f;
	DIR *d;

	d = opendir(runtime_dir());
	if (!d && (errno == EACCES || errno == EPERM))
		return errmsg_set(reterr_msg, -EACCES, "%s; and permission denied on %s%s", docker_err, runtime_dir(),
				  not_root_hint());
	f = open_memstream(&list, &len);
	if (!f) {
		if (d)
			closedir(d);
		return -ENOMEM;
	}
	while (d && (de = readdir(d))) {
		char *sock;
		struct stat st;

		if (de->d_name[0] == '.' || (plugin_name && strncmp(de->d_name, plugin_name, strlen(plugin_name)) != 0))
			continue;
		if (asprintf(&sock, "%s/%s/%s", runtime_dir(), de->d_name, ADMIN_SOCKET_NAME) < 0)
			break;
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && !socket_is_stale(sock)) {
			fprintf(f, "%s%.12s", n ? ", " : "", de->d_name);
			n++;
			free(found);
			found = sock;
		} else
			free(sock);
	}
	if (d)
		closedir(d);
	if (fclose(f) != 0)
		return -ENOMEM;
	if (n == 1) {
		*ret = (AdminTarget){ .socket = TAKE_PTR(found) };
		return 0;
	}
	if (n > 1)
		return errmsg_set(reterr_msg, -ENOTUNIQ,
				  "%s; several nvmevol plugins run on this host (IDs %s): choose one with --plugin ID or "
				  "--socket %s/ID/%s",
				  docker_err, list, runtime_dir(), ADMIN_SOCKET_NAME);
	return errmsg_set(reterr_msg, -ESRCH, "%s; and no running nvmevol plugin was found in %s%s", docker_err,
			  runtime_dir(), plugin_name ? " with that ID" : "");
}

int admin_client_find(const char *plugin_name, const char *socket_path, AdminTarget *ret, char **reterr_msg)
{
	_cleanup_free_ char *sock = NULL, *display = NULL, *err = NULL;
	DockerPlugin *ps = NULL;
	size_t n = 0;
	int r;

	if (socket_path) {
		r = check_socket(socket_path, NULL, NULL, reterr_msg);
		if (r < 0)
			return r;
		*ret = (AdminTarget){ .socket = strdup(socket_path) };
		return ret->socket ? 0 : -ENOMEM;
	}
	r = docker_socket(&sock, &display, reterr_msg);
	if (r < 0)
		return r;
	r = docker_nvmevol_plugins(&ps, &n, &err);
	if (r == -ENOENT || r == -ECONNREFUSED)
		return find_by_scanning(plugin_name, err, ret, reterr_msg);
	if (r < 0) {
		if (reterr_msg) {
			free(*reterr_msg);
			*reterr_msg = TAKE_PTR(err);
		}
		return r;
	}
	/* No managed nvmevol plugin in Docker: a host service (its admin socket in the runtime directory). */
	if (n == 0 && find_by_scanning(plugin_name, "", ret, NULL) == 0)
		return 0;
	r = find_through_docker(plugin_name, ps, n, display, ret, reterr_msg);
	docker_plugins_free(ps, n);
	return r;
}

/* "nvmevol/0.2.0 uid=0 user=root sudo_user=alice pid=123 command=volume resize" */
static char *client_header(const char *command)
{
	const struct passwd *pw = getpwuid(geteuid());
	const char *sudo = getenv("SUDO_USER");
	char *h;

	if (asprintf(&h, "%s: nvmevol/%s uid=%u user=%s%s%s pid=%d command=%s", ADMIN_CLIENT_HEADER, PROJECT_VERSION,
		     (unsigned)geteuid(), pw ? pw->pw_name : "?", sudo ? " sudo_user=" : "", sudo ? sudo : "",
		     (int)getpid(), command) < 0)
		return NULL;
	/* A header line must not break: keep it printable. */
	for (char *p = h; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			*p = '?';
	return h;
}

int admin_client_call(const AdminTarget *t, const char *endpoint, const json_t *request, const char *command,
		      json_t **ret, char **reterr_msg)
{
	_cleanup_free_ char *body = NULL, *hdr = client_header(command);
	_cleanup_(json_decrefp) json_t *j = NULL;
	const char *headers[] = { hdr, NULL };
	HttpClientReply rep = { 0 };
	const char *who = t->plugin ? t->plugin : t->socket;
	json_t *e;
	int r;

	body = request ? json_dumps(request, JSON_COMPACT) : strdup("{}");
	if (!body || !hdr)
		return -ENOMEM;
	r = http_client_request(t->socket, "POST", endpoint, headers, body, strlen(body), ADMIN_TIMEOUT_S, &rep);
	if (r == -EACCES || r == -EPERM)
		return errmsg_set(reterr_msg, r, "permission denied on %s: the nvmevol admin socket is for root only%s",
				  t->socket, not_root_hint());
	if (r == -ENOENT || r == -ECONNREFUSED)
		return errmsg_set(reterr_msg, r, "plugin %s does not answer on %s (%s): is it restarting?", who, t->socket,
				  errno_str(r));
	if (r == -ETIMEDOUT)
		return errmsg_set(reterr_msg, r, "plugin %s did not answer within %d s", who, ADMIN_TIMEOUT_S);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot talk to plugin %s on %s: %s", who, t->socket, errno_str(r));
	j = json_loadb(rep.body, rep.len, 0, NULL);
	e = j ? json_object_get(j, "Err") : NULL;
	if (rep.status == 404 && json_is_string(e) && strncmp(json_string_value(e), ADMIN_UNKNOWN_ENDPOINT,
							       strlen(ADMIN_UNKNOWN_ENDPOINT)) == 0)
		r = errmsg_set(reterr_msg, -EPROTONOSUPPORT,
			       "plugin %s does not know %s: it is older than this nvmevol command (%s; this command is "
			       "nvmevol %s, admin API %d). Upgrade the plugin",
			       who, endpoint, json_string_value(e), PROJECT_VERSION, ADMIN_API_VERSION);
	else if (rep.status != 200)
		r = errmsg_set(reterr_msg, rep.status == 404 ? -ENOENT : rep.status == 403 ? -EACCES : -EIO, "%s",
			       json_is_string(e) ? json_string_value(e) : rep.body);
	else if (!json_is_object(j))
		r = errmsg_set(reterr_msg, -EPROTO, "plugin %s answered %s with something that is not a JSON object", who,
			       endpoint);
	else
		*ret = TAKE_PTR(j);
	http_client_reply_done(&rep);
	return r;
}
