/* SPDX-License-Identifier: MIT */
/* The names both sides of the admin protocol share (admin.c serves them, admin-client.c calls them). */
#pragma once

/* Next to the plugin socket: on the host, in Docker's runtime directory of the plugin. */
#define ADMIN_SOCKET_NAME "nvmevol-admin.sock"
/* What the client says it is (command, user, pid); logged next to the kernel's peer credentials. */
#define ADMIN_CLIENT_HEADER "X-Nvmevol-Client"
/* Raised when the protocol changes in a way a client must know. */
#define ADMIN_API_VERSION 1
/* An endpoint a plugin does not know answers 404 with an Err starting with this. */
#define ADMIN_UNKNOWN_ENDPOINT "unknown admin endpoint"

#define ADMIN_PATH_STATUS "/Admin.Status"
#define ADMIN_PATH_VOLUME_SHOW "/Admin.VolumeShow"
#define ADMIN_PATH_VOLUME_RESIZE "/Admin.VolumeResize"
#define ADMIN_PATH_VOLUME_SET "/Admin.VolumeSet"
#define ADMIN_PATH_VOLUME_FORGET "/Admin.VolumeForget"
#define ADMIN_PATH_VOLUME_RELEASE "/Admin.VolumeRelease"
#define ADMIN_PATH_PARTITION_ADOPT "/Admin.PartitionAdopt"
#define ADMIN_PATH_STATE_IMPORT "/Admin.StateImport"
#define ADMIN_PATH_VOLUME_SNAPSHOT "/Admin.VolumeSnapshot"
#define ADMIN_PATH_VOLUME_SNAPSHOTS "/Admin.VolumeSnapshots"
#define ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE "/Admin.VolumeSnapshotRemove"
#define ADMIN_PATH_VOLUME_ROLLBACK "/Admin.VolumeRollback"
#define ADMIN_PATH_VOLUME_EXPORT_OPEN "/Admin.VolumeExportOpen"
#define ADMIN_PATH_VOLUME_EXPORT_CLOSE "/Admin.VolumeExportClose"
#define ADMIN_PATH_VOLUME_IMPORT_OPEN "/Admin.VolumeImportOpen"
#define ADMIN_PATH_VOLUME_IMPORT_COMMIT "/Admin.VolumeImportCommit"
#define ADMIN_PATH_VOLUME_IMPORT_ABORT "/Admin.VolumeImportAbort"
#define ADMIN_PATH_VOLUME_RECEIVE_OPEN "/Admin.VolumeReceiveOpen"
#define ADMIN_PATH_VOLUME_RECEIVE_COMMIT "/Admin.VolumeReceiveCommit"
#define ADMIN_PATH_VOLUME_RECEIVE_ABORT "/Admin.VolumeReceiveAbort"
#define ADMIN_PATH_PARTITION_CORDON "/Admin.PartitionCordon"
#define ADMIN_PATH_PARTITION_UNCORDON "/Admin.PartitionUncordon"
#define ADMIN_PATH_PARTITION_EVACUATE "/Admin.PartitionEvacuate"
#define ADMIN_PATH_VOLUME_FENCE "/Admin.VolumeFence"
#define ADMIN_PATH_VOLUME_UNFENCE "/Admin.VolumeUnfence"
/* A fence's host: what a move names the other node by (a host name, an ssh target). */
#define ADMIN_FENCE_HOST_MAX 253
/* An export's token: 16 lowercase hex digits. */
#define ADMIN_EXPORT_TOKEN_LEN 16
