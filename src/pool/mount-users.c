/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pool/mount-users.h"
#include "pool/mount.h"
#include "util/alloc-util.h"
#include "util/fs-util.h"
#include "util/macro.h"

#define MOUNTINFO_MAX (64u * 1024 * 1024)

void mount_users_free(MountUser *u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(u[i].target);
	free(u);
}

static bool root_matches(const char *have, const char *want)
{
	size_t n = strlen(want);

	return strncmp(have, want, n) == 0 && (have[n] == '\0' || have[n] == '/');
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && streq(s + a - b, suffix);
}

/* The first mount in @pid's mountinfo that uses the bind, or NULL. */
static char *find_in(int pidfd, dev_t dev, const char *root, const char *skip_suffix)
{
	_cleanup_free_ char *buf = NULL;
	MountEntry *e = NULL;
	size_t len = 0, n = 0;
	char *hit = NULL;

	if (read_file_at(pidfd, "mountinfo", MOUNTINFO_MAX, &buf, &len) < 0 || mountinfo_parse_buffer(buf, len, &e, &n) < 0)
		return NULL;
	for (size_t i = 0; i < n && !hit; i++)
		if ((dev == 0 || e[i].dev == dev) && e[i].root && root_matches(e[i].root, root) &&
		    !(skip_suffix && e[i].target && ends_with(e[i].target, skip_suffix)))
			hit = strdup(e[i].target ? e[i].target : "?");
	mount_entries_free(e, n);
	return hit;
}

int mount_users_find(const char *proc, dev_t dev, const char *root, uint64_t skip_ns, const char *skip_suffix,
		     MountUser **ret, size_t *ret_n, size_t *ret_scanned)
{
	uint64_t *seen = NULL;
	size_t n_seen = 0, cap_seen = 0, n = 0, cap = 0;
	MountUser *out = NULL;
	struct dirent *de;
	DIR *d;
	int r = 0;

	d = opendir(proc);
	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		_cleanup_close_ int pidfd = -EBADF;
		_cleanup_free_ char *comm = NULL;
		struct stat ns;
		bool dup = false;
		char *target;
		size_t clen = 0;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		pidfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		/* A process that exited meanwhile, or a kernel thread: nothing to read. */
		if (pidfd < 0 || fstatat(pidfd, "ns/mnt", &ns, 0) < 0)
			continue;
		for (size_t i = 0; i < n_seen && !dup; i++)
			dup = seen[i] == (uint64_t)ns.st_ino;
		if (dup)
			continue;
		if (GROW_ARRAY(seen, cap_seen, n_seen + 1, 64) < 0) {
			r = -ENOMEM;
			break;
		}
		seen[n_seen++] = (uint64_t)ns.st_ino;
		if ((uint64_t)ns.st_ino == skip_ns)
			continue;
		target = find_in(pidfd, dev, root, skip_suffix);
		if (!target)
			continue;
		if (GROW_ARRAY(out, cap, n + 1, 8) < 0) {
			free(target);
			r = -ENOMEM;
			break;
		}
		out[n] = (MountUser){ .pid = atoi(de->d_name), .mount_ns = (uint64_t)ns.st_ino, .target = target };
		if (read_file_at(pidfd, "comm", 256, &comm, &clen) == 0)
			snprintf(out[n].comm, sizeof(out[n].comm), "%.*s", (int)strcspn(comm, "\n"), comm);
		n++;
	}
	closedir(d);
	free(seen);
	if (r < 0) {
		mount_users_free(out, n);
		return r;
	}
	*ret = out;
	*ret_n = n;
	*ret_scanned = n_seen;
	return 0;
}
