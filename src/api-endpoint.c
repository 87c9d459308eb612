/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "api-endpoint.h"
#include "util/macro.h"

static const char *const endpoint_paths[_API_ENDPOINT_MAX] = {
	[API_ACTIVATE] = "/Plugin.Activate",
	[API_CAPABILITIES] = "/VolumeDriver.Capabilities",
	[API_CREATE] = "/VolumeDriver.Create",
	[API_REMOVE] = "/VolumeDriver.Remove",
	[API_MOUNT] = "/VolumeDriver.Mount",
	[API_UNMOUNT] = "/VolumeDriver.Unmount",
	[API_PATH] = "/VolumeDriver.Path",
	[API_GET] = "/VolumeDriver.Get",
	[API_LIST] = "/VolumeDriver.List",
};

ApiEndpoint api_endpoint_from_path(const char *path)
{
	for (int i = 0; i < _API_ENDPOINT_MAX; i++)
		if (path && streq(path, endpoint_paths[i]))
			return (ApiEndpoint)i;
	return _API_ENDPOINT_INVALID;
}

const char *api_endpoint_to_path(ApiEndpoint e)
{
	return e >= 0 && e < _API_ENDPOINT_MAX ? endpoint_paths[e] : NULL;
}
