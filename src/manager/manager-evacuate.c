/* SPDX-License-Identifier: MIT */
/* Evacuate: the volumes of a partition moved to others of this host. */
#include "manager/manager-internal.h"
#include "util/errmsg.h"

int manager_partition_evacuate(Manager *m, const char *ref, const char *to, json_t **ret_result, char **reterr_msg)
{
	(void)m, (void)ref, (void)to, (void)ret_result;
	return errmsg_set(reterr_msg, -EOPNOTSUPP, "partition evacuate is not built yet in this version");
}
