/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 on a unix socket (libmicrohttpd, one thread per connection so a
 * slow Mount never delays Get, List or Capabilities on other connections).
 */
#pragma once

#include "manager.h"

typedef struct HttpServer HttpServer;

/*
 * Creates, binds and listens on the unix socket @path (mode 0600). Connections
 * queue in the backlog until http_server_start(): Docker's dial succeeds early,
 * and no request is answered before the state is loaded.
 */
int http_server_listen(const char *path, HttpServer **ret);
int http_server_start(HttpServer *s, Manager *m);
HttpServer *http_server_free(HttpServer *s);
