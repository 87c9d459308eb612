/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "cli/http-client.h"

void client_reply_done(ClientReply *r)
{
	free(r->body);
	json_decref(r->json);
	*r = (ClientReply){ 0 };
}

/* Long enough for a resize that walks a volume's files; meson gives a test 600 s. */
#define CLIENT_TIMEOUT_S 600

int client_request(const char *sock, const char *method, const char *path, const char *body, size_t len,
		   ClientReply *ret)
{
	static const char *const headers[] = { "Accept: application/vnd.docker.plugins.v1.2+json", NULL };
	HttpClientReply rep;
	int r;

	/* Replies are reused across calls: drop the previous one. */
	client_reply_done(ret);
	r = http_client_request(sock, method, path, headers, body, body ? len : 0, CLIENT_TIMEOUT_S, &rep);
	if (r < 0)
		return r;
	*ret = (ClientReply){ .status = rep.status, .body = rep.body };
	ret->json = json_loads(ret->body, JSON_DECODE_ANY, NULL);
	return 0;
}

int client_post(const char *sock, const char *path, ClientReply *ret, const char *fmt, ...)
{
	char *body = NULL;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&body, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -ENOMEM;
	r = client_request(sock, "POST", path, body, strlen(body), ret);
	free(body);
	return r;
}

const char *client_err(const ClientReply *r)
{
	json_t *e = r->json ? json_object_get(r->json, "Err") : NULL;
	if (r->status != 200 && !json_is_string(e))
		return r->body ? r->body : "(no body)";
	return json_is_string(e) ? json_string_value(e) : "";
}
