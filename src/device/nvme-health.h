/* SPDX-License-Identifier: MIT */
/*
 * NVMe SMART / Health Information (log page 0x02) and the volatile write cache
 * feature, read with the admin passthrough ioctl on the controller's character
 * device (/dev/nvmeN). Parsing and judging are pure functions (unit-tested and
 * fuzzed); only nvme_health_read() touches the kernel. No policy, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NVME_HEALTH_LOG_SIZE 512

/* Critical Warning bits (NVMe base specification, SMART / Health Information log, byte 0). */
enum {
	NVME_CRIT_SPARE = 1 << 0,          /* available spare below its threshold */
	NVME_CRIT_TEMPERATURE = 1 << 1,    /* temperature above or below a threshold */
	NVME_CRIT_RELIABILITY = 1 << 2,    /* NVM subsystem reliability degraded */
	NVME_CRIT_READ_ONLY = 1 << 3,      /* media placed in read-only mode */
	NVME_CRIT_VOLATILE_BACKUP = 1 << 4, /* volatile memory backup device failed */
	NVME_CRIT_PMR_READ_ONLY = 1 << 5,  /* persistent memory region read-only */
};

typedef struct NvmeHealth {
	uint8_t critical_warning;
	uint16_t temperature_kelvin;       /* composite temperature; 0 = not reported */
	uint8_t available_spare;           /* percent */
	uint8_t available_spare_threshold; /* percent */
	uint8_t percentage_used;           /* may exceed 100 */
	uint8_t endurance_group_warning;
	/* 128-bit counters in the log; values above 2^64-1 are clamped and saturated is set. */
	uint64_t data_units_read;          /* thousands of 512-byte units */
	uint64_t data_units_written;
	uint64_t host_read_commands;
	uint64_t host_write_commands;
	uint64_t controller_busy_minutes;
	uint64_t power_cycles;
	uint64_t power_on_hours;
	uint64_t unsafe_shutdowns;
	uint64_t media_errors;             /* media and data integrity errors */
	uint64_t error_log_entries;
	uint32_t warning_temp_minutes;
	uint32_t critical_temp_minutes;
	bool saturated;
	int volatile_write_cache;          /* Get Features 0x06: 1 enabled, 0 disabled, -1 unknown */
} NvmeHealth;

typedef enum NvmeHealthVerdict {
	NVME_HEALTH_OK,
	NVME_HEALTH_WARNING,  /* worth a look: endurance used up, media errors, spare low */
	NVME_HEALTH_CRITICAL, /* the controller sets a critical warning bit */
	_NVME_HEALTH_VERDICT_MAX,
} NvmeHealthVerdict;

/* Decodes a SMART / Health log page; -EINVAL if @len < NVME_HEALTH_LOG_SIZE. */
int nvme_health_parse(const void *buf, size_t len, NvmeHealth *ret);

/*
 * Judges @h. Writes a human list of what is wrong ("reliability degraded;
 * media placed in read-only mode") into @why (may be NULL), "" when OK.
 */
NvmeHealthVerdict nvme_health_judge(const NvmeHealth *h, char *why, size_t why_len);
const char *nvme_health_verdict_to_string(NvmeHealthVerdict v);
/* The name of critical warning bit @bit (0..7), e.g. "reliability degraded". */
const char *nvme_critical_warning_name(unsigned bit);

/* Composite temperature in degrees Celsius; false when not reported. */
bool nvme_health_celsius(const NvmeHealth *h, int *ret);

/*
 * Reads the health log (and the volatile write cache setting) of controller
 * @controller ("nvme0"): opens /dev/<controller>, checks that it is the
 * character device @devnum (from sysfs), and issues the admin commands.
 * Needs CAP_SYS_ADMIN. On failure *reterr_msg says why.
 */
int nvme_health_read(const char *controller, dev_t devnum, NvmeHealth *ret, char **reterr_msg);
