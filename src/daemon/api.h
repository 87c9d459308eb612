/* SPDX-License-Identifier: MIT */
/*
 * The Docker volume plugin protocol: request parsing and validation (pure,
 * fuzzable), dispatch to the manager, and the JSON replies. Knows nothing of
 * HTTP beyond status codes.
 */
#pragma once

#include <pthread.h>
#include <stddef.h>

#include "api-endpoint.h"
#include "daemon/http.h"
#include "manager/manager.h"
#include "volume/volume-options.h"

#define API_BODY_MAX HTTP_BODY_MAX

typedef struct ApiRequest {
	ApiEndpoint endpoint;
	char *name; /* validated volume name, when the endpoint has one */
	char *id;   /* validated mount ID (Mount, Unmount) */
	VolumeOptions opts; /* Create */
	CloneRequest clone; /* Create */
} ApiRequest;

void api_request_done(ApiRequest *req);

/*
 * Parses and validates one request. On failure returns a negative errno, the
 * HTTP status to answer with in *ret_status, and the Err text in *reterr_msg.
 */
int api_request_parse(const char *method, const char *path, const char *body, size_t len, ApiRequest *ret,
		      unsigned *ret_status, char **reterr_msg);

/* status and a malloc'd JSON body, always an object */
typedef HttpResponse ApiResponse;

/* Handles one request end to end. @m may be NULL to answer only what needs no state. */
void api_handle(Manager *m, const char *method, const char *path, const char *body, size_t len,
		ApiResponse *ret);

/*
 * What the plugin socket serves while the daemon starts: Plugin.Activate and
 * Capabilities are answered at once (Docker's activation does not wait for
 * 100,000 records to load); every other request waits until
 * api_gate_open() hands over the manager, or api_gate_fail() says there is
 * none (then 503). Locking rule: lock guards m and state.
 */
typedef struct ApiGate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	Manager *m;
	enum { API_GATE_STARTING, API_GATE_OPEN, API_GATE_FAILED } state;
} ApiGate;

void api_gate_init(ApiGate *g);
void api_gate_open(ApiGate *g, Manager *m);
void api_gate_fail(ApiGate *g);
void api_gate_done(ApiGate *g);

/* The plugin socket's HttpHandler; @userdata is the ApiGate. */
void api_http_handler(void *userdata, const HttpRequest *req, HttpResponse *ret);

/* An {"Err": msg} body with @status; for the HTTP layer's own refusals (413, ...). */
void api_error_response(unsigned status, const char *msg, ApiResponse *ret);
