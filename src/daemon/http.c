/* SPDX-License-Identifier: MIT */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "admin-protocol.h"
#include "daemon/http.h"
#include "util/log.h"
#include "util/macro.h"

#define CONNECTION_IDLE_TIMEOUT_S 300
#define THREAD_STACK_SIZE (256 * 1024)

struct HttpServer {
	int listen_fd;
	char *path;
	struct MHD_Daemon *mhd;
	HttpHandler handler;
	void *userdata;
	const char *root_only_name; /* non-NULL: peers other than root are refused (http_server_set_root_only) */
	const char *root_only_err;
};

typedef struct Request {
	char *body;
	size_t len;
	bool too_big;
} Request;

/* -EADDRINUSE when a process listens on @sa (a running instance keeps its socket), else 0. */
static int socket_in_use(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), r;

	if (fd < 0)
		return negative_errno();
	/* Non-blocking: a full backlog answers EAGAIN instead of waiting, and means in use too. */
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno == EAGAIN ? -EADDRINUSE : 0;
	(void)close(fd);
	return r;
}

int http_server_listen(const char *path, HttpServer **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	HttpServer *s;
	struct stat st;
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);

	/* A socket left by a previous instance; anything else at that path is not ours to delete. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		r = socket_in_use(&sa);
		if (r < 0)
			return r;
		(void)unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return negative_errno();
	/* No window in which the socket is connectable by anyone but root. */
	old = umask(0177);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, 128) < 0) {
		r = negative_errno();
		(void)close(fd);
		return r;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		free(s);
		(void)close(fd);
		return -ENOMEM;
	}
	s->listen_fd = fd;
	*ret = s;
	return 0;
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	Request *req = *con_cls;

	if (req) {
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

/* The JSON content type of the Docker plugin protocol, which the admin protocol shares. */
#define CONTENT_TYPE "application/vnd.docker.plugins.v1.1+json"

static enum MHD_Result send_response(struct MHD_Connection *conn, HttpResponse *resp)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	if (!resp->body) {
		resp->status = 500;
		resp->body = strdup("{\"Err\":\"out of memory\"}");
		if (!resp->body)
			return MHD_NO;
	}
	r = MHD_create_response_from_buffer(strlen(resp->body), resp->body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(resp->body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	ok = MHD_queue_response(conn, resp->status, r);
	MHD_destroy_response(r);
	return ok;
}

void http_reply_error(HttpResponse *ret, unsigned status, const char *msg)
{
	json_t *j = json_pack("{s:s}", "Err", msg && *msg ? msg : "unknown error");

	ret->status = status;
	ret->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
}

/* What the client says it is, made safe for one log line (the kernel's uid is what counts). */
static void client_label(const char *client, char *buf, size_t len)
{
	size_t i = 0;

	for (const char *p = client ? client : "unknown"; *p && i + 1 < len && i < 200; p++)
		buf[i++] = (*p >= 0x20 && *p < 0x7f) ? *p : '?';
	buf[i] = '\0';
}

void http_request_describe(const HttpRequest *hr, char *buf, size_t len)
{
	char client[210];

	client_label(hr->client, client, sizeof(client));
	if (hr->peer.known && hr->peer.pid > 0)
		snprintf(buf, len, "uid %u gid %u pid %d, client \"%s\"", (unsigned)hr->peer.uid,
			 (unsigned)hr->peer.gid, (int)hr->peer.pid, client);
	else if (hr->peer.known)
		/* The kernel reports pid 0 for a peer outside our PID namespace (the host, for the plugin). */
		snprintf(buf, len, "uid %u gid %u (a process outside the plugin's PID namespace), client \"%s\"",
			 (unsigned)hr->peer.uid, (unsigned)hr->peer.gid, client);
	else
		snprintf(buf, len, "unknown peer, client \"%s\"", client);
}

/* The root-only rule of http_server_set_root_only(): true if @hr may go to the handler. */
static bool peer_allowed(const HttpServer *s, const HttpRequest *hr, HttpResponse *ret)
{
	char who[256];

	if (!s->root_only_name || (hr->peer.known && hr->peer.uid == 0))
		return true;
	http_request_describe(hr, who, sizeof(who));
	log_warning("%s: refused %.64s from %s: not root", s->root_only_name, hr->url, who);
	http_reply_error(ret, 403, s->root_only_err);
	return false;
}

void http_server_set_root_only(HttpServer *s, const char *name, const char *err)
{
	s->root_only_name = name;
	s->root_only_err = err;
}

static void too_big(HttpResponse *ret)
{
	ret->status = 413;
	ret->body = strdup("{\"Err\":\"request body too large (limit 64 KiB)\"}");
}

static HttpPeer peer_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return (HttpPeer){ .known = false };
	return (HttpPeer){ .known = true, .pid = uc.pid, .uid = uc.uid, .gid = uc.gid };
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	HttpServer *s = cls;
	Request *req = *con_cls;
	HttpResponse resp = { 0 };

	if (!req) {
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		*con_cls = req;
		/* Refuse an announced oversize body before reading any of it. */
		if (cl && strtoull(cl, NULL, 10) > HTTP_BODY_MAX) {
			req->too_big = true;
			too_big(&resp);
			return send_response(conn, &resp);
		}
		return MHD_YES;
	}

	if (*upload_data_size > 0) {
		if (!req->too_big) {
			if (req->len + *upload_data_size > HTTP_BODY_MAX) {
				/* Never act on a truncated body: drop it all and answer 413. */
				req->too_big = true;
				free(req->body);
				req->body = NULL;
				req->len = 0;
			} else {
				char *nb = realloc(req->body, req->len + *upload_data_size + 1);
				if (!nb)
					return MHD_NO;
				memcpy(nb + req->len, upload_data, *upload_data_size);
				req->body = nb;
				req->len += *upload_data_size;
				req->body[req->len] = '\0';
			}
		}
		*upload_data_size = 0;
		return MHD_YES;
	}

	if (req->too_big)
		too_big(&resp);
	else {
		HttpRequest hr = {
			.method = method,
			.url = url,
			.body = req->body ? req->body : "",
			.len = req->len,
			.peer = peer_of(conn),
			.client = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, ADMIN_CLIENT_HEADER),
		};
		if (peer_allowed(s, &hr, &resp))
			s->handler(s->userdata, &hr, &resp);
	}
	return send_response(conn, &resp);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) _printf_(2, 0);
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	(void)vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_debug("http: %s", buf);
}

int http_server_start(HttpServer *s, HttpHandler handler, void *userdata, unsigned max_connections)
{
	s->handler = handler;
	s->userdata = userdata;
	/* The logger must be the first option, or MHD logs about it through its default logger. */
	s->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_ERROR_LOG | MHD_USE_ITC,
				  0, NULL, NULL, on_request, s,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->listen_fd,
				  MHD_OPTION_CONNECTION_LIMIT, max_connections,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_IDLE_TIMEOUT_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
				  MHD_OPTION_THREAD_STACK_SIZE, (size_t)THREAD_STACK_SIZE,
				  MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
				  MHD_OPTION_END);
	if (!s->mhd)
		return -EIO;
	return 0;
}

HttpServer *http_server_free(HttpServer *s)
{
	if (!s)
		return NULL;
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	else if (s->listen_fd >= 0)
		(void)close(s->listen_fd);
	if (s->path)
		(void)unlink(s->path);
	free(s->path);
	free(s);
	return NULL;
}
