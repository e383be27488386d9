/* test_chase.c - the path resolver beneath a root (common/chase.h) against a real tree on
 * disk, through both of its paths (openat2 and the walker): each refusal next to an accepted
 * control that shows the probe can succeed. And the archive name cleaner. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *top; /* the temp dir: root/ and outside/ */
static int root = -1;

static void put(const char *rel, const char *text)
{
        sbx_test_write_file(top, rel, text);
}

static void dir(const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", top, rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void link_(const char *target, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", top, rel);
        ck_assert_int_eq(symlink(target, p), 0);
}

static void setup(void)
{
        top = sbx_test_tmpdir();
        dir("root");
        dir("outside");
        put("outside/secret", "SECRET");
        put("root/file", "IN file");
        dir("root/dir");
        put("root/dir/f", "IN dir/f");
        link_("dir", "root/lnk_dir");         /* a symlinked dir inside the root */
        link_("../file", "root/dir/up_file"); /* relative, climbs, stays inside */
        link_("..", "root/dir/up");
        link_("../outside", "root/esc"); /* relative, climbs out */
        link_("../../outside/secret", "root/dir/esc2");
        _cleanup_free_ char *abs_secret = xasprintf("%s/outside/secret", top);
        link_(abs_secret, "root/abs"); /* absolute, to the secret */
        _cleanup_free_ char *abs_in = xasprintf("%s/root/file", top);
        link_(abs_in, "root/abs_in"); /* absolute, even to inside: refused */
        link_("loop2", "root/loop1");
        link_("loop1", "root/loop2");
        link_("self", "root/self");
        link_("/proc/self/root", "root/magic");
        _cleanup_free_ char *r = xasprintf("%s/root", top);
        root = open(r, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(root, 0);
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", top);
        if (root >= 0)
                close(root);
        (void)!system(cmd);
        free(top);
}

/* Open @path beneath the test root with @flags; its first bytes into @buf ("" for a dir). */
static int chase_read(const char *path, unsigned flags, char *buf, size_t size)
{
        int fd = sbx_chase(root, path, flags, O_RDONLY, NULL);
        struct stat st;

        buf[0] = '\0';
        if (fd < 0)
                return fd;
        ck_assert_int_eq(fstat(fd, &st), 0);
        if (S_ISREG(st.st_mode)) {
                ssize_t n = read(fd, buf, size - 1);
                ck_assert_int_ge(n, 0);
                buf[n] = '\0';
        }
        ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        return 0;
}

struct chase_case {
        const char *path;
        unsigned flags;
        int want;            /* 0 = opens */
        const char *content; /* with want 0: what the file says (NULL: a directory) */
};

/* Pairs: each refusal follows the control that shows the same probe can open something. */
static const struct chase_case cases[] = {
    /* '..' */
    {"dir/../file", 0, 0, "IN file"},
    {"../outside/secret", 0, -EXDEV, NULL},
    {"dir/../../outside/secret", 0, -EXDEV, NULL},
    {"..", 0, -EXDEV, NULL},
    /* a relative symlink: followed while it stays beneath the root */
    {"dir/up_file", 0, 0, "IN file"},
    {"dir/up/dir/f", 0, 0, "IN dir/f"},
    {"esc/secret", 0, -EXDEV, NULL},
    {"dir/esc2", 0, -EXDEV, NULL},
    /* an absolute symlink, or an absolute path: always an escape */
    {"file", 0, 0, "IN file"},
    {"abs", 0, -EXDEV, NULL},
    {"abs_in", 0, -EXDEV, NULL},
    {"/etc/passwd", 0, -EXDEV, NULL},
    /* a symlinked directory inside the root: allowed */
    {"lnk_dir/f", 0, 0, "IN dir/f"},
    {"lnk_dir/", 0, 0, NULL},
    /* loops */
    {"loop1", 0, -ELOOP, NULL},
    {"self/x", 0, -ELOOP, NULL},
    /* a symlink to a magic link: absolute, so an escape */
    {"magic/etc/hostname", 0, -EXDEV, NULL},
    /* no symlinks at all */
    {"dir/f", SBX_CHASE_NO_SYMLINKS, 0, "IN dir/f"},
    {"lnk_dir/f", SBX_CHASE_NO_SYMLINKS, -ELOOP, NULL},
    {"dir/up_file", SBX_CHASE_NO_SYMLINKS, -ELOOP, NULL},
    /* the rest */
    {".", 0, 0, NULL},
    {"dir//./f", 0, 0, "IN dir/f"},
    {"missing", 0, -ENOENT, NULL},
    {"file/x", 0, -ENOTDIR, NULL},
    {"file/", 0, -ENOTDIR, NULL},
    {"", 0, -ENOENT, NULL},
    /* the components: runs of '/', '.' anywhere, a trailing '/' wants a directory */
    {"./dir///./f", 0, 0, "IN dir/f"},
    {"dir/./", 0, 0, NULL},
    {"dir/f//", 0, -ENOTDIR, NULL},
    {"dir/f/.", 0, -ENOTDIR, NULL},
    {"dir/..//dir/f", 0, 0, "IN dir/f"},
};

static void run_table(unsigned extra)
{
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const struct chase_case *c = &cases[i];
                char buf[64];
                int r = chase_read(c->path, c->flags | extra, buf, sizeof(buf));

                ck_assert_msg(r == c->want, "'%s' (flags %#x): want %d, got %d", c->path,
                              c->flags | extra, c->want, r);
                if (r == 0 && c->content)
                        ck_assert_msg(strcmp(buf, c->content) == 0, "'%s': read '%s'", c->path,
                                      buf);
                ck_assert_msg(!strstr(buf, "SECRET"), "'%s' read the secret", c->path);
        }
}

START_TEST(control_links_lead_outside)
{
        /* Without the resolver the planted links do reach the secret. */
        _cleanup_close_ int a = openat(root, "abs", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int b = openat(root, "esc/secret", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int c = openat(root, "../outside/secret", O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(a, 0);
        ck_assert_int_ge(b, 0);
        ck_assert_int_ge(c, 0);
}
END_TEST

START_TEST(openat2_table)
{
        run_table(0);
}
END_TEST

START_TEST(walker_table)
{
        run_table(SBX_CHASE_WALK);
}
END_TEST

/* /proc/self/root is a magic link: a root at /proc/self must not reach the host's / by it. */
START_TEST(magic_link_refused)
{
        static const unsigned modes[] = {0, SBX_CHASE_WALK};
        _cleanup_close_ int proc = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);

        ck_assert_int_ge(proc, 0);
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                int fd = sbx_chase(proc, "status", modes[i], O_RDONLY, NULL); /* control */
                ck_assert_msg(fd >= 0, "control: %d", fd);
                close(fd);
                ck_assert_int_eq(sbx_chase(proc, "root/etc/hostname", modes[i], O_RDONLY, NULL),
                                 -ELOOP);
                ck_assert_int_eq(sbx_chase(proc, "cwd", modes[i], O_RDONLY, NULL), -ELOOP);
                ck_assert_int_eq(sbx_chase(proc, "fd/0", modes[i], O_RDONLY, NULL), -ELOOP);
        }
        /* control: the same path without the resolver reaches the host's tree */
        _cleanup_close_ int raw = openat(proc, "root/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(raw, 0);
}
END_TEST

START_TEST(nofollow_last)
{
        static const unsigned modes[] = {0, SBX_CHASE_WALK};
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                /* O_PATH | O_NOFOLLOW gives the link itself (openat2(2)), even an escaping one */
                int fd = sbx_chase(root, "abs", modes[i], O_PATH | O_NOFOLLOW, NULL);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(fstat(fd, &st), 0);
                ck_assert(S_ISLNK(st.st_mode));
                close(fd);
                ck_assert_int_eq(sbx_chase(root, "lnk_dir", modes[i], O_RDONLY | O_NOFOLLOW, NULL),
                                 -ELOOP);
                fd = sbx_chase(root, "lnk_dir", modes[i], O_RDONLY, NULL); /* control */
                ck_assert_int_ge(fd, 0);
                close(fd);
                ck_assert_int_eq(sbx_chase(root, "file", modes[i], O_RDONLY | O_CREAT, NULL),
                                 -EINVAL);
        }
}
END_TEST

/* The link budget: a chain of SBX_CHASE_MAX_LINKS symlinks (each to the next, the last to a
 * file) is followed to its end; one more link makes it -ELOOP, on both paths (openat2 counts
 * the same 40, the kernel's MAXSYMLINKS). A followed link's target replaces only its own
 * component: the rest of the path goes on after it. */
START_TEST(walker_link_budget)
{
        static const unsigned modes[] = {0, SBX_CHASE_WALK};
        char buf[64];

        dir("root/chain");
        link_("../dir", "root/chain/l0");
        for (int i = 1; i <= SBX_CHASE_MAX_LINKS; i++) {
                _cleanup_free_ char *target = xasprintf("l%d", i - 1);
                _cleanup_free_ char *rel = xasprintf("root/chain/l%d", i);
                link_(target, rel);
        }
        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                _cleanup_free_ char *ok = xasprintf("chain/l%d/f", SBX_CHASE_MAX_LINKS - 1);
                _cleanup_free_ char *over = xasprintf("chain/l%d/f", SBX_CHASE_MAX_LINKS);
                ck_assert_int_eq(chase_read(ok, modes[i], buf, sizeof(buf)), 0);
                ck_assert_str_eq(buf, "IN dir/f");
                ck_assert_int_eq(chase_read(over, modes[i], buf, sizeof(buf)), -ELOOP);
        }
}
END_TEST

START_TEST(parent_mkdir)
{
        struct sbx_chase_mkdir mk = {.mode = 0700};
        const char *base = NULL;
        struct stat st;
        int fd;

        fd = sbx_chase_parent(root, "new/a/b/name", SBX_CHASE_NO_SYMLINKS | SBX_CHASE_MKDIR, &mk,
                              &base);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(base, "name");
        ck_assert_int_eq(fstatat(root, "new/a/b", &st, AT_SYMLINK_NOFOLLOW), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_int_eq(st.st_mode & 0777, 0700);
        ck_assert_int_eq(mkdirat(fd, base, 0700), 0);
        close(fd);
        ck_assert_int_eq(fstatat(root, "new/a/b/name", &st, AT_SYMLINK_NOFOLLOW), 0);

        /* control: through the symlinked dir without NO_SYMLINKS; refused with it */
        fd = sbx_chase_parent(root, "lnk_dir/x", 0, NULL, &base);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(sbx_chase_parent(root, "lnk_dir/x", SBX_CHASE_NO_SYMLINKS, NULL, &base),
                         -ELOOP);
        ck_assert_int_eq(sbx_chase_parent(root, "lnk_dir/new/x",
                                          SBX_CHASE_NO_SYMLINKS | SBX_CHASE_MKDIR, &mk, &base),
                         -ELOOP);
        /* nothing created outside: the escape is refused before any mkdir */
        ck_assert_int_eq(sbx_chase_parent(root, "esc/made/x", SBX_CHASE_MKDIR, &mk, &base), -EXDEV);
        _cleanup_free_ char *made = xasprintf("%s/outside/made", top);
        ck_assert_int_eq(access(made, F_OK), -1);
        ck_assert_int_eq(sbx_chase_parent(root, "../x", SBX_CHASE_MKDIR, &mk, &base), -EXDEV);
        ck_assert_int_eq(sbx_chase_parent(root, "dir/..", 0, NULL, &base), -EINVAL);
        ck_assert_int_eq(sbx_chase_parent(root, "dir/", 0, NULL, &base), -EINVAL);
        fd = sbx_chase_parent(root, "top", 0, NULL, &base);
        ck_assert_int_ge(fd, 0);
        ck_assert_str_eq(base, "top");
        close(fd);
}
END_TEST

START_TEST(no_fd_leak)
{
        int before = dup(0), after;

        close(before);
        for (int i = 0; i < 200; i++) {
                char buf[16];
                ck_assert_int_eq(
                    chase_read("dir/up/dir/up/lnk_dir/f", SBX_CHASE_WALK, buf, sizeof(buf)), 0);
                ck_assert_int_eq(chase_read("dir/up/esc/secret", SBX_CHASE_WALK, buf, sizeof(buf)),
                                 -EXDEV);
                ck_assert_int_eq(chase_read("dir/loop1", SBX_CHASE_WALK, buf, sizeof(buf)),
                                 -ENOENT);
        }
        after = dup(0);
        close(after);
        ck_assert_int_eq(before, after);
}
END_TEST

START_TEST(path_clean_table)
{
        static const struct {
                const char *in, *out;
        } ok[] = {{"a/b", "a/b"},   {"./a//b/", "a/b"}, {".", ""},       {"./", ""},
                  {"a/./b", "a/b"}, {"...", "..."},     {"a..b", "a..b"}};
        static const char *const bad[] = {"/etc/passwd", "../x", "a/../b", "a/..", "..", "//x"};
        const char *why = NULL;
        char *r = NULL;

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                ck_assert_int_eq(sbx_path_clean(ok[i].in, &r, &why), 0);
                ck_assert_str_eq(r, ok[i].out);
                free(r);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                r = NULL;
                ck_assert_msg(sbx_path_clean(bad[i], &r, &why) == -EPERM, "%s", bad[i]);
                ck_assert_ptr_null(r);
                ck_assert_ptr_nonnull(why);
        }
}
END_TEST

START_TEST(path_lexical_table)
{
        static const struct {
                const char *path, *cwd, *out;
        } t[] = {
            {"/home/u/.ssh/id_ed25519", "/x", "/home/u/.ssh/id_ed25519"},
            {".ssh/id_ed25519", "/home/u", "/home/u/.ssh/id_ed25519"},
            {"../u/./.ssh//id", "/home/u", "/home/u/.ssh/id"},
            {"/home/u/proj/../.ssh", "/", "/home/u/.ssh"},
            {"../../../../etc/shadow", "/a", "/etc/shadow"}, /* never above the root */
            {"", "/a/b", "/a/b"},
            {".", "/", "/"},
            {"x", "not-absolute", "/x"}, /* a cwd that is no absolute path: "/" */
            {"a/", "/", "/a"},
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                char *r = sbx_path_lexical(t[i].path, t[i].cwd);
                ck_assert_msg(strcmp(r, t[i].out) == 0, "'%s' in '%s': '%s', want '%s'", t[i].path,
                              t[i].cwd, r, t[i].out);
                free(r);
        }
}
END_TEST

static Suite *chase_suite(void)
{
        Suite *s = suite_create("chase");
        TCase *tc = tcase_create("beneath");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, control_links_lead_outside);
        tcase_add_test(tc, openat2_table);
        tcase_add_test(tc, walker_table);
        tcase_add_test(tc, magic_link_refused);
        tcase_add_test(tc, nofollow_last);
        tcase_add_test(tc, parent_mkdir);
        tcase_add_test(tc, walker_link_budget);
        tcase_add_test(tc, no_fd_leak);
        suite_add_tcase(s, tc);
        tc = tcase_create("names");
        tcase_add_test(tc, path_clean_table);
        tcase_add_test(tc, path_lexical_table);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(chase_suite());
}
