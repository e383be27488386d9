/* test_sha256.c - the one SHA-256 helper (lazy/sha256.h): its streaming and file forms against
 * the known vectors of FIPS 180-4's examples (NIST CSRC, "Example Values": "abc", one million
 * 'a'); test_lazy checks the buffer form against the same table. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "lazy/sha256.h"
#include "testutil.h"

#define ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

#define MILLION_A "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

START_TEST(stream_equals_buffer)
{
        _cleanup_(sbx_sha256_done) struct sbx_sha256 s = {0};
        _cleanup_free_ char *a = xmalloc(1000000);
        char hex[SBX_SHA256_HEX_LEN + 1];
        struct sbx_error err = {0};

        memset(a, 'a', 1000000);
        ck_assert_int_eq(sbx_sha256_init(&s, &err), 0);
        /* uneven pieces, across the 64-byte block boundaries */
        for (size_t off = 0, k = 1; off < 1000000; off += k, k = k * 7 % 9973 + 1)
                ck_assert_int_eq(
                    sbx_sha256_update(&s, a + off, off + k > 1000000 ? 1000000 - off : k), 0);
        ck_assert_int_eq(sbx_sha256_final_hex(&s, hex), 0);
        ck_assert_str_eq(hex, MILLION_A);
        /* started again: what was fed before is gone */
        ck_assert_int_eq(sbx_sha256_init(&s, &err), 0);
        ck_assert_int_eq(sbx_sha256_update(&s, "ab", 2), 0);
        ck_assert_int_eq(sbx_sha256_update(&s, "c", 1), 0);
        ck_assert_int_eq(sbx_sha256_final_hex(&s, hex), 0);
        ck_assert_str_eq(hex, ABC);
        ck_assert_int_eq(sbx_sha256_hex(a, 1000000, hex, &err), 0);
        ck_assert_str_eq(hex, MILLION_A);
}
END_TEST

START_TEST(file_form)
{
        _cleanup_free_ char *dir = sbx_test_tmpdir();
        _cleanup_free_ char *p = xasprintf("%s/a", dir), *missing = xasprintf("%s/nope", dir);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", dir);
        char hex[SBX_SHA256_HEX_LEN + 1];
        struct sbx_error err = {0};
        volatile sig_atomic_t cancel = 0;
        FILE *f = fopen(p, "we");

        ck_assert_ptr_nonnull(f);
        for (int i = 0; i < 1000000; i++)
                fputc('a', f);
        fclose(f);
        ck_assert_int_eq(sbx_sha256_file(p, &cancel, hex, &err), 0); /* control */
        ck_assert_str_eq(hex, MILLION_A);
        cancel = 1;
        ck_assert_int_eq(sbx_sha256_file(p, &cancel, hex, &err), -EINTR);
        ck_assert_str_eq(hex, "");
        ck_assert_int_eq(sbx_sha256_file(missing, NULL, hex, &err), -ENOENT);
        ck_assert_msg(strstr(err.msg, missing), "%s", err.msg);
        (void)!system(cmd);
}
END_TEST

static Suite *sha256_suite(void)
{
        Suite *s = suite_create("sha256");
        TCase *tc = tcase_create("vectors");

        tcase_add_test(tc, stream_equals_buffer);
        tcase_add_test(tc, file_form);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(sha256_suite());
}
