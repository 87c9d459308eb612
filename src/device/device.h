/* SPDX-License-Identifier: MIT */
/*
 * Facts about the block device under a partition, read from sysfs
 * (/sys/dev/block/MAJ:MIN and its whole disk): transport, identity, queue
 * limits, partition offset, removable and USB. No policy, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum DeviceTransport {
	DEVICE_TRANSPORT_UNKNOWN,
	DEVICE_TRANSPORT_NVME,
	DEVICE_TRANSPORT_SATA,
	DEVICE_TRANSPORT_SCSI,
	DEVICE_TRANSPORT_USB,
	DEVICE_TRANSPORT_VIRTIO,
	DEVICE_TRANSPORT_XEN,
	DEVICE_TRANSPORT_MMC,
	DEVICE_TRANSPORT_LOOP,
	DEVICE_TRANSPORT_DM,
	DEVICE_TRANSPORT_MD,
	DEVICE_TRANSPORT_NBD,
	DEVICE_TRANSPORT_RAM,
	_DEVICE_TRANSPORT_MAX,
} DeviceTransport;

#define DEVICE_STR_MAX 80

typedef struct DeviceFacts {
	char devnode[256];            /* the /dev path the facts were read for */
	dev_t devnum;
	char name[64];                /* kernel name: nvme0n1p1, sda2, loop3 */
	char disk[64];                /* its whole disk: nvme0n1, sda, loop3 */
	char syspath[512];            /* resolved /sys/devices/... path of the whole disk */
	bool is_partition;
	unsigned partition_number;
	uint64_t start_bytes;         /* partition start on the disk (0 for a whole disk) */
	uint64_t size_bytes;
	DeviceTransport transport;
	bool usb;                     /* a USB device sits in the device path (of the disk or of a leaf) */
	bool removable;               /* the disk's or a leaf's removable flag (or the test hook) */
	bool opaque;                  /* an nbd device (or one on it): what backs it cannot be seen here */
	char leaves[128];             /* the devices a stacked device is built on ("loop3, sda"), "" for a plain disk */
	char untrusted_leaf[64];      /* the first of them that is USB, removable or opaque, "" if none */
	bool rotational;
	bool read_only;
	char vendor[DEVICE_STR_MAX];
	char model[DEVICE_STR_MAX];
	char serial[DEVICE_STR_MAX];
	char firmware[DEVICE_STR_MAX];
	uint32_t logical_block_size;
	uint32_t physical_block_size;
	uint32_t minimum_io_size;
	uint32_t optimal_io_size;     /* 0 = the device states none */
	uint32_t alignment_offset;    /* the kernel's view of the partition's misalignment, bytes */
	uint64_t discard_granularity; /* 0 with discard_max_bytes 0 = no discard */
	uint64_t discard_max_bytes;
	char write_cache[16];         /* "write back", "write through" */
	char scheduler[32];           /* the active one, e.g. "none", "mq-deadline" */
	int numa_node;                /* -1 = none or unknown */
	char nvme_controller[32];     /* "nvme0" for an NVMe namespace, else "" */
	dev_t nvme_controller_devnum; /* its character device */
	char loop_backing_file[256];  /* for loop devices */
} DeviceFacts;

const char *device_transport_to_string(DeviceTransport t);

/*
 * Classifies a whole disk by its resolved sysfs path (and kernel name), e.g.
 * "/sys/devices/pci0000:00/0000:00:03.0/nvme/nvme0/nvme0n1" is NVMe and
 * ".../usb2/2-1/2-1:1.0/host0/..." is USB. Pure. *ret_usb is set when a USB
 * device sits anywhere in the path (also under another transport's name).
 */
DeviceTransport device_transport_classify(const char *syspath, const char *disk, bool *ret_usb);

#define DEVICE_LEAVES_MAX 16

/* A disk under a stacked device (device-mapper, md, loop), down to the bottom: what the device rule looks at. */
typedef struct DeviceLeaf {
	char disk[64];
	DeviceTransport transport;
	bool usb, removable, opaque;
} DeviceLeaf;

/*
 * Every disk under the whole disk at resolved sysfs path @diskpath, depth
 * first: its slaves/ recursively (a slave that is a partition counts as its
 * disk), and for a loop device the block device that holds its backing file,
 * found through <@sys>/dev/block/MAJ:MIN. A plain disk has none. @sys is
 * "/sys" (another root for tests). At most @max, 8 levels deep.
 */
void device_leaves_read(const char *sys, const char *diskpath, DeviceLeaf *ret, size_t max, size_t *ret_n);

/* The active scheduler in a queue/scheduler line ("[mq-deadline] none" -> "mq-deadline"). Pure. */
void device_parse_scheduler(const char *line, char *buf, size_t len);

/* Reads the facts of the block device @devnode. On failure *reterr_msg says why. */
int device_facts_read(const char *devnode, DeviceFacts *ret, char **reterr_msg);
