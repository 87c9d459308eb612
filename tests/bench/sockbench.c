/* SPDX-License-Identifier: MIT */
/*
 * sockbench: a small, fast client for nvmevol's plugin socket (benchmarks only).
 *
 *   sockbench populate SOCK PREFIX FROM TO
 *       Create volumes PREFIX%06d for FROM <= i < TO (selftest=off); prints
 *       "created N in S s, p50 X us, p99 Y us".
 *   sockbench remove SOCK PREFIX FROM TO
 *       Remove them again; prints "removed N in S s, ...".
 *   sockbench endpoints SOCK PREFIX NVOLS ROUNDS SAMPLES
 *       Per-endpoint latency with NVOLS volumes PREFIX%06d present. Each round:
 *       Capabilities, Capabilities on a new connection, Get (random existing
 *       volume), List, then Create/Mount/Unmount/Remove of SAMPLES/4 extra
 *       volumes. One TSV line per endpoint and round:
 *       endpoint  round  n  p50_us  p99_us  max_us  mean_us
 *   sockbench ready SOCK TIMEOUT_MS CMD [ARGS...]
 *       fork+exec CMD (environment inherited), then send List until one
 *       succeeds; prints "PID MS" (the daemon keeps running).
 *   sockbench ready-activate SOCK TIMEOUT_MS CMD [ARGS...]
 *       The same, first until Plugin.Activate is answered (what Docker's
 *       activation waits for), then until a List is; prints "PID MS_ACTIVATE MS_LIST".
 *
 * HTTP/1.1 with a keep-alive connection (what Docker's plugin client does),
 * reconnecting when the server closes it. Exit status 1 on any failed request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *sock_path;
static int conn_fd = -1;
static char *rbuf;
static size_t rcap;
static int quiet;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int dial(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One request; returns the HTTP status (or -1) and leaves the body in rbuf. */
static int once(const char *endpoint, const char *body, size_t *body_off, size_t *body_len)
{
	char hdr[512];
	size_t blen = strlen(body), have = 0;
	long clen = -1;
	int status = -1, hl;

	if (conn_fd < 0 && (conn_fd = dial()) < 0)
		return -1;
	hl = snprintf(hdr, sizeof(hdr),
		      "POST %s HTTP/1.1\r\nHost: plugin\r\nAccept: application/vnd.docker.plugins.v1.2+json\r\n"
		      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		      endpoint, blen);
	if (write_all(conn_fd, hdr, (size_t)hl) < 0 || write_all(conn_fd, body, blen) < 0)
		return -1;
	for (;;) {
		char *end;
		if (have + 65536 + 1 > rcap) {
			rcap = (have + 65536 + 1) * 2;
			rbuf = realloc(rbuf, rcap);
			if (!rbuf)
				abort();
		}
		ssize_t r = read(conn_fd, rbuf + have, rcap - have - 1);
		if (r <= 0)
			return -1;
		have += (size_t)r;
		rbuf[have] = '\0';
		end = strstr(rbuf, "\r\n\r\n");
		if (!end)
			continue;
		if (status < 0) {
			char *cl = strcasestr(rbuf, "\r\ncontent-length:");
			if (sscanf(rbuf, "HTTP/1.%*d %d", &status) != 1 || !cl || cl > end)
				return -1;
			clen = strtol(cl + 17, NULL, 10);
		}
		size_t off = (size_t)(end + 4 - rbuf);
		if (have >= off + (size_t)clen) {
			*body_off = off;
			*body_len = (size_t)clen;
			if (strcasestr(rbuf, "\r\nconnection: close") && strcasestr(rbuf, "\r\nconnection: close") < end) {
				close(conn_fd);
				conn_fd = -1;
			}
			return status;
		}
	}
}

static int request(const char *endpoint, const char *body)
{
	size_t off, len;
	int st = once(endpoint, body, &off, &len);
	if (st < 0) { /* the server may have closed an idle keep-alive connection */
		if (conn_fd >= 0)
			close(conn_fd);
		conn_fd = -1;
		st = once(endpoint, body, &off, &len);
	}
	if (st != 200) {
		if (!quiet)
			fprintf(stderr, "sockbench: %s %s -> %d %.300s\n", endpoint, body, st,
			st > 0 ? rbuf + off : "(no answer)");
		return -1;
	}
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, int round, double *v, size_t n)
{
	double sum = 0;
	qsort(v, n, sizeof(*v), cmp_d);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	size_t i99 = (size_t)(0.99 * (double)(n - 1) + 0.5);
	printf("%s\t%d\t%zu\t%.1f\t%.1f\t%.1f\t%.1f\n", name, round, n, v[(n - 1) / 2], v[i99], v[n - 1], sum / n);
	fflush(stdout);
}

#define TIMED(arr, idx, call)                              \
	do {                                               \
		double t0_ = now_us();                     \
		if ((call) < 0)                            \
			return 1;                          \
		(arr)[(idx)] = now_us() - t0_;             \
	} while (0)

static int cmd_populate(const char *prefix, long from, long to, int remove)
{
	double *v = calloc((size_t)(to - from + 1), sizeof(double)), t0 = now_us();
	char body[512];
	for (long i = from; i < to; i++) {
		if (remove)
			snprintf(body, sizeof(body), "{\"Name\":\"%s%06ld\"}", prefix, i);
		else
			snprintf(body, sizeof(body), "{\"Name\":\"%s%06ld\",\"Opts\":{\"selftest\":\"off\"}}", prefix, i);
		TIMED(v, i - from, request(remove ? "/VolumeDriver.Remove" : "/VolumeDriver.Create", body));
	}
	size_t n = (size_t)(to - from);
	if (n == 0)
		return 0;
	double total = (now_us() - t0) / 1e6;
	qsort(v, n, sizeof(*v), cmp_d);
	printf("%s %zu in %.2f s, p50 %.0f us, p99 %.0f us\n", remove ? "removed" : "created", n, total, v[(n - 1) / 2],
	       v[(size_t)(0.99 * (double)(n - 1) + 0.5)]);
	return 0;
}

static int cmd_endpoints(const char *prefix, long nvols, int rounds, int samples)
{
	int k = samples / 4 > 0 ? samples / 4 : 1, nlist = samples / 10 > 20 ? samples / 10 : 20;
	double *v = calloc((size_t)samples, sizeof(double));
	char body[512];
	unsigned seed = 12345;

	for (int r = 1; r <= rounds; r++) {
		for (int i = 0; i < samples; i++)
			TIMED(v, i, request("/VolumeDriver.Capabilities", "{}"));
		report("Capabilities", r, v, (size_t)samples);

		for (int i = 0; i < samples / 4; i++) {
			if (conn_fd >= 0)
				close(conn_fd);
			conn_fd = -1;
			TIMED(v, i, request("/VolumeDriver.Capabilities", "{}"));
		}
		report("Capabilities (new connection)", r, v, (size_t)(samples / 4));

		for (int i = 0; i < samples; i++) {
			snprintf(body, sizeof(body), "{\"Name\":\"%s%06ld\"}", prefix, (long)(rand_r(&seed) % nvols));
			TIMED(v, i, request("/VolumeDriver.Get", body));
		}
		report("Get", r, v, (size_t)samples);

		for (int i = 0; i < nlist; i++)
			TIMED(v, i, request("/VolumeDriver.List", "{}"));
		report("List", r, v, (size_t)nlist);

		for (int i = 0; i < k; i++) {
			snprintf(body, sizeof(body), "{\"Name\":\"%sx%d-%d\",\"Opts\":{\"selftest\":\"off\"}}", prefix, r, i);
			TIMED(v, i, request("/VolumeDriver.Create", body));
		}
		report("Create", r, v, (size_t)k);
		for (int i = 0; i < k; i++) {
			snprintf(body, sizeof(body), "{\"Name\":\"%sx%d-%d\",\"ID\":\"bench%032d\"}", prefix, r, i, i);
			TIMED(v, i, request("/VolumeDriver.Mount", body));
		}
		report("Mount", r, v, (size_t)k);
		for (int i = 0; i < k; i++) {
			snprintf(body, sizeof(body), "{\"Name\":\"%sx%d-%d\",\"ID\":\"bench%032d\"}", prefix, r, i, i);
			TIMED(v, i, request("/VolumeDriver.Unmount", body));
		}
		report("Unmount", r, v, (size_t)k);
		for (int i = 0; i < k; i++) {
			snprintf(body, sizeof(body), "{\"Name\":\"%sx%d-%d\"}", prefix, r, i);
			TIMED(v, i, request("/VolumeDriver.Remove", body));
		}
		report("Remove", r, v, (size_t)k);
	}
	return 0;
}

/* Sends @endpoint until it is answered; the ms since @t0, or -1 after @timeout_ms. */
static double wait_answered(const char *endpoint, double t0, long timeout_ms)
{
	for (;;) {
		if (request(endpoint, "{}") == 0)
			return (now_us() - t0) / 1e3;
		if (conn_fd >= 0)
			close(conn_fd);
		conn_fd = -1;
		if ((now_us() - t0) / 1e3 > (double)timeout_ms) {
			fprintf(stderr, "sockbench: %s not answered after %ld ms\n", endpoint, timeout_ms);
			return -1;
		}
		usleep(500);
	}
}

static int cmd_ready(long timeout_ms, char **argv, int activate_first)
{
	double t0 = now_us(), ms_activate = 0, ms;
	pid_t pid;

	quiet = 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		setsid();
		execvp(argv[0], argv);
		_exit(127);
	}
	if (activate_first)
		ms_activate = wait_answered("/Plugin.Activate", t0, timeout_ms);
	ms = ms_activate < 0 ? -1 : wait_answered("/VolumeDriver.List", t0, timeout_ms);
	if (activate_first)
		printf("%d %.1f %.1f\n", (int)pid, ms_activate, ms);
	else
		printf("%d %.1f\n", (int)pid, ms);
	return ms < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && (!strcmp(argv[1], "populate") || !strcmp(argv[1], "remove"))) {
		sock_path = argv[2];
		return cmd_populate(argv[3], atol(argv[4]), atol(argv[5]), !strcmp(argv[1], "remove"));
	}
	if (argc >= 7 && !strcmp(argv[1], "endpoints")) {
		sock_path = argv[2];
		return cmd_endpoints(argv[3], atol(argv[4]), atoi(argv[5]), atoi(argv[6]));
	}
	if (argc >= 5 && !strcmp(argv[1], "ready")) {
		sock_path = argv[2];
		return cmd_ready(atol(argv[3]), argv + 4, 0);
	}
	if (argc >= 5 && !strcmp(argv[1], "ready-activate")) {
		sock_path = argv[2];
		return cmd_ready(atol(argv[3]), argv + 4, 1);
	}
	fprintf(stderr, "usage: see the comment at the top of sockbench.c\n");
	return 2;
}
