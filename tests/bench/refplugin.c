/* SPDX-License-Identifier: MIT */
/*
 * refplugin: the smallest managed volume plugin that does what a plugin must
 * (a benchmark reference, not a product): every request answered at once, a
 * volume is a directory in the plugin's rootfs, Mount binds it under the
 * propagated mount, Unmount takes the bind away. No state file, no fsync, no
 * mount counting, no validation beyond a safe name. tests/bench/run.sh
 * (--only control) runs it beside Docker's local driver and nvmevol, so that
 * the control-plane figure says what any managed plugin pays in dockerd.
 *
 *   refplugin SOCKET DATA_DIR PROPAGATED_DIR     (static: gcc -O2 -static -pthread)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char *data_dir, *prop_dir;

/* The value of "Name" in a request body, if it is a plain name. */
static int name_of(const char *body, char *out, size_t len)
{
	const char *p = strstr(body, "\"Name\":\"");
	size_t n = 0;

	if (!p)
		return -1;
	for (p += 8; *p && *p != '"' && n + 1 < len; p++, n++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *p))
			return -1;
		out[n] = *p;
	}
	out[n] = '\0';
	return n == 0 || out[0] == '.' ? -1 : 0;
}

static void answer(const char *path, const char *body, char *out, size_t len)
{
	char name[256], src[512], dst[512];
	struct stat st;

	if (strstr(path, "Capabilities")) {
		snprintf(out, len, "{\"Capabilities\":{\"Scope\":\"local\"}}");
		return;
	}
	if (strstr(path, "Plugin.Activate")) {
		snprintf(out, len, "{\"Implements\":[\"VolumeDriver\"]}");
		return;
	}
	if (strstr(path, "VolumeDriver.List")) {
		snprintf(out, len, "{\"Volumes\":[]}"); /* a reference for the cycle, not for ls */
		return;
	}
	if (name_of(body, name, sizeof(name)) < 0) {
		snprintf(out, len, "{\"Err\":\"bad name\"}");
		return;
	}
	snprintf(src, sizeof(src), "%s/%s", data_dir, name);
	snprintf(dst, sizeof(dst), "%s/%s", prop_dir, name);
	if (strstr(path, "VolumeDriver.Create")) {
		if (mkdir(src, 0755) < 0 && errno != EEXIST)
			snprintf(out, len, "{\"Err\":\"mkdir: %s\"}", strerror(errno));
		else
			snprintf(out, len, "{}");
	} else if (strstr(path, "VolumeDriver.Remove")) {
		(void)rmdir(src);
		snprintf(out, len, "{}");
	} else if (strstr(path, "VolumeDriver.Get") || strstr(path, "VolumeDriver.Path")) {
		if (stat(src, &st) < 0)
			snprintf(out, len, "{\"Err\":\"no such volume\"}");
		else
			snprintf(out, len, "{\"Volume\":{\"Name\":\"%s\",\"Mountpoint\":\"%s\"},\"Mountpoint\":\"%s\"}", name,
				 dst, dst);
	} else if (strstr(path, "VolumeDriver.Mount")) {
		(void)mkdir(dst, 0755);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			snprintf(out, len, "{\"Err\":\"bind: %s\"}", strerror(errno));
		else
			snprintf(out, len, "{\"Mountpoint\":\"%s\"}", dst);
	} else if (strstr(path, "VolumeDriver.Unmount")) {
		(void)umount2(dst, MNT_DETACH);
		(void)rmdir(dst);
		snprintf(out, len, "{}");
	} else
		snprintf(out, len, "{\"Err\":\"unknown request\"}");
}

/* One connection: HTTP/1.1 requests with a Content-Length body, kept alive until the client closes. */
static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char buf[65536], reply[2048], head[256]; /* reply: a Get names dst twice, up to 1,332 bytes */
	size_t have = 0;

	for (;;) {
		char *end = NULL, *cl;
		size_t body_len = 0, used;
		ssize_t n;

		while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
			n = read(fd, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		*end = '\0';
		cl = strcasestr(buf, "Content-Length:");
		if (cl)
			body_len = strtoul(cl + 15, NULL, 10);
		used = (size_t)(end + 4 - buf) + body_len;
		if (used >= sizeof(buf))
			goto out;
		while (have < used) {
			n = read(fd, buf + have, sizeof(buf) - 1 - have);
			if (n <= 0)
				goto out;
			have += (size_t)n;
		}
		char saved = buf[used];
		buf[used] = '\0';
		answer(buf, end + 4, reply, sizeof(reply));
		buf[used] = saved;
		int hl = snprintf(head, sizeof(head),
				  "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.plugins.v1.1+json\r\n"
				  "Content-Length: %zu\r\n\r\n", strlen(reply));
		if (write(fd, head, (size_t)hl) != hl || write(fd, reply, strlen(reply)) != (ssize_t)strlen(reply))
			goto out;
		memmove(buf, buf + used, have - used);
		have -= used;
	}
out:
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd;

	if (argc != 4) {
		fprintf(stderr, "usage: refplugin SOCKET DATA_DIR PROPAGATED_DIR\n");
		return 2;
	}
	data_dir = argv[2];
	prop_dir = argv[3];
	(void)mkdir(data_dir, 0755);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[1]);
	(void)unlink(sa.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0) {
		perror("refplugin: socket");
		return 1;
	}
	for (;;) {
		pthread_t t;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			continue;
		if (pthread_create(&t, NULL, serve, (void *)(long)fd) != 0)
			close(fd);
		else
			pthread_detach(t);
	}
}
