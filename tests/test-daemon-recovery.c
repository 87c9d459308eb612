/*
 * Start-up recovery against the real daemon on real loop XFS (issue 19 item 1,
 * issue 24 "Quarantine"): only what an index entry proves was never committed
 * (pending) or was committed for removal (removing) is rolled back; a
 * committed volume without its record, and any directory no index entry
 * accounts for, are kept in the quarantine and reported in Status; a lost
 * meta/ is never recreated empty next to the volumes it described.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"
#include "volume/volume.h"

static Testbed tb;
static ClientReply rep;
static char admin_sock[400];
static char out[256 * 1024], err[16 * 1024];
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void setup1(void)
{
	testbed_require_root();
	testbed_setup(&tb, 1, selftest_off);
	snprintf(admin_sock, sizeof(admin_sock), "%s/nvmevol-admin.sock", tb.dir);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(recovery, .init = setup1, .fini = teardown, .timeout = 120);

/* ---- helpers ---- */

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void tree_path(const char *rest, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/nvmevol/%s", tb.parts_root, tb.parts[0].uuid, rest);
}

static void index_path(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/index/%s.json", tb.state, name);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

/* The file's text (malloc'd), or NULL if it cannot be read. */
static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	if (!f)
		return NULL;
	if (getdelim(&buf, &len, '\0', f) < 0) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/* The name of the one entry of quarantine/ that starts with "@name.", in @buf; false if none. */
static bool quarantined_as(const char *name, char *buf, size_t len)
{
	char q[700];
	struct dirent *de;
	DIR *d;
	bool found = false;

	tree_path("quarantine", q, sizeof(q));
	d = opendir(q);
	cr_assert_not_null(d, "%s: %s", q, strerror(errno));
	while (!found && (de = readdir(d)))
		if (strncmp(de->d_name, name, strlen(name)) == 0 && de->d_name[strlen(name)] == '.') {
			snprintf(buf, len, "%s", de->d_name);
			found = true;
		}
	closedir(d);
	return found;
}

static void create_with_data(const char *name, const char *data)
{
	char dir[700], file[800];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\",\"Opts\":{\"partition\":\"%s\"}}", name,
			     tb.parts[0].label), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, name, dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/data", dir);
	write_text(file, data);
}

static void assert_data(const char *dir, const char *data)
{
	char file[900];
	char *text;

	snprintf(file, sizeof(file), "%s/data", dir);
	text = read_text(file);
	cr_assert_not_null(text, "the data of %s is gone: %s", dir, strerror(errno));
	cr_assert_str_eq(text, data);
	free(text);
}

static void start(void)
{
	cr_assert_eq(testbed_start(&tb, selftest_off), 0, "daemon did not start: %s", testbed_log_text(&tb));
}

/* Rewrites @name's index entry as a crash at that point would leave it (the new format). */
static void set_index_state(const char *name, VolumeIndexState state)
{
	char path[500], *text, *dumped;
	Volume *v = NULL;

	index_path(name, path, sizeof(path));
	text = read_text(path);
	cr_assert_not_null(text, "%s", path);
	cr_assert_eq(volume_record_parse(text, strlen(text), &v, NULL), 0, "%s", text);
	dumped = volume_index_dump(v, state);
	cr_assert_not_null(dumped);
	write_text(path, dumped);
	free(dumped);
	free(text);
	volume_unref(v);
}

static void unlink_record(const char *name)
{
	char meta[700], rest[300];

	snprintf(rest, sizeof(rest), "meta/%s.json", name);
	tree_path(rest, meta, sizeof(meta));
	cr_assert_eq(unlink(meta), 0, "%s: %s", meta, strerror(errno));
}

/* `nvmevol status [--json]` of this testbed's daemon: its output in out[]. */
static void run_status(bool json)
{
	const char *bin = getenv("NVMEVOL_BINARY") ? getenv("NVMEVOL_BINARY") : "build/src/nvmevol";
	const char *argv[] = { bin, "status", "--socket", admin_sock, json ? "--json" : NULL, NULL };

	cr_assert_eq(loopxfs_spawn_capture(argv, out, sizeof(out), err, sizeof(err)), 0, "%s", err);
}

/* `nvmevol status --json`, parsed (the caller's). */
static json_t *admin_status(void)
{
	json_error_t e;
	json_t *j;

	run_status(true);
	j = json_loads(out, 0, &e);
	cr_assert_not_null(j, "status is not JSON (%s): %s", e.text, out);
	return j;
}

static json_t *status_partition(json_t *status)
{
	json_t *parts = json_object_get(status, "partitions"), *p;
	size_t i;

	json_array_foreach(parts, i, p)
		if (json_is_string(json_object_get(p, "uuid")) &&
		    strcmp(json_string_value(json_object_get(p, "uuid")), tb.parts[0].uuid) == 0)
			return p;
	cr_assert_fail("partition %s not in status: %s", tb.parts[0].uuid, out);
	return NULL;
}

/* Status names quarantined directory @qname (from volume dir @was) and says how to restore it. */
static void assert_status_quarantine(const char *qname, const char *was)
{
	json_t *st = admin_status(), *q = json_object_get(status_partition(st), "quarantine"), *e;
	bool found = false;
	size_t i;

	cr_assert_not_null(q, "Status has no quarantine entry: %s", out);
	cr_assert_geq(json_integer_value(json_object_get(q, "count")), 1, "%s", out);
	cr_assert(json_is_string(json_object_get(q, "how_to_restore")) &&
			  strstr(json_string_value(json_object_get(q, "how_to_restore")), "nvmevol/volumes/NAME"),
		  "%s", out);
	json_array_foreach(json_object_get(q, "entries"), i, e)
		if (strcmp(json_string_value(json_object_get(e, "entry")), qname) == 0) {
			cr_assert_str_eq(json_string_value(json_object_get(e, "was")), was);
			found = true;
		}
	cr_assert(found, "%s not listed: %s", qname, out);
	json_decref(st);
	/* And the table an admin reads. */
	run_status(false);
	cr_assert(strstr(out, "in quarantine: ") && strstr(out, "nvmevol/volumes/NAME"), "%s", out);
}

static const char *status_str(const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), key));
}

/* ---- (a) the reviewers' reproduction: nvmevol/meta renamed away ---- */

Test(recovery, lost_meta_dir_keeps_the_data_and_refuses_the_partition)
{
	char meta[700], moved[700], dir[700], trash[700];
	const char *problem;
	json_t *st;

	create_with_data("keep", "committed years ago");
	testbed_stop(&tb, SIGTERM);
	tree_path("meta", meta, sizeof(meta));
	tree_path("meta.moved", moved, sizeof(moved));
	cr_assert_eq(rename(meta, moved), 0, "%s", strerror(errno));
	start();

	testbed_volume_dir(&tb, 0, "keep", dir, sizeof(dir));
	assert_data(dir, "committed years ago");
	cr_assert(!exists(meta), "an empty nvmevol/meta was made next to the volumes it lost");
	tree_path("trash", trash, sizeof(trash));
	cr_assert_eq(testbed_count_entries(trash), 0, "something went to the trash");
	/* The volume is known (Docker keeps it) but not served; its partition says what happened. */
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"keep\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "partition-missing");
	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"keep\",\"ID\":\"m\"}"), 0, "a volume without its record was served");
	st = admin_status();
	problem = json_string_value(json_object_get(status_partition(st), "problem"));
	cr_assert(problem && strstr(problem, "nvmevol/meta is missing") && strstr(problem, "Nothing was changed"), "%s", out);
	json_decref(st);
	cr_assert_neq(tb_call(&tb, "Create", &rep, "{\"Name\":\"new\",\"Opts\":{\"partition\":\"%s\"}}", tb.parts[0].label),
		      0, "a refused partition got a new volume");

	/* The admin puts meta/ back: everything is as it was. */
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(rename(moved, meta), 0, "%s", strerror(errno));
	start();
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"keep\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"keep\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	assert_data(dir, "committed years ago");
}

/* ---- (b) a committed index entry, the record lost ---- */

Test(recovery, committed_volume_without_its_record_is_quarantined_not_deleted)
{
	char dir[700], qname[300], qdir[1100], trash[700];
	char *log;

	create_with_data("lost", "precious");
	testbed_stop(&tb, SIGTERM);
	unlink_record("lost");
	start();

	testbed_volume_dir(&tb, 0, "lost", dir, sizeof(dir));
	cr_assert(!exists(dir), "a directory without a record is served from volumes/");
	cr_assert(quarantined_as("lost", qname, sizeof(qname)), "not quarantined: %s", testbed_log_text(&tb));
	tree_path("quarantine", qdir, sizeof(qdir));
	strcat(qdir, "/");
	strcat(qdir, qname);
	assert_data(qdir, "precious");
	tree_path("trash", trash, sizeof(trash));
	cr_assert_eq(testbed_count_entries(trash), 0, "a committed volume's directory went to the trash");
	log = testbed_log_text(&tb);
	cr_assert(strstr(log, "its data was NOT deleted"), "no loud error: %s", log);
	free(log);
	assert_status_quarantine(qname, "lost");
	/* Kept at the next start too: the quarantine is the admin's. */
	testbed_stop(&tb, SIGTERM);
	start();
	assert_data(qdir, "precious");
}

/* ---- (c) what start-up can prove: a pending create, a remove past its commit point ---- */

Test(recovery, pending_create_and_removing_remove_are_rolled_back)
{
	char dir[700], qdir[700], idx[500];

	create_with_data("half", "clone filled me before the record");
	create_with_data("dying", "the remove deleted my record");
	testbed_stop(&tb, SIGKILL);
	/* A Create that wrote its entry (pending) and its directory, but not its record. */
	set_index_state("half", VOLUME_INDEX_PENDING);
	unlink_record("half");
	/* A Remove that marked its entry and deleted the record (its commit point), then crashed. */
	set_index_state("dying", VOLUME_INDEX_REMOVING);
	unlink_record("dying");
	start();

	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"half\"}"), 0, "half-created volume visible");
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"dying\"}"), 0, "half-removed volume visible");
	testbed_volume_dir(&tb, 0, "half", dir, sizeof(dir));
	cr_assert(!exists(dir));
	testbed_volume_dir(&tb, 0, "dying", dir, sizeof(dir));
	cr_assert(!exists(dir));
	index_path("half", idx, sizeof(idx));
	cr_assert(!exists(idx));
	index_path("dying", idx, sizeof(idx));
	cr_assert(!exists(idx));
	tree_path("quarantine", qdir, sizeof(qdir));
	cr_assert_eq(testbed_count_entries(qdir), 0, "what was provably uncommitted was quarantined");
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"half\"}"), 0, "%s", client_err(&rep));
}

/* A crash on the record side of the commit point: the volume stands, and its entry is settled. */
Test(recovery, pending_entry_with_a_record_is_marked_committed)
{
	char dir[700], idx[500], qname[300];
	char *text;

	create_with_data("made", "committed a moment before the crash");
	create_with_data("kept", "its remove failed before the record");
	testbed_stop(&tb, SIGKILL);
	set_index_state("made", VOLUME_INDEX_PENDING);
	set_index_state("kept", VOLUME_INDEX_REMOVING);
	start();

	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"made\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"kept\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "ready");
	index_path("made", idx, sizeof(idx));
	text = read_text(idx);
	cr_assert(text && !strstr(text, "index_state"), "the entry still says it is not committed: %s", text);
	free(text);
	index_path("kept", idx, sizeof(idx));
	text = read_text(idx);
	cr_assert(text && !strstr(text, "index_state"), "the entry still says it is being removed: %s", text);
	free(text);

	/* So a later loss of the record is a loss, not an uncommitted create. */
	testbed_stop(&tb, SIGTERM);
	unlink_record("made");
	start();
	testbed_volume_dir(&tb, 0, "made", dir, sizeof(dir));
	cr_assert(!exists(dir));
	cr_assert(quarantined_as("made", qname, sizeof(qname)), "committed data not quarantined");
}

/* ---- (d) issue 24: orphans and unreadable records ---- */

Test(recovery, orphan_and_unreadable_record_keep_their_data_and_are_reported)
{
	char dir[700], meta[700], qname[300], qdir[1100];
	json_t *st, *v;
	size_t i;
	bool listed = false;

	create_with_data("bad", "behind a broken record");
	testbed_stop(&tb, SIGTERM);
	/* A directory copied there by hand: no record, no index entry. */
	testbed_volume_dir(&tb, 0, "stray", dir, sizeof(dir));
	cr_assert_eq(mkdir(dir, 0755), 0, "%s", strerror(errno));
	strcat(dir, "/data");
	write_text(dir, "not nvmevol's");
	tree_path("meta/bad.json", meta, sizeof(meta));
	write_text(meta, "{\"version\":1,\"name\":\"bad\",garbage");
	start();

	/* The orphan: in the quarantine, with its data, in Status. */
	cr_assert(quarantined_as("stray", qname, sizeof(qname)), "orphan not quarantined");
	tree_path("quarantine", qdir, sizeof(qdir));
	strcat(qdir, "/");
	strcat(qdir, qname);
	assert_data(qdir, "not nvmevol's");
	assert_status_quarantine(qname, "stray");

	/* The unreadable record: left in place (it is still the volume's), listed, not mounted. */
	testbed_volume_dir(&tb, 0, "bad", dir, sizeof(dir));
	assert_data(dir, "behind a broken record");
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"bad\"}"), 0, "%s", client_err(&rep));
	cr_assert_str_eq(status_str("state"), "record-unreadable");
	st = admin_status();
	json_array_foreach(json_object_get(st, "volumes"), i, v)
		if (strcmp(json_string_value(json_object_get(v, "Name")), "bad") == 0) {
			cr_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "Status"), "state")),
					 "record-unreadable");
			listed = true;
		}
	cr_assert(listed, "%s", out);
	json_decref(st);
}
