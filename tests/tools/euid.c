/* SPDX-License-Identifier: MIT */
/*
 * Prints the effective user ID it runs with: copied setuid-root onto a volume
 * by the e2e suid_dev scenario, it shows whether the volume honours the bit.
 * (busybox drops a setuid bit by itself for most applets, so it cannot tell.)
 */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	printf("%u\n", (unsigned)geteuid());
	return 0;
}
