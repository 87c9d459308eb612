/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-sandbox.h"
#include "util/fs-util.h"
#include "util/log.h"

static int sandbox = -1;
static char sandbox_path[80];
static const char *target_name = "fuzz";

_Noreturn void fuzz_fail(const char *what, const char *detail)
{
	fprintf(stderr, "%s: property violated: %s: %s\n", target_name, what, detail ? detail : "");
	abort();
}

static void remove_sandbox(void)
{
	(void)rm_rf_at(AT_FDCWD, sandbox_path);
}

void fuzz_sandbox_init(const char *target)
{
	if (sandbox >= 0)
		return;
	target_name = target;
	log_set_level(LOG_LEVEL_ERROR);
	snprintf(sandbox_path, sizeof(sandbox_path), "/tmp/nvmevol-%s.XXXXXX", target);
	if (!mkdtemp(sandbox_path))
		abort();
	sandbox = open(sandbox_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sandbox < 0)
		abort();
	atexit(remove_sandbox);
}

int fuzz_sandbox_enter(void)
{
	int root;

	if (mkdirat(sandbox, "root", 0700) < 0 || (root = openat(sandbox, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		abort();
	return root;
}

static int only_root(const char *name, void *userdata)
{
	if (strcmp(name, "root") != 0)
		fuzz_fail("the stream wrote beside its directory", name);
	return 0;
}

void fuzz_sandbox_leave(int root_fd)
{
	if (dir_foreach_name(sandbox, only_root, NULL) < 0)
		abort();
	close(root_fd);
	if (rm_rf_at(sandbox, "root") < 0)
		abort();
}

void fuzz_check_relative_path(const char *p, size_t max)
{
	if (p[0] == '/' || strlen(p) > max)
		fuzz_fail("a parsed name is absolute or too long", p);
	for (const char *q = p; *q;) {
		size_t len = strcspn(q, "/");

		if (len == 0 || (len == 1 && q[0] == '.') || (len == 2 && q[0] == '.' && q[1] == '.'))
			fuzz_fail("a parsed name has an empty, '.' or '..' component", p);
		q += len;
		if (*q == '/')
			q++;
	}
}
