/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume send` and `volume receive`, and the two passes they are
 * made of, for commands built on them (a move: a send pass here piped into a
 * receive pass on another host).
 */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "cli/cli.h"

typedef struct SendPassResult {
	char snapshot_id[33], base_id[33];
	uint64_t entries, data_bytes, records, bytes;
} SendPassResult;

typedef struct ReceivePassResult {
	char snapshot[129], snapshot_id[33];
	bool incremental;
	uint64_t records, data_bytes, bytes;
} ReceivePassResult;

/*
 * One send pass: snapshot @snap of volume @name (the changes since @from, or
 * all of it when @from is NULL) as a stream to @out. Errors are printed;
 * returns the CLI exit status. The snapshots' binds are always closed.
 */
int send_pass(const CliArgs *a, const char *name, const char *snap, const char *from, int out, SendPassResult *ret);

/*
 * One receive pass: the stream on @in into volume @name (a full stream
 * creates it with the stream's options overridden by @opts, an object of
 * strings; an incremental one replaces its state), committed only whole.
 */
int receive_pass(const CliArgs *a, const char *name, const json_t *opts, int in, ReceivePassResult *ret);

int cmd_volume_send(const CliArgs *a, char **args, int n);
int cmd_volume_receive(const CliArgs *a, char **args, int n);
