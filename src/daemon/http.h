/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 on a unix socket (libmicrohttpd, one thread per connection so a
 * slow Mount never delays Get, List or Capabilities on other connections).
 * Protocol-agnostic: a handler answers each complete request. The plugin
 * socket (api.c) and the admin socket (admin.c) are two servers of this kind.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define HTTP_BODY_MAX (64 * 1024)

typedef struct HttpServer HttpServer;

/* The connecting process as the kernel reports it (SO_PEERCRED); pid is 0 outside our PID namespace. */
typedef struct HttpPeer {
	bool known;
	pid_t pid;
	uid_t uid;
	gid_t gid;
} HttpPeer;

typedef struct HttpRequest {
	const char *method;
	const char *url;
	const char *body; /* NUL-terminated, "" when there is none */
	size_t len;
	HttpPeer peer;
	const char *client; /* the ADMIN_CLIENT_HEADER (what the client says it is), or NULL */
} HttpRequest;

typedef struct HttpResponse {
	unsigned status;
	char *body; /* malloc'd JSON; the server frees it */
} HttpResponse;

typedef void (*HttpHandler)(void *userdata, const HttpRequest *req, HttpResponse *ret);

/*
 * Creates, binds and listens on the unix socket @path (mode 0600), replacing a
 * socket left there that nobody answers on (-EADDRINUSE if somebody does: a
 * running instance keeps its socket). Connections queue in the backlog until
 * http_server_start(): Docker's dial succeeds early (the plugin socket then
 * serves before the state is loaded, behind daemon/api.h's gate; the admin
 * socket only after).
 */
int http_server_listen(const char *path, HttpServer **ret);
/* Serves with @handler, at most @max_connections at once (idle ones are closed after 300 s). */
int http_server_start(HttpServer *s, HttpHandler handler, void *userdata, unsigned max_connections);
HttpServer *http_server_free(HttpServer *s);

/*
 * Before start: every request from a peer that is not root (SO_PEERCRED) is
 * refused before the handler sees it, with 403 and {"Err": @err}, and logged
 * as "<@name>: refused <url> from <who>: not root". This holds on top of the
 * socket's mode 0600, even if someone loosens the mode or the directory.
 * @name and @err must outlive the server.
 */
void http_server_set_root_only(HttpServer *s, const char *name, const char *err);

/* Who sent @req, for one log line: "uid U gid G pid P, client "C"" (the client's word made printable). */
void http_request_describe(const HttpRequest *req, char *buf, size_t len);

/* Fills @ret with @status and {"Err": @msg}. */
void http_reply_error(HttpResponse *ret, unsigned status, const char *msg);
