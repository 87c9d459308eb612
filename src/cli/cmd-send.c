/* SPDX-License-Identifier: MIT */
/*
 * Send and receive, as export and import: the plugin binds the snapshots
 * (read-only, /Admin.VolumeExportOpen) or the pending directory (read-write,
 * /Admin.VolumeReceiveOpen) under its propagated mount, and this command
 * reads or writes them there; the plugin moves no bulk data and keeps no
 * network.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin-protocol.h"
#include "cli/admin-client.h"
#include "cli/cmd-admin.h"
#include "cli/cmd-send.h"
#include "stream/recv-tree.h"
#include "stream/send-tree.h"
#include "volume/snapshot.h"
#include "volume/volume-options.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

#define RECEIVE_RECORDS_MAX 100000000ull

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	stop = 1;
}

static void catch_stop(bool pipe_too)
{
	struct sigaction sa = { .sa_handler = on_stop }, ign = { .sa_handler = SIG_IGN };

	(void)sigaction(SIGINT, &sa, NULL);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGHUP, &sa, NULL);
	if (pipe_too)
		(void)sigaction(SIGPIPE, &ign, NULL);
}

static const char *str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- send ---- */

typedef struct Bound {
	json_t *open; /* the export's answer */
	int fd;
} Bound;

static int bind_snapshot(const CliArgs *a, AdminTarget *t, bool found, const char *name, const char *snap, Bound *b)
{
	_cleanup_(json_decrefp) json_t *req = json_pack("{s:s,s:s}", "Name", name, "Snapshot", snap);
	const char *id;
	int r;

	if (!req)
		return cli_fail(a, "out of memory");
	/* The plugin is found once, for the first snapshot. */
	r = found ? cmd_admin_call(a, t, ADMIN_PATH_VOLUME_EXPORT_OPEN, req, &b->open)
		  : cmd_admin_ask(a, t, ADMIN_PATH_VOLUME_EXPORT_OPEN, req, &b->open);
	if (r != 0)
		return r;
	id = str(b->open, "id");
	if (!id || !snapshot_id_is_valid(id))
		return cli_fail(a, "snapshot %s of volume %s has no ID (it was taken by an older nvmevol, or the plugin is "
				"older than this command): take a new snapshot and send that", snap, name);
	return cmd_admin_open_bound(a, t, b->open, O_RDONLY, &b->fd);
}

static void unbind_snapshot(const CliArgs *a, const AdminTarget *t, const char *name, Bound *b)
{
	_cleanup_(json_decrefp) json_t *req = NULL, *closed = NULL;

	if (b->fd >= 0)
		(void)close(b->fd);
	b->fd = -EBADF;
	if (b->open && str(b->open, "token")) {
		req = json_pack("{s:s,s:s}", "Name", name, "Token", str(b->open, "token"));
		if (req)
			(void)cmd_admin_call(a, t, ADMIN_PATH_VOLUME_EXPORT_CLOSE, req, &closed);
	}
	json_decref(b->open);
	b->open = NULL;
}

static char *header_json(const char *name, const char *snap, const Bound *s2, const char *from, const Bound *s1)
{
	_cleanup_(json_decrefp) json_t *h = NULL;
	json_t *opts = json_object_get(s2->open, "options");

	h = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s*,s:s*,s:O,s:I}", "format", "nvmevol-send", "version",
		      (int)SEND_STREAM_VERSION, "volume", name, "snapshot", snap, "snapshot_id", str(s2->open, "id"),
		      "base_snapshot", from, "base_id", s1 ? str(s1->open, "id") : NULL, "options",
		      json_is_object(opts) ? opts : json_object(), "sent_at", (json_int_t)time(NULL));
	/* A move's snapshot is one on the other side too: a Remove there takes it along. */
	if (h && json_is_true(json_object_get(s2->open, "by_move")))
		json_object_set_new(h, "by_move", json_true());
	return h ? json_dumps(h, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

int send_pass(const CliArgs *a, const char *name, const char *snap, const char *from, int out, SendPassResult *ret)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_free_ char *header = NULL, *err = NULL;
	Bound s2 = { .fd = -EBADF }, s1 = { .fd = -EBADF };
	SendTreeStats st = { 0 };
	int rc, r;

	*ret = (SendPassResult){ 0 };
	rc = bind_snapshot(a, &t, false, name, snap, &s2);
	if (rc == 0 && from)
		rc = bind_snapshot(a, &t, true, name, from, &s1);
	if (rc == 0 && from && streq(str(s1.open, "id"), str(s2.open, "id")))
		rc = cli_fail(a, "--from %s and --snapshot %s are the same snapshot", from, snap);
	if (rc == 0 && !(header = header_json(name, snap, &s2, from, from ? &s1 : NULL)))
		rc = cli_fail(a, "out of memory");
	if (rc == 0) {
		catch_stop(true);
		r = send_tree(s2.fd, from ? s1.fd : -EBADF, header, out, &stop, &st, &err);
		if (r < 0)
			rc = cli_fail(a, "the send of %s failed: %s; what was written is not a whole stream (a receive of it "
				      "changes nothing)", name, r == -EINTR ? "interrupted" : err ? err : errno_str(r));
		snprintf(ret->snapshot_id, sizeof(ret->snapshot_id), "%s", str(s2.open, "id"));
		if (from)
			snprintf(ret->base_id, sizeof(ret->base_id), "%s", str(s1.open, "id"));
	}
	/* Always: the binds go. */
	unbind_snapshot(a, &t, name, &s2);
	unbind_snapshot(a, &t, name, &s1);
	ret->entries = st.entries;
	ret->data_bytes = st.data_bytes;
	ret->records = st.records;
	ret->bytes = st.bytes;
	return rc;
}

int cmd_volume_send(const CliArgs *a, char **args, int n)
{
	_cleanup_(json_decrefp) json_t *sum = NULL;
	SendPassResult res;
	int rc;

	if (!a->snapshot)
		return cli_usage_error(a, "--snapshot S2 is required: the snapshot to send (take one with 'nvmevol volume "
				       "snapshot %s')", args[0]);
	if (!volume_name_is_valid(a->snapshot) || (a->from && !volume_name_is_valid(a->from)))
		return cli_usage_error(a, "invalid snapshot name '%s': 2 to 128 characters from [A-Za-z0-9_.-], starting "
				       "with a letter or digit", volume_name_is_valid(a->snapshot) ? a->from : a->snapshot);
	if (isatty(STDOUT_FILENO))
		return cli_fail(a, "the stream goes to standard output, which is a terminal: redirect it (> FILE, | ssh "
				"HOST nvmevol volume receive NAME)");
	rc = send_pass(a, args[0], a->snapshot, a->from, STDOUT_FILENO, &res);
	if (rc != 0)
		return rc;
	sum = json_pack("{s:s,s:s,s:s,s:s*,s:s*,s:I,s:I,s:I,s:I}", "volume", args[0], "snapshot", a->snapshot,
			"snapshot_id", res.snapshot_id, "from", a->from, "base_id", a->from ? res.base_id : NULL, "entries",
			(json_int_t)res.entries, "data_bytes", (json_int_t)res.data_bytes, "records",
			(json_int_t)res.records, "bytes", (json_int_t)res.bytes);
	if (a->given & CLI_OPT_JSON) {
		if (sum && json_dumpf(sum, stderr, JSON_INDENT(2) | JSON_SORT_KEYS) == 0)
			fputc('\n', stderr);
	} else
		fprintf(stderr, "sent snapshot %s of volume %s%s%s: %llu entries, %llu bytes of file data, %llu bytes in "
			"all\n", a->snapshot, args[0], a->from ? " as the changes since " : "", a->from ? a->from : "",
			(unsigned long long)res.entries, (unsigned long long)res.data_bytes, (unsigned long long)res.bytes);
	return CLI_EXIT_OK;
}

/* ---- receive ---- */

typedef struct Header {
	json_t *j;
	const char *snapshot, *id, *base;
	json_t *options;
	bool by_move;
} Header;

static int parse_header(const CliArgs *a, const char *text, Header *h)
{
	json_error_t je;
	const char *k;
	json_t *v, *base;

	h->j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!h->j || !json_is_object(h->j) || !streq(str(h->j, "format") ?: "", "nvmevol-send"))
		return cli_fail(a, "the stream's header is not an nvmevol send header%s%s", h->j ? "" : ": ",
				h->j ? "" : je.text);
	h->snapshot = str(h->j, "snapshot");
	h->id = str(h->j, "snapshot_id");
	base = json_object_get(h->j, "base_id");
	h->base = json_is_string(base) ? json_string_value(base) : NULL;
	h->options = json_object_get(h->j, "options");
	if (!h->snapshot || !volume_name_is_valid(h->snapshot) || !h->id || !snapshot_id_is_valid(h->id) ||
	    !(json_is_null(base) || !base || (h->base && snapshot_id_is_valid(h->base))) || !json_is_object(h->options) ||
	    (json_object_get(h->j, "by_move") && !json_is_boolean(json_object_get(h->j, "by_move"))))
		return cli_fail(a, "the stream's header has an invalid snapshot name, snapshot ID, base ID, options or "
				"by_move");
	h->by_move = json_is_true(json_object_get(h->j, "by_move"));
	json_object_foreach(h->options, k, v)
		if (!json_is_string(v))
			return cli_fail(a, "the stream's header has an option '%.64s' that is not a string", k);
	return 0;
}

/* The sender's options (its partition is another host's) with @over on top. */
static json_t *merged_options(const json_t *sender, const json_t *over)
{
	json_t *o = json_deep_copy(sender);
	const char *k;
	json_t *v;

	if (!o)
		return NULL;
	json_object_del(o, "partition");
	json_object_foreach((json_t *)over, k, v)
		json_object_set(o, k, v);
	return o;
}

int receive_pass(const CliArgs *a, const char *name, const json_t *over, int in, ReceivePassResult *ret)
{
	_cleanup_(admin_target_done) AdminTarget t = { 0 };
	_cleanup_(json_decrefp) json_t *opts = NULL, *req = NULL, *j = NULL, *fin = NULL, *done = NULL;
	_cleanup_free_ char *err = NULL;
	_cleanup_close_ int fd = -EBADF;
	SendReader rd;
	SendRecord rec = { 0 };
	Header h = { 0 };
	RecvLimits lim = { .max_records = RECEIVE_RECORDS_MAX };
	RecvStats st = { 0 };
	int rc, r;

	*ret = (ReceivePassResult){ 0 };
	catch_stop(false);
	r = send_reader_init(&rd, send_read_fd, &in, &err);
	if (r == 0)
		r = send_reader_next(&rd, &rec, &err);
	if (r < 0 || (r == 1 && rec.type != SEND_HEADER)) {
		send_reader_done(&rd);
		return cli_fail(a, "cannot receive volume %s: %s; nothing was changed", name, err ? err : "no header");
	}
	rc = parse_header(a, rec.json, &h);
	if (rc != 0)
		goto out;
	snprintf(ret->snapshot, sizeof(ret->snapshot), "%s", h.snapshot);
	snprintf(ret->snapshot_id, sizeof(ret->snapshot_id), "%s", h.id);
	ret->incremental = h.base != NULL;
	if (h.base && json_object_size(over) > 0) {
		rc = cli_usage_error(a, "-o applies to the new volume of a full stream; this one is incremental (volume %s "
				     "keeps its options: change them with 'nvmevol volume set')", name);
		goto out;
	}
	opts = merged_options(h.options, over);
	req = opts ? json_pack("{s:s,s:O,s:s*}", "Name", name, "Options", opts, "Base", h.base) : NULL;
	if (!req) {
		rc = cli_fail(a, "out of memory");
		goto out;
	}
	if ((rc = cmd_admin_ask(a, &t, ADMIN_PATH_VOLUME_RECEIVE_OPEN, req, &j)) != 0)
		goto out;
	lim.max_bytes = (uint64_t)json_integer_value(json_object_get(j, "max_bytes"));
	lim.allow_devices = json_is_true(json_object_get(j, "allow_devices"));
	rc = cmd_admin_open_bound(a, &t, j, O_RDONLY, &fd);
	if (rc == 0) {
		r = recv_tree(&rd, fd, &lim, &st, &err);
		if (r == 0 && stop)
			r = -EINTR;
		if (r < 0)
			rc = cli_fail(a, "cannot receive volume %s: %s; nothing was changed", name,
				      r == -EINTR ? "interrupted" : err ? err : errno_str(r));
	}
	if (fd >= 0) {
		(void)close(fd); /* before the commit: the bind goes, and must not be busy */
		fd = -EBADF;
	}
	fin = json_pack("{s:s,s:s,s:s*,s:s*}", "Name", name, "Token", str(j, "token") ?: "", "Partition",
			h.base ? NULL : str(j, "partition"), "Base", h.base);
	if (!fin) {
		rc = cli_fail(a, "out of memory");
		goto out;
	}
	if (rc != 0) {
		(void)cmd_admin_call(a, &t, ADMIN_PATH_VOLUME_RECEIVE_ABORT, fin, &done);
		goto out;
	}
	json_object_set(fin, "Options", opts);
	json_object_set_new(fin, "Snapshot", json_string(h.snapshot));
	json_object_set_new(fin, "Id", json_string(h.id));
	json_object_set_new(fin, "ByMove", json_boolean(h.by_move));
	rc = cmd_admin_call(a, &t, ADMIN_PATH_VOLUME_RECEIVE_COMMIT, fin, &done);
	ret->records = st.records;
	ret->data_bytes = st.data_bytes;
	ret->bytes = st.bytes;
out:
	send_record_done(&rec);
	send_reader_done(&rd);
	json_decref(h.j);
	return rc;
}

int cmd_volume_receive(const CliArgs *a, char **args, int n)
{
	_cleanup_(json_decrefp) json_t *over = json_object(), *sum = NULL;
	ReceivePassResult res;
	int rc;

	if (!over)
		return cli_fail(a, "out of memory");
	if ((rc = cmd_admin_parse_o(a, over)) != 0)
		return rc;
	if (isatty(STDIN_FILENO))
		return cli_fail(a, "the stream comes on standard input, which is a terminal: redirect it (< FILE, ssh HOST "
				"nvmevol volume send ... |)");
	rc = receive_pass(a, args[0], over, STDIN_FILENO, &res);
	if (rc != 0)
		return rc;
	if (a->given & CLI_OPT_JSON) {
		sum = json_pack("{s:s,s:s,s:s,s:b,s:I,s:I,s:I}", "volume", args[0], "snapshot", res.snapshot, "snapshot_id",
				res.snapshot_id, "incremental", res.incremental, "records", (json_int_t)res.records,
				"data_bytes", (json_int_t)res.data_bytes, "bytes", (json_int_t)res.bytes);
		return sum ? cmd_admin_print_json(sum) : cli_fail(a, "out of memory");
	}
	printf("volume %s %s snapshot %s: %llu records, %llu bytes of file data, %llu bytes in all\n", args[0],
	       res.incremental ? "updated to" : "created from", res.snapshot, (unsigned long long)res.records,
	       (unsigned long long)res.data_bytes, (unsigned long long)res.bytes);
	return CLI_EXIT_OK;
}
