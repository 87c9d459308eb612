/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "volume/nodepin.h"

Test(nodepin, unpinned_or_same_node_passes)
{
	char *err = NULL;

	cr_expect_eq(nodepin_check("v", "", "w1", &err), 0);
	cr_expect_eq(nodepin_check("v", NULL, "w1", &err), 0);
	cr_expect_eq(nodepin_check("v", "w1", "w1", &err), 0);
	cr_expect_eq(nodepin_check("v", "swarm-w1", "Swarm-W1", &err), 0, "host names compare without case");
	cr_expect_null(err);
}

Test(nodepin, other_node_is_refused_with_what_to_do)
{
	char *err = NULL;

	cr_assert_eq(nodepin_check("pgdata", "w1", "w2", &err), -EREMOTE);
	cr_assert_not_null(err);
	cr_expect(strstr(err, "volume pgdata is pinned to node w1"), "%s", err);
	cr_expect(strstr(err, "this is node w2"), "%s", err);
	cr_expect(strstr(err, "node.hostname==w1"), "%s", err);
	cr_expect(strstr(err, "docker node update --availability active w1"), "%s", err);
	cr_expect(strstr(err, "run 'nvmevol volume move pgdata --via CMD' on w1, CMD reaching w2"), "%s", err);
	free(err);
	err = NULL;
	cr_expect_eq(nodepin_check("v", "w1", "w10", &err), -EREMOTE, "a prefix is another node");
	free(err);
}

Test(nodepin, here_is_the_uts_node_name)
{
	struct utsname u;
	char buf[65], tiny[2];

	cr_assert_eq(uname(&u), 0);
	cr_assert_eq(nodepin_here(buf, sizeof(buf)), 0);
	cr_expect_str_eq(buf, u.nodename);
	if (strlen(u.nodename) >= sizeof(tiny))
		cr_expect_eq(nodepin_here(tiny, sizeof(tiny)), -ENAMETOOLONG);
}
