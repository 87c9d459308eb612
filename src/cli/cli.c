/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd-admin.h"
#include "cli/cmd-devices.h"
#include "cli/cmd-move.h"
#include "cli/cmd-send.h"
#include "cli/cmd-selftest.h"
#include "volume/volume-options.h"
#include "util/macro.h"

#define TARGET_HELP                                                                                       \
	"  --plugin NAME    the plugin to talk to, as Docker names it (docker plugin ls),\n"                  \
	"                   when several nvmevol plugins are enabled; or its ID\n"                           \
	"  --socket PATH    talk to the admin socket PATH (a daemon run outside Docker)\n"                   \
	"  --json           print the result as JSON\n"                                                      \
	"  -h, --help       show this help\n"

#define EXIT_HELP "\nExit status: 0 success, 1 failure (the message says what to do), 2 usage error.\n"

typedef struct CliCommand {
	const char *name; /* "volume resize" */
	const char *synopsis;
	const char *help;
	unsigned options;
	int min_args, max_args; /* after the command words; -1: no maximum */
	int (*run)(const CliArgs *a, char **args, int n);
	bool volume_arg; /* the first argument is a volume name */
} CliCommand;

static const CliCommand commands[] = {
	{ "selftest", "[OPTIONS] PATH",
	  "Measures the filesystem holding the directory PATH with O_DIRECT I/O on an\n"
	  "unnamed scratch file, and verifies every block it wrote: sequential 1 MiB\n"
	  "write (+ fdatasync) and read, 4 KiB random write and read latency at queue\n"
	  "depth 1 (p50, p99) and IOPS at a higher queue depth. Needs no plugin.\n"
	  "\n"
	  "Options:\n"
	  "  --json             print the result as JSON\n"
	  "  --budget-ms N      wall-clock budget of the whole run (default 300)\n"
	  "  --seconds N        the same in seconds (may be fractional), for a longer,\n"
	  "                     more accurate run\n"
	  "  --size SIZE        write exactly SIZE sequentially (K, M, G suffixes;\n"
	  "                     rounded up to 1 MiB), whatever the budget\n"
	  "  --iodepth N        queue depth of the IOPS phases (default 16, max 256)\n"
	  "  --history          measure nothing: print the self-test history that nvmevol\n"
	  "                     keeps on the partition mounted at PATH (its baseline,\n"
	  "                     every kept run with ratios to the baseline, the trend)\n"
	  "  -h, --help         show this help\n"
	  "\nExit status: 0 pass, 1 data error or failure, 2 usage error.\n",
	  CLI_OPT_JSON | CLI_OPT_SECONDS | CLI_OPT_BUDGET_MS | CLI_OPT_SIZE | CLI_OPT_IODEPTH | CLI_OPT_HISTORY, 1, 1,
	  cmd_selftest },
	{ "devices", "[OPTIONS]",
	  "Lists the partitions nvmevol would put in its pool (XFS labels starting with\n"
	  "the prefix, and NVMEVOL_DEVICES), with the facts of the device under each\n"
	  "(transport, model, serial, firmware, block sizes, alignment, write cache),\n"
	  "NVMe health (SMART / Health log), XFS geometry where the filesystem is\n"
	  "mounted, and whether nvmevol would use it, and why not. Needs root; needs no\n"
	  "plugin.\n"
	  "\n"
	  "Options (default: the NVMEVOL_* variable of the same name, else the plugin's default):\n"
	  "  --json                  print JSON instead of a table\n"
	  "  --label-prefix PREFIX   NVMEVOL_LABEL_PREFIX (nvmevol)\n"
	  "  --devices LIST          NVMEVOL_DEVICES: /dev paths, UUID=..., LABEL=..., comma-separated\n"
	  "  --require-nvme MODE     NVMEVOL_REQUIRE_NVME: off, warn or enforce (warn)\n"
	  "  --health MODE           NVMEVOL_HEALTH: off, warn or enforce (warn)\n"
	  "  -h, --help              show this help\n"
	  "\nExit status: 0 listed (whatever the verdicts), 1 failure, 2 usage error.\n",
	  CLI_OPT_JSON | CLI_OPT_LABEL_PREFIX | CLI_OPT_DEVICES | CLI_OPT_REQUIRE_NVME | CLI_OPT_HEALTH, 0, 0, cmd_devices },
	{ "status", "[--json]",
	  "Shows the running plugin: version, settings, where its state lives, every\n"
	  "partition (device, free space, project quota, adopted or read-only, last\n"
	  "self-test) and every volume (state, partition, size limit and usage, mount\n"
	  "count, last self-test verdict).\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 0, 0, cmd_status },
	{ "volume show", "NAME [--json]",
	  "Shows one volume: its options (as created, or as changed since), partition,\n"
	  "owner and mode, size limit and usage, mount IDs and counts, last self-test.\n"
	  "Note: `docker volume create` of an existing name returns the existing volume\n"
	  "without asking the plugin, whatever options it is given; this is where the\n"
	  "volume's real options are.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_volume_show, true },
	{ "volume resize", "NAME [SIZE] [--inodes N]",
	  "Changes the XFS project-quota limits of an existing volume: SIZE as at\n"
	  "create (e.g. 20G; units K, M, G, T; at least 1M), --inodes N the most files\n"
	  "and directories; 'none' removes a limit. A limit below what the volume uses\n"
	  "now is refused. A volume created without limits is first given its own\n"
	  "project ID (every file of it is tagged, so that its usage counts). Works\n"
	  "while containers use the volume; a grow lets writes that hit the old limit\n"
	  "through at once.\n"
	  "\nOptions:\n"
	  "  --inodes N       new inode limit ('none': no limit)\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_INODES, 1, 2, cmd_volume_resize, true },
	{ "volume set", "NAME KEY=VALUE...",
	  "Changes the self-test policy and thresholds of a volume: selftest=off|warn|\n"
	  "enforce, min_write_mbps=, min_read_mbps=, min_iops=, max_p99_ms= (numbers as\n"
	  "at create); 'none' goes back to the plugin's default policy or removes a\n"
	  "threshold. suid=true|false and dev=true|false grant setuid bits and device\n"
	  "nodes on its bind: a record this host did not write (a disk from elsewhere,\n"
	  "a lost state directory) grants them only once set here, while the volume is\n"
	  "not mounted. Takes effect at the volume's next first mount.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 2, -1, cmd_volume_set, true },
	{ "volume forget", "NAME",
	  "Drops a volume whose partition is missing from the plugin's index, so that\n"
	  "Docker stops listing it. Its data and record stay on the partition: if the\n"
	  "partition comes back, so does the volume. Refused while the partition is\n"
	  "present (use docker volume rm) or the volume is counted as mounted.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_volume_forget, true },
	{ "volume release", "NAME",
	  "Clears the mount counts of a volume that no container uses, e.g. one left\n"
	  "too high by a plugin crash between saving a count and answering Docker, and\n"
	  "takes its bind away. First asks Docker (its API socket, DOCKER_HOST) which\n"
	  "containers reference the volume and refuses if one is running, paused or\n"
	  "restarting; then reads every mount namespace on this host (/proc/*/mountinfo)\n"
	  "and refuses if one still has the volume mounted; the plugin then clears the\n"
	  "counts only if they are still the ones that were checked. Says what it did.\n"
	  "Run it as root on the Docker host.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_volume_release, true },
	{ "volume snapshot", "NAME [SNAPSHOT]",
	  "Takes a snapshot of a volume: a copy that shares its blocks (XFS reflink), as\n"
	  "of one instant across all its files even while containers write (the\n"
	  "partition is frozen briefly, as for a clone: NVMEVOL_CLONE_FREEZE_BUDGET_MS).\n"
	  "SNAPSHOT is named like a volume; without it, by the time (20261201T174500Z).\n"
	  "Kept on the volume's partition outside its volumes (Docker never sees it, no\n"
	  "container gets it, nvmevol never writes to it after it is taken), in XFS's\n"
	  "default project: never charged to the volume's size= or\n"
	  "inodes=, so it never makes the volume's writes fail; it costs the partition\n"
	  "the blocks the volume rewrites after it. At most 64 per volume.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 2, cmd_volume_snapshot, true },
	{ "volume snapshots", "NAME",
	  "Lists a volume's snapshots with what each costs now: the bytes of its data\n"
	  "that the volume no longer shares (FIEMAP physical extents compared; measured\n"
	  "for at most 2 s in all, else a lower bound, 'at least').\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_volume_snapshots, true },
	{ "volume snapshot-rm", "NAME SNAPSHOT",
	  "Removes a snapshot of a volume (its blocks are freed in the background).\n"
	  "A volume with snapshots cannot be removed (docker volume rm says which):\n"
	  "remove its snapshots first.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 2, 2, cmd_volume_snapshot_rm, true },
	{ "volume fence", "NAME HOST",
	  "Marks a volume as moved to HOST (what a move does at its end): its record\n"
	  "says so with the time and a generation number, and a Mount here is refused\n"
	  "with an error naming HOST. Get, List and Remove work as before. Refused\n"
	  "while the volume is mounted.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 2, 2, cmd_volume_fence, true },
	{ "volume unfence", "NAME",
	  "Lets a fenced volume be mounted here again (its data as of the move).\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_volume_unfence, true },
	{ "volume rollback", "NAME SNAPSHOT",
	  "Puts a volume back to a snapshot, as one atomic swap (RENAME_EXCHANGE), and\n"
	  "deletes the state it had (take a snapshot first to keep it). Only while the\n"
	  "volume is not in use: refused while the plugin counts it mounted or a mount\n"
	  "namespace it can see has it mounted. The snapshot is kept.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 2, 2, cmd_volume_rollback, true },
	{ "volume export", "NAME [--snapshot SNAPSHOT] [--compress zstd[:LEVEL]] > FILE",
	  "Writes a volume as a POSIX pax archive to standard output, for GNU tar or\n"
	  "bsdtar to restore (tar -xpf FILE --xattrs --xattrs-include='*' --acls):\n"
	  "owners, modes, nanosecond times, extended attributes (file capabilities\n"
	  "included), POSIX ACLs, hard links, symlinks, FIFOs, device nodes, and holes\n"
	  "kept as holes (GNU sparse 1.0). Sockets are left out (counted). Without\n"
	  "--snapshot a temporary snapshot is taken first (the volume's files as of one\n"
	  "instant, even while containers write) and removed at the end. The plugin\n"
	  "binds the snapshot read-only under its propagated mount; this command reads\n"
	  "it there (run it as root on the Docker host). What was written is said on\n"
	  "standard error (--json: as JSON).\n"
	  "\nOptions:\n"
	  "  --snapshot SNAP  export that snapshot of the volume\n"
	  "  --compress zstd[:LEVEL]  write the archive as a zstd stream (zstd -dc\n"
	  "                   restores the tar); LEVEL 1 (the default, fastest) to 19\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_SNAPSHOT | CLI_OPT_COMPRESS, 1, 1, cmd_volume_export, true },
	{ "volume import", "NAME [-o KEY=VALUE]... < FILE",
	  "Creates volume NAME from a tar stream on standard input (what volume export,\n"
	  "GNU tar or bsdtar write: ustar, pax, GNU long names, GNU sparse 1.0; as it\n"
	  "is or zstd-compressed, told by its first bytes), with the\n"
	  "options of docker volume create (-o size=20G -o uid=999 ...). The volume\n"
	  "exists only once the whole stream is in: a stream that is damaged, cut\n"
	  "short, or names anything outside the volume (an absolute name, '..', a\n"
	  "path through a symlink, a hard link out) leaves nothing behind. Device\n"
	  "nodes only with -o dev=true; trusted.* attributes are left out. The\n"
	  "plugin binds the new volume's directory under its propagated mount while\n"
	  "it is written; run the command as root on the Docker host.\n"
	  "\nOptions:\n"
	  "  -o KEY=VALUE     an option of the new volume (as docker volume create -o)\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_O, 1, 1, cmd_volume_import, true },
	{ "volume send", "NAME --snapshot S2 [--from S1] > FILE",
	  "Writes snapshot S2 of a volume to standard output as a send stream, for\n"
	  "'nvmevol volume receive' on this host or another (| ssh HOST nvmevol volume\n"
	  "receive NAME). With --from S1 (an older snapshot of the same volume, which\n"
	  "the receiver has), only what changed from S1 to S2 travels: for files, only\n"
	  "the ranges whose blocks differ (XFS copies on write); names made and deleted,\n"
	  "hard links, owners, modes, nanosecond times, extended attributes. The stream\n"
	  "carries the volume's options and the snapshots' IDs; every record and the\n"
	  "whole stream are checksummed. The plugin binds the snapshots read-only under\n"
	  "its propagated mount; this command reads them there (run it as root on the\n"
	  "Docker host). What was sent is said on standard error (--json: as JSON).\n"
	  "\nOptions:\n"
	  "  --snapshot S2    the snapshot to send (take one with 'volume snapshot')\n"
	  "  --from S1        send only the changes since snapshot S1\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_SNAPSHOT | CLI_OPT_FROM, 1, 1, cmd_volume_send, true },
	{ "volume receive", "NAME [-o KEY=VALUE]... < FILE",
	  "Applies a stream of 'nvmevol volume send' from standard input. A full stream\n"
	  "creates volume NAME (with the sender's options; -o KEY=VALUE overrides one),\n"
	  "which exists only once the whole stream is in. An incremental stream applies\n"
	  "to the existing volume NAME, which must have the stream's base snapshot (the\n"
	  "same ID: the one received before): the changes go into a block-sharing copy\n"
	  "of that snapshot and replace the volume in one atomic swap at the end,\n"
	  "refused while the volume is in use. Either way the volume then has the\n"
	  "stream's snapshot, with the sender's ID, the base of the next incremental.\n"
	  "A stream that is damaged, cut short, for another base, or names anything\n"
	  "outside the volume changes nothing. Device nodes only into a volume with\n"
	  "dev=true. Run it as root on the Docker host.\n"
	  "\nOptions:\n"
	  "  -o KEY=VALUE     an option of the new volume (full stream only)\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_O, 1, 1, cmd_volume_receive, true },
	{ "volume move", "NAME --via 'CMD' [--node NODE] [--final-now]",
	  "Moves a volume to another node: CMD is a command prefix that runs a command\n"
	  "there ('ssh node2', 'ip netns exec ns2', 'docker exec ctr'); this runs\n"
	  "/bin/sh -c 'CMD nvmevol volume receive NAME ...' with the stream on its\n"
	  "standard input. While the volume is in use: a full pass (snapshot, send),\n"
	  "then incremental passes (a new snapshot, the changes since the previous)\n"
	  "until one is small (--small), or short (--small-seconds: the final pass,\n"
	  "the downtime, sends about as much), or --passes were made; then it names\n"
	  "the containers that hold the volume (Docker's; where Docker cannot be asked,\n"
	  "the count of mounts) and waits until none does (--timeout). Then the source\n"
	  "is fenced (a Mount here is refused naming NODE; 'volume unfence' is the way\n"
	  "back) and the final pass sends the last changes: that pass is the downtime.\n"
	  "The copy there has the volume's options, owner and limits, and a node= pin\n"
	  "rewritten to NODE; until the final pass it is fenced toward this node. The\n"
	  "last snapshot is kept on both sides (the base of a later incremental send\n"
	  "or move back), the others removed; snapshots a move made go with their\n"
	  "volume when it is removed. Any failure leaves the source serving and\n"
	  "unfenced, and what the other side received is only what a whole pass\n"
	  "committed there. Run again, a move continues from the newest snapshot both\n"
	  "sides hold; it refuses a copy there that is mounted, not fenced toward this\n"
	  "node, or without a common snapshot, and changes nothing then.\n"
	  "\nOptions:\n"
	  "  --via 'CMD'      the command prefix that reaches the other node (required)\n"
	  "  --node NODE      the other node's name (default: its plugin's, from\n"
	  "                   'CMD nvmevol status --json')\n"
	  "  --final-now      fail instead of waiting if the volume is in use\n"
	  "  --timeout SEC    how long to wait for the containers to stop (default 600)\n"
	  "  --passes N       live passes at most before the wait (default 8)\n"
	  "  --small SIZE     a live pass under SIZE bytes is the last (default 64M)\n"
	  "  --small-seconds SEC\n"
	  "                   a live pass that took under SEC seconds is the last\n"
	  "                   (default 5; 0.5 is half a second)\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_VIA | CLI_OPT_NODE | CLI_OPT_FINAL_NOW | CLI_OPT_TIMEOUT | CLI_OPT_PASSES |
		  CLI_OPT_SMALL | CLI_OPT_SMALL_SECONDS,
	  1, 1, cmd_volume_move, true },
	{ "partition adopt", "UUID|LABEL",
	  "Lets a partition that appeared after the plugin started (served read-only,\n"
	  "no new volumes) receive new volumes: nvmevol mounts it read-write. Refused\n"
	  "while one of its volumes is mounted.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_partition_adopt },
	{ "partition cordon", "UUID|LABEL",
	  "Cordons a partition: it gets no new volumes (placement skips it, and a\n"
	  "Create that names it with partition= is refused); its volumes are served as\n"
	  "before. Kept on the partition itself (nvmevol/cordon.json), so it holds\n"
	  "across restarts and follows the disk. The health policy (warn or enforce)\n"
	  "cordons a partition whose NVMe controller reports a critical warning.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_partition_cordon },
	{ "partition uncordon", "UUID|LABEL",
	  "Lets a cordoned partition receive new volumes again.\n"
	  "\nOptions:\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET, 1, 1, cmd_partition_uncordon },
	{ "partition evacuate", "UUID|LABEL [--to UUID|LABEL] [--wait [--timeout SEC]]",
	  "Moves every volume of a partition, with its snapshots, to other partitions\n"
	  "of this host, keeping its name, options, owner and limits; the partition is\n"
	  "cordoned first. A volume not in use gets its final pass (only what changed\n"
	  "since its last pass, or all of it) and is switched at once: its next Mount\n"
	  "serves it from the new partition. A volume in use gets a live pass (copied\n"
	  "while its containers run; the next one carries only what changed) and is\n"
	  "listed as waiting: stop its containers and run the command again, or use\n"
	  "--wait. Each run goes on from the last pass, across plugin restarts.\n"
	  "\nOptions:\n"
	  "  --to PART        move them there (default: placement's choice for each)\n"
	  "  --wait           run until no volume waits: a check every second, a live\n"
	  "                   pass every 60 s, the final pass as soon as it is unmounted\n"
	  "  --timeout SEC    how long --wait waits (default 600; implies --wait)\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_TO | CLI_OPT_WAIT | CLI_OPT_TIMEOUT, 1, 1, cmd_partition_evacuate },
	{ "state import", "[DIR] [--keep]",
	  "Imports the volume index of an older install's state directory (default\n"
	  "/var/lib/nvmevol, where nvmevol 0.1 kept it) into the running plugin: the\n"
	  "volumes whose partition is missing are listed again (the others come from\n"
	  "their partitions anyway). Mount counts are not imported (an upgrade takes\n"
	  "every bind away). Then renames DIR to DIR.imported-TIME, unless --keep.\n"
	  "\nOptions:\n"
	  "  --keep           leave DIR where it is\n" TARGET_HELP EXIT_HELP,
	  CLI_OPTS_TARGET | CLI_OPT_KEEP, 0, 1, cmd_state_import },
};

static const char *const groups[] = { "volume", "partition", "state" };

static void print_usage(FILE *f)
{
	fprintf(f, "Usage: nvmevol                  run the volume plugin daemon (settings: NVMEVOL_* variables)\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		fprintf(f, "       nvmevol %s %s\n", commands[i].name, commands[i].synopsis);
	fprintf(f, "       nvmevol --version\n"
		   "\n"
		   "Options may come anywhere after the command. 'nvmevol COMMAND --help' explains one.\n"
		   "The admin commands (all but selftest) talk to the running plugin over its root-only\n"
		   "admin socket; they find the plugin through Docker (DOCKER_HOST, or %s).\n" EXIT_HELP,
		"/var/run/docker.sock");
}

static void print_help(const CliCommand *c)
{
	printf("Usage: nvmevol %s %s\n\n%s", c->name, c->synopsis, c->help);
}

static void vreport(const CliArgs *a, const char *fmt, va_list ap) _printf_(2, 0);
static void vreport(const CliArgs *a, const char *fmt, va_list ap)
{
	fprintf(stderr, "nvmevol%s%s: ", a && a->command ? " " : "", a && a->command ? a->command : "");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int cli_usage_error(const CliArgs *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(a, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try 'nvmevol%s%s --help'.\n", a && a->command ? " " : "", a && a->command ? a->command : "");
	return CLI_EXIT_USAGE;
}

int cli_fail(const CliArgs *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(a, fmt, ap);
	va_end(ap);
	return CLI_EXIT_FAILURE;
}

/* Every option of every command: one table for getopt_long, the checks and the values. */
typedef struct CliOptionDef {
	const char *name; /* without "--" */
	unsigned bit;
	size_t value; /* offsetof the const char * in CliArgs that takes the argument; 0: no argument */
} CliOptionDef;

static const CliOptionDef option_defs[] = {
	{ "json", CLI_OPT_JSON, 0 },
	{ "plugin", CLI_OPT_PLUGIN, offsetof(CliArgs, plugin) },
	{ "socket", CLI_OPT_SOCKET, offsetof(CliArgs, socket) },
	{ "inodes", CLI_OPT_INODES, offsetof(CliArgs, inodes) },
	{ "seconds", CLI_OPT_SECONDS, offsetof(CliArgs, seconds) },
	{ "budget-ms", CLI_OPT_BUDGET_MS, offsetof(CliArgs, budget_ms) },
	{ "size", CLI_OPT_SIZE, offsetof(CliArgs, size) },
	{ "iodepth", CLI_OPT_IODEPTH, offsetof(CliArgs, iodepth) },
	{ "keep", CLI_OPT_KEEP, 0 },
	{ "label-prefix", CLI_OPT_LABEL_PREFIX, offsetof(CliArgs, label_prefix) },
	{ "devices", CLI_OPT_DEVICES, offsetof(CliArgs, devices) },
	{ "require-nvme", CLI_OPT_REQUIRE_NVME, offsetof(CliArgs, require_nvme) },
	{ "health", CLI_OPT_HEALTH, offsetof(CliArgs, health) },
	{ "history", CLI_OPT_HISTORY, 0 },
	{ "snapshot", CLI_OPT_SNAPSHOT, offsetof(CliArgs, snapshot) },
	{ "to", CLI_OPT_TO, offsetof(CliArgs, to) },
	{ "from", CLI_OPT_FROM, offsetof(CliArgs, from) },
	{ "compress", CLI_OPT_COMPRESS, offsetof(CliArgs, compress) },
	{ "via", CLI_OPT_VIA, offsetof(CliArgs, via) },
	{ "node", CLI_OPT_NODE, offsetof(CliArgs, node) },
	{ "final-now", CLI_OPT_FINAL_NOW, 0 },
	{ "timeout", CLI_OPT_TIMEOUT, offsetof(CliArgs, timeout) },
	{ "passes", CLI_OPT_PASSES, offsetof(CliArgs, passes) },
	{ "small", CLI_OPT_SMALL, offsetof(CliArgs, small) },
	{ "small-seconds", CLI_OPT_SMALL_SECONDS, offsetof(CliArgs, small_seconds) },
	{ "wait", CLI_OPT_WAIT, 0 },
};

/* One pass over every option of every command; the words that are not options end up in a->args. */
static int parse(int argc, char **argv, CliArgs *a)
{
	struct option options[ELEMENTSOF(option_defs) + 3] = {};
	int c, idx;

	for (size_t i = 0; i < ELEMENTSOF(option_defs); i++)
		options[i] = (struct option){ option_defs[i].name, option_defs[i].value ? required_argument : no_argument,
					      NULL, 0x100 };
	options[ELEMENTSOF(option_defs)] = (struct option){ "help", no_argument, NULL, 'h' };
	options[ELEMENTSOF(option_defs) + 1] = (struct option){ "version", no_argument, NULL, 'V' };

	/* 0 makes glibc start over (and permute: options may follow the arguments). */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "hVo:", options, &idx)) >= 0) {
		if (c == 0x100) {
			a->given |= option_defs[idx].bit;
			if (option_defs[idx].value)
				*(const char **)((char *)a + option_defs[idx].value) = optarg;
		} else if (c == 'h')
			a->help = true;
		else if (c == 'V')
			a->version = true;
		else if (c == 'o') {
			if (a->n_o >= (int)ELEMENTSOF(a->o))
				return cli_usage_error(NULL, "more than %zu -o options", ELEMENTSOF(a->o));
			a->given |= CLI_OPT_O;
			a->o[a->n_o++] = optarg;
		}
		else if (optopt > 0 && optopt < 0x100)
			return cli_usage_error(NULL, "unknown or incomplete option '-%c'", optopt);
		else
			return cli_usage_error(NULL, "unknown or incomplete option '%s'", argv[optind - 1]);
	}
	a->args = argv + optind;
	a->n_args = argc - optind;
	return 0;
}

/* The command whose words start a->args, and how many words it has. */
static const CliCommand *find_command(const CliArgs *a, int *ret_words)
{
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		const char *sp = strchr(commands[i].name, ' ');
		if (!sp && a->n_args >= 1 && streq(a->args[0], commands[i].name)) {
			*ret_words = 1;
			return &commands[i];
		}
		if (sp && a->n_args >= 2 && strlen(a->args[0]) == (size_t)(sp - commands[i].name) &&
		    strncmp(a->args[0], commands[i].name, (size_t)(sp - commands[i].name)) == 0 && streq(a->args[1], sp + 1)) {
			*ret_words = 2;
			return &commands[i];
		}
	}
	return NULL;
}

static int group_usage(const char *group, bool help)
{
	FILE *f = help ? stdout : stderr;

	fprintf(f, "Usage:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strncmp(commands[i].name, group, strlen(group)) == 0 && commands[i].name[strlen(group)] == ' ')
			fprintf(f, "  nvmevol %s %s\n", commands[i].name, commands[i].synopsis);
	fprintf(f, "'nvmevol %s COMMAND --help' explains one.\n", group);
	return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int cli_main(int argc, char **argv)
{
	CliArgs a = { 0 };
	const CliCommand *c;
	int words = 0, n, r;

	r = parse(argc, argv, &a);
	if (r != 0)
		return r;
	c = find_command(&a, &words);
	if (!c) {
		if (a.version && a.n_args == 0) {
			printf("nvmevol %s\n", PROJECT_VERSION);
			return CLI_EXIT_OK;
		}
		if (a.help && a.n_args == 0) {
			print_usage(stdout);
			return CLI_EXIT_OK;
		}
		for (size_t i = 0; i < ELEMENTSOF(groups); i++)
			if (a.n_args >= 1 && streq(a.args[0], groups[i])) {
				if (a.n_args >= 2)
					fprintf(stderr, "nvmevol %s: unknown command '%s'\n", groups[i], a.args[1]);
				return group_usage(groups[i], a.help && a.n_args == 1);
			}
		if (a.n_args == 0)
			return cli_usage_error(NULL, "missing command");
		return cli_usage_error(NULL, "unknown command '%s'", a.args[0]);
	}
	a.command = c->name;
	if (a.help) {
		print_help(c);
		return CLI_EXIT_OK;
	}
	if (a.version)
		return cli_usage_error(&a, "--version takes no command");
	for (size_t i = 0; i < ELEMENTSOF(option_defs); i++)
		if ((a.given & option_defs[i].bit) && !(c->options & option_defs[i].bit))
			return cli_usage_error(&a, "--%s is not an option of this command", option_defs[i].name);
	if ((a.given & CLI_OPT_O) && !(c->options & CLI_OPT_O))
		return cli_usage_error(&a, "-o is not an option of this command");
	if ((a.given & CLI_OPT_PLUGIN) && (a.given & CLI_OPT_SOCKET))
		return cli_usage_error(&a, "--plugin and --socket are exclusive");
	n = a.n_args - words;
	if (n < c->min_args)
		return cli_usage_error(&a, "missing argument: %s", c->synopsis);
	if (c->max_args >= 0 && n > c->max_args)
		return cli_usage_error(&a, "too many arguments (usage: nvmevol %s %s)", c->name, c->synopsis);
	if (c->volume_arg && !volume_name_is_valid(a.args[words]))
		return cli_usage_error(&a, "invalid volume name '%s': 2 to 128 characters from [A-Za-z0-9_.-], starting "
				       "with a letter or digit", a.args[words]);
	return c->run(&a, a.args + words, n);
}
