/* test_workspace.c - read_workspace's jail against real files, symlinks and a fifo on disk:
 * both openers (openat2 and the per-component walk) on the same table, the caps, binary
 * detection, and workspace_ensure's modes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"
#include "workspace/workspace-internal.h"
#include "workspace/workspace.h"

static char *top; /* tmp dir holding ws/ and outside/ */
static char *ws;

static void put(const char *rel, const void *data, size_t n)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", top, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_msg(fd >= 0, "create %s: %s", p, strerror(errno));
        ck_assert_int_eq(write(fd, data, n), (ssize_t)n);
        close(fd);
}

static void dir(const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", top, rel);
        ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s: %s", p, strerror(errno));
}

static void link_(const char *target, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", top, rel);
        ck_assert_msg(symlink(target, p) == 0, "symlink %s: %s", p, strerror(errno));
}

static void setup(void)
{
        top = sbx_test_tmpdir();
        ws = xasprintf("%s/ws", top);
        dir("ws");
        dir("outside");
        put("outside/secret.txt", "SECRET\n", 7);
        put("ws/hello.txt", "hello\n", 6);
        dir("ws/sub");
        put("ws/sub/inner.txt", "inner", 5);
        link_("../outside/secret.txt", "ws/link_out_file");
        _cleanup_free_ char *abs = xasprintf("%s/outside/secret.txt", top);
        link_(abs, "ws/link_abs");
        link_("../outside", "ws/link_out_dir");
        link_("hello.txt", "ws/link_in");
        link_("sub", "ws/linkdir_in");
        link_("sub/inner.txt", "ws/sub/link_sibling");
        _cleanup_free_ char *fifo = xasprintf("%s/ws/fifo", top);
        ck_assert_int_eq(mkfifo(fifo, 0644), 0);
        put("ws/bin.dat", "ab\0cd", 5);
        put("ws/latin1.txt", "caf\xe9\n", 5);
        put("ws/empty.txt", "", 0);
        put("ws/cut_char.txt", "ab\xc3", 3); /* the file ends inside a character */
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", top);
        (void)!system(cmd);
        free(ws);
        free(top);
}

static int root_fd(void)
{
        int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

static bool have_openat2(void)
{
        struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
        _cleanup_close_ int r = root_fd();
        long fd = syscall(SYS_openat2, r, "hello.txt", &how, sizeof(how));

        if (fd < 0 && errno == ENOSYS)
                return false;
        ck_assert_int_ge(fd, 0);
        close((int)fd);
        return true;
}

/* workspace_open() through each of sbx_chase()'s two paths */
static int workspace_open_openat2(int root, const char *rel, struct sbx_error *err)
{
        return workspace_open(root, rel, 0, err);
}

static int workspace_open_walk(int root, const char *rel, struct sbx_error *err)
{
        return workspace_open(root, rel, SBX_CHASE_WALK, err);
}

/* --- the same table through both openers ------------------------------------------------- */

struct open_case {
        const char *rel;
        int want; /* 0 = opens, else -errno */
        const char *content;
};

static const struct open_case open_cases[] = {
    {"hello.txt", 0, "hello\n"},
    {"sub/inner.txt", 0, "inner"},
    {"./sub/../hello.txt", 0, "hello\n"},
    {"sub//inner.txt", 0, "inner"},
    {"link_out_file", -ELOOP, NULL},
    {"link_abs", -ELOOP, NULL},
    {"link_out_dir/secret.txt", -ELOOP, NULL},
    {"link_in", -ELOOP, NULL},              /* pointing inside: refused all the same */
    {"linkdir_in/inner.txt", -ELOOP, NULL}, /* intermediate symlink */
    {"sub/link_sibling", -ELOOP, NULL},
    {"../outside/secret.txt", -EXDEV, NULL},
    {"sub/../../outside/secret.txt", -EXDEV, NULL}, /* a/../../x */
    {"missing.txt", -ENOENT, NULL},
    {"sub/missing/x", -ENOENT, NULL},
    {"hello.txt/x", -ENOTDIR, NULL},
};

static void run_open_table(int (*opener)(int, const char *, struct sbx_error *))
{
        _cleanup_close_ int r = root_fd();

        for (size_t i = 0; i < ELEMENTSOF(open_cases); i++) {
                const struct open_case *c = &open_cases[i];
                struct sbx_error err = {0};
                int fd = opener(r, c->rel, &err);

                if (c->want == 0) {
                        char buf[64] = {0};
                        ck_assert_msg(fd >= 0, "'%s': %d %s", c->rel, fd, err.msg);
                        ck_assert_int_ge(read(fd, buf, sizeof(buf) - 1), 0);
                        ck_assert_str_eq(buf, c->content);
                        /* Opened O_CLOEXEC and O_NONBLOCK. */
                        ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
                        ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
                        close(fd);
                } else {
                        ck_assert_msg(fd == c->want, "'%s': want %d, got %d (%s)", c->rel, c->want,
                                      fd, err.msg);
                        ck_assert_msg(strstr(err.msg, c->rel), "'%s': message '%s'", c->rel,
                                      err.msg);
                }
        }
}

START_TEST(control_symlinks_do_lead_outside)
{
        /* Without the jail the planted links do reach the secret: the probes can fail. */
        _cleanup_free_ char *p = xasprintf("%s/link_out_file", ws);
        _cleanup_free_ char *q = xasprintf("%s/link_out_dir/secret.txt", ws);
        char buf[16] = {0};
        int fd = open(p, O_RDONLY | O_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), 7);
        ck_assert_str_eq(buf, "SECRET\n");
        close(fd);
        fd = open(q, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        close(fd);
}
END_TEST

START_TEST(openat2_table)
{
        ck_assert(have_openat2());
        run_open_table(workspace_open_openat2);
}
END_TEST

START_TEST(walk_table)
{
        run_open_table(workspace_open_walk);
}
END_TEST

START_TEST(walk_specifics)
{
        _cleanup_close_ int r = root_fd();
        struct sbx_error err = {0};
        struct stat st;
        int fd;

        ck_assert_int_eq(workspace_open_walk(r, "/etc/passwd", &err), -EXDEV);
        ck_assert_int_eq(workspace_open_walk(r, "..", &err), -EXDEV);
        ck_assert_int_eq(workspace_open_walk(r, ".", &err), -EISDIR);
        ck_assert_int_eq(workspace_open_walk(r, "sub/..", &err), -EISDIR);
        ck_assert_int_eq(workspace_open_walk(r, "linkdir_in/", &err), -ELOOP);
        ck_assert_int_eq(workspace_open_walk(r, "link_out_dir/", &err), -ELOOP);
        fd = workspace_open_walk(r, "sub/", &err);
        ck_assert_msg(fd >= 0, "%s", err.msg);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        close(fd);
        /* The fifo opens at once (O_NONBLOCK); the caller's fstat then refuses it. */
        alarm(5);
        fd = workspace_open_walk(r, "fifo", &err);
        ck_assert_msg(fd >= 0, "%s", err.msg);
        ck_assert_int_eq(fstat(fd, &st), 0);
        ck_assert(S_ISFIFO(st.st_mode));
        close(fd);
        /* No fd leaks from the walk's intermediate directories. */
        int before = dup(0);
        close(before);
        for (int i = 0; i < 50; i++) {
                fd = workspace_open_walk(r, "sub/../sub/./inner.txt", &err);
                ck_assert_int_ge(fd, 0);
                close(fd);
                ck_assert_int_eq(workspace_open_walk(r, "sub/../linkdir_in/inner.txt", &err),
                                 -ELOOP);
        }
        int after = dup(0);
        close(after);
        ck_assert_int_eq(before, after);
}
END_TEST

/* --- workspace_read ---------------------------------------------------------------------- */

static int rd(const char *rel, size_t cap, char **data, size_t *len, size_t *total, bool *binary,
              struct sbx_error *err)
{
        *data = NULL;
        return workspace_read(ws, rel, cap, data, len, total, binary, err);
}

START_TEST(read_text)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;

        ck_assert_int_eq(rd("sub/inner.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert_str_eq(data, "inner");
        ck_assert_uint_eq(len, 5);
        ck_assert_uint_eq(total, 5);
        ck_assert(!binary);
        free(data);
        ck_assert_int_eq(rd("empty.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert_uint_eq(len, 0);
        ck_assert_uint_eq(total, 0);
        ck_assert(!binary);
}
END_TEST

START_TEST(read_refusals_name_path_and_fix)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;

        ck_assert_int_eq(rd("", 100, &data, &len, &total, &binary, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "relative to the workspace"));

        ck_assert_int_eq(rd("/etc/passwd", 100, &data, &len, &total, &binary, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "'/etc/passwd'"));
        ck_assert_ptr_nonnull(strstr(err.msg, "relative to the workspace"));

        ck_assert_int_eq(rd("/workspace/sub/inner.txt", 100, &data, &len, &total, &binary, &err),
                         -EINVAL);
        ck_assert_msg(strstr(err.msg, "use 'sub/inner.txt'"), "%s", err.msg);

        ck_assert_int_eq(
            rd("sub/../../outside/secret.txt", 100, &data, &len, &total, &binary, &err), -EXDEV);
        ck_assert_ptr_nonnull(strstr(err.msg, "outside the workspace"));

        ck_assert_int_eq(rd("link_out_file", 100, &data, &len, &total, &binary, &err), -ELOOP);
        ck_assert_ptr_nonnull(strstr(err.msg, "'link_out_file'"));
        ck_assert_ptr_nonnull(strstr(err.msg, "symlink"));
        ck_assert_ptr_nonnull(strstr(err.msg, "relative to the workspace"));

        ck_assert_int_eq(rd("link_in", 100, &data, &len, &total, &binary, &err), -ELOOP);
        ck_assert_int_eq(rd("link_out_dir/secret.txt", 100, &data, &len, &total, &binary, &err),
                         -ELOOP);
        ck_assert_int_eq(rd("nope.txt", 100, &data, &len, &total, &binary, &err), -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "'nope.txt'"));
        ck_assert_ptr_null(data);
}
END_TEST

START_TEST(read_non_regular)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;
        static const char *const dirs[] = {"sub", "sub/", ".", "sub/.."};

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                ck_assert_msg(rd(dirs[i], 100, &data, &len, &total, &binary, &err) == -EISDIR,
                              "'%s': %s", dirs[i], err.msg);
                ck_assert_ptr_nonnull(strstr(err.msg, "folder"));
        }
        /* A fifo nobody writes to: refused at once, never a hang (alarm kills a hang). */
        alarm(5);
        ck_assert_int_eq(rd("fifo", 100, &data, &len, &total, &binary, &err), -EINVAL);
        ck_assert_msg(strstr(err.msg, "'fifo'") && strstr(err.msg, "fifo (named pipe)"), "%s",
                      err.msg);
        alarm(0);
        ck_assert_ptr_null(data);
}
END_TEST

START_TEST(read_cap_reports_full_size)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;
        _cleanup_free_ char *big = xmalloc(100000);

        for (size_t i = 0; i < 100000; i++)
                big[i] = (char)('a' + i % 26);
        put("ws/big.txt", big, 100000);
        ck_assert_int_eq(rd("big.txt", 1000, &data, &len, &total, &binary, &err), 0);
        ck_assert_uint_eq(len, 1000);
        ck_assert_uint_eq(total, 100000);
        ck_assert(!binary);
        ck_assert_uint_eq(strlen(data), 1000);
        ck_assert_int_eq(memcmp(data, big, 1000), 0);
        free(data);

        /* A cap that cuts a two-byte character keeps whole characters: still text. */
        put("ws/accents.txt", "a\xc3\xa9\xc3\xa9", 5);
        ck_assert_int_eq(rd("accents.txt", 4, &data, &len, &total, &binary, &err), 0);
        ck_assert(!binary);
        ck_assert_uint_eq(len, 3);
        ck_assert_uint_eq(total, 5);
        ck_assert_str_eq(data, "a\xc3\xa9");
}
END_TEST

START_TEST(read_binary)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;

        ck_assert_int_eq(rd("bin.dat", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(binary);
        ck_assert_uint_eq(total, 5);
        free(data);
        ck_assert_int_eq(rd("latin1.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(binary);
        free(data);
        ck_assert_int_eq(rd("cut_char.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(binary);
        free(data);
        /* Valid UTF-8 beyond ASCII is text. */
        put("ws/utf8.txt", "\xe2\x82\xac \xf0\x9f\x98\x80\n", 9);
        ck_assert_int_eq(rd("utf8.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(!binary);
        free(data);
        /* Overlong and surrogate encodings are not. */
        put("ws/overlong.txt", "\xc0\xaf", 2);
        ck_assert_int_eq(rd("overlong.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(binary);
        free(data);
        put("ws/surrogate.txt", "\xed\xa0\x80", 3);
        ck_assert_int_eq(rd("surrogate.txt", 100, &data, &len, &total, &binary, &err), 0);
        ck_assert(binary);
}
END_TEST

START_TEST(read_escapes_path_in_message)
{
        _cleanup_free_ char *data = NULL;
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;

        ck_assert_int_eq(rd("x\x1b]0;pwned\x07", 100, &data, &len, &total, &binary, &err), -ENOENT);
        ck_assert_ptr_null(strchr(err.msg, '\x1b'));
        ck_assert_ptr_null(strchr(err.msg, '\x07'));
        ck_assert_msg(strstr(err.msg, "x\\x1b]0;pwned\\x07"), "%s", err.msg);
}
END_TEST

START_TEST(read_missing_workspace)
{
        _cleanup_free_ char *data = NULL;
        _cleanup_free_ char *gone = xasprintf("%s/never", top);
        struct sbx_error err = {0};
        size_t len, total;
        bool binary;

        ck_assert_int_eq(workspace_read(gone, "a.txt", 10, &data, &len, &total, &binary, &err),
                         -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "does not exist yet"));
}
END_TEST

START_TEST(read_permission_denied)
{
        _cleanup_free_ char *p = xasprintf("%s/sub/inner.txt", ws);
        pid_t pid;
        int status;

        /* Root ignores modes: check as the unprivileged test ids, in a child. */
        ck_assert_int_eq(chmod(top, 0755), 0);
        ck_assert_int_eq(chmod(p, 0600), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                _cleanup_free_ char *data = NULL;
                struct sbx_error err = {0};
                size_t len, total;
                bool binary;

                if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(2000, 2000, 2000) < 0 ||
                                       setresuid(2000, 2000, 2000) < 0))
                        _exit(3);
                if (workspace_read(ws, "sub/inner.txt", 100, &data, &len, &total, &binary, &err) !=
                    -EACCES)
                        _exit(4);
                if (!strstr(err.msg, "'sub/inner.txt'") || !strstr(err.msg, "permission denied"))
                        _exit(5);
                /* Control: a readable file in the same folder is read. */
                if (workspace_read(ws, "hello.txt", 100, &data, &len, &total, &binary, &err) != 0)
                        _exit(6);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}
END_TEST

/* --- workspace_ensure -------------------------------------------------------------------- */

START_TEST(ensure_creates_0700_and_keeps_existing)
{
        struct sbx_error err = {0};
        _cleanup_free_ char *deep = xasprintf("%s/outside/a/b/c", top);
        _cleanup_free_ char *a = xasprintf("%s/outside/a", top);
        _cleanup_free_ char *outside = xasprintf("%s/outside", top);
        struct stat st;

        umask(022);
        ck_assert_int_eq(chmod(outside, 0751), 0);
        ck_assert_msg(workspace_ensure(deep, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(deep, &st), 0);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(stat(a, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(stat(outside, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0751); /* existing: its own mode */
        ck_assert_msg(workspace_ensure(deep, &err) == 0, "%s", err.msg); /* again: fine */

        _cleanup_free_ char *file = xasprintf("%s/outside/secret.txt/x", top);
        ck_assert_int_eq(workspace_ensure(file, &err), -ENOTDIR);
        _cleanup_free_ char *file2 = xasprintf("%s/outside/secret.txt", top);
        ck_assert_int_eq(workspace_ensure(file2, &err), -ENOTDIR);
        ck_assert_ptr_nonnull(strstr(err.msg, "not a folder"));
        ck_assert_int_eq(workspace_ensure("relative/ws", &err), -EINVAL);
}
END_TEST

/* openat2 present on this kernel? (Linux 5.6+; a seccomp profile may hide it.) */
static bool kernel_has_openat2(void)
{
        struct open_how how = {.flags = O_RDONLY | O_CLOEXEC};
        long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));

        if (fd >= 0)
                close((int)fd);
        return !(fd < 0 && errno == ENOSYS);
}

static Suite *workspace_suite(void)
{
        Suite *s = suite_create("workspace");
        TCase *tc;

        tc = tcase_create("openers");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, control_symlinks_do_lead_outside);
        const char *must_run = getenv("SBX_TEST_MUST_RUN");
        if (kernel_has_openat2())
                tcase_add_test(tc, openat2_table);
        else if (must_run && strcmp(must_run, "1") == 0)
                sbx_test_skip(
                    "openat2 is missing on this kernel: only the fallback walk is tested");
        else
                fprintf(stderr, "note: openat2 is missing: only the fallback walk is tested\n");
        tcase_add_test(tc, walk_table);
        tcase_add_test(tc, walk_specifics);
        tcase_set_timeout(tc, 20);
        suite_add_tcase(s, tc);

        tc = tcase_create("read");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, read_text);
        tcase_add_test(tc, read_refusals_name_path_and_fix);
        tcase_add_test(tc, read_non_regular);
        tcase_add_test(tc, read_cap_reports_full_size);
        tcase_add_test(tc, read_binary);
        tcase_add_test(tc, read_escapes_path_in_message);
        tcase_add_test(tc, read_missing_workspace);
        tcase_add_test(tc, read_permission_denied);
        tcase_set_timeout(tc, 20);
        suite_add_tcase(s, tc);

        tc = tcase_create("ensure");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, ensure_creates_0700_and_keeps_existing);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(workspace_suite());
}
