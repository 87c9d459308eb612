/* SPDX-License-Identifier: MIT */
/* Requests to the daemon's sockets for tests, through the command line's HTTP client (src/cli/http-client.c). */
#pragma once

#include <jansson.h>
#include <stddef.h>

typedef struct ClientReply {
	unsigned status;
	char *body;
	json_t *json; /* parsed body, or NULL */
} ClientReply;

void client_reply_done(ClientReply *r);

/* Sends @method @path with @body (may be NULL) and reads the whole answer; *ret must be zeroed or a previous reply. */
int client_request(const char *sock, const char *method, const char *path, const char *body, size_t len,
		   ClientReply *ret);

/* POST with a printf-formatted JSON body. */
int client_post(const char *sock, const char *path, ClientReply *ret, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "" when the reply has no Err (success), else the Err text. Borrowed from @r. */
const char *client_err(const ClientReply *r);
