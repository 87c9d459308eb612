/* SPDX-License-Identifier: MIT */
/*
 * The wrong-node guard (volume option node=HOSTNAME). On a swarm, Docker calls
 * Create on whichever node a task lands on, and never where the volume already
 * exists: a task rescheduled to another node would start on a new, empty
 * volume. A pinned volume is therefore created on its node only. Pure, except
 * nodepin_here().
 */
#pragma once

#include <stddef.h>

/*
 * This node's name: the host name of the plugin's UTS namespace, a copy of its
 * dockerd's taken when the plugin started (the name swarm shows as
 * node.hostname, unless the host was renamed since).
 */
int nodepin_here(char *buf, size_t size);

/*
 * 0 if a volume pinned to @pinned ("" = not pinned) may be created on node
 * @here (host names compare without case); otherwise -EREMOTE and an Err that
 * names both nodes and what to do.
 */
int nodepin_check(const char *volume, const char *pinned, const char *here, char **reterr_msg);
