/* SPDX-License-Identifier: MIT */
/* libblkid wrapper: finds the filesystems that belong to the pool. No policy, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct ProbedDevice {
	char *device;           /* /dev/... */
	char *fstype;           /* "xfs", "ext4", ... or NULL if no filesystem */
	char *uuid;
	char *label;
	unsigned logical_sector_size;
	bool listed;            /* named by an NVMEVOL_DEVICES entry (also when the label matched too) */
} ProbedDevice;

void probed_device_done(ProbedDevice *d);
void probed_devices_free(ProbedDevice *devs, size_t n);

/*
 * Lists the devices that are candidates for the pool: every device whose
 * filesystem label starts with @label_prefix (skipped if NULL or ""), plus
 * every entry of @explicit_devices (paths, "UUID=..." or "LABEL=...").
 * Non-XFS candidates are returned too (fstype tells); the caller reports them.
 * Explicit entries that cannot be resolved are returned with fstype NULL and
 * device set to the entry text. Each device is probed within @timeout_ms
 * (probe-deadline.h); those that do not answer in time, or whose probe
 * fails with an I/O error, are skipped and listed in *ret_stuck (device set,
 * nothing else): what they hold is unknown, not absent.
 */
#define PROBE_DEADLINE_MS 2000 /* the usual @timeout_ms: a device whose superblock is not read by then is skipped */
int probe_scan(const char *label_prefix, char *const *explicit_devices, size_t n_explicit, unsigned timeout_ms,
	       ProbedDevice **ret, size_t *ret_n, ProbedDevice **ret_stuck, size_t *ret_n_stuck);

/* Probes a single device or image file. */
int probe_device(const char *devname, ProbedDevice *ret);
