/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "pool/serving.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/time-util.h"

#define RECORD_MAX 4096

int serving_record(int tree_fd, const Settings *cfg)
{
	_cleanup_free_ char *text = NULL;
	char since[64];
	json_t *j;

	format_rfc3339((int64_t)time(NULL), since, sizeof(since));
	j = json_pack("{s:s,s:i,s:s,s:s,s:s,s:s}", "mode", run_mode_to_string(cfg->mode), "pid", (int)getpid(),
		      "socket", cfg->socket_path, "admin_socket", cfg->admin_socket_path, "state_dir", cfg->state_dir,
		      "since", since);
	text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	/* Not durable: a crash loses only the note, and the next holder writes its own. */
	return write_file_replace_at(tree_fd, SERVING_RECORD, text, strlen(text), 0644);
}

/* Who the record in nvmevol/ of @root_fd says holds the partition. */
static char *describe_holder(int root_fd)
{
	_cleanup_free_ char *text = NULL, *path = NULL;
	const char *mode = NULL, *sock = NULL, *state = NULL, *since = NULL;
	json_t *j = NULL;
	char *out = NULL;
	int pid = 0;

	if (asprintf(&path, "nvmevol/%s", SERVING_RECORD) < 0)
		return NULL;
	if (read_file_at(root_fd, path, RECORD_MAX, &text, NULL) == 0)
		j = json_loads(text, 0, NULL);
	if (!j || json_unpack(j, "{s:s,s:i,s:s,s:s,s:s}", "mode", &mode, "pid", &pid, "socket", &sock, "state_dir",
			      &state, "since", &since) < 0) {
		json_decref(j);
		return strdup("another nvmevol instance (it left no readable nvmevol/" SERVING_RECORD ", e.g. a "
			      "read-only mount, or an older version)");
	}
	if (run_mode_from_string(mode) == RUN_MODE_HOST) {
		if (asprintf(&out, "the nvmevol host service (pid %d, socket %s, state %s, since %s): stop it first "
				   "(systemctl stop nvmevol)", pid, sock, state, since) < 0)
			out = NULL;
	} else if (asprintf(&out, "the nvmevol managed Docker plugin (its socket %s and state %s inside the plugin, "
				  "since %s): disable it first (docker plugin disable nvmevol)", sock, state, since) < 0)
		out = NULL;
	json_decref(j);
	return out;
}

int serving_claim(const char *mountpoint, char **ret_why)
{
	_cleanup_close_ int fd = -EBADF;
	char *who;

	fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return TAKE_FD(fd);
	if (errno != EWOULDBLOCK)
		return negative_errno();
	who = describe_holder(fd);
	*ret_why = NULL;
	if (asprintf(ret_why, "served by %s; one partition is served by one nvmevol at a time",
		     who ? who : "another nvmevol instance") < 0)
		*ret_why = NULL;
	free(who);
	return -EBUSY;
}
