/* SPDX-License-Identifier: MIT */
#include <blkid.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/probe-deadline.h"
#include "device/probe.h"
#include "util/macro.h"

DEFINE_CLEANUP_FUNC(blkid_probe, blkid_free_probe)

void probed_device_done(ProbedDevice *d)
{
	free(d->device);
	free(d->fstype);
	free(d->uuid);
	free(d->label);
	*d = (ProbedDevice){ 0 };
}

void probed_devices_free(ProbedDevice *devs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		probed_device_done(&devs[i]);
	free(devs);
}

static int dup_value(blkid_probe pr, const char *name, char **ret)
{
	const char *v = NULL;

	if (blkid_probe_lookup_value(pr, name, &v, NULL) < 0 || !v) {
		*ret = NULL;
		return 0;
	}
	/* Values belong to the probe: copy them before it is freed. */
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

int probe_device(const char *devname, ProbedDevice *ret)
{
	_cleanup_(blkid_free_probep) blkid_probe pr = NULL;
	ProbedDevice d = { 0 };
	int r;

	errno = 0;
	pr = blkid_new_probe_from_filename(devname);
	if (!pr)
		return errno > 0 ? -errno : -ENOMEM;

	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_UUID | BLKID_SUBLKS_LABEL);

	d.device = strdup(devname);
	if (!d.device)
		return -ENOMEM;
	d.logical_sector_size = blkid_probe_get_sectorsize(pr);

	r = blkid_do_safeprobe(pr); /* 0 found, 1 nothing, -2 ambivalent, -1 error */
	if (r == -2) {
		probed_device_done(&d);
		return -ENOTUNIQ;
	}
	if (r < 0) {
		probed_device_done(&d);
		return -EIO;
	}
	if (r == 0) {
		r = dup_value(pr, "TYPE", &d.fstype);
		if (r == 0)
			r = dup_value(pr, "UUID", &d.uuid);
		if (r == 0)
			r = dup_value(pr, "LABEL", &d.label);
		if (r < 0) {
			probed_device_done(&d);
			return r;
		}
	}
	*ret = d;
	return 0;
}

static ProbedDevice *already_listed(ProbedDevice *devs, size_t n, const char *devname)
{
	for (size_t i = 0; i < n; i++)
		if (devs[i].device && streq(devs[i].device, devname))
			return &devs[i];
	return NULL;
}

static int append(ProbedDevice **devs, size_t *n, ProbedDevice *d)
{
	ProbedDevice *p = realloc(*devs, (*n + 1) * sizeof(**devs));

	if (!p)
		return -ENOMEM;
	p[(*n)++] = *d;
	*devs = p;
	*d = (ProbedDevice){ 0 };
	return 0;
}

/*
 * Probes every block device the kernel lists in /proc/partitions, directly,
 * each within @timeout_ms; those that do not answer go to @stuck.
 * libblkid's device cache is not used: it can miss a device that was attached
 * a moment ago (a rescan right after a hot-plug would not see it).
 */
static int probe_all_devices(unsigned timeout_ms, ProbedDevice **ret, size_t *ret_n, ProbedDevice **stuck,
			     size_t *n_stuck)
{
	ProbedDevice *devs = NULL;
	size_t n = 0;
	char line[256];
	FILE *f = fopen("/proc/partitions", "re");
	int r = 0;

	if (!f)
		return -errno;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		unsigned long long blocks;
		char name[128], path[160];
		ProbedDevice d = { 0 };
		int k;

		/* "major minor #blocks name"; the header and blank lines do not parse. An extended
		 * partition's entry is 1 block, an unbound loop device 0: neither holds a filesystem. */
		if (sscanf(line, " %*u %*u %llu %127s", &blocks, name) != 2 || blocks < 2)
			continue;
		snprintf(path, sizeof(path), "/dev/%s", name);
		k = probe_device_deadline(path, timeout_ms, &d);
		/*
		 * A probe that timed out, or failed to read (an I/O error, a busy or
		 * interrupted open), tells nothing about what the device holds: it
		 * is listed apart, so that a mounted partition on it is not taken
		 * for gone. Only a device that is gone or empty is left out.
		 */
		if (k == -ETIMEDOUT || k == -EIO || k == -EAGAIN || k == -EBUSY || k == -EINTR) {
			d.device = strdup(path);
			r = d.device ? append(stuck, n_stuck, &d) : -ENOMEM;
		} else if (k == 0)
			r = append(&devs, &n, &d);
		if (r < 0)
			probed_device_done(&d);
	}
	fclose(f);
	if (r < 0) {
		probed_devices_free(devs, n);
		return r;
	}
	*ret = devs;
	*ret_n = n;
	return 0;
}

/* The probed device an NVMEVOL_DEVICES entry names: a path (links resolved), UUID=... or LABEL=.... */
static ProbedDevice *find_spec(ProbedDevice *all, size_t n, const char *spec)
{
	_cleanup_free_ char *real = NULL;

	for (size_t i = 0; i < n; i++) {
		if (strncmp(spec, "UUID=", 5) == 0 && all[i].uuid && streq(all[i].uuid, spec + 5))
			return &all[i];
		if (strncmp(spec, "LABEL=", 6) == 0 && all[i].label && streq(all[i].label, spec + 6))
			return &all[i];
	}
	if (spec[0] != '/')
		return NULL;
	/* /dev/disk/by-id/... and other links name the same node that label discovery found. */
	real = realpath(spec, NULL);
	return already_listed(all, n, real ? real : spec);
}

static int take(ProbedDevice **devs, size_t *n, ProbedDevice *d)
{
	ProbedDevice copy = { 0 };

	copy.device = strdup(d->device);
	copy.fstype = d->fstype ? strdup(d->fstype) : NULL;
	copy.uuid = d->uuid ? strdup(d->uuid) : NULL;
	copy.label = d->label ? strdup(d->label) : NULL;
	copy.logical_sector_size = d->logical_sector_size;
	copy.listed = d->listed;
	if (!copy.device || (d->fstype && !copy.fstype) || (d->uuid && !copy.uuid) || (d->label && !copy.label) ||
	    append(devs, n, &copy) < 0) {
		probed_device_done(&copy);
		return -ENOMEM;
	}
	return 0;
}

int probe_scan(const char *label_prefix, char *const *explicit_devices, size_t n_explicit, unsigned timeout_ms,
	       ProbedDevice **ret, size_t *ret_n, ProbedDevice **ret_stuck, size_t *ret_n_stuck)
{
	ProbedDevice *all = NULL, *devs = NULL, *stuck = NULL;
	size_t n_all = 0, n = 0, n_stuck = 0, plen = label_prefix ? strlen(label_prefix) : 0;
	int r;

	r = probe_all_devices(timeout_ms, &all, &n_all, &stuck, &n_stuck);
	if (r < 0) {
		probed_devices_free(stuck, n_stuck);
		return r;
	}
	for (size_t i = 0; r == 0 && plen > 0 && i < n_all; i++)
		if (all[i].label && strncmp(all[i].label, label_prefix, plen) == 0)
			r = take(&devs, &n, &all[i]);

	for (size_t i = 0; r == 0 && i < n_explicit; i++) {
		ProbedDevice *found = find_spec(all, n_all, explicit_devices[i]), *known, d = { 0 };

		if (found && (known = already_listed(devs, n, found->device))) {
			known->listed = true;
			continue;
		}
		if (found) {
			found->listed = true;
			r = take(&devs, &n, found);
			continue;
		}
		/* Not among the kernel's block devices (an image file, a node elsewhere): probe it as named. */
		if (explicit_devices[i][0] != '/' || probe_device_deadline(explicit_devices[i], timeout_ms, &d) < 0) {
			probed_device_done(&d);
			d = (ProbedDevice){ .device = strdup(explicit_devices[i]) };
			if (!d.device) {
				r = -ENOMEM;
				break;
			}
		}
		d.listed = true;
		r = append(&devs, &n, &d);
		if (r < 0)
			probed_device_done(&d);
	}
	probed_devices_free(all, n_all);
	if (r < 0) {
		probed_devices_free(devs, n);
		probed_devices_free(stuck, n_stuck);
		return r;
	}
	*ret = devs;
	*ret_n = n;
	*ret_stuck = stuck;
	*ret_n_stuck = n_stuck;
	return 0;
}
