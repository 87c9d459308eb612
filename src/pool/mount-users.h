/* SPDX-License-Identifier: MIT */
/*
 * Who on this host still has a volume's bind mounted: every mount namespace
 * (one process of each) whose mountinfo shows a mount of the volume's
 * directory, read from /proc/<pid>/mountinfo. For `nvmevol volume release`,
 * run on the host as root, and for a clone's "is the source in use" (the
 * plugin sees only the namespaces of its own PID namespace: a miss there
 * proves nothing, so a clone does not rely on it alone).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct MountUser {
	pid_t pid;         /* one process in that namespace */
	char comm[32];     /* its name */
	uint64_t mount_ns; /* inode of /proc/<pid>/ns/mnt */
	char *target;      /* where that namespace has it mounted */
} MountUser;

void mount_users_free(MountUser *u, size_t n);

/*
 * Mount namespaces with a mount of device @dev (0: of any device) whose root
 * is @root or below it, except namespace @skip_ns (the plugin's own) and mounts whose target
 * ends with @skip_suffix (Docker's host-side copy of the plugin's bind, e.g.
 * "/plugins/<id>/propagated-mount/<name>"; NULL for none). *ret_scanned is
 * the number of namespaces read. @proc is "/proc" (another root for tests).
 */
int mount_users_find(const char *proc, dev_t dev, const char *root, uint64_t skip_ns, const char *skip_suffix,
		     MountUser **ret, size_t *ret_n, size_t *ret_scanned);
