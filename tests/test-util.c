/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/sysmacros.h>

#include "pool/mount.h"
#include "util/deadline-call.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

Test(strutil, sizes_modes_numbers)
{
	uint64_t v;
	mode_t m;
	uint32_t u;
	double d;

	cr_expect(parse_size("10G", &v) == 0 && v == 10ULL << 30);
	cr_expect(parse_size("512k", &v) == 0 && v == 512ULL << 10);
	cr_expect(parse_size("3T", &v) == 0 && v == 3ULL << 40);
	cr_expect(parse_size("4096", &v) == 0 && v == 4096);
	cr_expect_lt(parse_size("10GB", &v), 0);
	cr_expect_lt(parse_size("G", &v), 0);
	cr_expect_lt(parse_size("-1", &v), 0);
	cr_expect_lt(parse_size(" 1", &v), 0);
	cr_expect_lt(parse_size("16777216T", &v), 0);
	cr_expect(parse_mode("0755", &m) == 0 && m == 0755);
	cr_expect(parse_mode("2775", &m) == 0 && m == 02775);
	cr_expect_lt(parse_mode("0800", &m), 0);
	cr_expect_lt(parse_mode("", &m), 0);
	cr_expect_lt(parse_mode("107777", &m), 0);
	cr_expect(parse_u32("4294967295", &u) == 0 && u == 4294967295u);
	cr_expect_lt(parse_u32("4294967296", &u), 0);
	cr_expect_lt(parse_u32("+1", &u), 0);
	cr_expect(parse_decimal("12.5", &d) == 0 && d > 12.4 && d < 12.6);
	cr_expect_lt(parse_decimal("1e3", &d), 0);
	cr_expect_lt(parse_decimal(".", &d), 0);
	char buf[32];
	format_size(10ULL << 30, buf, sizeof(buf));
	cr_expect_str_eq(buf, "10G");
	format_size(1536ULL << 20, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1536M");
	cr_expect_eq(crc32c(0, "123456789", 9), 0xe3069283u);
}

/* CRC32C one bit at a time, straight from the polynomial: what the fast paths must agree with. */
static uint32_t crc32c_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

/* The CPU's instruction (eight bytes a step, after the unaligned head) gives the polynomial's CRC at every alignment and length, chained too. */
Test(strutil, crc32c_agrees_with_the_polynomial_at_every_alignment_and_length)
{
	static unsigned char buf[4096 + 16];
	uint32_t seed = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (unsigned char)(seed >> 16);
	}
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len <= 70; len++)
			cr_assert_eq(crc32c(0, buf + off, len), crc32c_bitwise(0, buf + off, len), "offset %zu, length %zu",
				     off, len);
	for (size_t cut = 0; cut <= 4096; cut += 37)
		cr_assert_eq(crc32c(crc32c(0, buf + 3, cut), buf + 3 + cut, 4096 - cut), crc32c_bitwise(0, buf + 3, 4096),
			     "chained at %zu", cut);
}

/* Terminal controls and bidi overrides never reach a screen: each byte becomes \xNN, and the label comes back. */
Test(strutil, escape_turns_terminal_controls_into_text)
{
	static const struct {
		const char *raw, *label, *display;
	} cases[] = {
		{ "nvmevol-a", "nvmevol-a", "nvmevol-a" },
		{ "nv\x1b[2J", "nv\\x1b[2J", "nv\\x1b[2J" },                /* ESC */
		{ "nv\xc2\x9b" "31m", "nv\\xc2\\x9b31m", "nv\\xc2\\x9b31m" }, /* U+009B CSI */
		{ "nv\xe2\x80\xaegpj", "nv\\xe2\\x80\\xaegpj", "nv\\xe2\\x80\\xaegpj" }, /* U+202E RLO */
		{ "nv\xe2\x81\xa6x", "nv\\xe2\\x81\\xa6x", "nv\\xe2\\x81\\xa6x" }, /* U+2066 LRI */
		{ "nv\xe2\x80\xa8x", "nv\\xe2\\x80\\xa8x", "nv\\xe2\\x80\\xa8x" }, /* U+2028 line separator */
		{ "a\x7f\tb\n", "a\\x7f\\x09b\\x0a", "a\\x7f\\x09b\\x0a" },
		{ "a\\b", "a\\\\b", "a\\b" },                                   /* only the reversible form doubles it */
		{ "\xff\xc2", "\\xff\\xc2", "\\xff\\xc2" },                    /* invalid and truncated UTF-8 */
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe",
		  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe" },             /* printable UTF-8 stays */
	};
	char buf[128], back[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		label_escape(cases[i].raw, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].label, "case %zu", i);
		cr_expect_eq(label_unescape(buf, back, sizeof(back)), 0, "case %zu", i);
		cr_expect_str_eq(back, cases[i].raw, "case %zu", i);
		text_escape(cases[i].raw, false, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].display, "case %zu", i);
		/* Escaped text is safe already: escaping it again for display changes nothing. */
		text_escape(cases[i].label, false, back, sizeof(back));
		cr_expect_str_eq(back, cases[i].label, "case %zu", i);
	}
	for (uint32_t cp = 0; cp < 0x20; cp++)
		cr_expect(codepoint_is_display_unsafe(cp));
	for (uint32_t cp = 0x7f; cp <= 0x9f; cp++)
		cr_expect(codepoint_is_display_unsafe(cp));
	cr_expect(!codepoint_is_display_unsafe('~') && !codepoint_is_display_unsafe(0xa0) &&
		  !codepoint_is_display_unsafe(0xe9) && !codepoint_is_display_unsafe(0x20ac));

	/* Never a split escape at the end of a short buffer. */
	label_escape("ab\x1b", buf, 6);
	cr_expect_str_eq(buf, "ab");
	label_escape("ab\xe2\x80\xae", buf, 14);
	cr_expect_str_eq(buf, "ab");
	char *dup = text_escape_dup("x\xc2\x9by", false);
	cr_assert_not_null(dup);
	cr_expect_str_eq(dup, "x\\xc2\\x9by");
	free(dup);
}

Test(fsutil, atomic_write_replaces_and_leaves_no_temp)
{
	char dir[] = "/tmp/nvmevol-fsutil.XXXXXX";
	char *buf = NULL;
	size_t len;
	int fd;

	cr_assert_not_null(mkdtemp(dir));
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert_eq(write_file_atomic_at(fd, "r.json", "one", 3, 0600), 0);
	cr_assert_eq(write_file_atomic_at(fd, "r.json", "two!", 4, 0600), 0);
	cr_assert_eq(read_file_at(fd, "r.json", 100, &buf, &len), 0);
	cr_expect_str_eq(buf, "two!");
	free(buf);
	cr_expect_eq(read_file_at(fd, "r.json", 2, &buf, &len), -EFBIG);
	cr_assert_eq(symlinkat("/etc/passwd", fd, "link.json"), 0);
	cr_expect_lt(read_file_at(fd, "link.json", 100000, &buf, &len), 0, "followed a symlink");
	int t = openat(fd, ".x.json.tmp.1234", O_CREAT | O_WRONLY, 0600);
	close(t);
	cr_expect_eq(remove_atomic_tmp_files(fd), 1);
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

Test(mountinfo, parses_the_kernel_format)
{
	const char *text =
		"27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
		"43 27 7:1 / /run/parts/u1 rw,noatime,nodiratime - xfs /dev/loop1 rw,inode64,noquota\n"
		"44 27 7:1 /nvmevol/volumes/pg /mnt/nvmevol/pg rw,noatime,nodiratime shared:5 master:2 - xfs /dev/loop1 rw\n";
	MountEntry *e = NULL;
	size_t n = 0;

	cr_assert_eq(mountinfo_parse_buffer(text, strlen(text), &e, &n), 0);
	cr_assert_eq(n, 3);
	cr_expect_str_eq(e[2].root, "/nvmevol/volumes/pg");
	cr_expect_str_eq(e[2].target, "/mnt/nvmevol/pg");
	cr_expect(mount_options_contain(e[2].vfs_options, "nodiratime"));
	cr_expect_not(mount_options_contain(e[2].vfs_options, "atime"));
	cr_expect(mount_is_shared(&e[2]));
	cr_expect_not(mount_is_shared(&e[1]));
	cr_expect_eq(major(e[1].dev), 7);
	cr_expect_str_eq(e[1].fstype, "xfs");
	mount_entries_free(e, n);
}

/* A call that reads one byte from a pipe: it blocks until the test writes. */
typedef struct PipeRead {
	DeadlineCall call;
	int fd;
	int *freed; /* counts the frees, wherever they happen */
} PipeRead;

static int pipe_read_run(DeadlineCall *c)
{
	char b;

	return read(((PipeRead *)c)->fd, &b, 1) == 1 ? b : -EIO;
}

static void pipe_read_free(DeadlineCall *c)
{
	__atomic_add_fetch(((PipeRead *)c)->freed, 1, __ATOMIC_SEQ_CST);
	free(c);
}

static bool pipe_read_same(const DeadlineCall *a, const DeadlineCall *b)
{
	return ((const PipeRead *)a)->fd == ((const PipeRead *)b)->fd;
}

static PipeRead *pipe_read_new(int fd, int *freed)
{
	PipeRead *p = calloc(1, sizeof(*p));

	cr_assert_not_null(p);
	*p = (PipeRead){ .call = { .run = pipe_read_run, .free = pipe_read_free, .same = pipe_read_same },
			 .fd = fd, .freed = freed };
	return p;
}

Test(deadline_call, a_late_call_is_left_to_its_worker_and_blocks_no_second_one)
{
	int fds[2], freed = 0;
	uint64_t released = deadline_call_released();
	PipeRead *p;

	cr_assert_eq(pipe(fds), 0);
	/* Answered in time: the result, and the job is the caller's. */
	cr_assert_eq(write(fds[1], "A", 1), 1);
	p = pipe_read_new(fds[0], &freed);
	cr_assert_eq(deadline_call(&p->call, 2000), 'A');
	cr_assert_eq(freed, 0, "a job answered in time was freed for its caller");
	pipe_read_free(&p->call);

	/* Late: -ETIMEDOUT, and a second call for the same thing does not wait or start a worker. */
	cr_assert_eq(deadline_call(&pipe_read_new(fds[0], &freed)->call, 100), -ETIMEDOUT);
	cr_assert_eq(deadline_call(&pipe_read_new(fds[0], &freed)->call, 5000), -ETIMEDOUT);
	cr_assert_eq(__atomic_load_n(&freed, __ATOMIC_SEQ_CST), 2, "the refused second job was not freed at once");
	cr_assert_eq(deadline_call_released(), released);

	/* Its answer comes: the worker frees its job and counts it; the next call runs. */
	cr_assert_eq(write(fds[1], "BC", 2), 2);
	for (int i = 0; i < 200 && deadline_call_released() == released; i++)
		usleep(10 * 1000);
	cr_assert_eq(deadline_call_released(), released + 1);
	cr_assert_eq(__atomic_load_n(&freed, __ATOMIC_SEQ_CST), 3);
	p = pipe_read_new(fds[0], &freed);
	cr_assert_eq(deadline_call(&p->call, 2000), 'C');
	pipe_read_free(&p->call);
	close(fds[0]);
	close(fds[1]);
}

/* What a shell makes of a quoted word is the word: a host called "(none)" (a kernel without a name), quotes, $(), `. */
Test(strutil, shell_quote_gives_the_shell_the_string_back)
{
	static const char *const words[] = { "(none)", "node2", "", "it's", "''", "$(touch /tmp/x)", "`id`", "a b\tc",
					      "line\nbreak", "\\", "*", "a;b|c&d>e<f", "-o" };

	for (size_t i = 0; i < ELEMENTSOF(words); i++) {
		_cleanup_free_ char *q = shell_quote_dup(words[i]), *cmd = NULL;
		char got[256] = "";
		size_t n;
		FILE *f;

		cr_assert_not_null(q);
		cr_assert_gt(asprintf(&cmd, "printf '%%s' %s", q), 0);
		f = popen(cmd, "r");
		cr_assert_not_null(f);
		n = fread(got, 1, sizeof(got) - 1, f);
		got[n] = '\0';
		cr_assert_eq(pclose(f), 0, "%s", cmd);
		cr_assert_str_eq(got, words[i], "%s", cmd);
	}
}
