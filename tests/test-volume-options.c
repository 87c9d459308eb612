/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "volume/volume-options.h"

static int parse(const char *json, VolumeOptions *o, char **err)
{
	json_t *j = json_loads(json, 0, NULL);
	int r = volume_options_parse(j, o, err);
	json_decref(j);
	return r;
}

Test(options, names_follow_the_documented_pattern)
{
	static const char *const bad[] = { "a", ".", "..", "...", "./x", "../x", "x/../../y", "/abs", "/", "a/b", "~",
					   ".hidden", "-x", "_x", "a b", "a\tb", "a\nb", "a:b", "a\\b", "%2e%2e", "\303\2741", "" };
	static const char *const good[] = { "ab", "name", "name-with-dash", "name_with_underscore", "thing.d",
					    "hello-world", "A1", "a..b", "0123456789abcdef" };
	char n128[129], n129[130];

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		cr_expect_not(volume_name_is_valid(bad[i]), "accepted '%s'", bad[i]);
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		cr_expect(volume_name_is_valid(good[i]), "rejected '%s'", good[i]);
	memset(n128, 'a', 128);
	n128[128] = 0;
	memset(n129, 'a', 129);
	n129[129] = 0;
	cr_expect(volume_name_is_valid(n128));
	cr_expect_not(volume_name_is_valid(n129));
	cr_expect_not(volume_name_is_valid(NULL));
}

Test(options, parse_all_keys_and_canonical_form)
{
	VolumeOptions o;
	char *err = NULL;
	json_t *c;

	cr_assert_eq(parse("{\"partition\":\"nvmevol-fast0\",\"uid\":\"999\",\"gid\":\"998\",\"mode\":\"700\","
			   "\"size\":\"10240M\",\"inodes\":\"1000\",\"selftest\":\"enforce\",\"min_write_mbps\":\"100\","
			   "\"min_read_mbps\":\"200.5\",\"min_iops\":\"5000\",\"max_p99_ms\":\"2\"}", &o, &err), 0, "%s", err);
	cr_expect_str_eq(o.partition, "nvmevol-fast0");
	cr_expect(o.has_uid && o.uid == 999);
	cr_expect(o.has_gid && o.gid == 998);
	cr_expect(o.has_mode && o.mode == 0700);
	cr_expect_eq(o.size_bytes, 10ULL << 30);
	cr_expect_eq(o.inodes, 1000);
	cr_expect_eq(o.selftest, SELFTEST_POLICY_ENFORCE);
	cr_expect(o.thresholds.min_read_mbps > 200.4 && o.thresholds.min_read_mbps < 200.6);
	c = volume_options_to_json(&o);
	cr_expect_str_eq(json_string_value(json_object_get(c, "mode")), "0700");
	cr_expect_str_eq(json_string_value(json_object_get(c, "size")), "10G");
	json_decref(c);
}

Test(options, null_empty_and_absent_opts_are_fine)
{
	VolumeOptions o;

	cr_expect_eq(volume_options_parse(NULL, &o, NULL), 0);
	cr_expect_eq(parse("{}", &o, NULL), 0);
	json_t *n = json_null();
	cr_expect_eq(volume_options_parse(n, &o, NULL), 0);
	json_decref(n);
	cr_expect_not(o.has_uid);
}

Test(options, bad_values_name_the_problem)
{
	static const char *const bad[][2] = {
		{ "{\"bogus\":\"1\"}", "valid options" }, { "{\"uid\":\"-1\"}", "uid" },
		{ "{\"uid\":\"4294967295\"}", "uid" }, { "{\"gid\":\"x\"}", "gid" }, { "{\"mode\":\"8\"}", "mode" },
		{ "{\"mode\":\"17777\"}", "mode" }, { "{\"size\":\"abc\"}", "size" }, { "{\"size\":\"10X\"}", "size" },
		{ "{\"size\":\"1.5G\"}", "size" }, { "{\"size\":\"99999999999999999999T\"}", "size" },
		{ "{\"size\":\"100K\"}", "smallest" }, { "{\"size\":\"\"}", "size" }, { "{\"inodes\":\"0\"}", "inodes" },
		{ "{\"selftest\":\"on\"}", "selftest" }, { "{\"selftest\":\"default\"}", "selftest" },
		{ "{\"min_iops\":\"-5\"}", "min_iops" }, { "{\"max_p99_ms\":\"1e3\"}", "max_p99_ms" },
		{ "{\"uid\":5}", "string" }, { "[]", "object" }, { "{\"partition\":\"a b\"}", "partition" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		VolumeOptions o;
		char *err = NULL;
		json_t *j = json_loads(bad[i][0], JSON_DECODE_ANY, NULL);
		cr_expect_lt(volume_options_parse(j, &o, &err), 0, "accepted %s", bad[i][0]);
		cr_expect(err && strstr(err, bad[i][1]), "Err for %s does not mention '%s': %s", bad[i][0], bad[i][1], err);
		free(err);
		json_decref(j);
	}
}

Test(options, diff_names_each_difference)
{
	VolumeOptions a, b;
	char *d;

	cr_assert_eq(parse("{\"uid\":\"1\",\"mode\":\"0700\"}", &a, NULL), 0);
	cr_assert_eq(parse("{\"uid\":\"1\",\"mode\":\"700\"}", &b, NULL), 0);
	cr_expect_null(volume_options_diff(&a, &b), "equal after canonicalisation");
	cr_assert_eq(parse("{\"uid\":\"2\",\"gid\":\"3\"}", &b, NULL), 0);
	d = volume_options_diff(&a, &b);
	cr_assert_not_null(d);
	cr_expect(strstr(d, "uid: 1 (existing) vs 2 (requested)"), "%s", d);
	cr_expect(strstr(d, "mode: 0700 (existing) vs not set (requested)"), "%s", d);
	cr_expect(strstr(d, "gid: not set (existing) vs 3 (requested)"), "%s", d);
	free(d);
}

Test(options, node_is_a_host_name_in_lower_case)
{
	static const char *const bad[] = { "", "-w1", ".w1", "_w1", "w 1", "w1/x", "w1:2377", "w1,w2",
					   "node.hostname==w1" };
	VolumeOptions a, b;
	char *err = NULL, long_name[80], json[160];
	json_t *c;

	cr_assert_eq(parse("{\"node\":\"Swarm-W1.example_lab\"}", &a, &err), 0, "%s", err);
	cr_expect_str_eq(a.node, "swarm-w1.example_lab");
	c = volume_options_to_json(&a);
	cr_expect_str_eq(json_string_value(json_object_get(c, "node")), "swarm-w1.example_lab");
	json_decref(c);
	/* Host names compare without case (as swarm's node.hostname constraints do): no difference. */
	cr_assert_eq(parse("{\"node\":\"swarm-w1.EXAMPLE_lab\"}", &b, NULL), 0);
	cr_expect_null(volume_options_diff(&a, &b));
	cr_assert_eq(parse("{\"node\":\"w2\"}", &b, NULL), 0);
	char *d = volume_options_diff(&a, &b);
	cr_expect(d && strstr(d, "node: swarm-w1.example_lab (existing) vs w2 (requested)"), "%s", d);
	free(d);
	cr_assert_eq(parse("{}", &b, NULL), 0);
	cr_expect_eq(b.node[0], '\0', "no node option: any node");

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(json, sizeof(json), "{\"node\":\"%s\"}", bad[i]);
		err = NULL;
		cr_expect_lt(parse(json, &a, &err), 0, "accepted node '%s'", bad[i]);
		cr_expect(err && strstr(err, "invalid node") && strstr(err, "docker node ls"), "Err for '%s': %s", bad[i],
			  err);
		free(err);
	}
	memset(long_name, 'a', 64);
	long_name[64] = '\0';
	snprintf(json, sizeof(json), "{\"node\":\"%s\"}", long_name);
	cr_expect_eq(parse(json, &a, NULL), 0, "64 characters (HOST_NAME_MAX) are allowed");
	long_name[64] = 'a';
	long_name[65] = '\0';
	snprintf(json, sizeof(json), "{\"node\":\"%s\"}", long_name);
	cr_expect_lt(parse(json, &a, NULL), 0, "65 characters are not");
}

Test(options, relative_thresholds_parse_range_and_canonical_form)
{
	static const char *const bad[][2] = {
		{ "{\"min_write_ratio\":\"0\"}", "from 0.01 to 1" }, { "{\"min_write_ratio\":\"1.5\"}", "share of the partition's baseline" },
		{ "{\"min_read_ratio\":\"0.005\"}", "min_read_ratio" }, { "{\"min_iops_ratio\":\"0.7x\"}", "min_iops_ratio=0.7" },
		{ "{\"max_p99_ratio\":\"0.5\"}", "multiple of the partition's baseline from 1 to 1000" },
		{ "{\"max_p99_ratio\":\"1001\"}", "max_p99_ratio" }, { "{\"min_write_ratio\":\"0.1234\"}", "3 decimals" },
	};
	VolumeOptions o;
	char *err = NULL;
	json_t *c;

	cr_assert_eq(parse("{\"min_write_ratio\":\"0.7\",\"min_read_ratio\":\"0.75\",\"min_iops_ratio\":\"1\","
			   "\"max_p99_ratio\":\"3\"}", &o, &err), 0, "%s", err);
	cr_expect_float_eq(o.thresholds.min_write_ratio, 0.7, 1e-12);
	cr_expect_float_eq(o.thresholds.min_read_ratio, 0.75, 1e-12);
	cr_expect_float_eq(o.thresholds.min_iops_ratio, 1, 1e-12);
	cr_expect_float_eq(o.thresholds.max_p99_ratio, 3, 1e-12);
	c = volume_options_to_json(&o);
	cr_expect_str_eq(json_string_value(json_object_get(c, "min_write_ratio")), "0.7");
	cr_expect_str_eq(json_string_value(json_object_get(c, "max_p99_ratio")), "3");
	json_decref(c);

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		json_t *j = json_loads(bad[i][0], 0, NULL);
		cr_expect_lt(volume_options_parse(j, &o, &err), 0, "accepted %s", bad[i][0]);
		cr_expect(err && strstr(err, bad[i][1]), "Err for %s does not mention '%s': %s", bad[i][0], bad[i][1], err);
		free(err);
		err = NULL;
		json_decref(j);
	}
}

Test(options, threshold_parse_and_merge)
{
	SelftestThresholds pool = {}, vol = {};
	char *err = NULL;

	cr_expect_eq(selftest_threshold_parse("min_write_ratio", "0.7", &pool, &err), 0);
	cr_expect_eq(selftest_threshold_parse("max_p99_ratio", "4", &pool, &err), 0);
	cr_expect_eq(selftest_threshold_parse("uid", "4", &pool, &err), -ENOENT);
	cr_expect_null(err);
	cr_expect_eq(selftest_threshold_parse("min_iops", "50", &vol, &err), 0);
	cr_expect_eq(selftest_threshold_parse("max_p99_ratio", "2", &vol, &err), 0);
	/* The volume's own setting wins; the pool's fills what the volume leaves unset. */
	selftest_thresholds_merge(&pool, &vol);
	cr_expect_float_eq(pool.min_write_ratio, 0.7, 1e-12);
	cr_expect_float_eq(pool.max_p99_ratio, 2, 1e-12);
	cr_expect_float_eq(pool.min_iops, 50, 1e-12);
	cr_expect_eq(pool.min_read_ratio, 0);
}

Test(options, from_and_clone_copy_are_create_requests_not_options)
{
	json_t *j = json_loads("{\"from\":\"pgdata\",\"clone_copy\":\"true\",\"mode\":\"0700\"}", 0, NULL);
	VolumeOptions o;
	CloneRequest c;
	char *err = NULL, *canon;

	cr_assert_eq(volume_options_parse_create(j, &o, &c, &err), 0, "%s", err);
	cr_expect_str_eq(c.from, "pgdata");
	cr_expect(c.copy);
	/* Not part of the volume's options: records and their canonical form never carry them. */
	{
		json_t *oj = volume_options_to_json(&o);
		canon = json_dumps(oj, JSON_COMPACT | JSON_SORT_KEYS);
		json_decref(oj);
	}
	cr_expect_str_eq(canon, "{\"mode\":\"0700\"}");
	free(canon);
	cr_expect_lt(volume_options_parse(j, &o, &err), 0, "a record may not hold from=");
	cr_expect(err && strstr(err, "unknown option") != NULL, "%s", err);
	json_decref(j);

	const char *bad[][2] = {
		{ "{\"from\":\"-x\"}", "invalid from" },
		{ "{\"from\":\"a/b\"}", "invalid from" },
		{ "{\"from\":\"x\"}", "invalid from" },
		{ "{\"from\":\"ok\",\"clone_copy\":\"yes\"}", "invalid clone_copy" },
		{ "{\"clone_copy\":\"false\"}", "add from=SOURCE" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		j = json_loads(bad[i][0], 0, NULL);
		free(err);
		err = NULL;
		cr_expect_lt(volume_options_parse_create(j, &o, &c, &err), 0, "accepted %s", bad[i][0]);
		cr_expect(err && strstr(err, bad[i][1]), "Err for %s does not mention '%s': %s", bad[i][0], bad[i][1], err);
		json_decref(j);
	}
	free(err);
}
