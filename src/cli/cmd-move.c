/* SPDX-License-Identifier: MIT */
/*
 * volume move: the source is fenced before the final pass (so nothing can
 * write it between the final snapshot and the fence), and unfenced again if
 * that pass fails. Live passes run while the volume is mounted.
 *
 * While a move runs, the copy on the other node is fenced toward this node
 * (a Mount there is refused and names this node, where the volume still
 * lives); the final pass lifts that fence. So a copy the other node holds,
 * not mounted and fenced toward here, was written by moves from here alone:
 * a rerun continues from the newest snapshot both sides hold (by ID), and
 * a copy that is anything else is refused, never overwritten.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin-protocol.h"
#include "cli/admin-client.h"
#include "cli/cmd-admin.h"
#include "cli/cmd-move.h"
#include "cli/cmd-send.h"
#include "cli/docker-client.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "util/time-util.h"

/* The longest --small-seconds: a day. */
#define SMALL_SECONDS_MAX 86400.0

typedef struct Move {
	const CliArgs *a;
	AdminTarget t;
	const char *name;
	char node[65];   /* the other node */
	char here[254];  /* this node, as its plugin names it: what the copy there is fenced toward */
	json_t *over, *passes;
	json_t *taken;   /* snapshot names either side has: a new one takes none of them */
	bool there_fenced; /* the copy there is fenced toward here (by this move or the one it resumes) */
} Move;

static const char *str(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* /bin/sh -c 'VIA nvmevol ARGS' with @in as stdin; its stdout in *ret_out (may be NULL); the exit status. */
static int run_there(Move *m, const char *args, int in, char **ret_out)
{
	_cleanup_free_ char *cmd = NULL;
	int p[2], st = 0;
	pid_t pid;
	char buf[4096];
	size_t len = 0;
	ssize_t k;
	char *out = NULL;

	if (asprintf(&cmd, "%s nvmevol %s", m->a->via, args) < 0 || pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		/* A query there (status, snapshot-rm) reads nothing: never the terminal or a stream of ours. */
		if (in < 0)
			in = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in >= 0)
			dup2(in, 0);
		dup2(p[1], 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	while ((k = read(p[0], buf, sizeof(buf))) > 0) {
		char *n = realloc(out, len + (size_t)k + 1);
		if (!n)
			break;
		out = n;
		memcpy(out + len, buf, (size_t)k);
		len += (size_t)k;
		out[len] = '\0';
	}
	close(p[0]);
	(void)waitpid(pid, &st, 0);
	if (ret_out)
		*ret_out = out;
	else
		free(out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static int quiet_call(Move *m, const char *endpoint, json_t *req, json_t **ret, char **err)
{
	int r = req ? admin_client_call(&m->t, endpoint, req, m->a->command, ret, err) : -ENOMEM;
	json_decref(req);
	return r;
}

/* ---- who holds the volume ---- */

/*
 * {"mount_count": N, "containers": [names]} from Docker's running containers
 * that use the volume, or {"mount_count": N, "docker_unavailable": why} where
 * Docker cannot be asked (a host service without Docker, no socket).
 */
static json_t *holders(Move *m, int mounts)
{
	_cleanup_(json_decrefp) json_t *all = NULL;
	_cleanup_free_ char *err = NULL;
	json_t *h = json_pack("{s:i}", "mount_count", mounts), *names, *c;
	size_t i;
	int r;

	if (!h)
		return NULL;
	r = docker_containers_using(m->name, &all, &err);
	if (r < 0) {
		json_object_set_new(h, "docker_unavailable", json_string(err ? err : errno_str(r)));
		return h;
	}
	names = json_array();
	json_array_foreach(all, i, c)
		if (docker_container_running(c) && docker_container_name(c))
			json_array_append_new(names, json_string(docker_container_name(c)));
	json_object_set_new(h, "containers", names);
	return h;
}

/* "container(s) a, b (2 mount(s))", or the count and why the containers are not named. */
static void holders_text(const Move *m, const json_t *h, char *buf, size_t len)
{
	const json_t *names = json_object_get(h, "containers"), *c;
	int mounts = (int)json_integer_value(json_object_get(h, "mount_count"));
	size_t i, k = 0;

	if (!names) {
		snprintf(buf, len, "%d mount(s); the containers cannot be named: %s", mounts,
			 str(h, "docker_unavailable") ?: "Docker cannot be asked");
		return;
	}
	if (json_array_size(names) == 0) {
		snprintf(buf, len, "%d mount(s), but Docker names no running container using it (a count left by a "
			 "crash? 'nvmevol volume release %s' clears one)", mounts, m->name);
		return;
	}
	k = (size_t)snprintf(buf, len, "container(s)");
	json_array_foreach(names, i, c)
		if (k < len)
			k += (size_t)snprintf(buf + k, len - k, "%s %s", i ? "," : "", json_string_value(c));
	if (k < len)
		snprintf(buf + k, len - k, " (%d mount(s))", mounts);
}

/* ---- this side ---- */

/* Volume @m->name here: its Status (a new reference), or NULL with the Err printed. */
static json_t *show_here(Move *m)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL;

	if (quiet_call(m, ADMIN_PATH_VOLUME_SHOW, json_pack("{s:s}", "Name", m->name), &j, &err) < 0) {
		cli_fail(m->a, "%s", err ? err : "cannot read the volume");
		return NULL;
	}
	return json_incref(json_object_get(j, "Status") ?: j);
}

static int mount_count(Move *m)
{
	_cleanup_(json_decrefp) json_t *s = show_here(m);

	return s ? (int)json_integer_value(json_object_get(s, "mount_count")) : -1;
}

static void note_taken(Move *m, const json_t *status)
{
	const json_t *s;
	size_t i;

	json_array_foreach(json_object_get(status, "snapshots"), i, s)
		if (str(s, "name"))
			json_object_set_new(m->taken, str(s, "name"), json_true());
}

/* The next free move-STAMP-N in @snap: a name neither side has. */
static void next_snapshot(Move *m, const char *prefix, int *i, char *snap, size_t len)
{
	do
		snprintf(snap, len, "%s-%d", prefix, ++*i);
	while (json_object_get(m->taken, snap));
	json_object_set_new(m->taken, snap, json_true());
}

/* ---- the other side ---- */

/* Volume @m->name there: 1 and its Status in *ret, 0 when it has none, else the exit status (printed). */
static int show_there(Move *m, json_t **ret)
{
	_cleanup_free_ char *args = NULL, *out = NULL;
	json_t *j;
	int rc;

	if (asprintf(&args, "volume show %s --json 2>&1", m->name) < 0)
		return cli_fail(m->a, "out of memory");
	rc = run_there(m, args, -1, &out);
	if (rc == 0 && (j = json_loads(out ?: "", 0, NULL))) {
		*ret = json_incref(json_object_get(j, "Status") ?: j);
		json_decref(j);
		return 1;
	}
	if (rc != 0 && out && strstr(out, "no such volume"))
		return 0;
	return cli_fail(m->a, "cannot ask the other node about volume %s ('%s nvmevol volume show %s --json' exited "
			"%d): %s; nothing was sent", m->name, m->a->via, m->name, rc, out ? out : "no output");
}

/* `CMD nvmevol volume fence NAME HERE` (@fence) or `unfence NAME` there; 0 or -1. */
static int fence_there(Move *m, bool fence)
{
	_cleanup_free_ char *args = NULL, *here_q = shell_quote_dup(m->here);

	/* The host's name may hold anything a shell reads (a kernel without one says "(none)"). */
	if (!here_q)
		return -1;
	if ((fence ? asprintf(&args, "volume fence %s %s > /dev/null", m->name, here_q)
		   : asprintf(&args, "volume unfence %s > /dev/null", m->name)) < 0)
		return -1;
	if (run_there(m, args, -1, NULL) != 0)
		return -1;
	m->there_fenced = fence;
	return 0;
}

static void drop_there(Move *m, const char *snap)
{
	_cleanup_free_ char *args = NULL;

	if (asprintf(&args, "volume snapshot-rm %s %s > /dev/null", m->name, snap) >= 0)
		(void)run_there(m, args, -1, NULL);
}

static const json_t *find_id(const json_t *status, const char *id)
{
	const json_t *s;
	size_t i;

	json_array_foreach(json_object_get(status, "snapshots"), i, s)
		if (id && str(s, "id") && streq(str(s, "id"), id))
			return s;
	return NULL;
}

static const json_t *find_name(const json_t *status, const char *name)
{
	const json_t *s;
	size_t i;

	json_array_foreach(json_object_get(status, "snapshots"), i, s)
		if (str(s, "name") && streq(str(s, "name"), name))
			return s;
	return NULL;
}

/* Whether @a is newer than @b (their time, then their name: move-STAMP-N sorts by N within a second). */
static bool newer(const json_t *a, const json_t *b)
{
	int c = strcmp(str(a, "created_at") ?: "", str(b, "created_at") ?: "");
	return c > 0 || (c == 0 && strcmp(str(a, "name") ?: "", str(b, "name") ?: "") > 0);
}

typedef enum Resume { RESUME_NONE, RESUME_FROM, RESUME_DONE } Resume;

/*
 * The copy there (@there) must be one that moves from here alone wrote: not
 * mounted, fenced toward here, with a snapshot this side has (by ID). Then
 * @base is the newest such snapshot. A move that ended (the copy unfenced and
 * this side fenced toward it, the copy holding this side's newest snapshot)
 * is RESUME_DONE. Anything else: an Err, nothing changed on either side.
 */
static int plan_resume(Move *m, const json_t *here, const json_t *there, bool fenced_here, char *base, size_t len,
		       Resume *ret)
{
	const json_t *s, *best = NULL, *newest = NULL, *moved = json_object_get(there, "moved_to");
	int mounts = (int)json_integer_value(json_object_get(there, "mount_count"));
	size_t i;

	json_array_foreach(json_object_get(here, "snapshots"), i, s) {
		if (!newest || newer(s, newest))
			newest = s;
		if (find_id(there, str(s, "id")) && (!best || newer(s, best)))
			best = s;
	}
	if (mounts > 0)
		return cli_fail(m->a, "volume %s exists on %s and is in use there (%d mount(s)): that copy is not one a "
				"move from here left. Nothing was sent and nothing changed", m->name, m->node, mounts);
	if (!json_is_true(json_object_get(there, "fenced"))) {
		if (fenced_here && newest && find_id(there, str(newest, "id"))) {
			*ret = RESUME_DONE;
			snprintf(base, len, "%s", str(newest, "name"));
			return 0;
		}
		return cli_fail(m->a, "volume %s exists on %s and is not fenced toward %s: it is not a copy a move from "
				"here is writing (a move fences its copy until the final pass), or it was unfenced and may "
				"have been written there since. Nothing was sent and nothing changed; to move from scratch, "
				"remove it there first ('docker volume rm %s' on %s)", m->name, m->node, m->here, m->name,
				m->node);
	}
	if (!str(moved, "host") || !streq(str(moved, "host"), m->here))
		return cli_fail(m->a, "volume %s exists on %s fenced toward %s, not toward %s (this node): it is not the "
				"copy of a move from here. Nothing was sent and nothing changed", m->name, m->node,
				str(moved, "host") ?: "?", m->here);
	if (!best)
		return cli_fail(m->a, "volume %s on %s has no snapshot in common with this node's (by ID): an incremental "
				"pass needs one. Nothing was sent and nothing changed; to move from scratch, remove it there "
				"first ('nvmevol volume unfence %s' then 'docker volume rm %s' on %s)", m->name, m->node,
				m->name, m->name, m->node);
	/* Snapshots there that a move made and this side never saw committed: a pass that broke after its commit. */
	json_array_foreach(json_object_get(there, "snapshots"), i, s)
		if (json_is_true(json_object_get(s, "by_move")) && !find_id(here, str(s, "id")) && str(s, "name"))
			drop_there(m, str(s, "name"));
	snprintf(base, len, "%s", str(best, "name"));
	*ret = RESUME_FROM;
	m->there_fenced = true;
	return 0;
}

/* ---- passes ---- */

/* One pass: snapshot @snap, its stream (since @from) into the receiver there. */
static int one_pass(Move *m, const char *snap, const char *from, const char *kind, uint64_t *ret_bytes,
		    double *ret_seconds)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL, *args = NULL, *node_q = NULL;
	SendPassResult res;
	uint64_t t0 = now_mono_ms();
	int p[2], rc, st;
	pid_t pid;

	if (quiet_call(m, ADMIN_PATH_VOLUME_SNAPSHOT,
		       json_pack("{s:s,s:s,s:b}", "Name", m->name, "Snapshot", snap, "ByMove", true), &j, &err) < 0)
		return cli_fail(m->a, "cannot take snapshot %s of %s: %s", snap, m->name, err ? err : "?");
	/* Names are checked ([A-Za-z0-9_.-]); a node name is whatever its host is called: quoted. */
	node_q = shell_quote_dup(m->node);
	if (!node_q ||
	    asprintf(&args, "volume receive %s%s%s --json", m->name,
		     !from && m->node[0] && json_object_get(m->over, "node") ? " -o node=" : "",
		     !from && m->node[0] && json_object_get(m->over, "node") ? node_q : "") < 0 ||
	    pipe2(p, O_CLOEXEC) < 0)
		return cli_fail(m->a, "out of memory");
	pid = fork();
	if (pid == 0) {
		close(p[1]);
		_exit(run_there(m, args, p[0], NULL));
	}
	close(p[0]);
	rc = pid < 0 ? cli_fail(m->a, "cannot fork") : send_pass(m->a, m->name, snap, from, p[1], &res);
	close(p[1]);
	if (pid > 0 && (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) && rc == 0)
		rc = cli_fail(m->a, "the receive on the other side failed (its message is above)");
	if (rc != 0) {
		/* The other side did not commit it: this side's copy goes too. */
		json_decref(j);
		j = NULL;
		free(err);
		err = NULL;
		(void)quiet_call(m, ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE,
				 json_pack("{s:s,s:s}", "Name", m->name, "Snapshot", snap), &j, &err);
		return rc;
	}
	*ret_bytes = res.bytes;
	*ret_seconds = (now_mono_ms() - t0) / 1000.0;
	json_array_append_new(m->passes, json_pack("{s:s,s:s,s:s*,s:I,s:I,s:f}", "kind", kind, "snapshot", snap, "from",
						   from, "bytes", (json_int_t)res.bytes, "data_bytes",
						   (json_int_t)res.data_bytes, "seconds", *ret_seconds));
	return 0;
}

static void drop_snapshot(Move *m, const char *snap)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL;

	(void)quiet_call(m, ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE, json_pack("{s:s,s:s}", "Name", m->name, "Snapshot", snap),
			 &j, &err);
	drop_there(m, snap);
}

static int parse_seconds(const char *s, double *ret)
{
	char *end = NULL;
	double d = strtod(s, &end);

	if (!*s || !end || *end || !isfinite(d) || d < 0 || d > SMALL_SECONDS_MAX)
		return -EINVAL;
	*ret = d;
	return 0;
}

static int print_summary(const CliArgs *a, const json_t *sum, const json_t *passes, const char *name,
			 const char *node, const char *snap, uint64_t downtime)
{
	if (a->given & CLI_OPT_JSON)
		return sum ? cmd_admin_print_json(sum) : CLI_EXIT_FAILURE;
	printf("volume %s moved to %s; this copy is fenced ('nvmevol volume unfence %s' to use it here again)\n", name,
	       node, name);
	if (str(sum, "resumed_from"))
		printf("resumed from snapshot %s, which %s held already\n", str(sum, "resumed_from"), node);
	for (size_t k = 0; k < json_array_size(passes); k++) {
		json_t *p = json_array_get(passes, k);
		printf("pass %zu (%s): %lld bytes in %.3f s\n", k + 1, json_string_value(json_object_get(p, "kind")),
		       (long long)json_integer_value(json_object_get(p, "bytes")),
		       json_real_value(json_object_get(p, "seconds")));
	}
	printf("downtime (the final pass): %.3f s; snapshot %s kept on both sides\n", downtime / 1000.0, snap);
	return CLI_EXIT_OK;
}

int cmd_volume_move(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t0 = { 0 };
	_cleanup_(json_decrefp) json_t *here = NULL, *there = NULL, *j = NULL, *passes = json_array(),
				       *over = json_object(), *taken = json_object(), *sum = NULL, *held = NULL;
	_cleanup_free_ char *err = NULL, *status = NULL;
	Move m = { .a = a, .name = args[0], .passes = passes, .over = over, .taken = taken };
	char prefix[64], snap[160], prev[160] = "", resumed[160] = "", why[1024];
	const char *ended = "not mounted";
	uint64_t bytes = 0, max_passes = 8, small = 64ull << 20, timeout = 600, t_final, downtime, waited_ms = 0;
	double small_seconds = 5, seconds = 0;
	bool fenced_here = false, prev_ours = false; /* prev: a snapshot a move made (dropped once passed on) */
	Resume resume = RESUME_NONE;
	int mounts, rc, i = 0;
	struct tm tm;
	time_t now = time(NULL);

	if (!a->via || !*a->via)
		return cli_usage_error(a, "--via 'CMD' is required: the command prefix that reaches the other node");
	if ((a->passes && parse_u64(a->passes, &max_passes) < 0) || (a->small && parse_size(a->small, &small) < 0) ||
	    (a->timeout && parse_u64(a->timeout, &timeout) < 0))
		return cli_usage_error(a, "--passes and --timeout take a number, --small a size");
	if (a->small_seconds && parse_seconds(a->small_seconds, &small_seconds) < 0)
		return cli_usage_error(a, "--small-seconds takes a number of seconds from 0 to %.0f (0.5 is half a second)",
				       SMALL_SECONDS_MAX);
	if (a->node && (strlen(a->node) > 64 || strspn(a->node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != strlen(a->node)))
		return cli_usage_error(a, "invalid --node '%s': a host name", a->node);
	if (!passes || !over || !taken)
		return cli_fail(a, "out of memory");
	{
		_cleanup_(json_decrefp) json_t *empty = json_object();

		if ((rc = cmd_admin_ask(a, &t0, ADMIN_PATH_STATUS, empty, &j)) != 0)
			return rc;
	}
	m.t = t0;
	if (!str(j, "node")) {
		m.t = (AdminTarget){ 0 };
		return cli_fail(a, "the plugin here does not say its node name (Status has no 'node'): it is older than "
				"this command; upgrade it");
	}
	snprintf(m.here, sizeof(m.here), "%s", str(j, "node"));
	if (a->node)
		snprintf(m.node, sizeof(m.node), "%s", a->node);
	else {
		json_t *s;
		if (run_there(&m, "status --json", -1, &status) != 0 || !(s = json_loads(status ?: "", 0, NULL)) ||
		    !json_is_string(json_object_get(s, "node"))) {
			m.t = (AdminTarget){ 0 };
			return cli_fail(a, "cannot learn the other node's name from '%s nvmevol status --json': give --node "
					"NODE", a->via);
		}
		snprintf(m.node, sizeof(m.node), "%s", json_string_value(json_object_get(s, "node")));
		json_decref(s);
	}
	rc = CLI_EXIT_FAILURE;
	if (!(here = show_here(&m)))
		goto out;
	mounts = (int)json_integer_value(json_object_get(here, "mount_count"));
	if (json_is_true(json_object_get(here, "fenced"))) {
		const char *to = str(json_object_get(here, "moved_to"), "host");
		/* A move to that node that was killed after its fence: go on with the final pass. */
		if (!to || !streq(to, m.node)) {
			rc = cli_fail(a, "volume %s is fenced here already (moved to %s); 'nvmevol volume unfence %s' first",
				      m.name, to ?: "?", m.name);
			goto out;
		}
		fenced_here = true;
	}
	if (mounts > 0 && (a->given & CLI_OPT_FINAL_NOW)) {
		held = holders(&m, mounts);
		holders_text(&m, held, why, sizeof(why));
		if (a->given & CLI_OPT_JSON) {
			_cleanup_(json_decrefp) json_t *refusal =
				json_pack("{s:s,s:s,s:O*}", "volume", m.name, "result", "in use", "holders", held);
			if (refusal)
				(void)cmd_admin_print_json(refusal);
		}
		rc = cli_fail(a, "volume %s is in use by %s, and --final-now was given: stop them; nothing was changed",
			      m.name, why);
		goto out;
	}
	note_taken(&m, here);
	if (json_is_string(json_object_get(json_object_get(here, "options"), "node")))
		json_object_set_new(over, "node", json_string(m.node));
	rc = show_there(&m, &there);
	if (rc == 1) {
		note_taken(&m, there);
		if ((rc = plan_resume(&m, here, there, fenced_here, prev, sizeof(prev), &resume)) != 0)
			goto out;
		snprintf(resumed, sizeof(resumed), "%s", prev);
		prev_ours = json_is_true(json_object_get(find_name(here, prev), "by_move"));
	} else if (rc != 0)
		goto out;
	if (resume == RESUME_DONE) {
		m.t = (AdminTarget){ 0 };
		if (a->given & CLI_OPT_JSON) {
			sum = json_pack("{s:s,s:s,s:s,s:s}", "volume", m.name, "node", m.node, "result", "moved already",
					"kept_snapshot", prev);
			return sum ? cmd_admin_print_json(sum) : CLI_EXIT_FAILURE;
		}
		printf("volume %s was moved to %s already (it holds snapshot %s, the last this node sent); nothing to do\n",
		       m.name, m.node, prev);
		return CLI_EXIT_OK;
	}
	gmtime_r(&now, &tm);
	strftime(prefix, sizeof(prefix), "move-%Y%m%dT%H%M%S", &tm);
	/* Live passes while it is mounted. */
	if (mounts > 0 && !fenced_here)
		ended = "passes";
	while (mounts > 0 && !fenced_here && (uint64_t)i < max_passes) {
		next_snapshot(&m, prefix, &i, snap, sizeof(snap));
		if ((rc = one_pass(&m, snap, prev[0] ? prev : NULL, prev[0] ? "incremental" : "full", &bytes, &seconds)) != 0)
			goto fail;
		if (!m.there_fenced && fence_there(&m, true) < 0) {
			/* Its data came from this pass: the copy stays, unfenced, and a rerun refuses it. */
			rc = cli_fail(a, "cannot fence the copy on %s toward %s after the first pass ('%s nvmevol volume fence "
				      "%s %s' failed)", m.node, m.here, a->via, m.name, m.here);
			snprintf(prev, sizeof(prev), "%s", snap);
			goto fail;
		}
		if (prev[0] && prev_ours)
			drop_snapshot(&m, prev);
		snprintf(prev, sizeof(prev), "%s", snap);
		prev_ours = true;
		if (bytes < small) {
			ended = "small";
			break;
		}
		if (seconds < small_seconds) {
			ended = "small-seconds";
			break;
		}
		if ((mounts = mount_count(&m)) <= 0) {
			ended = mounts < 0 ? "passes" : "unmounted";
			break;
		}
	}
	/* Wait for the unmount, then fence: a Mount from now on is refused. */
	for (uint64_t start = now_mono_ms(), shown = 0;;) {
		json_decref(j);
		j = NULL;
		free(err);
		err = NULL;
		if (quiet_call(&m, ADMIN_PATH_VOLUME_FENCE, json_pack("{s:s,s:s}", "Name", m.name, "Host", m.node), &j,
			       &err) >= 0)
			break;
		if ((mounts = mount_count(&m)) <= 0 || (a->given & CLI_OPT_FINAL_NOW) ||
		    now_mono_ms() - start > timeout * 1000) {
			rc = cli_fail(a, "cannot fence volume %s: %s", m.name, err ? err : "?");
			goto fail;
		}
		/* Said at the start, and again whenever the count changes. */
		if (shown != (uint64_t)mounts) {
			json_decref(held);
			held = holders(&m, mounts);
			holders_text(&m, held, why, sizeof(why));
			fprintf(stderr, "volume %s is in use by %s: stop them; waiting up to %llu s\n", m.name, why,
				(unsigned long long)timeout);
			shown = (uint64_t)mounts;
		}
		usleep(200000);
		waited_ms = now_mono_ms() - start;
	}
	t_final = now_mono_ms();
	next_snapshot(&m, prefix, &i, snap, sizeof(snap));
	rc = one_pass(&m, snap, prev[0] ? prev : NULL, "final", &bytes, &seconds);
	if (rc != 0) {
		json_decref(j);
		j = NULL;
		(void)quiet_call(&m, ADMIN_PATH_VOLUME_UNFENCE, json_pack("{s:s}", "Name", m.name), &j, &err);
		goto fail;
	}
	downtime = now_mono_ms() - t_final;
	if (m.there_fenced && fence_there(&m, false) < 0) {
		/* Both copies fenced: nothing can write either; the one there has the final state. */
		rc = cli_fail(a, "the final pass arrived on %s, but the copy there is still fenced: run 'nvmevol volume "
			      "unfence %s' on %s (this copy stays fenced)", m.node, m.name, m.node);
		goto out;
	}
	if (prev[0] && prev_ours)
		drop_snapshot(&m, prev);
	sum = json_pack("{s:s,s:s,s:O,s:f,s:s,s:s*,s:s,s:O*,s:f}", "volume", m.name, "node", m.node, "passes", passes,
			"downtime_seconds", downtime / 1000.0, "kept_snapshot", snap, "resumed_from", resumed[0] ? resumed : NULL,
			"live_passes_ended", ended, "waited_for", held, "waited_seconds", waited_ms / 1000.0);
	m.t = (AdminTarget){ 0 };
	return print_summary(a, sum, passes, m.name, m.node, snap, downtime);
fail:
	if (prev[0] && m.there_fenced)
		fprintf(stderr, "nvmevol volume move: volume %s still serves here, unfenced; %s keeps volume %s as of "
			"snapshot %s, fenced toward this node: run the move again to continue from there\n", m.name,
			m.node, m.name, prev);
	else if (prev[0])
		fprintf(stderr, "nvmevol volume move: volume %s still serves here, unfenced; %s keeps volume %s as of "
			"snapshot %s, not fenced: a rerun refuses that copy; remove it there to move again\n", m.name,
			m.node, m.name, prev);
	else
		fprintf(stderr, "nvmevol volume move: volume %s still serves here, unfenced; nothing was created there\n",
			m.name);
out:
	m.t = (AdminTarget){ 0 };
	return rc;
}
