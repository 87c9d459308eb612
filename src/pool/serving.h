/* SPDX-License-Identifier: MIT */
/*
 * Which nvmevol serves a partition. Two instances on one partition (the
 * managed plugin and a host service, or two of either kind) would each take
 * the other's volumes for its own: mounts counted twice, a Remove deleting
 * what the other serves. So each instance holds an flock on the filesystem's
 * root directory for as long as it has the partition attached. The lock is
 * on the inode, so it holds across mount namespaces (the plugin's mount and
 * the host's are one filesystem) and on a read-only mount; it goes with the
 * process, whatever way it ends. Beside it, nvmevol/serving.json records who
 * holds it (mode, pid, sockets, state directory, since when), which a refused
 * instance quotes in its error.
 */
#pragma once

#include <stdbool.h>

#include "settings.h"

#define SERVING_RECORD "serving.json"

/*
 * Takes the lock of the filesystem mounted at @mountpoint: returns the fd
 * that holds it (O_CLOEXEC; close it to let go). Another instance holding
 * it: -EBUSY and @ret_why names it and says how to stop it.
 */
int serving_claim(const char *mountpoint, char **ret_why);

/* Records this instance in @tree_fd (nvmevol/ of a claimed, writable partition). Best effort: the lock is what counts. */
int serving_record(int tree_fd, const Settings *cfg);
