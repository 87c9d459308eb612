/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone-plan.h"
#include "util/dircursor.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/alloc-util.h"
#include "util/macro.h"

void clone_plan_init(ClonePlan *p, size_t data_max)
{
	*p = (ClonePlan){ .data_max = data_max };
}

void clone_plan_done(ClonePlan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->ops[i].name);
		free(p->ops[i].target);
		clone_meta_done(&p->ops[i].meta);
	}
	free(p->ops);
	free(p->data);
	*p = (ClonePlan){ .data_max = p->data_max };
}

int clone_plan_add(ClonePlan *p, ClonePlanOpType type, const char *name, const char *target, CloneMeta *meta)
{
	ClonePlanOp op = { .type = type };
	size_t cost = sizeof(op) + (name ? strlen(name) + 1 : 0) + (target ? strlen(target) + 1 : 0) +
		      (meta ? meta->xattrs_len : 0);

	if (cost > p->data_max || p->data_len + p->op_bytes > p->data_max - cost)
		return -E2BIG;
	if (GROW_ARRAY(p->ops, p->cap, p->n + 1, 256) < 0)
		return -ENOMEM;
	if (name && !(op.name = strdup(name)))
		return -ENOMEM;
	if (target && !(op.target = strdup(target))) {
		free(op.name);
		return -ENOMEM;
	}
	if (meta)
		clone_meta_move(&op.meta, meta);
	p->ops[p->n++] = op;
	p->op_bytes += cost;
	return 0;
}

ClonePlanOp *clone_plan_last(ClonePlan *p)
{
	return p->n > 0 ? &p->ops[p->n - 1] : NULL;
}

int clone_plan_reserve(ClonePlan *p, size_t len, size_t *ret_off)
{
	if (len > p->data_max || p->data_len + p->op_bytes > p->data_max - len)
		return -E2BIG;
	if (GROW_ARRAY(p->data, p->data_cap, p->data_len + len, 1u << 20) < 0)
		return -ENOMEM;
	*ret_off = p->data_len;
	p->data_len += len;
	return 0;
}

int clone_plan_open_parent(int root_fd, const char *path, int *ret_fd, const char **ret_leaf)
{
	_cleanup_free_ char *copy = strdup(path);
	DirCursor c;
	char *p, *slash;
	int r, fd;

	if (!copy)
		return -ENOMEM;
	r = dircursor_init(&c, root_fd);
	if (r < 0)
		return r;
	/* dircursor_push() refuses symlinks and other filesystems at every component. */
	for (p = copy; (slash = strchr(p, '/')); p = slash + 1) {
		*slash = '\0';
		r = dircursor_push(&c, p);
		if (r < 0) {
			dircursor_done(&c);
			return r;
		}
	}
	fd = fcntl(dircursor_fd(&c), F_DUPFD_CLOEXEC, 3);
	r = fd < 0 ? negative_errno() : 0;
	dircursor_done(&c);
	if (r < 0)
		return r;
	*ret_fd = fd;
	*ret_leaf = path + (p - copy);
	return 0;
}

static int open_file(int dirfd, const char *name, int *ret)
{
	int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return negative_errno();
	*ret = fd;
	return 0;
}

static int apply_meta(int dirfd, const char *name, const CloneMeta *m)
{
	_cleanup_close_ int fd = -EBADF;

	if (!name)
		return clone_meta_apply(-EBADF, NULL, dirfd, m);
	/* The clone is nvmevol's own and not served yet; still, never open anything but files and directories. */
	if (S_ISREG(m->mode) || S_ISDIR(m->mode)) {
		fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
						 (S_ISDIR(m->mode) ? O_DIRECTORY : 0));
		if (fd < 0)
			return negative_errno();
	}
	return clone_meta_apply(dirfd, name, fd, m);
}

static int apply_link(int root_fd, int dirfd, const char *name, const char *target)
{
	_cleanup_close_ int pfd = -EBADF;
	const char *leaf;
	int r;

	r = clone_plan_open_parent(root_fd, target, &pfd, &leaf);
	if (r < 0)
		return r;
	if (linkat(pfd, leaf, dirfd, name, 0) < 0)
		return negative_errno();
	return 0;
}

static const char *const op_names[_CLONE_PLAN_OP_MAX] = {
	"enter", "leave", "remove", "mkdir", "create", "write", "punch", "size", "symlink", "mknod", "link", "meta",
};

static int apply_one(const ClonePlan *p, const ClonePlanOp *op, DirCursor *c, int root_fd)
{
	int dirfd = dircursor_fd(c), fd = -EBADF, r = 0;

	switch (op->type) {
	case CLONE_PLAN_ENTER:
		return dircursor_push(c, op->name);
	case CLONE_PLAN_LEAVE:
		return dircursor_pop(c);
	case CLONE_PLAN_REMOVE:
		return rm_rf_at(dirfd, op->name);
	case CLONE_PLAN_MKDIR:
		return mkdirat(dirfd, op->name, 0700) < 0 ? negative_errno() : 0;
	case CLONE_PLAN_CREATE:
		fd = openat(dirfd, op->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return negative_errno();
		break;
	case CLONE_PLAN_WRITE:
		r = open_file(dirfd, op->name, &fd);
		if (r == 0)
			r = pwrite_all(fd, p->data + op->data_off, (size_t)op->length, op->offset);
		break;
	case CLONE_PLAN_PUNCH:
		r = open_file(dirfd, op->name, &fd);
		if (r == 0 && fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)op->offset,
					(off_t)op->length) < 0)
			r = negative_errno();
		break;
	case CLONE_PLAN_SIZE:
		r = open_file(dirfd, op->name, &fd);
		if (r == 0 && ftruncate(fd, (off_t)op->length) < 0)
			r = negative_errno();
		break;
	case CLONE_PLAN_SYMLINK:
		return symlinkat(op->target, dirfd, op->name) < 0 ? negative_errno() : 0;
	case CLONE_PLAN_MKNOD:
		return mknodat(dirfd, op->name, (op->mode & S_IFMT) | 0600, op->rdev) < 0 ? negative_errno() : 0;
	case CLONE_PLAN_LINK:
		return apply_link(root_fd, dirfd, op->name, op->target);
	case CLONE_PLAN_META:
		return apply_meta(dirfd, op->name, &op->meta);
	default:
		return -EINVAL;
	}
	if (fd >= 0)
		(void)close(fd);
	return r;
}

int clone_plan_apply(const ClonePlan *p, int dst_fd, char **reterr_msg)
{
	DirCursor c;
	int r;

	r = dircursor_init(&c, dst_fd);
	if (r < 0) {
		errno = -r;
		return errmsg_set(reterr_msg, r, "cannot open the clone: %m");
	}
	for (size_t i = 0; i < p->n; i++) {
		const ClonePlanOp *op = &p->ops[i];

		r = apply_one(p, op, &c, dst_fd);
		if (r < 0) {
			errno = -r;
			errmsg_set(reterr_msg, r, "cannot finish the clone (%s %s): %m", op_names[op->type],
				   op->name ? op->name : ".");
			break;
		}
	}
	dircursor_done(&c);
	return r;
}
