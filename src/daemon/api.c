/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/api.h"
#include "metrics/metrics.h"
#include "metrics/stats.h"
#include "volume/volume.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

void api_request_done(ApiRequest *req)
{
	free(req->name);
	free(req->id);
	*req = (ApiRequest){ 0 };
}

static int refuse(unsigned status, unsigned *ret_status, char **reterr_msg, const char *msg)
{
	*ret_status = status;
	free(*reterr_msg);
	*reterr_msg = strdup(msg);
	return -EINVAL;
}

static bool endpoint_has_name(ApiEndpoint e)
{
	return e == API_CREATE || e == API_REMOVE || e == API_MOUNT || e == API_UNMOUNT || e == API_PATH ||
	       e == API_GET;
}

int api_request_parse(const char *method, const char *path, const char *body, size_t len, ApiRequest *ret,
		      unsigned *ret_status, char **reterr_msg)
{
	ApiRequest req = { .endpoint = api_endpoint_from_path(path) };
	json_error_t jerr;
	json_t *j = NULL, *name, *id;
	int r;

	if (req.endpoint < 0)
		return refuse(404, ret_status, reterr_msg, "unknown endpoint");
	if (!method || !streq(method, "POST"))
		return refuse(405, ret_status, reterr_msg, "method not allowed: use POST");
	if (len > API_BODY_MAX)
		return refuse(413, ret_status, reterr_msg, "request body too large (limit 64 KiB)");

	if (!endpoint_has_name(req.endpoint) && req.endpoint != API_CREATE) {
		/* Activate, Capabilities and List take no arguments; an empty body is normal. */
		*ret = req;
		return 0;
	}
	if (len == 0)
		return refuse(400, ret_status, reterr_msg, "empty request body: expected a JSON object");
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		*ret_status = 400;
		free(*reterr_msg);
		if (asprintf(reterr_msg, "malformed JSON: %s", jerr.text) < 0)
			*reterr_msg = NULL;
		return -EINVAL;
	}
	if (!json_is_object(j)) {
		r = refuse(400, ret_status, reterr_msg, "request body must be a JSON object");
		goto fail;
	}
	name = json_object_get(j, "Name");
	if (!json_is_string(name) || json_string_length(name) == 0) {
		r = refuse(400, ret_status, reterr_msg, "missing or non-string field 'Name'");
		goto fail;
	}
	if (strlen(json_string_value(name)) != json_string_length(name) ||
	    !volume_name_is_valid(json_string_value(name))) {
		r = refuse(400, ret_status, reterr_msg,
			   "invalid volume name: use 2 to 128 characters from [A-Za-z0-9_.-], starting with a letter or digit");
		goto fail;
	}
	req.name = strdup(json_string_value(name));
	if (!req.name) {
		r = refuse(500, ret_status, reterr_msg, "out of memory");
		goto fail;
	}
	if (req.endpoint == API_MOUNT || req.endpoint == API_UNMOUNT) {
		id = json_object_get(j, "ID");
		if (!json_is_string(id) || strlen(json_string_value(id)) != json_string_length(id) ||
		    !mount_id_is_valid(json_string_value(id))) {
			r = refuse(400, ret_status, reterr_msg,
				   "missing or invalid field 'ID' (1 to 128 printable characters)");
			goto fail;
		}
		req.id = strdup(json_string_value(id));
		if (!req.id) {
			r = refuse(500, ret_status, reterr_msg, "out of memory");
			goto fail;
		}
	}
	if (req.endpoint == API_CREATE) {
		r = volume_options_parse_create(json_object_get(j, "Opts"), &req.opts, &req.clone, reterr_msg);
		if (r < 0) {
			*ret_status = 400;
			goto fail;
		}
	}
	json_decref(j);
	*ret = req;
	return 0;
fail:
	json_decref(j);
	api_request_done(&req);
	return r;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static char *dump(json_t *j)
{
	/* Every real in a reply is a rounded decimal (figures, thresholds): 15 digits print it as rounded. */
	char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(j);
	return s;
}

void api_error_response(unsigned status, const char *msg, ApiResponse *ret)
{
	json_t *j = json_pack("{s:s}", "Err", msg && *msg ? msg : "unknown error");

	ret->status = status;
	ret->body = j ? dump(j) : NULL;
	if (!ret->body)
		ret->body = strdup("{\"Err\":\"out of memory\"}");
}

static void reply(json_t *j, ApiResponse *ret)
{
	if (!j) {
		api_error_response(500, "out of memory", ret);
		return;
	}
	ret->status = 200;
	ret->body = dump(j);
	if (!ret->body)
		api_error_response(500, "out of memory", ret);
}

/* Appends @s as a JSON string (names are validated, but paths come from settings). */
static void put_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (;;) {
		size_t n = 0;
		unsigned char c;

		/* The run up to the next character to escape, in one write. */
		while ((c = (unsigned char)s[n]) != '\0' && c != '"' && c != '\\' && c >= 0x20)
			n++;
		if (n > 0)
			fwrite(s, 1, n, f);
		s += n;
		if (c == '\0')
			break;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else
			fprintf(f, "\\u%04x", c);
		s++;
	}
	fputc('"', f);
}

typedef struct ListWriter {
	FILE *f;
	bool first;
} ListWriter;

static void list_one(const char *name, const char *mountpoint, void *userdata)
{
	ListWriter *w = userdata;

	fputs(w->first ? "{\"Name\":" : ",{\"Name\":", w->f);
	put_json_string(w->f, name);
	if (mountpoint) {
		fputs(",\"Mountpoint\":", w->f);
		put_json_string(w->f, mountpoint);
	}
	fputc('}', w->f);
	w->first = false;
}

/* List writes its body directly: a JSON tree of 10,000 volumes costs ten times more. */
static void list_reply(Manager *m, ApiResponse *ret)
{
	ListWriter w = { .first = true };
	char *body = NULL;
	size_t len = 0;

	w.f = open_memstream(&body, &len);
	if (!w.f) {
		api_error_response(500, "out of memory", ret);
		return;
	}
	/* This thread's own stream: no lock per character (List of 100,000 volumes runs under the registry lock). */
	(void)__fsetlocking(w.f, FSETLOCKING_BYCALLER);
	fputs("{\"Volumes\":[", w.f);
	(void)manager_list(m, list_one, &w);
	fputs("]}", w.f);
	if (fclose(w.f) != 0 || !body) {
		free(body);
		api_error_response(500, "out of memory", ret);
		return;
	}
	ret->status = 200;
	ret->body = body;
}

/* Answers @req; returns 0, or the -errno of a failed operation (already in @ret as an Err). */
static int dispatch(Manager *m, ApiRequest *req, ApiResponse *ret)
{
	_cleanup_free_ char *err = NULL, *mp = NULL;
	json_t *j = NULL;
	int r = 0;

	switch (req->endpoint) {
	case API_ACTIVATE:
		reply(json_pack("{s:[s]}", "Implements", "VolumeDriver"), ret);
		return 0;
	case API_CAPABILITIES:
		reply(json_pack("{s:{s:s}}", "Capabilities", "Scope", "local"), ret);
		return 0;
	default:
		break;
	}
	if (!m) {
		api_error_response(503, "nvmevol is starting; try again", ret);
		return -EAGAIN;
	}
	switch (req->endpoint) {
	case API_CREATE:
		r = manager_create(m, req->name, &req->opts, req->clone.from[0] ? &req->clone : NULL, &err);
		if (r == 0)
			j = json_object();
		break;
	case API_REMOVE:
		r = manager_remove(m, req->name, &err);
		if (r == 0)
			j = json_object();
		break;
	case API_MOUNT:
		r = manager_mount(m, req->name, req->id, &mp, &err);
		if (r == 0)
			j = json_pack("{s:s}", "Mountpoint", mp);
		break;
	case API_UNMOUNT:
		r = manager_unmount(m, req->name, req->id, &err);
		if (r == 0)
			j = json_object();
		break;
	case API_PATH:
		r = manager_path(m, req->name, &mp, &err);
		if (r == 0)
			j = json_pack("{s:s}", "Mountpoint", mp ? mp : "");
		break;
	case API_GET: {
		json_t *vol = NULL;
		r = manager_get(m, req->name, &vol, &err);
		if (r == 0)
			j = json_pack("{s:o}", "Volume", vol);
		break;
	}
	case API_LIST:
		list_reply(m, ret);
		return ret->status == 200 ? 0 : -ENOMEM;
	default:
		r = -EINVAL;
	}
	if (r < 0) {
		if (req->endpoint != API_GET || r != -ENOENT)
			log_warning("%s %s: %s", api_endpoint_to_path(req->endpoint), req->name ? req->name : "",
				    err ? err : errno_str(r));
		api_error_response(500, err ? err : errno_str(r), ret);
		return r;
	}
	reply(j, ret);
	return ret->status == 200 ? 0 : -ENOMEM;
}

void api_handle(Manager *m, const char *method, const char *path, const char *body, size_t len,
		ApiResponse *ret)
{
	_cleanup_free_ char *err = NULL;
	ApiRequest req = { 0 };
	unsigned status = 400;
	uint64_t t0 = now_ns();
	int r;

	if (api_request_parse(method, path, body, len, &req, &status, &err) < 0) {
		log_debug("refused %s %.64s: %s", method ? method : "?", path ? path : "?", err ? err : "?");
		api_error_response(status, err, ret);
		stats_request(api_endpoint_from_path(path), STATS_RESULT_REFUSED, now_ns() - t0);
		stats_error(STATS_ERROR_INVALID);
		return;
	}
	r = dispatch(m, &req, ret);
	stats_request(req.endpoint, r < 0 ? STATS_RESULT_ERROR : STATS_RESULT_OK, now_ns() - t0);
	if (r < 0)
		stats_error(stats_error_kind_from_errno(r));
	else if (req.endpoint == API_CREATE || req.endpoint == API_REMOVE || req.endpoint == API_MOUNT ||
		 req.endpoint == API_UNMOUNT)
		metrics_notify();
	api_request_done(&req);
}

void api_gate_init(ApiGate *g)
{
	*g = (ApiGate){ .state = API_GATE_STARTING };
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

static void gate_set(ApiGate *g, Manager *m, int state)
{
	pthread_mutex_lock(&g->lock);
	g->m = m;
	g->state = state;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void api_gate_open(ApiGate *g, Manager *m)
{
	gate_set(g, m, API_GATE_OPEN);
}

void api_gate_fail(ApiGate *g)
{
	gate_set(g, NULL, API_GATE_FAILED);
}

void api_gate_done(ApiGate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* The manager once the state is loaded (waits for it), or NULL if the start failed. */
static Manager *gate_wait(ApiGate *g)
{
	Manager *m;

	pthread_mutex_lock(&g->lock);
	while (g->state == API_GATE_STARTING)
		pthread_cond_wait(&g->cond, &g->lock);
	m = g->m;
	pthread_mutex_unlock(&g->lock);
	return m;
}

void api_http_handler(void *userdata, const HttpRequest *req, HttpResponse *ret)
{
	ApiEndpoint e = api_endpoint_from_path(req->url);
	Manager *m = NULL;

	/* What needs no state never waits for it (dispatch answers those without a manager). */
	if (e != API_ACTIVATE && e != API_CAPABILITIES)
		m = gate_wait(userdata);
	api_handle(m, req->method, req->url, req->body, req->len, ret);
}
