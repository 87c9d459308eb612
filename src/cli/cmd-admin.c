/* SPDX-License-Identifier: MIT */
/* The admin commands: what they send to the plugin, what they check on the host, what they print. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cli/admin-client.h"
#include "cli/compress.h"
#include "admin-protocol.h"
#include "cli/cmd-admin.h"
#include "cli/docker-client.h"
#include "cli/tar-read.h"
#include "cli/tar-write.h"
#include "pool/mount-users.h"
#include "volume/volume-options.h"
#include "volume/volume.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/table.h"
#include "util/time-util.h"

/* Where nvmevol 0.1 kept its state on the host. */
#define LEGACY_STATE_DIR "/var/lib/nvmevol"
/* Entries per import request: well under the 64 KiB request limit (an entry is about 400 bytes). */
#define IMPORT_BATCH_BYTES (48 * 1024)

/* ---- helpers ---- */

static int find(const CliArgs *a, AdminTarget *t)
{
	_cleanup_free_ char *err = NULL;
	int r = admin_client_find(a->plugin, a->socket, t, &err);

	return r < 0 ? cli_fail(a, "%s", err ? err : errno_str(r)) : 0;
}

static int call(const CliArgs *a, const AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret)
{
	_cleanup_free_ char *err = NULL;
	int r = admin_client_call(t, endpoint, req, a->command, ret, &err);

	return r < 0 ? cli_fail(a, "%s", err ? err : errno_str(r)) : 0;
}

/* Finds the plugin and calls @endpoint with @req. */
static int ask(const CliArgs *a, AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret)
{
	int r = find(a, t);

	return r != 0 ? r : call(a, t, endpoint, req, ret);
}

/* {"Name": @name, "Changes": @changes} to @endpoint. */
static int send_changes(const CliArgs *a, AdminTarget *t, const char *endpoint, const char *name,
			const json_t *changes, json_t **ret)
{
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:s,s:O}", "Name", name, "Changes", changes);

	return req ? ask(a, t, endpoint, req, ret) : cli_fail(a, "out of memory");
}

static int print_json(const json_t *j)
{
	if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(15)) < 0)
		return CLI_EXIT_FAILURE;
	fputc('\n', stdout);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

static void human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	size_t u = 0;

	while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
}

static const char *str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_int_t num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_integer(v) ? json_integer_value(v) : json_is_real(v) ? (json_int_t)json_real_value(v) : 0;
}

/* "key=value key=value" of an options object. */
static char *options_line(const json_t *opts)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	const char *k;
	json_t *v;

	if (!f)
		return NULL;
	json_object_foreach((json_t *)opts, k, v)
		fprintf(f, "%s%s=%s", ftell(f) ? " " : "", k, json_is_string(v) ? json_string_value(v) : "?");
	if (ftell(f) == 0)
		fputs("(none: defaults)", f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

static const char *limit_text(json_int_t v, char *buf, size_t len, bool bytes)
{
	if (v <= 0)
		return "none";
	if (bytes)
		human_bytes((uint64_t)v, buf, len);
	else
		snprintf(buf, len, "%lld", (long long)v);
	return buf;
}

/* ---- status ---- */

static char *selftest_summary(const json_t *st)
{
	char *s = NULL;

	if (!st)
		return strdup("never run");
	if (json_is_true(json_object_get(st, "running")))
		return strdup("running now");
	if (asprintf(&s, "write %.0f MiB/s, read %.0f MiB/s, %lld/%lld IOPS, %lld s ago",
		     json_number_value(json_object_get(st, "seq_write_mbps")),
		     json_number_value(json_object_get(st, "seq_read_mbps")), (long long)num(st, "rand_write_iops"),
		     (long long)num(st, "rand_read_iops"), (long long)num(st, "age_seconds")) < 0)
		return NULL;
	return s;
}

static void print_partitions(const json_t *parts)
{
	static const char *const head[] = { "PARTITION", "UUID", "DEVICE", "STATE", "SIZE", "FREE", "QUOTA", "VOLUMES",
					    "SELFTEST", NULL };
	Table *t = table_new(head);
	size_t i;
	json_t *p;

	json_array_foreach(parts, i, p) {
		char size[32], free_b[32], nvol[16], state[64];
		_cleanup_free_ char *st = selftest_summary(json_object_get(p, "selftest"));

		if (!json_is_true(json_object_get(p, "present")))
			snprintf(state, sizeof(state), "missing");
		else if (!json_is_true(json_object_get(p, "adopted")))
			snprintf(state, sizeof(state), "read-only (adopt it)");
		else if (json_is_true(json_object_get(p, "cordoned")))
			snprintf(state, sizeof(state), "cordoned (%s)",
				 str(json_object_get(p, "cordon"), "by") ? str(json_object_get(p, "cordon"), "by") : "?");
		else
			snprintf(state, sizeof(state), "ready");
		human_bytes((uint64_t)num(p, "size_bytes"), size, sizeof(size));
		human_bytes((uint64_t)num(p, "free_bytes"), free_b, sizeof(free_b));
		snprintf(nvol, sizeof(nvol), "%lld", (long long)num(p, "volumes"));
		const char *row[] = { str(p, "label") && *str(p, "label") ? str(p, "label") : "(no label)", str(p, "uuid"),
				      str(p, "device") && *str(p, "device") ? str(p, "device") : NULL, state,
				      json_object_get(p, "size_bytes") ? size : NULL,
				      json_object_get(p, "free_bytes") ? free_b : NULL,
				      json_is_true(json_object_get(p, "project_quota")) ? "yes" : "no", nvol, st };
		if (t)
			(void)table_add_row(t, row);
	}
	if (t) {
		table_print(t, stdout);
		table_free(t);
	}
	json_array_foreach(parts, i, p) {
		const char *name = str(p, "label") && *str(p, "label") ? str(p, "label") : str(p, "uuid");
		size_t k;
		json_t *d;
		const json_t *q = json_object_get(p, "quarantine");

		if (str(p, "problem"))
			printf("  %s: %s\n", name, str(p, "problem"));
		if (q)
			printf("  %s: %lld in quarantine: %s\n", name, (long long)num(q, "count"), str(q, "how_to_restore"));
		if (json_array_size(json_object_get(p, "duplicates")) == 0)
			continue;
		printf("  %s: the same XFS UUID is also on", name);
		json_array_foreach(json_object_get(p, "duplicates"), k, d)
			printf("%s %s", k ? "," : "", json_string_value(d));
		printf(" (copies of the disk: never mounted; give them a new UUID with 'xfs_admin -U generate')\n");
	}
}

/* The devices the plugin's scans skip because their probe does not answer. */
static void print_silent_devices(const json_t *silent)
{
	size_t i;
	json_t *d;

	json_array_foreach(silent, i, d)
		printf("%s  %s: does not answer (since %s)%s%s; skipped by scans until it does\n",
		       i ? "" : "\nDevices not answering:\n", str(d, "device"), str(d, "since") ? str(d, "since") : "?",
		       str(d, "partition_uuid") ? ", holds partition " : "", str(d, "partition_uuid") ? str(d, "partition_uuid") : "");
}

static void print_volumes(const json_t *vols)
{
	static const char *const head[] = { "VOLUME", "STATE", "PARTITION", "LIMIT", "USED", "INODES", "MOUNTS",
					    "SELFTEST", "CLONE OF", "SNAPSHOTS", NULL };
	Table *t = table_new(head);
	size_t i;
	json_t *v;

	json_array_foreach(vols, i, v) {
		const json_t *s = json_object_get(v, "Status"), *q = json_object_get(s, "quota"),
			     *st = json_object_get(s, "selftest"), *part = json_object_get(s, "partition");
		char limit[32], used[32], inodes[48], mounts[16], snaps[16] = "";

		limit[0] = used[0] = inodes[0] = '\0';
		if (q) {
			(void)limit_text(num(q, "limit_bytes"), limit, sizeof(limit), true);
			if (json_object_get(q, "used_bytes"))
				human_bytes((uint64_t)num(q, "used_bytes"), used, sizeof(used));
			if (json_object_get(q, "used_inodes"))
				snprintf(inodes, sizeof(inodes), "%lld/%s", (long long)num(q, "used_inodes"),
					 num(q, "limit_inodes") > 0 ? "" : "none");
			if (json_object_get(q, "used_inodes") && num(q, "limit_inodes") > 0)
				snprintf(inodes, sizeof(inodes), "%lld/%lld", (long long)num(q, "used_inodes"),
					 (long long)num(q, "limit_inodes"));
		}
		snprintf(mounts, sizeof(mounts), "%lld", (long long)num(s, "mount_count"));
		if (json_array_size(json_object_get(s, "snapshots")) > 0)
			snprintf(snaps, sizeof(snaps), "%zu", json_array_size(json_object_get(s, "snapshots")));
		const char *row[] = { str(v, "Name"), str(s, "state"), str(part, "label") && *str(part, "label") ? str(part, "label") : str(part, "uuid"),
				      limit[0] ? limit : "none", used[0] ? used : NULL, inodes[0] ? inodes : NULL, mounts,
				      st ? str(st, "verdict") : NULL, str(s, "cloned_from"), snaps[0] ? snaps : NULL };
		if (t)
			(void)table_add_row(t, row);
	}
	if (t) {
		table_print(t, stdout);
		table_free(t);
	}
}

/* Where the plugin's state is on the host, when it can be told. */
static char *state_host_path(const AdminTarget *t, const json_t *state)
{
	_cleanup_free_ char *root = NULL, *err = NULL;
	const char *loc = str(state, "location");
	char *p = NULL;

	if (loc && streq(loc, "state.source") && t->state_source)
		return strdup(t->state_source);
	if (loc && streq(loc, "plugin-directory") && t->plugin_id && docker_root_dir(&root, &err) == 0 &&
	    asprintf(&p, "%s/plugins/%s/propagated-mount/.state", root, t->plugin_id) >= 0)
		return p;
	if (loc && (streq(loc, "NVMEVOL_STATE_DIR") || streq(loc, "host-directory")) && !t->plugin_id)
		return str(state, "dir") ? strdup(str(state, "dir")) : NULL;
	return NULL;
}

/* An index left by nvmevol 0.1 that the plugin does not use. */
static bool legacy_state_unused(const json_t *state, const char *host_path)
{
	struct stat st;

	if (host_path && streq(host_path, LEGACY_STATE_DIR))
		return false;
	if (str(state, "location") && streq(str(state, "location"), "host-directory"))
		return false;
	return stat(LEGACY_STATE_DIR "/index", &st) == 0 && S_ISDIR(st.st_mode);
}

int cmd_status(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *host = NULL;
	json_t *state, *settings, *v;
	const char *k;
	bool legacy;
	int r;

	if ((r = ask(a, &t, ADMIN_PATH_STATUS, NULL, &j)) != 0)
		return r;
	state = json_object_get(j, "state");
	host = state_host_path(&t, state);
	legacy = legacy_state_unused(state, host);
	if (a->given & CLI_OPT_JSON) {
		json_object_set_new(j, "plugin", json_pack("{s:s?,s:s?,s:s?,s:s}", "name", t.plugin, "id", t.plugin_id,
							    "reference", t.reference, "admin_socket", t.socket));
		if (host)
			json_object_set_new(state, "host_path", json_string(host));
		if (legacy)
			json_object_set_new(j, "legacy_state", json_string(LEGACY_STATE_DIR));
		return print_json(j);
	}
	if (t.plugin)
		printf("Plugin:    %s (ID %.12s%s%s)\n", t.plugin, t.plugin_id, t.reference ? ", installed from " : "",
		       t.reference ? t.reference : "");
	else
		printf("Plugin:    admin socket %s\n", t.socket);
	printf("Version:   nvmevol %s (admin API %lld)\n", str(j, "version") ? str(j, "version") : "?",
	       (long long)num(j, "admin_api"));
	printf("State:     %s (%s)%s%s\n", str(state, "dir") ? str(state, "dir") : "?",
	       str(state, "location") ? str(state, "location") : "?", host ? "; on the host: " : "", host ? host : "");
	printf("Settings: ");
	settings = json_object_get(j, "settings");
	json_object_foreach(settings, k, v) {
		if (json_is_array(v)) {
			size_t i;
			json_t *d;
			printf(" %s=", k);
			json_array_foreach(v, i, d)
				printf("%s%s", i ? "," : "", json_string_value(d));
		} else if (json_is_string(v))
			printf(" %s=%s", k, json_string_value(v));
		else if (json_is_real(v))
			printf(" %s=%g", k, json_real_value(v));
		else
			printf(" %s=%lld", k, (long long)json_integer_value(v));
	}
	printf("\n\n");
	print_partitions(json_object_get(j, "partitions"));
	print_silent_devices(json_object_get(j, "devices_not_answering"));
	printf("\n");
	print_volumes(json_object_get(j, "volumes"));
	if (legacy)
		printf("\nNote: %s holds the volume index of an older install, which this plugin does not use:\n"
		       "import it with 'nvmevol state import'.\n", LEGACY_STATE_DIR);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* ---- volume show ---- */

static int show(const CliArgs *a, const AdminTarget *t, const char *name, json_t **ret)
{
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:s}", "Name", name);

	if (!req)
		return cli_fail(a, "out of memory");
	return call(a, t, ADMIN_PATH_VOLUME_SHOW, req, ret);
}

/* Replaces Status.snapshots of @status by the list with each one's cost measured now. */
static int fresh_snapshots(const CliArgs *a, const AdminTarget *t, const char *name, json_t *status)
{
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:s}", "Name", name), *j = NULL;
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = call(a, t, ADMIN_PATH_VOLUME_SNAPSHOTS, req, &j)) != 0)
		return r;
	json_object_set(status, "snapshots", json_object_get(j, "snapshots"));
	return 0;
}

/* "what it costs": the bytes the volume no longer shares with it. */
static void cost_text(const json_t *s, char *buf, size_t len)
{
	char b[32];

	if (!json_object_get(s, "cost_bytes")) {
		snprintf(buf, len, "not measured");
		return;
	}
	human_bytes((uint64_t)num(s, "cost_bytes"), b, sizeof(b));
	snprintf(buf, len, "%s%s", json_is_true(json_object_get(s, "cost_complete")) ? "" : "at least ", b);
}

/* One line per snapshot, the first after @head, the others indented as far. */
static void print_snapshots(const json_t *snaps, const char *head)
{
	size_t i;
	json_t *s;

	json_array_foreach(snaps, i, s) {
		char cost[48], size[32];

		cost_text(s, cost, sizeof(cost));
		human_bytes((uint64_t)num(s, "bytes"), size, sizeof(size));
		printf("%s%s, as of %s (%lld entries, %s; costs %s)%s%s\n", i ? "            " : head, str(s, "name"),
		       str(s, "created_at") ? str(s, "created_at") : "?", (long long)num(s, "entries"), size, cost,
		       str(s, "problem") ? ": " : "", str(s, "problem") ? str(s, "problem") : "");
	}
}

int cmd_volume_show(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *opts = NULL;
	json_t *s, *p, *q, *st, *adm, *ids, *c;
	const char *k;
	bool first;
	int r;

	if ((r = find(a, &t)) != 0 || (r = show(a, &t, args[0], &j)) != 0)
		return r;
	s = json_object_get(j, "Status");
	if (json_array_size(json_object_get(s, "snapshots")) > 0 && (r = fresh_snapshots(a, &t, args[0], s)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	p = json_object_get(s, "partition");
	q = json_object_get(s, "quota");
	st = json_object_get(s, "selftest");
	adm = json_object_get(j, "Admin");
	opts = options_line(json_object_get(s, "options"));
	printf("Volume:     %s\n", str(j, "Name"));
	printf("State:      %s%s%s\n", str(s, "state"), str(s, "problem") ? ": " : "", str(s, "problem") ? str(s, "problem") : "");
	printf("Created:    %s\n", str(s, "created_at") ? str(s, "created_at") : "?");
	printf("Options:    %s\n", opts ? opts : "?");
	if (str(s, "suid_dev_suppressed"))
		printf("            suid/dev not in effect: %s\n", str(s, "suid_dev_suppressed"));
	printf("Partition:  %s (UUID %s%s%s)%s%s\n", str(p, "label") ? str(p, "label") : "", str(p, "uuid"),
	       str(p, "device") ? ", " : "", str(p, "device") ? str(p, "device") : "",
	       str(p, "problem") ? ": " : "", str(p, "problem") ? str(p, "problem") : "");
	if (str(s, "owner"))
		printf("Owner:      %s, mode %s\n", str(s, "owner"), str(s, "mode"));
	if (str(s, "cloned_from")) {
		const json_t *cl = json_object_get(s, "clone");
		printf("Clone of:   %s, as of %s (%s%s, %lld entries", str(s, "cloned_from"),
		       str(s, "cloned_at") ? str(s, "cloned_at") : "?", str(cl, "method") ? str(cl, "method") : "?",
		       json_is_true(json_object_get(cl, "source_in_use")) ? ", the source in use" : "",
		       (long long)num(cl, "entries"));
		if (json_is_true(json_object_get(cl, "source_in_use")))
			printf(", partition frozen %lld ms", (long long)num(cl, "frozen_ms"));
		printf(")\n");
	}
	if (q) {
		char lb[32], ub[32], li[32];
		human_bytes((uint64_t)num(q, "used_bytes"), ub, sizeof(ub));
		printf("Limits:     size %s, inodes %s (XFS project %lld)\n",
		       limit_text(num(q, "limit_bytes"), lb, sizeof(lb), true),
		       limit_text(num(q, "limit_inodes"), li, sizeof(li), false), (long long)num(q, "project_id"));
		if (json_object_get(q, "used_bytes"))
			printf("Usage:      %s, %lld inodes\n", ub, (long long)num(q, "used_inodes"));
		if (str(q, "problem"))
			printf("            %s\n", str(q, "problem"));
	} else
		printf("Limits:     none\n");
	printf("Mounts:     %lld", (long long)num(s, "mount_count"));
	ids = json_object_get(adm, "mount_ids");
	first = true;
	json_object_foreach(ids, k, c) {
		printf("%sID %.12s: %lld", first ? " (" : ", ", k, (long long)json_integer_value(c));
		first = false;
	}
	printf("%s\n", first ? "" : ")");
	if (str(j, "Mountpoint"))
		printf("Mountpoint: %s (in the plugin), options %s\n", str(j, "Mountpoint"),
		       str(s, "mount_options") ? str(s, "mount_options") : "?");
	print_snapshots(json_object_get(s, "snapshots"), "Snapshots:  ");
	if (st)
		printf("Self-test:  %s (policy %s)%s%s\n", str(st, "verdict") ? str(st, "verdict") : "?",
		       str(st, "policy") ? str(st, "policy") : "?", str(st, "message") ? ": " : "",
		       str(st, "message") ? str(st, "message") : "");
	else
		printf("Self-test:  not run since the plugin started (it runs at the first mount)\n");
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* ---- volume resize, volume set ---- */

int cmd_volume_resize(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL, *changes = json_object();
	char b1[32], b2[32], i1[32], i2[32], u[32];
	json_t *before, *after;
	int r;

	if (!changes)
		return cli_fail(a, "out of memory");
	if (n == 2)
		json_object_set_new(changes, "size", json_string(args[1]));
	if (a->given & CLI_OPT_INODES)
		json_object_set_new(changes, "inodes", json_string(a->inodes));
	if (json_object_size(changes) == 0)
		return cli_usage_error(a, "give a new SIZE, --inodes N, or both");
	if ((r = send_changes(a, &t, ADMIN_PATH_VOLUME_RESIZE, args[0], changes, &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	before = json_object_get(j, "before");
	after = json_object_get(j, "after");
	human_bytes((uint64_t)num(json_object_get(j, "usage"), "bytes"), u, sizeof(u));
	printf("volume %s: size limit %s -> %s, inode limit %s -> %s; it uses %s and %lld inodes (XFS project %lld)\n",
	       args[0], limit_text(num(before, "size_bytes"), b1, sizeof(b1), true),
	       limit_text(num(after, "size_bytes"), b2, sizeof(b2), true),
	       limit_text(num(before, "inodes"), i1, sizeof(i1), false),
	       limit_text(num(after, "inodes"), i2, sizeof(i2), false), u,
	       (long long)num(json_object_get(j, "usage"), "inodes"), (long long)num(j, "project_id"));
	if (num(j, "tagged") > 0)
		printf("volume %s had no limits: %lld files and directories were tagged with its XFS project so that they count\n",
		       args[0], (long long)num(j, "tagged"));
	return CLI_EXIT_OK;
}

int cmd_volume_set(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL, *changes = json_object();
	_cleanup_free_ char *b = NULL, *af = NULL;
	int r;

	if (!changes)
		return cli_fail(a, "out of memory");
	for (int i = 1; i < n; i++) {
		char *eq = strchr(args[i], '=');
		_cleanup_free_ char *key = NULL;

		if (!eq || eq == args[i])
			return cli_usage_error(a, "'%s' is not KEY=VALUE", args[i]);
		key = strndup(args[i], (size_t)(eq - args[i]));
		if (!key)
			return cli_fail(a, "out of memory");
		if (json_object_get(changes, key))
			return cli_usage_error(a, "%s is given twice", key);
		json_object_set_new(changes, key, json_string(eq + 1));
	}
	if ((r = send_changes(a, &t, ADMIN_PATH_VOLUME_SET, args[0], changes, &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	b = options_line(json_object_get(j, "before"));
	af = options_line(json_object_get(j, "after"));
	printf("volume %s: options were: %s\nvolume %s: options now:  %s\n(they apply from the volume's next first mount: its self-test, its bind's suid and dev)\n",
	       args[0], b ? b : "?", args[0], af ? af : "?");
	return CLI_EXIT_OK;
}

/* ---- volume forget ---- */

int cmd_volume_forget(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL, *before = NULL, *req = json_pack("{s:s}", "Name", args[0]);
	const json_t *p;
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = find(a, &t)) != 0 || (r = show(a, &t, args[0], &before)) != 0 ||
	    (r = call(a, &t, ADMIN_PATH_VOLUME_FORGET, req, &j)) != 0)
		return r;
	p = json_object_get(json_object_get(before, "Status"), "partition");
	json_object_set_new(j, "partition_uuid", json_string(str(p, "uuid") ? str(p, "uuid") : ""));
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	printf("volume %s forgotten: Docker no longer lists it. Its data and record stay on partition %s (UUID %s);\n"
	       "if that partition is attached again, the volume comes back.\n",
	       args[0], str(p, "label") ? str(p, "label") : "", str(p, "uuid") ? str(p, "uuid") : "?");
	return CLI_EXIT_OK;
}

/* ---- volume release ---- */

int cmd_volume_release(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *vol = NULL, *containers = NULL, *req = NULL, *j = NULL, *stopped = json_array();
	_cleanup_free_ char *err = NULL, *suffix = NULL;
	MountUser *users = NULL;
	size_t n_users = 0, scanned = 0, i;
	const json_t *adm, *ids, *c;
	const char *name = args[0], *dev;
	unsigned maj, min;
	int r;

	if ((r = find(a, &t)) != 0 || (r = show(a, &t, name, &vol)) != 0)
		return r;
	adm = json_object_get(vol, "Admin");
	ids = json_object_get(adm, "mount_ids");
	if (!json_is_object(ids))
		return cli_fail(a, "the plugin's answer has no mount IDs for %s", name);

	/* 1. Docker: no running container may use it. */
	r = docker_containers_using(name, &containers, &err);
	if (r < 0)
		return cli_fail(a, "cannot ask Docker whether a container uses %s: %s. release needs Docker's answer; "
			       "nothing was changed", name, err ? err : errno_str(r));
	json_array_foreach(containers, i, c) {
		if (docker_container_running(c))
			return cli_fail(a, "container %s (%s) uses volume %s; stop it first (nothing was changed)",
					docker_container_name(c), str(c, "State") ? str(c, "State") : "?", name);
		json_array_append_new(stopped, json_string(docker_container_name(c)));
	}

	/*
	 * 2. This host's mount namespaces: nobody may still have the bind. Always:
	 * a partition the plugin calls missing (or failed to verify just now) can
	 * still be mounted in a container. Without the plugin's device number, a
	 * mount of the volume's directory from any device counts.
	 */
	dev = str(adm, "dev");
	if (!dev || sscanf(dev, "%u:%u", &maj, &min) != 2)
		maj = min = 0;
	if (!str(adm, "root"))
		return cli_fail(a, "the plugin's answer does not say where the directory of %s is; nothing was changed", name);
	if (t.plugin_id && asprintf(&suffix, "/plugins/%s/propagated-mount/%s", t.plugin_id, name) < 0)
		return cli_fail(a, "out of memory");
	r = mount_users_find("/proc", makedev(maj, min), str(adm, "root"), (uint64_t)num(adm, "mount_namespace"), suffix,
			     &users, &n_users, &scanned);
	if (r < 0)
		return cli_fail(a, "cannot read the mount namespaces of this host: %s (run as root, on the Docker host)",
				errno_str(r));
	if (n_users > 0) {
		fprintf(stderr, "nvmevol volume release: volume %s is still mounted on this host%s; nothing was changed:\n",
			name, maj || min ? "" : " (its partition is missing or unverified for the plugin)");
		for (size_t k = 0; k < n_users; k++)
			fprintf(stderr, "  process %d (%s), mount namespace %llu, at %s\n", (int)users[k].pid, users[k].comm,
				(unsigned long long)users[k].mount_ns, users[k].target);
		mount_users_free(users, n_users);
		return CLI_EXIT_FAILURE;
	}

	/* 3. The plugin clears the counts if they are still those that were checked. */
	req = json_pack("{s:s,s:O}", "Name", name, "Expect", ids);
	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = call(a, &t, ADMIN_PATH_VOLUME_RELEASE, req, &j)) != 0)
		return r;
	json_object_set_new(j, "checked", json_pack("{s:O,s:i,s:b}", "stopped_containers", stopped,
						    "mount_namespaces_scanned", (int)scanned, "partition_present",
						    dev != NULL));
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	if (num(j, "total_before") == 0 && !json_is_true(json_object_get(j, "unmounted"))) {
		printf("volume %s had no mount counts and no bind: nothing to release\n", name);
		return CLI_EXIT_OK;
	}
	printf("checked: Docker reports no running container using %s", name);
	if (json_array_size(stopped) > 0) {
		printf(" (stopped containers that reference it, which hold no mount:");
		json_array_foreach(stopped, i, c)
			printf(" %s", json_string_value(c));
		printf(")");
	}
	printf("; none of the %zu mount namespaces on this host has it mounted%s\n", scanned,
	       dev ? "" : " (its partition is missing: a mount of its directory from any device was looked for)");
	printf("released volume %s: cleared %lld mount count(s) (", name, (long long)num(j, "total_before"));
	{
		const char *k;
		json_t *v;
		bool first = true;
		json_object_foreach(json_object_get(j, "cleared"), k, v) {
			printf("%sID %.12s: %lld", first ? "" : ", ", k, (long long)json_integer_value(v));
			first = false;
		}
	}
	printf(")%s\n", json_is_true(json_object_get(j, "unmounted")) ? "; its bind was unmounted" : "");
	return CLI_EXIT_OK;
}

/* ---- volume snapshot, snapshots, snapshot-rm, rollback ---- */

/* {"Name": @name, "Snapshot": @snap (left out if NULL)} to @endpoint. */
static int snapshot_call(const CliArgs *a, const char *endpoint, const char *name, const char *snap, json_t **ret)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:s,s:s*}", "Name", name, "Snapshot", snap);

	if (!req)
		return cli_fail(a, "out of memory");
	return ask(a, &t, endpoint, req, ret);
}

static int check_snapshot_name(const CliArgs *a, const char *snap)
{
	if (!volume_name_is_valid(snap))
		return cli_usage_error(a, "invalid snapshot name '%s': 2 to 128 characters from [A-Za-z0-9_.-], starting "
				       "with a letter or digit", snap);
	return 0;
}

int cmd_volume_snapshot(const CliArgs *a, char **args, int n)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	const json_t *s;
	int r;

	if (n == 2 && (r = check_snapshot_name(a, args[1])) != 0)
		return r;
	if ((r = snapshot_call(a, ADMIN_PATH_VOLUME_SNAPSHOT, args[0], n == 2 ? args[1] : NULL, &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	s = json_object_get(j, "snapshot");
	printf("volume %s: snapshot %s taken, as of %s (%lld entries%s, partition frozen %lld ms)\n", args[0],
	       str(s, "name"), str(s, "created_at") ? str(s, "created_at") : "?", (long long)num(s, "entries"),
	       json_is_true(json_object_get(s, "volume_in_use")) ? ", the volume in use" : "",
	       (long long)num(s, "frozen_ms"));
	return CLI_EXIT_OK;
}

int cmd_volume_snapshots(const CliArgs *a, char **args, int n)
{
	static const char *const head[] = { "SNAPSHOT", "CREATED", "ENTRIES", "SIZE", "COST", "PROBLEM", NULL };
	_cleanup_(json_decrefp) json_t *j = NULL;
	Table *t;
	size_t i;
	json_t *s;
	int r;

	if ((r = snapshot_call(a, ADMIN_PATH_VOLUME_SNAPSHOTS, args[0], NULL, &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	if (json_array_size(json_object_get(j, "snapshots")) == 0) {
		printf("volume %s has no snapshots\n", args[0]);
		return CLI_EXIT_OK;
	}
	t = table_new(head);
	json_array_foreach(json_object_get(j, "snapshots"), i, s) {
		char entries[24], size[32], cost[48];

		snprintf(entries, sizeof(entries), "%lld", (long long)num(s, "entries"));
		human_bytes((uint64_t)num(s, "bytes"), size, sizeof(size));
		cost_text(s, cost, sizeof(cost));
		const char *row[] = { str(s, "name"), str(s, "created_at"), entries, size, cost, str(s, "problem") };
		if (t)
			(void)table_add_row(t, row);
	}
	if (t) {
		table_print(t, stdout);
		table_free(t);
	}
	printf("(COST: the bytes the volume no longer shares with the snapshot: what removing it frees)\n");
	json_array_foreach(json_object_get(j, "snapshots"), i, s)
		if (json_is_true(json_object_get(s, "by_move")))
			printf("(%s: taken by a move, the base of the next one; it goes with the volume when the volume is "
			       "removed)\n", str(s, "name"));
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* A verb on volume args[0]'s snapshot args[1]: "volume NAME@done SNAPSHOT@after" is printed. */
static int snapshot_verb(const CliArgs *a, char **args, const char *endpoint, const char *done, const char *after)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	int r;

	if ((r = check_snapshot_name(a, args[1])) != 0 || (r = snapshot_call(a, endpoint, args[0], args[1], &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	printf("volume %s%s%s%s\n", args[0], done, args[1], after);
	return CLI_EXIT_OK;
}

int cmd_volume_snapshot_rm(const CliArgs *a, char **args, int n)
{
	return snapshot_verb(a, args, ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE, ": snapshot ", " removed");
}

int cmd_volume_rollback(const CliArgs *a, char **args, int n)
{
	return snapshot_verb(a, args, ADMIN_PATH_VOLUME_ROLLBACK, " rolled back to snapshot ",
			     " (the snapshot is kept; the state before is gone)");
}

/* ---- volume export ---- */

static volatile sig_atomic_t export_stop;

static void on_stop_signal(int sig)
{
	export_stop = 1;
}

/* Where the export's bind is on the host: under Docker's copy of the plugin's propagated mount. */
static char *export_host_path(const CliArgs *a, const AdminTarget *t, const json_t *j)
{
	_cleanup_free_ char *root = NULL, *err = NULL;
	const char *mnt = str(j, "mount"), *prop = str(j, "propagated_mount");
	char *p = NULL;

	if (!mnt || !prop || strchr(mnt, '/') || mnt[0] != '.')
		return NULL;
	if (!t->plugin_id) {
		/* A daemon run outside Docker: its propagated mount is in this mount namespace. */
		return asprintf(&p, "%s/%s", prop, mnt) < 0 ? NULL : p;
	}
	if (docker_root_dir(&root, &err) < 0) {
		(void)cli_fail(a, "cannot ask Docker for its data root: %s", err ? err : "?");
		return NULL;
	}
	return asprintf(&p, "%s/plugins/%s/propagated-mount/%s", root, t->plugin_id, mnt) < 0 ? NULL : p;
}

/*
 * The directory the plugin bound for an export or import (@j), on this host,
 * opened with @flags; it must be the directory the plugin bound (its device
 * and inode): in a mount namespace that does not see the bind, the path is
 * the empty directory beneath it, and an export of that would be an empty
 * archive, an import into it would fill the host's root filesystem.
 */
static int open_bound(const CliArgs *a, const AdminTarget *t, const json_t *j, int flags, int *ret_fd)
{
	_cleanup_free_ char *host = export_host_path(a, t, j);
	_cleanup_close_ int fd = -EBADF;
	const char *dev = str(j, "dev");
	json_t *ino = json_object_get(j, "ino");
	struct stat st;
	char have[32];

	if (!host)
		return cli_fail(a, "cannot tell where the plugin bound the directory on this host");
	fd = open(host, flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cli_fail(a, "cannot open %s, where the plugin bound the directory: %s (run the command as root on "
				"the Docker host)", host, errno_str(errno));
	if (fstat(fd, &st) < 0)
		return cli_fail(a, "cannot stat %s: %s", host, errno_str(errno));
	snprintf(have, sizeof(have), "%u:%u", major(st.st_dev), minor(st.st_dev));
	if (!dev || !json_is_integer(ino) || !streq(dev, have) || (json_int_t)st.st_ino != json_integer_value(ino))
		return cli_fail(a, "%s is not the directory the plugin bound (device %s inode %llu, expected %s inode "
				"%lld): this mount namespace does not see the plugin's mounts; run the command in the "
				"host's mount namespace (e.g. nsenter -t 1 -m)", host, have, (unsigned long long)st.st_ino,
				dev ? dev : "?", (long long)json_integer_value(ino));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Writes the archive of the export @j (open) to standard output. */
static int export_write(const CliArgs *a, const AdminTarget *t, const json_t *j, int level, TarWriteStats *st)
{
	_cleanup_free_ char *err = NULL;
	_cleanup_close_ int fd = -EBADF;
	struct sigaction sa = { .sa_handler = on_stop_signal }, ign = { .sa_handler = SIG_IGN };
	int r;

	if ((r = open_bound(a, t, j, O_RDONLY, &fd)) != 0)
		return r;
	/* A signal or a closed pipe ends the export cleanly: its snapshot is removed. */
	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGHUP, &sa, NULL);
	(void)sigaction(SIGPIPE, &ign, NULL);
	if (level > 0) {
		_cleanup_(compress_out_freep) CompressOut *z = NULL;

		r = compress_out_new(STDOUT_FILENO, level, &z, &err);
		if (r == 0)
			r = tar_write_tree_to(fd, compress_out_write, z, &export_stop, st, &err);
		if (r == 0)
			r = compress_out_finish(z);
		if (r < 0 && z && compress_out_error(z))
			return cli_fail(a, "the export of %s failed: %s; what was written is not a whole stream",
					str(j, "volume"), compress_out_error(z));
	} else
		r = tar_write_tree(fd, STDOUT_FILENO, &export_stop, st, &err);
	if (r < 0)
		return cli_fail(a, "the export of %s failed: %s; what was written is not a whole archive",
				str(j, "volume"), err ? err : errno_str(r));
	return 0;
}

int cmd_volume_export(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *req = NULL, *j = NULL, *creq = NULL, *closed = NULL, *sum = NULL;
	_cleanup_free_ char *err = NULL;
	TarWriteStats st = { 0 };
	int r, rc, level = 0; /* 0: not compressed */

	if (a->snapshot && (r = check_snapshot_name(a, a->snapshot)) != 0)
		return r;
	if (a->compress && compress_parse(a->compress, &level, &err) < 0)
		return cli_usage_error(a, "%s", err);
	if (isatty(STDOUT_FILENO))
		return cli_fail(a, "the archive goes to standard output, which is a terminal: redirect it (> FILE, | zstd, "
				"| ssh HOST ...)");
	req = json_pack("{s:s,s:s*}", "Name", args[0], "Snapshot", a->snapshot);
	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = ask(a, &t, ADMIN_PATH_VOLUME_EXPORT_OPEN, req, &j)) != 0)
		return r;
	rc = export_write(a, &t, j, level, &st);
	/* Always: the bind goes, and a temporary snapshot with it. */
	creq = json_pack("{s:s,s:s}", "Name", args[0], "Token", str(j, "token") ? str(j, "token") : "");
	r = creq ? call(a, &t, ADMIN_PATH_VOLUME_EXPORT_CLOSE, creq, &closed) : cli_fail(a, "out of memory");
	if (rc != 0 || r != 0)
		return rc != 0 ? rc : r;
	sum = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I}", "volume", args[0], "snapshot", str(j, "snapshot"), "temporary",
			json_is_true(json_object_get(j, "temporary")), "entries", (json_int_t)st.entries, "bytes",
			(json_int_t)st.bytes, "sockets_skipped", (json_int_t)st.sockets);
	if (a->given & CLI_OPT_JSON) {
		if (sum && json_dumpf(sum, stderr, JSON_INDENT(2) | JSON_SORT_KEYS) == 0)
			fputc('\n', stderr);
	} else
		fprintf(stderr, "exported volume %s (%s snapshot %s): %llu entries, %llu bytes of data%s\n", args[0],
			json_is_true(json_object_get(j, "temporary")) ? "a temporary" : "its", str(j, "snapshot"),
			(unsigned long long)st.entries, (unsigned long long)st.bytes,
			st.sockets ? "; sockets left out (tar cannot hold them)" : "");
	return CLI_EXIT_OK;
}

/* ---- volume import ---- */

int cmd_volume_import(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *opts = json_object(), *req = NULL, *j = NULL, *fin = NULL, *done = NULL;
	_cleanup_free_ char *err = NULL;
	_cleanup_close_ int fd = -EBADF;
	_cleanup_(compress_in_freep) CompressIn *zin = NULL;
	struct sigaction sa = { .sa_handler = on_stop_signal };
	TarReadLimits lim = { .max_entries = 10000000 };
	TarReadStats st = { 0 };
	int r, rc;

	if (!opts)
		return cli_fail(a, "out of memory");
	if ((r = cmd_admin_parse_o(a, opts)) != 0)
		return r;
	if (isatty(STDIN_FILENO))
		return cli_fail(a, "the stream comes on standard input, which is a terminal: redirect it (< FILE, zstd -dc "
				"FILE |, ssh HOST ... |)");
	req = json_pack("{s:s,s:O}", "Name", args[0], "Options", opts);
	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = ask(a, &t, ADMIN_PATH_VOLUME_IMPORT_OPEN, req, &j)) != 0)
		return r;
	lim.max_bytes = (uint64_t)num(j, "max_bytes");
	lim.allow_devices = json_is_true(json_object_get(j, "allow_devices"));
	rc = open_bound(a, &t, j, O_RDONLY, &fd);
	if (rc == 0) {
		(void)sigaction(SIGINT, &sa, NULL);
		(void)sigaction(SIGTERM, &sa, NULL);
		r = compress_in_new(STDIN_FILENO, &zin, &err);
		if (r == 0)
			r = tar_read_tree_from(compress_in_read, zin, fd, &lim, &st, &err);
		if (r == 0)
			r = compress_in_finish(zin); /* a damaged end of a zstd stream fails the import too */
		if (r == 0 && export_stop)
			r = -EINTR;
		if (r < 0)
			rc = cli_fail(a, "cannot import volume %s: %s; nothing was created", args[0],
				      r == -EINTR ? "interrupted" : zin && compress_in_error(zin) ? compress_in_error(zin) :
				      err ? err : errno_str(r));
	}
	if (fd >= 0) {
		(void)close(fd); /* before the commit: the bind goes, and must not be busy */
		fd = -EBADF;
	}
	/* Committed only whole: else the plugin discards what was written. */
	fin = json_pack("{s:s,s:s,s:s,s:O}", "Name", args[0], "Token", str(j, "token") ? str(j, "token") : "",
			"Partition", str(j, "partition") ? str(j, "partition") : "", "Options", opts);
	if (!fin)
		return cli_fail(a, "out of memory");
	if (rc != 0) {
		json_object_del(fin, "Options");
		(void)call(a, &t, ADMIN_PATH_VOLUME_IMPORT_ABORT, fin, &done);
		return rc;
	}
	if ((r = call(a, &t, ADMIN_PATH_VOLUME_IMPORT_COMMIT, fin, &done)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON) {
		json_object_set_new(done, "entries", json_integer((json_int_t)st.entries));
		json_object_set_new(done, "bytes", json_integer((json_int_t)st.bytes));
		return print_json(done);
	}
	printf("volume %s imported: %llu entries, %llu bytes\n", args[0], (unsigned long long)st.entries,
	       (unsigned long long)st.bytes);
	return CLI_EXIT_OK;
}

/* ---- partition adopt ---- */

int cmd_partition_adopt(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL, *req = json_pack("{s:s}", "Partition", args[0]);
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	if ((r = ask(a, &t, ADMIN_PATH_PARTITION_ADOPT, req, &j)) != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	printf("partition %s adopted: mounted read-write, it receives new volumes\n", args[0]);
	return CLI_EXIT_OK;
}

/* ---- partition cordon, uncordon, evacuate; volume fence, unfence ---- */

/* Sends @req to @endpoint; prints the result as JSON, or @fmt with the result's "result" and @what. */
static int simple_call(const CliArgs *a, const char *endpoint, json_t *req, const char *what)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL;
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	r = ask(a, &t, endpoint, req, &j);
	json_decref(req);
	if (r != 0)
		return r;
	if (a->given & CLI_OPT_JSON)
		return print_json(j);
	printf("%s %s: %s\n", what, str(j, "partition") ? str(j, "partition") : str(j, "name") ? str(j, "name") : "?",
	       str(j, "result") ? str(j, "result") : "done");
	return CLI_EXIT_OK;
}

int cmd_partition_cordon(const CliArgs *a, char **args, int n)
{
	return simple_call(a, ADMIN_PATH_PARTITION_CORDON, json_pack("{s:s}", "Partition", args[0]), "partition");
}

int cmd_partition_uncordon(const CliArgs *a, char **args, int n)
{
	return simple_call(a, ADMIN_PATH_PARTITION_UNCORDON, json_pack("{s:s}", "Partition", args[0]), "partition");
}

int cmd_volume_fence(const CliArgs *a, char **args, int n)
{
	return simple_call(a, ADMIN_PATH_VOLUME_FENCE, json_pack("{s:s,s:s}", "Name", args[0], "Host", args[1]), "volume");
}

int cmd_volume_unfence(const CliArgs *a, char **args, int n)
{
	return simple_call(a, ADMIN_PATH_VOLUME_UNFENCE, json_pack("{s:s}", "Name", args[0]), "volume");
}

static void print_names(const char *title, const json_t *arr)
{
	size_t i;
	json_t *e;

	json_array_foreach(arr, i, e)
		printf("  %s %s%s%s\n", title, str(e, "name") ? str(e, "name") : "?", str(e, "why") ? ": " : "",
		       str(e, "why") ? str(e, "why") : "");
}

/* "full, 64.0 MiB in 812 ms" of a pass object. */
static void pass_text(const json_t *pass, char *buf, size_t len)
{
	char b[32];

	human_bytes((uint64_t)json_integer_value(json_object_get(pass, "bytes")), b, sizeof(b));
	snprintf(buf, len, "%s, %s in %lld ms", str(pass, "kind") ? str(pass, "kind") : "?", b,
		 (long long)json_integer_value(json_object_get(pass, "ms")));
}

static void print_moved(const json_t *arr)
{
	size_t i;
	json_t *e;
	char pass[96];

	json_array_foreach(arr, i, e) {
		pass_text(json_object_get(e, "final_pass"), pass, sizeof(pass));
		printf("  moved %s to %s: final pass %s; %lld snapshot(s) with it; downtime %lld ms\n",
		       str(e, "name") ? str(e, "name") : "?", str(e, "to") ? str(e, "to") : "?", pass,
		       (long long)json_integer_value(json_object_get(e, "snapshots")),
		       (long long)json_integer_value(json_object_get(e, "downtime_ms")));
	}
}

static void print_waiting(const json_t *arr)
{
	size_t i;
	json_t *e;
	char pass[96];

	json_array_foreach(arr, i, e) {
		const json_t *p = json_object_get(e, "pass");

		if (p)
			pass_text(p, pass, sizeof(pass));
		printf("  waiting for an unmount: %s: %s%s%s%s\n", str(e, "name") ? str(e, "name") : "?",
		       str(e, "why") ? str(e, "why") : "", p ? " (live pass " : "", p ? pass : "", p ? ")" : "");
	}
}

/* With --wait, a live pass again once the last one is this old: the final pass then carries less. */
#define EVACUATE_LIVE_EVERY_MS (60u * 1000)
#define EVACUATE_POLL_MS 1000

int cmd_partition_evacuate(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *j = NULL, *moved = json_array();
	uint64_t timeout = 600, start = now_mono_ms(), last_live = 0;
	bool wait = a->given & (CLI_OPT_WAIT | CLI_OPT_TIMEOUT), live = true;
	size_t waiting, refused;
	int r;

	if (a->timeout && parse_u64(a->timeout, &timeout) < 0)
		return cli_usage_error(a, "--timeout takes a number of seconds");
	if (!moved)
		return cli_fail(a, "out of memory");
	r = find(a, &t);
	if (r != 0)
		return r;
	for (;;) {
		_cleanup_(json_decrefp) json_t *req = json_pack("{s:s,s:b}", "Partition", args[0], "LivePass", live);

		if (!req || (a->to && json_object_set_new(req, "To", json_string(a->to)) < 0))
			return cli_fail(a, "out of memory");
		json_decref(j);
		j = NULL;
		if (live)
			last_live = now_mono_ms();
		if ((r = call(a, &t, ADMIN_PATH_PARTITION_EVACUATE, req, &j)) != 0)
			return r;
		json_array_extend(moved, json_object_get(j, "moved"));
		waiting = json_array_size(json_object_get(j, "waiting"));
		refused = json_array_size(json_object_get(j, "refused"));
		if (!(a->given & CLI_OPT_JSON)) {
			print_moved(json_object_get(j, "moved"));
			if (live || !wait || !waiting)
				print_waiting(json_object_get(j, "waiting"));
		}
		if (!wait || waiting == 0 || now_mono_ms() - start > timeout * 1000)
			break;
		(void)usleep(EVACUATE_POLL_MS * 1000);
		live = now_mono_ms() - last_live >= EVACUATE_LIVE_EVERY_MS;
	}
	if (json_object_set(j, "moved", moved) < 0)
		return cli_fail(a, "out of memory");
	if (a->given & CLI_OPT_JSON)
		r = print_json(j);
	else {
		print_names("refused", json_object_get(j, "refused"));
		printf("partition %s: cordoned; %zu volume(s) moved, %zu waiting, %zu refused\n", args[0],
		       json_array_size(moved), waiting, refused);
		if (wait && waiting)
			printf("still in use after %llu s: stop their containers, then run 'nvmevol partition evacuate %s' "
			       "again (each run carries only what changed since the last pass)\n",
			       (unsigned long long)timeout, args[0]);
		else if (waiting || refused)
			printf("stop the containers of the waiting volumes (or deal with the refused ones), then run "
			       "'nvmevol partition evacuate %s' again, or add --wait\n", args[0]);
		r = CLI_EXIT_OK;
	}
	/* Not every volume left: the partition is not empty yet, and a script must see that. */
	return r == CLI_EXIT_OK && (waiting || refused) ? CLI_EXIT_FAILURE : r;
}

/* ---- state import ---- */

static int send_batch(const CliArgs *a, const AdminTarget *t, json_t *entries, json_t *total)
{
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:O}", "Entries", entries), *j = NULL;
	const char *k;
	json_t *v;
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	r = call(a, t, ADMIN_PATH_STATE_IMPORT, req, &j);
	if (r != 0)
		return r;
	json_object_foreach(j, k, v)
		if (json_is_array(v) && json_is_array(json_object_get(total, k)))
			json_array_extend(json_object_get(total, k), v);
	json_array_clear(entries);
	return 0;
}

int cmd_state_import(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *entries = json_array(),
				       *total = json_pack("{s:[],s:[],s:[],s:[]}", "imported", "known", "stale", "invalid");
	_cleanup_close_ int dirfd = -EBADF, idxfd = -EBADF;
	_cleanup_free_ char *dir = NULL, *renamed = NULL;
	size_t batch = 0, files = 0, i;
	struct dirent *de;
	json_t *v;
	DIR *d;
	int r;

	if (!entries || !total)
		return cli_fail(a, "out of memory");
	dir = realpath(n >= 1 ? args[0] : LEGACY_STATE_DIR, NULL);
	if (!dir)
		return cli_fail(a, "%s: %s", n >= 1 ? args[0] : LEGACY_STATE_DIR, errno_str(errno));
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd >= 0)
		idxfd = openat(dirfd, "index", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (idxfd < 0)
		return cli_fail(a, "%s has no index/ directory: it is not an nvmevol state directory", dir);
	if ((r = find(a, &t)) != 0)
		return r;
	if (t.state_source && streq(t.state_source, dir))
		return cli_fail(a, "%s is the state directory plugin %s uses now (state.source): nothing to import", dir,
				t.plugin ? t.plugin : "");

	d = opendir_fd(idxfd);
	if (!d)
		return cli_fail(a, "cannot read %s/index: %s", dir, errno_str(errno));
	while ((de = readdir(d))) {
		_cleanup_free_ char *buf = NULL, *name = NULL;
		size_t len = 0, nl = strlen(de->d_name);

		if (de->d_name[0] == '.' || nl < 6 || !streq(de->d_name + nl - 5, ".json"))
			continue;
		name = strndup(de->d_name, nl - 5);
		if (!name || !volume_name_is_valid(name))
			continue;
		r = read_file_at(idxfd, de->d_name, RECORD_SIZE_MAX, &buf, &len);
		if (r < 0) {
			json_array_append_new(json_object_get(total, "invalid"),
					      json_pack("{s:s,s:s}", "name", name, "why", errno_str(r)));
			continue;
		}
		files++;
		if (batch + len + 256 > IMPORT_BATCH_BYTES && json_array_size(entries) > 0) {
			if ((r = send_batch(a, &t, entries, total)) != 0) {
				closedir(d);
				return r;
			}
			batch = 0;
		}
		json_array_append_new(entries, json_pack("{s:s,s:s%}", "Name", name, "Record", buf, len));
		batch += len + 256;
	}
	closedir(d);
	if (json_array_size(entries) > 0 && (r = send_batch(a, &t, entries, total)) != 0)
		return r;

	/* Imported in full: rename, so that a later run cannot bring back what was removed since. */
	if (!(a->given & CLI_OPT_KEEP) && json_array_size(json_object_get(total, "invalid")) == 0) {
		char stamp[32];
		time_t now = time(NULL);
		struct tm tm;

		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", gmtime_r(&now, &tm));
		if (asprintf(&renamed, "%s.imported-%s", dir, stamp) < 0)
			return cli_fail(a, "out of memory");
		if (rename(dir, renamed) < 0)
			return cli_fail(a, "imported, but cannot rename %s to %s: %s", dir, renamed, errno_str(errno));
	}
	json_object_set_new(total, "dir", json_string(dir));
	json_object_set_new(total, "files", json_integer((json_int_t)files));
	if (renamed)
		json_object_set_new(total, "renamed_to", json_string(renamed));
	if (a->given & CLI_OPT_JSON)
		return print_json(total) == 0 && json_array_size(json_object_get(total, "invalid")) == 0 ? CLI_EXIT_OK
														: CLI_EXIT_FAILURE;
	printf("%s: %zu index entries: %zu imported (their partition is missing; listed again), %zu already known, "
	       "%zu stale (their partition is here without them), %zu unreadable\n",
	       dir, files, json_array_size(json_object_get(total, "imported")),
	       json_array_size(json_object_get(total, "known")), json_array_size(json_object_get(total, "stale")),
	       json_array_size(json_object_get(total, "invalid")));
	json_array_foreach(json_object_get(total, "imported"), i, v)
		printf("  imported: %s\n", json_string_value(v));
	json_array_foreach(json_object_get(total, "invalid"), i, v)
		printf("  not imported: %s: %s\n", str(v, "name"), str(v, "why"));
	if (renamed)
		printf("%s renamed to %s (not used any more; remove it when you like)\n", dir, renamed);
	return json_array_size(json_object_get(total, "invalid")) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* ---- shared with cmd-send.c (send and receive use the export's and import's calls) ---- */

int cmd_admin_ask(const CliArgs *a, AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret)
{
	return ask(a, t, endpoint, req, ret);
}

int cmd_admin_call(const CliArgs *a, const AdminTarget *t, const char *endpoint, const json_t *req, json_t **ret)
{
	return call(a, t, endpoint, req, ret);
}

int cmd_admin_open_bound(const CliArgs *a, const AdminTarget *t, const json_t *j, int flags, int *ret_fd)
{
	return open_bound(a, t, j, flags, ret_fd);
}

int cmd_admin_print_json(const json_t *j)
{
	return print_json(j);
}

int cmd_admin_parse_o(const CliArgs *a, json_t *opts)
{
	for (int i = 0; i < a->n_o; i++) {
		const char *eq = strchr(a->o[i], '=');
		_cleanup_free_ char *key = eq ? strndup(a->o[i], (size_t)(eq - a->o[i])) : NULL;

		if (!eq || eq == a->o[i] || !key)
			return cli_usage_error(a, "-o takes KEY=VALUE, not '%s'", a->o[i]);
		if (json_object_set_new(opts, key, json_string(eq + 1)) < 0)
			return cli_fail(a, "out of memory");
	}
	return 0;
}
