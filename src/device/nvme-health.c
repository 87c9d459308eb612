/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "device/nvme-health.h"
#include "util/errmsg.h"
#include "util/macro.h"

#define NVME_ADMIN_GET_LOG_PAGE 0x02
#define NVME_ADMIN_GET_FEATURES 0x0a
#define NVME_LOG_SMART 0x02
#define NVME_FEAT_VOLATILE_WC 0x06
#define NVME_NSID_ALL 0xffffffffu
#define NVME_ADMIN_TIMEOUT_MS 5000 /* a wedged controller must not hold a Mount for the kernel's default 60 s */

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A 128-bit little-endian counter, clamped to 64 bits. */
static uint64_t le128(const uint8_t *p, bool *saturated)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	for (int i = 8; i < 16; i++)
		if (p[i]) {
			*saturated = true;
			return UINT64_MAX;
		}
	return v;
}

int nvme_health_parse(const void *buf, size_t len, NvmeHealth *ret)
{
	const uint8_t *b = buf;
	NvmeHealth h = { .volatile_write_cache = -1 };

	if (!buf || len < NVME_HEALTH_LOG_SIZE)
		return -EINVAL;
	h.critical_warning = b[0];
	h.temperature_kelvin = le16(b + 1);
	h.available_spare = b[3];
	h.available_spare_threshold = b[4];
	h.percentage_used = b[5];
	h.endurance_group_warning = b[6];
	h.data_units_read = le128(b + 32, &h.saturated);
	h.data_units_written = le128(b + 48, &h.saturated);
	h.host_read_commands = le128(b + 64, &h.saturated);
	h.host_write_commands = le128(b + 80, &h.saturated);
	h.controller_busy_minutes = le128(b + 96, &h.saturated);
	h.power_cycles = le128(b + 112, &h.saturated);
	h.power_on_hours = le128(b + 128, &h.saturated);
	h.unsafe_shutdowns = le128(b + 144, &h.saturated);
	h.media_errors = le128(b + 160, &h.saturated);
	h.error_log_entries = le128(b + 176, &h.saturated);
	h.warning_temp_minutes = le32(b + 192);
	h.critical_temp_minutes = le32(b + 196);
	*ret = h;
	return 0;
}

static const char *const crit_names[8] = {
	"available spare below threshold",
	"temperature out of range",
	"reliability degraded",
	"media placed in read-only mode",
	"volatile memory backup failed",
	"persistent memory region read-only",
	"reserved bit 6",
	"reserved bit 7",
};

const char *nvme_critical_warning_name(unsigned bit)
{
	return bit < ELEMENTSOF(crit_names) ? crit_names[bit] : NULL;
}

const char *nvme_health_verdict_to_string(NvmeHealthVerdict v)
{
	static const char *const names[_NVME_HEALTH_VERDICT_MAX] = {
		[NVME_HEALTH_OK] = "ok",
		[NVME_HEALTH_WARNING] = "warning",
		[NVME_HEALTH_CRITICAL] = "critical",
	};
	return v >= 0 && v < _NVME_HEALTH_VERDICT_MAX ? names[v] : NULL;
}

bool nvme_health_celsius(const NvmeHealth *h, int *ret)
{
	if (h->temperature_kelvin == 0)
		return false;
	*ret = (int)h->temperature_kelvin - 273;
	return true;
}

/* Appends "; text" (or "text") to @why, truncating safely. */
static void add_why(char *why, size_t why_len, const char *fmt, ...) _printf_(3, 4);
static void add_why(char *why, size_t why_len, const char *fmt, ...)
{
	size_t n;
	va_list ap;

	if (!why || why_len == 0)
		return;
	n = strnlen(why, why_len);
	if (n > 0 && n + 2 < why_len) {
		memcpy(why + n, "; ", 3);
		n += 2;
	}
	if (n + 1 >= why_len)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(why + n, why_len - n, fmt, ap);
	va_end(ap);
}

NvmeHealthVerdict nvme_health_judge(const NvmeHealth *h, char *why, size_t why_len)
{
	NvmeHealthVerdict v = NVME_HEALTH_OK;

	if (why && why_len)
		why[0] = '\0';
	for (unsigned bit = 0; bit < 8; bit++)
		if (h->critical_warning & (1u << bit)) {
			add_why(why, why_len, "critical warning: %s", crit_names[bit]);
			v = NVME_HEALTH_CRITICAL;
		}
	/* The controller sets bit 0 itself; a threshold of 0 means none is defined. */
	if (!(h->critical_warning & NVME_CRIT_SPARE) && h->available_spare_threshold > 0 &&
	    h->available_spare < h->available_spare_threshold) {
		add_why(why, why_len, "available spare %u%% is below its threshold %u%%", h->available_spare,
			h->available_spare_threshold);
		if (v < NVME_HEALTH_WARNING)
			v = NVME_HEALTH_WARNING;
	}
	if (h->percentage_used >= 100) {
		add_why(why, why_len, "rated endurance used up (percentage used %u%%)", h->percentage_used);
		if (v < NVME_HEALTH_WARNING)
			v = NVME_HEALTH_WARNING;
	}
	if (h->media_errors > 0) {
		add_why(why, why_len, "%llu media and data integrity error(s)", (unsigned long long)h->media_errors);
		if (v < NVME_HEALTH_WARNING)
			v = NVME_HEALTH_WARNING;
	}
	return v;
}

static int admin(int fd, struct nvme_admin_cmd *c)
{
	int r = ioctl(fd, NVME_IOCTL_ADMIN_CMD, c);

	if (r < 0)
		return negative_errno();
	return r; /* > 0: the NVMe status code of a failed command */
}

/* NVMEVOL_TEST_HEALTH_DELAY_MS=N (test builds): each reading takes N ms longer, as on a slow or resetting controller. */
static void test_hook_delay(void)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_HEALTH_DELAY_MS");

	if (e)
		usleep((useconds_t)atoi(e) * 1000);
#endif
}

int nvme_health_read(const char *controller, dev_t devnum, NvmeHealth *ret, char **reterr_msg)
{
	_cleanup_close_ int fd = -EBADF;
	uint8_t log[NVME_HEALTH_LOG_SIZE] = { 0 };
	char path[64];
	struct nvme_admin_cmd c;
	struct stat st;
	NvmeHealth h;
	int r;

	test_hook_delay();
	/* "nvme" + digits only: the name becomes a path. */
	if (!controller || strncmp(controller, "nvme", 4) != 0 || !controller[4] ||
	    strspn(controller + 4, "0123456789") != strlen(controller + 4) || strlen(controller) > 20)
		return errmsg_set(reterr_msg, -EINVAL, "'%s' is not an NVMe controller name", controller ? controller : "");
	snprintf(path, sizeof(path), "/dev/%s", controller);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		r = negative_errno();
		return errmsg_set(reterr_msg, r, "cannot open the NVMe controller %s: %m", path);
	}
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != devnum)
		return errmsg_set(reterr_msg, -ENODEV, "%s is not the controller's character device %u:%u", path,
				  major(devnum), minor(devnum));

	c = (struct nvme_admin_cmd){
		.opcode = NVME_ADMIN_GET_LOG_PAGE,
		.nsid = NVME_NSID_ALL,
		.addr = (uint64_t)(uintptr_t)log,
		.data_len = sizeof(log),
		/* NUMDL (dwords - 1) in bits 31:16, the log id in bits 7:0. */
		.cdw10 = (uint32_t)((sizeof(log) / 4 - 1) << 16) | NVME_LOG_SMART,
		.timeout_ms = NVME_ADMIN_TIMEOUT_MS,
	};
	r = admin(fd, &c);
	if (r < 0) {
		errno = -r;
		return errmsg_set(reterr_msg, r, "reading the SMART / Health log of %s failed: %m", path);
	}
	if (r > 0)
		return errmsg_set(reterr_msg, -EIO, "%s rejected Get Log Page 0x02 (NVMe status 0x%x)", path, (unsigned)r);
	r = nvme_health_parse(log, sizeof(log), &h);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot decode the health log of %s", path);

	/* Optional: a controller without a volatile write cache rejects the feature. */
	c = (struct nvme_admin_cmd){
		.opcode = NVME_ADMIN_GET_FEATURES,
		.cdw10 = NVME_FEAT_VOLATILE_WC, /* SEL 0: the current value */
		.timeout_ms = NVME_ADMIN_TIMEOUT_MS,
	};
	if (admin(fd, &c) == 0)
		h.volatile_write_cache = c.result & 1;
	*ret = h;
	return 0;
}
