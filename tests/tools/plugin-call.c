/* SPDX-License-Identifier: MIT */
/*
 * plugin-call: one plugin-protocol request from a shell script, for the qemu
 * guest (which has no curl): POSTs BODY to /VolumeDriver.ENDPOINT on SOCKET and
 * prints the reply body. Exit status 0 when the reply has no Err, 1 when it
 * has one, 2 when the request failed.
 *
 *   plugin-call SOCKET ENDPOINT [BODY]      e.g. plugin-call /run/s Create '{"Name":"v"}'
 */
#include <stdio.h>
#include <string.h>

#include "helpers/client.h"

int main(int argc, char **argv)
{
	ClientReply rep = { 0 };
	char path[128];
	const char *body = argc > 3 ? argv[3] : "{}";
	int r;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: plugin-call SOCKET ENDPOINT [BODY]\n");
		return 2;
	}
	snprintf(path, sizeof(path), "/VolumeDriver.%s", argv[2]);
	r = client_request(argv[1], "POST", path, body, strlen(body), &rep);
	if (r < 0) {
		fprintf(stderr, "plugin-call: %s %s: request failed (%d)\n", argv[1], path, r);
		return 2;
	}
	printf("%s\n", rep.body ? rep.body : "");
	r = client_err(&rep)[0] ? 1 : 0;
	client_reply_done(&rep);
	return r;
}
