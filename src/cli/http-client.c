/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli/http-client.h"
#include "util/macro.h"
#include "util/strutil.h"

#define HEADER_MAX (64 * 1024)

void http_client_reply_done(HttpClientReply *r)
{
	free(r->body);
	*r = (HttpClientReply){ 0 };
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? negative_errno() : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The value of header @name in the header block [@h, @end), or NULL; *ret_len its length. */
static const char *header_value(const char *h, const char *end, const char *name, size_t *ret_len)
{
	size_t nlen = strlen(name);

	for (const char *line = h; line < end;) {
		const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
			const char *v = line + nlen + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			*ret_len = (size_t)(eol - v);
			while (*ret_len > 0 && (v[*ret_len - 1] == ' ' || v[*ret_len - 1] == '\t'))
				(*ret_len)--;
			return v;
		}
		line = eol + 2;
	}
	return NULL;
}

static int dechunk(const char *p, const char *end, char **ret, size_t *ret_len)
{
	char *out = NULL;
	size_t n = 0;

	for (;;) {
		const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2), *q;
		unsigned long long size = 0;

		if (!eol)
			goto bad;
		/* Hex digits up to the end of the line or a ';' (chunk extensions); the buffer may end right here. */
		for (q = p; q < eol && *q != ';'; q++) {
			int d = (*q >= '0' && *q <= '9') ? *q - '0' :
				(*q >= 'a' && *q <= 'f') ? *q - 'a' + 10 :
				(*q >= 'A' && *q <= 'F') ? *q - 'A' + 10 : -1;
			if (d < 0 || size > HTTP_CLIENT_BODY_MAX)
				goto bad;
			size = size * 16 + (unsigned)d;
		}
		if (q == p)
			goto bad;
		p = eol + 2;
		if (size == 0)
			break;
		if (size > HTTP_CLIENT_BODY_MAX || n + size > HTTP_CLIENT_BODY_MAX) {
			free(out);
			return -EFBIG;
		}
		if ((size_t)(end - p) < size + 2 || memcmp(p + size, "\r\n", 2) != 0 || memchr(p, '\0', size))
			goto bad;
		char *no = realloc(out, n + size + 1);
		if (!no) {
			free(out);
			return -ENOMEM;
		}
		out = no;
		memcpy(out + n, p, size);
		n += size;
		p += size + 2;
	}
	if (!out && !(out = malloc(1)))
		return -ENOMEM;
	out[n] = '\0';
	*ret = out;
	*ret_len = n;
	return 0;
bad:
	free(out);
	return -EPROTO;
}

int http_client_parse_reply(const char *buf, size_t len, HttpClientReply *ret)
{
	const char *hend, *body, *v;
	unsigned status;
	size_t vlen, blen;
	char code[4];

	*ret = (HttpClientReply){ 0 };
	if (len < 13 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
		return -EPROTO;
	memcpy(code, buf + 9, 3);
	code[3] = '\0';
	/* Three digits, 1xx to 5xx, then a space or the end of the line. */
	if (code[0] < '1' || code[0] > '5' || code[1] < '0' || code[1] > '9' || code[2] < '0' || code[2] > '9' ||
	    (buf[12] != ' ' && buf[12] != '\r') || parse_u32(code, &status) < 0)
		return -EPROTO;
	hend = memmem(buf, len, "\r\n\r\n", 4);
	if (!hend)
		return -EPROTO;
	body = hend + 4;
	blen = len - (size_t)(body - buf);
	ret->status = status;

	v = header_value(buf, hend, "Transfer-Encoding", &vlen);
	if (v && vlen == 7 && strncasecmp(v, "chunked", 7) == 0)
		return dechunk(body, buf + len, &ret->body, &ret->len);
	v = header_value(buf, hend, "Content-Length", &vlen);
	if (v) {
		char num[24];
		uint64_t cl;

		if (vlen == 0 || vlen >= sizeof(num))
			return -EPROTO;
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		if (parse_u64(num, &cl) < 0 || cl > blen)
			return -EPROTO;
		blen = (size_t)cl;
	}
	/* Callers read the body as a string (JSON or a message): no NUL inside. */
	if (memchr(body, '\0', blen))
		return -EPROTO;
	ret->body = strndup(body, blen);
	if (!ret->body)
		return -ENOMEM;
	ret->len = blen;
	return 0;
}

int http_client_request(const char *sock, const char *method, const char *path, const char *const *extra_headers,
			const char *body, size_t len, unsigned timeout_s, HttpClientReply *ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *head = NULL, *buf = NULL;
	size_t hlen = 0, blen = 0, cap = 0;
	FILE *f;
	int r, send_err;

	*ret = (HttpClientReply){ 0 };
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return negative_errno();

	f = open_memstream(&head, &hlen);
	if (!f)
		return -ENOMEM;
	fprintf(f, "%s %s HTTP/1.1\r\nHost: localhost\r\nUser-Agent: nvmevol/%s\r\nConnection: close\r\n", method, path,
		PROJECT_VERSION);
	for (const char *const *h = extra_headers; h && *h; h++)
		fprintf(f, "%s\r\n", *h);
	if (body)
		fprintf(f, "Content-Type: application/json\r\nContent-Length: %zu\r\n", len);
	fputs("\r\n", f);
	if (fclose(f) != 0)
		return -ENOMEM;
	r = write_all(fd, head, hlen);
	if (r == 0 && body && len)
		r = write_all(fd, body, len);
	/* A server may answer and close before reading all of a body it refuses (413): read that answer. */
	if (r < 0 && r != -EPIPE && r != -ECONNRESET)
		return r;
	send_err = r;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (blen + 65536 + 1 > cap) {
			char *nb;
			if (cap > HTTP_CLIENT_BODY_MAX + HEADER_MAX)
				return -EFBIG;
			cap = cap ? cap * 2 : 65536 + 1;
			nb = realloc(buf, cap);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		r = poll(&p, 1, (int)timeout_s * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return negative_errno();
		if (r == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + blen, cap - blen - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && blen > 0 && errno == ECONNRESET)
			break; /* the answer came before the reset */
		if (n < 0)
			return send_err < 0 ? send_err : negative_errno();
		if (n == 0)
			break;
		blen += (size_t)n;
	}
	if (!buf || blen == 0)
		return send_err < 0 ? send_err : -EPROTO;
	buf[blen] = '\0';
	return http_client_parse_reply(buf, blen, ret);
}
