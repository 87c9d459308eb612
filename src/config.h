/* SPDX-License-Identifier: MIT */
/* Settings from the environment (the managed plugin's config.json Env, set with `docker plugin set`). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "device-policy.h"
#include "options.h"
#include "util/log.h"

typedef struct Config {
	char *socket_path;       /* NVMEVOL_SOCKET */
	char *state_dir;         /* NVMEVOL_STATE_DIR: the volume index; must outlive the plugin */
	char *propagated_mount;  /* NVMEVOL_PROPAGATED_MOUNT: where volume binds go (config.json PropagatedMount) */
	char *partition_root;    /* NVMEVOL_PARTITION_ROOT: where partitions are mounted, privately */
	char *label_prefix;      /* NVMEVOL_LABEL_PREFIX */
	char **devices;          /* NVMEVOL_DEVICES, comma-separated */
	size_t n_devices;
	LogLevel log_level;      /* NVMEVOL_LOG_LEVEL */
	SelftestPolicy selftest; /* NVMEVOL_SELFTEST */
	uint64_t selftest_budget_ms;     /* NVMEVOL_SELFTEST_BUDGET_MS */
	uint64_t selftest_cache_seconds; /* NVMEVOL_SELFTEST_CACHE_SECONDS */
	uint64_t max_volumes;    /* NVMEVOL_MAX_VOLUMES */
	DevicePolicyMode require_nvme;   /* NVMEVOL_REQUIRE_NVME */
	DevicePolicyMode health;         /* NVMEVOL_HEALTH */
	uint64_t health_cache_seconds;   /* NVMEVOL_HEALTH_CACHE_SECONDS */
	/* NVMEVOL_SELFTEST_MIN_WRITE_RATIO, ..._MIN_READ_RATIO, ..._MIN_IOPS_RATIO, ..._MAX_P99_RATIO:
	 * pool-wide relative thresholds; a volume's own option of the same name wins. */
	SelftestThresholds selftest_pool;
	char *metrics_dir;               /* NVMEVOL_METRICS_DIR: default (unset or "") <state_dir>/metrics; "off" gives "" = none */
	uint64_t metrics_interval_s;     /* NVMEVOL_METRICS_INTERVAL_SECONDS */
} Config;

/* Reads the environment. On a bad value returns -EINVAL and a message naming the variable. */
int config_from_env(Config **ret, char **reterr_msg);
Config *config_free(Config *c);
