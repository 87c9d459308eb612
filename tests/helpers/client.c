/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"

void client_reply_done(ClientReply *r)
{
	free(r->body);
	json_decref(r->json);
	*r = (ClientReply){ 0 };
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int client_request(const char *sock, const char *method, const char *path, const char *body, size_t len,
		   ClientReply *ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char head[512], *buf = NULL, *p;
	size_t blen = 0, cap = 0;
	int fd, r;

	/* Replies are reused across calls: drop the previous one. */
	client_reply_done(ret);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	snprintf(head, sizeof(head),
		 "%s %s HTTP/1.1\r\nHost: plugin.moby.localhost\r\nAccept: application/vnd.docker.plugins.v1.2+json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		 method, path, body ? len : 0);
	r = write_all(fd, head, strlen(head));
	if (r == 0 && body && len)
		r = write_all(fd, body, len);
	if (r < 0) {
		close(fd);
		return r;
	}
	for (;;) {
		ssize_t n;
		if (blen + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = p;
		}
		n = read(fd, buf + blen, cap - blen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		blen += (size_t)n;
	}
	close(fd);
	if (!buf)
		return -EPROTO;
	buf[blen] = '\0';
	*ret = (ClientReply){ 0 };
	if (sscanf(buf, "HTTP/1.%*d %u", &ret->status) != 1) {
		free(buf);
		return -EPROTO;
	}
	p = strstr(buf, "\r\n\r\n");
	ret->body = strdup(p ? p + 4 : "");
	free(buf);
	if (!ret->body)
		return -ENOMEM;
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
