/* SPDX-License-Identifier: MIT */
/*
 * nvmevol: a Docker volume plugin serving directories on dedicated XFS
 * partitions. `nvmevol` with no arguments runs the daemon (settings from the
 * environment); with arguments it is the command line (cli.c): the self-test
 * on any directory, and the admin commands that talk to the running plugin.
 */
#include <signal.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "clone/freeze.h"
#include "daemon/admin.h"
#include "daemon/api.h"
#include "cli/cli.h"
#include "settings.h"
#include "daemon/http.h"
#include "manager/manager.h"
#include "metrics/metrics.h"
#include "daemon/statedir.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

#define API_CONNECTIONS_MAX 1024
/* Admin commands come one at a time from root on the host; a few spare connections suffice. */
#define ADMIN_CONNECTIONS_MAX 16

/*
 * The daemon's memory stays near what its volumes need (issue 23): one arena
 * (a thread per connection would each keep its own, and what it freed), large
 * blocks (a List of 100,000 volumes, a record) mapped and unmapped on their
 * own instead of raising the heap for good (a fixed threshold: glibc's
 * sliding one grows past every such block after the first), and the top of
 * the heap given back past 128 KiB free.
 */
static void malloc_setup(void)
{
	(void)mallopt(M_ARENA_MAX, 1);
	(void)mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	(void)mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

static int collect_metrics(void *userdata, MetricsSnapshot *ret)
{
	return manager_metrics_snapshot(userdata, ret);
}

static int run_daemon(void)
{
	Settings *cfg = NULL;
	Manager *m = NULL;
	HttpServer *http = NULL, *admin_http = NULL;
	Admin admin = { 0 };
	ApiGate gate;
	MetricsWriter *metrics = NULL;
	char *err = NULL;
	sigset_t mask;
	int sig, r;

	log_setup();
	malloc_setup();
	r = settings_from_env(&cfg, &err);
	if (r == 0)
		r = statedir_resolve(cfg, &err);
	if (r < 0) {
		log_error("bad setting: %s", err ? err : errno_str(r));
		free(err);
		settings_free(cfg);
		return EXIT_FAILURE;
	}
	log_set_level(cfg->log_level);

	/* Signals are taken synchronously by this thread; workers never see them. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * listen() first: Docker dials within ~10 s of starting us. The plugin
	 * socket serves at once: Activate and Capabilities are answered, the rest
	 * wait at the gate until the state is loaded. The admin socket waits in
	 * accept().
	 */
	api_gate_init(&gate);
	r = http_server_listen(cfg->socket_path, &http);
	if (r < 0) {
		log_error_errno(r, "cannot listen on %s", cfg->socket_path);
		goto out;
	}
	r = http_server_listen(cfg->admin_socket_path, &admin_http);
	if (r < 0) {
		log_error_errno(r, "cannot listen on the admin socket %s", cfg->admin_socket_path);
		goto out;
	}
	/*
	 * A host service's socket sits in /run/docker/plugins/, which anyone may
	 * read: a Remove from any local user would delete a volume. Inside the
	 * managed plugin only Docker (root) reaches it.
	 */
	if (cfg->mode == RUN_MODE_HOST)
		http_server_set_root_only(http, "plugin",
					  "the nvmevol plugin socket is for root only (Docker or Podman running as root)");
	r = http_server_start(http, api_http_handler, &gate, API_CONNECTIONS_MAX);
	if (r < 0) {
		log_error_errno(r, "cannot start the HTTP server on %s", cfg->socket_path);
		goto out;
	}
	r = manager_new(cfg, &m);
	if (r == 0)
		r = manager_start(m, &err);
	if (r < 0) {
		log_error("cannot start: %s", err ? err : errno_str(r));
		goto out;
	}
	api_gate_open(&gate, m);
	admin = (Admin){ .manager = m, .cfg = cfg };
	http_server_set_root_only(admin_http, "admin", "the nvmevol admin socket is for root only: run the command as root");
	r = http_server_start(admin_http, admin_http_handler, &admin, ADMIN_CONNECTIONS_MAX);
	if (r < 0) {
		log_error_errno(r, "cannot start the admin server on %s", cfg->admin_socket_path);
		goto out;
	}
	log_info("serving the Docker volume API on %s and the admin API on %s (version %s, %s mode)", cfg->socket_path,
		 cfg->admin_socket_path, PROJECT_VERSION, run_mode_to_string(cfg->mode));
	/* After the servers: its first write (tens of ms at 10,000 volumes) must not delay Docker's first request. */
	if (cfg->metrics_dir[0]) {
		/* Metrics are an aid: without them the volumes are still served. */
		r = metrics_writer_start(cfg->metrics_dir, (unsigned)cfg->metrics_interval_s, collect_metrics, m, &metrics,
					 &err);
		if (r < 0)
			log_error("no metrics file (NVMEVOL_METRICS_DIR): %s", err ? err : errno_str(r));
		else
			log_info("metrics every %us and after each change in %s/%s", (unsigned)cfg->metrics_interval_s,
				 cfg->metrics_dir, METRICS_FILE);
		free(err);
		err = NULL;
	}
	/* Start-up's transient buffers (every record and index entry parsed once) go back to the kernel. */
	(void)malloc_trim(0);

	for (;;) {
		if (sigwait(&mask, &sig) != 0)
			continue;
		if (sig == SIGHUP)
			continue;
		/* A stop never unmounts volumes in use: containers keep their binds. */
		log_info("signal %d: stopping (mounted volumes stay mounted)", sig);
		/*
		 * Before waiting for the requests: Docker's SIGKILL follows, and it
		 * would leave a clone's freeze to outlive us (a plugin's guardian dies
		 * with it). The clone sees the thaw and gives up.
		 */
		freeze_abort_all();
		break;
	}
	r = 0;
out:
	/* Requests still waiting at the gate (a failed start) get their 503 before the servers stop. */
	if (r < 0)
		api_gate_fail(&gate);
	admin_http = http_server_free(admin_http);
	http = http_server_free(http);
	api_gate_done(&gate);
	/* After the request threads (they notify it), before the manager (it reads it). */
	metrics = metrics_writer_stop(metrics);
	m = manager_free(m);
	cfg = settings_free(cfg);
	free(err);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
	if (argc >= 2)
		return cli_main(argc, argv);
	return run_daemon();
}
