/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pool/mount.h"
#include "daemon/statedir.h"
#include "util/errmsg.h"
#include "util/log.h"

StateLocation statedir_decide(bool mount_point_exists, bool same_as_dev, bool is_mount)
{
	if (mount_point_exists && same_as_dev)
		return STATE_LOCATION_PLUGIN_DIR;
	if (mount_point_exists && is_mount)
		return STATE_LOCATION_MOUNT;
	/* Outside Docker (or a plain directory): the conventional host path, created if missing. */
	return STATE_LOCATION_HOST;
}

static int resolve_state_dir(Settings *cfg, char **reterr_msg);

int statedir_resolve(Settings *cfg, char **reterr_msg)
{
	int r = resolve_state_dir(cfg, reterr_msg);

	/* The metrics file follows the state unless NVMEVOL_METRICS_DIR says otherwise. */
	if (r == 0 && !cfg->metrics_dir && asprintf(&cfg->metrics_dir, "%s/metrics", cfg->state_dir) < 0) {
		cfg->metrics_dir = NULL;
		return -ENOMEM;
	}
	return r;
}

static int resolve_state_dir(Settings *cfg, char **reterr_msg)
{
	struct stat st, dev;
	bool exists, same_as_dev = false, is_mount = false;
	MountEntry e = { 0 };
	StateLocation loc;
	char *path;

	if (cfg->state_dir) {
		cfg->state_location = STATE_LOCATION_ENV;
		return 0;
	}
	exists = stat(STATEDIR_MOUNT_POINT, &st) == 0;
	if (exists && stat("/dev", &dev) == 0)
		same_as_dev = st.st_dev == dev.st_dev && st.st_ino == dev.st_ino;
	/* From mountinfo: a bind of a directory on the same filesystem keeps st_dev. */
	if (exists && mountinfo_find_target(STATEDIR_MOUNT_POINT, &e) == 0) {
		is_mount = true;
		mount_entry_done(&e);
	}
	if (exists && !same_as_dev && !S_ISDIR(st.st_mode))
		return errmsg_set(reterr_msg, -ENOTDIR,
				  "%s is not a directory: set the plugin's state.source to a host directory (or back to /dev, "
				  "the default, to keep the state in Docker's plugin directory)",
				  STATEDIR_MOUNT_POINT);

	loc = statedir_decide(exists, same_as_dev, is_mount);
	if (loc == STATE_LOCATION_PLUGIN_DIR) {
		if (asprintf(&path, "%s/%s", cfg->propagated_mount, STATEDIR_PLUGIN_DIR_NAME) < 0)
			return -ENOMEM;
	} else {
		path = strdup(STATEDIR_MOUNT_POINT);
		if (!path)
			return -ENOMEM;
	}
	cfg->state_dir = path;
	cfg->state_location = loc;
	log_info("state directory: %s (%s)", path, state_location_to_string(loc));
	return 0;
}
