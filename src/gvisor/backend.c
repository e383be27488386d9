/* backend.c - the gvisor backend's lifecycle steps (src/run/sandbox.h): prepare makes a private
 * folder (bundle, code, runsc's state and log), start writes the code and config.json
 * (spec.c) and starts runsc (runsc.c), kill ends runsc's process group and every process of
 * the sandbox's state folder, collect reaps runsc (its exit status is the program's) and
 * destroy removes the folder. See gvisor.h. */
#include "gvisor/gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/trace.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "gvisor/box.h"
#include "gvisor/runsc.h"
#include "gvisor/spare.h"
#include "gvisor/spec.h"
#include "rootfs/hold.h"
#include "rootfs/tree.h"
#include "run/user_site.h"
#include "workspace/workspace.h"

/* How long destroy waits for the run's cgroup to empty after cgroup.kill (the kernel kills
 * every task at once; this only bounds their exit under load). */
#define GVISOR_EMPTY_WAIT_MS 2000

/* The most finished sandboxes queued for the reaper thread; past it, destroy() frees the next
 * one itself (each takes at most GVISOR_EMPTY_WAIT_MS and a folder's removal, so the queue is
 * never more than this many of those behind). */
#define GVISOR_REAP_MAX_PENDING 16

/* Bash's spare waits as the cold run's own `bash /sandbox/main.sh`, in its BASH_ENV file (a
 * non-interactive bash sources $BASH_ENV before it opens its script: bash(1), INVOCATION):
 * this file unsets BASH_ENV (a bash the program starts must not source it), reads stdin until
 * EOF (bash's builtin read; no byte is expected, only the close of the server's end), puts
 * /dev/null on it, and leaves $_ as bash's start gave it ("bash", the cold argv[0]); then bash
 * opens main.sh, which exists by then, and runs it as on a cold run: the same argv, $0, $-,
 * BASH_SOURCE, FUNCNAME, variables and options. What differs: /sandbox holds this file too,
 * and /proc/1/environ names BASH_ENV. (destroy() kills the sandbox before it closes the pipe:
 * a spare never used runs nothing.) */
#define BASH_SPARE_BOOT ".vestibule-spare.sh"
static const char bash_spare_env[] = "BASH_ENV=/sandbox/" BASH_SPARE_BOOT;
static const char bash_spare_boot[] = "unset BASH_ENV\n"
                                      "while IFS= read -r _; do :; done\n"
                                      "exec </dev/null\n"
                                      ": bash\n";

/* Python's spare waits as the interpreter itself (its start-up, the largest part of a small
 * run's time inside gVisor, is then behind it): `python3 -c` this, which reads stdin to EOF,
 * puts /dev/null in its place, and runs /sandbox/main.py as a script's __main__ would be run
 * (sys.argv, sys.path[0], __file__; compiled alone, dont_inherit). The traceback of an uncaught
 * exception starts at the program's frame, as a cold run's: this bootstrap's frame is cut off
 * (the exception's traceback set to its tb_next: python 3.11's excepthook prints the
 * exception's own, then exit status 1); SystemExit passes through as it would.
 * What differs from a cold run: /proc/1/cmdline names `python3 -c ...` and __main__'s
 * __loader__ is the built-in one. */
static const char python_spare_boot[] =
    "import sys, os\n"
    "def _run(sys=sys, os=os):\n"
    "    sys.stdin.buffer.read()\n"
    "    fd = os.open('/dev/null', os.O_RDONLY); os.dup2(fd, 0); os.close(fd)\n"
    "    p = '/sandbox/main.py'\n"
    "    sys.argv[:] = [p]; sys.path[0] = '/sandbox'\n"
    "    with open(p, 'rb') as f: c = compile(f.read(), p, 'exec', dont_inherit=True)\n"
    "    g = sys.modules['__main__'].__dict__\n"
    "    for k in [k for k in g if k not in ('__name__', '__builtins__', '__loader__')]:\n"
    "        del g[k]\n"
    "    g.update(__file__=p, __doc__=None, __package__=None, __spec__=None, __cached__=None)\n"
    "    try:\n"
    "        exec(c, g)\n"
    "    except SystemExit:\n"
    "        raise\n"
    "    except BaseException as e:\n"
    "        e = e.with_traceback(e.__traceback__.tb_next)\n"
    "        sys.excepthook(type(e), e, e.__traceback__)\n"
    "        sys.exit(1)\n"
    "_run()\n";

/* Node's spare waits as the interpreter itself too (node's start-up in gVisor, 250-300 ms on the
 * CI machine kind, is most of a small run's time): `node -r /sandbox/NODE_SPARE_BOOT
 * /sandbox/main.js`, where this preload module reads stdin to EOF before node goes on to
 * resolve and run main.js (which exists by then) as it would on a cold run: the same
 * process.argv, require.main, __filename and uncaught exception's stack. It then puts
 * /dev/null on fd 0 (close, then open: the lowest free fd), empties process.execArgv (a
 * child_process.fork() would preload it again) and leaves require.cache. A Worker preloads
 * it too (node passes -r on to workers): there it does nothing. What differs from a cold
 * run: /sandbox holds this file too, and /proc/1/cmdline names it. */
#define NODE_SPARE_BOOT ".vestibule-spare.js"
static const char node_spare_boot_path[] = "/sandbox/" NODE_SPARE_BOOT;
static const char node_spare_boot[] =
    "'use strict';\n"
    "// a gvisor warm spare's preload (vestibule src/gvisor/backend.c): waits for the go\n"
    "if (!require('worker_threads').isMainThread) return;\n"
    "const fs = require('fs');\n"
    "const buf = Buffer.alloc(256);\n"
    "for (;;) {\n"
    "    let n;\n"
    "    try { n = fs.readSync(0, buf, 0, buf.length, null); } catch (e) {\n"
    "        if (e.code !== 'EAGAIN' && e.code !== 'EINTR') break;\n"
    "        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);\n"
    "        continue;\n"
    "    }\n"
    "    if (n <= 0) break;\n"
    "}\n"
    "fs.closeSync(0);\n"
    "fs.openSync('/dev/null', 'r');\n"
    "process.execArgv.length = 0;\n"
    "delete require.cache[__filename];\n";

struct gvisor_state {
        pthread_mutex_t lock;
        struct gvisor_runsc_facts facts;
        struct cgroup_limits_info limits; /* how each run gets its cgroup (the last probe's) */
        bool probed;
        bool swept; /* gvisor_sweep_dirs() ran (the first probe) */
        struct backend_probe probe;
        unsigned next_id;
        unsigned probe_gen; /* counts the probes that ran: spares of an older one are stale */
        bool shutting_down;

        /* The reaper: sandboxes whose run is over (killed, runsc reaped) wait here for their
         * processes' end, their cgroup's and their folder's removal, after the result, as
         * native's reaper (src/native/backend.c) does for its inits. */
        pthread_t reaper;
        bool reaper_started, reaper_stop;
        pthread_cond_t reap_work, reap_idle;
        struct gvisor_box *reap_head;
        unsigned reap_pending; /* queued or being freed */
};

/* One sandbox: its folder and the runsc that runs it. */
struct gvisor_box {
        struct backend *b;
        const struct sbx_config *cfg;
        enum sbx_language language;
        char grade[320];
        char dir[64]; /* /tmp/vestibule-gvisor-XXXXXX, 0700 */
        char *rootfs; /* cfg->rootfs_dir/<tree> */
        char *state, *bundle, *code, *log;
        char *chan; /* NULL, or a session's FIFO folder, read-write at /sandbox/chan (spec.h) */
        char id[48];
        struct setup_rootfs_hold hold;
        pthread_mutex_t lock; /* @run.pid against kill() from another thread */
        struct gvisor_runsc_run run;
        int pidfd;
        bool started, reaped, killed;
        bool host_fifo;           /* runsc --host-fifo=open (a session's FIFOs, cells.c) */
        enum run_network network; /* RUN_NETWORK_ALLOWLIST: the relay, the proxy, host UDS */
        const char *spare_env;    /* NULL, or one more variable of a spare's (bash_spare_env) */
        struct egress_session *egress; /* the run's proxy, from start to collect (or free) */
        char relay_py[1024], relay_js[1024], wait_sh[640]; /* egress_relay_source() & co. */
        const char *run_argv[9];   /* the wait script, the relays, the program (egress_begin) */
        bool spare;                /* prepared ahead (a warm spare, spare.h): its waiter reads
                                      stdin until the hand-over closes it */
        bool handed;               /* start() ran: a sandbox takes one program */
        struct gvisor_stamp stamp; /* a spare's: what it was built from */
        struct sbx_trace trace;    /* VESTIBULE_TRACE=timing: the phases of a call */
        struct rusage ru;
        /* the run's cgroup, when the host gives one (cgroup/cgroup.h): runsc, its gofer and its
         * sandbox all live in it; a scope also holds @keeper */
        enum cgroup_limits_path cg_path;
        struct cgroup_run cg;
        pid_t keeper;             /* 0: none */
        struct run_result *usage; /* read once from @cg, before the first kill (scratch) */
        bool usage_read, usage_ok;
        struct gvisor_box *reap_next; /* the reaper's queue (gvisor_state.reap_head) */
};

static const char *interpreter_of(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "node" : l == SBX_LANG_BASH ? "bash" : "python3";
}

static const char *tree_of(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "node" : "python";
}

/* Write @len bytes of @data to @dir/@name, new, 0444. */
static int write_new(const char *dir, const char *name, const char *data, size_t len,
                     struct sbx_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        _cleanup_close_ int fd =
            open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);

        if (fd < 0)
                return sbx_fail(err, errno, "cannot write '%s': %m; check that /tmp is writable",
                                path);
        while (len > 0) {
                ssize_t n = write(fd, data, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_fail(err, n < 0 ? errno : EIO, "cannot write '%s': %m", path);
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

static void box_free(struct gvisor_box *x);
static void box_kill_all(struct gvisor_box *x, pid_t pid);
static void box_freep(struct gvisor_box **x)
{
        if (*x)
                box_free(*x);
}

/* The box's folder and subfolders; the rootfs hold. */
static int box_make(struct gvisor_box *x, struct sbx_error *err)
{
        struct gvisor_state *s = x->b->state;
        int r;

        snprintf(x->dir, sizeof(x->dir), "/tmp/vestibule-gvisor-XXXXXX");
        if (!mkdtemp(x->dir)) {
                x->dir[0] = '\0';
                return sbx_fail(err, errno,
                                "cannot make a folder under /tmp for the gvisor "
                                "sandbox: %m; free space in /tmp, then retry");
        }
        r = gvisor_owner_write(x->dir, err); /* a gone server's folder: the next one's sweep */
        if (r < 0)
                return r;
        x->state = xasprintf("%s/state", x->dir);
        x->bundle = xasprintf("%s/bundle", x->dir);
        x->code = xasprintf("%s/code", x->dir);
        x->log = xasprintf("%s/runsc.log", x->dir);
        if (mkdir(x->state, 0700) < 0 || mkdir(x->bundle, 0700) < 0 || mkdir(x->code, 0755) < 0)
                return sbx_fail(err, errno, "cannot make the gvisor sandbox's folders in '%s': %m",
                                x->dir);
        pthread_mutex_lock(&s->lock);
        snprintf(x->id, sizeof(x->id), "vestibule-%d-%u", (int)getpid(), s->next_id++);
        pthread_mutex_unlock(&s->lock);
        x->rootfs = xasprintf("%s/%s", x->cfg->rootfs_dir, tree_of(x->language));
        r = setup_rootfs_hold(x->cfg->rootfs_dir, tree_of(x->language), &x->hold, err);
        if (r < 0)
                return r;
        return workspace_ensure(x->cfg->workspace_dir, err);
}

/* The environment: the fixed one, pip's persistence, the proxy's variables for an allowlist
 * run (egress_sandbox_env(), as native and the container backend give them). */
static void env_of(enum run_network network, const char *extra, const char **envp, size_t max)
{
        size_t n = 0;

        for (const char *const *e = egress_base_env; *e && n + 1 < max; e++)
                envp[n++] = strncmp(*e, "PATH=", 5) == 0 ? EGRESS_SANDBOX_PATH : *e;
        for (const char *const *e = egress_sandbox_env(network); *e && n + 1 < max; e++)
                envp[n++] = *e;
        if (extra && n + 1 < max)
                envp[n++] = extra;
        envp[n] = NULL;
}

/* config.json for @argv in the box's bundle. */
static int box_spec(struct gvisor_box *x, const char *const *argv, struct sbx_error *err)
{
        const char *envp[40];
        _cleanup_free_ char *json = NULL;
        int r;

        env_of(x->network, x->spare_env, envp, ELEMENTSOF(envp));
        struct gvisor_spec_in in = {
            .rootfs = x->rootfs,
            .workspace = x->cfg->workspace_dir,
            .workspace_ro = x->cfg->workspace_ro,
            .code_dir = x->code,
            .chan_dir = x->chan,
            .tmpfs_mb = x->cfg->tmpfs_mb,
            /* runsc --rootless re-runs itself as uid 0 of a user namespace that maps the
             * calling user: the sandbox's 0 is that namespace's 0, i.e. this user */
            .host_uid = 0,
            .host_gid = 0,
            .argv = argv,
            .envp = envp,
            .nofile_max = 1024,
            .fsize_max_bytes = (unsigned long long)x->cfg->tmpfs_mb << 20,
        };
        r = gvisor_spec_json(&in, &json, err);
        if (r < 0)
                return r;
        return write_new(x->bundle, "config.json", json, strlen(json), err);
}

/* Put the held runsc child @pid in the run's own cgroup: a scope (with a keeper beside it) or
 * a child of the delegated subtree; nothing where the host has neither (the grade says so). */
static int box_place(struct gvisor_box *x, pid_t pid, struct sbx_error *err)
{
        struct gvisor_state *s = x->b->state;
        struct cgroup_limits_info li;
        int r;

        if (x->cg_path == CGROUP_LIMITS_SCOPE) {
                r = gvisor_keeper_start(&x->keeper, err);
                if (r < 0)
                        return r;
                pid_t pids[2] = {x->keeper, pid};
                return cgroup_scope_start_pids(x->cfg, pids, 2, &x->cg, err);
        }
        if (x->cg_path != CGROUP_LIMITS_DELEGATED)
                return 0;
        pthread_mutex_lock(&s->lock);
        li = s->limits;
        pthread_mutex_unlock(&s->lock);
        r = cgroup_run_create(&li, x->cfg, &x->cg, err);
        if (r < 0)
                return r;
        return cgroup_run_move(&x->cg, pid, err);
}

/* The held runsc child could not be placed or let go: end it (reaped: not started). */
static void box_abandon(struct gvisor_box *x)
{
        kill(-x->run.pid, SIGKILL);
        kill(x->run.pid, SIGKILL);
        while (waitpid(x->run.pid, NULL, 0) < 0 && errno == EINTR)
                ;
        if (x->run.go_fd >= 0)
                close(x->run.go_fd);
        x->run.go_fd = -1;
        close(x->run.out_fd);
        close(x->run.err_fd);
        x->run.out_fd = x->run.err_fd = -1;
}

/* start runsc on the bundle, in the run's cgroup; pidfd for the warden. */
static int box_launch(struct gvisor_box *x, struct gvisor_state *s, struct sbx_error *err)
{
        bool killed;
        int r;

        pthread_mutex_lock(&x->lock);
        x->run = (struct gvisor_runsc_run){.runsc = s->facts.path,
                                           .root = x->state,
                                           .bundle = x->bundle,
                                           .log = x->log,
                                           .id = x->id,
                                           .host_fifo = x->host_fifo,
                                           .host_uds = x->network == RUN_NETWORK_ALLOWLIST,
                                           .stdin_pipe = x->spare,
                                           .in_fd = -1,
                                           .out_fd = -1,
                                           .err_fd = -1,
                                           .go_fd = -1};
        r = gvisor_runsc_start(&x->run, err);
        if (r == 0) {
                r = box_place(x, x->run.pid, err);
                if (r == 0)
                        r = gvisor_runsc_go(&x->run, err);
                if (r < 0)
                        box_abandon(x);
        }
        if (r == 0) {
                x->started = true;
                x->pidfd = (int)syscall(SYS_pidfd_open, x->run.pid, 0);
        }
        killed = x->killed;
        pthread_mutex_unlock(&x->lock);
        if (r == 0 && killed)
                box_kill_all(x, x->run.pid); /* kill() came before the start */
        return r;
}

static int box_new(struct backend *b, enum sbx_language language, struct gvisor_box **ret,
                   struct sbx_error *err)
{
        _cleanup_(box_freep) struct gvisor_box *x = xcalloc(1, sizeof(*x));
        int r;

        x->b = b;
        x->cfg = b->cfg;
        x->language = language;
        x->pidfd = -1;
        x->run.in_fd = x->run.out_fd = x->run.err_fd = x->run.go_fd = -1;
        x->cg.dir_fd = -1;
        x->usage = xcalloc(1, sizeof(*x->usage));
        pthread_mutex_lock(&((struct gvisor_state *)b->state)->lock);
        x->cg_path = ((struct gvisor_state *)b->state)->limits.path;
        pthread_mutex_unlock(&((struct gvisor_state *)b->state)->lock);
        pthread_mutex_init(&x->lock, NULL);
        r = box_make(x, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

/* Reap runsc (after the kill, or its own exit): its wait status, rusage into x->ru. */
static int box_reap(struct gvisor_box *x)
{
        int status = 0;

        if (!x->started || x->reaped)
                return 0;
        while (wait4(x->run.pid, &status, 0, &x->ru) < 0 && errno == EINTR)
                ;
        x->reaped = true;
        return status;
}

/* Read the run's cgroup once, before anything of it is killed: a scope's cgroup goes as soon
 * as it is empty. x->lock held. */
static void box_read_usage(struct gvisor_box *x)
{
        if (x->usage_read || !x->cg.path[0])
                return;
        x->usage_read = true;
        x->usage_ok = cgroup_run_read(&x->cg, x->cfg, x->usage);
}

/* Kill all of the run: its cgroup at once (cgroup.kill: every task, a fork in flight too),
 * then runsc's process group and whatever names its state folder (the only way where there is
 * no cgroup; the ptrace platform's stubs die with the Sentry that traces them). */
static void box_kill_all(struct gvisor_box *x, pid_t pid)
{
        cgroup_run_kill(&x->cg);
        gvisor_runsc_kill(pid, x->state);
}

/* Kill all of the run on a call's path: when runsc @pid exited by itself (its pidfd readable;
 * unreaped, so its group id is still its own), its `run` destroyed the sandbox and the gofer
 * before it exited (runsc/container: Destroy), so the cgroup's and the group's kill are enough
 * here and the sweep of /proc for the state folder is left to the reaper (box_free(), after the
 * result); else box_kill_all(). */
static void box_kill_ended(struct gvisor_box *x, pid_t pid)
{
        struct pollfd p = {.fd = x->pidfd, .events = POLLIN};

        if (pid <= 0 || x->pidfd < 0 || poll(&p, 1, 0) <= 0) {
                box_kill_all(x, pid);
                return;
        }
        cgroup_run_kill(&x->cg);
        kill(-pid, SIGKILL);
}

/* After the kill: wait, bounded, until nothing of the run is alive (its cgroup empty, or no
 * process naming its state folder), re-killing what a sweep still finds. */
static void box_wait_gone(struct gvisor_box *x)
{
        uint64_t end = sbx_now_ms() + GVISOR_EMPTY_WAIT_MS;

        while (sbx_now_ms() < end) {
                bool left = x->cg.path[0] ? cgroup_run_populated(&x->cg) : false;
                if (gvisor_runsc_kill(0, x->state) > 0)
                        left = true;
                if (!left)
                        return;
                if (x->cg.path[0])
                        cgroup_run_kill(&x->cg);
                usleep(10000);
        }
        log_warning("gvisor: the sandbox '%s' still had processes %d ms after its kill", x->id,
                    GVISOR_EMPTY_WAIT_MS);
}

static void box_free(struct gvisor_box *x)
{
        if (x->started) {
                /* runsc's group only while runsc is unreaped: once reaped, its pid (the group's
                 * id) may be another run's by now (pid_max 32768 wraps in minutes under load);
                 * the sweep finds its gofer and sandbox by their state folder */
                box_kill_all(x, x->reaped ? 0 : x->run.pid);
                box_reap(x);
                box_wait_gone(x);
        }
        if (x->keeper > 0) {
                kill(x->keeper, SIGKILL);
                while (waitpid(x->keeper, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (x->egress) { /* a start that failed after the proxy, or no collect: drop its verdicts */
                struct run_egress dropped = {0};
                egress_session_finish(TAKE_PTR(x->egress), &dropped);
        }
        cgroup_run_remove(&x->cg);
        free(x->usage);
        if (x->pidfd >= 0)
                close(x->pidfd);
        if (x->run.in_fd >= 0)
                close(x->run.in_fd);
        if (x->run.out_fd >= 0)
                close(x->run.out_fd);
        if (x->run.err_fd >= 0)
                close(x->run.err_fd);
        if (x->dir[0]) {
                /* beneath /tmp itself: the tree walk refuses to cross filesystems */
                _cleanup_close_ int tmp_fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (tmp_fd < 0 || setup_remove_tree(tmp_fd, x->dir + strlen("/tmp/")) < 0)
                        log_warning("gvisor: cannot remove the sandbox folder '%s'", x->dir);
                else
                        gvisor_owner_remove(x->dir);
        }
        setup_rootfs_release(&x->hold);
        pthread_mutex_destroy(&x->lock);
        free(x->rootfs);
        free(x->state);
        free(x->bundle);
        free(x->code);
        free(x->log);
        free(x->chan);
        free(x);
}

/* ---- probe: runsc there, and a real tiny run whose kernel is not the host's -------------- */

/* Read what @fd holds until EOF into @buf (cut); the fd is left open. */
static void read_all(int fd, char *buf, size_t size)
{
        size_t len = 0;
        ssize_t n;

        buf[0] = '\0';
        while (len + 1 < size &&
               ((n = read(fd, buf + len, size - 1 - len)) > 0 || (n < 0 && errno == EINTR)))
                if (n > 0)
                        len += (size_t)n;
        buf[len] = '\0';
}

/* One `uname -r` in a sandbox of @b: the Sentry's kernel release into @ret; then `ls -d /`,
 * which calls statx(2) with AT_NO_AUTOMOUNT as coreutils' ls, stat and cp all do. runsc
 * 0.0~20221219 (Debian 12's) answers that flag with EINVAL, so those tools fail in every
 * sandbox: such a runsc is refused, naming the version that fixed it (gVisor's statx accepts
 * AT_NO_AUTOMOUNT since 2023: Debian 13 ships 0.0~20240729). The program's stderr is read
 * after its stdout: both are a line or two at most. */
static int probe_run(struct backend *b, char *ret, size_t size, struct sbx_error *err)
{
        struct gvisor_state *s = b->state;
        _cleanup_(box_freep) struct gvisor_box *x = NULL;
        static const char *const argv[] = {"/bin/sh", "-c", "uname -r && exec ls -d / >/dev/null",
                                           NULL};
        char errbuf[512], fatal[400];
        int r, status;

        r = box_new(b, SBX_LANG_BASH, &x, err);
        if (r == 0)
                r = box_spec(x, argv, err);
        if (r == 0)
                r = box_launch(x, s, err);
        if (r < 0)
                return r;
        read_all(x->run.out_fd, ret, size);
        read_all(x->run.err_fd, errbuf, sizeof(errbuf));
        status = box_reap(x);
        ret[strcspn(ret, "\n")] = '\0';
        if (gvisor_runsc_fatal(x->log, fatal, sizeof(fatal)))
                return sbx_fail(err, EPERM, "runsc cannot run a rootless sandbox here: %s", fatal);
        if (ret[0] && strstr(errbuf, "Invalid argument"))
                return sbx_fail(
                    err, ENOSYS,
                    "this runsc (%s) answers statx(AT_NO_AUTOMOUNT) with EINVAL, so ls, "
                    "stat and cp fail in its sandboxes: install runsc 2023 or later "
                    "(Debian 13's package, or gVisor's own release), then retry",
                    s->facts.version[0] ? s->facts.version : "unknown version");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !ret[0])
                return sbx_fail(err, EPERM,
                                "runsc's test run (uname -r) failed (status 0x%x): %.200s",
                                (unsigned)status, errbuf);
        return 0;
}

/* The rootfs trees every language runs from, whole (as native's probe asks): 0 or -ENOENT. */
static int probe_trees(const struct sbx_config *cfg, struct sbx_error *err)
{
        _cleanup_free_ char *py = xasprintf("%s/python", cfg->rootfs_dir);
        _cleanup_free_ char *node = xasprintf("%s/node", cfg->rootfs_dir);

        if (rootfs_check_tree(py, "python3", err) < 0 || rootfs_check_tree(py, "bash", err) < 0 ||
            rootfs_check_tree(node, "node", err) < 0)
                return -ENOENT;
        return 0;
}

/* The grade given how runs get their cgroup (@li): "gvisor" when runsc, its gofer and its
 * Sentry run in a cgroup of the run's own with all three controllers, else
 * "gvisor-degraded (limits not applied: ...)" naming what is missing and why. */
__attribute__((format(printf, 3, 4))) static void strf(char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap); /* cut at @size on purpose */
        va_end(ap);
}

static bool grade_of(const struct cgroup_limits_info *li, char *grade, size_t size)
{
        if (li->path != CGROUP_LIMITS_NONE && !li->missing[0]) {
                strf(grade, size, "gvisor");
                return false;
        }
        if (li->path != CGROUP_LIMITS_NONE)
                strf(grade, size,
                     "gvisor-degraded (limits not applied: %s: the controllers are not "
                     "delegated to this user's cgroup)",
                     li->missing);
        else
                strf(grade, size,
                     "gvisor-degraded (limits not applied: memory, cpu, pids: runsc runs with "
                     "--ignore-cgroups and no cgroup of the run's own: %.150s; /tmp's size, "
                     "open files and file size are capped)",
                     li->why_none);
        return true;
}

static int gvisor_probe(struct backend *b, struct backend_probe *ret, struct sbx_error *err)
{
        struct gvisor_state *s = b->state;
        struct backend_probe p = {0};
        struct sbx_error e = {0};
        struct utsname host;
        char release[128] = "";
        int r;

        pthread_mutex_lock(&s->lock);
        if (s->probed) {
                *ret = s->probe;
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        bool sweep = !s->swept;
        s->swept = true;
        pthread_mutex_unlock(&s->lock);
        if (sweep) /* once a server: what gone servers left in /tmp */
                (void)gvisor_sweep_dirs();
        r = gvisor_runsc_facts(&s->facts, &e);
        if (r == 0 && geteuid() == 0)
                r = sbx_fail(&e, EPERM,
                             "the gvisor backend runs runsc rootless, as the server's own "
                             "unprivileged user; this server runs as root: restart it as a user "
                             "(or use VESTIBULE_BACKEND=native with VESTIBULE_RUN_AS)");
        if (r == 0)
                r = probe_trees(b->cfg, &e);
        if (r == 0) {
                struct cgroup_limits_info li;
                cgroup_limits_detect(b->cfg, &li);
                pthread_mutex_lock(&s->lock);
                s->limits = li;
                pthread_mutex_unlock(&s->lock);
                /* the test run goes in the run's cgroup too: the path is proven before use */
                r = probe_run(b, release, sizeof(release), &e);
        }
        uname(&host);
        if (r == 0 && strcmp(release, host.release) == 0)
                r = sbx_fail(&e, EPROTO,
                             "runsc's test run reported the host's own kernel release '%s': no "
                             "gVisor kernel in between; reinstall runsc (apt install runsc)",
                             release);
        snprintf(p.details, sizeof(p.details),
                 "runsc: %s\nrunsc version: %s\nrunsc platform: %s\nrunsc rootless probe: %s",
                 s->facts.found ? s->facts.path : "not installed (apt install runsc)",
                 s->facts.version[0] ? s->facts.version : "unknown",
                 s->facts.platform[0] ? s->facts.platform : "unknown",
                 r == 0 ? "ok (uname -r in the sandbox: " : "failed: see below");
        if (r == 0) {
                size_t n = strlen(p.details);
                snprintf(p.details + n, sizeof(p.details) - n, "%s, host: %s)", release,
                         host.release);
                p.usable = true;
                pthread_mutex_lock(&s->lock);
                p.degraded = grade_of(&s->limits, p.grade, sizeof(p.grade));
                pthread_mutex_unlock(&s->lock);
        } else {
                snprintf(p.blocked, sizeof(p.blocked), "%s", e.msg);
                size_t n = strlen(p.details);
                snprintf(p.details + n, sizeof(p.details) - n, "\nrunsc probe failure: %.300s",
                         e.msg);
        }
        pthread_mutex_lock(&s->lock);
        s->probe = p;
        s->probe_gen++;
        s->probed = p.usable; /* an unusable answer is asked again (the ladder retries) */
        pthread_mutex_unlock(&s->lock);
        *ret = p;
        (void)err;
        return 0;
}

/* ---- the lifecycle ------------------------------------------------------------------------ */

/* A new box once the probe says the backend is usable and the server is not stopping. */
static int box_open(struct backend *b, enum sbx_language language, struct gvisor_box **ret,
                    struct sbx_error *err)
{
        struct gvisor_state *s = b->state;
        struct backend_probe probe;
        bool down;
        int r;

        pthread_mutex_lock(&s->lock);
        down = s->shutting_down;
        pthread_mutex_unlock(&s->lock);
        if (down)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        r = gvisor_probe(b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, ESTALE, "%s", probe.blocked);
        r = box_new(b, language, ret, err);
        if (r < 0)
                return r;
        snprintf((*ret)->grade, sizeof((*ret)->grade), "%s", probe.grade);
        return 0;
}

/* The code's folder: the program (NULL: not yet, a spare's) and sitecustomize.py. */
static int code_dir_fill(struct gvisor_box *x, const char *script, const char *code, size_t len,
                         struct sbx_error *err)
{
        int r;

        r = code ? write_new(x->code, script, code, len, err) : 0;
        /* every language: bash's and node's python3 children read it from PYTHONPATH too */
        if (r == 0)
                r = write_new(x->code, EGRESS_SITECUSTOMIZE_NAME, egress_sitecustomize,
                              strlen(egress_sitecustomize), err);
        return r;
}

/* A warm spare (spare.h): the sandbox started with its waiter as pid 1, what it was built
 * from stamped. runsc's and the Sentry's start-up run here, off any call's path. */
static int spare_launch(struct gvisor_box *x, struct sbx_error *err)
{
        struct gvisor_state *s = x->b->state;
        const char *script = sbx_language_script(x->language);
        _cleanup_free_ char *path = xasprintf("/sandbox/%s", script);
        const char *python[] = {"python3", "-c", python_spare_boot, NULL};
        const char *node[] = {"node", "-r", node_spare_boot_path, path, NULL};
        const char *bash[] = {"bash", path, NULL}; /* a cold run's; BASH_ENV waits */
        const char *const *argv = x->language == SBX_LANG_PYTHON ? python
                                  : x->language == SBX_LANG_NODE ? node
                                                                 : bash;
        unsigned gen;
        int r;

        pthread_mutex_lock(&s->lock);
        gen = s->probe_gen;
        pthread_mutex_unlock(&s->lock);
        r = gvisor_spare_stamp_take(x->cfg, x->rootfs, x->grade, gen, &x->stamp, err);
        if (r == 0)
                r = code_dir_fill(x, script, NULL, 0, err);
        if (r == 0 && x->language == SBX_LANG_NODE)
                r = write_new(x->code, NODE_SPARE_BOOT, node_spare_boot, strlen(node_spare_boot),
                              err);
        if (r == 0 && x->language == SBX_LANG_BASH) {
                r = write_new(x->code, BASH_SPARE_BOOT, bash_spare_boot, strlen(bash_spare_boot),
                              err);
                x->spare_env = bash_spare_env;
        }
        if (r == 0)
                r = box_spec(x, argv, err);
        if (r == 0)
                r = box_launch(x, s, err);
        return r;
}

/* start, for a spare: still what it was built from, and its sandbox still there? then the
 * program's file, and the close of its stdin: the interpreter waiting on it goes on to it. */
static int spare_handover(struct gvisor_box *x, const struct run_request *req,
                          struct sbx_error *err)
{
        struct gvisor_state *s = x->b->state;
        struct backend_probe probe;
        struct pollfd p = {.fd = x->pidfd, .events = POLLIN};
        unsigned gen;
        int r;

        r = gvisor_probe(x->b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, ESTALE, "%s", probe.blocked);
        pthread_mutex_lock(&s->lock);
        gen = s->probe_gen;
        pthread_mutex_unlock(&s->lock);
        r = gvisor_spare_stamp_check(&x->stamp, x->cfg, x->rootfs, probe.grade, gen, err);
        if (r < 0)
                return r;
        /* runsc exited (its pidfd readable): the spare is gone and nothing of the code ran */
        if (x->pidfd < 0 || x->run.in_fd < 0 || poll(&p, 1, 0) != 0)
                return sbx_fail(err, ESTALE, "the spare's sandbox is gone");
        r = write_new(x->code, sbx_language_script(x->language), req->code, req->code_len, err);
        if (r < 0)
                return r;
        close(x->run.in_fd); /* EOF: the go */
        x->run.in_fd = -1;
        return 0;
}

/* An allowlist run (docs/design/egress.md, "gVisor backend"): the proxy on a unix socket in
 * the run's own code folder (/sandbox/.egress.sock inside; the folder is in this box's 0700
 * one), started before the sandbox: fail closed, nothing runs when it cannot. The program
 * becomes the wait script's last arguments: the relay (the image's python3 or node) listens on
 * 127.0.0.1:EGRESS_PORT in the Sentry's own netstack (runsc --network=none: lo only) and
 * carries each connection to that socket, which runsc --host-uds=open lets it connect(2) to.
 * *@ret_argv: borrowed from @x and @argv. Return: 0, or -errno with @err. */
static int egress_begin(struct gvisor_box *x, const char *const *argv, const char *const **ret_argv,
                        struct sbx_error *err)
{
        _cleanup_free_ char *sock = xasprintf("%s/%s", x->code, EGRESS_RELAY_SOCK);
        int fd = -1, r;

        if (egress_relay_source("python3", EGRESS_RELAY_SOCK_IN, EGRESS_PORT, x->relay_py,
                                sizeof(x->relay_py)) < 0 ||
            egress_relay_source("node", EGRESS_RELAY_SOCK_IN, EGRESS_PORT, x->relay_js,
                                sizeof(x->relay_js)) < 0)
                return sbx_fail(err, ENOSPC, "egress: the relay's source does not fit");
        r = egress_listen_unix(sock, &fd, err);
        if (r < 0)
                return sbx_wrap(err, "egress: the proxy's socket in the run's code folder; "
                                     "nothing was run");
        r = egress_session_start(x->cfg, fd, &x->egress, err); /* takes fd */
        if (r < 0)
                return sbx_wrap(err, "egress: the proxy did not start; nothing was run");
        x->run_argv[0] = "/bin/bash";
        x->run_argv[1] = "-c";
        x->run_argv[2] = egress_relay_wait_script(EGRESS_PORT, x->wait_sh, sizeof(x->wait_sh));
        x->run_argv[3] = "vestibule-egress";
        x->run_argv[4] = x->relay_py;
        x->run_argv[5] = x->relay_js;
        x->run_argv[6] = argv[0];
        x->run_argv[7] = argv[1];
        x->run_argv[8] = NULL;
        *ret_argv = x->run_argv;
        return 0;
}

static int gvisor_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                          struct sbx_error *err)
{
        struct gvisor_box *x = NULL;
        int r;

        if (spec->mode != SANDBOX_MODE_ONE_SHOT)
                return sbx_fail(err, EOPNOTSUPP, "gvisor sandboxes run one program each");
        if (spec->network == RUN_NETWORK_ALLOWLIST && spec->spare)
                return sbx_fail(err, EOPNOTSUPP,
                                "a warm spare is built with network \"none\"; an allowlist run "
                                "starts cold (this is a bug in the caller)");
        r = box_open(b, spec->language, &x, err);
        if (r < 0 || !x)
                return r < 0 ? r : -EIO;
        x->spare = spec->spare;
        x->network = spec->network;
        if (x->spare) {
                r = spare_launch(x, err);
                if (r < 0) {
                        box_free(x);
                        return r;
                }
        }
        *ret = (struct sandbox *)x;
        return 0;
}

static int gvisor_start(struct sandbox *sandbox, const struct run_request *req,
                        struct sandbox_io *ret_io, struct sbx_error *err)
{
        struct gvisor_box *x = (struct gvisor_box *)sandbox;
        const char *script = sbx_language_script(x->language);
        _cleanup_free_ char *path = xasprintf("/sandbox/%s", script);
        const char *argv[] = {interpreter_of(x->language), path, NULL};
        const char *const *run_argv = argv;
        uint64_t start_ms = 0;
        int r;

        if (x->handed)
                return sbx_fail(err, EALREADY,
                                "this sandbox ran a program already; a sandbox runs one program "
                                "and is never handed a second");
        if (req->language != x->language || (x->started && !x->spare))
                return sbx_fail(err, EINVAL, "gvisor sandbox: start() out of order");
        x->handed = true;
        sbx_trace_begin(&x->trace, x->cfg->trace_timing, "gvisor");
        if (x->spare) {
                r = spare_handover(x, req, err);
                start_ms = sbx_now_ms();
                sbx_trace_lap(&x->trace, "spare_handover");
        } else {
                r = code_dir_fill(x, script, req->code, req->code_len, err);
                if (r == 0 && x->network == RUN_NETWORK_ALLOWLIST)
                        r = egress_begin(x, argv, &run_argv, err);
                sbx_trace_lap(&x->trace, "egress");
                if (r == 0)
                        r = box_spec(x, run_argv, err);
                if (r == 0)
                        r = box_launch(x, x->b->state, err);
                sbx_trace_lap(&x->trace, "runsc_start");
        }
        if (r < 0)
                return r;
        *ret_io = (struct sandbox_io){
            .start_ms = start_ms,
            .out_fd = x->run.out_fd,
            .err_fd = x->run.err_fd,
            .pid = x->run.pid,
            .pidfd = x->pidfd,
            .ended_fd = -1,
        };
        return 0;
}

static void gvisor_kill(struct sandbox *sandbox)
{
        struct gvisor_box *x = (struct gvisor_box *)sandbox;
        pid_t pid;

        pthread_mutex_lock(&x->lock);
        x->killed = true;
        pid = x->started && !x->reaped ? x->run.pid : 0;
        box_read_usage(x);
        pthread_mutex_unlock(&x->lock);
        box_kill_ended(x, pid);
}

static void not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        snprintf(m->why, sizeof(m->why), "%s", why);
}

/* Usage from the run's cgroup (read before its kill), else runsc's rusage for the CPU. */
static void box_usage(struct gvisor_box *x, const struct sandbox_watch *w, struct run_result *res)
{
        if (x->usage_ok) {
                res->usage.cpu_us = x->usage->usage.cpu_us;
                res->usage.mem_peak_bytes = x->usage->usage.mem_peak_bytes;
                res->usage.pids_peak = x->usage->usage.pids_peak;
                memcpy(res->limits_hit, x->usage->limits_hit, sizeof(res->limits_hit));
                res->oom_killed = x->usage->oom_killed;
                res->mem_limit_bytes = x->usage->mem_limit_bytes;
                return;
        }
        /* runsc waited for its own children (the sandbox, the gofer): their CPU is in its
         * rusage; a kill cuts that short, so the figure is then a floor */
        res->usage.cpu_us.measured = true;
        res->usage.cpu_us.at_least = w->forced != RUN_OUTCOME_NONE;
        res->usage.cpu_us.value =
            (uint64_t)(x->ru.ru_utime.tv_sec + x->ru.ru_stime.tv_sec) * 1000000u +
            (uint64_t)(x->ru.ru_utime.tv_usec + x->ru.ru_stime.tv_usec);
        const char *why = x->cg.path[0] ? "the run's cgroup could not be read"
                                        : "no cgroup of the run's own on this host (runsc "
                                          "--ignore-cgroups)";
        not_measured(&res->usage.mem_peak_bytes, why);
        not_measured(&res->usage.pids_peak, why);
}

static int gvisor_collect(struct sandbox *sandbox, const struct sandbox_watch *w,
                          struct run_result *res, struct sbx_error *err)
{
        struct gvisor_box *x = (struct gvisor_box *)sandbox;
        char fatal[400];
        int status;

        sbx_trace_lap(&x->trace, "program");
        pthread_mutex_lock(&x->lock);
        box_read_usage(x); /* before the kill: a scope's cgroup goes once empty */
        pthread_mutex_unlock(&x->lock);
        box_kill_ended(x, x->started && !x->reaped ? x->run.pid : 0); /* what the program left */
        pthread_mutex_lock(&x->lock);
        status = box_reap(x);
        pthread_mutex_unlock(&x->lock);
        sbx_trace_lap(&x->trace, "kill_reap");
        /* the sandbox is gone: its connections are done; the verdicts go in the result */
        egress_session_finish(TAKE_PTR(x->egress), &res->egress);
        snprintf(res->backend, sizeof(res->backend), "gvisor");
        snprintf(res->image, sizeof(res->image), "%s", x->rootfs);
        snprintf(res->isolation, sizeof(res->isolation), "%s", x->grade);
        if (w->forced == RUN_OUTCOME_NONE) {
                res->outcome = WIFSIGNALED(status) ? RUN_OUTCOME_SIGNALED : RUN_OUTCOME_EXITED;
                res->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
                res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
        }
        box_usage(x, w, res);
        if (x->spare && res->usage.cpu_us.measured)
                not_measured(&res->usage.cpu_us,
                             "a warm spare: its cgroup's CPU includes the sandbox's and "
                             "interpreter's start-up before the hand-over");
        if (res->oom_killed && w->forced == RUN_OUTCOME_NONE &&
            res->outcome == RUN_OUTCOME_EXITED && res->exit_code == 0) {
                /* the kernel killed the Sentry; runsc's own status need not say so */
                res->outcome = RUN_OUTCOME_SIGNALED;
                res->term_signal = SIGKILL;
        }
        if (w->forced == RUN_OUTCOME_NONE && !res->oom_killed &&
            gvisor_runsc_fatal(x->log, fatal, sizeof(fatal))) {
                res->outcome = RUN_OUTCOME_NONE;
                return sbx_fail(err, ENOEXEC, "runsc could not run the program: %s", fatal);
        }
        return 0;
}

static void *reaper_main(void *arg)
{
        struct gvisor_state *s = arg;

        pthread_mutex_lock(&s->lock);
        for (;;) {
                while (!s->reap_head && !s->reaper_stop)
                        pthread_cond_wait(&s->reap_work, &s->lock);
                if (!s->reap_head)
                        break;
                struct gvisor_box *x = s->reap_head;
                s->reap_head = x->reap_next;
                pthread_mutex_unlock(&s->lock);
                box_free(x);
                pthread_mutex_lock(&s->lock);
                s->reap_pending--;
                pthread_cond_broadcast(&s->reap_idle);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* Start the reaper thread (taking no signals) unless it runs; s->lock held. */
static void reaper_start(struct gvisor_state *s)
{
        pthread_attr_t attr;
        sigset_t all, old;

        if (s->reaper_started || s->reaper_stop)
                return;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
        s->reaper_started = pthread_create(&s->reaper, &attr, reaper_main, s) == 0;
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Hand @x to the reaper thread: box_free() there, after the result. Freed here when the thread
 * cannot start, is stopping, or has GVISOR_REAP_MAX_PENDING sandboxes queued already. */
static void reap_later(struct gvisor_state *s, struct gvisor_box *x)
{
        pthread_mutex_lock(&s->lock);
        reaper_start(s);
        if (!s->reaper_started || s->reaper_stop || s->reap_pending >= GVISOR_REAP_MAX_PENDING) {
                pthread_mutex_unlock(&s->lock);
                box_free(x);
                return;
        }
        x->reap_next = NULL;
        struct gvisor_box **tail = &s->reap_head;
        while (*tail)
                tail = &(*tail)->reap_next;
        *tail = x;
        s->reap_pending++;
        pthread_cond_signal(&s->reap_work);
        pthread_mutex_unlock(&s->lock);
}

void gvisor_backend_settle(struct backend *b)
{
        struct gvisor_state *s = b->state;

        pthread_mutex_lock(&s->lock);
        while (s->reap_pending > 0)
                pthread_cond_wait(&s->reap_idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
}

/* destroy: kill now whatever of the sandbox still runs (a spare never used, a start that
 * failed: runsc unreaped); the wait for its processes' end, the keeper, the cgroup's and the
 * folder's removal and the rootfs hold's release go to the reaper thread, after the result
 * (a collected run was killed and reaped in collect already). */
static void gvisor_destroy_box(struct sandbox *sandbox)
{
        struct gvisor_box *x = (struct gvisor_box *)sandbox;
        struct sbx_trace t = x->trace;

        if (x->started && !x->reaped)
                box_kill_all(x, x->run.pid);
        reap_later(x->b->state, x);
        if (t.on) {
                sbx_trace_lap(&t, "destroy");
                sbx_trace_end(&t);
        }
}

static const struct sandbox_ops gvisor_sandbox_ops = {
    .prepare = gvisor_prepare,
    .start = gvisor_start,
    .kill = gvisor_kill,
    .collect = gvisor_collect,
    .destroy = gvisor_destroy_box,
};

static void gvisor_shutdown(struct backend *b)
{
        struct gvisor_state *s = b->state;

        pthread_mutex_lock(&s->lock);
        s->shutting_down = true;
        pthread_mutex_unlock(&s->lock);
}

static void gvisor_destroy(struct backend *b)
{
        struct gvisor_state *s = b->state;

        if (!s)
                return;
        /* the reaper finishes its queue (every sandbox in it was killed) and stops */
        pthread_mutex_lock(&s->lock);
        s->reaper_stop = true;
        pthread_cond_signal(&s->reap_work);
        pthread_mutex_unlock(&s->lock);
        if (s->reaper_started)
                pthread_join(s->reaper, NULL);
        pthread_cond_destroy(&s->reap_work);
        pthread_cond_destroy(&s->reap_idle);
        pthread_mutex_destroy(&s->lock);
        free(s);
        b->state = NULL;
}

static const struct backend_ops gvisor_ops = {
    .name = "gvisor",
    .egress = true,
    .probe = gvisor_probe,
    .run = sandbox_run_once,
    .sandbox = &gvisor_sandbox_ops,
    .cells = &gvisor_cells_ops,
    .shutdown = gvisor_shutdown,
    .destroy = gvisor_destroy,
};

int gvisor_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err)
{
        struct backend *b = xcalloc(1, sizeof(*b));
        struct gvisor_state *s = xcalloc(1, sizeof(*s));

        (void)err;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->reap_work, NULL);
        pthread_cond_init(&s->reap_idle, NULL);
        b->ops = &gvisor_ops;
        b->cfg = cfg;
        b->state = s;
        *ret = b;
        return 0;
}

/* ---- the box, for the session ops (box.h) ------------------------------------------------ */

int gvisor_box_open(struct backend *b, enum sbx_language language, bool host_fifo,
                    struct gvisor_box **ret, struct sbx_error *err)
{
        int r = box_open(b, language, ret, err);

        if (r == 0)
                (*ret)->host_fifo = host_fifo;
        return r;
}

const char *gvisor_box_code_dir(const struct gvisor_box *x)
{
        return x->code;
}

int gvisor_box_chan(struct gvisor_box *x, const char **ret, struct sbx_error *err)
{
        _cleanup_free_ char *point = xasprintf("%s/chan", x->code);

        if (!x->chan) {
                x->chan = xasprintf("%s/chan", x->dir);
                if (mkdir(x->chan, 0700) < 0 || mkdir(point, 0755) < 0)
                        return sbx_fail(err, errno,
                                        "cannot make the session's pipe folder '%s': %m", x->chan);
        }
        *ret = x->chan;
        return 0;
}

const char *gvisor_box_grade(const struct gvisor_box *x)
{
        return x->grade;
}

const char *gvisor_box_rootfs(const struct gvisor_box *x)
{
        return x->rootfs;
}

int gvisor_box_write(struct gvisor_box *x, const char *name, const char *data, size_t len,
                     bool with_site, struct sbx_error *err)
{
        int r = write_new(x->code, name, data, len, err);

        if (r == 0 && with_site)
                r = write_new(x->code, EGRESS_SITECUSTOMIZE_NAME, egress_sitecustomize,
                              strlen(egress_sitecustomize), err);
        return r;
}

int gvisor_box_run(struct gvisor_box *x, const char *const *argv, int *ret_out, int *ret_err,
                   int *ret_pidfd, struct sbx_error *err)
{
        int r = box_spec(x, argv, err);

        if (r == 0)
                r = box_launch(x, x->b->state, err);
        if (r < 0)
                return r;
        *ret_out = x->run.out_fd;
        *ret_err = x->run.err_fd;
        *ret_pidfd = x->pidfd;
        return 0;
}

void gvisor_box_kill(struct gvisor_box *x)
{
        gvisor_kill((struct sandbox *)x);
}

void gvisor_box_free(struct gvisor_box *x)
{
        if (x)
                box_free(x);
}
