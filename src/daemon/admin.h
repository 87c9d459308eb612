/* SPDX-License-Identifier: MIT */
/*
 * The admin protocol, server side: JSON over HTTP on a second, root-only unix
 * socket next to the plugin socket (Docker never calls it), served by http.c.
 * Every endpoint is a POST of a JSON object; success is HTTP 200 with a JSON
 * result, failure an HTTP error status with {"Err": "..."} that says what to
 * do. Every change is logged with who asked (the kernel's SO_PEERCRED of the
 * connection, plus what the client says it is) and what was done.
 *
 *   /Admin.Status          {}                                  version, settings, partitions, volumes
 *   /Admin.VolumeShow      {"Name"}                            Get's object + "Admin" details
 *   /Admin.VolumeResize    {"Name","Changes":{"size","inodes"}}
 *   /Admin.VolumeSet       {"Name","Changes":{"selftest","min_write_mbps",...}}
 *   /Admin.VolumeForget    {"Name"}
 *   /Admin.VolumeRelease   {"Name","Expect":{mount ID: count}}
 *   /Admin.PartitionAdopt  {"Partition": label or UUID}
 *   /Admin.StateImport     {"Entries":[{"Name","Record"}...]}  index entries of an older state directory
 *   /Admin.VolumeSnapshot  {"Name","Snapshot"?,"ByMove"?}      take one (named by the time if not given)
 *   /Admin.VolumeSnapshots {"Name"}                            list, with each one's cost measured now
 *   /Admin.VolumeSnapshotRemove {"Name","Snapshot"}
 *   /Admin.VolumeRollback  {"Name","Snapshot"}                 only while the volume is not in use
 *   /Admin.VolumeExportOpen {"Name","Snapshot"?}               a snapshot (a temporary one if not given)
 *                                                              bound read-only for the command to read
 *   /Admin.VolumeExportClose {"Name","Token"}
 *   /Admin.VolumeImportOpen {"Name","Options"?}                a directory bound read-write for the command
 *   /Admin.VolumeImportCommit {"Name","Token","Partition","Options"?}  the volume, made from it
 *   /Admin.VolumeImportAbort {"Name","Token","Partition"}
 *   /Admin.PartitionCordon {"Partition"}                       no new volumes there (kept on the partition)
 *   /Admin.PartitionUncordon {"Partition"}
 *   /Admin.PartitionEvacuate {"Partition","To"?}              its idle volumes moved to other partitions
 *   /Admin.VolumeFence     {"Name","Host"}                     moved to HOST: Mount refused until unfenced
 *   /Admin.VolumeUnfence   {"Name"}
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "admin-protocol.h"
#include "settings.h"
#include "daemon/http.h"
#include "manager/manager.h"

#define ADMIN_IMPORT_MAX_ENTRIES 1000

typedef enum AdminEndpoint {
	ADMIN_STATUS,
	ADMIN_VOLUME_SHOW,
	ADMIN_VOLUME_RESIZE,
	ADMIN_VOLUME_SET,
	ADMIN_VOLUME_FORGET,
	ADMIN_VOLUME_RELEASE,
	ADMIN_PARTITION_ADOPT,
	ADMIN_STATE_IMPORT,
	ADMIN_VOLUME_SNAPSHOT,
	ADMIN_VOLUME_SNAPSHOTS,
	ADMIN_VOLUME_SNAPSHOT_REMOVE,
	ADMIN_VOLUME_ROLLBACK,
	ADMIN_VOLUME_EXPORT_OPEN,
	ADMIN_VOLUME_EXPORT_CLOSE,
	ADMIN_VOLUME_IMPORT_OPEN,
	ADMIN_VOLUME_IMPORT_COMMIT,
	ADMIN_VOLUME_IMPORT_ABORT,
	ADMIN_PARTITION_CORDON,
	ADMIN_PARTITION_UNCORDON,
	ADMIN_PARTITION_EVACUATE,
	ADMIN_VOLUME_FENCE,
	ADMIN_VOLUME_UNFENCE,
	ADMIN_VOLUME_RECEIVE_OPEN,
	ADMIN_VOLUME_RECEIVE_COMMIT,
	ADMIN_VOLUME_RECEIVE_ABORT,
	_ADMIN_ENDPOINT_MAX,
	_ADMIN_ENDPOINT_INVALID = -EINVAL,
} AdminEndpoint;

const char *admin_endpoint_to_path(AdminEndpoint e);
AdminEndpoint admin_endpoint_from_path(const char *path);

typedef struct AdminRequest {
	AdminEndpoint endpoint;
	char *name;      /* validated volume name */
	char *partition; /* validated label or UUID */
	char *snapshot;  /* validated snapshot name (NULL: not given) */
	char *token;     /* validated export token */
	char *to;        /* validated label or UUID (evacuate's target), NULL if not given */
	bool no_live_pass;   /* PartitionEvacuate: "LivePass": false (volumes in use only wait) */
	char *host;      /* validated fence host */
	json_t *changes; /* object of strings (resize, set) */
	json_t *expect;  /* object of mount ID: count (release) */
	json_t *entries; /* array of {"Name","Record"} (import) */
	json_t *options; /* object of strings (volume import), NULL if not given */
	char *base;      /* receive: the base snapshot's ID (NULL: a full stream) */
	char *id;        /* receive commit: the stream's snapshot ID */
	bool by_move;    /* snapshot, receive commit: "ByMove" (the snapshot is a move's) */
} AdminRequest;

void admin_request_done(AdminRequest *req);

/* Parses and validates one request (pure: fuzzed). On failure: -errno, the HTTP status and the Err text. */
int admin_request_parse(const char *method, const char *path, const char *body, size_t len, AdminRequest *ret,
			unsigned *ret_status, char **reterr_msg);

typedef struct Admin {
	Manager *manager;
	const Settings *cfg;
} Admin;

/* The admin socket's HttpHandler; @userdata is an Admin. Serve it only on a root-only server (http.h). */
void admin_http_handler(void *userdata, const HttpRequest *req, HttpResponse *ret);
