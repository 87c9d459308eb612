/* SPDX-License-Identifier: MIT */
/*
 * probe_device() with a deadline. libblkid reads the superblock, and a read
 * of a suspended device-mapper target, a dead nbd or iSCSI device or a dying
 * disk can block for minutes, in a state no signal interrupts. Each probe
 * runs in a worker thread; one that does not answer in time is left to finish
 * on its own, and until it does, the device is answered "not answering" at
 * once (no second worker piles up behind the first).
 *
 * Process-wide state under one mutex of this file's own; nothing else is
 * taken while it is held.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "device/probe.h"

/* probe_device(), or -ETIMEDOUT if @devname did not answer within @timeout_ms (or still has not since an earlier call). */
int probe_device_deadline(const char *devname, unsigned timeout_ms, ProbedDevice *ret);

/* Counts the probes that did not answer in time and finished since: a scan may now see their device. */
uint64_t probe_deadline_released(void);
