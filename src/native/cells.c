/* cells.c - a native session's live sandbox (SANDBOX_MODE_CELLS, src/run/sandbox.h): the same
 * namespaces, mounts, seccomp filter, Landlock and cgroup or scope as a one-shot run
 * (spawn.c's two step lists), but the program under init is the language's runner
 * (src/run/runners/), fed one cell per start() over a pipe on its fd 4; it answers with one
 * status record per cell on fd 5. The user's stdout and stderr stay the sandbox's own pipes,
 * so no output can end a cell. See docs/design/sessions.md. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "egress/egress.h"
#include "native/native.h"
#include "rootfs/hold.h"
#include "run/backend.h"
#include "run/runners.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "workspace/workspace.h"

/* The runner must take its source, and then say "ready", each within this long, or within
 * the default run's timeout when that is longer: a one-shot run's interpreter has its
 * run's deadline to take the code (node's start-up alone took over 15 s in the VM under
 * emulation, docs/design/vm.md, where the default timeout is 40 s). */
#define CELLS_READY_MS 15000
/* A cell must be handed in within this long (the runner reads it at once between cells). */
#define CELLS_WRITE_MS 5000

struct sandbox {
        struct backend *b;
        const struct sbx_config *cfg;
        enum sbx_language lang;
        char grade[320];
        char image[256];
        struct native_sandbox ns; /* init: pid, pidfd, out_fd, err_fd, sync_fd, listener_fd */
        struct native_notify *notify;
        struct cgroup_run cg;
        bool has_cg;
        struct setup_rootfs_hold hold;
        int cell_w;   /* write end of the runner's fd 4 */
        int status_r; /* read end of its fd 5 */
        pid_t runner_pid;
        int runner_pidfd;
        long long seq;
        struct sbx_runner_records rec; /* status records being read */
        uint64_t cpu_us_seen;          /* the cgroup's CPU time at the last collect */
        size_t names_seen;             /* blocked syscall names already reported */
        bool oom_seen;
        pthread_mutex_t lock;
        bool dead;                 /* killed, or the runner is gone */
        bool spare;                /* prepared ahead of any session (a warm spare, warm.h) */
        unsigned probe_gen;        /* the backend's probe generation at prepare */
        struct native_stamp stamp; /* a spare's: what it was built from (stamp.c) */
};

static const char *rootfs_tree(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "node" : "python";
}

static int scope_place(void *ud, pid_t pid, struct sbx_error *err)
{
        struct sandbox *sb = ud;

        return cgroup_scope_start(sb->cfg, pid, &sb->cg, err);
}

static void cells_kill(struct sandbox *sb)
{
        pthread_mutex_lock(&sb->lock);
        sb->dead = true;
        if (sb->ns.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, sb->ns.pidfd, SIGKILL, NULL, 0);
        pthread_mutex_unlock(&sb->lock);
        if (sb->has_cg)
                cgroup_run_kill(&sb->cg);
}

static bool runner_alive(struct sandbox *sb)
{
        struct pollfd p = {.fd = sb->runner_pidfd, .events = POLLIN};

        return sb->runner_pidfd >= 0 && poll(&p, 1, 0) == 0;
}

/* SIGINT to the runner's process group (it called setsid as pid 2, spawn.c): python's
 * KeyboardInterrupt, bash's foreground job and its trap, node's breakOnSigint. */
static void cells_interrupt(struct sandbox *sb)
{
        pthread_mutex_lock(&sb->lock);
        /* the pidfd still pollable-not-readable: the runner lives, its pid is not reused */
        if (!sb->dead && runner_alive(sb))
                (void)kill(-sb->runner_pid, SIGINT);
        pthread_mutex_unlock(&sb->lock);
}

static bool cells_alive(struct sandbox *sb)
{
        bool dead;

        pthread_mutex_lock(&sb->lock);
        dead = sb->dead;
        pthread_mutex_unlock(&sb->lock);
        return !dead && runner_alive(sb);
}

/* One status record from the runner, waiting up to @timeout_ms. Return 0, -ETIMEDOUT, or
 * -EPIPE (EOF: the runner is gone) / -EBADMSG. */
static int read_record(struct sandbox *sb, int timeout_ms, struct sbx_runner_status *ret)
{
        uint64_t until = sbx_now_ms() + (uint64_t)timeout_ms;

        for (;;) {
                int t = sbx_runner_take_record(&sb->rec, ret);
                if (t != 0)
                        return t < 0 ? t : 0;
                ssize_t k = read(sb->status_r, sb->rec.buf + sb->rec.len,
                                 sizeof(sb->rec.buf) - sb->rec.len);
                if (k > 0) {
                        sb->rec.len += (size_t)k;
                        continue;
                }
                if (k == 0)
                        return -EPIPE;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -errno;
                uint64_t now = sbx_now_ms();
                if (now >= until)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = sb->status_r, .events = POLLIN};
                (void)poll(&p, 1, (int)(until - now));
        }
}

/* The runner is init's only child when it announced itself: its host pid. */
static pid_t find_runner(pid_t init)
{
        char path[64];
        long pid = 0;

        native_strf(path, sizeof(path), "/proc/%d/task/%d/children", (int)init, (int)init);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        if (fscanf(f, "%ld", &pid) != 1)
                pid = -1;
        fclose(f);
        return (pid_t)pid;
}

static int give_workspace(const struct sbx_config *cfg, struct sbx_error *err)
{
        struct stat st;
        int r = workspace_ensure(cfg->workspace_dir, err);

        if (r < 0)
                return r;
        if (geteuid() == 0 && stat(cfg->workspace_dir, &st) == 0 && st.st_uid == 0 &&
            chown(cfg->workspace_dir, cfg->run_as_uid, cfg->run_as_gid) < 0)
                return sbx_fail(err, errno, "cannot give the workspace '%s' to uid %u: %m",
                                cfg->workspace_dir, (unsigned)cfg->run_as_uid);
        return 0;
}

static void cells_destroy(struct sandbox *sb)
{
        struct run_result scratch = {0};

        if (!sb)
                return;
        cells_kill(sb);
        if (sb->ns.pid > 0)
                while (waitpid(sb->ns.pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
        native_sandbox_hand_close(&sb->ns); /* never handed its runner */
        if (sb->notify) {
                native_notify_finish(sb->notify, &scratch);
                free(sb->notify);
        }
        int fds[] = {sb->ns.pidfd, sb->ns.out_fd, sb->ns.err_fd,   sb->ns.sync_fd,
                     sb->cell_w,   sb->status_r,  sb->runner_pidfd};
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        close(fds[i]);
        if (sb->has_cg)
                cgroup_run_remove(&sb->cg);
        setup_rootfs_release(&sb->hold);
        pthread_mutex_destroy(&sb->lock);
        free(sb);
}

/* cells_spawn, last step: the runner's "ready" record, and its pid under init (for the
 * interrupt). */
static int cells_await_ready(struct sandbox *sb, uint64_t ready_ms, struct sbx_error *err)
{
        struct sbx_runner_status st;
        int r;

        r = read_record(sb, (int)ready_ms, &st);
        if (r < 0 || strcmp(st.kind, "ready") != 0) {
                char out[512] = "";
                ssize_t n;
                fcntl(sb->ns.err_fd, F_SETFL, O_NONBLOCK);
                n = read(sb->ns.err_fd, out, sizeof(out) - 1);
                out[n > 0 ? n : 0] = '\0';
                return sbx_fail(err, EIO,
                                "the session's %s interpreter did not start%s%s: run "
                                "`vestibule-mcp doctor`, then retry session_start",
                                sbx_language_name(sb->lang), out[0] ? ": " : "", out);
        }
        /* what it printed while it started is no cell's output (runners.h) */
        size_t dropped =
            sbx_runner_drop_startup(sb->ns.out_fd) + sbx_runner_drop_startup(sb->ns.err_fd);
        if (dropped)
                log_info("session: %zu bytes the interpreter printed as it started were dropped "
                         "(a .pth file or sitecustomize.py in the workspace?)",
                         dropped);
        sb->runner_pid = find_runner(sb->ns.pid);
        if (sb->runner_pid > 0)
                sb->runner_pidfd = (int)syscall(SYS_pidfd_open, sb->runner_pid, 0);
        if (sb->runner_pidfd < 0)
                return sbx_fail(err, ESRCH,
                                "cannot find the session's interpreter under its init (pid %d): "
                                "/proc/PID/task/PID/children needs CONFIG_PROC_CHILDREN",
                                (int)sb->ns.pid);
        return 0;
}

/* The session's two pipes: cells in (the runner's fd 4; @sb keeps the write end) and status
 * records out (its fd 5; @sb keeps the read end, non-blocking). */
static int cells_pipes(struct sandbox *sb, int *ret_cell_r, int *ret_status_w,
                       struct sbx_error *err)
{
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot create the session's cell pipe: %m");
        *ret_cell_r = p[0];
        sb->cell_w = p[1];
        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_fail(err, errno, "cannot create the session's status pipe: %m");
        sb->status_r = p[0];
        *ret_status_w = p[1];
        fcntl(sb->status_r, F_SETFL, O_NONBLOCK);
        return 0;
}

/* A one-shot run's environment with network "none" (pip's and npm's persistence) into @envp
 * (32 entries, NULL-terminated). */
static void cells_env(const char *envp[32])
{
        size_t n_env = 0;

        for (const char *const *e = egress_base_env; *e && n_env < 16; e++)
                envp[n_env++] = strncmp(*e, "PATH=", 5) == 0 ? EGRESS_SANDBOX_PATH : *e;
        for (const char *const *e = egress_sandbox_env(RUN_NETWORK_NONE); *e && n_env < 31; e++)
                envp[n_env++] = *e;
        envp[n_env] = NULL;
}

/* Where the session's processes are counted (a delegated cgroup made now, or a scope placed
 * after the clone), its rootfs held, and (a spare) what it was built from stamped. */
static int cells_place_and_hold(struct sandbox *sb, const struct cgroup_limits_info *li,
                                struct native_spawn *sp, struct sbx_error *err)
{
        const struct sbx_config *cfg = sb->cfg;
        int r;

        if (li->path == CGROUP_LIMITS_DELEGATED) {
                r = cgroup_run_create(li, cfg, &sb->cg, err);
                if (r < 0)
                        return r;
                sb->has_cg = true;
                sp->cgroup_fd = sb->cg.dir_fd;
        } else if (li->path == CGROUP_LIMITS_SCOPE) {
                sp->after_clone = scope_place;
                sp->after_clone_ud = sb;
                sb->has_cg = true;
        }
        r = setup_rootfs_hold(cfg->rootfs_dir, rootfs_tree(sb->lang), &sb->hold, err);
        if (r < 0)
                return r;
        if (sb->spare)
                return native_stamp_take(cfg, sb->hold.tree_fd, sb->grade, sb->probe_gen,
                                         &sb->stamp, err);
        return 0;
}

/* The runner's start: spawn with the pipes, the supervisor, and its "ready". */
static int cells_spawn(struct sandbox *sb, const struct native_filter *filter,
                       const struct cgroup_limits_info *li, struct sbx_error *err)
{
        const struct sbx_config *cfg = sb->cfg;
        _cleanup_free_ char *rootfs = xasprintf("%s/%s", cfg->rootfs_dir, rootfs_tree(sb->lang));
        _cleanup_close_ int cell_r = -1, status_w = -1;
        struct native_userns_limit quotas[NATIVE_USERNS_LIMITS];
        bool host_root = geteuid() == 0;
        size_t code_len;
        int r;

        r = cells_pipes(sb, &cell_r, &status_w, err);
        if (r < 0)
                return r;
        const char *code = sbx_runner_source(sb->lang, &code_len);
        const char *envp[32];
        cells_env(envp);
        struct native_spawn sp = {
            .rootfs = rootfs,
            .workspace = cfg->workspace_dir,
            .workspace_ro = cfg->workspace_ro,
            .tmpfs_mb = cfg->tmpfs_mb,
            /* as a one-shot run's: the cgroup is the cap where there is one, the rlimit a
             * backstop a few tasks above it (backend.c, nproc_limit) */
            .pids_max =
                cfg->pids_max == 0 || li->path == CGROUP_LIMITS_NONE || strstr(li->missing, "pids")
                    ? cfg->pids_max
                    : cfg->pids_max + 4,
            .userns_limits = quotas,
            .n_userns_limits = native_userns_limits(cfg->max_concurrent, quotas),
            /* the runner's source is the program, handed over once the sandbox is up */
            .code_max = code_len > cfg->max_code_bytes ? code_len : cfg->max_code_bytes,
            .fifo = sb->lang != SBX_LANG_BASH,
            .script = sbx_language_script(sb->lang),
            .argv = sbx_runner_argv(sb->lang),
            .filter = filter,
            .host_uid = host_root ? cfg->run_as_uid : getuid(),
            .host_gid = host_root ? cfg->run_as_gid : getgid(),
            .host_root = host_root,
            .cgroup_fd = -1,
            .envp = envp,
            .cells = true,
            .cell_in_fd = cell_r,
            .status_out_fd = status_w,
        };
        native_strf(sb->image, sizeof(sb->image), "%s", rootfs);
        r = cells_place_and_hold(sb, li, &sp, err);
        if (r < 0)
                return r;
        r = native_spawn(&sp, &sb->ns, err);
        setup_rootfs_settled(&sb->hold);
        if (r < 0) {
                sb->ns = NATIVE_SANDBOX_NONE;
                return r;
        }
        sb->notify = xcalloc(1, sizeof(*sb->notify));
        r = native_notify_start(sb->notify, sb->ns.listener_fd, sb->ns.sync_fd, NULL, NULL, err);
        if (r < 0)
                return r;
        /* the runner is the program: handed over like a one-shot run's code (spawn.c) */
        uint64_t ready_ms = (uint64_t)cfg->default_timeout_s * 1000u;
        if (ready_ms < CELLS_READY_MS)
                ready_ms = CELLS_READY_MS;
        uint64_t ready_by = sbx_now_ms() + ready_ms;
        r = native_handover(&sb->ns, code, code_len, sb->notify->ended_fd, ready_by, err);
        if (r < 0)
                return r;
        /* the runner keeps the only write end: EOF here means it is gone */
        close(TAKE_FD(status_w));
        close(TAKE_FD(cell_r));

        return cells_await_ready(sb, ready_ms, err);
}

static int cells_prepare(struct backend *b, const struct sandbox_spec *spec, struct sandbox **ret,
                         struct sbx_error *err)
{
        const struct sbx_config *cfg = spec->cfg ? spec->cfg : b->cfg;
        const struct native_filter *filter = NULL;
        struct cgroup_limits_info li;
        struct backend_probe probe;
        struct sandbox *sb;
        int r;

        if (spec->mode != SANDBOX_MODE_CELLS)
                return sbx_fail(err, EOPNOTSUPP, "native cells ops serve sessions only");
        /* fail closed: a session's sandbox has no egress listener */
        if (spec->network != RUN_NETWORK_NONE)
                return sbx_fail(err, EOPNOTSUPP,
                                "network \"allowlist\" is not available in a session");
        r = b->ops->probe(b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, EPERM, "%s", probe.blocked);
        r = give_workspace(cfg, err);
        if (r < 0)
                return r;
        native_backend_facts(b, &filter, &li);

        sb = xcalloc(1, sizeof(*sb));
        sb->spare = spec->spare;
        sb->probe_gen = native_backend_probe_gen(b);
        sb->b = b;
        sb->cfg = cfg;
        sb->lang = spec->language;
        sb->cg.dir_fd = -1;
        sb->cell_w = sb->status_r = sb->runner_pidfd = -1;
        sb->ns = NATIVE_SANDBOX_NONE;
        pthread_mutex_init(&sb->lock, NULL);
        native_strf(sb->grade, sizeof(sb->grade), "%s", probe.grade);
        r = cells_spawn(sb, filter, &li, err);
        if (r < 0) {
                cells_destroy(sb);
                return r;
        }
        *ret = sb;
        return 0;
}

static int cells_start(struct sandbox *sb, const struct run_request *req, struct sandbox_io *ret_io,
                       struct sbx_error *err)
{
        int r;

        if (!cells_alive(sb))
                return sbx_fail(err, ESRCH, "the session's interpreter is gone");
        r = sbx_runner_check_cell(req, sb->lang, err);
        if (r < 0)
                return r;
        r = sbx_runner_send_cell(sb->cell_w, ++sb->seq, req->code, req->code_len,
                                 sbx_now_ms() + CELLS_WRITE_MS);
        if (r < 0) {
                cells_kill(sb);
                return sbx_fail(err, ESRCH, "cannot hand the cell to the session's interpreter: %s",
                                strerror(-r));
        }
        *ret_io = (struct sandbox_io){
            .out_fd = sb->ns.out_fd,
            .err_fd = sb->ns.err_fd,
            .pid = sb->ns.pid,
            .pidfd = sb->ns.pidfd,
            .ended_fd = sb->status_r,
            .flags = SANDBOX_IO_CELL,
        };
        return 0;
}

static void not_measured(struct run_measure *m, const char *why)
{
        m->measured = false;
        native_strf(m->why, sizeof(m->why), "%s", why);
}

/* Usage of this call: CPU as the cgroup's delta since the last call; memory and tasks as the
 * session's peaks so far. */
static void cells_usage(struct sandbox *sb, struct run_result *res)
{
        struct run_result now = {0};

        if (!sb->has_cg || !cgroup_run_read(&sb->cg, sb->cfg, &now)) {
                const char *why = sb->has_cg ? "the session's cgroup could not be read"
                                             : "no cgroup of its own on this host";
                not_measured(&res->usage.cpu_us, why);
                not_measured(&res->usage.mem_peak_bytes, why);
                not_measured(&res->usage.pids_peak, why);
                return;
        }
        /* The kernel counts an OOM kill in memory.events after it sends the SIGKILL: a cell
         * whose interpreter died at the cap can be read before the count (seen in the systemd
         * VM under emulation: "the session's interpreter exited" at mem_peak 64.0 MiB). With
         * the peak at the limit, read again for up to 500 ms. */
        for (int i = 0; i < 25 && !now.oom_killed && now.mem_limit_bytes &&
                        now.usage.mem_peak_bytes.measured &&
                        now.usage.mem_peak_bytes.value + (1u << 20) >= now.mem_limit_bytes;
             i++) {
                struct run_result again = {0};
                usleep(20000);
                if (cgroup_run_read(&sb->cg, sb->cfg, &again) && again.oom_killed)
                        now.oom_killed = true;
        }
        res->usage.cpu_us = now.usage.cpu_us;
        if (now.usage.cpu_us.measured) {
                uint64_t total = now.usage.cpu_us.value;
                res->usage.cpu_us.value = total > sb->cpu_us_seen ? total - sb->cpu_us_seen : 0;
                sb->cpu_us_seen = total;
        }
        res->usage.mem_peak_bytes = now.usage.mem_peak_bytes;
        res->usage.pids_peak = now.usage.pids_peak;
        memcpy(res->limits_hit, now.limits_hit, sizeof(res->limits_hit));
        res->mem_limit_bytes = now.mem_limit_bytes;
        res->oom_killed = now.oom_killed && !sb->oom_seen;
        sb->oom_seen = now.oom_killed;
}

static int cells_collect(struct sandbox *sb, const struct sandbox_watch *w, struct run_result *res,
                         struct sbx_error *err)
{
        struct sbx_runner_status st = {0};
        int r = -EPIPE;

        (void)err;
        native_strf(res->backend, sizeof(res->backend), "native");
        native_strf(res->image, sizeof(res->image), "%s", sb->image);
        native_strf(res->isolation, sizeof(res->isolation), "%s", sb->grade);
        /* the record of this cell (an earlier one cannot be pending: each start waits for its
         * cell's end or ends the session) */
        if (w->by_ended_fd)
                while ((r = read_record(sb, 0, &st)) == 0 && st.seq != sb->seq)
                        ;
        if (r < 0)
                cells_kill(sb); /* no record: the runner is gone or spoke nonsense */
        if (w->forced == RUN_OUTCOME_NONE) {
                res->outcome = RUN_OUTCOME_EXITED;
                res->exit_code = r == 0 ? st.code : 1;
        }
        if (w->by_ended_fd && w->forced == RUN_OUTCOME_NONE)
                (void)sbx_runner_channel_broken(r, res); /* not the runner's words */
        if (r == 0 && strcmp(st.kind, "interrupted") == 0 && w->forced == RUN_OUTCOME_NONE)
                run_result_note(res, "the cell was interrupted (SIGINT from inside the session)");
        cells_usage(sb, res);
        if (sb->notify) {
                pthread_mutex_lock(&sb->notify->lock);
                const char *names = sb->notify->names;
                size_t len = strlen(names);
                if (len > sb->names_seen) {
                        const char *fresh = names + sb->names_seen;
                        if (*fresh == ',')
                                fresh += 2;
                        native_strf(res->blocked_syscalls, sizeof(res->blocked_syscalls), "%s",
                                    fresh);
                        sb->names_seen = len;
                }
                res->blocked_reporting_stopped = sb->notify->stopped_reporting;
                pthread_mutex_unlock(&sb->notify->lock);
        }
        return 0;
}

/* A session took this spare: used only if everything it was built from is still so now
 * (as a one-shot spare's start(), backend.c); the session's CPU counts from here. */
static int cells_claim(struct sandbox *sb, struct sbx_error *err)
{
        struct backend_probe probe;
        uint64_t cpu_us;
        int r;

        if (!sb->spare)
                return 0;
        sb->spare = false; /* claimed once */
        r = sb->b->ops->probe(sb->b, &probe, err);
        if (r < 0)
                return r;
        if (!probe.usable)
                return sbx_fail(err, ESTALE, "%s", probe.blocked);
        r = native_stamp_check(&sb->stamp, sb->cfg, sb->image, probe.grade,
                               native_backend_probe_gen(sb->b), err);
        if (r < 0)
                return r;
        if (!cells_alive(sb))
                return sbx_fail(err, ESTALE, "the spare session's interpreter is gone");
        if (sb->has_cg && cgroup_run_cpu_us(&sb->cg, &cpu_us))
                sb->cpu_us_seen = cpu_us;
        return 0;
}

const struct sandbox_ops native_cells_ops = {
    .prepare = cells_prepare,
    .start = cells_start,
    .kill = cells_kill,
    .collect = cells_collect,
    .destroy = cells_destroy,
    .interrupt = cells_interrupt,
    .alive = cells_alive,
    .claim = cells_claim,
};
