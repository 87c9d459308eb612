/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the two parsers of the admin side:
 *  - "A<path>\n<body>": admin_request_parse() of the admin socket (the daemon
 *    side), POST on that path and on every known endpoint;
 *  - "R<bytes>": http_client_parse_reply(), which decodes what the command
 *    line reads from the admin socket and from Docker's API.
 *
 * Properties checked beyond "no crash": an accepted admin request carries a
 * valid name, partition or change set for its endpoint; a refusal has a 4xx
 * status and a message and leaves the request empty; a decoded reply has a
 * 1xx-5xx status and a NUL-terminated body no longer than the input.
 * Nothing here touches a manager or a filesystem.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin.h"
#include "cli/http-client.h"
#include "volume/volume-options.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void check(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz-admin: property violated: %s\n", what);
		abort();
	}
}

static void parse_one(const char *path, const char *body, size_t len)
{
	AdminRequest req = { 0 };
	unsigned status = 0;
	char *err = NULL;
	int r = admin_request_parse("POST", path, body, len, &req, &status, &err);

	if (r == 0) {
		AdminEndpoint e = admin_endpoint_from_path(path);

		check(e >= 0 && req.endpoint == e, "accepted request has the endpoint of its path");
		if (e == ADMIN_VOLUME_SHOW || e == ADMIN_VOLUME_RESIZE || e == ADMIN_VOLUME_SET ||
		    e == ADMIN_VOLUME_FORGET || e == ADMIN_VOLUME_RELEASE)
			check(req.name && volume_name_is_valid(req.name), "accepted name is valid");
		if (e == ADMIN_VOLUME_RESIZE || e == ADMIN_VOLUME_SET)
			check(json_is_object(req.changes) && json_object_size(req.changes) > 0, "changes are an object");
		if (e == ADMIN_VOLUME_RELEASE)
			check(json_is_object(req.expect), "expectations are an object");
		if (e == ADMIN_PARTITION_ADOPT)
			check(req.partition && *req.partition && !strchr(req.partition, '/'), "partition is a plain label");
		if (e == ADMIN_STATE_IMPORT)
			check(json_array_size(req.entries) <= ADMIN_IMPORT_MAX_ENTRIES, "import is bounded");
		if (e == ADMIN_VOLUME_SNAPSHOT || e == ADMIN_VOLUME_SNAPSHOTS || e == ADMIN_VOLUME_SNAPSHOT_REMOVE ||
		    e == ADMIN_VOLUME_ROLLBACK)
			check(req.name && volume_name_is_valid(req.name), "accepted name is valid");
		if (e == ADMIN_VOLUME_SNAPSHOT_REMOVE || e == ADMIN_VOLUME_ROLLBACK)
			check(req.snapshot != NULL, "a snapshot is named");
		if (req.snapshot)
			check(volume_name_is_valid(req.snapshot), "accepted snapshot name is valid");
		if (e == ADMIN_VOLUME_EXPORT_CLOSE)
			check(req.token && strlen(req.token) == ADMIN_EXPORT_TOKEN_LEN, "an export token is given");
		admin_request_done(&req);
	} else {
		check(r < 0, "failure is a negative errno");
		check(status >= 400 && status <= 499, "refusal has a 4xx status");
		check(err && *err, "refusal has a message");
		check(!req.name && !req.partition && !req.changes && !req.expect && !req.entries && !req.snapshot && !req.token && !req.options,
		      "refusal leaves the request empty");
	}
	free(err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_set_level(LOG_LEVEL_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 4 * HTTP_BODY_MAX)
		return 0;
	if (data[0] == 'R') {
		HttpClientReply r;
		/* Exactly the input's bytes: a read past them is an ASan report. */
		char *buf = malloc(size - 1 ? size - 1 : 1);

		if (!buf)
			return 0;
		memcpy(buf, data + 1, size - 1);
		if (http_client_parse_reply(buf, size - 1, &r) == 0) {
			check(r.status >= 100 && r.status <= 599, "status in range");
			check(r.body && strlen(r.body) == r.len && r.len <= size, "body is a string within the input");
			http_client_reply_done(&r);
		}
		free(buf);
		return 0;
	}
	if (data[0] == 'A') {
		const uint8_t *nl = memchr(data + 1, '\n', size - 1);
		size_t plen = nl ? (size_t)(nl - data - 1) : size - 1;
		size_t blen = nl ? size - 1 - plen - 1 : 0;
		char *path = malloc(plen + 1), *body = malloc(blen ? blen : 1);

		if (path && body) {
			memcpy(path, data + 1, plen);
			path[plen] = '\0';
			if (blen)
				memcpy(body, nl + 1, blen);
			parse_one(path, body, blen);
			for (int e = 0; e < _ADMIN_ENDPOINT_MAX; e++)
				parse_one(admin_endpoint_to_path((AdminEndpoint)e), body, blen);
		}
		free(path);
		free(body);
	}
	return 0;
}
