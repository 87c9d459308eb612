/* SPDX-License-Identifier: MIT */
/*
 * volume move: the source is fenced before the final pass (so nothing can
 * write it between the final snapshot and the fence), and unfenced again if
 * that pass fails. Live passes run while the volume is mounted.
 */
#include <fcntl.h>
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
#include "util/macro.h"
#include "util/strutil.h"
#include "util/time-util.h"

typedef struct Move {
	const CliArgs *a;
	AdminTarget t;
	const char *name;
	char node[65];
	json_t *over, *passes;
} Move;

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

/* One pass: snapshot @snap, its stream (since @from) into the receiver there. */
static int one_pass(Move *m, const char *snap, const char *from, const char *kind, uint64_t *ret_bytes)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL, *args = NULL;
	SendPassResult res;
	uint64_t t0 = now_mono_ms();
	int p[2], rc, st;
	pid_t pid;

	if (quiet_call(m, ADMIN_PATH_VOLUME_SNAPSHOT, json_pack("{s:s,s:s}", "Name", m->name, "Snapshot", snap), &j,
		       &err) < 0)
		return cli_fail(m->a, "cannot take snapshot %s of %s: %s", snap, m->name, err ? err : "?");
	if (asprintf(&args, "volume receive %s%s%s --json", m->name, !from && m->node[0] && json_object_get(m->over, "node") ? " -o node=" : "",
		     !from && json_object_get(m->over, "node") ? m->node : "") < 0 || pipe2(p, O_CLOEXEC) < 0)
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
	json_array_append_new(m->passes, json_pack("{s:s,s:s,s:s*,s:I,s:I,s:f}", "kind", kind, "snapshot", snap, "from",
						   from, "bytes", (json_int_t)res.bytes, "data_bytes",
						   (json_int_t)res.data_bytes, "seconds", (now_mono_ms() - t0) / 1000.0));
	return 0;
}

static void drop_snapshot(Move *m, const char *snap)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL, *args = NULL;

	(void)quiet_call(m, ADMIN_PATH_VOLUME_SNAPSHOT_REMOVE, json_pack("{s:s,s:s}", "Name", m->name, "Snapshot", snap),
			 &j, &err);
	if (asprintf(&args, "volume snapshot-rm %s %s > /dev/null", m->name, snap) >= 0)
		(void)run_there(m, args, -1, NULL);
}

static int mount_count(Move *m, json_t **ret_opts)
{
	_cleanup_(json_decrefp) json_t *j = NULL;
	_cleanup_free_ char *err = NULL;
	json_t *s;

	if (quiet_call(m, ADMIN_PATH_VOLUME_SHOW, json_pack("{s:s}", "Name", m->name), &j, &err) < 0)
		return cli_fail(m->a, "%s", err ? err : "cannot read the volume"), -1;
	s = json_object_get(j, "Status") ?: j;
	if (ret_opts)
		*ret_opts = json_incref(json_object_get(s, "options"));
	if (json_is_true(json_object_get(s, "fenced")))
		return cli_fail(m->a, "volume %s is fenced here already (moved); 'nvmevol volume unfence %s' first", m->name,
				m->name), -1;
	return (int)json_integer_value(json_object_get(s, "mount_count"));
}

int cmd_volume_move(const CliArgs *a, char **args, int n)
{
	_cleanup_(admin_target_done) AdminTarget t0 = { 0 };
	_cleanup_(json_decrefp) json_t *opts = NULL, *j = NULL, *passes = json_array(), *over = json_object(),
				       *sum = NULL;
	_cleanup_free_ char *err = NULL, *status = NULL;
	Move m = { .a = a, .name = args[0], .passes = passes, .over = over };
	char prefix[64], snap[96], prev[96] = "";
	uint64_t bytes = 0, max_passes = 8, small = 64ull << 20, timeout = 600, t_final, downtime;
	int mounts, rc, i = 0;
	struct tm tm;
	time_t now = time(NULL);

	if (!a->via || !*a->via)
		return cli_usage_error(a, "--via 'CMD' is required: the command prefix that reaches the other node");
	if ((a->passes && parse_u64(a->passes, &max_passes) < 0) || (a->small && parse_size(a->small, &small) < 0) ||
	    (a->timeout && parse_u64(a->timeout, &timeout) < 0))
		return cli_usage_error(a, "--passes and --timeout take a number, --small a size");
	if (a->node && (strlen(a->node) > 64 || strspn(a->node, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != strlen(a->node)))
		return cli_usage_error(a, "invalid --node '%s': a host name", a->node);
	{
		_cleanup_(json_decrefp) json_t *empty = json_object();

		if ((rc = cmd_admin_ask(a, &t0, ADMIN_PATH_STATUS, empty, &j)) != 0)
			return rc;
	}
	m.t = t0;
	if ((mounts = mount_count(&m, &opts)) < 0)
		return CLI_EXIT_FAILURE;
	if (a->node)
		snprintf(m.node, sizeof(m.node), "%s", a->node);
	else {
		json_t *s;
		if (run_there(&m, "status --json", -1, &status) != 0 || !(s = json_loads(status ?: "", 0, NULL)) ||
		    !json_is_string(json_object_get(s, "node")))
			return cli_fail(a, "cannot learn the other node's name from '%s nvmevol status --json': give --node "
					"NODE", a->via);
		snprintf(m.node, sizeof(m.node), "%s", json_string_value(json_object_get(s, "node")));
		json_decref(s);
	}
	if (json_is_string(json_object_get(opts, "node")))
		json_object_set_new(over, "node", json_string(m.node));
	if (mounts > 0 && (a->given & CLI_OPT_FINAL_NOW))
		return cli_fail(a, "volume %s is in use (%d mount(s)) and --final-now was given: stop its containers; "
				"nothing was changed", m.name, mounts);
	gmtime_r(&now, &tm);
	strftime(prefix, sizeof(prefix), "move-%Y%m%dT%H%M%S", &tm);
	/* Live passes while it is mounted. */
	while (mounts > 0 && (uint64_t)i < max_passes) {
		snprintf(snap, sizeof(snap), "%s-%d", prefix, ++i);
		if ((rc = one_pass(&m, snap, prev[0] ? prev : NULL, prev[0] ? "incremental" : "full", &bytes)) != 0)
			goto fail;
		if (prev[0])
			drop_snapshot(&m, prev);
		snprintf(prev, sizeof(prev), "%s", snap);
		if (bytes < small || (mounts = mount_count(&m, NULL)) <= 0)
			break;
	}
	/* Wait for the unmount, then fence: a Mount from now on is refused. */
	for (uint64_t start = now_mono_ms();;) {
		json_decref(j);
		j = NULL;
		free(err);
		err = NULL;
		if (quiet_call(&m, ADMIN_PATH_VOLUME_FENCE, json_pack("{s:s,s:s}", "Name", m.name, "Host", m.node), &j,
			       &err) >= 0)
			break;
		if ((mounts = mount_count(&m, NULL)) <= 0 || (a->given & CLI_OPT_FINAL_NOW) ||
		    now_mono_ms() - start > timeout * 1000) {
			rc = cli_fail(a, "cannot fence volume %s: %s", m.name, err ? err : "?");
			goto fail;
		}
		if (now_mono_ms() - start < 300)
			fprintf(stderr, "volume %s is in use (%d mount(s)): stop its containers; waiting up to %llu s\n",
				m.name, mounts, (unsigned long long)timeout);
		usleep(200000);
	}
	t_final = now_mono_ms();
	snprintf(snap, sizeof(snap), "%s-%d", prefix, ++i);
	rc = one_pass(&m, snap, prev[0] ? prev : NULL, "final", &bytes);
	if (rc != 0) {
		json_decref(j);
		j = NULL;
		(void)quiet_call(&m, ADMIN_PATH_VOLUME_UNFENCE, json_pack("{s:s}", "Name", m.name), &j, &err);
		goto fail;
	}
	downtime = now_mono_ms() - t_final;
	if (prev[0])
		drop_snapshot(&m, prev);
	sum = json_pack("{s:s,s:s,s:O,s:f,s:s}", "volume", m.name, "node", m.node, "passes", passes, "downtime_seconds",
			downtime / 1000.0, "kept_snapshot", snap);
	m.t = (AdminTarget){ 0 };
	if (a->given & CLI_OPT_JSON)
		return sum ? cmd_admin_print_json(sum) : CLI_EXIT_FAILURE;
	printf("volume %s moved to %s; this copy is fenced ('nvmevol volume unfence %s' to use it here again)\n", m.name,
	       m.node, m.name);
	for (size_t k = 0; k < json_array_size(passes); k++) {
		json_t *p = json_array_get(passes, k);
		printf("pass %zu (%s): %lld bytes in %.3f s\n", k + 1, json_string_value(json_object_get(p, "kind")),
		       (long long)json_integer_value(json_object_get(p, "bytes")),
		       json_real_value(json_object_get(p, "seconds")));
	}
	printf("downtime (the final pass): %.3f s; snapshot %s kept on both sides\n", downtime / 1000.0, snap);
	return CLI_EXIT_OK;
fail:
	if (prev[0])
		fprintf(stderr, "nvmevol volume move: volume %s still serves here, unfenced; the other side keeps volume %s "
			"as of snapshot %s (from the live passes)\n", m.name, m.name, prev);
	else
		fprintf(stderr, "nvmevol volume move: volume %s still serves here, unfenced; nothing was created there\n",
			m.name);
	m.t = (AdminTarget){ 0 };
	return rc;
}
