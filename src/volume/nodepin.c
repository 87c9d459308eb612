/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include "volume/nodepin.h"
#include "util/errmsg.h"

int nodepin_here(char *buf, size_t size)
{
	struct utsname u;
	size_t n;

	if (uname(&u) < 0)
		return -errno;
	n = strlen(u.nodename);
	if (n == 0 || n >= size)
		return n == 0 ? -ENOENT : -ENAMETOOLONG;
	memcpy(buf, u.nodename, n + 1);
	return 0;
}

int nodepin_check(const char *volume, const char *pinned, const char *here, char **reterr_msg)
{
	if (!pinned || !pinned[0] || strcasecmp(pinned, here) == 0)
		return 0;
	return errmsg_set(reterr_msg, -EREMOTE,
			  "volume %s is pinned to node %s (option node=%s) and this is node %s: nvmevol does not create "
			  "it here, where it would start empty while its data is on %s. Run the task on %s: add the "
			  "placement constraint node.hostname==%s, or make %s available again (docker node update "
			  "--availability active %s). To move the volume here, run 'nvmevol volume move %s --via CMD' "
			  "on %s, CMD reaching %s (examples/swarm/README.md)",
			  volume, pinned, pinned, here, pinned, pinned, pinned, pinned, pinned, volume, pinned, here);
}
