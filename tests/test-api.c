/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <string.h>

#include "daemon/api.h"

static int parse(const char *path, const char *body, ApiRequest *req, unsigned *status, char **err)
{
	return api_request_parse("POST", path, body, body ? strlen(body) : 0, req, status, err);
}

Test(api, parses_each_endpoint)
{
	ApiRequest req;
	unsigned st = 0;
	char *err = NULL;

	cr_assert_eq(parse("/VolumeDriver.Create", "{\"Name\":\"v1\",\"Opts\":{\"uid\":\"1\"}}\n", &req, &st, &err), 0, "%s", err);
	cr_expect_eq(req.endpoint, API_CREATE);
	cr_expect_str_eq(req.name, "v1");
	cr_expect(req.opts.has_uid);
	api_request_done(&req);
	cr_assert_eq(parse("/VolumeDriver.Mount", "{\"Name\":\"v1\",\"ID\":\"0123abcd\"}", &req, &st, &err), 0);
	cr_expect_str_eq(req.id, "0123abcd");
	api_request_done(&req);
	cr_assert_eq(parse("/VolumeDriver.Create", "{\"Name\":\"v1\",\"Opts\":null}", &req, &st, &err), 0);
	api_request_done(&req);
	/* Docker sends Activate with an empty body and List/Capabilities with {}. */
	cr_assert_eq(parse("/Plugin.Activate", "", &req, &st, &err), 0);
	cr_assert_eq(parse("/VolumeDriver.List", "{}\n", &req, &st, &err), 0);
	cr_assert_eq(parse("/VolumeDriver.Capabilities", "{}", &req, &st, &err), 0);
}

Test(api, refusals_carry_status_and_reason)
{
	static const struct {
		const char *method, *path, *body;
		unsigned status;
	} cases[] = {
		{ "POST", "/VolumeDriver.Nope", "{}", 404 },
		{ "GET", "/VolumeDriver.List", "", 405 },
		{ "POST", "/VolumeDriver.Get", "", 400 },
		{ "POST", "/VolumeDriver.Get", "{", 400 },
		{ "POST", "/VolumeDriver.Get", "[]", 400 },
		{ "POST", "/VolumeDriver.Get", "{} x", 400 },
		{ "POST", "/VolumeDriver.Get", "{\"Name\":\"a1\",\"Name\":\"b1\"}", 400 },
		{ "POST", "/VolumeDriver.Get", "{\"Name\":\"a\\u0000b\"}", 400 },
		{ "POST", "/VolumeDriver.Get", "{\"Name\":\"../x\"}", 400 },
		{ "POST", "/VolumeDriver.Mount", "{\"Name\":\"ab\"}", 400 },
		{ "POST", "/VolumeDriver.Mount", "{\"Name\":\"ab\",\"ID\":7}", 400 },
		{ "POST", "/VolumeDriver.Unmount", "{\"Name\":\"ab\",\"ID\":\"\"}", 400 },
		{ "POST", "/VolumeDriver.Create", "{\"Name\":\"ab\",\"Opts\":{\"x\":\"1\"}}", 400 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		ApiRequest req;
		unsigned st = 0;
		char *err = NULL;
		cr_expect_lt(api_request_parse(cases[i].method, cases[i].path, cases[i].body, strlen(cases[i].body), &req, &st, &err),
			     0, "accepted case %zu", i);
		cr_expect_eq(st, cases[i].status, "case %zu: status %u", i, st);
		cr_expect(err && *err, "case %zu: no reason", i);
		free(err);
	}
}

Test(api, deep_nesting_and_big_bodies_are_refused)
{
	size_t depth = 100000;
	char *deep = malloc(depth * 2 + 1);
	ApiRequest req;
	unsigned st = 0;
	char *err = NULL;

	for (size_t i = 0; i < depth; i++) {
		deep[i] = '[';
		deep[depth * 2 - 1 - i] = ']';
	}
	deep[depth * 2] = 0;
	cr_expect_lt(api_request_parse("POST", "/VolumeDriver.Create", deep, API_BODY_MAX, &req, &st, &err), 0);
	free(err);
	err = NULL;
	cr_expect_lt(api_request_parse("POST", "/VolumeDriver.Create", deep, depth * 2, &req, &st, &err), 0);
	cr_expect_eq(st, 413);
	free(err);
	free(deep);
}

Test(api, stateless_endpoints_answer_without_a_manager)
{
	ApiResponse r = { 0 };

	api_handle(NULL, "POST", "/VolumeDriver.Capabilities", "{}", 2, &r);
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "{\"Capabilities\":{\"Scope\":\"local\"}}");
	free(r.body);
	api_handle(NULL, "POST", "/Plugin.Activate", "", 0, &r);
	cr_expect_str_eq(r.body, "{\"Implements\":[\"VolumeDriver\"]}");
	free(r.body);
	api_handle(NULL, "POST", "/VolumeDriver.Nope", "", 0, &r);
	cr_expect_eq(r.status, 404);
	cr_expect(strstr(r.body, "\"Err\""));
	free(r.body);
}
