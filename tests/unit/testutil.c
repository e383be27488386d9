/* testutil.c - shared helpers for the Check suites. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void sbx_test_skip(const char *why)
{
        const char *must = getenv("SBX_TEST_MUST_RUN");

        if (must && strcmp(must, "1") == 0) {
                fprintf(stderr, "FAIL: prerequisite missing and SBX_TEST_MUST_RUN=1: %s\n", why);
                exit(1);
        }
        fprintf(stderr, "SKIP: %s\n", why);
        exit(77);
}

int sbx_test_run(Suite *s)
{
        SRunner *sr = srunner_create(s);
        int failed;

        srunner_set_fork_status(sr, CK_FORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? 0 : 1;
}

char *sbx_test_tmpdir(void)
{
        const char *base = getenv("TMPDIR");
        char *t = xasprintf("%s/vestibule-test-XXXXXX", base && *base ? base : "/tmp");

        if (!mkdtemp(t)) {
                perror("mkdtemp");
                abort();
        }
        return t;
}
