/* SPDX-License-Identifier: MIT */
/*
 * The Docker volume plugin protocol's endpoints and their paths: plain
 * definitions, shared by the API layer (daemon/api.c) and the request
 * counters (metrics/stats.h) without either seeing the other.
 */
#pragma once

#include <errno.h>

typedef enum ApiEndpoint {
	API_ACTIVATE,
	API_CAPABILITIES,
	API_CREATE,
	API_REMOVE,
	API_MOUNT,
	API_UNMOUNT,
	API_PATH,
	API_GET,
	API_LIST,
	_API_ENDPOINT_MAX,
	_API_ENDPOINT_INVALID = -EINVAL,
} ApiEndpoint;

ApiEndpoint api_endpoint_from_path(const char *path);
const char *api_endpoint_to_path(ApiEndpoint e);
