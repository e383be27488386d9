/* cmd_mcp.c - `vestibule-mcp mcp wrap [OPTIONS] -- SERVER [ARGS...]`: a stdio MCP server run
 * inside the sandbox of `run -- CMD` (cmd_run_cmd.c, src/native/hostrun.c), with the
 * newline-delimited JSON-RPC messages relayed unchanged both ways between our stdin/stdout (the
 * client) and the server's. Additions: one notifications/message with the grade right after the
 * server's initialize result, and one stderr line and audit record pair per tools/call the
 * client sends (wrap_audit.c); a tools/call whose record cannot be written is answered with a
 * JSON-RPC error instead of relayed (fail closed). Transport:
 * https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#stdio ; the log
 * notification: .../server/utilities/logging. docs/run-command.md. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/wrap_audit.h"
#include "common/cleanup.h"
#include "common/clock.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "engine/hostrun.h"
#include "native/hostrun.h"

/* A message (one line) longer than this ends the wrap rather than grow a buffer without end. */
#define WRAP_LINE_MAX (16u << 20)
/* After the client closed our stdin (and we the server's), the server has this long to end. */
#define WRAP_STDIN_GRACE_MS 5000
/* After the client's hangup (or at once when stdin is a file, which has all it will ever
 * have): a server that takes none of what waits for it for this long reads nothing, and is
 * stopped as for a client that is gone. Long enough for a slow server's start. */
#define WRAP_STUCK_MS 20000
/* After the SIGTERM that stops the sandbox (2 s grace there, then the kill), the run's own
 * process has this long to report before it is killed too. */
#define WRAP_STOP_MS 10000

static const char mcp_wrap_help[] =
    "Usage: vestibule-mcp mcp wrap [OPTIONS] -- SERVER [ARGS...]\n"
    "\n"
    "Run a stdio MCP server in the sandbox of `vestibule-mcp run -- CMD` (the host's system\n"
    "folders read-only, the --allow folders read-write, $HOME empty, secrets masked, no network\n"
    "unless --net allows it) and relay its JSON-RPC messages, unchanged, between the client\n"
    "(our stdin/stdout) and the server. Its stderr is ours. Point the client's config at this\n"
    "command instead of the server's.\n"
    "Added: right after the server's initialize result, one notifications/message (level info,\n"
    "logger \"vestibule\") with the isolation grade; each tools/call the client sends is logged\n"
    "on stderr as \"vestibule: mcp wrap: NAME tools/call TOOL\" and recorded in the audit log\n"
    "(`vestibule-mcp audit`: \"mcp wrap NAME\", the tool, its arguments and the answer's\n"
    "outcome; the server's own run as \"run --\"). A tools/call whose audit record cannot be\n"
    "written is not relayed: the client gets a JSON-RPC error naming the fix.\n"
    "\n"
    "  --allow DIR          read-write for the server (repeatable; default: the current dir)\n"
    "  --allow-read PATH    read-only for the server (repeatable)\n"
    "  --deny PATH          mask PATH too (repeatable)\n"
    "  --net none|allowlist:HOST,...\n"
    "                       no network (default), or HTTP(S) to these hosts through the proxy\n"
    "  --env NAME           pass the host's variable NAME to the server even when the secrets\n"
    "                       list would drop it (repeatable)\n"
    "  --require GRADE      native: refuse to start (125) on a lower grade\n"
    "  --name NAME          the server's name in the log lines (default: SERVER's base name)\n"
    "\n"
    "Exit status: that of `vestibule-mcp run -- SERVER` (the server's own code, 128+N for a\n"
    "signal, 125 when the sandbox could not be set up, 126/127 when SERVER cannot be run or\n"
    "found); 1 when a message was longer than 16 MiB (the server is stopped). When the client\n"
    "closes our stdin, the server's stdin is closed; a server still running 5 s later is\n"
    "stopped with its whole sandbox.\n";

/* One direction of the relay, one thread each (so a side that stops reading never stalls the
 * other): bytes read from @in (blocking), written to @out one whole line at a time. */
struct wrap_dir {
        int in, out;
        char *buf;
        size_t len, cap;
        size_t scanned; /* bytes at the start of buf known to hold no newline */
        bool eof;
        int end; /* why it stopped: 0 EOF, -EPIPE the reader is gone, -EMSGSIZE too long */
        _Atomic uint64_t moved; /* bytes its reader took (client to server: relay() watches) */
        struct wrap *w;
        pthread_t thread;
};

/* The relay's state. */
struct wrap {
        struct wrap_dir c2s, s2c; /* client -> server, server -> client */
        const char *name;         /* the server's name for the log lines */
        const char *grade;        /* the grade for the start-up notification */
        bool told;                /* the grade notification was sent (s2c's thread only) */
        pid_t child;              /* the `run -- SERVER` process */
        int pidfd;
        int done_fd;              /* an eventfd each thread bumps when its direction ends */
        struct wrap_audit *audit; /* tools/call into the audit log (wrap_audit.h) */
        pthread_mutex_t out_mu;   /* whole lines to the client: the server's, and our refusals */
};

static int wrap_fail(int code, const char *fmt, const char *arg)
{
        fputs("vestibule-mcp mcp wrap: ", stderr);
        fprintf(stderr, fmt, arg);
        fputc('\n', stderr);
        return code;
}

/* Write all of @len bytes of @p to the blocking @fd. Return 0 or -errno (EPIPE: reader gone). */
static int write_all(int fd, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* write_all() for the client-to-server direction, in pieces of at most 64 KiB, counting what
 * the server took: relay() tells a server that reads slowly from one that reads nothing. */
static int write_counted(struct wrap_dir *d, const char *p, size_t len)
{
        while (len > 0) {
                ssize_t n = write(d->out, p, len < 65536 ? len : 65536);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                atomic_fetch_add(&d->moved, (uint64_t)n);
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* @line is the server's initialize result (a response whose result holds protocolVersion).
 * Read whole, with no filter on its raw bytes: a key may be written with escapes. */
static bool is_init_result(const char *line, size_t len)
{
        json_object *o = wrap_json_read(line, len, false, NULL), *r, *v;
        bool yes = o && json_object_object_get_ex(o, "result", &r) &&
                   json_object_object_get_ex(r, "protocolVersion", &v);

        json_object_put(o);
        return yes;
}

/* The grade notification, once, after the initialize result went to the client. */
static int tell_grade(struct wrap *w)
{
        json_object *o = json_object_new_object(), *p = json_object_new_object();
        _cleanup_free_ char *data = xasprintf("isolation: %s (mcp wrap of %s)", w->grade, w->name);
        int r;

        json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
        json_object_object_add(o, "method", json_object_new_string("notifications/message"));
        json_object_object_add(p, "level", json_object_new_string("info"));
        json_object_object_add(p, "logger", json_object_new_string("vestibule"));
        json_object_object_add(p, "data", json_object_new_string(data));
        json_object_object_add(o, "params", p);
        _cleanup_free_ char *msg =
            xasprintf("%s\n", json_object_to_json_string_ext(
                                  o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        w->told = true;
        pthread_mutex_lock(&w->out_mu);
        r = write_all(w->s2c.out, msg, strlen(msg));
        pthread_mutex_unlock(&w->out_mu);
        return r;
}

/* One whole line of @d: to its reader, or (a tools/call whose audit record failed) answered
 * to the client with wrap_audit_request()'s refusal in its place. Return 0 or -errno of the
 * write to @d's reader. */
static int pass_line(struct wrap *w, struct wrap_dir *d, const char *line, size_t n)
{
        _cleanup_free_ char *refusal = NULL;
        bool init;
        int r;

        if (d == &w->c2s) {
                wrap_audit_request(w->audit, line, n, &refusal);
                if (!refusal)
                        return write_counted(d, line, n);
                pthread_mutex_lock(&w->out_mu);
                (void)write_all(w->s2c.out, refusal, strlen(refusal)); /* the client gone: EOF */
                pthread_mutex_unlock(&w->out_mu);
                return 0;
        }
        wrap_audit_response(w->audit, line, n);
        init = !w->told && is_init_result(line, n);
        pthread_mutex_lock(&w->out_mu);
        r = write_all(d->out, line, n);
        pthread_mutex_unlock(&w->out_mu);
        if (r == 0 && init)
                r = tell_grade(w);
        return r;
}

/* Pass every whole line of @d on (and at EOF the rest), peeking as the direction asks.
 * Return 0, or -errno of the write (the reader is gone). */
static int flush_lines(struct wrap *w, struct wrap_dir *d)
{
        size_t done = 0;
        int r = 0;

        while (r == 0 && done < d->len) {
                size_t from = done + (done == 0 ? d->scanned : 0);
                char *nl = memchr(d->buf + from, '\n', d->len - from);
                size_t n = nl ? (size_t)(nl - (d->buf + done)) + 1 : d->len - done;

                if (!nl && !d->eof)
                        break;
                r = pass_line(w, d, d->buf + done, n);
                done += n;
        }
        memmove(d->buf, d->buf + done, d->len - done);
        d->len -= done;
        d->scanned = d->len; /* what is left has no newline */
        return r;
}

/* Read what @d->in has. Return 0, 1 at EOF, or -EMSGSIZE for a line over WRAP_LINE_MAX. */
static int fill(struct wrap_dir *d)
{
        if (d->cap - d->len < 65536) {
                if (d->cap >= WRAP_LINE_MAX + 65536)
                        return -EMSGSIZE;
                d->cap = d->cap ? d->cap * 2 : 131072;
                if (d->cap > WRAP_LINE_MAX + 65536)
                        d->cap = WRAP_LINE_MAX + 65536;
                d->buf = xrealloc(d->buf, d->cap);
        }
        ssize_t n = read(d->in, d->buf + d->len, d->cap - d->len);
        if (n < 0)
                return errno == EINTR ? 0 : 1;
        if (n == 0)
                return 1;
        d->len += (size_t)n;
        /* flush_lines() left no newline before the new bytes */
        if (d->len > WRAP_LINE_MAX && !memchr(d->buf + d->len - (size_t)n, '\n', (size_t)n))
                return -EMSGSIZE;
        return 0;
}

/* The code of the ended `run -- SERVER` process, per the contract, once the server's last
 * lines went to the client (its stdout ends with the sandbox; 2 s at most). */
static int reap(struct wrap *w)
{
        struct timespec until;
        int st;

        if (w->s2c.thread && clock_gettime(CLOCK_REALTIME, &until) == 0) {
                until.tv_sec += 2;
                (void)pthread_timedjoin_np(w->s2c.thread, NULL, &until);
        }

        while (waitpid(w->child, &st, 0) < 0)
                if (errno != EINTR)
                        return 125;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One direction's thread: read, pass whole lines, until EOF, a write error or a line too
 * long; then (client -> server) close the server's stdin, and tell the main thread. */
static void *pump(void *arg)
{
        struct wrap_dir *d = arg;
        uint64_t one = 1;
        int r = 0;

        while (r == 0) {
                r = fill(d);
                if (r == 1)
                        d->eof = true;
                if (r >= 0 && flush_lines(d->w, d) < 0)
                        r = -EPIPE;
        }
        d->end = r < 0 ? r : 0;
        if (d == &d->w->c2s)
                close(TAKE_FD(d->out)); /* the server sees its stdin end */
        (void)!write(d->w->done_fd, &one, sizeof(one));
        return NULL;
}

/* Wait up to @ms for the run to end. true = it ended. */
static bool wait_end(struct wrap *w, int ms)
{
        struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
        int r;

        while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
                ;
        return r > 0;
}

/* Stop the server: @grace_ms for it to end on its own (its stdin is closed), then SIGTERM to
 * the run (cmd_run_cmd.c forwards it, waits 2 s, kills the whole sandbox), and at worst
 * SIGKILL to the run itself. Return the run's exit code. */
static int stop_server(struct wrap *w, int grace_ms)
{
        if (!wait_end(w, grace_ms)) {
                (void)kill(w->child, SIGTERM);
                if (!wait_end(w, WRAP_STOP_MS))
                        (void)kill(w->child, SIGKILL);
        }
        return reap(w);
}

/* A message over WRAP_LINE_MAX ended the relay: said on stderr; the exit code 1. */
static int too_long(const struct wrap *w)
{
        wrap_fail(0, "a message from the %s is longer than 16 MiB: stopping the server",
                  w->c2s.end == -EMSGSIZE ? "client" : "server");
        return 1;
}

/* Until the run ends or a direction stops. Return the exit code. */
static int relay(struct wrap *w)
{
        /* the client's end of stdin, watched for its hangup: a server that reads nothing
         * leaves the client-to-server thread blocked in a write, never to see the EOF */
        struct pollfd p[3] = {{.fd = w->pidfd, .events = POLLIN},
                              {.fd = w->done_fd, .events = POLLIN},
                              {.fd = w->c2s.in, .events = 0}};
        uint64_t n, hup_at = 0, moved = 0;
        struct stat st;

        if (fstat(w->c2s.in, &st) == 0 && S_ISREG(st.st_mode)) {
                hup_at = sbx_now_ms();
                p[2].fd = -1;
        }
        for (;;) {
                int timeout = -1;

                if (hup_at) {
                        uint64_t now = sbx_now_ms(), m = atomic_load(&w->c2s.moved);

                        if (m != moved) { /* the server still reads: wait on */
                                moved = m;
                                hup_at = now;
                        }
                        if (now >= hup_at + WRAP_STUCK_MS)
                                return stop_server(w, 0); /* gone, and the server reads nothing */
                        /* progress is sampled each second, not only when the time is up */
                        timeout = (int)(hup_at + WRAP_STUCK_MS - now);
                        timeout = timeout > 1000 ? 1000 : timeout;
                }
                if (poll(p, 3, timeout) < 0 && errno != EINTR)
                        return stop_server(w, 0);
                if (p[2].revents) { /* POLLHUP, POLLERR (a pipe) or POLLNVAL: once */
                        p[2].fd = -1;
                        if (p[2].revents & (POLLHUP | POLLERR)) {
                                hup_at = sbx_now_ms();
                                moved = atomic_load(&w->c2s.moved);
                        }
                }
                if (p[0].revents & POLLIN) {
                        int code = reap(w);
                        /* a server that ended because the too-long message closed its stdin
                         * (the pump set end before that close): the message's 1, not its 0 */
                        if (w->c2s.end == -EMSGSIZE || w->s2c.end == -EMSGSIZE)
                                return too_long(w);
                        return code;
                }
                if (!(p[1].revents & POLLIN) || read(w->done_fd, &n, sizeof(n)) < 0)
                        continue;
                if (w->c2s.end == -EMSGSIZE || w->s2c.end == -EMSGSIZE) {
                        (void)stop_server(w, 0);
                        return too_long(w);
                }
                if (w->s2c.end == -EPIPE) /* the client is gone */
                        return stop_server(w, 0);
                if (w->c2s.eof || w->c2s.end == -EPIPE) /* the client closed, or the server */
                        return stop_server(w, WRAP_STDIN_GRACE_MS);
        }
}

/* In the child: the server's stdin/stdout are the pipes; run it as `run -q OPTIONS -- ...`. */
static void child_main(int argc, char **argv, int in_r, int out_w, pid_t parent)
{
        char **a = xcalloc((size_t)argc + 2, sizeof(*a));
        int n = 0;

        (void)prctl(PR_SET_PDEATHSIG, SIGTERM); /* we die: the run stops the sandbox */
        if (getppid() != parent)
                _exit(125);
        if (dup2(in_r, STDIN_FILENO) < 0 || dup2(out_w, STDOUT_FILENO) < 0)
                _exit(125);
        close(in_r);
        close(out_w);
        signal(SIGPIPE, SIG_DFL);
        a[n++] = (char *)"run";
        a[n++] = (char *)"--quiet";
        for (int i = 1, past = 0; i < argc && argv[i]; i++) {
                past |= strcmp(argv[i], "--") == 0;
                if (!past && strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                        i++; /* ours only */
                else
                        a[n++] = argv[i];
        }
        fflush(NULL);
        _exit(cmd_run_command(n, a));
}

/* The grade the run will get (as `run -- CMD` grades it), for the start-up notification. */
static void wrap_grade(char *grade, size_t size)
{
        struct native_host_result g = {0};
        struct sbx_config *cfg = NULL;
        struct sbx_error err = {0};

        snprintf(grade, size, "unknown (the settings did not load)");
        if (config_load(&cfg, &err) < 0 || cfg->invalid) {
                config_free(cfg);
                return;
        }
        if (cfg->backend == SBX_BACKEND_CONTAINER) {
                engine_host_grade(cfg, grade, size); /* the run goes there (run_container.h) */
                config_free(cfg);
                return;
        }
        native_host_grade(cfg, &g);
        snprintf(grade, size, "%s", g.grade);
        config_free(cfg);
}

/* Start `run -- SERVER` with pipes for its stdin/stdout, and relay. */
static int wrap_start(int argc, char **argv, const char *name)
{
        static char grade[320];
        int in[2], out[2];
        /* static: the relay's threads, its buffers and the audit log live until the process
         * exits (a thread may still wait on the client's stdin then), reachable, not leaked */
        static struct wrap w = {.out_mu = PTHREAD_MUTEX_INITIALIZER};

        w.name = name;
        w.grade = grade;

        wrap_grade(grade, sizeof(grade));
        w.audit = wrap_audit_open(name, grade); /* lives until the process exits with the threads */
        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
                return wrap_fail(125, "cannot make the pipes: %s", strerror(errno));
        pid_t parent = getpid();
        fflush(NULL);
        w.child = fork();
        if (w.child < 0)
                return wrap_fail(125, "cannot fork: %s", strerror(errno));
        if (w.child == 0) {
                close(in[1]);
                close(out[0]);
                child_main(argc, argv, in[0], out[1], parent);
        }
        close(in[0]);
        close(out[1]);
        w.pidfd = (int)syscall(SYS_pidfd_open, w.child, 0);
        if (w.pidfd < 0) {
                close(in[1]);
                close(out[0]);
                (void)kill(w.child, SIGTERM);
                (void)reap(&w);
                return wrap_fail(125, "pidfd_open: %s (Linux 5.3 or later is needed)",
                                 strerror(errno));
        }
        w.c2s = (struct wrap_dir){.in = STDIN_FILENO, .out = in[1], .w = &w};
        w.s2c = (struct wrap_dir){.in = out[0], .out = STDOUT_FILENO, .w = &w};
        w.done_fd = eventfd(0, EFD_CLOEXEC);
        if (w.done_fd < 0 || pthread_create(&w.c2s.thread, NULL, pump, &w.c2s) != 0 ||
            pthread_create(&w.s2c.thread, NULL, pump, &w.s2c) != 0) {
                (void)kill(w.child, SIGTERM);
                (void)reap(&w);
                return wrap_fail(125, "%s", "cannot start the relay's threads");
        }
        /* The exit ends the threads, which may still wait on a pipe (the client's stdin). */
        return relay(&w);
}

/* `mcp wrap ...`: @argv[0] is "wrap". */
static int mcp_wrap(int argc, char **argv)
{
        const char *name = NULL;
        int dd = -1;

        for (int i = 1; i < argc && dd < 0; i++) {
                if (strcmp(argv[i], "--") == 0)
                        dd = i;
                else if (cli_is_help(argv[i]))
                        return fputs(mcp_wrap_help, stdout), 0;
                else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                        name = argv[++i];
                else if (strcmp(argv[i], "--timeout") == 0 || strcmp(argv[i], "-t") == 0 ||
                         strncmp(argv[i], "--timeout=", 10) == 0)
                        return wrap_fail(125, "%s: a wrapped server runs as long as its client",
                                         argv[i]);
        }
        if (dd < 0 || dd + 1 >= argc)
                return wrap_fail(125, "%s", "usage: mcp wrap [OPTIONS] -- SERVER [ARGS...]");
        if (!name) {
                name = strrchr(argv[dd + 1], '/');
                name = name ? name + 1 : argv[dd + 1];
        }
        if (isatty(STDOUT_FILENO))
                fputs("vestibule-mcp mcp wrap: stdout is a terminal; an MCP client starts this "
                      "command (see --help)\n",
                      stderr);
        signal(SIGPIPE, SIG_IGN); /* a client gone shows as EPIPE */
        return wrap_start(argc, argv, name);
}

int cmd_mcp(int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "wrap") == 0)
                return mcp_wrap(argc - 1, argv + 1);
        if (argc >= 2 && cli_is_help(argv[1])) {
                fputs(mcp_wrap_help, stdout);
                return 0;
        }
        return wrap_fail(2, "%s", "usage: vestibule-mcp mcp wrap [OPTIONS] -- SERVER [ARGS...]");
}
