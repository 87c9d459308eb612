/* SPDX-License-Identifier: MIT */
/* Device facts, XFS geometry, NVMe health and the policy decision as JSON (Status, `nvmevol devices --json`). */
#pragma once

#include <jansson.h>

#include "device/device-policy.h"
#include "device/device.h"
#include "device/nvme-health.h"
#include "device/xfs-geometry.h"

/* {"path","disk","transport","model",...,"partition":{"number","start_bytes","alignment_unit","aligned"}} */
json_t *device_facts_to_json(const DeviceFacts *f);
/* {"block_size","sector_size","sunit_bytes","swidth_bytes","reflink","crc","bigtime",...} */
json_t *xfs_geometry_to_json(const XfsGeometry *g);
/* {"verdict","critical_warning","critical_warnings":[...],"temperature_celsius",...,"why"} */
json_t *nvme_health_to_json(const NvmeHealth *h);
/* {"verdict":"use|warn|refuse","reasons":[{"level","code","what","setting","advice"}]} */
json_t *device_decision_to_json(const DeviceDecision *d);
