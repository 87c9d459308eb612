/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strutil.h"
#include "volume/volume.h"

static Volume *sample(void)
{
	Volume *v = volume_new("pgdata");
	v->state = VOLUME_READY;
	v->opts.has_uid = true;
	v->opts.uid = 999;
	v->opts.size_bytes = 1ULL << 30;
	strcpy(v->partition_uuid, "6e871aec-d456-455d-bdee-3bf772f5d734");
	strcpy(v->partition_label, "nvmevol-fast0");
	v->created_at = 1796000000;
	v->projid = 100001;
	cr_assert_eq(volume_mount_add(v, "id1"), 0);
	cr_assert_eq(volume_mount_add(v, "id1"), 0);
	cr_assert_eq(volume_mount_add(v, "id2"), 0);
	return v;
}

Test(record, round_trip_keeps_every_field)
{
	Volume *v = sample(), *w = NULL;
	char *s = volume_record_dump(v, true), *err = NULL;

	cr_assert_eq(volume_record_parse(s, strlen(s), &w, &err), 0, "%s", err);
	cr_expect_str_eq(w->name, "pgdata");
	cr_expect_eq(w->state, VOLUME_READY);
	cr_expect_eq(w->opts.uid, 999);
	cr_expect_eq(w->opts.size_bytes, 1ULL << 30);
	cr_expect_str_eq(w->partition_uuid, v->partition_uuid);
	cr_expect_eq(w->created_at, v->created_at);
	cr_expect_eq(w->projid, 100001);
	cr_expect_eq(volume_mount_total(w), 3);
	free(s);
	volume_unref(v);
	volume_unref(w);
}

Test(record, index_form_has_no_mount_counts)
{
	Volume *v = sample(), *w = NULL;
	char *s = volume_record_dump(v, false);

	cr_assert_eq(volume_record_parse(s, strlen(s), &w, NULL), 0);
	cr_expect_eq(volume_mount_total(w), 0);
	free(s);
	volume_unref(v);
	volume_unref(w);
}

/* The index holds only the suid/dev grants this host made: an unconfirmed record's grants are left out. */
Test(record, index_form_keeps_only_the_grants_of_this_host)
{
	Volume *v = sample(), *w = NULL;
	char *s;

	v->opts.allow_suid = v->opts.allow_devices = true;
	s = volume_index_dump(v, VOLUME_INDEX_COMMITTED);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, NULL), 0);
	cr_expect(w->opts.allow_suid && w->opts.allow_devices, "a grant of this host is kept");
	cr_expect(volume_grants_confirmed(&v->opts, &w->opts));
	free(s);
	volume_unref(w);

	v->grants_unconfirmed = true;
	s = volume_index_dump(v, VOLUME_INDEX_COMMITTED);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, NULL), 0);
	cr_expect(!w->opts.allow_suid && !w->opts.allow_devices, "an unconfirmed grant reached the index");
	cr_expect_eq(w->opts.uid, 999, "the rest of the options is kept");
	cr_expect(!volume_grants_confirmed(&v->opts, &w->opts));
	free(s);
	volume_unref(w);
	/* The record itself keeps what it says. */
	s = volume_record_dump(v, false);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, NULL), 0);
	cr_expect(w->opts.allow_suid && w->opts.allow_devices);
	free(s);
	volume_unref(w);

	cr_expect(volume_grants_confirmed(&(VolumeOptions){ 0 }, &(VolumeOptions){ 0 }));
	cr_expect(volume_grants_confirmed(&(VolumeOptions){ .allow_suid = true }, &(VolumeOptions){ .allow_suid = true }));
	cr_expect(!volume_grants_confirmed(&(VolumeOptions){ .allow_suid = true, .allow_devices = true },
					   &(VolumeOptions){ .allow_suid = true }));
	volume_unref(v);
}

Test(record, index_state_is_written_only_when_not_committed)
{
	static const VolumeIndexState states[] = { VOLUME_INDEX_COMMITTED, VOLUME_INDEX_PENDING, VOLUME_INDEX_REMOVING };
	Volume *v = sample();

	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		Volume *w = NULL;
		char *s = volume_index_dump(v, states[i]), *err = NULL;

		cr_assert_eq(volume_record_parse(s, strlen(s), &w, &err), 0, "%s", err);
		cr_expect_eq(w->index_state, states[i], "%s", s);
		cr_expect_eq(volume_mount_total(w), 0, "the index form carries counts: %s", s);
		/* Committed is no member at all: what older versions wrote, and read as committed. */
		cr_expect_eq(strstr(s, "index_state") != NULL, states[i] != VOLUME_INDEX_COMMITTED, "%s", s);
		free(s);
		volume_unref(w);
	}
	/* A record never carries one, whatever the volume was parsed from. */
	v->index_state = VOLUME_INDEX_PENDING;
	{
		char *s = volume_record_dump(v, false);
		cr_expect_null(strstr(s, "index_state"), "%s", s);
		free(s);
	}
	volume_unref(v);
}

Test(record, an_unknown_index_state_is_unreadable_not_committed)
{
	Volume *v = sample(), *w = NULL;
	char *s = volume_index_dump(v, VOLUME_INDEX_PENDING), *p, *fixed, *err = NULL;
	size_t n;

	/* Another value, with the CRC made right again: only the value is wrong. */
	p = strstr(s, "\"pending\"");
	cr_assert_not_null(p);
	memcpy(p, "\"pendin?\"", 9);
	n = strstr(s, ",\"crc\":") - s;
	s[n] = '}';
	s[n + 1] = '\0';
	fixed = crc_trailer_append(s);
	free(s);
	cr_assert_not_null(fixed);
	cr_expect_eq(volume_record_parse(fixed, strlen(fixed), &w, &err), -EUCLEAN, "%s", fixed);
	cr_expect(err && strstr(err, "index_state"), "refused for another reason: %s", err);
	free(err);
	free(fixed);
	volume_unref(v);
	volume_unref(w);
}

Test(record, any_flipped_byte_is_detected)
{
	Volume *v = sample();
	char *s = volume_record_dump(v, true);
	size_t n = strlen(s);
	int accepted = 0;

	for (size_t i = 0; i < n; i++) {
		Volume *w = NULL;
		char saved = s[i];
		s[i] = (char)(s[i] ^ 0x01);
		if (volume_record_parse(s, n, &w, NULL) == 0) {
			accepted++;
			volume_unref(w);
		}
		s[i] = saved;
	}
	/* Only flips inside insignificant whitespace could pass; there is none in the compact form. */
	cr_expect_eq(accepted, 0, "%d corrupted variants accepted", accepted);
	free(s);
	volume_unref(v);
}

Test(record, truncated_empty_and_hostile_files_are_refused)
{
	static const char *const bad[] = { "", "null", "[]", "{}", "{\"version\":1}", "{\"version\":2,\"crc\":1}",
					   "{\"version\":1,\"name\":\"../x\",\"crc\":0}" };
	Volume *v = sample();
	char *s = volume_record_dump(v, true);

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		Volume *w = NULL;
		char *err = NULL;
		cr_expect_lt(volume_record_parse(bad[i], strlen(bad[i]), &w, &err), 0, "accepted %s", bad[i]);
		cr_expect_not_null(err);
		free(err);
	}
	for (size_t cut = 0; cut < strlen(s); cut += 7) {
		Volume *w = NULL;
		cr_expect_lt(volume_record_parse(s, cut, &w, NULL), 0, "accepted a record truncated at %zu", cut);
	}
	free(s);
	volume_unref(v);
}

Test(record, mount_counts_are_a_multiset)
{
	Volume *v = volume_new("ab");

	cr_assert_eq(volume_mount_add(v, "x"), 0);
	cr_assert_eq(volume_mount_add(v, "x"), 0);
	cr_expect_eq(volume_mount_drop(v, "x"), 1);
	cr_expect_eq(volume_mount_total(v), 1);
	cr_expect_eq(volume_mount_drop(v, "unknown"), 0);
	cr_expect_eq(volume_mount_drop(v, "x"), 1);
	cr_expect_eq(volume_mount_total(v), 0);
	cr_expect_eq(volume_mount_drop(v, "x"), 0);
	volume_unref(v);
}

Test(record, a_clone_keeps_where_it_came_from)
{
	Volume *v = sample(), *w = NULL;
	char *s, *err = NULL, *p;

	v->clone = calloc(1, sizeof(*v->clone));
	strcpy(v->clone->from, "prod-db");
	v->clone->at = 1796000123;
	v->clone->source_in_use = true;
	v->clone->frozen_ms = 17;
	v->clone->entries = 2345;
	v->clone->bytes = 1ULL << 33;
	s = volume_record_dump(v, false);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, &err), 0, "%s", err);
	cr_assert_not_null(w->clone);
	cr_expect_str_eq(w->clone->from, "prod-db");
	cr_expect_eq(w->clone->at, 1796000123);
	cr_expect(w->clone->source_in_use);
	cr_expect_not(w->clone->copied);
	cr_expect_eq(w->clone->frozen_ms, 17);
	cr_expect_eq(w->clone->entries, 2345);
	cr_expect_eq(w->clone->bytes, 1ULL << 33);
	volume_unref(w);
	w = NULL;
	/* A bad clone section (with a matching CRC) is refused. */
	p = strstr(s, "\"method\":\"reflink\"");
	cr_assert_not_null(p, "%s", s);
	memcpy(p + 10, "relink\"", 7);
	memmove(p + 17, p + 18, strlen(p + 18) + 1);
	v->clone->copied = false;
	{
		char *bad = strdup(s);
		char *crc = strstr(bad, ",\"crc\":");
		*crc = '\0';
		uint32_t c = 0;
		/* Recompute the CRC the way volume.c does: over the body closed by '}'. */
		char *body = NULL;
		cr_assert(asprintf(&body, "%s}", bad) > 0);
		c = crc32c(0, body, strlen(body));
		free(s);
		cr_assert(asprintf(&s, "%s,\"crc\":%u}", bad, c) > 0);
		free(body);
		free(bad);
	}
	cr_expect_lt(volume_record_parse(s, strlen(s), &w, &err), 0, "a bad clone method was accepted: %s", s);
	cr_expect(err && strstr(err, "clone"), "%s", err);
	free(err);
	free(s);
	volume_unref(v);
}

/* The body of @s (a dumped record) with @from replaced by @to, and a CRC that matches it. */
static char *rewrite_record(const char *s, const char *from, const char *to)
{
	char *body = NULL, *out = NULL, *p, *crc, *copy = strdup(s);

	crc = strstr(copy, ",\"crc\":");
	cr_assert_not_null(crc);
	*crc = '\0';
	p = strstr(copy, from);
	cr_assert_not_null(p, "%s not in %s", from, copy);
	*p = '\0';
	/* The CRC covers the body closed by '}' (volume.c). */
	cr_assert(asprintf(&body, "%s%s%s}", copy, to, p + strlen(from)) > 0);
	cr_assert(asprintf(&out, "%.*s,\"crc\":%u}", (int)strlen(body) - 1, body, crc32c(0, body, strlen(body))) > 0);
	free(body);
	free(copy);
	return out;
}

Test(record, a_fence_and_an_evacuation_mark_round_trip_and_bad_ones_are_refused)
{
	Volume *v = sample(), *w = NULL;
	char *s, *bad, *err = NULL;

	v->fence = calloc(1, sizeof(*v->fence));
	strcpy(v->fence->host, "node2.example");
	v->fence->at = 1796000456;
	v->fence->generation = 3;
	v->fence_generation = 3;
	strcpy(v->evacuating_to, "11111111-2222-3333-4444-555555555555");
	s = volume_record_dump(v, false);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, &err), 0, "%s", err);
	cr_assert_not_null(w->fence);
	cr_expect_str_eq(w->fence->host, "node2.example");
	cr_expect_eq(w->fence->at, 1796000456);
	cr_expect_eq(w->fence->generation, 3);
	cr_expect_eq(w->fence_generation, 3);
	cr_expect_str_eq(w->evacuating_to, v->evacuating_to);
	volume_unref(w);
	w = NULL;

	/* A host with a space, a generation 0: refused (with a CRC that matches), never taken for "not fenced". */
	bad = rewrite_record(s, "\"host\":\"node2.example\"", "\"host\":\"node 2\"");
	cr_expect_lt(volume_record_parse(bad, strlen(bad), &w, &err), 0, "%s", bad);
	cr_expect(err && strstr(err, "moved_to"), "%s", err);
	free(err);
	err = NULL;
	free(bad);
	bad = rewrite_record(s, "\"generation\":3", "\"generation\":0");
	cr_expect_lt(volume_record_parse(bad, strlen(bad), &w, &err), 0, "%s", bad);
	free(err);
	free(bad);
	free(s);

	/* Unfenced: no "moved_to", the generation kept. */
	free(v->fence);
	v->fence = NULL;
	v->evacuating_to[0] = '\0';
	s = volume_record_dump(v, false);
	cr_expect_null(strstr(s, "moved_to"), "%s", s);
	cr_expect_null(strstr(s, "evacuating_to"), "%s", s);
	cr_assert_eq(volume_record_parse(s, strlen(s), &w, &err), 0, "%s", err);
	cr_expect_null(w->fence);
	cr_expect_eq(w->fence_generation, 3);
	volume_unref(w);
	free(s);
	volume_unref(v);
}
