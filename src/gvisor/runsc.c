/* runsc.c - starting runsc and ending what it started. See runsc.h and gvisor.h. */
#include "gvisor/runsc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "gvisor/gvisor.h"

static const char *const runsc_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};

/* In the child: dies with the thread that forked it (the run's: a server that dies takes its
 * sandboxes along; runsc's gofer and sandbox die with runsc), fds 0-2, then close the rest and
 * exec; never returns. */
static void child_exec(const char *const *argv, int in_fd, int out_fd, int err_fd, const int go[2],
                       pid_t parent)
{
        int null_fd = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY | O_CLOEXEC);
        char c;
        ssize_t n;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(127);
        if (null_fd < 0 || setpgid(0, 0) < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 ||
            dup2(err_fd, 2) < 0)
                _exit(127);
        /* held: one byte says go (the parent has put this process in the run's cgroup, so
         * runsc and all it starts are born there); EOF says give up */
        if (go[0] >= 0) {
                close(go[1]);
                do
                        n = read(go[0], &c, 1);
                while (n < 0 && errno == EINTR);
                if (n != 1)
                        _exit(127);
        }
        closefrom(3);
        execve(argv[0], (char *const *)argv, (char *const *)runsc_env);
        _exit(127);
}

/* Raise both pipes to pipe-max-size (1 MiB by default; pipe(7), F_SETPIPE_SZ): the Sentry
 * writes the program's stdout and stderr to them non-blocking, and a write that finds the
 * pipe full comes back short to the program and the rest is lost (measured, runsc 20240729:
 * os.write(1, 200000 bytes) answered 65536 and no more bytes came). A pipe as large as the
 * kernel allows keeps the program's output whole up to that size between two reads of the
 * warden. Best effort: past the user's pipe quota (pipe-user-pages-soft) it stays 64 KiB. */
static void pipes_widen(int a, int b)
{
        char buf[32] = "";
        long max = 1048576;
        int fd = open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC);

        if (fd >= 0) {
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                if (n > 0) {
                        buf[n] = '\0';
                        max = strtol(buf, NULL, 10);
                }
                close(fd);
        }
        if (max <= 0 || max > (1L << 26))
                max = 1048576;
        (void)fcntl(a, F_SETPIPE_SZ, (int)max);
        (void)fcntl(b, F_SETPIPE_SZ, (int)max);
}

static void close_pair(int p[2])
{
        for (int i = 0; i < 2; i++)
                if (p[i] >= 0)
                        close(p[i]);
        p[0] = p[1] = -1;
}

/* fork @argv with stdin @in_fd (or /dev/null when -1), stdout and stderr to two new pipes (read
 * ends in @ret_out, @ret_err); with @ret_go, held before exec until a byte is written to
 * *@ret_go (the write end). */
static int spawn_piped(const char *const *argv, int in_fd, pid_t *ret_pid, int *ret_out,
                       int *ret_err, int *ret_go, struct sbx_error *err)
{
        int out[2] = {-1, -1}, errp[2] = {-1, -1}, go[2] = {-1, -1};
        pid_t pid;

        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
            (ret_go && pipe2(go, O_CLOEXEC) < 0)) {
                int e = errno;
                close_pair(out);
                close_pair(errp);
                return sbx_fail(err, e, "cannot make runsc's pipes: %s", strerror(e));
        }
        pid_t parent = getpid();
        pid = fork();
        if (pid < 0) {
                int e = errno;
                close_pair(out);
                close_pair(errp);
                close_pair(go);
                return sbx_fail(err, e, "cannot fork for runsc: %s; retry", strerror(e));
        }
        if (pid == 0)
                child_exec(argv, in_fd, out[1], errp[1], go, parent);
        /* the group exists before fork returns here too: a kill right after it reaches the
         * child even before the child ran (setpgid(2): both sides, against the race) */
        (void)setpgid(pid, pid);
        close(out[1]);
        close(errp[1]);
        if (ret_go) {
                close(go[0]);
                *ret_go = go[1];
        }
        pipes_widen(out[0], errp[0]);
        *ret_pid = pid;
        *ret_out = out[0];
        *ret_err = errp[0];
        return 0;
}

int gvisor_runsc_start(struct gvisor_runsc_run *r, struct sbx_error *err)
{
        const char *argv[] = {r->runsc,
                              "--rootless",
                              "--network=none",
                              "--ignore-cgroups",
                              "--oci-seccomp",
                              r->host_fifo ? "--host-fifo=open" : "--host-fifo=none",
                              r->host_uds ? "--host-uds=open" : "--host-uds=none",
                              "--root",
                              r->root,
                              "--log",
                              r->log,
                              "--log-format",
                              "text",
                              "run",
                              "--bundle",
                              r->bundle,
                              r->id,
                              NULL};

        int in[2] = {-1, -1};
        int k;

        if (r->stdin_pipe && pipe2(in, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot make runsc's input pipe: %m");
        k = spawn_piped(argv, in[0], &r->pid, &r->out_fd, &r->err_fd, &r->go_fd, err);
        if (in[0] >= 0)
                close(in[0]);
        if (k < 0 && in[1] >= 0)
                close(in[1]);
        r->in_fd = k == 0 ? in[1] : -1;
        return k;
}

int gvisor_runsc_go(struct gvisor_runsc_run *r, struct sbx_error *err)
{
        ssize_t n;

        if (r->go_fd < 0)
                return sbx_fail(err, EINVAL, "runsc was started already");
        do
                n = write(r->go_fd, "g", 1);
        while (n < 0 && errno == EINTR);
        close(r->go_fd);
        r->go_fd = -1;
        if (n != 1)
                return sbx_fail(err, EPIPE, "cannot let runsc start (its held child is gone)");
        return 0;
}

int gvisor_keeper_start(pid_t *ret, struct sbx_error *err)
{
        pid_t parent = getpid();
        pid_t pid = fork();

        if (pid < 0)
                return sbx_fail(err, errno, "cannot fork the run's cgroup keeper: %m; retry");
        if (pid == 0) {
                /* no fd of the server's (another run's pipe end would keep its EOF away) */
                closefrom(0);
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
                for (;;)
                        pause();
        }
        *ret = pid;
        return 0;
}

/* Does /proc/@pid/cmdline name "--root=@root" or "--root\0@root"? Zombies have none. */
static bool names_root(int proc_fd, const char *pid, const char *root)
{
        char path[64], buf[4096];
        char want[512];
        ssize_t n;

        snprintf(path, sizeof(path), "%s/cmdline", pid);
        n = sbx_read_small_file(proc_fd, path, SBX_READ_PREFIX, buf, sizeof(buf));
        if (n <= 0)
                return false;
        snprintf(want, sizeof(want), "--root=%s", root);
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(buf + i) + 1) {
                if (strcmp(buf + i, want) == 0)
                        return true;
                if (strcmp(buf + i, "--root") == 0 && i + 7 < n && strcmp(buf + i + 7, root) == 0)
                        return true;
        }
        return false;
}

/* Walk /proc; signal (@sig > 0) or count the processes naming @root. */
static int walk_root(const char *root, int sig)
{
        _cleanup_close_ int proc_fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;
        int n = 0;

        if (proc_fd < 0 || !root || !root[0])
                return 0;
        d = fdopendir(fcntl(proc_fd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return 0;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char)de->d_name[0]) ||
                    !names_root(proc_fd, de->d_name, root))
                        continue;
                if (sig > 0)
                        kill((pid_t)atoi(de->d_name), sig);
                n++;
        }
        closedir(d);
        return n;
}

int gvisor_runsc_kill(pid_t pid, const char *root)
{
        if (pid > 0)
                kill(-pid, SIGKILL);
        return walk_root(root, SIGKILL);
}

int gvisor_runsc_left(const char *root)
{
        return walk_root(root, 0);
}

bool gvisor_runsc_fatal(const char *log, char *ret, size_t size)
{
        char buf[16384];
        ssize_t n = sbx_read_small_file(AT_FDCWD, log, SBX_READ_PREFIX, buf, sizeof(buf));
        const char *p, *end;

        if (n <= 0)
                return false;
        p = strstr(buf, "FATAL ERROR: ");
        if (!p)
                return false;
        p += strlen("FATAL ERROR: ");
        end = strchr(p, '\n');
        snprintf(ret, size, "%.*s", (int)(end ? end - p : (ptrdiff_t)strlen(p)), p);
        return true;
}

/* Read @fd into @ret (cut at @size) until EOF or @deadline_ms. Return false past the bound. */
static bool read_bounded(int fd, uint64_t deadline_ms, char *ret, size_t size, size_t *len)
{
        for (;;) {
                uint64_t now = sbx_now_ms();
                struct pollfd p = {.fd = fd, .events = POLLIN};
                char tmp[1024];
                ssize_t n;

                if (now >= deadline_ms)
                        return false;
                if (poll(&p, 1, (int)(deadline_ms - now)) <= 0)
                        continue;
                n = read(fd, tmp, sizeof(tmp));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return true;
                if (*len + 1 < size) {
                        size_t k = (size_t)n < size - 1 - *len ? (size_t)n : size - 1 - *len;
                        memcpy(ret + *len, tmp, k);
                        *len += k;
                        ret[*len] = '\0';
                }
        }
}

int gvisor_runsc_capture(const char *const *argv, unsigned timeout_ms, char *ret, size_t size,
                         struct sbx_error *err)
{
        pid_t pid = -1;
        int out_fd = -1, err_fd = -1, status = 0;
        size_t len = 0;
        bool in_time;
        int r;

        ret[0] = '\0';
        r = spawn_piped(argv, -1, &pid, &out_fd, &err_fd, NULL, err);
        if (r < 0)
                return r;
        /* both streams into one buffer: the child's stderr is read after its stdout's EOF */
        in_time = read_bounded(out_fd, sbx_now_ms() + timeout_ms, ret, size, &len);
        if (in_time)
                in_time = read_bounded(err_fd, sbx_now_ms() + timeout_ms, ret, size, &len);
        close(out_fd);
        close(err_fd);
        if (!in_time)
                kill(-pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (!in_time)
                return sbx_fail(err, ETIMEDOUT, "'%s' did not answer within %u ms", argv[0],
                                timeout_ms);
        return status;
}

int gvisor_parse_version(const char *out, size_t len, char *ret, size_t size)
{
        static const char prefix[] = "runsc version ";
        size_t n = 0;

        if (size == 0 || len < sizeof(prefix) - 1 || memcmp(out, prefix, sizeof(prefix) - 1) != 0)
                return -EINVAL;
        for (size_t i = sizeof(prefix) - 1; i < len && n + 1 < size; i++) {
                char c = out[i];
                if (c == '\n' || c == ' ' || c == '\0')
                        break;
                if (isalnum((unsigned char)c) || strchr(".~+_-", c))
                        ret[n++] = c;
        }
        ret[n] = '\0';
        return n ? 0 : -EINVAL;
}

int gvisor_runsc_facts(struct gvisor_runsc_facts *ret, struct sbx_error *err)
{
        static const char *const dirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin",
                                           "/usr/local/sbin"};
        char out[512] = {0};
        int r;

        *ret = (struct gvisor_runsc_facts){0};
        for (size_t i = 0; i < ELEMENTSOF(dirs) && !ret->found; i++) {
                snprintf(ret->path, sizeof(ret->path), "%s/runsc", dirs[i]);
                ret->found = access(ret->path, X_OK) == 0;
        }
        if (!ret->found) {
                ret->path[0] = '\0';
                return sbx_fail(err, ENOENT,
                                "runsc (gVisor) is not installed: install it from your package "
                                "sources (apt install runsc), then retry");
        }
        const char *argv[] = {ret->path, "--version", NULL};
        r = gvisor_runsc_capture(argv, 5000, out, sizeof(out), err);
        if (r < 0)
                return r;
        if (gvisor_parse_version(out, strlen(out), ret->version, sizeof(ret->version)) < 0)
                return sbx_fail(err, EPROTO,
                                "'%s --version' answered '%.80s', not 'runsc version ...': "
                                "reinstall it (apt install --reinstall runsc)",
                                ret->path, out);
        /* No --platform flag is passed: runsc's default, which was ptrace until gVisor made
         * systrap the default in mid-2023 (gvisor.dev/docs/architecture_guide/platforms/);
         * kvm needs /dev/kvm, root's on most hosts. The version's date tells which. */
        const char *date = ret->version + strcspn(ret->version, "0123456789");
        while (*date && strspn(date, "0123456789") < 8)
                date += strspn(date, "0123456789"), date += strcspn(date, "0123456789");
        bool systrap = strspn(date, "0123456789") >= 8 && strncmp(date, "20230601", 8) >= 0;
        snprintf(ret->platform, sizeof(ret->platform), "%s (runsc's default; no --platform given)",
                 systrap ? "systrap" : "ptrace");
        return 0;
}
