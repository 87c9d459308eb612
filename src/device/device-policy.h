/* SPDX-License-Identifier: MIT */
/*
 * Whether nvmevol uses a partition: device facts, XFS geometry and NVMe
 * health in, use / warn / refuse out, each reason quoting the fact, the
 * setting that decided and what to do. Pure: the daemon and `nvmevol devices`
 * share it, and unit tests feed it.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "device/device.h"
#include "device/nvme-health.h"
#include "device/xfs-geometry.h"

typedef enum DevicePolicyMode {
	DEVICE_POLICY_UNSET = 0, /* a volume without its own setting: the plugin's applies */
	DEVICE_POLICY_OFF,
	DEVICE_POLICY_WARN,
	DEVICE_POLICY_ENFORCE,
	_DEVICE_POLICY_MAX,
	_DEVICE_POLICY_INVALID = -EINVAL,
} DevicePolicyMode;

const char *device_policy_mode_to_string(DevicePolicyMode m);
/* "off", "warn" or "enforce"; anything else is _DEVICE_POLICY_INVALID. */
DevicePolicyMode device_policy_mode_from_string(const char *s);

typedef struct DevicePolicySettings {
	DevicePolicyMode require_nvme; /* NVMEVOL_REQUIRE_NVME */
	DevicePolicyMode health;       /* NVMEVOL_HEALTH, or a volume's health= */
	const char *health_setting;    /* how to name it in reasons; NULL = "NVMEVOL_HEALTH" */
} DevicePolicySettings;

typedef struct DeviceInputs {
	const DeviceFacts *facts;  /* required */
	const char *uuid;          /* filesystem UUID for advice, or NULL */
	bool listed;               /* named in NVMEVOL_DEVICES */
	const XfsGeometry *xfs;    /* NULL: not mounted where we can ask */
	const NvmeHealth *health;  /* NULL: not NVMe, or not read */
	const char *health_error;  /* why the health log could not be read, or NULL */
} DeviceInputs;

typedef enum DeviceVerdict {
	DEVICE_VERDICT_USE,
	DEVICE_VERDICT_WARN,
	DEVICE_VERDICT_REFUSE,
	_DEVICE_VERDICT_MAX,
} DeviceVerdict;

#define DEVICE_REASONS_MAX 12

typedef struct DeviceReason {
	DeviceVerdict level;  /* WARN or REFUSE */
	char code[32];        /* stable identifier, e.g. "not-nvme", "untrusted-removable" */
	char what[256];       /* the fact, e.g. "transport is virtio, not nvme" */
	char setting[80];     /* what decided, e.g. "NVMEVOL_REQUIRE_NVME=enforce"; "" = always */
	char advice[320];     /* what to do about it */
} DeviceReason;

typedef struct DeviceDecision {
	DeviceVerdict verdict;
	size_t n_reasons;
	DeviceReason reasons[DEVICE_REASONS_MAX];
} DeviceDecision;

const char *device_verdict_to_string(DeviceVerdict v);

/* The largest of 4 KiB, the physical block size and the minimum I/O size: what a partition start should be a multiple of. */
uint64_t device_alignment_unit(const DeviceFacts *f);

/* The partition starts at a multiple of device_alignment_unit() and of the optimal I/O size (when larger). */
bool device_partition_aligned(const DeviceFacts *f);

void device_policy_evaluate(const DevicePolicySettings *s, const DeviceInputs *in, DeviceDecision *ret);

/*
 * One line of the reasons at @min_level or above, for Err and the log:
 * "transport is virtio, not nvme (NVMEVOL_REQUIRE_NVME=enforce): use ...; ...".
 */
void device_decision_format(const DeviceDecision *d, DeviceVerdict min_level, char *buf, size_t len);
