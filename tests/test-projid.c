/* SPDX-License-Identifier: MIT */
/*
 * The project-ID allocator on its own (src/pool/projid.c): what a reserve
 * hands out next to IDs in use and to other reservations, per ID space, and
 * what release and commit give back. The IDs "in use" come from a fake
 * collect; sizelimit.c's real one (registry, volumes/, trash/, quarantine/)
 * is tested through the daemon in the qemu guest (test-daemon-quota.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "pool/projid.h"
#include "pool/quota.h"

#define MIN QUOTA_PROJID_MIN

typedef struct Fake {
	uint32_t ids[16]; /* what the collect reports in use: a volume, a directory on disk */
	size_t n;
	int fail;        /* a collect that could not read everything */
	unsigned calls;
	useconds_t slow; /* widens the window between the scan and the reservation */
} Fake;

static void fake_collect(ProjidSet *used, void *userdata)
{
	Fake *f = userdata;

	f->calls++;
	if (f->slow)
		usleep(f->slow);
	for (size_t i = 0; i < f->n; i++)
		projid_set_add(used, f->ids[i]);
	if (f->fail)
		used->err = f->fail;
}

static ProjidAlloc a;
static int space1, space2; /* two partitions: only their addresses matter */

static void setup(void)
{
	projid_alloc_init(&a);
}

static void teardown(void)
{
	projid_alloc_done(&a);
}

TestSuite(projid, .init = setup, .fini = teardown);

static uint32_t reserve(const void *space, Fake *f)
{
	uint32_t id = 1;

	cr_assert_eq(projid_reserve(&a, space, MIN, fake_collect, f, &id), 0);
	cr_assert_geq(id, MIN);
	return id;
}

Test(projid, skips_the_ids_in_use_on_disk_and_in_the_registry)
{
	Fake f = { .ids = { MIN, MIN + 1, MIN + 3, 0, 7 }, .n = 5 };

	cr_expect_eq(reserve(&space1, &f), MIN + 2);
	cr_expect_eq(f.calls, 1);
}

/* A Create holds its ID through a long clone: a resize meanwhile must not get it. */
Test(projid, a_held_reservation_is_never_handed_out_again)
{
	Fake f = { .n = 0 };
	uint32_t first = reserve(&space1, &f), second = reserve(&space1, &f);

	cr_expect_eq(first, MIN);
	cr_expect_neq(second, first);
	cr_expect_eq(second, MIN + 1);
	cr_expect(projid_is_reserved(&a, &space1, first));
	cr_expect(projid_is_reserved(&a, &space1, second));
}

Test(projid, a_released_id_is_free_again)
{
	Fake f = { .n = 0 };
	uint32_t first = reserve(&space1, &f);

	(void)reserve(&space1, &f);
	projid_release(&a, &space1, first);
	cr_expect_not(projid_is_reserved(&a, &space1, first));
	cr_expect_eq(reserve(&space1, &f), first, "the lowest free ID is the released one");
}

/* Committed: the reservation goes, and the ID stays taken because the collect reports it now. */
Test(projid, a_committed_id_stays_taken_through_what_carries_it)
{
	Fake f = { .n = 0 };
	uint32_t id = reserve(&space1, &f);

	f.ids[f.n++] = id; /* registered, its directory tagged */
	projid_commit(&a, &space1, id);
	cr_expect_not(projid_is_reserved(&a, &space1, id));
	cr_expect_eq(reserve(&space1, &f), id + 1);
	/* Committing or releasing what is not held changes nothing. */
	projid_commit(&a, &space1, id);
	projid_release(&a, &space1, 0);
	cr_expect(projid_is_reserved(&a, &space1, id + 1));
}

Test(projid, spaces_are_separate)
{
	Fake f = { .n = 0 };
	uint32_t id1 = reserve(&space1, &f);

	cr_expect_eq(reserve(&space2, &f), id1, "another partition has its own IDs");
	projid_release(&a, &space2, id1);
	cr_expect(projid_is_reserved(&a, &space1, id1), "a release in one space freed the other's");
	cr_expect_eq(reserve(&space1, &f), id1 + 1);
}

/* An incomplete scan could hand out an ID a directory still carries: nothing is reserved. */
Test(projid, a_collect_that_failed_reserves_nothing)
{
	Fake f = { .fail = -EIO };
	uint32_t id = 1;

	cr_expect_eq(projid_reserve(&a, &space1, MIN, fake_collect, &f, &id), -EIO);
	cr_expect_eq(id, 0);
	f.fail = 0;
	cr_expect_eq(reserve(&space1, &f), MIN, "the failed reserve held an ID");
}

Test(projid, none_left_is_enospc)
{
	Fake f = { .ids = { QUOTA_PROJID_MAX - 1, QUOTA_PROJID_MAX }, .n = 2 };
	uint32_t id = 1;

	cr_expect_eq(projid_reserve(&a, &space1, QUOTA_PROJID_MAX - 2, fake_collect, &f, &id), 0);
	cr_expect_eq(id, QUOTA_PROJID_MAX - 2);
	cr_expect_eq(projid_reserve(&a, &space1, QUOTA_PROJID_MAX - 2, fake_collect, &f, &id), -ENOSPC);
	cr_expect_eq(id, 0);
}

#define N_THREADS 8

typedef struct Racer {
	Fake *f;
	uint32_t id;
	int r;
} Racer;

static void *racer(void *arg)
{
	Racer *x = arg;

	x->r = projid_reserve(&a, &space1, MIN, fake_collect, x->f, &x->id);
	return NULL;
}

/* Scan and reservation are one step under the lock: concurrent callers with a slow scan get distinct IDs. */
Test(projid, concurrent_reserves_get_distinct_ids)
{
	Fake f = { .slow = 20000 };
	pthread_t t[N_THREADS];
	Racer x[N_THREADS];

	for (int i = 0; i < N_THREADS; i++) {
		x[i] = (Racer){ .f = &f };
		cr_assert_eq(pthread_create(&t[i], NULL, racer, &x[i]), 0);
	}
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N_THREADS; i++) {
		cr_expect_eq(x[i].r, 0);
		cr_expect(x[i].id >= MIN && x[i].id < MIN + N_THREADS, "ID %u", x[i].id);
		for (int j = 0; j < i; j++)
			cr_expect_neq(x[i].id, x[j].id, "threads %d and %d both got %u", i, j, x[i].id);
	}
}
