/* native.h - the native Linux backend's internal seams: the seccomp profile and its
 * user-notification supervisor (seccomp.c), the sandbox's setup as two ordered step lists
 * (spawn.c: the parent's and the child's), Landlock (landlock.c) and the limits/usage paths
 * (cgroup.c: a systemd scope, a delegated cgroup v2 subtree, or rlimits only). Only files
 * under src/native include it; everything else goes through backend.h. */
#pragma once

#include <linux/filter.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "cgroup/cgroup.h"
#include "common/trace.h"
#include "config/config.h"
#include "native/hostrun.h"
#include "run/run.h"

/* The uid and gid the code runs as inside the sandbox, like the images' `sandbox` user. It is
 * mapped to exactly one host id (the server's own, or VESTIBULE_RUN_AS when the server is
 * root), so no host id but that one exists in there, and host root never does. */
#define NATIVE_INNER_UID 1000
#define NATIVE_INNER_GID 1000

/* snprintf that may truncate on purpose (paths and reasons cut at their buffer's size). */
__attribute__((format(printf, 3, 4))) static inline void native_strf(char *buf, size_t size,
                                                                     const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
}

/* At most this many blocked calls are reported per run; then the supervisor closes the
 * listener and the kernel itself fails later ones with ENOSYS (no round trip any more). */
#define NATIVE_MAX_REPORTS 256

/* ---- seccomp.c ------------------------------------------------------------------------ */

/* The compiled profile: a classic BPF program, built once per server before any clone(), so
 * the child only has to hand it to seccomp(2) (no allocation after clone). */
struct native_filter {
        struct sock_fprog prog; /* .filter is owned */
};

/**
 * native_filter_build() - compile the profile: Docker's default allowlist (the calls it
 * allows without capabilities, on this architecture), a named set of dangerous calls that go
 * to the user-notification supervisor (EPERM, reported), clone3 -> ENOSYS, everything else
 * EPERM without a report. A call from another architecture kills the process.
 * @ret: filled on success; free with native_filter_done().
 * Return: 0, or -errno from libseccomp (@err names the call that failed).
 */
int native_filter_build(struct native_filter *ret, struct sbx_error *err);

/**
 * native_filter_build_host() - native_filter_build() for `run -- CMD` (hostrun.c): the same
 * profile, but open, openat, openat2, connect and a sendto with an address go to the
 * supervisor too, which records the
 * ones that name a watched path or an address and lets each through unchanged
 * (native_notify_start_watch()). Costs one round trip to the supervisor per open.
 * Return: as native_filter_build().
 */
int native_filter_build_host(struct native_filter *ret, struct sbx_error *err);

/** native_filter_done() - free what @f holds. */
void native_filter_done(struct native_filter *f);

/** native_filter_is_notified() - whether @name is one of the reported dangerous calls. */
bool native_filter_is_notified(const char *name);

/* The supervisor of one run: a thread that answers each seccomp notification with EPERM
 * (up to NATIVE_MAX_REPORTS; then it closes the listener and the kernel answers ENOSYS) and
 * records the call's name; it also takes init's
 * report that the program ended (everything else in the sandbox is dead by then), lets
 * @on_exit read the run's cgroup while init still keeps it alive, then releases init. */
struct native_notify {
        pthread_t thread;
        bool started;
        int listener_fd; /* owned; -1 once closed at the reporting cap */
        int stop_fd;     /* eventfd: stop the thread */
        int sync_fd;     /* borrowed: init's sync socket */
        int ended_fd;    /* eventfd, readable once init reported the program's end (after
                          * on_exit): every process of the run but init is gone then */
        void (*on_exit)(void *ud);
        void *on_exit_ud;
        pthread_mutex_t lock;
        unsigned reports;
        bool stopped_reporting;
        char names[2048];  /* "mount, bpf": unique, first-seen order; fits every notified name */
        unsigned unlisted; /* reports whose name no longer fit in @names */
        bool have_status;  /* init reported the program's wait status */
        int status;
        int tasks_at_end;   /* tasks init counted when the program ended; -1 = not counted */
        uint64_t status_us; /* when that report arrived (sbx_trace_now_us()), for the trace */
        bool exec_failed;   /* the program could not be executed: exec_err says why */
        struct sbx_error exec_err;
        /* native_notify_start_watch() only: */
        bool watching;            /* open/openat/openat2/connect come here too (let through) */
        const char *const *watch; /* absolute paths whose opening (or beneath) is recorded */
        int watch_nr[5]; /* open, openat, openat2, connect, sendto here (-1: not on this arch) */
        uint32_t watch_arch;     /* seccomp_arch_native(): the arch those numbers are of */
        uint16_t skip_port;      /* a connect to 127.0.0.1:@skip_port (the proxy) not recorded */
        char tried[1024];        /* "open /home/u/.ssh/id_ed25519, connect 10.0.0.1:443" */
        unsigned tried_unlisted; /* attempts whose text no longer fit in @tried */
        char left[128];          /* names of the processes left when the program ended */
};

/**
 * native_notify_start() - take ownership of @listener_fd and start the supervisor thread,
 * which also watches @sync_fd (borrowed) for init's end-of-program report.
 * Return: 0 or -errno (then @listener_fd is closed; every notified call of the run then
 * fails with ENOSYS, as the kernel does for a listener that went away).
 */
int native_notify_start(struct native_notify *n, int listener_fd, int sync_fd,
                        void (*on_exit)(void *ud), void *on_exit_ud, struct sbx_error *err);

/**
 * native_notify_start_watch() - native_notify_start() for a filter of
 * native_filter_build_host(): each open of a path in @watch (absolute, NULL-ended, borrowed
 * until native_notify_finish(); NULL = none) or beneath it, and each connect's or addressed
 * sendto's address (IPv4, IPv6, unix; 127.0.0.1:@skip_port left out, 0 = none), is recorded in
 * @n->tried (unique, first-seen order) and let through unchanged. The supervisor never closes its
 * listener at the reporting cap (every open would then fail with ENOSYS). Best effort by nature:
 * the path is read from the caller's memory, which another of its threads may change after; a
 * symlink is not followed. The masks keep secrets out; this only names what was tried. Return: as
 * native_notify_start().
 */
int native_notify_start_watch(struct native_notify *n, int listener_fd, int sync_fd,
                              const char *const *watch, uint16_t skip_port, struct sbx_error *err);

/**
 * native_notify_finish() - stop the thread (after the sandbox is gone), copy the names into
 * @res->blocked_syscalls and the reporting-stopped flag, and free what @n holds.
 */
void native_notify_finish(struct native_notify *n, struct run_result *res);

/* ---- landlock.c ----------------------------------------------------------------------- */

/** native_landlock_abi() - the kernel's Landlock ABI version, 0 when absent or disabled. */
int native_landlock_abi(void);

/**
 * native_landlock_apply() - in the child, after pivot_root and no_new_privs: allow writes only
 * beneath /tmp, /dev/shm, /workspace (unless @workspace_ro), each folder of @writable
 * (NULL-ended; NULL = none) and to the /dev nodes; reads everywhere. Async-signal-safe (raw
 * syscalls only). Return: the ABI applied (>= 1), 0 when the kernel has no Landlock, or -errno.
 */
int native_landlock_apply(bool workspace_ro, const char *const *writable);

/* ---- limits (src/cgroup) ---------------------------------------------------------- */

/**
 * native_grade_limits() - the isolation grade given how runs get their limits (@li, from
 * cgroup_limits_detect()): "native", or "native-degraded (limits not applied: ...)" naming
 * what is missing and why, into @grade (@size bytes). Return: true when degraded.
 */
bool native_grade_limits(const struct cgroup_limits_info *li, char *grade, size_t size);

/**
 * native_backend_force_limits() - use @li instead of what cgroup_limits_detect() finds (tests:
 * a delegated cgroup v2 subtree made for the test on a host whose detection says none).
 */
struct backend;
void native_backend_force_limits(struct backend *b, const struct cgroup_limits_info *li);

/**
 * native_backend_settle() - wait until the inits of finished runs are reaped and their cgroups
 * removed (the backend does that after a run's result is complete, in its reaper thread).
 * Tests call it before they look for leftovers.
 */
void native_backend_settle(struct backend *b);

/**
 * native_backend_facts() - what a sandbox of @b is built with, for the session sandbox
 * (cells.c): the compiled seccomp filter (borrowed; lives as long as @b) and how runs get their
 * cgroup (as found by the last probe, which the caller ran first).
 */
struct native_filter;
void native_backend_facts(struct backend *b, const struct native_filter **ret_filter,
                          struct cgroup_limits_info *ret_limits);

/**
 * native_backend_probe_gen() - @b's probe generation (bumped whenever its cached probe is
 * dropped): what a spare records when it is built and compares before use (stamp.c).
 */
unsigned native_backend_probe_gen(struct backend *b);

/* ---- cells.c: a session's live sandbox (SANDBOX_MODE_CELLS) --------------------------- */

struct sandbox_ops;
/* The sandbox ops of a native session: prepare starts the language's runner
 * (src/run/runners/) as the program under init, with the cell and status pipes on fds 4 and 5;
 * each start feeds it one cell. See docs/design/sessions.md. */
extern const struct sandbox_ops native_cells_ops;

/* ---- spawn.c -------------------------------------------------------------------------- */

/* One per-user-namespace quota the child sets in its own user namespace (user_namespaces(7),
 * /proc/sys/user/max_*): @file under /proc/sys/user, @value its decimal text. */
struct native_userns_limit {
        const char *file;
        char value[24];
};
#define NATIVE_USERNS_LIMITS 12

/**
 * native_userns_limits() - the quotas for one run, given the server's own (read from
 * /proc/sys/user here, in the server's user namespace) and @max_concurrent runs: the inotify
 * instances and watches of all concurrent runs together stay under half the user's, and
 * namespaces and fanotify groups/marks are 0 (the seccomp filter refuses creating either
 * anyway). The kernel charges a run's count at every level of the user namespace hierarchy
 * (kernel/ucount.c, inc_ucount()), so the run's lower cap is hit first.
 * Return: how many entries of @ret were filled.
 */
unsigned native_userns_limits(unsigned max_concurrent,
                              struct native_userns_limit ret[NATIVE_USERNS_LIMITS]);

/* Everything the child needs, prepared by the parent before clone(). */
struct native_spawn {
        const char *rootfs;    /* host path of the tree that becomes / */
        const char *workspace; /* host path bound at /workspace */
        bool workspace_ro;
        unsigned tmpfs_mb;
        unsigned pids_max; /* RLIMIT_NPROC inside the run's own user namespace */
        const struct native_userns_limit *userns_limits; /* written in the run's user namespace */
        bool count_tasks; /* init counts the run's tasks when the program ends (no cgroup) */
        unsigned n_userns_limits;
        size_t code_max;    /* the largest program (VESTIBULE_MAX_CODE_BYTES): /sandbox's size */
        bool fifo;          /* the interpreter starts now and reads the program from a FIFO
                             * at /sandbox/<script> (python, node); else the program waits
                             * on the go pipe and execs at the hand-over (bash) */
        const char *script; /* "main.py" */
        const char *const *argv; /* interpreter name (searched on PATH inside) and args */
        const struct native_filter *filter;
        uid_t host_uid; /* the host ids the inner ids map to */
        gid_t host_gid;
        bool host_root; /* server is root: setgroups allowed, cleared to none */
        int cgroup_fd;  /* CLONE_INTO_CGROUP target, or -1 */
        int (*after_clone)(void *ud, pid_t pid, struct sbx_error *err); /* SCOPE placement */
        void *after_clone_ud;
        struct sbx_trace *trace; /* the run's timing trace (VESTIBULE_TRACE=timing), or NULL */
        const char *const *envp; /* the program's environment; NULL = the fixed default */
        bool egress; /* network "allowlist": init listens on 127.0.0.1:EGRESS_PORT inside the
                        run's netns and passes that listener out (docs/design/egress.md) */
        /* A session's interpreter (SANDBOX_MODE_CELLS): @cell_in_fd (read end of the cell
         * pipe) and @status_out_fd (write end of the status pipe) become the program's fds 4
         * and 5, the program leads a process group of its own (setsid: an interrupt reaches
         * its foreground job), and init keeps neither. Both unused unless @cells. */
        bool cells;
        int cell_in_fd, status_out_fd;
        /* NULL: the rootfs tree and /workspace, as for run_code. Else the host view (above);
         * the program then also gets the server's own stdin, stdout and stderr (fds 0-2) instead
         * of /dev/null and the output pipes, and no /workspace exists. */
        const struct native_host_view *host_view;
};

/* Checkpoints of the child's setup (CLOCK_MONOTONIC µs, sbx_trace_now_us()), for the timing
 * trace: each phase is the time from the previous checkpoint. */
enum native_child_mark {
        NATIVE_MARK_ENTRY = 0, /* the child runs */
        NATIVE_MARK_GO,        /* id maps written by the parent (and the cgroup placed) */
        NATIVE_MARK_ROOTFS,    /* rootfs and workspace bound, read-only/nosuid set */
        NATIVE_MARK_MOUNTS,    /* /tmp, /proc, /dev, /sandbox with the script */
        NATIVE_MARK_PIVOT,     /* pivot_root and the host tree detached */
        NATIVE_MARK_UTS_NET,   /* hostname, lo up */
        NATIVE_MARK_CREDS,     /* rlimits, uid/gid, capabilities, no_new_privs */
        NATIVE_MARK_LANDLOCK,  /* Landlock ruleset applied */
        NATIVE_MARK_SECCOMP,   /* the filter loaded */
        NATIVE_MARK_COUNT,
};

/* What the child reported back while setting up. */
struct native_child_info {
        int landlock_abi;   /* >0 applied with that ABI, 0 not available */
        bool proc_hidepid;  /* /proc mounted with hidepid=invisible */
        uint64_t pidns_ino; /* inode of the run's pid namespace (nsfs), 0 when unknown: init
                             * itself is not dumpable, so the host cannot read its ns link */
        uint64_t mark_us[NATIVE_MARK_COUNT];
};

/* A started sandbox: init (pid 1 of its pid namespace) is running the program. */
struct native_sandbox {
        pid_t pid;
        int pidfd;
        int out_fd, err_fd; /* read ends */
        int sync_fd;        /* the program's wait status arrives here */
        int listener_fd;    /* seccomp user-notification fd */
        int egress_fd;      /* @sp->egress: the listener inside the run's netns; else -1 */
        /* The hand-over (native_handover()), -1 once done: the program's file in /sandbox's
         * stage folder (O_WRONLY), the folder seen as /sandbox and the stage folder (O_PATH,
         * on /sandbox's writable tmpfs, which nothing inside can reach), the go pipe's write
         * end (bash only). */
        int code_fd, sdir_fd, stage_fd, go_fd;
        bool fifo;
        char script[16];
        struct native_child_info info;
};

/* A native_sandbox holding nothing: every fd -1 (what native_spawn() leaves after a failure
 * and what a sandbox not yet spawned holds, so that its cleanup closes nothing). */
#define NATIVE_SANDBOX_NONE                                                                        \
        ((struct native_sandbox){.pidfd = -1,                                                      \
                                 .out_fd = -1,                                                     \
                                 .err_fd = -1,                                                     \
                                 .sync_fd = -1,                                                    \
                                 .listener_fd = -1,                                                \
                                 .egress_fd = -1,                                                  \
                                 .code_fd = -1,                                                    \
                                 .sdir_fd = -1,                                                    \
                                 .stage_fd = -1,                                                   \
                                 .go_fd = -1})

/* The fds READY carries: the listener, the four of the hand-over, the egress listener. */
#define NATIVE_PASS_FDS 6

/**
 * native_spawn() - the parent's ordered list: pipes and sync socket, clone3 into new
 * user/pid/mount/net/uts/ipc/cgroup namespaces (into @sp->cgroup_fd's cgroup when given),
 * write the id maps, let the child set itself up, and collect its listener fd or its error.
 * Return: 0 with @ret filled (the caller supervises and reaps), or -errno with @err holding
 * the child's own error when it failed during setup (nothing is left running then).
 */
int native_spawn(const struct native_spawn *sp, struct native_sandbox *ret, struct sbx_error *err);

/**
 * native_handover() - give a spawned sandbox its program, once: write @code into the stage
 * file, wait (bounded by @deadline_ms, sbx_now_ms() clock) until the interpreter holds the
 * FIFO open (it has started), rename the file over the FIFO, and stream @code through the
 * FIFO (python, node); or write it into /sandbox/main.sh and send the go byte (bash, which
 * execs then).
 * The program sees /sandbox/<script> as a regular read-only file with @code, as argv names
 * it. @ended_fd (or -1): readable when init reported the program's end (native_notify), which
 * ends the wait. Closes the hand-over fds whatever happens.
 * Return: 0; -EALREADY when @sb was handed a program before (a sandbox is never reused);
 * -ESRCH (the interpreter ended first), -ETIMEDOUT, -errno, each with @err.
 */
int native_handover(struct native_sandbox *sb, const char *code, size_t code_len, int ended_fd,
                    uint64_t deadline_ms, struct sbx_error *err);

/** native_sandbox_hand_close() - close the hand-over fds of a sandbox never handed a
 * program (a spare destroyed unused: a blocked interpreter sees EOF, bash's go pipe EOF). */
void native_sandbox_hand_close(struct native_sandbox *sb);

/**
 * native_sandbox_read() - read one report of init from @sync_fd.
 * Return: 0 with *@ret_status (the program's wait status) and *@ret_tasks (the run's tasks
 * init counted before its final kill, -1 when it did not count: native_spawn.count_tasks) and
 * @ret_left (the names of the processes left then besides init and the program, ", " between,
 * "" when none or not counted), -ENOEXEC
 * when the program could not be executed (@err says why; @err->code is the exec's errno),
 * -ENODATA on EOF or anything else.
 */
int native_sandbox_read(int sync_fd, int *ret_status, int *ret_tasks, char ret_left[128],
                        struct sbx_error *err);

/** native_sandbox_release() - let init exit (it waits after reporting the program's end). */
void native_sandbox_release(int sync_fd);

/* ---- stamp.c -------------------------------------------------------------------------- */

/* What a sandbox prepared ahead (a warm spare) was built from, to refuse it at start() when
 * any of it changed since: the settings it used, the workspace folder it bound, the rootfs
 * tree it mounted (setup swaps a new one in under the same name, rootfs/hold.h), and the
 * probe's answer (its grade and the backend's probe generation). */
struct native_stamp {
        char settings[1024]; /* the settings a sandbox is built from, as text */
        dev_t ws_dev, tree_dev;
        ino_t ws_ino, tree_ino;
        unsigned probe_gen;
        char grade[320];
        bool user_site; /* a Python user site existed in the workspace (stamp.c) */
};

/**
 * native_stamp_take() - fill @ret for a sandbox of @cfg (borrowed) mounting the rootfs tree
 * @tree_fd (the hold's fd, rootfs/hold.h), under the probe answer @grade of generation @gen.
 * Return: 0, or -errno with @err when the workspace cannot be stat'ed.
 */
int native_stamp_take(const struct sbx_config *cfg, int tree_fd, const char *grade, unsigned gen,
                      struct native_stamp *ret, struct sbx_error *err);

/**
 * native_stamp_check() - is @st still what a sandbox for @cfg and rootfs tree path @tree_path
 * would be built from now, with the probe answer @grade of generation @gen?
 * Return: 0 when it is, else -ESTALE with @err saying what changed.
 */
int native_stamp_check(const struct native_stamp *st, const struct sbx_config *cfg,
                       const char *tree_path, const char *grade, unsigned gen,
                       struct sbx_error *err);
