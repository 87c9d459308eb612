/* SPDX-License-Identifier: MIT */
/*
 * dockercaps: runs a command with exactly the capabilities a Docker container
 * gets by default (Docker 20.10's oci/caps/defaults.go: 14 capabilities), for
 * the qemu guest, where there is no Docker but there is XFS quota. Without
 * --userns the command stays in the initial user namespace, as in a Docker
 * container without userns-remap. Built static (no libcap): raw capset/prctl.
 *
 *   dockercaps [--uid N] [--gid N] [--drop CAP]... [--userns] [--] COMMAND [ARG...]
 *
 *   --uid, --gid  switch to this uid/gid (as `docker run --user N:N`): the
 *                 kernel then clears the effective and permitted sets, the
 *                 bounding set stays Docker's
 *   --drop CAP    also drop CAP (as `--cap-drop`), e.g. FOWNER or CAP_FOWNER
 *   --userns      first enter a new user namespace that maps the current
 *                 uid and gid to themselves (as userns-remap, without the shift)
 * Must start as root. Exits 125 when setting up fails, else execs COMMAND.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct {
	const char *name;
	int cap;
} docker_default[] = {
	{ "CHOWN", CAP_CHOWN },
	{ "DAC_OVERRIDE", CAP_DAC_OVERRIDE },
	{ "FSETID", CAP_FSETID },
	{ "FOWNER", CAP_FOWNER },
	{ "MKNOD", CAP_MKNOD },
	{ "NET_RAW", CAP_NET_RAW },
	{ "SETGID", CAP_SETGID },
	{ "SETUID", CAP_SETUID },
	{ "SETFCAP", CAP_SETFCAP },
	{ "SETPCAP", CAP_SETPCAP },
	{ "NET_BIND_SERVICE", CAP_NET_BIND_SERVICE },
	{ "SYS_CHROOT", CAP_SYS_CHROOT },
	{ "KILL", CAP_KILL },
	{ "AUDIT_WRITE", CAP_AUDIT_WRITE },
};
#define N_DEFAULT (sizeof(docker_default) / sizeof(docker_default[0]))

static int die(const char *what)
{
	fprintf(stderr, "dockercaps: %s: %s\n", what, strerror(errno));
	return 125;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int enter_userns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER) < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
	if (write_file("/proc/self/uid_map", map) < 0)
		return -1;
	if (write_file("/proc/self/setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
	return write_file("/proc/self/gid_map", map);
}

static int usage(void)
{
	fprintf(stderr, "usage: dockercaps [--uid N] [--gid N] [--drop CAP]... [--userns] [--] COMMAND [ARG...]\n");
	return 125;
}

int main(int argc, char **argv)
{
	uint64_t keep = 0;
	long uid = -1, gid = -1;
	int userns = 0, i, last_cap = CAP_LAST_CAP;
	FILE *f;

	for (size_t k = 0; k < N_DEFAULT; k++)
		keep |= 1ULL << docker_default[k].cap;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		} else if ((strcmp(argv[i], "--uid") == 0 || strcmp(argv[i], "--gid") == 0) && i + 1 < argc) {
			char *end;
			long v = strtol(argv[i + 1], &end, 10);
			if (*end || end == argv[i + 1] || v < 0 || v > 65535 * 65536L)
				return usage();
			*(argv[i][2] == 'u' ? &uid : &gid) = v;
			i++;
		} else if (strcmp(argv[i], "--drop") == 0 && i + 1 < argc) {
			const char *name = argv[++i];
			size_t k;
			if (strncmp(name, "CAP_", 4) == 0)
				name += 4;
			for (k = 0; k < N_DEFAULT && strcmp(docker_default[k].name, name) != 0; k++)
				;
			if (k == N_DEFAULT) {
				fprintf(stderr, "dockercaps: %s is not in Docker's default set\n", argv[i]);
				return 125;
			}
			keep &= ~(1ULL << docker_default[k].cap);
		} else if (strcmp(argv[i], "--userns") == 0)
			userns = 1;
		else if (argv[i][0] == '-')
			return usage();
		else
			break;
	}
	if (i >= argc)
		return usage();
	if (geteuid() != 0) {
		fprintf(stderr, "dockercaps: must start as root\n");
		return 125;
	}

	if (userns && enter_userns() < 0)
		return die("entering a user namespace");

	f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &last_cap) != 1)
			last_cap = CAP_LAST_CAP;
		fclose(f);
	}
	for (int c = 0; c <= last_cap && c < 64; c++)
		if (!(keep & (1ULL << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			return die("PR_CAPBSET_DROP");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return die("PR_CAP_AMBIENT_CLEAR_ALL");

	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	/* No inheritable capabilities: Docker has given none since 20.10.14. */
	struct __user_cap_data_struct data[2] = {
		{ .effective = (uint32_t)keep, .permitted = (uint32_t)keep },
		{ .effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32) },
	};
	if (syscall(SYS_capset, &hdr, data) < 0)
		return die("capset");

	if (gid >= 0 && (setgroups(0, NULL) < 0 || setresgid((gid_t)gid, (gid_t)gid, (gid_t)gid) < 0))
		return die("setresgid");
	/* From uid 0 to another uid without SECBIT_KEEP_CAPS: the kernel clears
	 * permitted and effective, as for a container's non-root user. */
	if (uid >= 0 && setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) < 0)
		return die("setresuid");

	execvp(argv[i], argv + i);
	return die(argv[i]);
}
