/* egress.h - the egress allowlist: one proxy per run that the server supervises, the only way
 * out of a sandbox whose network namespace holds nothing but lo. A backend hands in a
 * listening socket that the run's code can reach (a TCP listener on 127.0.0.1:EGRESS_PORT
 * created inside the run's own network namespace, or a unix socket a relay inside a
 * container connects to); the proxy accepts on it, speaks HTTP CONNECT and plain-HTTP
 * absolute-URI requests, checks each host and port against the settings
 * (VESTIBULE_EGRESS_ALLOW, VESTIBULE_EGRESS_PORTS, VESTIBULE_EGRESS_PIN, parsed by
 * src/config), resolves names itself and refuses private addresses, and records one verdict
 * per connection. At the end the backend collects the verdicts into the run's result.
 *
 * Why this shape (a listener made inside the netns and passed out with SCM_RIGHTS, a proxy
 * process per run, fail closed): docs/design/egress.md. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"

/* The port the proxy listens on inside the run (127.0.0.1 of the run's own namespace). */
#define EGRESS_PORT 3128
#define EGRESS_PROXY_URL "http://127.0.0.1:3128"

/* Bounds of one run's proxy: connections open at once, bytes buffered per direction of one
 * connection, bytes of one request head, and verdict records kept (the rest are counted). */
#define EGRESS_MAX_CONNS 32
#define EGRESS_BUF_BYTES ((size_t)128 * 1024)
#define EGRESS_MAX_HEAD_BYTES 8192
#define EGRESS_MAX_RECORDS 1024

/* A relayed connection with no byte moved either way for this long is closed (a stalled or
 * forgotten tunnel holds one of EGRESS_MAX_CONNS no longer). */
#define EGRESS_IDLE_TIMEOUT_MS 60000

/* The name the proxy process takes (prctl PR_SET_NAME; `ps -o comm`): tests find it by it. */
#define EGRESS_PROC_NAME "vst-egress"

/* One run's proxy; opaque. */
struct egress_session;

/**
 * egress_session_start() - start the proxy for one run on @listen_fd.
 * @cfg:       the settings (cfg->egress: allowlist, ports, pins; cfg->run_as_*: a root server
 *             runs the proxy as that user); borrowed for the call only.
 * @listen_fd: a listening stream socket (AF_INET inside the run's netns, or AF_UNIX); taken:
 *             closed on success and on error, so the proxy holds the only copy and its death
 *             leaves the run with a refused connection, never an open one.
 * @ret:       on success a new session, ended with egress_session_finish().
 * The proxy is a child process (fork + exec of /proc/self/exe `egress-proxy`, named
 * EGRESS_PROC_NAME, killed with the calling thread: PR_SET_PDEATHSIG); start and finish must
 * be called from the same thread. It records every decision as it makes it, so a proxy that
 * dies mid-run still leaves its verdicts.
 * Return: 0, or -errno with @err naming what failed (the caller Blocks the run: fail closed).
 */
int egress_session_start(const struct sbx_config *cfg, int listen_fd, struct egress_session **ret,
                         struct sbx_error *err);

/**
 * egress_session_finish() - stop the proxy (SIGTERM, then SIGKILL after 1 s), reap it, and
 * fill @ret with the run's verdicts: one entry per host:port and verdict, with connections
 * and bytes, and a note when the proxy died before the end. Frees @s. Accepts NULL (then @ret
 * is left as it is). @ret->on is set.
 */
void egress_session_finish(struct egress_session *s, struct run_egress *ret);

/**
 * egress_set_proxy_exe() - the executable egress_session_start() runs as
 * `EXE egress-proxy ...` (default "/proc/self/exe": the server itself). Only for programs that
 * link the core but are not vestibule-mcp (the unit test suites), which pass the built
 * vestibule-mcp (VESTIBULE_BIN); call it before any session starts. @path is borrowed for the
 * life of the process.
 */
void egress_set_proxy_exe(const char *path);

/**
 * egress_set_idle_timeout_ms() - the idle timeout the proxies started after this call get
 * (default EGRESS_IDLE_TIMEOUT_MS; passed as `--idle-ms`). Only for the unit test suites,
 * which cannot wait a minute; call it before a session starts.
 */
void egress_set_idle_timeout_ms(unsigned ms);

/**
 * egress_listen_unix() - a listening AF_UNIX stream socket at @path (removed first when it is
 * a stale socket; mode 0666 so a sandbox user mapped to another uid can connect), for a
 * backend whose sandbox reaches the proxy through a relay (a container). Close-on-exec.
 * @ret_fd: the listening fd, for egress_session_start().
 * Return: 0 or -errno with @err.
 */
int egress_listen_unix(const char *path, int *ret_fd, struct sbx_error *err);

/* Where the relay reaches the proxy inside a sandbox: the run's code folder, /sandbox. */
#define EGRESS_RELAY_SOCK ".egress.sock"
#define EGRESS_RELAY_SOCK_IN "/sandbox/" EGRESS_RELAY_SOCK

/**
 * egress_relay_source() - the source of the relay that runs inside an allowlist sandbox (a
 * container, a gVisor sandbox) before its code: it listens on 127.0.0.1:@port and copies each
 * connection both ways to the unix socket @sock_path (unix(7)), deciding nothing. @relay: "python3"
 * (Python 3 standard library, for `python3 -I -c`) or "node" (for `node -e`). Written into @buf
 * (@size bytes; 1024 suffice). Return: 0; -EINVAL for another @relay or a @sock_path with a quote,
 * backslash or newline; -ENOSPC when @buf is too small.
 * @relay, @sock_path: borrowed for the call; @sock_path is put between single quotes in the
 *         source as it is (EGRESS_RELAY_SOCK_IN, the path inside the sandbox).
 * @port:  the TCP port in host byte order (EGRESS_PORT).
 * @buf:   the caller's; on success a NUL-terminated source (the Python one is 645 bytes plus
 *         @sock_path, the Node one 341 plus it, at port 65535: 1024 hold a path of up to 378
 *         bytes); untouched on -EINVAL, cut (not to be run) on -ENOSPC.
 * When the proxy's socket refuses a connection (the proxy ended), the relay stops listening,
 * resets that client's connection (an RST) and exits with status 3. Sources: docs/design/
 * egress.md ("Container backend", "gVisor backend"); https://docs.python.org/3/library/socket.html,
 * https://nodejs.org/api/net.html.
 */
int egress_relay_source(const char *relay, const char *sock_path, uint16_t port, char *buf,
                        size_t size);

/**
 * egress_relay_wait_script() - a bash script, for `bash -c SCRIPT NAME PY JS ARGV...`, that
 * starts the relay (egress_relay_source()) in the background, detached from ARGV (its parent
 * becomes the container's init, or under gVisor the sandbox's pid 1): source PY under `python3 -I`
 * when the image has python3, else source JS under node; waits until 127.0.0.1:@port listens in its
 * own network namespace (read from /proc/net/tcp, proc(5)) and then execs ARGV: the run's code
 * starts only once its way out exists. A relay that ends first ends the script with status 125 and
 * a line on stderr, before ARGV runs. Written into @buf (@size bytes; 640 suffice). Return: @buf.
 * @port: the TCP port in host byte order (EGRESS_PORT); written into the script as the 4 hex
 *        digits /proc/net/tcp shows. The wait polls every 10 ms and has no bound of its own:
 *        the caller's deadline for the run bounds it.
 * @buf:  the caller's; a NUL-terminated script of 493 bytes, silently cut (and then not to be
 *        run) when @size is smaller. No errors. Sources: bash(1) ("Command Substitution",
 *        `exec`), proc(5) ("/proc/net/tcp"), docs/design/egress.md.
 */
const char *egress_relay_wait_script(uint16_t port, char *buf, size_t size);

/**
 * egress_sandbox_env() - the environment entries ("NAME=value", static strings, NULL-ended) a
 * sandbox gets for @network: with RUN_NETWORK_ALLOWLIST the proxy variables (HTTP_PROXY,
 * HTTPS_PROXY, http_proxy, https_proxy, NO_PROXY, no_proxy, npm_config_proxy,
 * npm_config_https_proxy) pointing at EGRESS_PROXY_URL; always pip's persistence
 * (PYTHONUSERBASE=/workspace/.local, PIP_USER=1, PIP_BREAK_SYSTEM_PACKAGES=1 for PEP 668,
 * PYTHONNOUSERSITE=1 and PYTHONPATH=EGRESS_PYTHON_DIR: see egress_sitecustomize,
 * PIP_NO_CACHE_DIR=1, PIP_DISABLE_PIP_VERSION_CHECK=1) and npm's
 * (NODE_PATH=/workspace/node_modules), so an install of one call is imported by the next whatever
 * its network. PATH is not among them: use EGRESS_SANDBOX_PATH.
 */
const char *const *egress_sandbox_env(enum run_network network);

/* The program's fixed environment in every sandbox of every backend that builds its own
 * (native, gvisor): NULL-ended, PATH first (replace it with EGRESS_SANDBOX_PATH), then HOME=/tmp,
 * LANG, TZ, python's unbuffered output and USER; nothing of the server's own leaks in. The
 * backends add egress_sandbox_env()'s entries to a copy. */
extern const char *const egress_base_env[];

/* The sandbox's folder on PYTHONPATH: /sandbox, the code's own read-only folder, which each
 * backend fills anew for every run (and spare, and session) with the program and
 * EGRESS_SITECUSTOMIZE_NAME. PYTHONPATH comes before the standard library on sys.path, so a
 * sitecustomize.py a run leaves in the workspace never shadows it
 * (docs.python.org/3/library/site.html, docs.python.org/3/using/cmdline.html#envvar-PYTHONPATH). */
#define EGRESS_PYTHON_DIR "/sandbox"
#define EGRESS_SITECUSTOMIZE_NAME "sitecustomize.py"

/*
 * egress_sitecustomize - the text of EGRESS_PYTHON_DIR/EGRESS_SITECUSTOMIZE_NAME (a
 * NUL-ended static string; write it without the NUL, 0444): python's site module imports it
 * at every start. With PYTHONNOUSERSITE=1 (egress_sandbox_env) the site module neither adds
 * the user site (/workspace/.local/lib/pythonX.Y/site-packages) nor runs its .pth files or a
 * usercustomize (Lib/site.py, main(): ENABLE_USER_SITE); this file then inserts the user site
 * into sys.path after the standard library and before the system site-packages, with
 * list.insert, not site.addsitedir() (which runs .pth lines): pip --user installs of one run
 * are imported by the next, and no file a run leaves there runs at a later start
 * (tests/adversarial/server.md, "planted start-up code runs before every later run").
 */
extern const char egress_sitecustomize[];

/* PATH inside a sandbox: the image's folders first, pip's user scripts (PYTHONUSERBASE/bin, in
 * the workspace, so writable by every run) last, so no run can put a `timeout`, `python3`, `ls`
 * or `pytest` of its own before the image's for the launcher and every later run
 * (tests/adversarial/server.md, "a run replaces timeout and the interpreter"). */
#define EGRESS_SANDBOX_PATH                                                                        \
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/workspace/.local/bin"

/**
 * egress_proxy_main() - the proxy process itself (`vestibule-mcp egress-proxy`, started only by
 * egress_session_start()): fd 3 is the listener, fd 4 the record file; @argv carries the
 * settings' raw values (--allow, --ports, --pin). Runs until SIGTERM or the listener fails.
 * Return: the process exit status.
 */
int egress_proxy_main(int argc, char **argv);
