/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/admin.h"
#include "metrics/metrics.h"
#include "volume/nodepin.h"
#include "volume/volume.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const endpoint_paths[_ADMIN_ENDPOINT_MAX] = {
	[ADMIN_STATUS] = ADMIN_PATH_STATUS,
	[ADMIN_VOLUME_SHOW] = ADMIN_PATH_VOLUME_SHOW,
	[ADMIN_VOLUME_RESIZE] = ADMIN_PATH_VOLUME_RESIZE,
	[ADMIN_VOLUME_SET] = ADMIN_PATH_VOLUME_SET,
	[ADMIN_VOLUME_FORGET] = ADMIN_PATH_VOLUME_FORGET,
	[ADMIN_VOLUME_RELEASE] = ADMIN_PATH_VOLUME_RELEASE,
	[ADMIN_PARTITION_ADOPT] = ADMIN_PATH_PARTITION_ADOPT,
	[ADMIN_STATE_IMPORT] = ADMIN_PATH_STATE_IMPORT,
	[ADMIN_VOLUME_SNAPSHOT] = ADMIN_PATH_VOLUME_SNAPSHOT,
	[ADMIN_VOLUME_SNAPSHOTS] = ADMIN_PATH_VOLUME_SNAPSHOTS,
	[ADMIN_VOLUME_SNAPSHOT_REMOVE] = ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE,
	[ADMIN_VOLUME_ROLLBACK] = ADMIN_PATH_VOLUME_ROLLBACK,
	[ADMIN_VOLUME_EXPORT_OPEN] = ADMIN_PATH_VOLUME_EXPORT_OPEN,
	[ADMIN_VOLUME_EXPORT_CLOSE] = ADMIN_PATH_VOLUME_EXPORT_CLOSE,
	[ADMIN_VOLUME_IMPORT_OPEN] = ADMIN_PATH_VOLUME_IMPORT_OPEN,
	[ADMIN_VOLUME_IMPORT_COMMIT] = ADMIN_PATH_VOLUME_IMPORT_COMMIT,
	[ADMIN_VOLUME_IMPORT_ABORT] = ADMIN_PATH_VOLUME_IMPORT_ABORT,
	[ADMIN_PARTITION_CORDON] = ADMIN_PATH_PARTITION_CORDON,
	[ADMIN_PARTITION_UNCORDON] = ADMIN_PATH_PARTITION_UNCORDON,
	[ADMIN_PARTITION_EVACUATE] = ADMIN_PATH_PARTITION_EVACUATE,
	[ADMIN_VOLUME_FENCE] = ADMIN_PATH_VOLUME_FENCE,
	[ADMIN_VOLUME_UNFENCE] = ADMIN_PATH_VOLUME_UNFENCE,
	[ADMIN_VOLUME_RECEIVE_OPEN] = ADMIN_PATH_VOLUME_RECEIVE_OPEN,
	[ADMIN_VOLUME_RECEIVE_COMMIT] = ADMIN_PATH_VOLUME_RECEIVE_COMMIT,
	[ADMIN_VOLUME_RECEIVE_ABORT] = ADMIN_PATH_VOLUME_RECEIVE_ABORT,
};

const char *admin_endpoint_to_path(AdminEndpoint e)
{
	return e >= 0 && e < _ADMIN_ENDPOINT_MAX ? endpoint_paths[e] : NULL;
}

AdminEndpoint admin_endpoint_from_path(const char *path)
{
	for (int i = 0; i < _ADMIN_ENDPOINT_MAX; i++)
		if (path && streq(path, endpoint_paths[i]))
			return (AdminEndpoint)i;
	return _ADMIN_ENDPOINT_INVALID;
}

void admin_request_done(AdminRequest *req)
{
	free(req->name);
	free(req->partition);
	free(req->snapshot);
	free(req->token);
	free(req->to);
	free(req->host);
	json_decref(req->changes);
	json_decref(req->expect);
	json_decref(req->entries);
	json_decref(req->options);
	free(req->base);
	free(req->id);
	*req = (AdminRequest){ 0 };
}

static int refuse(unsigned status, unsigned *ret_status, char **reterr_msg, int r, const char *fmt, ...) _printf_(5, 6);
static int refuse(unsigned status, unsigned *ret_status, char **reterr_msg, int r, const char *fmt, ...)
{
	va_list ap;

	*ret_status = status;
	va_start(ap, fmt);
	r = errmsg_setv(reterr_msg, r, fmt, ap);
	va_end(ap);
	return r;
}

/* A label or UUID as the CLI passes it: printable, no separators, as a partition= option. */
static bool partition_ref_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > PARTITION_REF_MAX || !string_is_printable_ascii(s))
		return false;
	return !strpbrk(s, " /,=");
}

static bool has_name(AdminEndpoint e)
{
	return e == ADMIN_VOLUME_SHOW || e == ADMIN_VOLUME_RESIZE || e == ADMIN_VOLUME_SET || e == ADMIN_VOLUME_FORGET ||
	       e == ADMIN_VOLUME_RELEASE || e == ADMIN_VOLUME_SNAPSHOT || e == ADMIN_VOLUME_SNAPSHOTS ||
	       e == ADMIN_VOLUME_SNAPSHOT_REMOVE || e == ADMIN_VOLUME_ROLLBACK || e == ADMIN_VOLUME_EXPORT_OPEN ||
	       e == ADMIN_VOLUME_EXPORT_CLOSE || e == ADMIN_VOLUME_IMPORT_OPEN || e == ADMIN_VOLUME_IMPORT_COMMIT ||
	       e == ADMIN_VOLUME_IMPORT_ABORT || e == ADMIN_VOLUME_FENCE || e == ADMIN_VOLUME_UNFENCE ||
	       e == ADMIN_VOLUME_RECEIVE_OPEN || e == ADMIN_VOLUME_RECEIVE_COMMIT ||
	       e == ADMIN_VOLUME_RECEIVE_ABORT;
}

/* A snapshot ID ("Base", "Id"): 32 lower-case hex digits; required unless @optional. */
static int parse_id(json_t *j, const char *key, bool optional, char **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, key);
	const char *t = json_string_value(f);

	if (!f && optional)
		return 0;
	if (!t || json_string_length(f) != 32 || strspn(t, "0123456789abcdef") != 32)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "missing or invalid '%s': a snapshot ID of 32 hex digits",
			      key);
	*ret = strdup(t);
	return *ret ? 0 : -ENOMEM;
}

/* "Options": an object of strings, as Docker's Opts (checked by the manager), or absent. */
static int parse_options(json_t *j, json_t **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *o = json_object_get(j, "Options"), *v;
	const char *key;

	if (!o)
		return 0;
	if (!json_is_object(o))
		return refuse(400, ret_status, reterr_msg, -EINVAL, "'Options' must be an object of strings");
	json_object_foreach(o, key, v)
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return refuse(400, ret_status, reterr_msg, -EINVAL, "option '%.64s' must be a string", key);
	*ret = json_incref(o);
	return 0;
}

static int parse_partition_field(json_t *j, const char *key, bool optional, char **ret, unsigned *ret_status,
				 char **reterr_msg)
{
	json_t *f = json_object_get(j, key);

	if (!f && optional)
		return 0;
	if (!json_is_string(f) || strlen(json_string_value(f)) != json_string_length(f) ||
	    !partition_ref_ok(json_string_value(f)))
		return refuse(400, ret_status, reterr_msg, -EINVAL, "missing or invalid '%s': give a label or UUID", key);
	*ret = strdup(json_string_value(f));
	return *ret ? 0 : -ENOMEM;
}

/* A host name as a move names the other node: printable, no spaces, at most ADMIN_FENCE_HOST_MAX bytes. */
static int parse_host(json_t *j, char **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, "Host");
	const char *h = json_string_value(f);

	if (!h || strlen(h) != json_string_length(f) || strlen(h) == 0 || strlen(h) > ADMIN_FENCE_HOST_MAX ||
	    !string_is_printable_ascii(h) || strchr(h, ' '))
		return refuse(400, ret_status, reterr_msg, -EINVAL,
			      "missing or invalid 'Host': 1 to %d printable characters without spaces", ADMIN_FENCE_HOST_MAX);
	*ret = strdup(h);
	return *ret ? 0 : -ENOMEM;
}

static int parse_partition(json_t *j, char **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, "Partition");

	if (!json_is_string(f) || strlen(json_string_value(f)) != json_string_length(f) ||
	    !partition_ref_ok(json_string_value(f)))
		return refuse(400, ret_status, reterr_msg, -EINVAL, "missing or invalid 'Partition': give a label or UUID");
	*ret = strdup(json_string_value(f));
	return *ret ? 0 : -ENOMEM;
}

static int parse_token(json_t *j, char **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, "Token");
	const char *t = json_string_value(f);

	if (!t || strlen(t) != ADMIN_EXPORT_TOKEN_LEN || json_string_length(f) != ADMIN_EXPORT_TOKEN_LEN ||
	    strspn(t, "0123456789abcdef") != ADMIN_EXPORT_TOKEN_LEN)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "missing or invalid 'Token': 16 hex digits");
	*ret = strdup(t);
	return *ret ? 0 : -ENOMEM;
}

/* "ByMove": optional, a boolean. */
static int parse_by_move(json_t *j, bool *ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, "ByMove");

	if (f && !json_is_boolean(f))
		return refuse(400, ret_status, reterr_msg, -EINVAL, "'ByMove' must be true or false");
	*ret = json_is_true(f);
	return 0;
}

/* "Snapshot": a name as a volume's; required unless @optional. */
static int parse_snapshot(json_t *j, bool optional, char **ret, unsigned *ret_status, char **reterr_msg)
{
	json_t *f = json_object_get(j, "Snapshot");

	if (!f && optional)
		return 0;
	if (!json_is_string(f) || strlen(json_string_value(f)) != json_string_length(f) ||
	    !volume_name_is_valid(json_string_value(f)))
		return refuse(400, ret_status, reterr_msg, -EINVAL,
			      "missing or invalid 'Snapshot': use 2 to 128 characters from [A-Za-z0-9_.-], starting with a letter or digit");
	*ret = strdup(json_string_value(f));
	return *ret ? 0 : -ENOMEM;
}

static int parse_changes(json_t *c, unsigned *ret_status, char **reterr_msg)
{
	const char *key;
	json_t *v;

	if (!json_is_object(c) || json_object_size(c) == 0)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "'Changes' must be a non-empty object of strings");
	json_object_foreach(c, key, v)
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return refuse(400, ret_status, reterr_msg, -EINVAL, "change '%.64s' must be a string", key);
	return 0;
}

static int parse_expect(json_t *e, unsigned *ret_status, char **reterr_msg)
{
	const char *key;
	json_t *v;

	if (!json_is_object(e) || json_object_size(e) > MOUNT_IDS_MAX)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "'Expect' must be an object of at most %d mount IDs",
			      MOUNT_IDS_MAX);
	json_object_foreach(e, key, v)
		if (!mount_id_is_valid(key) || !json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > 1000000)
			return refuse(400, ret_status, reterr_msg, -EINVAL, "'Expect' holds an invalid mount ID or count");
	return 0;
}

static int parse_entries(json_t *a, unsigned *ret_status, char **reterr_msg)
{
	size_t i;
	json_t *e;

	if (!json_is_array(a) || json_array_size(a) > ADMIN_IMPORT_MAX_ENTRIES)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "'Entries' must be an array of at most %d entries",
			      ADMIN_IMPORT_MAX_ENTRIES);
	json_array_foreach(a, i, e) {
		json_t *n = json_object_get(e, "Name"), *rec = json_object_get(e, "Record");

		if (!json_is_object(e) || json_object_size(e) != 2 || !json_is_string(n) || !json_is_string(rec) ||
		    strlen(json_string_value(rec)) != json_string_length(rec))
			return refuse(400, ret_status, reterr_msg, -EINVAL,
				      "entry %zu must be {\"Name\": string, \"Record\": string}", i);
		if (!volume_name_is_valid(json_string_value(n)))
			return refuse(400, ret_status, reterr_msg, -EINVAL, "entry %zu has an invalid volume name", i);
	}
	return 0;
}

int admin_request_parse(const char *method, const char *path, const char *body, size_t len, AdminRequest *ret,
			unsigned *ret_status, char **reterr_msg)
{
	AdminRequest req = { .endpoint = admin_endpoint_from_path(path) };
	_cleanup_(json_decrefp) json_t *j = NULL;
	json_error_t jerr;
	json_t *f;
	int r;

	if (req.endpoint < 0)
		return refuse(404, ret_status, reterr_msg, -ENOENT,
			      ADMIN_UNKNOWN_ENDPOINT " (this plugin is nvmevol %s, admin API %d)", PROJECT_VERSION,
			      ADMIN_API_VERSION);
	if (!method || !streq(method, "POST"))
		return refuse(405, ret_status, reterr_msg, -EINVAL, "method not allowed: use POST");
	if (len > HTTP_BODY_MAX)
		return refuse(413, ret_status, reterr_msg, -E2BIG, "request body too large (limit 64 KiB)");
	j = json_loadb(len ? body : "{}", len ? len : 2, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return refuse(400, ret_status, reterr_msg, -EINVAL, "malformed JSON: %s", jerr.text);
	if (!json_is_object(j))
		return refuse(400, ret_status, reterr_msg, -EINVAL, "request body must be a JSON object");

	if (has_name(req.endpoint)) {
		f = json_object_get(j, "Name");
		if (!json_is_string(f) || strlen(json_string_value(f)) != json_string_length(f) ||
		    !volume_name_is_valid(json_string_value(f)))
			return refuse(400, ret_status, reterr_msg, -EINVAL,
				      "missing or invalid 'Name': use 2 to 128 characters from [A-Za-z0-9_.-], starting with a letter or digit");
		req.name = strdup(json_string_value(f));
		if (!req.name)
			return -ENOMEM;
	}
	switch (req.endpoint) {
	case ADMIN_VOLUME_RESIZE:
	case ADMIN_VOLUME_SET:
		req.changes = json_incref(json_object_get(j, "Changes"));
		r = parse_changes(req.changes, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_RELEASE:
		req.expect = json_incref(json_object_get(j, "Expect"));
		r = parse_expect(req.expect, ret_status, reterr_msg);
		break;
	case ADMIN_STATE_IMPORT:
		req.entries = json_incref(json_object_get(j, "Entries"));
		r = parse_entries(req.entries, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_SNAPSHOT:
	case ADMIN_VOLUME_SNAPSHOT_REMOVE:
	case ADMIN_VOLUME_ROLLBACK:
	case ADMIN_VOLUME_EXPORT_OPEN:
		r = parse_snapshot(j, req.endpoint == ADMIN_VOLUME_SNAPSHOT || req.endpoint == ADMIN_VOLUME_EXPORT_OPEN,
				   &req.snapshot, ret_status, reterr_msg);
		if (r == 0 && req.endpoint == ADMIN_VOLUME_SNAPSHOT)
			r = parse_by_move(j, &req.by_move, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_EXPORT_CLOSE:
		r = parse_token(j, &req.token, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_IMPORT_OPEN:
		r = parse_options(j, &req.options, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_IMPORT_COMMIT:
	case ADMIN_VOLUME_IMPORT_ABORT:
		r = parse_token(j, &req.token, ret_status, reterr_msg);
		if (r == 0)
			r = parse_partition(j, &req.partition, ret_status, reterr_msg);
		if (r == 0 && req.endpoint == ADMIN_VOLUME_IMPORT_COMMIT)
			r = parse_options(j, &req.options, ret_status, reterr_msg);
		break;
	case ADMIN_PARTITION_CORDON:
	case ADMIN_PARTITION_UNCORDON:
		r = parse_partition(j, &req.partition, ret_status, reterr_msg);
		break;
	case ADMIN_PARTITION_EVACUATE:
		r = parse_partition(j, &req.partition, ret_status, reterr_msg);
		if (r == 0)
			r = parse_partition_field(j, "To", true, &req.to, ret_status, reterr_msg);
		f = json_object_get(j, "LivePass");
		if (r == 0 && f && !json_is_boolean(f))
			r = refuse(400, ret_status, reterr_msg, -EINVAL, "'LivePass' must be true or false");
		req.no_live_pass = json_is_false(f);
		break;
	case ADMIN_VOLUME_FENCE:
		r = parse_host(j, &req.host, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_RECEIVE_OPEN:
		r = parse_options(j, &req.options, ret_status, reterr_msg);
		if (r == 0)
			r = parse_id(j, "Base", true, &req.base, ret_status, reterr_msg);
		break;
	case ADMIN_VOLUME_RECEIVE_COMMIT:
	case ADMIN_VOLUME_RECEIVE_ABORT:
		r = parse_token(j, &req.token, ret_status, reterr_msg);
		if (r == 0)
			r = parse_id(j, "Base", true, &req.base, ret_status, reterr_msg);
		/* A full stream's directory is an import's, on the partition its open chose. */
		if (r == 0 && !req.base)
			r = parse_partition(j, &req.partition, ret_status, reterr_msg);
		if (r == 0 && req.endpoint == ADMIN_VOLUME_RECEIVE_COMMIT) {
			r = parse_options(j, &req.options, ret_status, reterr_msg);
			if (r == 0)
				r = parse_snapshot(j, false, &req.snapshot, ret_status, reterr_msg);
			if (r == 0)
				r = parse_id(j, "Id", false, &req.id, ret_status, reterr_msg);
			if (r == 0)
				r = parse_by_move(j, &req.by_move, ret_status, reterr_msg);
		}
		break;
	case ADMIN_PARTITION_ADOPT:
		f = json_object_get(j, "Partition");
		if (!json_is_string(f) || strlen(json_string_value(f)) != json_string_length(f) ||
		    !partition_ref_ok(json_string_value(f))) {
			r = refuse(400, ret_status, reterr_msg, -EINVAL, "missing or invalid 'Partition': give a label or UUID");
			break;
		}
		req.partition = strdup(json_string_value(f));
		r = req.partition ? 0 : -ENOMEM;
		break;
	default:
		r = 0;
	}
	if (r < 0) {
		admin_request_done(&req);
		return r;
	}
	*ret = req;
	return 0;
}

/* ---- answering ---- */

static void reply_error(unsigned status, const char *msg, HttpResponse *ret)
{
	http_reply_error(ret, status, msg);
}

static void reply(json_t *j, HttpResponse *ret)
{
	ret->status = 200;
	ret->body = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
	json_decref(j);
	if (!ret->body)
		reply_error(500, "out of memory", ret);
}

static unsigned status_of(int r)
{
	switch (r) {
	case -ENOENT:
		return 404;
	case -EINVAL:
		return 400;
	case -EBUSY:
	case -ESTALE:
	case -ENOSPC:
	case -EROFS:
	case -ENODEV:
	case -EEXIST:
	case -EUCLEAN:
	case -EOPNOTSUPP:
	case -EDQUOT:
	case -EPERM:
		return 409;
	default:
		return 500;
	}
}

static json_t *settings_json(const Settings *c)
{
	json_t *s = json_object(), *devs = json_array();

	for (size_t i = 0; devs && i < c->n_devices; i++)
		json_array_append_new(devs, json_string(c->devices[i]));
	json_object_set_new(s, "NVMEVOL_LABEL_PREFIX", json_string(c->label_prefix));
	json_object_set_new(s, "NVMEVOL_DEVICES", devs);
	json_object_set_new(s, "NVMEVOL_LOG_LEVEL", json_string(log_level_to_string(c->log_level)));
	json_object_set_new(s, "NVMEVOL_SELFTEST", json_string(manager_selftest_to_string(c->selftest)));
	json_object_set_new(s, "NVMEVOL_SELFTEST_BUDGET_MS", json_integer((json_int_t)c->selftest_budget_ms));
	json_object_set_new(s, "NVMEVOL_SELFTEST_CACHE_SECONDS", json_integer((json_int_t)c->selftest_cache_seconds));
	json_object_set_new(s, "NVMEVOL_MAX_VOLUMES", json_integer((json_int_t)c->max_volumes));
	json_object_set_new(s, "NVMEVOL_CLONE_FREEZE_BUDGET_MS", json_integer((json_int_t)c->clone_freeze_budget_ms));
	json_object_set_new(s, "NVMEVOL_CLONE_MEMORY_MB", json_integer((json_int_t)c->clone_memory_mb));
	json_object_set_new(s, "NVMEVOL_REQUIRE_NVME", json_string(device_policy_mode_to_string(c->require_nvme)));
	json_object_set_new(s, "NVMEVOL_HEALTH", json_string(device_policy_mode_to_string(c->health)));
	json_object_set_new(s, "NVMEVOL_HEALTH_CACHE_SECONDS", json_integer((json_int_t)c->health_cache_seconds));
	/* 0 = not set: no pool-wide relative threshold. */
	json_object_set_new(s, "NVMEVOL_SELFTEST_MIN_WRITE_RATIO", json_real(c->selftest_pool.min_write_ratio));
	json_object_set_new(s, "NVMEVOL_SELFTEST_MIN_READ_RATIO", json_real(c->selftest_pool.min_read_ratio));
	json_object_set_new(s, "NVMEVOL_SELFTEST_MIN_IOPS_RATIO", json_real(c->selftest_pool.min_iops_ratio));
	json_object_set_new(s, "NVMEVOL_SELFTEST_MAX_P99_RATIO", json_real(c->selftest_pool.max_p99_ratio));
	/* As the setting is written: "off" for no metrics file, else the directory in use. */
	json_object_set_new(s, "NVMEVOL_METRICS_DIR",
			    json_string(c->metrics_dir && *c->metrics_dir ? c->metrics_dir : "off"));
	json_object_set_new(s, "NVMEVOL_METRICS_INTERVAL_SECONDS", json_integer((json_int_t)c->metrics_interval_s));
	return s;
}

/* What the metrics writer did since start: how often a change was coalesced, what a write costs. */
static json_t *metrics_json(void)
{
	MetricsWriterCounters c;

	metrics_counters(&c);
	return json_pack("{s:I,s:I,s:I,s:f,s:f,s:I}", "writes", (json_int_t)c.writes, "failures", (json_int_t)c.failures,
			 "changes", (json_int_t)c.changes, "cpu_seconds", (double)c.cpu_ns / 1e9, "last_write_cpu_ms",
			 (double)c.last_cpu_ns / 1e6, "last_write_bytes", (json_int_t)c.last_bytes);
}

static json_t *status_json(Admin *a)
{
	json_t *j = manager_status_json(a->manager);
	char node[NODE_NAME_MAX + 1];

	if (!j)
		return NULL;
	json_object_set_new(j, "version", json_string(PROJECT_VERSION));
	json_object_set_new(j, "admin_api", json_integer(ADMIN_API_VERSION));
	json_object_set_new(j, "settings", settings_json(a->cfg));
	json_object_set_new(j, "state", json_pack("{s:s,s:s}", "dir", a->cfg->state_dir, "location",
						  state_location_to_string(a->cfg->state_location)));
	json_object_set_new(j, "propagated_mount", json_string(a->cfg->propagated_mount));
	json_object_set_new(j, "metrics", metrics_json());
	/* The name node= pins compare with: what a move to this host rewrites a pin to. */
	if (nodepin_here(node, sizeof(node)) == 0)
		json_object_set_new(j, "node", json_string(node));
	return j;
}

static int import_entries(Admin *a, json_t *entries, json_t **ret)
{
	json_t *out = json_pack("{s:[],s:[],s:[],s:[]}", "imported", "known", "stale", "invalid");
	size_t i;
	json_t *e;

	if (!out)
		return -ENOMEM;
	json_array_foreach(entries, i, e) {
		_cleanup_free_ char *err = NULL;
		const char *name = json_string_value(json_object_get(e, "Name"));
		json_t *rec = json_object_get(e, "Record");
		const char *outcome = "invalid";
		int r = manager_import_index(a->manager, name, json_string_value(rec), json_string_length(rec), &outcome,
					     &err);

		if (r < 0 && !streq(outcome, "invalid")) {
			json_decref(out);
			return r;
		}
		if (r < 0)
			json_array_append_new(json_object_get(out, "invalid"),
					      json_pack("{s:s,s:s}", "name", name, "why", err ? err : errno_str(r)));
		else
			json_array_append_new(json_object_get(out, outcome), json_string(name));
	}
	*ret = out;
	return 0;
}

/* A one-line summary of the result for the log. */
static char *summary(const json_t *result)
{
	char *s = result ? json_dumps(result, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;

	if (s && strlen(s) > 400)
		strcpy(s + 396, "...}");
	return s;
}

static void dispatch(Admin *a, const AdminRequest *req, json_t **ret, char **reterr_msg, int *ret_r)
{
	const char *outcome = NULL;
	int r = 0;

	switch (req->endpoint) {
	case ADMIN_STATUS:
		*ret = status_json(a);
		r = *ret ? 0 : -ENOMEM;
		break;
	case ADMIN_VOLUME_SHOW:
		r = manager_volume_show(a->manager, req->name, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_RESIZE:
		r = manager_resize(a->manager, req->name, req->changes, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_SET:
		r = manager_set_options(a->manager, req->name, req->changes, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_FORGET:
		r = manager_forget(a->manager, req->name, reterr_msg);
		outcome = "forgotten";
		break;
	case ADMIN_VOLUME_RELEASE:
		r = manager_release(a->manager, req->name, req->expect, ret, reterr_msg);
		break;
	case ADMIN_PARTITION_ADOPT:
		r = manager_adopt_partition(a->manager, req->partition, reterr_msg);
		outcome = "adopted";
		break;
	case ADMIN_STATE_IMPORT:
		r = import_entries(a, req->entries, ret);
		break;
	case ADMIN_VOLUME_SNAPSHOT:
		r = manager_snapshot_create(a->manager, req->name, req->snapshot, req->by_move, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_SNAPSHOTS:
		r = manager_snapshot_list(a->manager, req->name, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_SNAPSHOT_REMOVE:
		r = manager_snapshot_remove(a->manager, req->name, req->snapshot, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_ROLLBACK:
		r = manager_rollback(a->manager, req->name, req->snapshot, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_EXPORT_OPEN:
		r = manager_export_open(a->manager, req->name, req->snapshot, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_EXPORT_CLOSE:
		r = manager_export_close(a->manager, req->name, req->token, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_IMPORT_OPEN:
		r = manager_import_open(a->manager, req->name, req->options, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_IMPORT_COMMIT:
		r = manager_import_commit(a->manager, req->name, req->token, req->partition, req->options, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_IMPORT_ABORT:
		r = manager_import_abort(a->manager, req->name, req->token, req->partition, ret, reterr_msg);
		break;
	case ADMIN_PARTITION_CORDON:
	case ADMIN_PARTITION_UNCORDON:
		r = manager_partition_cordon(a->manager, req->partition, req->endpoint == ADMIN_PARTITION_CORDON, NULL, ret,
					     reterr_msg);
		break;
	case ADMIN_PARTITION_EVACUATE:
		r = manager_partition_evacuate(a->manager, req->partition, req->to, !req->no_live_pass, ret,
					       reterr_msg);
		break;
	case ADMIN_VOLUME_FENCE:
		r = manager_volume_fence(a->manager, req->name, req->host, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_UNFENCE:
		r = manager_volume_unfence(a->manager, req->name, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_RECEIVE_OPEN:
		r = manager_receive_open(a->manager, req->name, req->base, req->options, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_RECEIVE_COMMIT:
		r = manager_receive_commit(a->manager, req->name, req->token, req->partition, req->base, req->options,
					   req->snapshot, req->id, req->by_move, ret, reterr_msg);
		break;
	case ADMIN_VOLUME_RECEIVE_ABORT:
		r = manager_receive_abort(a->manager, req->name, req->token, req->partition, req->base, ret, reterr_msg);
		break;
	default:
		r = -EINVAL;
	}
	if (r == 0 && outcome && !*ret) {
		*ret = req->name ? json_pack("{s:s,s:s}", "name", req->name, "result", outcome)
				 : json_pack("{s:s,s:s}", "partition", req->partition, "result", outcome);
		if (!*ret)
			r = -ENOMEM;
	}
	*ret_r = r;
}

void admin_http_handler(void *userdata, const HttpRequest *hr, HttpResponse *ret)
{
	Admin *a = userdata;
	_cleanup_free_ char *err = NULL, *sum = NULL;
	AdminRequest req = { 0 };
	const char *path, *target;
	unsigned status = 400;
	json_t *result = NULL;
	char who[256], target_buf[2 * VOLUME_NAME_MAX + 16];
	bool change;
	int r;

	/* Only root gets here: the server is root-only (http_server_set_root_only(), main.c). */
	http_request_describe(hr, who, sizeof(who));
	if (admin_request_parse(hr->method, hr->url, hr->body, hr->len, &req, &status, &err) < 0) {
		log_warning("admin: refused %.64s from %s: %s", hr->url, who, err ? err : "?");
		reply_error(status, err, ret);
		return;
	}
	change = req.endpoint != ADMIN_STATUS && req.endpoint != ADMIN_VOLUME_SHOW && req.endpoint != ADMIN_VOLUME_SNAPSHOTS;
	path = admin_endpoint_to_path(req.endpoint);
	if (req.snapshot)
		snprintf(target_buf, sizeof(target_buf), "%s snapshot %s", req.name, req.snapshot);
	target = req.snapshot ? target_buf : req.name ? req.name : req.partition ? req.partition : "";
	if (change)
		log_info("admin: %s %s requested by %s", path, target, who);
	dispatch(a, &req, &result, &err, &r);
	if (r < 0) {
		log_warning("admin: %s %s by %s failed: %s", path, target, who, err ? err : errno_str(r));
		reply_error(status_of(r), err ? err : errno_str(r), ret);
	} else {
		if (change) {
			sum = summary(result);
			log_info("admin: %s %s by %s done: %s", path, target, who, sum ? sum : "");
		}
		reply(result, ret);
	}
	admin_request_done(&req);
}
