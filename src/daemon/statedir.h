/* SPDX-License-Identifier: MIT */
/*
 * Where the persistent state (volume index, mount counts) lives when
 * NVMEVOL_STATE_DIR does not say.
 *
 * The managed plugin's `state` mount (config.json) binds a host directory at
 * STATEDIR_MOUNT_POINT. Docker refuses to enable a plugin whose mount source
 * does not exist, so its default source is the host's /dev, which exists on
 * every host and is granted already (the `dev` mount): that means "not set",
 * and the state goes under PropagatedMount instead, i.e. into Docker's own
 * directory of this plugin on the host (<data-root>/plugins/<id>/propagated-mount/.state),
 * which Docker creates, keeps across plugin restarts, disable/enable, daemon
 * restarts and upgrades, and deletes with `docker plugin rm`. An admin who
 * sets state.source to a directory gets that directory.
 */
#pragma once

#include "settings.h"

#define STATEDIR_MOUNT_POINT "/var/lib/nvmevol"
/* Below PropagatedMount; never a volume name (those start with a letter or digit). */
#define STATEDIR_PLUGIN_DIR_NAME ".state"

/* Fills cfg->state_dir and cfg->state_location unless NVMEVOL_STATE_DIR set them. */
int statedir_resolve(Settings *cfg, char **reterr_msg);

/*
 * Pure: the decision, from what stat() says. @mount_point_exists and
 * @same_as_dev describe STATEDIR_MOUNT_POINT (same st_dev and st_ino as
 * /dev), @is_mount whether mountinfo shows a mount there.
 */
StateLocation statedir_decide(bool mount_point_exists, bool same_as_dev, bool is_mount);
