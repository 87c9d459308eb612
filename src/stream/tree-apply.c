/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "stream/send-tree.h"
#include "stream/tree-apply.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/macro.h"

/* Bigger than the default 64 KiB: fewer switches between the two threads for each 1 MiB WRITE record. */
#define TREE_APPLY_PIPE_SIZE (1 << 20)

typedef struct Sender {
	int new_fd, old_fd, out;
	volatile sig_atomic_t stop;
	SendTreeStats st;
	char *why;
	int r;
} Sender;

static void *send_thread(void *userdata)
{
	Sender *s = userdata;
	sigset_t pipe_sig;

	/* A reader that gives up makes write() fail with EPIPE here, never a signal to the process. */
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	(void)pthread_sigmask(SIG_BLOCK, &pipe_sig, NULL);
	s->r = send_tree(s->new_fd, s->old_fd, "{\"tree_apply\":true}", s->out, &s->stop, &s->st, &s->why);
	/* The reader sees the end of the stream (cut short if the walk failed). */
	(void)close(s->out);
	s->out = -EBADF;
	return NULL;
}

int tree_apply_changes(int new_fd, int old_fd, int dst_fd, const RecvLimits *lim, TreeApplyStats *ret_stats,
		       char **reterr_msg)
{
	Sender s = { .new_fd = new_fd, .old_fd = old_fd, .out = -EBADF };
	_cleanup_free_ char *rwhy = NULL;
	SendReader rd = { 0 };
	SendRecord rec = { 0 };
	RecvStats rst = { 0 };
	pthread_t thread;
	int p[2], in, r;

	if (pipe2(p, O_CLOEXEC) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot make a pipe: %s", errno_str(errno));
	(void)fcntl(p[1], F_SETPIPE_SZ, TREE_APPLY_PIPE_SIZE); /* a smaller pipe only costs switches */
	in = p[0];
	s.out = p[1];
	r = -pthread_create(&thread, NULL, send_thread, &s);
	if (r < 0) {
		(void)close(p[0]);
		(void)close(p[1]);
		return errmsg_set(reterr_msg, r, "cannot start the walk's thread: %s", errno_str(r));
	}
	r = send_reader_init(&rd, send_read_fd, &in, &rwhy);
	if (r == 0) {
		r = send_reader_next(&rd, &rec, &rwhy);
		if (r == 1 && rec.type != SEND_HEADER)
			r = errmsg_set(&rwhy, -EBADMSG, "the stream does not start with its header");
		send_record_done(&rec);
	}
	if (r >= 0)
		r = recv_tree(&rd, dst_fd, lim, &rst, &rwhy);
	/* A failed apply stops the walk: it sees -EINTR, or -EPIPE once the pipe is closed. */
	s.stop = r < 0;
	(void)close(in);
	(void)pthread_join(thread, NULL);
	send_reader_done(&rd);
	/* The walk's own failure explains a stream cut short better than the reader can. */
	if (s.r < 0 && s.r != -EPIPE && s.r != -EINTR)
		r = errmsg_set(reterr_msg, s.r, "%s", s.why ? s.why : errno_str(s.r));
	else if (r < 0)
		r = errmsg_set(reterr_msg, r, "%s", rwhy ? rwhy : errno_str(r));
	free(s.why);
	if (ret_stats)
		*ret_stats = (TreeApplyStats){ .entries = s.st.entries, .records = rst.records,
					       .data_bytes = rst.data_bytes, .bytes = rst.bytes };
	return r < 0 ? r : 0;
}
