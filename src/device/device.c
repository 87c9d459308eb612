/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "device/device.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

DEFINE_CLEANUP_FUNC(DIR *, closedir)

static const char *const transport_names[_DEVICE_TRANSPORT_MAX] = {
	[DEVICE_TRANSPORT_UNKNOWN] = "unknown", [DEVICE_TRANSPORT_NVME] = "nvme", [DEVICE_TRANSPORT_SATA] = "sata",
	[DEVICE_TRANSPORT_SCSI] = "scsi",       [DEVICE_TRANSPORT_USB] = "usb",   [DEVICE_TRANSPORT_VIRTIO] = "virtio",
	[DEVICE_TRANSPORT_XEN] = "xen",         [DEVICE_TRANSPORT_MMC] = "mmc",   [DEVICE_TRANSPORT_LOOP] = "loop",
	[DEVICE_TRANSPORT_DM] = "dm",           [DEVICE_TRANSPORT_MD] = "md",     [DEVICE_TRANSPORT_NBD] = "nbd",
	[DEVICE_TRANSPORT_RAM] = "ram",
};

const char *device_transport_to_string(DeviceTransport t)
{
	return t >= 0 && t < _DEVICE_TRANSPORT_MAX ? transport_names[t] : NULL;
}

/* True if @path has a component that starts with @prefix followed by a digit ("usb" matches "/usb2/"). */
static bool has_component(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = path; (p = strchr(p, '/')); p++)
		if (strncmp(p + 1, prefix, n) == 0 && p[1 + n] >= '0' && p[1 + n] <= '9')
			return true;
	return false;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

DeviceTransport device_transport_classify(const char *syspath, const char *disk, bool *ret_usb)
{
	bool usb = has_component(syspath, "usb");

	if (ret_usb)
		*ret_usb = usb;
	/* Virtual devices first: their names say it all. */
	if (starts_with(disk, "loop"))
		return DEVICE_TRANSPORT_LOOP;
	if (starts_with(disk, "dm-"))
		return DEVICE_TRANSPORT_DM;
	if (starts_with(disk, "md"))
		return DEVICE_TRANSPORT_MD;
	if (starts_with(disk, "nbd"))
		return DEVICE_TRANSPORT_NBD;
	if (starts_with(disk, "ram") || starts_with(disk, "zram"))
		return DEVICE_TRANSPORT_RAM;
	/* A USB enclosure is USB whatever bridge sits behind it (even NVMe over a UAS bridge). */
	if (usb)
		return DEVICE_TRANSPORT_USB;
	if (strstr(syspath, "/nvme/") || strstr(syspath, "/nvme-subsystem/") || strstr(syspath, "/nvme-fabrics/"))
		return DEVICE_TRANSPORT_NVME;
	if (has_component(syspath, "virtio"))
		return DEVICE_TRANSPORT_VIRTIO;
	if (strstr(syspath, "/xen/") || starts_with(disk, "xvd"))
		return DEVICE_TRANSPORT_XEN;
	if (has_component(syspath, "mmc") || starts_with(disk, "mmcblk"))
		return DEVICE_TRANSPORT_MMC;
	if (has_component(syspath, "ata"))
		return DEVICE_TRANSPORT_SATA;
	if (has_component(syspath, "host") && has_component(syspath, "target"))
		return DEVICE_TRANSPORT_SCSI;
	return DEVICE_TRANSPORT_UNKNOWN;
}

void device_parse_scheduler(const char *line, char *buf, size_t len)
{
	const char *open = strchr(line, '['), *close = open ? strchr(open, ']') : NULL;

	if (len == 0)
		return;
	if (open && close && close > open + 1)
		snprintf(buf, len, "%.*s", (int)(close - open - 1), open + 1);
	else /* a single scheduler ("none") has no brackets on some kernels */
		snprintf(buf, len, "%s", line);
}

/* Reads a sysfs attribute below @dir, whitespace-trimmed and made printable. -errno if absent. */
static int read_attr(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	_cleanup_close_ int fd = -EBADF;
	ssize_t n;
	size_t start = 0;

	if (len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	n = read(fd, buf, len - 1);
	if (n < 0)
		return negative_errno();
	buf[n] = '\0';
	/* Identity strings are space padded (NVMe, SCSI INQUIRY); control bytes never leave here. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t' || buf[n - 1] == '\0'))
		buf[--n] = '\0';
	while (buf[start] == ' ')
		start++;
	memmove(buf, buf + start, (size_t)n - start + 1);
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	return 0;
}

static uint64_t read_u64(const char *dir, const char *name, uint64_t def)
{
	char buf[32];
	uint64_t v;

	if (read_attr(dir, name, buf, sizeof(buf)) < 0 || parse_u64(buf, &v) < 0)
		return def;
	return v;
}

static uint32_t read_u32(const char *dir, const char *name)
{
	uint64_t v = read_u64(dir, name, 0);
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int read_devnum(const char *dir, dev_t *ret)
{
	char buf[32];
	unsigned ma, mi;
	char extra;

	if (read_attr(dir, "dev", buf, sizeof(buf)) < 0 || sscanf(buf, "%u:%u%c", &ma, &mi, &extra) != 2)
		return -ENOENT;
	*ret = makedev(ma, mi);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static bool is_nvme_controller_name(const char *s)
{
	return starts_with(s, "nvme") && s[4] && strspn(s + 4, "0123456789") == strlen(s + 4);
}

/* The controller of an NVMe namespace: its parent device, or for a multipath head the subsystem's first path. */
static void find_nvme_controller(const char *diskpath, DeviceFacts *f, char *ctrlpath, size_t len)
{
	char link[PATH_MAX], real[PATH_MAX];
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;

	ctrlpath[0] = '\0';
	snprintf(link, sizeof(link), "%s/device", diskpath);
	if (realpath(link, real) && is_nvme_controller_name(base_name(real))) {
		snprintf(ctrlpath, len, "%s", real);
	} else if (strstr(diskpath, "/nvme-subsystem/")) {
		/* /sys/devices/virtual/nvme-subsystem/nvme-subsysN/nvmeXnY: controllers are links beside it. */
		snprintf(link, sizeof(link), "%s/..", diskpath);
		d = opendir(link);
		while (d && (de = readdir(d)))
			if (is_nvme_controller_name(de->d_name)) {
				snprintf(link, sizeof(link), "%s/../%s", diskpath, de->d_name);
				if (realpath(link, real)) {
					snprintf(ctrlpath, len, "%s", real);
					break;
				}
			}
	}
	if (!ctrlpath[0])
		return;
	snprintf(f->nvme_controller, sizeof(f->nvme_controller), "%s", base_name(ctrlpath));
	(void)read_devnum(ctrlpath, &f->nvme_controller_devnum);
}

/* The serial of a SCSI disk: VPD page 0x80 (4-byte header, then the serial), else its USB device's. */
static void read_scsi_serial(const char *devpath, DeviceFacts *f)
{
	char path[PATH_MAX], buf[256];
	_cleanup_close_ int fd = -EBADF;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/vpd_pg80", devpath);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && (n = read(fd, buf, sizeof(buf) - 1)) > 4) {
		size_t len = (size_t)((unsigned char)buf[2] << 8 | (unsigned char)buf[3]);

		if (len > (size_t)n - 4)
			len = (size_t)n - 4;
		snprintf(f->serial, sizeof(f->serial), "%.*s", (int)len, buf + 4);
	}
	if (f->serial[0] || !f->usb)
		return;
	/* Walk up to the USB device (the directory with idVendor) and take its iSerial string. */
	snprintf(path, sizeof(path), "%s", devpath);
	for (char *s; (s = strrchr(path, '/')) && s != path;) {
		*s = '\0';
		if (read_attr(path, "idVendor", buf, sizeof(buf)) == 0) {
			(void)read_attr(path, "serial", f->serial, sizeof(f->serial));
			break;
		}
	}
}

/* The NUMA node of the nearest ancestor device that has one (PCI functions do). */
static int find_numa_node(const char *devpath)
{
	char path[PATH_MAX], buf[16];
	int v;

	snprintf(path, sizeof(path), "%s", devpath);
	while (strlen(path) > strlen("/sys/devices")) {
		char *s;

		if (read_attr(path, "numa_node", buf, sizeof(buf)) == 0 && sscanf(buf, "%d", &v) == 1)
			return v < 0 ? -1 : v;
		s = strrchr(path, '/');
		if (!s)
			break;
		*s = '\0';
	}
	return -1;
}

#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
/* Whether the comma-separated list in environment variable @var names @disk (or is "*"). */
static bool test_hook_lists(const char *var, const char *disk)
{
	const char *e = getenv(var);
	size_t n = strlen(disk);

	for (const char *p = e; p && *p;) {
		size_t k = strcspn(p, ",");
		if ((k == n && strncmp(p, disk, n) == 0) || (k == 1 && *p == '*'))
			return true;
		p += k + (p[k] == ',');
	}
	return false;
}
#endif

static bool test_hook_removable(const char *disk)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	/* NVMEVOL_TEST_REMOVABLE=loop3,loop5 (or "*"): report these disks as removable (loop devices never are). */
	return test_hook_lists("NVMEVOL_TEST_REMOVABLE", disk);
#else
	return false;
#endif
}

/*
 * NVMEVOL_TEST_NVME=loop3,loop5 (or "*") (test builds): these disks claim NVMe controller "nvme4242", which does
 * not exist, so that the health reading runs (and fails) on hosts without NVMe.
 */
static void test_hook_nvme(DeviceFacts *f)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	if (!f->nvme_controller[0] && test_hook_lists("NVMEVOL_TEST_NVME", f->disk))
		snprintf(f->nvme_controller, sizeof(f->nvme_controller), "nvme4242");
#endif
}

typedef struct LeafWalk {
	const char *sys;
	DeviceLeaf *out;
	size_t max, n, visited;
} LeafWalk;

/* The whole disk of a resolved sysfs block path: itself, or the parent of a partition. */
static void whole_disk(const char *path, char *buf, size_t len)
{
	char attr[16];
	char *s;

	snprintf(buf, len, "%s", path);
	if (read_attr(path, "partition", attr, sizeof(attr)) == 0 && (s = strrchr(buf, '/')) && s != buf)
		*s = '\0';
}

/* The resolved sysfs path of the disk that holds a loop device's backing file, or "" (not on a block device). */
static void loop_backing_disk(const LeafWalk *w, const char *diskpath, char *buf, size_t len)
{
	char file[PATH_MAX], link[PATH_MAX], real[PATH_MAX];
	struct stat st;

	buf[0] = '\0';
	if (read_attr(diskpath, "loop/backing_file", file, sizeof(file)) < 0 || stat(file, &st) < 0)
		return;
	snprintf(link, sizeof(link), "%s/dev/block/%u:%u", w->sys, major(st.st_dev), minor(st.st_dev));
	if (realpath(link, real))
		whole_disk(real, buf, len);
}

static void add_leaf(LeafWalk *w, const char *diskpath)
{
	const char *disk = base_name(diskpath);
	DeviceLeaf *l;

	for (size_t i = 0; i < w->n; i++)
		if (streq(w->out[i].disk, disk))
			return;
	if (w->n >= w->max)
		return;
	l = &w->out[w->n++];
	*l = (DeviceLeaf){ 0 };
	snprintf(l->disk, sizeof(l->disk), "%s", disk);
	l->transport = device_transport_classify(diskpath, l->disk, &l->usb);
	l->removable = read_u64(diskpath, "removable", 0) != 0 || test_hook_removable(l->disk);
	l->opaque = l->transport == DEVICE_TRANSPORT_NBD;
}

/* Adds @diskpath (unless it is the top, @depth 0) and every device under it. */
static void walk_leaves(LeafWalk *w, const char *diskpath, unsigned depth)
{
	char dir[PATH_MAX], link[PATH_MAX], real[PATH_MAX], below[PATH_MAX];
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *de;

	/* A bound on the work, whatever the tree looks like (a cycle cannot be built, but be sure). */
	if (depth > 8 || ++w->visited > 64)
		return;
	if (depth > 0)
		add_leaf(w, diskpath);
	snprintf(dir, sizeof(dir), "%s/slaves", diskpath);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", dir, de->d_name);
		if (!realpath(link, real))
			continue;
		whole_disk(real, below, sizeof(below));
		walk_leaves(w, below, depth + 1);
	}
	if (starts_with(base_name(diskpath), "loop")) {
		loop_backing_disk(w, diskpath, below, sizeof(below));
		if (below[0])
			walk_leaves(w, below, depth + 1);
	}
}

void device_leaves_read(const char *sys, const char *diskpath, DeviceLeaf *ret, size_t max, size_t *ret_n)
{
	LeafWalk w = { .sys = sys, .out = ret, .max = max };

	walk_leaves(&w, diskpath, 0);
	*ret_n = w.n;
}

/* The device rule looks at every device below: a USB stick under LVM, md or a loop device is still a USB stick. */
static void apply_leaves(DeviceFacts *f)
{
	DeviceLeaf leaves[DEVICE_LEAVES_MAX];
	size_t n = 0, o = 0;

	f->opaque = f->transport == DEVICE_TRANSPORT_NBD;
	device_leaves_read("/sys", f->syspath, leaves, ELEMENTSOF(leaves), &n);
	for (size_t i = 0; i < n; i++) {
		const DeviceLeaf *l = &leaves[i];
		int k = snprintf(f->leaves + o, sizeof(f->leaves) - o, "%s%s", o ? ", " : "", l->disk);

		if (k > 0 && (size_t)k < sizeof(f->leaves) - o)
			o += (size_t)k;
		if ((l->usb || l->removable || l->opaque) && !f->untrusted_leaf[0])
			snprintf(f->untrusted_leaf, sizeof(f->untrusted_leaf), "%s", l->disk);
		f->usb = f->usb || l->usb;
		f->removable = f->removable || l->removable;
		f->opaque = f->opaque || l->opaque;
	}
}

int device_facts_read(const char *devnode, DeviceFacts *ret, char **reterr_msg)
{
	char link[128], partpath[PATH_MAX], diskpath[PATH_MAX], devlink[PATH_MAX], devpath[PATH_MAX], buf[256];
	DeviceFacts f = { .numa_node = -1 };
	struct stat st;
	int r;

	if (stat(devnode, &st) < 0) {
		r = negative_errno();
		return errmsg_set(reterr_msg, r, "cannot stat %s: %m", devnode);
	}
	if (!S_ISBLK(st.st_mode))
		return errmsg_set(reterr_msg, -ENOTBLK, "%s is not a block device", devnode);
	snprintf(f.devnode, sizeof(f.devnode), "%s", devnode);
	f.devnum = st.st_rdev;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, partpath)) {
		r = negative_errno();
		return errmsg_set(reterr_msg, r, "%s (%u:%u) has no sysfs entry %s: %m", devnode, major(st.st_rdev),
				  minor(st.st_rdev), link);
	}
	snprintf(f.name, sizeof(f.name), "%s", base_name(partpath));
	snprintf(diskpath, sizeof(diskpath), "%s", partpath);
	if (read_attr(partpath, "partition", buf, sizeof(buf)) == 0) {
		char *s = strrchr(diskpath, '/');

		if (!s)
			return errmsg_set(reterr_msg, -EINVAL, "unexpected sysfs path %s", partpath);
		*s = '\0';
		f.is_partition = true;
		(void)parse_u32(buf, &f.partition_number);
		/* start and size count 512-byte sectors whatever the logical block size. */
		f.start_bytes = read_u64(partpath, "start", 0) * 512;
	}
	f.size_bytes = read_u64(partpath, "size", 0) * 512;
	f.alignment_offset = read_u32(partpath, "alignment_offset");
	f.read_only = read_u64(partpath, "ro", 0) != 0;
	snprintf(f.disk, sizeof(f.disk), "%s", base_name(diskpath));
	snprintf(f.syspath, sizeof(f.syspath), "%s", diskpath);

	f.transport = device_transport_classify(diskpath, f.disk, &f.usb);
	f.removable = read_u64(diskpath, "removable", 0) != 0 || test_hook_removable(f.disk);
	apply_leaves(&f);
	f.rotational = read_u64(diskpath, "queue/rotational", 0) != 0;
	f.logical_block_size = read_u32(diskpath, "queue/logical_block_size");
	f.physical_block_size = read_u32(diskpath, "queue/physical_block_size");
	f.minimum_io_size = read_u32(diskpath, "queue/minimum_io_size");
	f.optimal_io_size = read_u32(diskpath, "queue/optimal_io_size");
	f.discard_granularity = read_u64(diskpath, "queue/discard_granularity", 0);
	f.discard_max_bytes = read_u64(diskpath, "queue/discard_max_bytes", 0);
	(void)read_attr(diskpath, "queue/write_cache", f.write_cache, sizeof(f.write_cache));
	if (read_attr(diskpath, "queue/scheduler", buf, sizeof(buf)) == 0)
		device_parse_scheduler(buf, f.scheduler, sizeof(f.scheduler));

	/* The disk's parent device (PCI function, SCSI device, virtio device); loop devices have none. */
	if ((size_t)snprintf(devlink, sizeof(devlink), "%s/device", diskpath) >= sizeof(devlink) ||
	    !realpath(devlink, devpath))
		devpath[0] = '\0';

	switch (f.transport) {
	case DEVICE_TRANSPORT_NVME: {
		char ctrl[PATH_MAX];

		find_nvme_controller(diskpath, &f, ctrl, sizeof(ctrl));
		if (ctrl[0]) {
			(void)read_attr(ctrl, "model", f.model, sizeof(f.model));
			(void)read_attr(ctrl, "serial", f.serial, sizeof(f.serial));
			(void)read_attr(ctrl, "firmware_rev", f.firmware, sizeof(f.firmware));
			f.numa_node = find_numa_node(ctrl);
		}
		break;
	}
	case DEVICE_TRANSPORT_VIRTIO:
		(void)read_attr(diskpath, "serial", f.serial, sizeof(f.serial));
		(void)read_attr(devpath, "vendor", f.vendor, sizeof(f.vendor));
		break;
	case DEVICE_TRANSPORT_LOOP:
		(void)read_attr(diskpath, "loop/backing_file", f.loop_backing_file, sizeof(f.loop_backing_file));
		break;
	default:
		if (devpath[0]) {
			(void)read_attr(devpath, "vendor", f.vendor, sizeof(f.vendor));
			(void)read_attr(devpath, "model", f.model, sizeof(f.model));
			(void)read_attr(devpath, "rev", f.firmware, sizeof(f.firmware));
			read_scsi_serial(devpath, &f);
		}
		break;
	}
	if (f.numa_node < 0 && devpath[0])
		f.numa_node = find_numa_node(devpath);
	test_hook_nvme(&f);
	*ret = f;
	return 0;
}
