/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes the request decoder of the Docker volume API.
 *
 * Input: "<path>\n<body>" (no newline: the whole input is the path and the
 * body is empty). The body is handed to api_request_parse() as POST on that
 * path, then as POST on every known endpoint, then with a wrong method, and
 * finally to api_handle() with no manager (Manager == NULL: only Activate and
 * Capabilities are answered, everything else gets 503), which exercises the
 * JSON replies.
 *
 * Exercised: endpoint lookup, method and size checks, jansson loading with
 * JSON_REJECT_DUPLICATES, Name/ID/Opts validation, option parsing, error
 * messages, reply encoding. Not exercised: the HTTP layer (libmicrohttpd), the
 * manager and anything that touches a filesystem; no real manager is ever
 * created, so nothing is mounted or written.
 *
 * Properties checked beyond "no crash": an accepted request carries a valid
 * name (and ID), a refused one carries a 4xx/5xx status and a message, and
 * every reply body is a JSON object ("Err" unless the status is 200).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api.h"
#include "volume/volume-options.h"
#include "volume/volume.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static void check(bool ok, const char *what, const char *path)
{
	if (!ok) {
		fprintf(stderr, "fuzz-api: property violated: %s (path '%.80s')\n", what, path ? path : "(null)");
		abort();
	}
}

static bool endpoint_has_name(ApiEndpoint e)
{
	return e == API_CREATE || e == API_REMOVE || e == API_MOUNT || e == API_UNMOUNT || e == API_PATH ||
	       e == API_GET;
}

static void parse_one(const char *method, const char *path, const char *body, size_t len)
{
	ApiRequest req = { 0 };
	char *err = NULL;
	unsigned status = 0;
	int r;

	r = api_request_parse(method, path, body, len, &req, &status, &err);
	if (r == 0) {
		ApiEndpoint e = api_endpoint_from_path(path);

		check(e >= 0 && req.endpoint == e, "accepted request has the endpoint of its path", path);
		check(method && strcmp(method, "POST") == 0, "only POST is accepted", path);
		check(len <= API_BODY_MAX, "an oversize body is never accepted", path);
		if (endpoint_has_name(e))
			check(req.name && volume_name_is_valid(req.name), "accepted name is valid", path);
		if (e == API_MOUNT || e == API_UNMOUNT)
			check(req.id && mount_id_is_valid(req.id), "accepted mount ID is valid", path);
		api_request_done(&req);
	} else {
		check(r < 0, "failure is a negative errno", path);
		check(status >= 400 && status <= 599, "refusal has a 4xx/5xx status", path);
		check(err && *err, "refusal has a message", path);
		check(req.name == NULL && req.id == NULL, "refusal leaves the request untouched", path);
	}
	free(err);
}

static void handle_one(const char *method, const char *path, const char *body, size_t len)
{
	ApiResponse resp = { 0 };
	json_t *j, *e;

	api_handle(NULL, method, path, body, len, &resp);
	check(resp.body != NULL, "reply has a body", path);
	j = json_loads(resp.body, JSON_REJECT_DUPLICATES, NULL);
	check(j && json_is_object(j), "reply is a JSON object", path);
	e = json_object_get(j, "Err");
	if (resp.status == 200)
		check(!e || (json_is_string(e) && json_string_length(e) == 0), "200 reply has no Err", path);
	else
		check(json_is_string(e) && json_string_length(e) > 0, "error reply has a non-empty Err", path);
	/* Without a manager only the stateless endpoints can succeed. */
	if (resp.status == 200) {
		ApiEndpoint ep = api_endpoint_from_path(path);
		check(ep == API_ACTIVATE || ep == API_CAPABILITIES, "stateful endpoint answered without a manager",
		      path);
	}
	json_decref(j);
	free(resp.body);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_set_level(LOG_LEVEL_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t plen = nl ? (size_t)(nl - data) : size;
	size_t blen = nl ? size - plen - 1 : 0;
	char *path, *body;

	if (size > 4 * API_BODY_MAX)
		return 0;
	path = malloc(plen + 1);
	/* The body gets exactly its own size: a read past it is an ASan report. */
	body = malloc(blen ? blen : 1);
	if (!path || !body) {
		free(path);
		free(body);
		return 0;
	}
	memcpy(path, data, plen);
	path[plen] = '\0';
	if (blen)
		memcpy(body, nl + 1, blen);

	parse_one("POST", path, body, blen);
	for (int e = 0; e < _API_ENDPOINT_MAX; e++)
		parse_one("POST", api_endpoint_to_path((ApiEndpoint)e), body, blen);
	parse_one("GET", path, body, blen);
	parse_one(NULL, path, body, blen);
	handle_one("POST", path, body, blen);

	free(path);
	free(body);
	return 0;
}
