/* SPDX-License-Identifier: MIT */
/*
 * nofsync: an LD_PRELOAD shim that turns fsync, fdatasync and syncfs into
 * no-ops (benchmarks only). tests/bench/scale.sh runs the daemon that
 * *populates* its N volumes with it, so that 100,000 Creates do not wait for
 * 800,000 flushes of a shared loop device; the files are all written (the page
 * cache has them, and `sync` follows), and no daemon that is measured ever
 * runs with it.
 *
 *   gcc -O2 -shared -fPIC -o nofsync.so nofsync.c
 */
int fsync(int fd)
{
	(void)fd;
	return 0;
}

int fdatasync(int fd)
{
	(void)fd;
	return 0;
}

int syncfs(int fd)
{
	(void)fd;
	return 0;
}
