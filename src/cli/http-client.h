/* SPDX-License-Identifier: MIT */
/*
 * A minimal HTTP/1.1 client over a unix socket, for the command line: one
 * request per connection (Connection: close), bodies by Content-Length,
 * chunked encoding or end of stream. Talks to nvmevol's admin socket and to
 * Docker's API socket.
 */
#pragma once

#include <stddef.h>

#define HTTP_CLIENT_BODY_MAX (256u * 1024 * 1024)

typedef struct HttpClientReply {
	unsigned status;
	char *body; /* NUL-terminated */
	size_t len;
} HttpClientReply;

void http_client_reply_done(HttpClientReply *r);

/*
 * Sends @method @path to the unix socket @sock with optional @extra_headers
 * (each "Name: value", NULL-terminated) and @body, and reads the whole reply.
 * Gives up after @timeout_s without progress. Returns -errno of connect()
 * as is (-ENOENT, -EACCES, -ECONNREFUSED: the caller explains them), -EPROTO
 * for a malformed reply, -EFBIG beyond HTTP_CLIENT_BODY_MAX.
 */
int http_client_request(const char *sock, const char *method, const char *path, const char *const *extra_headers,
			const char *body, size_t len, unsigned timeout_s, HttpClientReply *ret);

/* Pure: decodes a complete HTTP/1.x reply in @buf (for tests and fuzzing); a body with a NUL byte is -EPROTO. */
int http_client_parse_reply(const char *buf, size_t len, HttpClientReply *ret);
