/* SPDX-License-Identifier: MIT */
/*
 * The pure parts of the device checks: the NVMe health log decoder and its
 * verdict, transport classification from sysfs paths (shapes taken from the
 * qemu guest and common hosts), the XFS feature bits, the policy decision and
 * the settings that drive it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "settings.h"
#include "device/device-policy.h"
#include "device/device-report.h"
#include "device/device.h"
#include "device/nvme-health.h"
#include "device/xfs-geometry.h"
#include "device/xfs-log.h"

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

Test(nvme_health, decodes_every_field_at_its_offset)
{
	uint8_t log[NVME_HEALTH_LOG_SIZE] = { 0 };
	NvmeHealth h;

	log[0] = NVME_CRIT_RELIABILITY | NVME_CRIT_READ_ONLY;
	put_le(log + 1, 323, 2); /* the value qemu 7.2 reports: 323 K = 50 °C */
	log[3] = 42;
	log[4] = 10;
	log[5] = 117;
	log[6] = 1;
	put_le(log + 32, 1001, 8);
	put_le(log + 48, 2002, 8);
	put_le(log + 64, 3003, 8);
	put_le(log + 80, 4004, 8);
	put_le(log + 96, 5005, 8);
	put_le(log + 112, 6006, 8);
	put_le(log + 128, 7007, 8);
	put_le(log + 144, 8008, 8);
	put_le(log + 160, 9009, 8);
	put_le(log + 176, 10010, 8);
	put_le(log + 192, 11, 4);
	put_le(log + 196, 12, 4);

	cr_assert_eq(nvme_health_parse(log, sizeof(log), &h), 0);
	cr_expect_eq(h.critical_warning, 0x0c);
	cr_expect_eq(h.temperature_kelvin, 323);
	int c;
	cr_expect(nvme_health_celsius(&h, &c) && c == 50);
	cr_expect_eq(h.available_spare, 42);
	cr_expect_eq(h.available_spare_threshold, 10);
	cr_expect_eq(h.percentage_used, 117);
	cr_expect_eq(h.endurance_group_warning, 1);
	cr_expect_eq(h.data_units_read, 1001);
	cr_expect_eq(h.data_units_written, 2002);
	cr_expect_eq(h.host_read_commands, 3003);
	cr_expect_eq(h.host_write_commands, 4004);
	cr_expect_eq(h.controller_busy_minutes, 5005);
	cr_expect_eq(h.power_cycles, 6006);
	cr_expect_eq(h.power_on_hours, 7007);
	cr_expect_eq(h.unsafe_shutdowns, 8008);
	cr_expect_eq(h.media_errors, 9009);
	cr_expect_eq(h.error_log_entries, 10010);
	cr_expect_eq(h.warning_temp_minutes, 11);
	cr_expect_eq(h.critical_temp_minutes, 12);
	cr_expect_not(h.saturated);
	cr_expect_eq(h.volatile_write_cache, -1);
}

Test(nvme_health, counters_above_64_bits_saturate)
{
	uint8_t log[NVME_HEALTH_LOG_SIZE] = { 0 };
	NvmeHealth h;

	put_le(log + 128, 5, 8);
	log[128 + 8] = 1; /* 2^64 + 5 power-on hours */
	cr_assert_eq(nvme_health_parse(log, sizeof(log), &h), 0);
	cr_expect_eq(h.power_on_hours, UINT64_MAX);
	cr_expect(h.saturated);
}

Test(nvme_health, short_buffers_are_refused)
{
	uint8_t log[NVME_HEALTH_LOG_SIZE] = { 0 };
	NvmeHealth h;

	cr_expect_eq(nvme_health_parse(log, NVME_HEALTH_LOG_SIZE - 1, &h), -EINVAL);
	cr_expect_eq(nvme_health_parse(NULL, NVME_HEALTH_LOG_SIZE, &h), -EINVAL);
}

Test(nvme_health, verdicts_and_reasons)
{
	NvmeHealth h = { .available_spare = 100, .available_spare_threshold = 10, .volatile_write_cache = -1 };
	char why[512];

	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_OK);
	cr_expect_str_eq(why, "");

	/* qemu 7.2 reports spare 0 and threshold 0: no threshold defined, not a warning. */
	h.available_spare = h.available_spare_threshold = 0;
	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_OK);

	h.available_spare = 5;
	h.available_spare_threshold = 10;
	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_WARNING);
	cr_expect(strstr(why, "available spare 5% is below its threshold 10%"), "%s", why);

	h = (NvmeHealth){ .percentage_used = 100 };
	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_WARNING);
	cr_expect(strstr(why, "percentage used 100%"), "%s", why);

	h = (NvmeHealth){ .media_errors = 3 };
	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_WARNING);
	cr_expect(strstr(why, "3 media and data integrity error(s)"), "%s", why);

	h = (NvmeHealth){ .critical_warning = NVME_CRIT_TEMPERATURE | NVME_CRIT_VOLATILE_BACKUP, .media_errors = 1 };
	cr_expect_eq(nvme_health_judge(&h, why, sizeof(why)), NVME_HEALTH_CRITICAL);
	cr_expect(strstr(why, "critical warning: temperature out of range; critical warning: volatile memory backup failed"),
		  "%s", why);
	cr_expect(strstr(why, "1 media"), "%s", why);
	/* A tiny buffer truncates, never overflows; NULL is allowed. */
	cr_expect_eq(nvme_health_judge(&h, why, 8), NVME_HEALTH_CRITICAL);
	cr_expect_lt(strlen(why), 8);
	cr_expect_eq(nvme_health_judge(&h, NULL, 0), NVME_HEALTH_CRITICAL);
}

Test(nvme_health, json_lists_the_warning_bits)
{
	NvmeHealth h = { .critical_warning = 0x0c, .temperature_kelvin = 323, .volatile_write_cache = 0 };
	json_t *j = nvme_health_to_json(&h);

	cr_assert_not_null(j);
	cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "critical");
	cr_expect_eq(json_integer_value(json_object_get(j, "temperature_celsius")), 50);
	cr_expect_eq(json_array_size(json_object_get(j, "critical_warnings")), 2);
	cr_expect_str_eq(json_string_value(json_array_get(json_object_get(j, "critical_warnings"), 1)),
			 "media placed in read-only mode");
	cr_expect_str_eq(json_string_value(json_object_get(j, "volatile_write_cache")), "disabled");
	json_decref(j);
}

Test(device, transport_from_sysfs_paths)
{
	static const struct {
		const char *path, *disk;
		DeviceTransport t;
		bool usb;
	} cases[] = {
		{ "/sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1", "nvme0n1", DEVICE_TRANSPORT_NVME, false },
		{ "/sys/devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1", "nvme0n1", DEVICE_TRANSPORT_NVME, false },
		{ "/sys/devices/pci0000:00/0000:00:05.0/virtio0/block/vda", "vda", DEVICE_TRANSPORT_VIRTIO, false },
		{ "/sys/devices/pci0000:00/0000:00:06.0/usb2/2-1/2-1:1.0/host0/target0:0:0/0:0:0:0/block/sda", "sda",
		  DEVICE_TRANSPORT_USB, true },
		{ "/sys/devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", "sda",
		  DEVICE_TRANSPORT_SATA, false },
		{ "/sys/devices/pci0000:00/0000:00:10.0/host2/target2:0:1/2:0:1:0/block/sdb", "sdb", DEVICE_TRANSPORT_SCSI,
		  false },
		{ "/sys/devices/virtual/block/loop3", "loop3", DEVICE_TRANSPORT_LOOP, false },
		{ "/sys/devices/virtual/block/dm-0", "dm-0", DEVICE_TRANSPORT_DM, false },
		{ "/sys/devices/virtual/block/md127", "md127", DEVICE_TRANSPORT_MD, false },
		{ "/sys/devices/platform/soc/mmc_host/mmc0/mmc0:0001/block/mmcblk0", "mmcblk0", DEVICE_TRANSPORT_MMC, false },
		{ "/sys/devices/vbd-51712/block/xvda", "xvda", DEVICE_TRANSPORT_XEN, false },
		{ "/sys/devices/virtual/block/zram0", "zram0", DEVICE_TRANSPORT_RAM, false },
		{ "/sys/devices/somewhere/else/block/xyz", "xyz", DEVICE_TRANSPORT_UNKNOWN, false },
		/* An NVMe drive in a USB enclosure is USB: it can be unplugged like a stick. */
		{ "/sys/devices/pci0000:00/0000:00:14.0/usb4/4-1/4-1:1.0/host5/target5:0:0/5:0:0:0/block/sdc", "sdc",
		  DEVICE_TRANSPORT_USB, true },
		/* "usbfoo" without a digit is not a USB bus. */
		{ "/sys/devices/platform/usbfoo/nvme/nvme1/nvme1n1", "nvme1n1", DEVICE_TRANSPORT_NVME, false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		bool usb = !cases[i].usb;
		DeviceTransport t = device_transport_classify(cases[i].path, cases[i].disk, &usb);

		cr_expect_eq(t, cases[i].t, "%s: %s, expected %s", cases[i].path, device_transport_to_string(t),
			     device_transport_to_string(cases[i].t));
		cr_expect_eq(usb, cases[i].usb, "%s: usb %d", cases[i].path, usb);
	}
}

/* ---- leaves of stacked devices, in a fake sysfs tree ---- */

static char sysroot[256];

static void mkdirs(const char *rel)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
	for (char *p = path + strlen(sysroot) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		(void)mkdir(path, 0755);
		*p = '/';
	}
	cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "%s: %s", path, strerror(errno));
}

static void put(const char *rel, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* <sysroot>/@rel -> <sysroot>/@to (absolute, as realpath() resolves them alike) */
static void link_to(const char *rel, const char *to)
{
	char path[1024], target[1024];

	snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
	snprintf(target, sizeof(target), "%s/%s", sysroot, to);
	cr_assert_eq(symlink(target, path), 0, "%s: %s", path, strerror(errno));
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void sysroot_done(void)
{
	if (sysroot[0])
		(void)nftw(sysroot, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define USB_DISK "devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/host6/target6:0:0/6:0:0:0/block/sdb"
#define SATA_DISK "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"
#define VIRT "devices/virtual/block/"

static size_t leaves_of(const char *rel, DeviceLeaf *out)
{
	char path[1024];
	size_t n = 99;

	snprintf(path, sizeof(path), "%s/%s", sysroot, rel);
	device_leaves_read(sysroot, path, out, DEVICE_LEAVES_MAX, &n);
	return n;
}

static const DeviceLeaf *leaf(const DeviceLeaf *l, size_t n, const char *disk)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].disk, disk) == 0)
			return &l[i];
	return NULL;
}

/* A USB stick under device-mapper, md (with a SATA disk), a loop device's backing file, nbd; a plain disk has none. */
Test(device, leaves_of_stacked_devices, .fini = sysroot_done)
{
	char img[512], dev[64], imgpath[600];
	DeviceLeaf l[DEVICE_LEAVES_MAX];
	struct stat st;
	size_t n;

	snprintf(sysroot, sizeof(sysroot), "/tmp/nvmevol-fakesys.XXXXXX");
	cr_assert_not_null(mkdtemp(sysroot));
	mkdirs(USB_DISK "/sdb1");
	put(USB_DISK "/removable", "1\n");
	put(USB_DISK "/sdb1/partition", "1\n");
	mkdirs(SATA_DISK);
	put(SATA_DISK "/removable", "0\n");
	mkdirs(VIRT "dm-0/slaves");
	link_to(VIRT "dm-0/slaves/sdb1", USB_DISK "/sdb1");
	mkdirs(VIRT "md0/slaves");
	link_to(VIRT "md0/slaves/dm-0", VIRT "dm-0");
	link_to(VIRT "md0/slaves/sda", SATA_DISK);
	/* loop7's backing file sits on sdb1: <sys>/dev/block/MAJ:MIN of the file's filesystem names it. */
	snprintf(img, sizeof(img), "%s/image", sysroot);
	put("image", "x");
	cr_assert_eq(stat(img, &st), 0);
	mkdirs(VIRT "loop7/loop");
	put(VIRT "loop7/loop/backing_file", img);
	mkdirs("dev/block");
	snprintf(dev, sizeof(dev), "dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	link_to(dev, USB_DISK "/sdb1");
	mkdirs(VIRT "dm-1/slaves");
	link_to(VIRT "dm-1/slaves/loop7", VIRT "loop7");
	mkdirs(VIRT "nbd0");
	mkdirs(VIRT "dm-2/slaves");
	link_to(VIRT "dm-2/slaves/nbd0", VIRT "nbd0");
	/* A loop device whose file is on no block device (tmpfs, NFS): nothing below it. */
	mkdirs(VIRT "loop8/loop");
	snprintf(imgpath, sizeof(imgpath), "%s/missing-file", sysroot);
	put(VIRT "loop8/loop/backing_file", imgpath);
	/* A cycle (sysfs never has one): the walk still ends. */
	mkdirs(VIRT "dm-3/slaves");
	mkdirs(VIRT "dm-4/slaves");
	link_to(VIRT "dm-3/slaves/dm-4", VIRT "dm-4");
	link_to(VIRT "dm-4/slaves/dm-3", VIRT "dm-3");

	n = leaves_of(VIRT "dm-0", l);
	cr_assert_eq(n, 1);
	cr_expect_str_eq(l[0].disk, "sdb", "a partition slave counts as its disk");
	cr_expect(l[0].usb && l[0].removable && l[0].transport == DEVICE_TRANSPORT_USB);

	n = leaves_of(VIRT "md0", l);
	cr_assert_eq(n, 3);
	cr_assert(leaf(l, n, "dm-0") && leaf(l, n, "sdb") && leaf(l, n, "sda"));
	cr_expect(!leaf(l, n, "dm-0")->usb && leaf(l, n, "dm-0")->transport == DEVICE_TRANSPORT_DM);
	cr_expect(leaf(l, n, "sdb")->usb);
	cr_expect(!leaf(l, n, "sda")->usb && !leaf(l, n, "sda")->removable);
	cr_expect_eq(leaf(l, n, "sda")->transport, DEVICE_TRANSPORT_SATA);

	n = leaves_of(VIRT "dm-1", l);
	cr_assert_eq(n, 2, "the loop device's backing file was not followed");
	cr_expect_str_eq(l[0].disk, "loop7", "depth first, the upper device first");
	cr_expect_str_eq(l[1].disk, "sdb");
	cr_expect(l[1].usb);
	cr_assert_eq(leaves_of(VIRT "loop7", l), 1);
	cr_expect_str_eq(l[0].disk, "sdb");

	n = leaves_of(VIRT "dm-2", l);
	cr_assert_eq(n, 1);
	cr_expect(l[0].opaque && l[0].transport == DEVICE_TRANSPORT_NBD);

	cr_expect_eq(leaves_of(SATA_DISK, l), 0, "a plain disk has no leaves");
	cr_expect_eq(leaves_of(VIRT "loop8", l), 0);
	n = leaves_of(VIRT "dm-3", l);
	cr_expect(n == 2 && leaf(l, n, "dm-4") && leaf(l, n, "dm-3"), "each device once");

	/* At most what the caller has room for. */
	device_leaves_read(sysroot, (snprintf(img, sizeof(img), "%s/" VIRT "md0", sysroot), img), l, 1, &n);
	cr_expect_eq(n, 1);
}

Test(policy, a_usb_leaf_or_nbd_needs_listing)
{
	DeviceFacts f = { .transport = DEVICE_TRANSPORT_DM, .usb = true, .removable = true };
	DeviceDecision d;
	const DeviceReason *r = NULL;

	snprintf(f.devnode, sizeof(f.devnode), "/dev/mapper/vg-lv");
	snprintf(f.disk, sizeof(f.disk), "dm-0");
	snprintf(f.untrusted_leaf, sizeof(f.untrusted_leaf), "sdb");
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_OFF, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	for (size_t i = 0; i < d.n_reasons; i++)
		if (strcmp(d.reasons[i].code, "untrusted-removable") == 0)
			r = &d.reasons[i];
	cr_assert_not_null(r);
	cr_expect(strstr(r->what, "removable USB device (sdb, under dm-0)"), "%s", r->what);

	f = (DeviceFacts){ .transport = DEVICE_TRANSPORT_NBD, .opaque = true };
	snprintf(f.devnode, sizeof(f.devnode), "/dev/nbd0");
	snprintf(f.disk, sizeof(f.disk), "nbd0");
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_OFF, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect(strstr(d.reasons[0].what, "network block device (nbd0)"), "%s", d.reasons[0].what);
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_OFF, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &f, .listed = true }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_USE);
}

Test(device, active_scheduler)
{
	char b[32];

	device_parse_scheduler("[mq-deadline] kyber none", b, sizeof(b));
	cr_expect_str_eq(b, "mq-deadline");
	device_parse_scheduler("mq-deadline kyber [none]", b, sizeof(b));
	cr_expect_str_eq(b, "none");
	device_parse_scheduler("none", b, sizeof(b));
	cr_expect_str_eq(b, "none");
}

Test(xfs, feature_bits)
{
	XfsGeometry g = { 0 };

	xfs_geometry_decode_flags((1u << 15) | (1u << 20) | (1u << 21), &g);
	cr_expect(g.crc && g.reflink && g.bigtime);
	cr_expect_not(g.rmapbt || g.inobtcount || g.finobt || g.ftype);
	xfs_geometry_decode_flags(0, &g);
	cr_expect_not(g.crc || g.reflink || g.bigtime);
}

/* Log sequence numbers as sysfs writes them, and the metadata between a log's tail and head. */
Test(xfs, log_sequence_numbers_parse_and_measure)
{
	XfsLsn a, b;

	cr_assert_eq(xfs_lsn_parse("5:53865\n", &a), 0);
	cr_expect(a.cycle == 5 && a.block == 53865);
	cr_assert_eq(xfs_lsn_parse("4294967295:0", &b), 0);
	cr_expect(b.cycle == UINT32_MAX && b.block == 0);
	static const char *const bad[] = { "", ":1", "1:", "1", "-1:2", "1:-2", "1:2x", "4294967296:1", "1:2\n\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(xfs_lsn_parse(bad[i], &a), -EINVAL, "'%s' was taken", bad[i]);

	/* Same cycle; the head one pass ahead, past the log's end; nonsense. */
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 100 }, (XfsLsn){ 4, 350 }, 1000), 250);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 900 }, (XfsLsn){ 5, 50 }, 1000), 150);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 100 }, (XfsLsn){ 4, 100 }, 1000), 0);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 350 }, (XfsLsn){ 4, 100 }, 1000), UINT64_MAX);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 100 }, (XfsLsn){ 5, 200 }, 1000), UINT64_MAX);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 100 }, (XfsLsn){ 6, 50 }, 1000), UINT64_MAX);
	cr_expect_eq(xfs_lsn_distance((XfsLsn){ 4, 1000 }, (XfsLsn){ 4, 1000 }, 1000), UINT64_MAX);

	cr_expect(xfs_lsn_reached((XfsLsn){ 5, 1 }, (XfsLsn){ 4, 999 }));
	cr_expect(xfs_lsn_reached((XfsLsn){ 4, 999 }, (XfsLsn){ 4, 999 }));
	cr_expect_not(xfs_lsn_reached((XfsLsn){ 4, 998 }, (XfsLsn){ 4, 999 }));
	cr_expect_not(xfs_lsn_reached((XfsLsn){ 3, 5000 }, (XfsLsn){ 4, 0 }));
}

/* A healthy NVMe partition at 1 MiB on a 512/4096 namespace. */
static DeviceFacts nvme_facts(void)
{
	DeviceFacts f = {
		.devnode = "/dev/nvme0n1p1",
		.name = "nvme0n1p1",
		.disk = "nvme0n1",
		.is_partition = true,
		.partition_number = 1,
		.start_bytes = 1 << 20,
		.transport = DEVICE_TRANSPORT_NVME,
		.logical_block_size = 512,
		.physical_block_size = 4096,
		.minimum_io_size = 4096,
		.optimal_io_size = 0,
		.numa_node = -1,
		.nvme_controller = "nvme0",
	};
	return f;
}

static const DeviceReason *find_reason(const DeviceDecision *d, const char *code)
{
	for (size_t i = 0; i < d->n_reasons; i++)
		if (strcmp(d->reasons[i].code, code) == 0)
			return &d->reasons[i];
	return NULL;
}

/* A compound literal: its address can be taken in the call. */
#define settings(nvme_mode, health_mode) ((DevicePolicySettings){ .require_nvme = (nvme_mode), .health = (health_mode) })

Test(policy, healthy_nvme_is_used_without_reasons)
{
	DeviceFacts f = nvme_facts();
	NvmeHealth h = { .available_spare = 100, .available_spare_threshold = 10 };
	XfsGeometry x = { .block_size = 4096, .sector_size = 4096, .crc = true };
	DeviceDecision d;

	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_ENFORCE, .health = DEVICE_POLICY_ENFORCE },
			       &(DeviceInputs){ .facts = &f, .xfs = &x, .health = &h }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_USE);
	cr_expect_eq(d.n_reasons, 0, "%s", d.n_reasons ? d.reasons[0].what : "");
}

Test(policy, removable_or_usb_needs_listing)
{
	DeviceFacts f = nvme_facts();
	DeviceDecision d;
	const DeviceReason *r;
	char line[1024];

	f.transport = DEVICE_TRANSPORT_USB;
	f.usb = true;
	snprintf(f.devnode, sizeof(f.devnode), "/dev/sda1");
	snprintf(f.disk, sizeof(f.disk), "sda");
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = DEVICE_POLICY_OFF, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &f, .uuid = "1234-abcd" }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	r = find_reason(&d, "untrusted-removable");
	cr_assert_not_null(r);
	cr_expect(strstr(r->what, "/dev/sda1 is on a USB device"), "%s", r->what);
	cr_expect(strstr(r->advice, "NVMEVOL_DEVICES=UUID=1234-abcd"), "%s", r->advice);
	device_decision_format(&d, DEVICE_VERDICT_REFUSE, line, sizeof(line));
	cr_expect(strstr(line, "(NVMEVOL_DEVICES (not listed))"), "%s", line);

	/* The removable flag alone (an SD card reader, a hot-swap bay) is enough. */
	f.usb = false;
	f.removable = true;
	f.transport = DEVICE_TRANSPORT_SCSI;
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect(strstr(find_reason(&d, "untrusted-removable")->what, "removable device"));
	cr_expect(strstr(find_reason(&d, "untrusted-removable")->advice, "NVMEVOL_DEVICES=/dev/sda1"));

	/* Listed by the admin: used. */
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f, .listed = true },
			       &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_USE);
	cr_expect_null(find_reason(&d, "untrusted-removable"));
}

Test(policy, require_nvme_modes)
{
	DeviceFacts f = nvme_facts();
	DeviceDecision d;
	char line[1024];

	f.transport = DEVICE_TRANSPORT_VIRTIO;
	f.rotational = true;
	snprintf(f.disk, sizeof(f.disk), "vda");

	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_USE);

	device_policy_evaluate(&settings(DEVICE_POLICY_WARN, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN);
	cr_expect_str_eq(find_reason(&d, "not-nvme")->setting, "NVMEVOL_REQUIRE_NVME=warn");
	cr_expect_not_null(find_reason(&d, "rotational"));

	device_policy_evaluate(&settings(DEVICE_POLICY_ENFORCE, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	device_decision_format(&d, DEVICE_VERDICT_REFUSE, line, sizeof(line));
	cr_expect(strstr(line, "transport of vda is virtio, not nvme (NVMEVOL_REQUIRE_NVME=enforce)"), "%s", line);
	cr_expect(strstr(line, "vda reports a rotational disk"), "%s", line);

	/* A rotational NVMe (it exists: hybrid drives) is refused for that alone. */
	f.transport = DEVICE_TRANSPORT_NVME;
	device_policy_evaluate(&settings(DEVICE_POLICY_ENFORCE, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect_null(find_reason(&d, "not-nvme"));
	cr_expect_not_null(find_reason(&d, "rotational"));
}

Test(policy, health_modes)
{
	DeviceFacts f = nvme_facts();
	NvmeHealth crit = { .critical_warning = NVME_CRIT_RELIABILITY };
	NvmeHealth ro = { .critical_warning = NVME_CRIT_READ_ONLY };
	NvmeHealth worn = { .percentage_used = 104 };
	DeviceDecision d;
	const DeviceReason *r;

	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_WARN), &(DeviceInputs){ .facts = &f, .health = &crit },
			       &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN);
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_ENFORCE),
			       &(DeviceInputs){ .facts = &f, .health = &crit }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	r = find_reason(&d, "health-critical");
	cr_assert_not_null(r);
	cr_expect(strstr(r->what, "controller nvme0: critical warning: reliability degraded (critical warning 0x04)"), "%s",
		  r->what);
	cr_expect_str_eq(r->setting, "NVMEVOL_HEALTH=enforce");
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f, .health = &crit },
			       &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_USE);

	/* Read-only media refuse under warn too: every write would fail. */
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_WARN), &(DeviceInputs){ .facts = &f, .health = &ro },
			       &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect_not_null(find_reason(&d, "health-read-only"));

	/* A volume's own setting is named as such. */
	device_policy_evaluate(&(DevicePolicySettings){ .health = DEVICE_POLICY_ENFORCE, .health_setting = "volume option health" },
			       &(DeviceInputs){ .facts = &f, .health = &crit }, &d);
	cr_expect_str_eq(find_reason(&d, "health-critical")->setting, "volume option health=enforce");

	/* Wear is a warning whatever the mode (but off). */
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_ENFORCE),
			       &(DeviceInputs){ .facts = &f, .health = &worn }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN);
	cr_expect_not_null(find_reason(&d, "health-warning"));

	/* Unknown health is a warning, not a refusal. */
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_ENFORCE),
			       &(DeviceInputs){ .facts = &f, .health_error = "cannot open /dev/nvme0" }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN);
	cr_expect(strstr(find_reason(&d, "health-unknown")->what, "cannot open /dev/nvme0"));

	/* A read-only block device is refused whatever the settings. */
	f.read_only = true;
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect_not_null(find_reason(&d, "read-only"));
}

Test(policy, alignment_and_xfs_geometry)
{
	DeviceFacts f = nvme_facts();
	XfsGeometry x = { .block_size = 4096, .sector_size = 512, .crc = false, .sunit_bytes = 6144 };
	DeviceDecision d;

	cr_expect_eq(device_alignment_unit(&f), 4096);
	cr_expect(device_partition_aligned(&f));
	f.start_bytes = 17408; /* sector 34: the old fdisk default */
	cr_expect_not(device_partition_aligned(&f));
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f, .xfs = &x }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_WARN, "misalignment never refuses");
	cr_expect(strstr(find_reason(&d, "misaligned-partition")->what, "starts at byte 17408, not a multiple of 4096"));
	cr_expect(strstr(find_reason(&d, "xfs-sector-size")->advice, "mkfs.xfs -s size=4096"));
	cr_expect_not_null(find_reason(&d, "xfs-stripe"));
	cr_expect_not_null(find_reason(&d, "xfs-v4"));

	/* 512-byte physical blocks still want 4 KiB (flash pages). */
	f.physical_block_size = f.minimum_io_size = 512;
	f.start_bytes = 512 * 2049;
	cr_expect_not(device_partition_aligned(&f));
	/* A larger optimal I/O size counts too. */
	f.start_bytes = 1 << 20;
	f.optimal_io_size = 3 << 20;
	cr_expect_not(device_partition_aligned(&f));
	device_policy_evaluate(&settings(DEVICE_POLICY_OFF, DEVICE_POLICY_OFF), &(DeviceInputs){ .facts = &f }, &d);
	cr_expect(strstr(find_reason(&d, "misaligned-partition")->what, "optimal I/O size 3145728"));
	/* A kernel-reported alignment offset means misaligned, whatever the start. */
	f.optimal_io_size = 0;
	f.alignment_offset = 512;
	cr_expect_not(device_partition_aligned(&f));
}

Test(policy, reasons_are_capped)
{
	DeviceFacts f = nvme_facts();
	NvmeHealth h = { .critical_warning = NVME_CRIT_TEMPERATURE };
	XfsGeometry x = { .sector_size = 512, .sunit_bytes = 1000, .crc = false };
	DeviceDecision d;
	char tiny[16];

	f.transport = DEVICE_TRANSPORT_USB;
	f.usb = f.removable = f.rotational = f.read_only = true;
	f.start_bytes = 7;
	device_policy_evaluate(&settings(DEVICE_POLICY_ENFORCE, DEVICE_POLICY_ENFORCE),
			       &(DeviceInputs){ .facts = &f, .xfs = &x, .health = &h }, &d);
	cr_expect_eq(d.verdict, DEVICE_VERDICT_REFUSE);
	cr_expect_leq(d.n_reasons, DEVICE_REASONS_MAX);
	device_decision_format(&d, DEVICE_VERDICT_WARN, tiny, sizeof(tiny));
	cr_expect_lt(strlen(tiny), sizeof(tiny));
}

Test(policy, settings_from_the_environment)
{
	Settings *c = NULL;
	char *err = NULL;

	cr_assert_eq(unsetenv("NVMEVOL_REQUIRE_NVME"), 0);
	cr_assert_eq(unsetenv("NVMEVOL_HEALTH"), 0);
	cr_assert_eq(unsetenv("NVMEVOL_HEALTH_CACHE_SECONDS"), 0);
	cr_assert_eq(settings_from_env(&c, &err), 0, "%s", err);
	cr_expect_eq(c->require_nvme, DEVICE_POLICY_WARN);
	cr_expect_eq(c->health, DEVICE_POLICY_WARN);
	cr_expect_eq(c->health_cache_seconds, 60);
	c = settings_free(c);

	setenv("NVMEVOL_REQUIRE_NVME", "enforce", 1);
	setenv("NVMEVOL_HEALTH", "off", 1);
	setenv("NVMEVOL_HEALTH_CACHE_SECONDS", "0", 1);
	cr_assert_eq(settings_from_env(&c, &err), 0, "%s", err);
	cr_expect_eq(c->require_nvme, DEVICE_POLICY_ENFORCE);
	cr_expect_eq(c->health, DEVICE_POLICY_OFF);
	cr_expect_eq(c->health_cache_seconds, 0);
	c = settings_free(c);

	setenv("NVMEVOL_REQUIRE_NVME", "yes", 1);
	cr_expect_eq(settings_from_env(&c, &err), -EINVAL);
	cr_expect(err && strstr(err, "NVMEVOL_REQUIRE_NVME='yes' must be off, warn or enforce"), "%s", err);
	free(err);
	err = NULL;
	setenv("NVMEVOL_REQUIRE_NVME", "warn", 1);
	setenv("NVMEVOL_HEALTH", "default", 1);
	cr_expect_eq(settings_from_env(&c, &err), -EINVAL);
	cr_expect(err && strstr(err, "NVMEVOL_HEALTH='default'"), "%s", err);
	free(err);
	err = NULL;
	setenv("NVMEVOL_HEALTH", "warn", 1);
	setenv("NVMEVOL_HEALTH_CACHE_SECONDS", "86401", 1);
	cr_expect_eq(settings_from_env(&c, &err), -EINVAL);
	cr_expect(err && strstr(err, "NVMEVOL_HEALTH_CACHE_SECONDS"), "%s", err);
	free(err);
	unsetenv("NVMEVOL_REQUIRE_NVME");
	unsetenv("NVMEVOL_HEALTH");
	unsetenv("NVMEVOL_HEALTH_CACHE_SECONDS");
}
