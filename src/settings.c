/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-protocol.h"
#include "settings.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

#define MAX_DEVICES 64

Settings *settings_free(Settings *c)
{
	if (!c)
		return NULL;
	free(c->socket_path);
	free(c->admin_socket_path);
	free(c->state_dir);
	free(c->propagated_mount);
	free(c->partition_root);
	free(c->label_prefix);
	free(c->metrics_dir);
	for (size_t i = 0; i < c->n_devices; i++)
		free(c->devices[i]);
	free(c->devices);
	free(c);
	return NULL;
}

DEFINE_CLEANUP_FUNC(Settings *, settings_free)

static const char *env_or(const char *name, const char *def)
{
	const char *v = getenv(name);
	return v && *v ? v : def;
}

static int absolute_path(const char *name, const char *def, char **ret, char **reterr_msg)
{
	const char *v = env_or(name, def);
	size_t n = strlen(v);

	if (v[0] != '/' || n > 200 || strstr(v, "/../") || strstr(v, "//") ||
	    (n > 1 && v[n - 1] == '/') || !string_is_printable_ascii(v))
		return errmsg_set(reterr_msg, -EINVAL, "%s='%s' is not a canonical absolute path", name, v);
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

static int number(const char *name, uint64_t def, uint64_t min, uint64_t max, uint64_t *ret, char **reterr_msg)
{
	const char *v = getenv(name);
	uint64_t x;

	if (!v || !*v) {
		*ret = def;
		return 0;
	}
	if (parse_u64(v, &x) < 0 || x < min || x > max)
		return errmsg_set(reterr_msg, -EINVAL, "%s='%s' must be a whole number from %llu to %llu", name, v,
			   (unsigned long long)min, (unsigned long long)max);
	*ret = x;
	return 0;
}

/* A device check's setting: off, warn (the default) or enforce. */
static int policy_mode(const char *name, DevicePolicyMode *ret, char **reterr_msg)
{
	const char *v = env_or(name, "warn");
	DevicePolicyMode m = device_policy_mode_from_string(v);

	if (m < 0)
		return errmsg_set(reterr_msg, -EINVAL, "%s='%s' must be off, warn or enforce", name, v);
	*ret = m;
	return 0;
}

static int split_devices(Settings *c, const char *list, char **reterr_msg)
{
	_cleanup_free_ char *copy = strdup(list);
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		char **nd;

		if (c->n_devices >= MAX_DEVICES)
			return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_DEVICES lists more than %d devices", MAX_DEVICES);
		if (!string_is_printable_ascii(tok) || strlen(tok) > 200 ||
		    (tok[0] != '/' && strncmp(tok, "UUID=", 5) != 0 && strncmp(tok, "LABEL=", 6) != 0))
			return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_DEVICES entry '%s' must be a /dev path, UUID=... or LABEL=...", tok);
		nd = realloc(c->devices, (c->n_devices + 1) * sizeof(char *));
		if (!nd)
			return -ENOMEM;
		c->devices = nd;
		c->devices[c->n_devices] = strdup(tok);
		if (!c->devices[c->n_devices])
			return -ENOMEM;
		c->n_devices++;
	}
	return 0;
}

const char *state_location_to_string(StateLocation l)
{
	static const char *const names[_STATE_LOCATION_MAX] = {
		[STATE_LOCATION_UNRESOLVED] = "unresolved",
		[STATE_LOCATION_ENV] = "NVMEVOL_STATE_DIR",
		[STATE_LOCATION_MOUNT] = "state.source",
		[STATE_LOCATION_PLUGIN_DIR] = "plugin-directory",
		[STATE_LOCATION_HOST] = "host-directory",
	};
	return l >= 0 && l < _STATE_LOCATION_MAX ? names[l] : "?";
}

static const char *const run_mode_names[_RUN_MODE_MAX] = {
	[RUN_MODE_PLUGIN] = "plugin",
	[RUN_MODE_HOST] = "host",
};

const char *run_mode_to_string(RunMode m)
{
	return m >= 0 && m < _RUN_MODE_MAX ? run_mode_names[m] : "?";
}

RunMode run_mode_from_string(const char *s)
{
	for (size_t i = 0; i < ELEMENTSOF(run_mode_names); i++)
		if (s && streq(s, run_mode_names[i]))
			return (RunMode)i;
	return _RUN_MODE_INVALID;
}

/* <directory of the plugin socket>/ADMIN_SOCKET_NAME: on the host, Docker's runtime directory of this plugin. */
static int admin_socket_path(Settings *c, char **reterr_msg)
{
	const char *slash = strrchr(c->socket_path, '/');
	int n = (int)(slash - c->socket_path);

	if (asprintf(&c->admin_socket_path, "%.*s/%s", n, c->socket_path, ADMIN_SOCKET_NAME) < 0) {
		c->admin_socket_path = NULL;
		return -ENOMEM;
	}
	if (strlen(c->admin_socket_path) >= 108)
		return errmsg_set(reterr_msg, -EINVAL, "the admin socket %s (next to NVMEVOL_SOCKET) is longer than a unix "
				  "socket path may be (107 bytes)", c->admin_socket_path);
	return 0;
}

int settings_from_env(Settings **ret, char **reterr_msg)
{
	_cleanup_(settings_freep) Settings *c = NULL;
	const char *v;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;

	c->mode = run_mode_from_string(env_or("NVMEVOL_MODE", "plugin"));
	if (c->mode < 0)
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_MODE='%s' must be plugin or host", env_or("NVMEVOL_MODE", ""));

	r = absolute_path("NVMEVOL_SOCKET", "/run/docker/plugins/nvmevol.sock", &c->socket_path, reterr_msg);
	if (r == 0 && getenv("NVMEVOL_STATE_DIR") && *getenv("NVMEVOL_STATE_DIR")) {
		r = absolute_path("NVMEVOL_STATE_DIR", NULL, &c->state_dir, reterr_msg);
		c->state_location = STATE_LOCATION_ENV;
	}
	if (r == 0)
		r = absolute_path("NVMEVOL_PROPAGATED_MOUNT", "/mnt/nvmevol", &c->propagated_mount, reterr_msg);
	if (r == 0)
		r = absolute_path("NVMEVOL_PARTITION_ROOT", "/run/nvmevol/partitions", &c->partition_root,
				  reterr_msg);
	if (r < 0)
		return r;
	if (strlen(c->socket_path) >= 108)
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_SOCKET is longer than a unix socket path may be (107 bytes)");
	r = admin_socket_path(c, reterr_msg);
	if (r < 0)
		return r;

	v = getenv("NVMEVOL_LABEL_PREFIX");
	c->label_prefix = strdup(v ? v : "nvmevol");
	if (!c->label_prefix)
		return -ENOMEM;
	if (strlen(c->label_prefix) > 12 || !string_is_printable_ascii(c->label_prefix))
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_LABEL_PREFIX='%s' must be at most 12 printable characters (XFS labels are 12 bytes)",
			   c->label_prefix);

	r = split_devices(c, env_or("NVMEVOL_DEVICES", ""), reterr_msg);
	if (r < 0)
		return r;

	c->log_level = log_level_from_string(env_or("NVMEVOL_LOG_LEVEL", "info"));
	if (c->log_level < 0)
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_LOG_LEVEL='%s' must be error, warning, info or debug",
			   env_or("NVMEVOL_LOG_LEVEL", ""));

	c->selftest = manager_selftest_from_string(env_or("NVMEVOL_SELFTEST", "warn"));
	if (c->selftest < 0)
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_SELFTEST='%s' must be off, warn or enforce",
			   env_or("NVMEVOL_SELFTEST", ""));

	/* Docker gives Mount 30 s after a manual `plugin enable`: keep the budget far below. */
	r = number("NVMEVOL_SELFTEST_BUDGET_MS", 300, 50, 10000, &c->selftest_budget_ms, reterr_msg);
	if (r == 0)
		r = number("NVMEVOL_SELFTEST_CACHE_SECONDS", 300, 0, 30 * 86400, &c->selftest_cache_seconds,
			   reterr_msg);
	if (r == 0)
		r = number("NVMEVOL_MAX_VOLUMES", 100000, 1, 1000000, &c->max_volumes, reterr_msg);
	if (r == 0)
		r = number("NVMEVOL_CLONE_FREEZE_BUDGET_MS", 1000, 10, 60000, &c->clone_freeze_budget_ms, reterr_msg);
	if (r == 0)
		r = number("NVMEVOL_CLONE_MEMORY_MB", 512, 1, 65536, &c->clone_memory_mb, reterr_msg);
	if (r == 0)
		r = number("NVMEVOL_HEALTH_CACHE_SECONDS", 60, 0, 86400, &c->health_cache_seconds, reterr_msg);
	if (r == 0)
		r = policy_mode("NVMEVOL_REQUIRE_NVME", &c->require_nvme, reterr_msg);
	if (r == 0)
		r = policy_mode("NVMEVOL_HEALTH", &c->health, reterr_msg);
	if (r < 0)
		return r;

	/* The pool-wide relative thresholds: the volume options' parser, under the setting's name. */
	static const char *const ratio_keys[][2] = {
		{ "NVMEVOL_SELFTEST_MIN_WRITE_RATIO", "min_write_ratio" },
		{ "NVMEVOL_SELFTEST_MIN_READ_RATIO", "min_read_ratio" },
		{ "NVMEVOL_SELFTEST_MIN_IOPS_RATIO", "min_iops_ratio" },
		{ "NVMEVOL_SELFTEST_MAX_P99_RATIO", "max_p99_ratio" },
	};
	for (size_t i = 0; i < ELEMENTSOF(ratio_keys); i++) {
		_cleanup_free_ char *why = NULL;

		v = getenv(ratio_keys[i][0]);
		if (!v || !*v)
			continue;
		r = selftest_threshold_parse(ratio_keys[i][1], v, &c->selftest_pool, &why);
		if (r < 0)
			return errmsg_set(reterr_msg, -EINVAL, "%s: %s", ratio_keys[i][0], why ? why : "invalid value");
	}

	/* Unset or empty: beside the state (so the file follows it); "off": none. */
	v = getenv("NVMEVOL_METRICS_DIR");
	if (!v || !*v)
		c->metrics_dir = NULL; /* statedir_resolve() puts it beside the state, once that is known */
	else if (streq(v, "off"))
		c->metrics_dir = strdup("");
	else if (v[0] != '/')
		return errmsg_set(reterr_msg, -EINVAL, "NVMEVOL_METRICS_DIR='%s' must be an absolute path, empty for <state dir>/metrics, or off", v);
	else
		c->metrics_dir = strdup(v);
	if (v && *v && !c->metrics_dir)
		return -ENOMEM;
	r = number("NVMEVOL_METRICS_INTERVAL_SECONDS", 15, 1, 3600, &c->metrics_interval_s, reterr_msg);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(c);
	return 0;
}
