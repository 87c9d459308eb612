/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/device-policy.h"
#include "util/macro.h"

#define KIB 1024u

static const char *const mode_names[_DEVICE_POLICY_MAX] = {
	[DEVICE_POLICY_UNSET] = "default",
	[DEVICE_POLICY_OFF] = "off",
	[DEVICE_POLICY_WARN] = "warn",
	[DEVICE_POLICY_ENFORCE] = "enforce",
};

const char *device_policy_mode_to_string(DevicePolicyMode m)
{
	return m >= 0 && m < _DEVICE_POLICY_MAX ? mode_names[m] : NULL;
}

DevicePolicyMode device_policy_mode_from_string(const char *s)
{
	for (int i = DEVICE_POLICY_OFF; i < _DEVICE_POLICY_MAX; i++)
		if (s && streq(s, mode_names[i]))
			return (DevicePolicyMode)i;
	return _DEVICE_POLICY_INVALID;
}

const char *device_verdict_to_string(DeviceVerdict v)
{
	static const char *const names[_DEVICE_VERDICT_MAX] = {
		[DEVICE_VERDICT_USE] = "use",
		[DEVICE_VERDICT_WARN] = "warn",
		[DEVICE_VERDICT_REFUSE] = "refuse",
	};
	return v >= 0 && v < _DEVICE_VERDICT_MAX ? names[v] : NULL;
}

uint64_t device_alignment_unit(const DeviceFacts *f)
{
	/* Flash pages are 4 KiB or more even where a drive reports 512-byte sectors. */
	uint64_t u = 4 * KIB;

	if (f->physical_block_size > u)
		u = f->physical_block_size;
	if (f->minimum_io_size > u)
		u = f->minimum_io_size;
	return u;
}

bool device_partition_aligned(const DeviceFacts *f)
{
	uint64_t unit = device_alignment_unit(f);

	if (!f->is_partition)
		return f->alignment_offset == 0;
	return f->start_bytes % unit == 0 && f->alignment_offset == 0 &&
	       (f->optimal_io_size <= unit || f->start_bytes % f->optimal_io_size == 0);
}

static DeviceReason *add(DeviceDecision *d, DeviceVerdict level, const char *code, const char *setting)
{
	DeviceReason *r;

	if (d->n_reasons >= DEVICE_REASONS_MAX)
		return NULL;
	r = &d->reasons[d->n_reasons++];
	*r = (DeviceReason){ .level = level };
	snprintf(r->code, sizeof(r->code), "%s", code);
	snprintf(r->setting, sizeof(r->setting), "%s", setting ? setting : "");
	if (level > d->verdict)
		d->verdict = level;
	return r;
}

#define SET(field, ...) (void)snprintf((field), sizeof(field), __VA_ARGS__)

/*
 * Removable and USB devices are refused unless an admin named them (anyone can
 * plug a stick labelled nvmevol-x), also under LVM, md or a loop device; so is
 * an nbd device, whose backing nobody here can see.
 */
static void check_trust(const DeviceInputs *in, DeviceDecision *d)
{
	const DeviceFacts *f = in->facts;
	char where[160];
	DeviceReason *r;

	if (!(f->removable || f->usb || f->opaque) || in->listed)
		return;
	r = add(d, DEVICE_VERDICT_REFUSE, "untrusted-removable", "NVMEVOL_DEVICES (not listed)");
	if (!r)
		return;
	if (f->untrusted_leaf[0])
		SET(where, "%s, under %s", f->untrusted_leaf, f->disk);
	else
		SET(where, "%s", f->disk);
	if (f->removable || f->usb)
		SET(r->what, "%s is on a %s%s%s device (%s)", f->devnode, f->removable ? "removable" : "",
		    f->removable && f->usb ? " " : "", f->usb ? "USB" : "", where);
	else
		SET(r->what, "%s is on a network block device (%s): what backs it cannot be seen", f->devnode, where);
	SET(r->advice, "removable and USB devices join the pool only when listed in NVMEVOL_DEVICES; to allow it: docker plugin set nvmevol NVMEVOL_DEVICES=%s%s",
	    in->uuid ? "UUID=" : "", in->uuid ? in->uuid : f->devnode);
}

static void check_nvme(const DevicePolicySettings *s, const DeviceInputs *in, DeviceDecision *d)
{
	const DeviceFacts *f = in->facts;
	DeviceVerdict level = s->require_nvme == DEVICE_POLICY_ENFORCE ? DEVICE_VERDICT_REFUSE : DEVICE_VERDICT_WARN;
	char setting[64];
	DeviceReason *r;

	if (s->require_nvme != DEVICE_POLICY_WARN && s->require_nvme != DEVICE_POLICY_ENFORCE)
		return;
	SET(setting, "NVMEVOL_REQUIRE_NVME=%s", device_policy_mode_to_string(s->require_nvme));
	if (f->transport != DEVICE_TRANSPORT_NVME && (r = add(d, level, "not-nvme", setting))) {
		SET(r->what, "transport of %s is %s, not nvme", f->disk, device_transport_to_string(f->transport));
		SET(r->advice, "put the partition on an NVMe namespace%s",
		    level == DEVICE_VERDICT_REFUSE ? ", or allow other disks with NVMEVOL_REQUIRE_NVME=warn or off" : "");
	}
	if (f->rotational && (r = add(d, level, "rotational", setting))) {
		SET(r->what, "%s reports a rotational disk (queue/rotational=1)", f->disk);
		SET(r->advice, "use a solid-state NVMe namespace%s",
		    level == DEVICE_VERDICT_REFUSE ? ", or allow it with NVMEVOL_REQUIRE_NVME=warn or off" : "");
	}
}

static void check_health(const DevicePolicySettings *s, const DeviceInputs *in, DeviceDecision *d)
{
	const NvmeHealth *h = in->health;
	const char *name = s->health_setting ? s->health_setting : "NVMEVOL_HEALTH";
	char setting[96], why[512];
	NvmeHealthVerdict v;
	DeviceReason *r;

	if (in->facts->read_only && (r = add(d, DEVICE_VERDICT_REFUSE, "read-only", NULL))) {
		SET(r->what, "the block device %s is read-only", in->facts->devnode);
		SET(r->advice, "make it writable (blockdev --setrw) or use another partition");
	}
	if (s->health == DEVICE_POLICY_OFF)
		return;
	SET(setting, "%s=%s", name, device_policy_mode_to_string(s->health == DEVICE_POLICY_ENFORCE ? DEVICE_POLICY_ENFORCE : DEVICE_POLICY_WARN));
	if (!h) {
		if (in->health_error && (r = add(d, DEVICE_VERDICT_WARN, "health-unknown", setting))) {
			SET(r->what, "NVMe health unknown: %s", in->health_error);
			SET(r->advice, "check that /dev is bound into the plugin and that it has CAP_SYS_ADMIN");
		}
		return;
	}
	v = nvme_health_judge(h, why, sizeof(why));
	if (h->critical_warning & NVME_CRIT_READ_ONLY) {
		/* Writes fail on such media whatever the policy says: never place or mount a volume there. */
		if ((r = add(d, DEVICE_VERDICT_REFUSE, "health-read-only", setting))) {
			SET(r->what, "controller %s: %s (critical warning 0x%02x)", in->facts->nvme_controller, why,
			    h->critical_warning);
			SET(r->advice, "replace the drive; copy its volumes elsewhere while it still reads");
		}
	} else if (v == NVME_HEALTH_CRITICAL) {
		DeviceVerdict level = s->health == DEVICE_POLICY_ENFORCE ? DEVICE_VERDICT_REFUSE : DEVICE_VERDICT_WARN;

		if ((r = add(d, level, "health-critical", setting))) {
			SET(r->what, "controller %s: %s (critical warning 0x%02x)", in->facts->nvme_controller, why,
			    h->critical_warning);
			SET(r->advice, "check the drive (nvme smart-log /dev/%s) and plan its replacement%s", in->facts->nvme_controller,
			    level == DEVICE_VERDICT_REFUSE ? "; to use it anyway set health=warn on the volume or NVMEVOL_HEALTH=warn" : "");
		}
		return;
	}
	if (v == NVME_HEALTH_WARNING && !(h->critical_warning) && (r = add(d, DEVICE_VERDICT_WARN, "health-warning", setting))) {
		SET(r->what, "controller %s: %s", in->facts->nvme_controller, why);
		SET(r->advice, "check the drive (nvme smart-log /dev/%s)", in->facts->nvme_controller);
	}
}

static void check_alignment(const DeviceInputs *in, DeviceDecision *d)
{
	const DeviceFacts *f = in->facts;
	const XfsGeometry *x = in->xfs;
	uint64_t unit = device_alignment_unit(f);
	DeviceReason *r;

	if (!device_partition_aligned(f) && (r = add(d, DEVICE_VERDICT_WARN, "misaligned-partition", NULL))) {
		if (f->start_bytes % unit != 0 || f->alignment_offset != 0) {
			SET(r->what, "partition %s starts at byte %llu, not a multiple of %llu (4 KiB, physical block %u, minimum I/O %u)",
			    f->name, (unsigned long long)f->start_bytes, (unsigned long long)unit, f->physical_block_size,
			    f->minimum_io_size);
			SET(r->advice, "recreate the partition at a 1 MiB boundary (sfdisk and parted do so by default), then mkfs.xfs it again");
		} else {
			SET(r->what, "partition %s starts at byte %llu, not a multiple of the optimal I/O size %u", f->name,
			    (unsigned long long)f->start_bytes, f->optimal_io_size);
			SET(r->advice, "recreate the partition at a 1 MiB boundary (or a multiple of %u), then mkfs.xfs it again",
			    f->optimal_io_size);
		}
	}
	if (!x)
		return;
	if (f->physical_block_size > x->sector_size && (r = add(d, DEVICE_VERDICT_WARN, "xfs-sector-size", NULL))) {
		SET(r->what, "XFS sector size %u is smaller than the physical block size %u", x->sector_size,
		    f->physical_block_size);
		SET(r->advice, "mkfs.xfs -s size=%u (read-modify-write cycles otherwise)", f->physical_block_size);
	}
	if ((x->sunit_bytes && x->sunit_bytes % unit != 0) ||
	    (x->swidth_bytes && f->optimal_io_size > unit && x->swidth_bytes % f->optimal_io_size != 0)) {
		if ((r = add(d, DEVICE_VERDICT_WARN, "xfs-stripe", NULL))) {
			SET(r->what, "XFS stripe unit %u / width %u bytes does not fit the device (alignment unit %llu, optimal I/O %u)",
			    x->sunit_bytes, x->swidth_bytes, (unsigned long long)unit, f->optimal_io_size);
			SET(r->advice, "mkfs.xfs -d su=%llu,sw=%u, or leave su/sw out and let mkfs.xfs read the device",
			    (unsigned long long)unit,
			    f->optimal_io_size > unit ? (unsigned)(f->optimal_io_size / unit) : 1u);
		}
	}
	if (!x->crc && (r = add(d, DEVICE_VERDICT_WARN, "xfs-v4", NULL))) {
		SET(r->what, "XFS has no metadata checksums (V4 format, deprecated)");
		SET(r->advice, "copy the data off and mkfs.xfs -m crc=1 (the default)");
	}
}

void device_policy_evaluate(const DevicePolicySettings *s, const DeviceInputs *in, DeviceDecision *ret)
{
	DeviceDecision d = { .verdict = DEVICE_VERDICT_USE };

	check_trust(in, &d);
	check_nvme(s, in, &d);
	check_health(s, in, &d);
	check_alignment(in, &d);
	*ret = d;
}

void device_decision_format(const DeviceDecision *d, DeviceVerdict min_level, char *buf, size_t len)
{
	size_t n = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < d->n_reasons && n + 1 < len; i++) {
		const DeviceReason *r = &d->reasons[i];
		int k;

		if (r->level < min_level)
			continue;
		k = snprintf(buf + n, len - n, "%s%s%s%s%s: %s", n ? "; " : "", r->what, r->setting[0] ? " (" : "",
			     r->setting, r->setting[0] ? ")" : "", r->advice);
		if (k < 0)
			break;
		n += (size_t)k < len - n ? (size_t)k : len - n - 1;
	}
}
