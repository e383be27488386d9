/* hostrun.h - `vestibule-mcp run -- CMD`: one host command in a native sandbox whose root is
 * the host view (the host's system folders read-only, the project read-write, $HOME empty,
 * secrets masked) instead of a rootfs tree, with the caller's own stdin/stdout/stderr. The
 * same clone, namespaces, id map, seccomp filter, Landlock and cgroup path as run_code
 * (src/native/spawn.c; the host view is its native_spawn.host_view). docs/run-command.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"

/* The host view: the child mounts a fresh tmpfs on an empty folder the caller made and builds
 * the root in it from the host's own folders, so the user's tools run: @system read-only at
 * their own paths (a host symlink such as /bin -> usr/bin is copied as a symlink; an absent
 * one is skipped), @rw read-write and @ro read-only at their own paths, @home an empty
 * writable folder of the run's scratch tmpfs, then @masks (files: the empty /dev/null bound
 * over them; folders: an empty read-only tmpfs) wherever they exist in the tree built so far.
 * The tmpfs root itself ends read-only. Lists: absolute paths, NULL-ended, owned by the
 * caller. */
struct native_host_view {
        const char *const *system;   /* "/usr", "/etc", ... (native_host_system_dirs) */
        const char *const *rw;       /* the project folders (--allow) */
        const char *const *ro;       /* --allow-read */
        const char *const *masks;    /* secrets (src/config/secrets.list) and --deny */
        const char *home;            /* $HOME as the program sees it: empty, private, writable */
        const char *cwd;             /* the program's working directory */
        const char *exe;             /* executed as given (absolute); argv[0] is only its name */
        const char *const *writable; /* Landlock: writes allowed beneath these (@rw, @home) */
        int pty_slave;       /* > 0: a pty slave the caller made (run_pty.h): it replaces each of
                              * fds 0-2 that is a terminal and becomes the command's controlling
                              * terminal; 0: none (the command gets the caller's fds 0-2 as they are) */
        const char *overlay; /* NULL, or --overlay: each @rw[i] is the lower layer of an
                              * overlayfs whose upper and work folders are @overlay/i/u and
                              * @overlay/i/w (host folders the caller made and reads after) */
};

/* The host's system folders the view binds read-only, NULL-ended. */
extern const char *const native_host_system_dirs[];

/* One command to run. */
struct native_host_req {
        struct native_host_view view;
        const char *const *argv;  /* the command's argv (argv[0] its name) */
        const char *const *envp;  /* its environment (the secrets already taken out) */
        uint64_t timeout_ms;      /* 0 = none */
        bool egress;              /* network through the allowlist proxy (cfg->egress) */
        const char *const *watch; /* absolute paths (the secrets' and the masks'): an open of one
                                   * or beneath it is named in the result's @tried; NULL = none */
        int cancel_fd; /* a signalfd of SIGINT/SIGTERM/SIGHUP (forwarded to the command, which
                        * has 2 s to end, then the sandbox is killed) and SIGWINCH (forwarded),
                        * or -1 */
};

/* What happened. */
struct native_host_result {
        int exit_code;     /* the contract: own code, 128+N, 124 timeout, 126/127 exec */
        bool timed_out;    /* killed at timeout_ms */
        int cancel_signal; /* the signal that stopped it (cancel_fd), 0 = none */
        char grade[320];   /* "native", "native-degraded (limits not applied: ...)" */
        bool degraded;
        uint64_t wall_ms;   /* from the clone to the end */
        uint64_t cpu_us;    /* user + system of the whole sandbox (init's children included) */
        uint64_t maxrss_kb; /* the largest resident set of any of its processes */
        char blocked[512];  /* calls the seccomp filter refused and reported, "" = none */
        char tried[1536];   /* what the command tried, "" = nothing: "open PATH" (a watched path,
                             * seen by the seccomp supervisor, native_notify_start_watch()),
                             * "connect HOST:PORT" (any address but the proxy's), "proxy
                             * refused HOST:PORT (reason)", "left N processes, killed: NAMES"
                             * (alive when the command ended; init killed them) */
};

/**
 * native_host_grade() - the isolation grade a host run would get here (the cgroup path for
 * limits, as the native backend grades run_code), into @ret->grade and @ret->degraded.
 */
void native_host_grade(const struct sbx_config *cfg, struct native_host_result *ret);

/**
 * native_host_run() - run @req's command in a native sandbox with the host view and wait for
 * it (or its timeout, or @req->cancel_fd), filling @ret (grade included).
 * Return: 0 when the command ran (@ret->exit_code its result per the contract);
 * -ENOEXEC when it could not be executed (@ret->exit_code 127 for ENOENT, else 126; @err says
 * why); any other -errno when the sandbox could not be set up (@err names the fix: exit 125).
 */
int native_host_run(const struct sbx_config *cfg, const struct native_host_req *req,
                    struct native_host_result *ret, struct sbx_error *err);
