/* SPDX-License-Identifier: MIT */
/*
 * The host service's promises, against the real daemon on real loop XFS:
 *  - NVMEVOL_MODE=host: the plugin socket refuses a peer that is not root by
 *    its SO_PEERCRED even when the socket's mode lets it connect, and the
 *    refused request changes nothing; in the managed plugin's mode (the
 *    control) the same peer is answered;
 *  - two instances on the same partitions: the second refuses to start and
 *    says which one holds them (host service or managed plugin), changing
 *    nothing; once the first stops, the other mode serves the first one's
 *    volumes with their data (the move between modes).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/testbed.h"

static Testbed tb, twin;
static ClientReply rep;
static const char *const host_env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_MODE=host", NULL };
static const char *const plugin_env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_MODE=plugin", NULL };

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_stop(&twin, SIGKILL);
	/* The twin's directories are below tb.dir: testbed_destroy() unmounts them too. */
	testbed_destroy(&tb);
}

static void setup_host(void)
{
	testbed_require_root();
	testbed_setup(&tb, 2, host_env);
	twin.pid = -1;
}

TestSuite(host, .init = setup_host, .fini = teardown, .timeout = 120);

/*
 * In a child as uid/gid 65534: POSTs @body to @path on @sock; exits with the
 * HTTP status / 10 (2 for 200, 4 for 403), 1 if the request failed.
 */
static int post_as_nobody(const char *sock, const char *path, const char *body)
{
	pid_t pid = fork();
	int st;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		ClientReply r = { 0 };

		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(1);
		if (client_post(sock, path, &r, "%s", body) < 0)
			_exit(1);
		if (r.status == 403 && !strstr(client_err(&r), "for root only"))
			_exit(1);
		_exit((int)(r.status / 100));
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* Lets uid 65534 connect despite the 0600 socket in its 0700 directory (as a careless admin might). */
static void loosen(const Testbed *t, bool loose)
{
	cr_assert_eq(chmod(t->dir, loose ? 0711 : 0700), 0);
	cr_assert_eq(chmod(t->sock, loose ? 0666 : 0600), 0);
}

Test(host, plugin_socket_refuses_a_peer_that_is_not_root)
{
	char dir[600], *log;
	struct stat st;

	cr_assert_eq(stat(tb.sock, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "plugin socket mode %o", st.st_mode & 0777);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"keep\"}"), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "keep", dir, sizeof(dir));
	if (stat(dir, &st) < 0)
		testbed_volume_dir(&tb, 1, "keep", dir, sizeof(dir));
	cr_assert_eq(stat(dir, &st), 0, "volume directory %s", dir);

	loosen(&tb, true);
	cr_assert_eq(post_as_nobody(tb.sock, "/VolumeDriver.Remove", "{\"Name\":\"keep\"}"), 4,
		     "a non-root Remove must get 403 with the root-only Err");
	cr_assert_eq(post_as_nobody(tb.sock, "/VolumeDriver.Create", "{\"Name\":\"other\"}"), 4);
	cr_assert_eq(post_as_nobody(tb.sock, "/VolumeDriver.List", "{}"), 4);
	loosen(&tb, false);

	/* Nothing changed: the volume is there with its directory, no other volume was made. */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"keep\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(stat(dir, &st), 0, "the refused Remove deleted %s", dir);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"other\"}"), 0, "the refused Create made a volume");
	log = testbed_log_text(&tb);
	cr_assert(strstr(log, "plugin: refused /VolumeDriver.Remove from uid 65534"), "refusal not logged");
	free(log);

	/* The control: in the managed plugin's mode the same peer is answered (Docker alone reaches that socket). */
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, plugin_env);
	loosen(&tb, true);
	cr_assert_eq(post_as_nobody(tb.sock, "/VolumeDriver.List", "{}"), 2, "plugin mode refused a List");
	loosen(&tb, false);
}

/* A second instance with its own sockets, state and mount points, on tb's partitions (tb's label prefix). */
static void twin_init(void)
{
	twin = tb;
	twin.n_parts = 0; /* the partitions are tb's to detach */
	twin.pid = -1;
	/* A directory of its own: the admin socket goes beside the plugin socket. */
	snprintf(twin.sock, sizeof(twin.sock), "%s/twin", tb.dir);
	cr_assert(mkdir(twin.sock, 0700) == 0 || errno == EEXIST);
	snprintf(twin.sock, sizeof(twin.sock), "%s/twin/s.sock", tb.dir);
	snprintf(twin.state, sizeof(twin.state), "%s/twin-state", tb.dir);
	snprintf(twin.prop, sizeof(twin.prop), "%s/twin-prop", tb.dir);
	snprintf(twin.parts_root, sizeof(twin.parts_root), "%s/twin-parts", tb.dir);
	snprintf(twin.log, sizeof(twin.log), "%s/twin.log", tb.dir);
}

/* Starts @t, which must refuse and exit; returns its log. */
static char *start_refused(Testbed *t, const char *const *env)
{
	cr_assert_neq(testbed_start(t, env), 0, "a second instance started on partitions another one serves");
	cr_assert_eq(t->pid, -1);
	return testbed_log_text(t);
}

/* Nothing below @root is mounted (a refused instance took back what it mounted). */
static void no_mounts_below(const char *root)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		cr_assert_null(strstr(line, root), "left mounted: %s", line);
	fclose(f);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static void expect_file(const char *path, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, text);
}

/* Mounts @name on @t and returns its Mountpoint (static buffer). */
static const char *mount_volume(Testbed *t, const char *name, const char *id)
{
	static char mp[600];

	cr_assert_eq(tb_call(t, "Mount", &rep, "{\"Name\":\"%s\",\"ID\":\"%s\"}", name, id), 0, "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s", json_string_value(json_object_get(rep.json, "Mountpoint")));
	return mp;
}

Test(host, one_instance_per_partition_and_the_move_between_modes)
{
	char path[700], want[128], *log;

	twin_init();
	/* The host service (tb) serves; a volume with data on it. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"moved\",\"Opts\":{\"uid\":\"999\",\"mode\":\"0700\"}}"), 0,
		     "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/data", mount_volume(&tb, "moved", "c1"));
	write_file(path, "written by the host service\n");
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"moved\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));

	/* The managed plugin's mode refuses to start and says which instance holds the partitions. */
	log = start_refused(&twin, plugin_env);
	snprintf(want, sizeof(want), "is served by the nvmevol host service (pid %d,", (int)tb.pid);
	cr_assert(strstr(log, "cannot start: partition ") && strstr(log, want) && strstr(log, "systemctl stop nvmevol"),
		  "%s", log);
	free(log);
	no_mounts_below(twin.parts_root);
	/* ...and changed nothing: the host service still serves the volume. */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"moved\"}"), 0, "%s", client_err(&rep));
	/* A second host service is refused the same way. */
	log = start_refused(&twin, host_env);
	cr_assert(strstr(log, want), "%s", log);
	free(log);

	/* The move: stop the host service, start the managed plugin's mode on the same partitions. */
	cr_assert_eq(testbed_stop(&tb, SIGTERM), 0);
	testbed_start_or_fail(&twin, plugin_env);
	cr_assert_eq(tb_call(&twin, "Get", &rep, "{\"Name\":\"moved\"}"), 0, "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/data", mount_volume(&twin, "moved", "c2"));
	expect_file(path, "written by the host service\n");
	write_file(path, "written by the plugin\n");
	cr_assert_eq(tb_call(&twin, "Unmount", &rep, "{\"Name\":\"moved\",\"ID\":\"c2\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&twin, "Create", &rep, "{\"Name\":\"fromplugin\"}"), 0, "%s", client_err(&rep));

	/* Now the host service is the one refused, and told it is the managed plugin. */
	log = start_refused(&tb, host_env);
	cr_assert(strstr(log, "is served by the nvmevol managed Docker plugin") &&
			  strstr(log, "docker plugin disable nvmevol"),
		  "%s", log);
	free(log);

	/* A holder killed -9 holds nothing: the host service takes over both volumes, data intact. */
	testbed_stop(&twin, SIGKILL);
	testbed_start_or_fail(&tb, host_env);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"fromplugin\"}"), 0, "%s", client_err(&rep));
	snprintf(path, sizeof(path), "%s/data", mount_volume(&tb, "moved", "c3"));
	expect_file(path, "written by the plugin\n");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"moved\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"),
						       "mount_count")), 1, "%s", rep.body);
}

Test(host, a_second_instance_on_the_same_socket_leaves_it_alone)
{
	char *log;

	twin_init();
	/* Same socket path as the running one (a unit started twice by hand): refused before anything else. */
	snprintf(twin.sock, sizeof(twin.sock), "%s", tb.sock);
	snprintf(twin.parts_root, sizeof(twin.parts_root), "%s/twin-parts-none", tb.dir);
	cr_assert_eq(testbed_spawn(&twin, host_env), 0);
	for (int i = 0; i < 100 && waitpid(twin.pid, NULL, WNOHANG) == 0; i++)
		usleep(100 * 1000);
	cr_assert_eq(kill(twin.pid, 0), -1, "the second instance runs on the first one's socket");
	twin.pid = -1;
	log = testbed_log_text(&twin);
	cr_assert(strstr(log, "cannot listen on") && strstr(log, "Address already in use"), "%s", log);
	free(log);
	no_mounts_below(twin.parts_root);
	/* The running one still answers on its socket. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"still\"}"), 0, "%s", client_err(&rep));
}
