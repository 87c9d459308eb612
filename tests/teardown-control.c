/* SPDX-License-Identifier: MIT */
/*
 * Negative control of the teardown checks (tests/check-teardown-control.sh
 * runs it and expects it to fail): a child process keeps the loop device open
 * past the test, so loopxfs_destroy() cannot release it within its wait and
 * must fail the test. The child lets go after HOLD_S, and losetup -d's
 * autoclear then frees the device.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"

#define HOLD_S 20

static LoopXfs lx;

static void fini(void)
{
	loopxfs_destroy(&lx);
}

Test(teardown_control, a_device_still_held_fails_the_teardown, .fini = fini)
{
	pid_t pid;
	int fd, r;

	testbed_require_root();
	r = loopxfs_create_full(&lx, NULL, 300, NULL);
	cr_assert_eq(r, 0, "loopxfs_create_full: %s", strerror(-r));
	/* Opened before the fork: the child holds it by the time the teardown starts. */
	fd = open(lx.device, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s", lx.device);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Only the device: Criterion and meson wait for the end of the pipes they gave the worker. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		(void)dup2(fd, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
		(void)dup2(null, STDERR_FILENO);
		(void)close_range(3, ~0U, 0);
		sleep(HOLD_S);
		_exit(0);
	}
	(void)close(fd);
}
