/* SPDX-License-Identifier: MIT */
/*
 * A volume's bind: its directory on the partition mounted at
 * <PropagatedMount>/<name> with noatime,nodiratime (and nosuid, nodev,
 * read-only as asked), set before the mount is attached, and checked in
 * mountinfo before it is served. No volume state, no locking: the caller
 * holds the volume's op_lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "pool/mount.h"
#include "volume/volume-options.h"
#include "pool/pool.h"

typedef struct Binds Binds;

int binds_open(const char *propagated_mount, Binds **ret, char **reterr_msg);
Binds *binds_free(Binds *b);

/* <PropagatedMount>/<name> */
void bind_path(Binds *b, const char *name, char *buf, size_t len);
/* The root of volume @name's bind as mountinfo shows it, in any mount namespace: "/nvmevol/volumes/<name>". */
void bind_root(const char *name, char *buf, size_t len);
/*
 * MOUNT_BIND_* flags for a volume: ro on a read-only (not adopted) partition;
 * nosuid and nodev unless its options allow them, the partition is adopted
 * (read-write) and this host granted them (!@grants_unconfirmed, volume.h).
 */
unsigned bind_flags(const VolumeOptions *o, bool read_only, bool grants_unconfirmed);

/* Binds volume @name of @fs; on success *ret_options holds the vfs options read back from mountinfo. */
int bind_mount(Binds *b, const char *name, PartitionFs *fs, unsigned flags, char **ret_options, char **reterr_msg);
/*
 * Binds the directory @src_fd (O_PATH is enough) at <PropagatedMount>/@name,
 * a name that is not a volume's (start-up takes such a mount away as a
 * stray), and checks that the mountpoint then shows @src_fd's inode. For a
 * snapshot's export, read by the admin command on the host.
 */
int bind_mount_dir(Binds *b, const char *name, int src_fd, unsigned flags, char **reterr_msg);
/* Takes every mount at the volume's mountpoint away, then the mountpoint directory. */
int bind_unmount(Binds *b, const char *name);
/* 0 if mountinfo shows our bind of @name (device @dev, its directory, @flags); else why. */
int bind_verify(Binds *b, const char *name, dev_t dev, unsigned flags, char **ret_options, char **reterr_why);
bool bind_entry_matches(const MountEntry *e, const char *name, dev_t dev, unsigned flags);
/* The same without the flags: @e is volume @name's directory from device @dev (flags unknown). */
bool bind_entry_is_volume(const MountEntry *e, const char *name, dev_t dev);

/* Every mount strictly below the propagated mount, from one read of mountinfo. */
int bind_list_all(Binds *b, MountEntry **ret, size_t *ret_n);
/* Removes empty mountpoint directories for which @keep returns false. */
void bind_clean_mountpoints(Binds *b, bool (*keep)(const char *name, void *userdata), void *userdata);
void bind_remove_mountpoint(Binds *b, const char *name);
