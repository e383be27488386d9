/* testutil.h - shared helpers for the Check suites. */
#pragma once

#include <check.h>

/**
 * sbx_test_skip() - a prerequisite is missing (no user namespaces, no Docker...): print @why
 * and exit 77 (CTest's SKIP_RETURN_CODE), or fail with exit 1 when SBX_TEST_MUST_RUN=1 (CI).
 */
void sbx_test_skip(const char *why) __attribute__((noreturn));

/** sbx_test_run() - run @s with CK_FORK on; return the process exit code (0 = all passed). */
int sbx_test_run(Suite *s);

/** sbx_test_tmpdir() - a new private temp directory (mkdtemp under $TMPDIR or /tmp). Caller frees.
 */
char *sbx_test_tmpdir(void);
