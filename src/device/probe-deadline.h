/* SPDX-License-Identifier: MIT */
/*
 * probe_device() with a deadline. libblkid reads the superblock, and a read
 * of a suspended device-mapper target, a dead nbd or iSCSI device or a dying
 * disk can block for minutes, in a state no signal interrupts. Each probe
 * runs in a worker thread (util/deadline-call.h); one that does not answer in
 * time is left to finish on its own, and until it does, the device is
 * answered "not answering" at once. When it finishes,
 * deadline_call_released() counts it: a scan may now see its device.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "device/probe.h"

/* probe_device(), or -ETIMEDOUT if @devname did not answer within @timeout_ms (or still has not since an earlier call). */
int probe_device_deadline(const char *devname, unsigned timeout_ms, ProbedDevice *ret);
