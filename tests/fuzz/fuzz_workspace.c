/* fuzz_workspace.c - libFuzzer target: read_workspace's path resolution (src/workspace), the
 * jail between sandbox-written files and the host. The input is the path an agent asks for
 * (NUL-terminated at its first NUL byte, as the tool layer now refuses any NUL). The
 * workspace holds files that say INSIDE, folders, a fifo, and symlinks pointing outside (to a
 * file that says SECRET), back inside, and in loops. A read that returns SECRET is an escape
 * and is reported as a crash, as is a read that returns something from outside the workspace
 * through any path; crashes, leaks, UB and hangs (a fifo opened for reading) are findings.
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

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "setup/setup.h"
#include "workspace/workspace.h"

static char *scratch;
static char *ws;

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
        return 0;
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
        return 0;
}
