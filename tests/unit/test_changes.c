/* test_changes.c - workspace snapshots and their difference, image sniffing and jailed
 * whole-file reads, on real files in a temp folder (workspace/changes.h). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"
#include "workspace/changes.h"

static void put(const char *dir, const char *rel, const void *data, size_t n)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_msg(fd >= 0, "open %s: %s", p, strerror(errno));
        ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
        close(fd);
}

static void mkd(const char *dir, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
        ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
}

static const unsigned char png_head[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};

START_TEST(diff_lists_new_and_changed_not_untouched)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        struct ws_snapshot before, after;
        struct ws_changes c;
        struct sbx_error err = {0};

        put(d, "keep.txt", "same", 4);
        put(d, "edit.txt", "old", 3);
        mkd(d, "sub");
        put(d, "sub/old.csv", "a,b\n", 4);
        ck_assert_int_eq(ws_snapshot_take(d, 1000, &before, &err), 0);
        ck_assert(!before.incomplete);
        ck_assert_uint_eq(before.n, 3);

        usleep(20000); /* a different mtime even on coarse clocks */
        put(d, "edit.txt", "new!", 4);
        put(d, "sub/plot.png", png_head, sizeof(png_head));
        mkd(d, "sub/deeper");
        put(d, "sub/deeper/n.txt", "x", 1);
        ck_assert_int_eq(ws_snapshot_take(d, 1000, &after, &err), 0);

        ws_changes_diff(&before, &after, 10, &c);
        ck_assert_uint_eq(c.n, 3);
        ck_assert_uint_eq(c.more, 0);
        ck_assert_str_eq(c.v[0].path, "edit.txt");
        ck_assert_int_eq(c.v[0].kind, WS_CHANGED);
        ck_assert_uint_eq(c.v[0].bytes, 4);
        ck_assert_str_eq(c.v[1].path, "sub/deeper/n.txt");
        ck_assert_int_eq(c.v[1].kind, WS_NEW);
        ck_assert_str_eq(c.v[2].path, "sub/plot.png");
        ck_assert_str_eq(ws_change_kind_name(c.v[2].kind), "new");
        ws_changes_done(&c);

        /* the cap: one listed, the rest counted */
        ws_changes_diff(&before, &after, 1, &c);
        ck_assert_uint_eq(c.n, 1);
        ck_assert_uint_eq(c.more, 2);
        ws_changes_done(&c);

        /* control: the same snapshot twice lists nothing */
        ws_changes_diff(&after, &after, 10, &c);
        ck_assert_uint_eq(c.n, 0);
        ck_assert_uint_eq(c.more, 0);
        ws_changes_done(&c);
        ws_snapshot_done(&before);
        ws_snapshot_done(&after);
}
END_TEST

/* A file rewritten with the same size inside the same mtime tick is still seen: its ctime or
 * inode moves (a rename over it makes a new inode). */
START_TEST(diff_sees_same_size_replacement)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *tmp = NULL, *dst = NULL;
        struct ws_snapshot before, after;
        struct ws_changes c;
        struct sbx_error err = {0};

        put(d, "a.txt", "AAAA", 4);
        ck_assert_int_eq(ws_snapshot_take(d, 100, &before, &err), 0);
        put(d, "b.tmp", "BBBB", 4);
        tmp = xasprintf("%s/b.tmp", d);
        dst = xasprintf("%s/a.txt", d);
        ck_assert_int_eq(rename(tmp, dst), 0);
        ck_assert_int_eq(ws_snapshot_take(d, 100, &after, &err), 0);
        ws_changes_diff(&before, &after, 10, &c);
        ck_assert_uint_eq(c.n, 1);
        ck_assert_str_eq(c.v[0].path, "a.txt");
        ck_assert_int_eq(c.v[0].kind, WS_CHANGED);
        ws_changes_done(&c);
        ws_snapshot_done(&before);
        ws_snapshot_done(&after);
}
END_TEST

/* Symlinks are neither listed nor followed: a link to a folder full of files outside the
 * workspace adds nothing, and a link named plot.png is no image. */
START_TEST(snapshot_never_follows_symlinks)
{
        _cleanup_free_ char *d = sbx_test_tmpdir(), *outside = sbx_test_tmpdir();
        _cleanup_free_ char *l1 = NULL, *l2 = NULL, *target = NULL;
        struct ws_snapshot s;
        struct sbx_error err = {0};
        unsigned char *data = NULL;
        size_t len = 0;
        uint64_t size = 0;

        put(outside, "secret.png", png_head, sizeof(png_head));
        put(d, "real.txt", "r", 1);
        l1 = xasprintf("%s/linkdir", d);
        ck_assert_int_eq(symlink(outside, l1), 0);
        l2 = xasprintf("%s/plot.png", d);
        target = xasprintf("%s/secret.png", outside);
        ck_assert_int_eq(symlink(target, l2), 0);

        ck_assert_int_eq(ws_snapshot_take(d, 100, &s, &err), 0);
        ck_assert_uint_eq(s.n, 1);
        ck_assert_str_eq(s.v[0].path, "real.txt");
        ws_snapshot_done(&s);

        ck_assert_int_eq(ws_read_file(d, "plot.png", 1024, &data, &len, &size, &err), -ELOOP);
        ck_assert_ptr_null(data);
        ck_assert_int_eq(ws_read_file(d, "linkdir/secret.png", 1024, &data, &len, &size, &err),
                         -ELOOP);
        /* control: the same bytes as a real file read fine */
        put(d, "ok.png", png_head, sizeof(png_head));
        ck_assert_int_eq(ws_read_file(d, "ok.png", 1024, &data, &len, &size, &err), 0);
        ck_assert_uint_eq(len, sizeof(png_head));
        ck_assert_str_eq(ws_sniff_image(data, len), "image/png");
        free(data);
}
END_TEST

/* The walk's parts on their own: the first folder (a workspace that is a symlink is refused
 * by name, a missing one too), and each kind of entry (a file is listed with its path beneath
 * the workspace, a folder is walked, a fifo is neither listed nor opened). */
START_TEST(snapshot_root_and_entry_kinds)
{
        _cleanup_free_ char *d = sbx_test_tmpdir(), *link = NULL, *fifo = NULL, *gone = NULL;
        struct ws_snapshot s;
        struct sbx_error err = {0};

        mkd(d, "sub");
        put(d, "sub/inner.txt", "i", 1);
        put(d, "top.txt", "t", 1);
        fifo = xasprintf("%s/sub/pipe", d);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        ck_assert_int_eq(ws_snapshot_take(d, 100, &s, &err), 0); /* a fifo open would block */
        ck_assert(!s.incomplete);
        ck_assert_uint_eq(s.n, 2);
        ck_assert_str_eq(s.v[0].path, "sub/inner.txt");
        ck_assert_str_eq(s.v[1].path, "top.txt");
        ck_assert_uint_eq(s.v[1].size, 1);
        ws_snapshot_done(&s);

        link = xasprintf("%s.link", d);
        ck_assert_int_eq(symlink(d, link), 0);
        ck_assert_int_lt(ws_snapshot_take(link, 100, &s, &err), 0);
        ck_assert_msg(strstr(err.msg, "cannot open the workspace folder"), "%s", err.msg);
        ck_assert_uint_eq(s.n, 0);
        gone = xasprintf("%s/nothing-here", d);
        ck_assert_int_eq(ws_snapshot_take(gone, 100, &s, &err), -ENOENT);
        unlink(link);
}
END_TEST

START_TEST(snapshot_caps_entries_and_depth)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *rel = xstrdup("");
        struct ws_snapshot s;
        struct sbx_error err = {0};

        for (int i = 0; i < 20; i++) {
                char name[32];
                snprintf(name, sizeof(name), "f%02d", i);
                put(d, name, "x", 1);
        }
        ck_assert_int_eq(ws_snapshot_take(d, 5, &s, &err), 0);
        ck_assert(s.incomplete);
        ck_assert_ptr_nonnull(strstr(s.why, "more than 5 entries"));
        ck_assert_uint_le(s.n, 5);
        ws_snapshot_done(&s);

        /* 40 nested folders, a file at the bottom: walked to 32 levels, said incomplete,
         * no crash and no recursion on the C stack */
        for (int i = 0; i < 40; i++) {
                char *next = xasprintf("%s%sz", rel, rel[0] ? "/" : "");
                free(rel);
                rel = next;
                mkd(d, rel);
        }
        {
                _cleanup_free_ char *f = xasprintf("%s/bottom.txt", rel);
                put(d, f, "b", 1);
        }
        ck_assert_int_eq(ws_snapshot_take(d, 100000, &s, &err), 0);
        ck_assert(s.incomplete);
        ck_assert_ptr_nonnull(strstr(s.why, "deeper than 32"));
        ws_snapshot_done(&s);
}
END_TEST

START_TEST(read_file_refuses_too_large_and_non_regular)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        struct sbx_error err = {0};
        unsigned char *data = NULL;
        size_t len = 0;
        uint64_t size = 0;

        put(d, "big.bin", "0123456789", 10);
        ck_assert_int_eq(ws_read_file(d, "big.bin", 9, &data, &len, &size, &err), -EFBIG);
        ck_assert_uint_eq(size, 10);
        ck_assert_ptr_null(data);
        ck_assert_int_eq(ws_read_file(d, "big.bin", 10, &data, &len, &size, &err), 0);
        ck_assert_uint_eq(len, 10);
        free(data);
        mkd(d, "dir");
        ck_assert_int_lt(ws_read_file(d, "dir", 100, &data, &len, &size, &err), 0);
        ck_assert_int_lt(ws_read_file(d, "../etc/passwd", 100000, &data, &len, &size, &err), 0);
        ck_assert_int_lt(ws_read_file(d, "/etc/passwd", 100000, &data, &len, &size, &err), 0);
}
END_TEST

START_TEST(sniff_by_bytes_not_name)
{
        static const unsigned char jpg[] = {0xff, 0xd8, 0xff, 0xe0};
        static const unsigned char webp[] = {'R', 'I', 'F', 'F', 1, 2, 3, 4, 'W', 'E', 'B', 'P'};
        static const unsigned char wav[] = {'R', 'I', 'F', 'F', 1, 2, 3, 4, 'W', 'A', 'V', 'E'};

        ck_assert_str_eq(ws_sniff_image(png_head, sizeof(png_head)), "image/png");
        ck_assert_ptr_null(ws_sniff_image(png_head, 7)); /* cut short */
        ck_assert_str_eq(ws_sniff_image(jpg, sizeof(jpg)), "image/jpeg");
        ck_assert_str_eq(ws_sniff_image((const unsigned char *)"GIF89a..", 8), "image/gif");
        ck_assert_str_eq(ws_sniff_image((const unsigned char *)"GIF87a", 6), "image/gif");
        ck_assert_str_eq(ws_sniff_image(webp, sizeof(webp)), "image/webp");
        ck_assert_ptr_null(ws_sniff_image(wav, sizeof(wav)));
        ck_assert_ptr_null(ws_sniff_image((const unsigned char *)"not an image", 12));
        ck_assert_ptr_null(ws_sniff_image((const unsigned char *)"<svg", 4));
}
END_TEST

/* Issue 24: a 1 KB PNG declaring 100000x100000 pixels was attached. The header's size is read
 * for each format; cut or malformed headers say so. */
START_TEST(image_size_from_the_header)
{
        /* PNG: signature, IHDR length 13, "IHDR", 100000 x 100000 */
        unsigned char png[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0,    13,
                                 'I',  'H', 'D', 'R', 0,    0x01, 0x86, 0xa0, 0, 1, 0x86, 0xa0};
        /* JPEG: SOI, APP0 (length 16), SOF0 (length 17): precision 8, 45 high, 123 wide */
        static const unsigned char jpg[] = {0xff, 0xd8, 0xff, 0xe0, 0,  16,   'J', 'F', 'I',  'F',
                                            0,    1,    1,    0,    0,  1,    0,   1,   0,    0,
                                            0xff, 0xff, 0xc0, 0,    17, 8,    0,   45,  0,    123,
                                            3,    1,    0x22, 0,    2,  0x11, 1,   3,   0x11, 1};
        static const unsigned char jpg_no_sof[] = {0xff, 0xd8, 0xff, 0xe0, 0,    16,  'J', 'F',
                                                   'I',  'F',  0,    1,    1,    0,   0,   1,
                                                   0,    1,    0,    0,    0xff, 0xd9};
        /* WebP lossless 1x1 (the smallest WebP), lossy 300x200, extended 4000x9000 */
        static const unsigned char webp_l[] = {
            'R', 'I',  'F', 'F', 0x1a, 0,    0, 0, 'W', 'E',  'B', 'P',  'V',  'P',  '8',
            'L', 0x0d, 0,   0,   0,    0x2f, 0, 0, 0,   0x10, 7,   0x10, 0x11, 0x11, 0x88};
        static const unsigned char webp_vp8[] = {
            'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W',  'E',  'B',  'P',  'V',  'P',  '8',
            ' ', 0,   0,   0,   0, 0, 0, 0, 0x9d, 0x01, 0x2a, 0x2c, 0x01, 0xc8, 0x00};
        static const unsigned char webp_x[] = {'R', 'I', 'F', 'F', 0,    0,    0,  0,    'W',  'E',
                                               'B', 'P', 'V', 'P', '8',  'X',  10, 0,    0,    0,
                                               0,   0,   0,   0,   0x9f, 0x0f, 0,  0x27, 0x23, 0};
        uint32_t w = 0, h = 0;

        ck_assert_int_eq(ws_image_size(png, 24, &w, &h), 0);
        ck_assert_uint_eq(w, 100000);
        ck_assert_uint_eq(h, 100000);
        ck_assert_int_eq(ws_image_size(png, 23, &w, &h), -EBADMSG); /* cut short */
        png[12] = 'X';
        ck_assert_int_eq(ws_image_size(png, 24, &w, &h), -EBADMSG); /* no IHDR first */
        ck_assert_int_eq(ws_image_size((const unsigned char *)"GIF89a\x10\x27\x02\x01", 10, &w, &h),
                         0);
        ck_assert_uint_eq(w, 10000);
        ck_assert_uint_eq(h, 258);
        ck_assert_int_eq(ws_image_size(jpg, sizeof(jpg), &w, &h), 0);
        ck_assert_uint_eq(w, 123);
        ck_assert_uint_eq(h, 45);
        ck_assert_int_eq(ws_image_size(jpg, 26, &w, &h), -EBADMSG);
        ck_assert_int_eq(ws_image_size(jpg_no_sof, sizeof(jpg_no_sof), &w, &h), -EBADMSG);
        ck_assert_int_eq(ws_image_size(webp_l, sizeof(webp_l), &w, &h), 0);
        ck_assert_uint_eq(w, 1);
        ck_assert_uint_eq(h, 1);
        ck_assert_int_eq(ws_image_size(webp_vp8, sizeof(webp_vp8), &w, &h), 0);
        ck_assert_uint_eq(w, 300);
        ck_assert_uint_eq(h, 200);
        ck_assert_int_eq(ws_image_size(webp_x, sizeof(webp_x), &w, &h), 0);
        ck_assert_uint_eq(w, 4000);
        ck_assert_uint_eq(h, 9000);
        ck_assert_int_eq(ws_image_size((const unsigned char *)"not an image at all", 19, &w, &h),
                         -EBADMSG);
}
END_TEST

static Suite *changes_suite(void)
{
        Suite *s = suite_create("changes");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, diff_lists_new_and_changed_not_untouched);
        tcase_add_test(tc, diff_sees_same_size_replacement);
        tcase_add_test(tc, snapshot_never_follows_symlinks);
        tcase_add_test(tc, snapshot_caps_entries_and_depth);
        tcase_add_test(tc, snapshot_root_and_entry_kinds);
        tcase_add_test(tc, read_file_refuses_too_large_and_non_regular);
        tcase_add_test(tc, sniff_by_bytes_not_name);
        tcase_add_test(tc, image_size_from_the_header);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(changes_suite());
}
