/* cells.c - the container backend's sessions (SANDBOX_MODE_CELLS, src/run/sandbox.h): one
 * container per session, created and checked like a one-shot run's (backend.c) but running the
 * language's runner (src/run/runners/, the same ones as native) under the container's init,
 * kept running between calls. The runner's fds 4 (cells in), 5 (status records out), 1 and 2
 * (the user's stdout and stderr) are FIFOs the server makes in the code folder that the
 * container sees at /sandbox; a bash wrapper opens them before it execs the runner. Because
 * every byte travels through a pipe of this kernel, the runner's flush of stdout and stderr
 * before its status record orders them as on native: a cell's output is in the pipes when its
 * record arrives. An engine that does not see our files (the volume path) carries the same fds
 * over one hijacked attach connection instead (cells_attach.c, cellstream.c).
 * See docs/design/sessions.md, "The container backend". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "engine/cells.h"

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/container.h"
#include "engine/cells_attach.h"
#include "engine/ctrcg.h"
#include "engine/handin.h"
#include "run/runners.h"
#include "run/sandbox.h"
#include "run/warden.h"

/* The runner's "ready" record must come within this long after the container's start (a cold
 * node under CI load takes seconds). */
#define CELLS_READY_MS 30000
/* A cell must be handed in within this long (the runner reads it at once between cells). */
#define CELLS_WRITE_MS 5000
/* A runner that died: how long the engine may take to say the container was OOM-killed. */
#define CELLS_OOM_WAIT_MS 1000
/* The in-container backstop fires this long after the longest a session may go without a cell
 * (its idle time plus the longest call): never while the server is there to end it. */
#define CELLS_BACKSTOP_MARGIN_S 10

enum { F_CELLS, F_STATUS, F_OUT, F_ERR, F_LIFE, F_N };
static const char *const fifo_names[F_N] = {"cells", "status", "out", "err", "life"};

/* The container's command, and its pid 1 (no init process: the kernel delivers no signal to a
 * pid namespace's init from inside unless it set a handler, and never SIGKILL or SIGSTOP, so the
 * code can neither kill nor stop it; and when it exits, the kernel kills every other process of
 * the namespace, pid_namespaces(7)). It opens the FIFOs, starts the runner ("$@") in a process
 * group of its own (set -m) with the runner's fds, and stays as the session's supervisor:
 *  - the lifeline: "life", which the runner's uid may read but not write (engine_cells_new()),
 *    so only the server holds a write end; when the server dies (even SIGKILL) the read ends;
 *  - the backstop: the server writes a line at each cell's start; with none for $1 seconds
 *    (the session's idle time, the longest call, and a margin) it ends too, whoever holds the
 *    FIFO open. The deadline is absolute ($SECONDS): a signal the code sends cannot stretch it;
 *  - SIGINT (the engine's kill API when the runner is not seen from the host) goes on to the
 *    runner's process group; the runner's end (SIGCHLD) ends the wait too.
 * Then it kills every other process (kill(2) with -1 spares itself) and exits, which ends the
 * container. A bash pid 1 reaps adopted children as it waits (waitpid(-1), bash's jobs.c). */
static const char cells_wrapper[] =
    "exec 4</sandbox/cells 5>/sandbox/status 1>/sandbox/out 2>/sandbox/err 3</sandbox/life "
    "|| exit 127; "
    "t=$1; L=$2; shift 2; set -m; \"$@\" 3<&- & r=$!; exec 4<&- 5>&- >/dev/null 2>&1 </dev/null; "
    "trap 'kill -INT -- -$r' INT; trap : CHLD; end=$((SECONDS + t)); h=; lf=; "
    "while [ $SECONDS -lt $end ] && kill -0 $r; do "
    "if [ -n \"$lf\" ] && read -t 0 <&6; then break; fi; "
    "p=; read -r -t 1 p <&3; s=$?; h=$h$p; "
    "if [ $s = 0 ]; then case $h in "
    "life\\ /tmp/.vestibule-life.*/l) [ -z \"$lf\" ] && [ -n \"$L\" ] && exec 6<\"${h#life }\" && "
    "[ \"$(stat -L -c %u /proc/1/fd/6)\" = \"$L\" ] || break; lf=1;; esac; "
    "h=; end=$((SECONDS + t)); elif [ $s -le 128 ]; then break; fi; "
    "done; kill -KILL -1; exit 0";

/* The supervisor on the volume path (no folder the engine and we share): the container's stdin
 * (the hijacked attach connection, cells_attach.c) is its fd 3 and no one else's; the runner
 * gets two FIFOs in the container's own /tmp (removed once both ends are open) as fds 4 and 5,
 * and the container's stdout and stderr as 1 and 2, as on a local engine. It reads each cell's
 * header "<seq> <length>" from stdin and copies exactly that many bytes to the runner (dd
 * counts bytes, so NULs and any byte pass); a forwarder copies each status record the runner
 * writes on fd 5 to stderr, then to stdout, after the session's mark ($2): the runner flushed
 * the cell's output into the same two pipes before it wrote the record, so both streams carry
 * every byte of the cell before its record (the server hands a record on once both carried it,
 * cellstream.c). Lifelines, checked at least once a second (a 1 s read of stdin keeps what it
 * read of a header, bash's read -t):
 *  - EOF on stdin: the engine closes it when the server's connection ends (StdinOnce);
 *  - the "life <path>" header: a FIFO of the lifeline exec (engine_cells_attach_lifeline(),
 *    as uid $3, checked on the open fd) that has no writer once the exec ended, the server's
 *    connection to it gone (read -t 0 says EOF). The code can open the supervisor's stdin
 *    through /proc/1/fd/3 (its uid) and hold it open, but neither this FIFO's write end (0644,
 *    another uid) nor the exec (another uid: no signal, no /proc/PID/fd);
 *  - the backstop, SIGINT and the end as in cells_wrapper.
 * No SIGCHLD trap here: a trapped signal can cut a read of stdin short; the forwarder's USR1
 * (the runner's fd 5 closed) ends it when the runner ends. */
static const char cells_wrapper_attach[] =
    "t=$1; k=$2; L=$3; shift 3; d=/tmp/.vestibule-cells; "
    "mkdir -m 0700 \"$d\" && mkfifo \"$d/c\" \"$d/s\" || exit 127; "
    "exec 3<&0 </dev/null; set -m; "
    "\"$@\" 3<&- 4<\"$d/c\" 5>\"$d/s\" & r=$!; "
    "exec 4>\"$d/c\" 5<\"$d/s\"; rm -rf \"$d\"; "
    "{ while IFS= read -r l <&5; do printf '%s%s\\n' \"$k\" \"$l\" >&2; "
    "printf '%s%s\\n' \"$k\" \"$l\"; done; kill -USR1 1; } 3<&- 4>&- & "
    "exec 5<&-; trap 'kill -INT -- -$r' INT; trap 'kill -KILL -1; exit 0' USR1; "
    "end=$((SECONDS + t)); h=; lf=; "
    "while [ $SECONDS -lt $end ] && kill -0 $r 2>/dev/null; do "
    "if [ -n \"$lf\" ] && read -t 0 <&6; then break; fi; "
    "p=; IFS= read -r -t 1 p <&3; s=$?; h=$h$p; "
    "if [ $s -gt 128 ]; then continue; elif [ $s != 0 ]; then break; fi; "
    "case $h in "
    "life\\ /tmp/.vestibule-life.*/l) [ -z \"$lf\" ] && exec 6<\"${h#life }\" && "
    "[ \"$(stat -L -c %u /proc/1/fd/6)\" = \"$L\" ] || break; lf=1; h=; continue;; "
    "[0-9]*\\ [0-9]*) ;; *) break;; esac; "
    "printf '%s\\n' \"$h\" >&4; "
    "dd bs=65536 iflag=fullblock,count_bytes count=\"${h#* }\" status=none <&3 >&4 || break; "
    "h=; end=$((SECONDS + t)); "
    "done; kill -KILL -1; exit 0";

struct engine_cells {
        char *script;    /* the runner's source in the code folder */
        char *fifo[F_N]; /* the FIFOs' host paths */
        /* our ends: the cells' write end (O_RDWR until the runner opened its end, so that
         * neither side's open blocks), the others' read ends */
        int cell_w, status_r, out_r, err_r;
        int life_rw; /* "life" opened for both (so no open blocks): the lifeline's only writer */
        char backstop_arg[16]; /* the supervisor's $1: seconds without a cell before it ends */
        pid_t runner_pid;      /* its host pid, or 0 when not seen from here */
        int runner_pidfd;      /* pidfd_open(runner_pid), or -1 */
        bool runner_leader; /* it leads its process group (the supervisor's set -m puts it there) */
        int kmsg_fd;        /* the kernel's log, for OOM kills, or -1 */
        long long seq;
        struct sbx_runner_records rec; /* status records being read */
        uint64_t cpu_us_seen;          /* the run cgroup's CPU time at the last collect */
        struct engine_ctrcg_cells ccg; /* the container's own cgroup, seen by the cells */
        /* the volume path: the attach connection, and the mark of the supervisor's records
         * ("\036vsb-" + 32 hex digits + ":", random per session) */
        struct engine_cells_attach *attach;
        char mark[48];
        /* the lifeline exec (volume path; a server that is not root on a rootful local Docker,
         * where the code's uid could write "life"): its uid ("" = none), its connection */
        char life_uid[16];
        struct engine_cells_lifeline *life;
        pthread_mutex_t lock;
        bool dead; /* killed, or the runner is gone */
};

int engine_cells_check(const struct engine_sb_view *v, struct sbx_error *err)
{
        (void)v; /* every engine: its files (FIFOs) or the attach connection (volume path) */
        (void)err;
        return 0;
}

void engine_cells_free(struct engine_cells *c)
{
        if (!c)
                return;
        /* the volume path's relay may be blocked writing into a full out, err or status pipe
         * (a background process printed between cells, which no call reads): our read ends go
         * first, so its write fails (EPIPE: it ignores SIGPIPE) and it sees the stop */
        int reads[] = {c->status_r, c->out_r, c->err_r};
        for (size_t i = 0; c->attach && i < ELEMENTSOF(reads); i++)
                if (reads[i] >= 0)
                        close(reads[i]);
        if (c->attach)
                c->status_r = c->out_r = c->err_r = -1;
        engine_cells_attach_close(c->attach);
        engine_cells_lifeline_close(c->life);
        int fds[] = {c->cell_w,       c->status_r, c->out_r,  c->err_r,
                     c->runner_pidfd, c->kmsg_fd,  c->life_rw};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        for (size_t i = 0; i < F_N; i++) {
                if (c->fifo[i])
                        unlink(c->fifo[i]);
                free(c->fifo[i]);
        }
        if (c->script)
                unlink(c->script);
        free(c->script);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

int engine_cells_new(const struct engine_sb_view *v, struct engine_cells **ret,
                     struct sbx_error *err)
{
        struct engine_cells *c = xcalloc(1, sizeof(*c));
        bool give;
        size_t len;
        int r;

        c->cell_w = c->status_r = c->out_r = c->err_r = c->runner_pidfd = c->kmsg_fd = -1;
        c->life_rw = -1;
        pthread_mutex_init(&c->lock, NULL);
        unsigned max_call_s = v->cfg->max_timeout_s ? v->cfg->max_timeout_s : 60;
        snprintf(c->backstop_arg, sizeof(c->backstop_arg), "%u",
                 v->cfg->session_idle_s + max_call_s + CELLS_BACKSTOP_MARGIN_S);
        if (v->volumes) { /* the runner goes in with the hand-in (backend.c); no FIFOs here */
                unsigned char rnd[16];
                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                        r = sbx_fail(err, errno, "cannot draw the session's mark: getrandom: %m");
                        engine_cells_free(c);
                        return r;
                }
                size_t n = (size_t)snprintf(c->mark, sizeof(c->mark), "\036vsb-");
                for (size_t i = 0; i < sizeof(rnd); i++)
                        n += (size_t)snprintf(c->mark + n, sizeof(c->mark) - n, "%02x", rnd[i]);
                snprintf(c->mark + n, sizeof(c->mark) - n, ":");
                /* not the code's uid (the egress bridge's choice too, egress_stream.c) */
                snprintf(c->life_uid, sizeof(c->life_uid), "%u", v->uid == 65534 ? 65533u : 65534u);
                *ret = c;
                return 0;
        }
        /* the runner is the program: written like a one-shot run's code */
        struct run_request req = {.language = v->language};
        req.code = sbx_runner_source(v->language, &len);
        req.code_len = len;
        r = engine_code_write(v->code_dir, &req, v->uid, v->gid, false, &c->script, err);
        give = geteuid() == 0 && v->uid != 0;
        /* a server that is not root: the runner's uid is ours and may open "life" for writing;
         * an exec as another uid holds the lifeline instead (rootful Docker: the uid is mapped
         * as given; rootless engines keep the backstop alone) */
        if (!give && !v->podman && !v->rootless_docker)
                snprintf(c->life_uid, sizeof(c->life_uid), "%u", v->uid == 65534 ? 65533u : 65534u);
        for (size_t i = 0; r == 0 && i < F_N; i++) {
                c->fifo[i] = xasprintf("%s/%s", v->code_dir, fifo_names[i]);
                /* "life" stays ours, readable by all: the runner's uid cannot open it for writing
                 * (nor chmod it) to keep the lifeline from ending; root bypasses the mode */
                bool life = i == F_LIFE && give;
                if (mkfifo(c->fifo[i], 0600) < 0 ||
                    (life ? chmod(c->fifo[i], 0444) < 0
                          : give && chown(c->fifo[i], v->uid, v->gid) < 0))
                        r = sbx_fail(err, errno, "cannot make the session's pipe '%s': %m",
                                     c->fifo[i]);
        }
        if (r < 0) {
                engine_cells_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

void engine_cells_cmd(const struct engine_cells *c, enum sbx_language l, const char *interp,
                      const char **cmd, size_t max)
{
        const char *const *argv = sbx_runner_argv(l);
        size_t n = 0;

        cmd[n++] = ENGINE_BASH_PATH;
        cmd[n++] = "-c";
        cmd[n++] = c->mark[0] ? cells_wrapper_attach : cells_wrapper;
        cmd[n++] = "vestibule-cells";
        cmd[n++] = c->backstop_arg;
        if (c->mark[0])
                cmd[n++] = c->mark;
        cmd[n++] = c->life_uid; /* "" when there is no lifeline exec */
        cmd[n++] = interp;      /* in place of the runner's bare argv[0] */
        for (argv++; *argv && n < max - 1; argv++)
                cmd[n++] = *argv;
        cmd[n] = NULL;
}

/* One status record from the runner, waiting up to @timeout_ms. Before any writer opened the
 * FIFO a read gives 0 as if at EOF; poll(2) says POLLHUP only once a writer came and went
 * (fifo(7), pipe_poll), which is how the runner's end is told apart. Return 0, -ETIMEDOUT,
 * -EPIPE (the runner is gone) or -EBADMSG. */
static int read_record(struct engine_cells *c, int timeout_ms, struct sbx_runner_status *ret)
{
        uint64_t until = sbx_now_ms() + (uint64_t)timeout_ms;

        for (;;) {
                int t = sbx_runner_take_record(&c->rec, ret);
                if (t != 0)
                        return t < 0 ? t : 0;
                ssize_t k =
                    read(c->status_r, c->rec.buf + c->rec.len, sizeof(c->rec.buf) - c->rec.len);
                if (k > 0) {
                        c->rec.len += (size_t)k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN)
                        return -errno;
                uint64_t now = sbx_now_ms();
                struct pollfd p = {.fd = c->status_r, .events = POLLIN};
                int pr = poll(&p, 1, now >= until ? 0 : (int)(until - now));
                if (pr > 0 && (p.revents & POLLHUP) && !(p.revents & POLLIN))
                        return -EPIPE;
                if (pr == 0 && sbx_now_ms() >= until)
                        return -ETIMEDOUT;
        }
}

static int open_fifo(const char *path, int flags, int *ret, struct sbx_error *err)
{
        int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return sbx_fail(err, errno, "cannot open the session's pipe '%s': %m", path);
        *ret = fd;
        return 0;
}

/* The first line of @path into @buf (NUL-terminated). Return 0 or -errno. */
static int proc_line(const char *path, char *buf, size_t size)
{
        FILE *f = fopen(path, "re");
        int r = 0;

        if (!f)
                return -errno;
        if (!fgets(buf, (int)size, f))
                r = -EIO;
        fclose(f);
        return r;
}

/* The runner's host pid: the only child of the container's init (State.Pid). 0 when this
 * server cannot see it (the engine's processes are in another pid namespace). */
static void find_runner(const struct engine_sb_view *v, struct engine_cells *c)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error e = {0};
        json_object *state, *pidj;
        char path[96], stat[512];
        long pid = 0, pgrp = 0;

        if (engine_get(v->conn,
                       &(struct engine_call){.path = "/containers/{}/json",
                                             .parts = {v->id},
                                             .ok = {200},
                                             .body = ENGINE_BODY_JSON,
                                             .timeout_ms = 10000,
                                             .what = "inspect the session's container"},
                       &rep, &e) < 0 ||
            !json_object_object_get_ex(rep.json, "State", &state) ||
            !json_object_object_get_ex(state, "Pid", &pidj) || json_object_get_int(pidj) <= 0) {
                log_debug("session %.12s: no init pid (%s)", v->id, e.msg);
                return;
        }
        int init = json_object_get_int(pidj);
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", init, init);
        if (proc_line(path, stat, sizeof(stat)) < 0 || sscanf(stat, "%ld", &pid) != 1 || pid <= 0)
                return;
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        if (proc_line(path, stat, sizeof(stat)) == 0) {
                const char *rp = strrchr(stat, ')'); /* after the command's name */
                if (!rp || sscanf(rp + 2, "%*c %*d %ld", &pgrp) != 1)
                        pgrp = 0;
        }
        c->runner_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (c->runner_pidfd < 0)
                return;
        c->runner_pid = (pid_t)pid;
        c->runner_leader = pgrp == pid;
        log_debug("session %.12s: runner pid %ld%s", v->id, pid,
                  c->runner_leader ? ", its process group's leader" : "");
}

/* The run cgroup's CPU time so far, or 0. */
static uint64_t cgroup_cpu_us(const struct engine_sb_view *v)
{
        struct run_usage u = {0};

        if (!v->cgroup || !*v->cgroup)
                return 0;
        engine_hostcg_read(v->cgroup, v->podman, &u);
        return u.cpu_us.measured ? u.cpu_us.value : 0;
}

/* Our ends before the start. The volume path: the attach connection's relay and its pipes.
 * A local engine: the FIFOs, read ends and the cells' O_RDWR (a FIFO opened for both never
 * blocks on Linux, fifo(7)), so the wrapper's opens do not block. */
static int open_ends(const struct engine_sb_view *v, struct engine_cells *c, struct sbx_error *err)
{
        int r;

        if (c->mark[0]) {
                struct engine_cells_attach_fds fds;
                r = engine_cells_attach_open(v->conn, v->id, c->mark, &c->attach, &fds, err);
                if (r < 0)
                        return r;
                c->out_r = fds.out_r;
                c->err_r = fds.err_r;
                c->status_r = fds.status_r;
                c->cell_w = fds.cells_w;
                return 0;
        }
        r = open_fifo(c->fifo[F_STATUS], O_RDONLY, &c->status_r, err);
        if (r == 0)
                r = open_fifo(c->fifo[F_OUT], O_RDONLY, &c->out_r, err);
        if (r == 0)
                r = open_fifo(c->fifo[F_ERR], O_RDONLY, &c->err_r, err);
        if (r == 0)
                r = open_fifo(c->fifo[F_CELLS], O_RDWR, &c->cell_w, err);
        if (r == 0)
                r = open_fifo(c->fifo[F_LIFE], O_RDWR, &c->life_rw, err);
        return r;
}

/* The volume path, after "ready": the lifeline exec, its FIFO's path to the supervisor as the
 * first line on its stdin (before any cell: no code of the session has run yet). */
static int launch_lifeline(const struct engine_sb_view *v, struct engine_cells *c,
                           struct sbx_error *err)
{
        char path[96], line[112];
        uid_t uid = (uid_t)strtoul(c->life_uid, NULL, 10);
        int r = engine_cells_lifeline_open(v->conn, v->id, uid, &c->life, path, err);

        if (r < 0)
                return r;
        int n = snprintf(line, sizeof(line), "life %s\n", path);
        /* the relay's pipe or the "life" FIFO, empty: a short line does not block */
        if (write(c->mark[0] ? c->cell_w : c->life_rw, line, (size_t)n) != n)
                return sbx_fail(err, EIO, "cannot hand the session its lifeline: %m");
        return 0;
}

int engine_cells_launch(const struct engine_sb_view *v, struct engine_cells *c,
                        struct sbx_error *err)
{
        struct sbx_runner_status st;
        int r;

        r = open_ends(v, c, err);
        if (r < 0)
                return r;
        c->kmsg_fd = engine_kmsg_open();
        r = engine_container_start(v->conn, v->id, v->image, err);
        if (r < 0)
                return r;
        r = read_record(c, CELLS_READY_MS, &st);
        if (r < 0 || strcmp(st.kind, "ready") != 0) {
                char out[512] = "";
                ssize_t n = read(c->err_r, out, sizeof(out) - 1);
                out[n > 0 ? n : 0] = '\0';
                return sbx_fail(err, EIO,
                                "the session's %s interpreter did not start in the container%s%s "
                                "(%s): run `vestibule-mcp doctor`, then retry session_start",
                                sbx_language_name(v->language), out[0] ? ": " : "", out,
                                r == -ETIMEDOUT ? "no word from it" : "it ended");
        }
        /* what it printed while it started is no cell's output (runners.h) */
        size_t dropped = sbx_runner_drop_startup(c->out_r) + sbx_runner_drop_startup(c->err_r);
        if (dropped)
                log_info("session %.12s: %zu bytes the interpreter printed as it started were "
                         "dropped (a .pth file or sitecustomize.py in the workspace?)",
                         v->id, dropped);
        if (c->mark[0]) { /* the runner is not this host's to see (another pid namespace) */
                c->cpu_us_seen = cgroup_cpu_us(v);
                return launch_lifeline(v, c, err);
        }
        /* the runner holds the read end now: a write-only end, so a runner that died is
         * EPIPE at the next cell rather than a pipe that fills */
        int w = -1;
        r = open_fifo(c->fifo[F_CELLS], O_WRONLY, &w, err);
        if (r < 0)
                return r;
        close(c->cell_w);
        c->cell_w = w;
        find_runner(v, c);
        c->cpu_us_seen = cgroup_cpu_us(v);
        if (c->runner_pid > 0)
                (void)engine_ctrcg_cells_begin(c->runner_pid, &c->ccg);
        return c->life_uid[0] ? launch_lifeline(v, c, err) : 0;
}

static bool runner_alive(struct engine_cells *c)
{
        struct pollfd p = {.fd = c->runner_pidfd >= 0 ? c->runner_pidfd : c->status_r,
                           .events = c->runner_pidfd >= 0 ? POLLIN : 0};

        /* pidfd: readable once it exited; else the status FIFO: POLLHUP once it closed */
        return poll(&p, 1, 0) == 0;
}

void engine_cells_kill(const struct engine_sb_view *v, struct engine_cells *c)
{
        pthread_mutex_lock(&c->lock);
        bool first = !c->dead;
        c->dead = true;
        pthread_mutex_unlock(&c->lock);
        if (first && v->id)
                engine_container_kill(v->conn, v->id);
}

bool engine_cells_alive(struct engine_cells *c)
{
        bool dead;

        pthread_mutex_lock(&c->lock);
        dead = c->dead;
        pthread_mutex_unlock(&c->lock);
        return !dead && runner_alive(c);
}

/* SIGINT to the runner's process group, from this host: python's KeyboardInterrupt, bash's
 * foreground job and its trap, node's breakOnSigint. The engine's kill API would signal the
 * container's init, which passes it to its child (the runner) only, not to a job the shell
 * waits for; it is the way when the runner is not seen from here. */
void engine_cells_interrupt(const struct engine_sb_view *v, struct engine_cells *c)
{

        pthread_mutex_lock(&c->lock);
        bool dead = c->dead;
        /* the pidfd still not readable: the runner lives, its pid is not reused */
        if (!dead && c->runner_pidfd >= 0 && runner_alive(c))
                (void)kill(c->runner_leader ? -c->runner_pid : c->runner_pid, SIGINT);
        pthread_mutex_unlock(&c->lock);
        if (dead || c->runner_pidfd >= 0)
                return;
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        struct sbx_error e = {0};
        if (engine_post(v->conn,
                        &(struct engine_call){.path = "/containers/{}/kill",
                                              .parts = {v->id},
                                              .query = {{"signal", "INT"}},
                                              .ok = {204, 404, 409},
                                              .timeout_ms = 5000,
                                              .what = "interrupt the session's cell"},
                        &rep, &e) < 0)
                log_debug("interrupt %.12s: %s", v->id, e.msg);
}

int engine_cells_start(const struct engine_sb_view *v, struct engine_cells *c,
                       const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err)
{
        int r;

        if (!engine_cells_alive(c))
                return sbx_fail(err, ESRCH, "the session's interpreter is gone");
        r = sbx_runner_check_cell(req, v->language, err);
        if (r < 0)
                return r;
        /* the supervisor's backstop starts again (a full FIFO, never read: it ends anyway);
         * on the volume path the cell's header does that */
        if (c->life_rw >= 0 && write(c->life_rw, "\n", 1) < 0)
                log_debug("session %.12s: lifeline: %m", v->id);
        r = sbx_runner_send_cell(c->cell_w, ++c->seq, req->code, req->code_len,
                                 sbx_now_ms() + CELLS_WRITE_MS);
        if (r < 0) {
                engine_cells_kill(v, c);
                return sbx_fail(err, ESRCH, "cannot hand the cell to the session's interpreter: %s",
                                strerror(-r));
        }
        *ret_io = (struct sandbox_io){
            .out_fd = c->out_r,
            .err_fd = c->err_r,
            .pid = 0,
            .pidfd = -1,
            .ended_fd = c->status_r,
            .flags = SANDBOX_IO_CELL,
        };
        return 0;
}

/* Docker's event log up to now: did the engine report an "oom" event for the container? It
 * does as the kernel's OOM killer acts in the container's cgroup, while the container still
 * runs (State.OOMKilled only follows its exit), and it answers whoever may use the socket, so
 * a server that is not root (cannot read the kernel's log) learns it too. A failed call is a
 * "no". Source: Docker Engine API v1.41, GET /events (since, until, filters container, event),
 * https://docs.docker.com/engine/api/v1.41/#tag/System/operation/SystemEvents */
static bool oom_event(const struct engine_sb_view *v)
{
        _cleanup_(engine_reply_done) struct engine_reply rep = {0};
        _cleanup_free_ char *filters =
            xasprintf("{\"container\":{\"%s\":true},\"event\":{\"oom\":true}}", v->id);
        struct sbx_error e = {0};
        struct timespec now;
        char until[48];

        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(until, sizeof(until), "%lld.%09ld", (long long)now.tv_sec, now.tv_nsec);
        if (engine_get(v->conn,
                       &(struct engine_call){
                           .path = "/events",
                           .query = {{"since", "0"}, {"until", until}, {"filters", filters}},
                           .ok = {200},
                           .body = ENGINE_BODY_RAW,
                           .timeout_ms = 5000,
                           .what = "read the engine's events for the session"},
                       &rep, &e) < 0)
                return false;
        return rep.raw && strstr(rep.raw, "\"oom\"");
}

/* The runner died: was it the memory cap? The kernel's log names the container's memcg
 * (hostcg.c, a root server); else Docker's "oom" event or State.OOMKilled once the container
 * stopped (its init follows the runner). */
static bool runner_oom(const struct engine_sb_view *v, struct engine_cells *c)
{
        if (c->kmsg_fd >= 0 && engine_kmsg_find_oom(c->kmsg_fd, v->id) == 1)
                return true;
        for (uint64_t until = sbx_now_ms() + CELLS_OOM_WAIT_MS; !v->podman;) {
                if (oom_event(v))
                        return true;
                _cleanup_(engine_reply_done) struct engine_reply rep = {0};
                struct sbx_error e = {0};
                json_object *state, *j;
                if (engine_get(v->conn,
                               &(struct engine_call){.path = "/containers/{}/json",
                                                     .parts = {v->id},
                                                     .ok = {200},
                                                     .body = ENGINE_BODY_JSON,
                                                     .timeout_ms = 5000,
                                                     .what = "inspect the session's container"},
                               &rep, &e) < 0 ||
                    !json_object_object_get_ex(rep.json, "State", &state))
                        return false;
                if (json_object_object_get_ex(state, "OOMKilled", &j) && json_object_get_boolean(j))
                        return true;
                if (json_object_object_get_ex(state, "Running", &j) && !json_object_get_boolean(j))
                        return false;
                if (sbx_now_ms() >= until)
                        return false;
                usleep(50000);
        }
        return false;
}

static void not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        snprintf(m->why, sizeof(m->why), "%s", why);
}

/* Usage of this call: CPU as the run cgroup's delta since the last call; memory and tasks as
 * the session's peaks so far. */
static void cells_usage(const struct engine_sb_view *v, struct engine_cells *c,
                        struct run_result *res)
{
        /* the container's own cgroup, through the runner's host pid (a local engine, root or
         * not): exact figures, and the pids cap named only for a fork refused in this cell */
        if (c->runner_pid > 0 && runner_alive(c) &&
            engine_ctrcg_cell_usage(c->runner_pid, v->cfg->pids_max, &c->ccg, res) == 0)
                return;
        if (!*v->cgroup) {
                not_measured(&res->usage.cpu_us, v->usage_why);
                not_measured(&res->usage.mem_peak_bytes, v->usage_why);
                not_measured(&res->usage.pids_peak, v->usage_why);
                return;
        }
        engine_hostcg_read(v->cgroup, v->podman, &res->usage);
        if (res->usage.cpu_us.measured) {
                uint64_t total = res->usage.cpu_us.value;
                res->usage.cpu_us.value = total > c->cpu_us_seen ? total - c->cpu_us_seen : 0;
                c->cpu_us_seen = total;
        }
        if (res->usage.pids_peak.measured && v->cfg->pids_max &&
            res->usage.pids_peak.value >= v->cfg->pids_max)
                snprintf(res->limits_hit, sizeof(res->limits_hit),
                         "pids (the cap of %u was reached)", v->cfg->pids_max);
}

void engine_cells_collect(const struct engine_sb_view *v, struct engine_cells *c,
                          const struct sandbox_watch *w, struct run_result *res)
{
        struct sbx_runner_status st = {0};
        int r = -EPIPE;

        snprintf(res->backend, sizeof(res->backend), "container");
        snprintf(res->image, sizeof(res->image), "%s", v->image);
        /* the record of this cell (an earlier one cannot be pending: each start waits for its
         * cell's end or ends the session) */
        if (w->by_ended_fd)
                while ((r = read_record(c, 0, &st)) == 0 && st.seq != c->seq)
                        ;
        if (r < 0) {
                /* no record: the runner is gone or spoke nonsense; the session ends */
                res->oom_killed = r == -EPIPE && w->forced == RUN_OUTCOME_NONE && runner_oom(v, c);
                engine_cells_kill(v, c);
        }
        if (w->forced == RUN_OUTCOME_NONE) {
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = r == 0 ? st.code : 1;
        }
        if (w->by_ended_fd && w->forced == RUN_OUTCOME_NONE)
                (void)sbx_runner_channel_broken(r, res); /* not the runner's words */
        if (r == 0 && strcmp(st.kind, "interrupted") == 0 && w->forced == RUN_OUTCOME_NONE)
                run_result_note(res, "the cell was interrupted (SIGINT from inside the session)");
        cells_usage(v, c, res);
        res->mem_limit_bytes = v->memory_bytes;
}
