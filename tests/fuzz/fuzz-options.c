/* SPDX-License-Identifier: MIT */
/*
 * Fuzzes Docker's create options (-o key=value) and the name validator.
 *
 * Input: either a JSON document (loaded as the daemon loads a request, with
 * JSON_REJECT_DUPLICATES; if it is an object it is the Opts map), or, when it
 * is not a JSON object, lines "key=value" turned into such a map (so the
 * fuzzer reaches the value parsers without having to write JSON). The raw
 * input is also checked with volume_name_is_valid() and mount_id_is_valid().
 *
 * Exercised: volume_options_parse, volume_options_to_json,
 * volume_options_diff, the number/size/mode/decimal parsers behind them, the
 * name and mount-ID validators. Pure code: nothing touches a filesystem.
 *
 * Properties checked beyond "no crash":
 *   - the name validator agrees with ^[A-Za-z0-9][A-Za-z0-9_.-]{1,127}$;
 *   - accepted options survive their canonical form: parse(to_json(o))
 *     succeeds, gives the same canonical form, and diff() finds no
 *     difference. Records store that form, so a violation means a volume
 *     whose record cannot be loaded (or "exists with different options")
 *     after a restart.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "volume/volume-options.h"
#include "volume/volume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz-options: property violated: %s: %s\n", what, detail ? detail : "");
	abort();
}

static bool name_reference(const char *s)
{
	size_t n = strlen(s);

	if (n < 2 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
			return false;
	}
	return true;
}

static json_t *object_from_lines(const char *s)
{
	json_t *o = json_object();
	char *copy = strdup(s), *save = NULL;

	if (!o || !copy) {
		free(copy);
		json_decref(o);
		return NULL;
	}
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		json_t *v;

		if (!eq)
			continue;
		*eq = '\0';
		/* json_string() refuses invalid UTF-8: such values cannot reach the daemon either. */
		v = json_string(eq + 1);
		if (v)
			json_object_set_new(o, line, v);
	}
	free(copy);
	return o;
}

static void check_roundtrip(const VolumeOptions *o)
{
	VolumeOptions again = { 0 };
	char *err = NULL, *diff, *s1, *s2;
	json_t *j1, *j2;

	j1 = volume_options_to_json(o);
	if (!j1)
		return;
	s1 = json_dumps(j1, JSON_COMPACT | JSON_SORT_KEYS);
	if (volume_options_parse(j1, &again, &err) < 0)
		fail("canonical options do not parse again", s1 ? s1 : "?");
	free(err);
	j2 = volume_options_to_json(&again);
	s2 = j2 ? json_dumps(j2, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (j2 && !json_equal(j1, j2)) {
		fprintf(stderr, "first: %s\nagain: %s\n", s1 ? s1 : "?", s2 ? s2 : "?");
		fail("canonical form is not stable", s1);
	}
	diff = volume_options_diff(o, &again);
	if (diff) {
		fprintf(stderr, "diff: %s\n", diff);
		fail("options differ from their canonical form", s1);
	}
	free(s1);
	free(s2);
	json_decref(j1);
	json_decref(j2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	VolumeOptions o = { 0 };
	char *s, *err = NULL;
	json_t *j;

	if (size > 64 * 1024)
		return 0;
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	if (volume_name_is_valid(s) != name_reference(s))
		fail("volume_name_is_valid disagrees with the name pattern", s);
	if (mount_id_is_valid(s) && (strlen(s) == 0 || strlen(s) > MOUNT_ID_MAX))
		fail("mount_id_is_valid accepted a bad length", s);

	j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		j = object_from_lines(s);
	}
	if (j && volume_options_parse(j, &o, &err) == 0)
		check_roundtrip(&o);
	else if (j && !err)
		fail("refused options without a message", s);
	free(err);
	err = NULL;

	/* NULL and JSON null mean "no options". */
	if (volume_options_parse(NULL, &o, &err) < 0)
		fail("NULL options refused", err);

	json_decref(j);
	free(s);
	return 0;
}
