/* SPDX-License-Identifier: MIT */
#include <blkid.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
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

/* Resolves "UUID=x", "LABEL=x" or a path to a device name (malloc'd). */
static char *resolve_spec(const char *spec, blkid_cache cache)
{
	char *real;

	if (strncmp(spec, "UUID=", 5) == 0 || strncmp(spec, "LABEL=", 6) == 0)
		return blkid_evaluate_tag(spec, NULL, &cache);
	/* /dev/disk/by-id/... and other links name the same node that label discovery found. */
	real = realpath(spec, NULL);
	return real ? real : strdup(spec);
}

int probe_scan(const char *label_prefix, char *const *explicit_devices, size_t n_explicit,
	       ProbedDevice **ret, size_t *ret_n)
{
	blkid_cache cache = NULL;
	blkid_dev_iterate it;
	blkid_dev dev;
	ProbedDevice *devs = NULL;
	size_t n = 0;
	int r = 0;

	/* "/dev/null" as cache file: always probe afresh, never write a cache. */
	if (blkid_get_cache(&cache, "/dev/null") < 0)
		return -ENOMEM;
	(void)blkid_probe_all_new(cache);
	(void)blkid_probe_all(cache);

	if (label_prefix && *label_prefix) {
		size_t plen = strlen(label_prefix);

		it = blkid_dev_iterate_begin(cache);
		while (it && blkid_dev_next(it, &dev) == 0) {
			ProbedDevice d = { 0 };
			const char *name;

			dev = blkid_verify(cache, dev);
			if (!dev)
				continue;
			name = blkid_dev_devname(dev);
			if (!name || already_listed(devs, n, name))
				continue;
			/* Re-probe directly: the cache may hold stale tags for a reused loop device. */
			if (probe_device(name, &d) < 0)
				continue;
			if (!d.label || strncmp(d.label, label_prefix, plen) != 0) {
				probed_device_done(&d);
				continue;
			}
			r = append(&devs, &n, &d);
			if (r < 0) {
				probed_device_done(&d);
				break;
			}
		}
		blkid_dev_iterate_end(it);
	}

	for (size_t i = 0; r == 0 && i < n_explicit; i++) {
		ProbedDevice d = { 0 }, *known;
		_cleanup_free_ char *name = resolve_spec(explicit_devices[i], cache);

		if (name && (known = already_listed(devs, n, name))) {
			known->listed = true;
			continue;
		}
		if (!name || probe_device(name, &d) < 0) {
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

	blkid_put_cache(cache);
	if (r < 0) {
		probed_devices_free(devs, n);
		return r;
	}
	*ret = devs;
	*ret_n = n;
	return 0;
}
