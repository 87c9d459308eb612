/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the pure parts of the admin side: the admin request parser,
 * option changes, the HTTP reply decoder of the command line, Docker's plugin
 * list, the state location decision and the text tables.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin.h"
#include "cli/docker-client.h"
#include "cli/http-client.h"
#include "volume/volume-options.h"
#include "daemon/statedir.h"
#include "util/table.h"

/* ---- admin requests ---- */

static int parse(const char *path, const char *body, AdminRequest *req, unsigned *status, char **err)
{
	free(*err);
	*err = NULL;
	admin_request_done(req);
	return admin_request_parse("POST", path, body, strlen(body), req, status, err);
}

Test(admin_parse, valid_requests)
{
	AdminRequest req = { 0 };
	unsigned status = 0;
	char *err = NULL;

	cr_assert_eq(parse("/Admin.Status", "", &req, &status, &err), 0, "%s", err);
	cr_assert_eq(req.endpoint, ADMIN_STATUS);
	cr_assert_eq(parse("/Admin.VolumeShow", "{\"Name\":\"pgdata\"}", &req, &status, &err), 0);
	cr_assert_str_eq(req.name, "pgdata");
	cr_assert_eq(parse("/Admin.VolumeResize", "{\"Name\":\"v1\",\"Changes\":{\"size\":\"20G\"}}", &req, &status, &err), 0);
	cr_assert_str_eq(json_string_value(json_object_get(req.changes, "size")), "20G");
	cr_assert_eq(parse("/Admin.VolumeRelease", "{\"Name\":\"v1\",\"Expect\":{\"abc\":2}}", &req, &status, &err), 0);
	cr_assert_eq(json_integer_value(json_object_get(req.expect, "abc")), 2);
	cr_assert_eq(parse("/Admin.VolumeRelease", "{\"Name\":\"v1\",\"Expect\":{}}", &req, &status, &err), 0);
	cr_assert_eq(parse("/Admin.PartitionAdopt", "{\"Partition\":\"nvmevol-fast0\"}", &req, &status, &err), 0);
	cr_assert_str_eq(req.partition, "nvmevol-fast0");
	cr_assert_eq(parse("/Admin.StateImport", "{\"Entries\":[{\"Name\":\"v1\",\"Record\":\"{}\"}]}", &req, &status, &err), 0);
	cr_assert_eq(json_array_size(req.entries), 1);
	admin_request_done(&req);
	cr_assert_eq(parse("/Admin.PartitionCordon", "{\"Partition\":\"nvmevol-fast0\"}", &req, &status, &err), 0);
	cr_assert_eq(req.endpoint, ADMIN_PARTITION_CORDON);
	admin_request_done(&req);
	cr_assert_eq(parse("/Admin.PartitionEvacuate", "{\"Partition\":\"fast0\",\"To\":\"fast1\"}", &req, &status, &err), 0);
	cr_assert_str_eq(req.to, "fast1");
	admin_request_done(&req);
	cr_assert_eq(parse("/Admin.PartitionEvacuate", "{\"Partition\":\"fast0\"}", &req, &status, &err), 0);
	cr_assert_null(req.to);
	admin_request_done(&req);
	cr_assert_eq(parse("/Admin.VolumeFence", "{\"Name\":\"v1\",\"Host\":\"node2\"}", &req, &status, &err), 0);
	cr_assert_str_eq(req.host, "node2");
	admin_request_done(&req);
	free(err);
}

Test(admin_parse, refusals_with_status_and_reason)
{
	static const struct {
		const char *path, *body;
		unsigned status;
		const char *says;
	} bad[] = {
		{ "/Admin.Nope", "{}", 404, "unknown admin endpoint" },
		{ "/VolumeDriver.Create", "{}", 404, "unknown admin endpoint" },
		{ "/Admin.Status", "[]", 400, "JSON object" },
		{ "/Admin.Status", "{", 400, "malformed JSON" },
		{ "/Admin.VolumeShow", "{}", 400, "'Name'" },
		{ "/Admin.VolumeShow", "{\"Name\":\"../x\"}", 400, "'Name'" },
		{ "/Admin.VolumeShow", "{\"Name\":\"a\\u0000b\"}", 400, "malformed JSON" },
		{ "/Admin.VolumeShow", "{\"Name\":\"ab\",\"Name\":\"cd\"}", 400, "duplicate" },
		{ "/Admin.VolumeResize", "{\"Name\":\"v1\"}", 400, "'Changes'" },
		{ "/Admin.VolumeResize", "{\"Name\":\"v1\",\"Changes\":{}}", 400, "'Changes'" },
		{ "/Admin.VolumeSet", "{\"Name\":\"v1\",\"Changes\":{\"selftest\":1}}", 400, "must be a string" },
		{ "/Admin.VolumeRelease", "{\"Name\":\"v1\"}", 400, "'Expect'" },
		{ "/Admin.VolumeRelease", "{\"Name\":\"v1\",\"Expect\":{\"a\":0}}", 400, "'Expect'" },
		{ "/Admin.VolumeRelease", "{\"Name\":\"v1\",\"Expect\":{\"a\":\"1\"}}", 400, "'Expect'" },
		{ "/Admin.VolumeRelease", "{\"Name\":\"v1\",\"Expect\":{\"\":1}}", 400, "'Expect'" },
		{ "/Admin.PartitionAdopt", "{}", 400, "'Partition'" },
		{ "/Admin.PartitionAdopt", "{\"Partition\":\"a/b\"}", 400, "'Partition'" },
		{ "/Admin.PartitionAdopt", "{\"Partition\":\"\"}", 400, "'Partition'" },
		{ "/Admin.PartitionCordon", "{}", 400, "'Partition'" },
		{ "/Admin.PartitionUncordon", "{\"Partition\":\"a,b\"}", 400, "'Partition'" },
		{ "/Admin.PartitionEvacuate", "{\"Partition\":\"p\",\"To\":\"a/b\"}", 400, "'To'" },
		{ "/Admin.PartitionEvacuate", "{\"Partition\":\"p\",\"To\":7}", 400, "'To'" },
		{ "/Admin.VolumeFence", "{\"Name\":\"v1\"}", 400, "'Host'" },
		{ "/Admin.VolumeFence", "{\"Name\":\"v1\",\"Host\":\"a b\"}", 400, "'Host'" },
		{ "/Admin.VolumeFence", "{\"Name\":\"v1\",\"Host\":\"\"}", 400, "'Host'" },
		{ "/Admin.VolumeFence", "{\"Host\":\"n2\"}", 400, "'Name'" },
		{ "/Admin.VolumeUnfence", "{}", 400, "'Name'" },
		{ "/Admin.StateImport", "{\"Entries\":{}}", 400, "'Entries'" },
		{ "/Admin.StateImport", "{\"Entries\":[{\"Name\":\"v1\"}]}", 400, "entry 0" },
		{ "/Admin.StateImport", "{\"Entries\":[{\"Name\":\"/x\",\"Record\":\"\"}]}", 400, "invalid volume name" },
	};
	AdminRequest req = { 0 };
	unsigned status;
	char *err = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		status = 0;
		cr_assert_lt(parse(bad[i].path, bad[i].body, &req, &status, &err), 0, "%s %s accepted", bad[i].path, bad[i].body);
		cr_assert_eq(status, bad[i].status, "%s %s: %u", bad[i].path, bad[i].body, status);
		cr_assert(err && strstr(err, bad[i].says), "%s %s: %s", bad[i].path, bad[i].body, err ? err : "(none)");
	}
	cr_assert_lt(admin_request_parse("GET", "/Admin.Status", "", 0, &req, &status, &err), 0);
	cr_assert_eq(status, 405);
	cr_assert_lt(admin_request_parse("POST", "/Admin.Status", "{}", 70000, &req, &status, &err), 0);
	cr_assert_eq(status, 413);
	free(err);
}

Test(admin_parse, too_many_import_entries)
{
	AdminRequest req = { 0 };
	unsigned status = 0;
	char *err = NULL, *body = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&body, &len);

	fputs("{\"Entries\":[", f);
	for (int i = 0; i <= ADMIN_IMPORT_MAX_ENTRIES; i++)
		fprintf(f, "%s{\"Name\":\"v%d\",\"Record\":\"\"}", i ? "," : "", i);
	fputs("]}", f);
	fclose(f);
	cr_assert_lt(admin_request_parse("POST", "/Admin.StateImport", body, len, &req, &status, &err), 0);
	free(body);
	free(err);
}

/* ---- option changes ---- */

static const char *const set_keys[] = { "selftest", "min_write_mbps", "min_read_mbps", "min_iops", "max_p99_ms",
					"suid", "dev", NULL };
static const char *const resize_keys[] = { "size", "inodes", NULL };

Test(options_change, suid_and_dev_are_set_cleared_and_checked)
{
	VolumeOptions cur = { .allow_devices = true }, out;
	char *err = NULL;
	json_t *c;

	c = json_pack("{s:s}", "suid", "true");
	cr_assert_eq(volume_options_change(&cur, c, set_keys, &out, &err), 0, "%s", err);
	json_decref(c);
	cr_assert(out.allow_suid && out.allow_devices, "untouched dev keeps its value");
	c = json_pack("{s:s,s:s}", "suid", "false", "dev", "none");
	cr_assert_eq(volume_options_change(&cur, c, set_keys, &out, &err), 0, "%s", err);
	json_decref(c);
	cr_assert(!out.allow_suid && !out.allow_devices);
	c = json_pack("{s:s}", "dev", "yes");
	cr_assert_lt(volume_options_change(&cur, c, set_keys, &out, &err), 0);
	cr_assert(strstr(err, "true or false"), "%s", err);
	json_decref(c);
	free(err);
	err = NULL;
	c = json_pack("{s:s}", "suid", "true");
	cr_assert_lt(volume_options_change(&cur, c, resize_keys, &out, &err), 0, "resize does not grant suid");
	json_decref(c);
	free(err);
}

Test(options_change, merges_validates_and_clears)
{
	VolumeOptions cur = { .has_uid = true, .uid = 999, .size_bytes = 10 << 20, .selftest = SELFTEST_POLICY_WARN,
			      .thresholds = { .min_iops = 100 } },
		      out;
	char *err = NULL;
	json_t *c;

	c = json_pack("{s:s,s:s}", "selftest", "enforce", "min_write_mbps", "250.5");
	cr_assert_eq(volume_options_change(&cur, c, set_keys, &out, &err), 0, "%s", err);
	json_decref(c);
	cr_assert_eq(out.selftest, SELFTEST_POLICY_ENFORCE);
	cr_assert_float_eq(out.thresholds.min_write_mbps, 250.5, 1e-9);
	cr_assert_float_eq(out.thresholds.min_iops, 100, 1e-9, "untouched keys keep their value");
	cr_assert_eq(out.uid, 999);
	cr_assert_eq(out.size_bytes, 10u << 20);

	c = json_pack("{s:s,s:s}", "selftest", "none", "min_iops", "none");
	cr_assert_eq(volume_options_change(&cur, c, set_keys, &out, &err), 0, "%s", err);
	json_decref(c);
	cr_assert_eq(out.selftest, SELFTEST_POLICY_UNSET);
	cr_assert_float_eq(out.thresholds.min_iops, 0, 1e-9);

	c = json_pack("{s:s,s:s}", "size", "20G", "inodes", "none");
	cr_assert_eq(volume_options_change(&cur, c, resize_keys, &out, &err), 0, "%s", err);
	json_decref(c);
	cr_assert_eq(out.size_bytes, 20ull << 30);
	cr_assert_eq(out.inodes, 0);

	/* Refused: keys of the other command, bad values, nothing at all. */
	c = json_pack("{s:s}", "size", "20G");
	cr_assert_lt(volume_options_change(&cur, c, set_keys, &out, &err), 0);
	cr_assert(strstr(err, "'size' cannot be changed here; this command changes: selftest, min_write_mbps"), "%s", err);
	json_decref(c);
	c = json_pack("{s:s}", "size", "512K");
	cr_assert_lt(volume_options_change(&cur, c, resize_keys, &out, &err), 0);
	cr_assert(strstr(err, "smallest limit is 1M"), "%s", err);
	json_decref(c);
	c = json_pack("{s:s}", "min_iops", "fast");
	cr_assert_lt(volume_options_change(&cur, c, set_keys, &out, &err), 0);
	json_decref(c);
	c = json_object();
	cr_assert_lt(volume_options_change(&cur, c, set_keys, &out, &err), 0);
	json_decref(c);
	free(err);
}

/* ---- the command line's HTTP replies ---- */

Test(http_client, parses_length_chunked_and_eof_bodies)
{
	HttpClientReply r;
	const char *cl = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 7\r\n\r\n{\"a\":1}trailing";
	const char *ch = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"Er\r\n8;ext=1\r\nr\":\"no\"}\r\n0\r\n\r\n";
	const char *eof = "HTTP/1.0 500 Internal\r\nConnection: close\r\n\r\nplain text";

	cr_assert_eq(http_client_parse_reply(cl, strlen(cl), &r), 0);
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "{\"a\":1}");
	http_client_reply_done(&r);
	cr_assert_eq(http_client_parse_reply(ch, strlen(ch), &r), 0);
	cr_assert_eq(r.status, 404);
	cr_assert_str_eq(r.body, "{\"Err\":\"no\"}");
	http_client_reply_done(&r);
	cr_assert_eq(http_client_parse_reply(eof, strlen(eof), &r), 0);
	cr_assert_eq(r.status, 500);
	cr_assert_str_eq(r.body, "plain text");
	http_client_reply_done(&r);
}

Test(http_client, refuses_malformed_replies)
{
	static const char *const bad[] = {
		"",
		"HTTP/1.1 200 OK\r\n",
		"HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 9xx OK\r\n\r\n",
		"HTTP/1.1 4\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab\r\n0\r\n\r\n",
	};
	HttpClientReply r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_lt(http_client_parse_reply(bad[i], strlen(bad[i]), &r), 0, "accepted: %s", bad[i]);
}

/* ---- Docker ---- */

Test(docker, plugins_of_nvmevol_only)
{
	const char *list =
		"[{\"Id\":\"" "0123456789012345678901234567890123456789012345678901234567890123" "\",\"Name\":\"nvmevol:latest\","
		"\"Enabled\":true,\"PluginReference\":\"localhost:5000/nvmevol:0.2.0\",\"Config\":{\"Entrypoint\":[\"/usr/bin/nvmevol\"],"
		"\"Mounts\":[{\"Name\":\"dev\",\"Source\":\"/dev\"},{\"Name\":\"state\",\"Source\":\"/srv/nv\"}]}},"
		"{\"Id\":\"" "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789" "\",\"Name\":\"other:latest\","
		"\"Enabled\":true,\"Config\":{\"Entrypoint\":[\"/bin/other\"]}},"
		"{\"Id\":\"" "1111111111111111111111111111111111111111111111111111111111111111" "\",\"Name\":\"nv2:1\","
		"\"Enabled\":false,\"Config\":{\"Entrypoint\":[\"/usr/bin/nvmevol\"]}}]";
	json_t *j = json_loads(list, 0, NULL);
	DockerPlugin *p = NULL;
	size_t n = 0;

	cr_assert_not_null(j);
	cr_assert_eq(docker_plugins_parse(j, &p, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(p[0].name, "nvmevol:latest");
	cr_assert(p[0].enabled);
	cr_assert_str_eq(p[0].state_source, "/srv/nv");
	cr_assert_str_eq(p[0].reference, "localhost:5000/nvmevol:0.2.0");
	cr_assert_str_eq(p[1].name, "nv2:1");
	cr_assert(!p[1].enabled);
	cr_assert_null(p[1].state_source);
	docker_plugins_free(p, n);
	json_decref(j);

	j = json_loads("{}", 0, NULL);
	cr_assert_lt(docker_plugins_parse(j, &p, &n), 0);
	json_decref(j);
	j = json_loads("[{\"Id\":\"short\",\"Name\":\"x\",\"Config\":{\"Entrypoint\":[\"/usr/bin/nvmevol\"]}}]", 0, NULL);
	cr_assert_lt(docker_plugins_parse(j, &p, &n), 0);
	json_decref(j);
}

Test(docker, plugin_names_as_docker_writes_them)
{
	static const char *const cases[][2] = {
		{ "nvmevol", "nvmevol:latest" },
		{ "nvmevol:0.2", "nvmevol:0.2" },
		{ "localhost:5000/nvmevol", "localhost:5000/nvmevol:latest" },
		{ "localhost:5000/nvmevol:1", "localhost:5000/nvmevol:1" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *n = docker_plugin_name_normalize(cases[i][0]);
		cr_assert_str_eq(n, cases[i][1]);
		free(n);
	}
}

/* ---- where the state lives ---- */

Test(statedir, decision)
{
	/* The default source /dev: Docker's plugin directory. */
	cr_assert_eq(statedir_decide(true, true, true), STATE_LOCATION_PLUGIN_DIR);
	/* state.source set to a directory: a mount of its own. */
	cr_assert_eq(statedir_decide(true, false, true), STATE_LOCATION_MOUNT);
	/* Outside Docker: the host's /var/lib/nvmevol, created if missing. */
	cr_assert_eq(statedir_decide(true, false, false), STATE_LOCATION_HOST);
	cr_assert_eq(statedir_decide(false, false, false), STATE_LOCATION_HOST);
	cr_assert_str_eq(state_location_to_string(STATE_LOCATION_PLUGIN_DIR), "plugin-directory");
	cr_assert_str_eq(state_location_to_string(STATE_LOCATION_MOUNT), "state.source");
}

/* ---- tables ---- */

Test(table, pads_columns_and_prints_dashes)
{
	static const char *const head[] = { "NAME", "STATE", "SIZE", NULL };
	Table *t = table_new(head);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_eq(table_add_row(t, (const char *const[]){ "pgdata", "mounted", "10.0 GiB" }), 0);
	cr_assert_eq(table_add_row(t, (const char *const[]){ "a", NULL, "1 B" }), 0);
	table_print(t, f);
	fclose(f);
	cr_assert_str_eq(buf, "NAME    STATE    SIZE\npgdata  mounted  10.0 GiB\na       -        1 B\n");
	free(buf);
	table_free(t);
}
