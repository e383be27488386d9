/* test_fileio.c - sbx_read_small_file() (common/fileio.h) on real files: procfs, a file longer
 * than the buffer, a symlink under SBX_READ_NOFOLLOW, each next to its control. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *dir;

static void setup(void)
{
        dir = sbx_test_tmpdir();
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", dir);
        (void)!system(cmd);
        free(dir);
}

static void put(const char *rel, const char *text)
{
        sbx_test_write_file(dir, rel, text);
}

START_TEST(reads_proc)
{
        char buf[1024];
        ssize_t n = sbx_read_small_file(AT_FDCWD, "/proc/self/stat", 0, buf, sizeof(buf));
        _cleanup_free_ char *want = xasprintf("%d (", (int)getpid());

        ck_assert_int_gt(n, 0);
        ck_assert_uint_eq(strlen(buf), (size_t)n);
        ck_assert_msg(strncmp(buf, want, strlen(want)) == 0, "%s", buf);
}
END_TEST

START_TEST(cap_and_prefix)
{
        _cleanup_close_ int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char buf[8];

        put("fits", "1234567");    /* 7 bytes: fits 8 with its NUL (control) */
        put("long", "12345678\n"); /* 9 bytes */
        ck_assert_int_eq(sbx_read_small_file(d, "fits", 0, buf, sizeof(buf)), 7);
        ck_assert_str_eq(buf, "1234567");
        ck_assert_int_eq(sbx_read_small_file(d, "long", 0, buf, sizeof(buf)), -EFBIG);
        ck_assert_str_eq(buf, "");
        ck_assert_int_eq(sbx_read_small_file(d, "long", SBX_READ_PREFIX, buf, sizeof(buf)), 7);
        ck_assert_str_eq(buf, "1234567");
        ck_assert_int_eq(sbx_read_small_file(d, "missing", 0, buf, sizeof(buf)), -ENOENT);
        ck_assert_int_eq(sbx_read_small_file(d, "fits", 0, buf, 1), -EINVAL);
}
END_TEST

START_TEST(first_line)
{
        _cleanup_close_ int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char buf[64];

        put("two", "one\ntwo\n");
        ck_assert_int_eq(sbx_read_small_file(d, "two", 0, buf, sizeof(buf)), 8);
        ck_assert_int_eq(sbx_read_small_file(d, "two", SBX_READ_FIRST_LINE, buf, sizeof(buf)), 3);
        ck_assert_str_eq(buf, "one");
}
END_TEST

START_TEST(nofollow)
{
        _cleanup_close_ int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        char buf[64];

        put("target", "T");
        ck_assert_int_eq(symlinkat("target", d, "link"), 0);
        ck_assert_int_eq(mkfifoat(d, "fifo", 0600), 0);
        /* control: followed without the flag */
        ck_assert_int_eq(sbx_read_small_file(d, "link", 0, buf, sizeof(buf)), 1);
        ck_assert_int_eq(sbx_read_small_file(d, "link", SBX_READ_NOFOLLOW, buf, sizeof(buf)),
                         -ELOOP);
        /* a fifo with no writer: O_NONBLOCK opens it and reads end of file at once */
        alarm(5);
        ck_assert_int_eq(sbx_read_small_file(d, "fifo", SBX_READ_NOFOLLOW, buf, sizeof(buf)), 0);
}
END_TEST

START_TEST(dir_names)
{
        _cleanup_close_ int d = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_strv_free_ char **all = NULL, **dotted = NULL;
        char **untouched = (char **)&d;

        put("a", "");
        put(".old-1", "");
        ck_assert_int_eq(mkdirat(d, "sub", 0700), 0);
        ck_assert_int_eq(sbx_dir_names(d, NULL, &all), 3); /* ".", ".." left out */
        ck_assert_ptr_null(all[3]);
        ck_assert_int_eq(sbx_dir_names(d, ".", &dotted), 1);
        ck_assert_str_eq(dotted[0], ".old-1");
        ck_assert_int_eq(sbx_dir_names(-1, NULL, &untouched), -EBADF);
        ck_assert_ptr_eq(untouched, (char **)&d);
}
END_TEST

static Suite *fileio_suite(void)
{
        Suite *s = suite_create("fileio");
        TCase *tc = tcase_create("read_small_file");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, reads_proc);
        tcase_add_test(tc, cap_and_prefix);
        tcase_add_test(tc, first_line);
        tcase_add_test(tc, nofollow);
        tcase_add_test(tc, dir_names);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(fileio_suite());
}
