/* SPDX-License-Identifier: MIT */
/*
 * The NVMe suite, run inside the qemu guest by tests/qemu/run-nvme-tests.sh
 * (nvme-guest.sh has partitioned and formatted the disks): two emulated NVMe
 * controllers (healthy; SMART critical warning NVQ_CRIT), a virtio disk and a
 * USB stick. Each fact nvmevol reports is compared with what qemu was told
 * (NVQ_* variables); then the real daemon: placement, the health policy, the
 * trust rule for the USB stick (also under a device-mapper target, label
 * nvd-usb), the cordon the health policy puts on the critical one, NVMEVOL_REQUIRE_NVME, the self-test on NVMe, create / mount /
 * remove. Elsewhere it skips, saying where it runs.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "helpers/testbed.h"

static ClientReply rep;
static Testbed tb;

static const char *env(const char *name)
{
	const char *v = getenv(name);
	cr_assert(v && *v, "%s is not set (run by tests/qemu/run-nvme-tests.sh)", name);
	return v;
}

static void require_guest(void)
{
	if (!getenv("NVMEVOL_QEMU_GUEST") || access("/dev/nvme0n1", F_OK) != 0)
		cr_skip_test("runs in the qemu guest with emulated NVMe: tests/qemu/run-nvme-tests.sh (qemu stage)");
}

static const char *s(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static long long i(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

TestSuite(nvme_facts, .init = require_guest, .timeout = 120);

Test(nvme_facts, every_fact_against_what_qemu_was_told)
{
	json_t *a = testbed_devices_json((const char *const[]){ "NVMEVOL_LABEL_PREFIX=nvq", NULL }, NULL), *e, *f, *h;

	cr_expect_eq(json_array_size(a), 5, "%s", json_dumps(a, 0));

	/* nvme0: serial, model, firmware (qemu's version), 512-byte LBAs, not rotational, partition offsets. */
	e = testbed_devices_entry(a, "/dev/nvme0n1p1");
	f = json_object_get(e, "facts");
	cr_expect_str_eq(s(f, "transport"), "nvme");
	cr_expect_str_eq(s(f, "serial"), env("NVQ_SERIAL0"));
	cr_expect_str_eq(s(f, "model"), "QEMU NVMe Ctrl");
	cr_expect_str_eq(s(f, "firmware"), env("NVQ_FW"));
	cr_expect_str_eq(s(f, "nvme_controller"), "nvme0");
	cr_expect_eq(i(f, "logical_block_size"), 512);
	cr_expect(json_is_false(json_object_get(f, "rotational")));
	cr_expect(json_is_false(json_object_get(f, "removable")));
	cr_expect(json_is_false(json_object_get(f, "usb")));
	cr_expect(json_is_true(json_object_get(json_object_get(f, "discard"), "supported")));
	cr_expect_eq(i(json_object_get(f, "partition"), "start_bytes"), 2048 * 512);
	cr_expect(json_is_true(json_object_get(json_object_get(f, "partition"), "aligned")));
	h = json_object_get(e, "health");
	cr_expect_str_eq(s(h, "verdict"), "ok");
	cr_expect_eq(i(h, "critical_warning"), 0);
	cr_expect_str_eq(s(h, "volatile_write_cache"), "enabled", "write-cache=on");
	cr_expect(json_is_integer(json_object_get(h, "temperature_celsius")));
	cr_expect_str_eq(s(e, "use"), "yes");

	e = testbed_devices_entry(a, "/dev/nvme0n1p2");
	f = json_object_get(e, "facts");
	cr_expect_eq(i(json_object_get(f, "partition"), "start_bytes"), 657409LL * 512);
	cr_expect(json_is_false(json_object_get(json_object_get(f, "partition"), "aligned")));
	cr_expect(testbed_devices_has_reason(e, "misaligned-partition", NULL));
	cr_expect_str_eq(s(e, "use"), "yes, warn");

	/* nvme1: the critical warning qemu was given, write-cache=off. */
	e = testbed_devices_entry(a, "/dev/nvme1n1");
	h = json_object_get(e, "health");
	cr_expect_str_eq(s(json_object_get(e, "facts"), "serial"), env("NVQ_SERIAL1"));
	cr_expect_eq(i(h, "critical_warning"), atoi(env("NVQ_CRIT")));
	cr_expect_str_eq(s(h, "verdict"), "critical");
	cr_expect_str_eq(json_string_value(json_array_get(json_object_get(h, "critical_warnings"), 0)),
			 "reliability degraded");
	cr_expect_str_eq(s(h, "volatile_write_cache"), "disabled", "write-cache=off");
	cr_expect(testbed_devices_has_reason(e, "health-critical", NULL));
	cr_expect_str_eq(s(e, "use"), "yes, warn", "NVMEVOL_HEALTH=warn by default");

	/* virtio: the topology qemu was told, write-cache=off, rotational. */
	e = testbed_devices_entry(a, "/dev/vda");
	f = json_object_get(e, "facts");
	cr_expect_str_eq(s(f, "transport"), "virtio");
	cr_expect_str_eq(s(f, "serial"), env("NVQ_VIRT_SERIAL"));
	cr_expect_eq(i(f, "physical_block_size"), 4096);
	cr_expect_eq(i(f, "minimum_io_size"), 8192);
	cr_expect_eq(i(f, "optimal_io_size"), 65536);
	cr_expect_str_eq(s(f, "write_cache"), "write through");
	cr_expect(json_is_true(json_object_get(f, "rotational")));
	cr_expect_null(json_object_get(e, "health"));
	cr_expect(testbed_devices_has_reason(e, "not-nvme", NULL));

	/* The USB stick: USB transport, removable, its serial, refused until listed. */
	e = testbed_devices_entry(a, "/dev/sda");
	f = json_object_get(e, "facts");
	cr_expect_str_eq(s(f, "transport"), "usb");
	cr_expect(json_is_true(json_object_get(f, "usb")));
	cr_expect(json_is_true(json_object_get(f, "removable")));
	cr_expect_str_eq(s(f, "serial"), env("NVQ_USB_SERIAL"));
	cr_expect_str_eq(s(e, "use"), "no");
	cr_expect(testbed_devices_has_reason(e, "untrusted-removable", NULL));
	json_decref(a);

	a = testbed_devices_json((const char *const[]){ "NVMEVOL_LABEL_PREFIX=nvq", "NVMEVOL_DEVICES=LABEL=nvq-usb", NULL },
			 (const char *const[]){ "--health", "enforce", "--require-nvme", "enforce", NULL });
	cr_expect_str_eq(s(testbed_devices_entry(a, "/dev/sda"), "use"), "no", "listed, but not NVMe under enforce");
	cr_expect_not(testbed_devices_has_reason(testbed_devices_entry(a, "/dev/sda"), "untrusted-removable", NULL));
	cr_expect_str_eq(s(testbed_devices_entry(a, "/dev/nvme1n1"), "use"), "no", "critical under NVMEVOL_HEALTH=enforce");
	cr_expect_str_eq(s(testbed_devices_entry(a, "/dev/nvme0n1p1"), "use"), "yes");
	cr_expect_str_eq(s(testbed_devices_entry(a, "/dev/vda"), "use"), "no");
	json_decref(a);
}

/*
 * The dm-linear target over the second half of the USB stick (nvme-guest.sh
 * made its XFS, label nvd-usb), only while a test needs it: it holds the stick.
 */
static void dm_up(void)
{
	require_guest();
	setenv("DM_DISABLE_UDEV", "1", 1); /* no udev in the guest: libdevmapper makes the nodes */
	cr_assert_eq(RUN("/usr/sbin/dmsetup", "create", "nvd-usb", "--table", env("NVQ_DM_TABLE")), 0,
		     "dmsetup create failed");
	for (int k = 0; k < 50 && access("/dev/dm-0", F_OK) != 0; k++)
		usleep(20000);
	cr_assert_eq(access("/dev/dm-0", F_OK), 0, "no /dev/dm-0");
}

static void unmount_partitions(void);

static void dm_down(void)
{
	/* The daemon's mount of dm-0 would keep the target (and the stick) busy for the tests after this one. */
	if (tb.pid > 0)
		testbed_stop(&tb, SIGTERM);
	if (tb.parts_root[0])
		unmount_partitions();
	for (int k = 0; k < 50 && RUN("/usr/sbin/dmsetup", "remove", "nvd-usb") != 0; k++)
		usleep(100000);
}

/* A USB stick under device-mapper (as LVM puts it): dm-0 has no usb parent and removable=0, its leaf has both. */
Test(nvme_facts, a_usb_stick_under_device_mapper_is_still_usb, .init = dm_up, .fini = dm_down)
{
	const json_t *r;
	json_t *a, *e, *f;
	size_t k;
	bool said = false;

	a = testbed_devices_json((const char *const[]){ "NVMEVOL_LABEL_PREFIX=nvd", NULL }, NULL);
	cr_assert_eq(json_array_size(a), 1, "%s", json_dumps(a, 0));
	e = testbed_devices_entry(a, "/dev/dm-0");
	f = json_object_get(e, "facts");
	cr_expect_str_eq(s(f, "transport"), "dm");
	cr_expect_str_eq(s(f, "lower_devices"), "sda");
	cr_expect(json_is_true(json_object_get(f, "usb")), "%s", json_dumps(f, 0));
	cr_expect(json_is_true(json_object_get(f, "removable")), "%s", json_dumps(f, 0));
	cr_expect_str_eq(s(e, "use"), "no");
	json_array_foreach(json_object_get(json_object_get(e, "policy"), "reasons"), k, r)
		said = said || (strcmp(s((json_t *)r, "code"), "untrusted-removable") == 0 &&
				strstr(s((json_t *)r, "what"), "removable USB device (sda, under dm-0)"));
	cr_expect(said, "%s", json_dumps(e, 0));
	json_decref(a);

	/* Listed by the admin: the trust rule lets it in. */
	a = testbed_devices_json((const char *const[]){ "NVMEVOL_LABEL_PREFIX=nvd", "NVMEVOL_DEVICES=LABEL=nvd-usb", NULL },
				 NULL);
	cr_expect_not(testbed_devices_has_reason(testbed_devices_entry(a, "/dev/dm-0"), "untrusted-removable", NULL));
	json_decref(a);
}

/* ---- the daemon on these disks ---- */

/* A stop leaves the partition mounts (containers may use them); a reboot would not. */
static void unmount_partitions(void)
{
	char line[4096], target[512];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d %*d %*s %*s %511s", target) == 1 &&
		    strncmp(target, tb.parts_root, strlen(tb.parts_root)) == 0)
			(void)umount2(target, MNT_DETACH);
	if (f)
		fclose(f);
}

static void start(const char *const *extra)
{
	const char *envs[16] = { "NVMEVOL_SELFTEST=warn" };
	size_t n = 1;

	for (const char *const *e = extra; e && *e; e++)
		envs[n++] = *e;
	envs[n] = NULL;
	unmount_partitions();
	testbed_start_or_fail(&tb, envs);
}

static void daemon_setup(void)
{
	require_guest();
	cr_assert_eq(testbed_init(&tb, 0), 0);
	snprintf(tb.prefix, sizeof(tb.prefix), "nvq");
}

static void daemon_teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(nvme_daemon, .init = daemon_setup, .fini = daemon_teardown, .timeout = 180);

static json_t *status(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	return json_object_get(json_object_get(rep.json, "Volume"), "Status");
}

static char out[65536], err[8192];
#define ADMIN(...) testbed_admin(&tb, (const char *const[]){ __VA_ARGS__, NULL }, out, sizeof(out), err, sizeof(err))

/* The Status object of the partition labelled @label in `nvmevol status --json` (the caller's reference). */
static json_t *partition_status(const char *label)
{
	json_t *j, *p, *found = NULL;
	size_t i;

	cr_assert_eq(ADMIN("status", "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	json_array_foreach(json_object_get(j, "partitions"), i, p)
		if (!strcmp(s(p, "label") ? s(p, "label") : "", label))
			found = json_incref(p);
	json_decref(j);
	cr_assert_not_null(found, "no partition %s: %s", label, out);
	return found;
}

static bool mounted(const char *dev)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, dev))
			found = true;
	if (f)
		fclose(f);
	return found;
}

Test(nvme_daemon, placement_health_trust_and_the_selftest)
{
	json_t *st, *p;
	char path[600];
	int fd;

	start(NULL);
	/* The stick is refused at start: never mounted. */
	cr_expect_not(mounted("/dev/sda "), "the USB stick was mounted");

	/* No partition named: a healthy NVMe partition, not the critical one, not virtio. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"db\"}"), 0, "%s", client_err(&rep));
	p = json_object_get(status("db"), "partition");
	cr_expect(strncmp(s(json_object_get(p, "device"), "path"), "/dev/nvme0n1p", 13) == 0, "placed on %s", rep.body);
	cr_expect_str_eq(s(json_object_get(p, "device"), "transport"), "nvme");
	cr_expect_str_eq(s(json_object_get(p, "health"), "verdict"), "ok");
	cr_expect_str_eq(s(json_object_get(p, "device"), "serial"), env("NVQ_SERIAL0"));

	/* Mount: the self-test measures the NVMe namespace; data lands there. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"db\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/data", s(rep.json, "Mountpoint"));
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	cr_expect(fd >= 0 && write(fd, "nvme", 4) == 4 && fsync(fd) == 0);
	if (fd >= 0)
		close(fd);
	st = status("db");
	cr_expect_gt(json_real_value(json_object_get(json_object_get(st, "selftest"), "seq_write_mbps")), 0, "%s", rep.body);
	cr_expect(json_is_integer(json_object_get(json_object_get(json_object_get(st, "partition"), "health"), "age_seconds")));
	cr_expect_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"db\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_expect_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"db\"}"), 0, "%s", client_err(&rep));

	/*
	 * The critical controller: the health policy (warn, the default) cordoned its partition at start: no new
	 * volume there, not even one that names it, until an admin uncordons it (issue 20).
	 */
	p = partition_status("nvq-crit");
	cr_expect(json_is_true(json_object_get(p, "cordoned")), "not cordoned: %s", out);
	cr_expect_str_eq(s(json_object_get(p, "cordon"), "by") ?: "(none)", "health");
	cr_expect(s(json_object_get(p, "cordon"), "reason") &&
			  strstr(s(json_object_get(p, "cordon"), "reason"), "reliability degraded"),
		  "%s", out);
	json_decref(p);
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"lenient\",\"Opts\":{\"partition\":\"nvq-crit\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "is cordoned (by health: NVMe critical warning") &&
			  strstr(client_err(&rep), "nvmevol partition uncordon"),
		  "%s", client_err(&rep));
	cr_assert_eq(ADMIN("partition", "uncordon", "nvq-crit"), 0, "%s", err);
	/* The uncordon holds: the next readings show the same warning, which was cordoned for already. */
	p = partition_status("nvq-crit");
	cr_expect(json_is_false(json_object_get(p, "cordoned")), "cordoned again: %s", out);
	json_decref(p);

	/* Uncordoned: refused for a volume that enforces health, used (with a warning) otherwise. */
	cr_expect_neq(tb_call(&tb, "Create", &rep,
			      "{\"Name\":\"strict\",\"Opts\":{\"partition\":\"nvq-crit\",\"health\":\"enforce\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "reliability degraded") &&
			  strstr(client_err(&rep), "(volume option health=enforce)"),
		  "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"lenient\",\"Opts\":{\"partition\":\"nvq-crit\"}}"), 0, "%s",
		     client_err(&rep));
	cr_expect_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"lenient\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	p = json_object_get(status("lenient"), "partition");
	cr_expect_str_eq(s(json_object_get(p, "health"), "verdict"), "critical");
	cr_expect_str_eq(s(json_object_get(p, "policy"), "verdict"), "warn");
	cr_expect_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"lenient\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));

	/* The USB stick, by name: refused, with the way to allow it. */
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"stick\",\"Opts\":{\"partition\":\"nvq-usb\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "USB") && strstr(client_err(&rep), "NVMEVOL_DEVICES="), "%s",
		  client_err(&rep));
	testbed_stop(&tb, SIGTERM);

	/* NVMEVOL_HEALTH=enforce: the existing volume on the critical controller no longer mounts. */
	start((const char *const[]){ "NVMEVOL_HEALTH=enforce", NULL });
	cr_expect_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"lenient\",\"ID\":\"c3\"}"), 0);
	cr_expect(strstr(client_err(&rep), "(NVMEVOL_HEALTH=enforce)"), "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);

	/* Listed: the stick joins. */
	start((const char *const[]){ "NVMEVOL_DEVICES=LABEL=nvq-usb", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"stick\",\"Opts\":{\"partition\":\"nvq-usb\"}}"), 0, "%s",
		     client_err(&rep));
	p = json_object_get(status("stick"), "partition");
	cr_expect(json_is_true(json_object_get(json_object_get(p, "device"), "usb")));
	cr_expect_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"stick\"}"), 0, "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);

	/* NVMEVOL_REQUIRE_NVME=enforce: the virtio disk is refused and never mounted. */
	start((const char *const[]){ "NVMEVOL_REQUIRE_NVME=enforce", NULL });
	cr_expect_not(mounted("/dev/vda "), "the virtio disk was mounted under enforce");
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"vv\",\"Opts\":{\"partition\":\"nvq-virt\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "transport of vda is virtio, not nvme (NVMEVOL_REQUIRE_NVME=enforce)") &&
			  strstr(client_err(&rep), "rotational"),
		  "%s", client_err(&rep));
	cr_expect_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"lenient\"}"), 0, "%s", client_err(&rep));
}

/* The daemon refuses the stick under device-mapper as it refuses the bare stick: never mounted, the way to allow it said. */
Test(nvme_daemon, a_usb_stick_under_device_mapper_is_refused, .init = dm_up, .fini = dm_down)
{
	snprintf(tb.prefix, sizeof(tb.prefix), "nvd");
	start(NULL);
	cr_expect_not(mounted("/dev/dm-0 "), "the stick under dm-0 was mounted");
	cr_expect_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dmstick\",\"Opts\":{\"partition\":\"nvd-usb\"}}"), 0);
	cr_expect(strstr(client_err(&rep), "USB device (sda, under dm-0)") && strstr(client_err(&rep), "NVMEVOL_DEVICES="),
		  "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);

	start((const char *const[]){ "NVMEVOL_DEVICES=LABEL=nvd-usb", NULL });
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"dmstick\",\"Opts\":{\"partition\":\"nvd-usb\"}}"), 0,
		     "%s", client_err(&rep));
	cr_expect(json_is_true(json_object_get(json_object_get(json_object_get(status("dmstick"), "partition"), "device"),
					       "usb")));
	cr_expect_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"dmstick\"}"), 0, "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);
}
