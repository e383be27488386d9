/* hostrun.h - `vestibule-mcp run -- CMD` on the container backend (hostrun.c): one host
 * command in a container of a LOCAL engine (Docker as a docker-group user, rootful Podman as
 * root with VESTIBULE_RUN_AS, rootless Podman) whose filesystem is the host view: the host's
 * system folders bound read-only at their own paths, the project read-write, $HOME an empty
 * private folder, the secrets masked, and run_code's lockdown (body.c, checked back by
 * engine_verify_inspect()). stdio goes through three FIFOs bound into the container
 * (docs/run-command.md, "The container backend"). A remote engine (the volume path) cannot
 * bind host folders: refused. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"

/* One command, as the native one (src/native/hostrun.h native_host_req); lists: absolute
 * paths, NULL-ended, borrowed. */
struct engine_host_req {
        const char *const *system; /* host folders bound read-only ("/usr", "/etc", ...); a host
                                    * symlink (/bin -> usr/bin) is left to the image's own */
        const char *const *rw;     /* --allow: read-write at their own paths */
        const char *const *ro;     /* --allow-read and the kept names: read-only */
        const char *const *masks;  /* files: an empty read-only file over them; folders: an
                                    * empty read-only folder */
        const char *home;          /* an empty private writable folder at this path; NULL: none */
        const char *cwd;           /* the working directory */
        const char *exe;           /* the program, a path (resolved on the host's PATH) */
        const char *const *argv;   /* its argv (argv[0] its name) */
        const char *const *envp;   /* the environment, secrets already taken out */
        uint64_t timeout_ms;       /* 0 = none */
        bool egress;               /* --net allowlist: the relay and the proxy (cfg->egress) */
        int cancel_fd; /* signalfd of SIGINT/SIGTERM/SIGHUP (forwarded to the command through
                        * the engine's kill; 2 s later the container is killed), or -1 */
};

struct engine_host_result {
        int exit_code;     /* the contract: own code, 128+N, 124 timeout, 126/127 exec */
        bool timed_out;    /* killed at timeout_ms */
        int cancel_signal; /* the forwarded signal, 0 = none */
        char grade[320];   /* "container", "container-degraded (...)" */
        bool degraded;
        uint64_t wall_ms; /* from the start call to the wait's answer */
        char tried[1536]; /* "proxy refused HOST:PORT (reason), ..." (--net allowlist), "" =
                           * none: the proxy's refusals, as native's result names them */
};

/**
 * engine_host_run() - run @req on @cfg's container engine and wait for it (or its timeout, or
 * @req->cancel_fd): connect and probe as run_code's backend does (engine_backend_new()), create
 * a container of the python image (engine_image_for()) with the host view's mounts, verify it
 * (engine_verify_inspect()), start it with the stdio FIFOs relayed, and remove it. The
 * container is labelled as run_code's (vestibule.run, vestibule.owner: the start-up sweep of
 * any later server or run removes one left), has AutoRemove, and holds a lifeline FIFO whose
 * end (this process gone, even by SIGKILL) kills the command, so it never outlives us.
 * Return: 0 when the command ran (@ret->exit_code per the contract); -EOPNOTSUPP for a remote
 * engine; any other -errno when the sandbox could not be set up (@err names the fix: 125).
 */
int engine_host_run(const struct sbx_config *cfg, const struct engine_host_req *req,
                    struct engine_host_result *ret, struct sbx_error *err);

/* Where the private folder's FIFOs (in, out, err, life) are inside the container. */
#define ENGINE_HOSTRUN_DIR "/sandbox"
/* Where vestibule-mcp itself is bound (read-only) to be the container's init (hostinit.c). */
#define ENGINE_HOSTRUN_INIT "/.vestibule-init"

/**
 * engine_host_init_main() - `vestibule-mcp host-init EXE ARGV0 ARGS...` (internal): the PID 1
 * of a run's container (hostinit.c): starts EXE with the FIFOs as stdio, forwards signals,
 * reaps, ends with the command's status (128+N for a signal; 127/126 when it cannot be
 * executed) or kills everything when the lifeline FIFO's writer (the run on the host) is gone.
 * @argv[0] is "host-init". Return: the exit status (125 when it cannot set up).
 */
int engine_host_init_main(int argc, char **argv);

/**
 * engine_host_grade() - the grade a run of engine_host_run() would get here (the container
 * backend's probe: "container", "container-degraded (...)"), into @grade (@size bytes); when
 * the engine is not usable or is remote, "unknown (...)" with the reason. For `mcp wrap`'s
 * start-up notification. Connects to the engine (one probe, about 100 ms).
 */
void engine_host_grade(const struct sbx_config *cfg, char *grade, size_t size);
