/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "device/probe-deadline.h"
#include "util/deadline-call.h"
#include "util/macro.h"

typedef struct Probe {
	DeadlineCall call; /* first: a DeadlineCall * is the Probe * */
	char *devname;
	dev_t rdev;        /* 0 when @devname is not a block device (an image file) */
	ProbedDevice result;
} Probe;

static int probe_run(DeadlineCall *c)
{
	Probe *p = (Probe *)c;

	return probe_device(p->devname, &p->result);
}

static void probe_free(DeadlineCall *c)
{
	Probe *p = (Probe *)c;

	probed_device_done(&p->result);
	free(p->devname);
	free(p);
}

static bool probe_same(const DeadlineCall *a, const DeadlineCall *b)
{
	const Probe *x = (const Probe *)a, *y = (const Probe *)b;

	return (x->rdev && x->rdev == y->rdev) || streq(x->devname, y->devname);
}

int probe_device_deadline(const char *devname, unsigned timeout_ms, ProbedDevice *ret)
{
	struct stat st;
	Probe *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->call = (DeadlineCall){ .run = probe_run, .free = probe_free, .same = probe_same };
	p->devname = strdup(devname);
	if (!p->devname) {
		free(p);
		return -ENOMEM;
	}
	/* The node's inode: stat never reads the device. */
	if (stat(devname, &st) == 0 && S_ISBLK(st.st_mode))
		p->rdev = st.st_rdev;

	r = deadline_call(&p->call, timeout_ms);
	if (r == -ETIMEDOUT)
		return r; /* the worker's now */
	if (r == 0) {
		*ret = p->result;
		p->result = (ProbedDevice){ 0 };
	}
	probe_free(&p->call);
	return r;
}
