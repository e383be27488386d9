/* fuzz_workspace.c - libFuzzer target: read_workspace's path resolution (src/workspace), the
 * jail between sandbox-written files and the host. The input is the path an agent asks for
 * (NUL-terminated at its first NUL byte, as the tool layer now refuses any NUL). The
 * workspace holds files that say INSIDE, folders, a fifo, and symlinks pointing outside (to a
 * file that says SECRET), back inside, and in loops. A read that returns SECRET is an escape
 * and is reported as a crash, as is a read that returns something from outside the workspace
 * through any path; crashes, leaks, UB and hangs (a fifo opened for reading) are findings.
 * The same path then goes to the resolver underneath (sbx_chase(), common/chase.h) directly,
 * with and without symlinks allowed, through openat2 and through the walker: the two must
 * agree on whether it opens, and what opens must be inside (a file that says INSIDE, or one
 * of the workspace's own folders).
 * Build: cmake -DVESTIBULE_FUZZ=ON with CC=clang; run: scripts/fuzz.sh workspace SECONDS. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "setup/setup.h"
#include "workspace/workspace.h"

static char *scratch;
static char *ws;
static int ws_fd = -1;
static struct stat ws_dirs[3]; /* ws, ws/d, ws/d/e: the folders a chase may end in */

static void die(const char *what)
{
        fprintf(stderr, "fuzz_workspace: %s: %s\n", what, strerror(errno));
        abort();
}

static void put(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");

        if (!f)
                die(path);
        fputs(text, f);
        fclose(f);
}

/* the scratch folder goes when the fuzzer exits (libFuzzer ends with exit()) */
static void remove_scratch(void)
{
        int fd = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const char *slash = strrchr(scratch, '/');
        int parent;

        if (fd < 0 || !slash)
                return;
        close(fd);
        _cleanup_free_ char *dir = strndup(scratch, (size_t)(slash - scratch));
        parent = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent >= 0) {
                (void)setup_remove_tree(parent, slash + 1);
                close(parent);
        }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        _cleanup_free_ char *secret = NULL, *p = NULL;

        (void)argc;
        (void)argv;
        sbx_log_set_level((enum sbx_log_level) - 1);
        /* $TMPDIR (scripts/fuzz.sh points it at /dev/shm: a tmpfs keeps disk I/O out) */
        scratch =
            xasprintf("%s/vestibule-fuzz-ws-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(scratch))
                die("mkdtemp");
        atexit(remove_scratch);
        ws = xasprintf("%s/ws", scratch);
        secret = xasprintf("%s/secret", scratch);
        put(secret, "SECRET\n");
        if (mkdir(ws, 0755) < 0)
                die("ws");
#define WS(rel) (free(p), p = xasprintf("%s/%s", ws, rel))
        put(WS("a"), "INSIDE a\n");
        if (mkdir(WS("d"), 0755) < 0 || mkdir(WS("d/e"), 0755) < 0)
                die("mkdir");
        put(WS("d/b"), "INSIDE d/b\n");
        put(WS("d/e/c.txt"), "INSIDE d/e/c.txt\n");
        put(WS("nul-a"), "INSIDE nul-a\n");
        if (mkfifo(WS("fifo"), 0644) < 0 || symlink(secret, WS("abs")) < 0 ||
            symlink("../secret", WS("rel")) < 0 || symlink("..", WS("d/up")) < 0 ||
            symlink("a", WS("inside")) < 0 || symlink("loop", WS("loop")) < 0 ||
            symlink("/", WS("d/root")) < 0 || symlink("/proc/self/root", WS("magic")) < 0)
                die("links");
        static const char *const dirs[] = {"", "/d", "/d/e"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *d = xasprintf("%s%s", ws, dirs[i]);
                if (stat(d, &ws_dirs[i]) < 0)
                        die(d);
        }
        ws_fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ws_fd < 0)
                die("ws");
        return 0;
}

/* What sbx_chase() opened (an O_PATH fd) must be inside: read a regular file through a new
 * open of it, compare a folder with the workspace's own. */
static void check_inside(int fd, const char *rel, unsigned flags)
{
        char proc[64], buf[64] = {0};
        struct stat st;

        if (fstat(fd, &st) < 0)
                abort();
        if (S_ISDIR(st.st_mode)) {
                for (size_t i = 0; i < 3; i++)
                        if (st.st_dev == ws_dirs[i].st_dev && st.st_ino == ws_dirs[i].st_ino)
                                return;
                fprintf(stderr, "fuzz_workspace: chase '%s' (%#x) opened a folder outside\n", rel,
                        flags);
                abort();
        }
        if (!S_ISREG(st.st_mode))
                return; /* the fifo (or a symlink itself): inside, never read */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        int rfd = open(proc, O_RDONLY | O_CLOEXEC);
        if (rfd < 0)
                abort();
        ssize_t n = read(rfd, buf, sizeof(buf) - 1);
        close(rfd);
        if (n < 0 || memmem(buf, (size_t)n, "SECRET", 6) || !memmem(buf, (size_t)n, "INSIDE", 6)) {
                fprintf(stderr, "fuzz_workspace: chase '%s' (%#x) read '%s'\n", rel, flags, buf);
                abort();
        }
}

static void chase_both(const char *rel, unsigned flags)
{
        int a = sbx_chase(ws_fd, rel, flags, O_PATH, NULL);
        int b = sbx_chase(ws_fd, rel, flags | SBX_CHASE_WALK, O_PATH, NULL);

        if ((a >= 0) != (b >= 0)) {
                fprintf(stderr, "fuzz_workspace: chase '%s' (%#x): openat2 %d, walker %d\n", rel,
                        flags, a, b);
                abort();
        }
        if (a >= 0) {
                check_inside(a, rel, flags);
                check_inside(b, rel, flags | SBX_CHASE_WALK);
                close(a);
                close(b);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *rel = strndup((const char *)data, size), *out = NULL;
        struct sbx_error err = {0};
        size_t len = 0, total = 0;
        bool binary = false;

        if (!rel)
                abort();
        if (workspace_read(ws, rel, 64, &out, &len, &total, &binary, &err) == 0) {
                if (len > 64 || len > total || memmem(out, len, "SECRET", 6) ||
                    (len >= 6 && !memmem(out, len, "INSIDE", 6))) {
                        fprintf(stderr, "fuzz_workspace: '%s' read %zu bytes from outside\n", rel,
                                len);
                        abort();
                }
        } else if (strnlen(err.msg, sizeof(err.msg)) == sizeof(err.msg)) {
                abort();
        }
        chase_both(rel, 0);
        chase_both(rel, SBX_CHASE_NO_SYMLINKS);
        return 0;
}
