/* wsl_home.c - the Windows profile folder for `install-client --wsl`, asked of Windows
 * (wsl_home.h). */
#include "cli/wsl_home.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"

extern char **environ;

#define WSL_ASK_TIMEOUT_MS 10000

/* The absolute path of @prog on PATH, or NULL. */
static char *on_path(const char *prog)
{
        const char *path = config_process_getenv("PATH");
        _cleanup_free_ char *copy = xstrdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
        char *save = NULL;

        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *f = xasprintf("%s/%s", d, prog);

                if (d[0] == '/' && access(f, X_OK) == 0)
                        return TAKE_PTR(f);
        }
        return NULL;
}

/* Run @argv (argv[0] absolute), its stdout into @out (@size bytes, NUL-terminated, trailing
 * CR/LF and blanks cut). 0 when it exited 0 within the time and printed something. */
static int capture(char *const *argv, char *out, size_t size)
{
        posix_spawn_file_actions_t fa;
        int pipefd[2], status = 0, r;
        size_t n = 0;
        pid_t pid;
        uint64_t end = sbx_now_ms() + WSL_ASK_TIMEOUT_MS;

        out[0] = '\0';
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (r != 0) {
                close(pipefd[0]);
                return -r;
        }
        for (;;) {
                struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
                uint64_t now = sbx_now_ms();
                ssize_t got;

                if (now >= end || poll(&p, 1, (int)(end - now)) == 0) {
                        kill(pid, SIGKILL);
                        r = -ETIMEDOUT;
                        break;
                }
                got = read(pipefd[0], out + n, size - 1 - n);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0 || (n += (size_t)got) >= size - 1)
                        break;
        }
        close(pipefd[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        out[n] = '\0';
        while (n > 0 && strchr("\r\n \t", out[n - 1]))
                out[--n] = '\0';
        if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n == 0))
                r = -EIO;
        return r;
}

int wsl_windows_home(char **ret, char *why, size_t why_size)
{
        _cleanup_free_ char *cmd = on_path("cmd.exe"), *wslpath = NULL;
        char win[1024] = "", unix_path[1024] = "";

        if (!cmd) {
                snprintf(why, why_size, "no cmd.exe on PATH (WSL's interop off?)");
                return -ENOENT;
        }
        char *ask[] = {cmd, (char *)"/c", (char *)"echo", (char *)"%USERPROFILE%", NULL};
        /* an unset variable is echoed as written; a profile folder is "X:\..." */
        if (capture(ask, win, sizeof(win)) < 0 || strchr(win, '%') || strchr(win, '\n') ||
            strlen(win) < 3 || win[1] != ':' || win[2] != '\\') {
                snprintf(why, why_size, "'cmd.exe /c echo %%USERPROFILE%%' gave no folder");
                return -EIO;
        }
        wslpath = on_path("wslpath");
        if (!wslpath) {
                snprintf(why, why_size, "no wslpath on PATH to turn '%.200s' into a path here",
                         win);
                return -ENOENT;
        }
        char *conv[] = {wslpath, (char *)"-u", win, NULL};
        if (capture(conv, unix_path, sizeof(unix_path)) < 0 || unix_path[0] != '/' ||
            strchr(unix_path, '\n')) {
                snprintf(why, why_size, "'wslpath -u' did not turn '%.200s' into a path", win);
                return -EIO;
        }
        *ret = xstrdup(unix_path);
        return 0;
}
