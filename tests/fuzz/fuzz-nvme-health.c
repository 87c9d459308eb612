/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes what the daemon does with a controller's SMART / Health log page: the
 * bytes come from a device, and a broken or hostile drive must not crash the
 * plugin or make it say something untrue.
 *
 * Input: the 512-byte log page, then optional bytes that pick the policy
 * settings and a few device facts. Shorter inputs are zero-padded after a
 * check that the decoder refuses them.
 *
 * Exercised: nvme_health_parse, nvme_health_judge (with small buffers too),
 * nvme_health_to_json, device_policy_evaluate and device_decision_format.
 * Not exercised: the ioctl itself (tests/qemu/ against qemu's controller).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device-policy.h"
#include "device/device-report.h"
#include "device/nvme-health.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t log[NVME_HEALTH_LOG_SIZE] = { 0 };
	const uint8_t *extra = size > sizeof(log) ? data + sizeof(log) : NULL;
	size_t n_extra = size > sizeof(log) ? size - sizeof(log) : 0;
	DeviceFacts f = { .devnode = "/dev/nvme0n1p1", .name = "nvme0n1p1", .disk = "nvme0n1",
			  .transport = DEVICE_TRANSPORT_NVME, .is_partition = true, .start_bytes = 1 << 20,
			  .logical_block_size = 512, .physical_block_size = 512, .numa_node = -1,
			  .nvme_controller = "nvme0" };
	DevicePolicySettings s = { .require_nvme = DEVICE_POLICY_WARN, .health = DEVICE_POLICY_WARN };
	NvmeHealth h;
	DeviceDecision d;
	char why[64], line[2048];
	NvmeHealthVerdict v;
	json_t *j;

	if (size < sizeof(log) && nvme_health_parse(data, size, &h) != -EINVAL)
		abort();
	memcpy(log, data, size < sizeof(log) ? size : sizeof(log));
	if (nvme_health_parse(log, sizeof(log), &h) != 0)
		abort();

	v = nvme_health_judge(&h, why, sizeof(why));
	if (strnlen(why, sizeof(why)) >= sizeof(why) || !nvme_health_verdict_to_string(v))
		abort();
	/* Any critical warning bit must be reported as critical; none must not. */
	if ((h.critical_warning != 0) != (v == NVME_HEALTH_CRITICAL))
		abort();

	j = nvme_health_to_json(&h);
	if (!j)
		abort();
	free(json_dumps(j, 0));
	json_decref(j);

	if (n_extra >= 1) {
		s.require_nvme = (DevicePolicyMode)(extra[0] % _DEVICE_POLICY_MAX);
		s.health = (DevicePolicyMode)((extra[0] >> 2) % _DEVICE_POLICY_MAX);
	}
	if (n_extra >= 2) {
		f.removable = extra[1] & 1;
		f.usb = extra[1] & 2;
		f.rotational = extra[1] & 4;
		f.read_only = extra[1] & 8;
		f.transport = (DeviceTransport)((extra[1] >> 4) % _DEVICE_TRANSPORT_MAX);
	}
	if (n_extra >= 10)
		memcpy(&f.start_bytes, extra + 2, sizeof(f.start_bytes));
	device_policy_evaluate(&s, &(DeviceInputs){ .facts = &f, .health = &h }, &d);
	if (d.n_reasons > DEVICE_REASONS_MAX || !device_verdict_to_string(d.verdict))
		abort();
	if ((h.critical_warning & NVME_CRIT_READ_ONLY) && s.health != DEVICE_POLICY_OFF && d.verdict != DEVICE_VERDICT_REFUSE)
		abort();
	device_decision_format(&d, DEVICE_VERDICT_WARN, line, sizeof(line));
	if (strnlen(line, sizeof(line)) >= sizeof(line))
		abort();
	return 0;
}
