/* SPDX-License-Identifier: MIT */
/* Settings from the environment (the managed plugin's config.json Env, set with `docker plugin set`). */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device-policy.h"
#include "volume/volume-options.h"
#include "util/log.h"

/* Where the persistent state lives (statedir.c decides when NVMEVOL_STATE_DIR is not set). */
typedef enum StateLocation {
	STATE_LOCATION_UNRESOLVED,
	STATE_LOCATION_ENV,        /* NVMEVOL_STATE_DIR */
	STATE_LOCATION_MOUNT,      /* the plugin's `state` mount, whose source an admin set (state.source) */
	STATE_LOCATION_PLUGIN_DIR, /* under PropagatedMount: Docker's own directory of this plugin on the host */
	STATE_LOCATION_HOST,       /* /var/lib/nvmevol of the daemon's own root (outside Docker) */
	_STATE_LOCATION_MAX,
} StateLocation;

const char *state_location_to_string(StateLocation l);

/* How this instance runs (NVMEVOL_MODE): what it tells another instance that finds a partition taken. */
typedef enum RunMode {
	RUN_MODE_PLUGIN, /* the managed Docker plugin (the default) */
	RUN_MODE_HOST,   /* a host service (plugin/nvmevol.service): its plugin socket is root-only by SO_PEERCRED too */
	_RUN_MODE_MAX,
	_RUN_MODE_INVALID = -EINVAL,
} RunMode;

const char *run_mode_to_string(RunMode m);
RunMode run_mode_from_string(const char *s);

typedef struct Settings {
	RunMode mode;            /* NVMEVOL_MODE: plugin (default) or host */
	char *socket_path;       /* NVMEVOL_SOCKET */
	char *admin_socket_path; /* ADMIN_SOCKET_NAME next to the socket: root-only admin endpoints */
	char *state_dir;         /* NVMEVOL_STATE_DIR, or resolved by statedir_resolve(); must outlive the plugin */
	StateLocation state_location;
	char *propagated_mount;  /* NVMEVOL_PROPAGATED_MOUNT: where volume binds go (config.json PropagatedMount) */
	char *partition_root;    /* NVMEVOL_PARTITION_ROOT: where partitions are mounted, privately */
	char *label_prefix;      /* NVMEVOL_LABEL_PREFIX */
	char **devices;          /* NVMEVOL_DEVICES, comma-separated */
	size_t n_devices;
	LogLevel log_level;      /* NVMEVOL_LOG_LEVEL */
	SelftestPolicy selftest; /* NVMEVOL_SELFTEST */
	uint64_t selftest_budget_ms;     /* NVMEVOL_SELFTEST_BUDGET_MS */
	uint64_t selftest_cache_seconds; /* NVMEVOL_SELFTEST_CACHE_SECONDS */
	uint64_t clone_freeze_budget_ms; /* NVMEVOL_CLONE_FREEZE_BUDGET_MS: longest freeze for a clone */
	uint64_t clone_memory_mb;        /* NVMEVOL_CLONE_MEMORY_MB: a clone's walk (names, hard-link table) */
	uint64_t max_volumes;    /* NVMEVOL_MAX_VOLUMES */
	DevicePolicyMode require_nvme;   /* NVMEVOL_REQUIRE_NVME */
	DevicePolicyMode health;         /* NVMEVOL_HEALTH */
	uint64_t health_cache_seconds;   /* NVMEVOL_HEALTH_CACHE_SECONDS */
	/* NVMEVOL_SELFTEST_MIN_WRITE_RATIO, ..._MIN_READ_RATIO, ..._MIN_IOPS_RATIO, ..._MAX_P99_RATIO:
	 * pool-wide relative thresholds; a volume's own option of the same name wins. */
	SelftestThresholds selftest_pool;
	char *metrics_dir;               /* NVMEVOL_METRICS_DIR: default (unset or "") <state_dir>/metrics, set by statedir_resolve(); "off" gives "" = none */
	uint64_t metrics_interval_s;     /* NVMEVOL_METRICS_INTERVAL_SECONDS */
} Settings;

/* Reads the environment. On a bad value returns -EINVAL and a message naming the variable. */
int settings_from_env(Settings **ret, char **reterr_msg);
Settings *settings_free(Settings *c);
