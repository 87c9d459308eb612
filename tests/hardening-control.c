/* SPDX-License-Identifier: MIT */
/* Negative control for check-hardening.sh: built without PIE, RELRO, BIND_NOW,
 * stack protector and _FORTIFY_SOURCE (tests/meson.build), so the check must
 * report every property missing. The code has what each flag would act on: a
 * local array (stack protector) and a read into it of a run-time length
 * (__read_chk under _FORTIFY_SOURCE). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char buf[64];
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	ssize_t got = read(STDIN_FILENO, buf, n);

	printf("%zd\n", got);
	return 0;
}
