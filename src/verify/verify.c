/* verify.c - the leak-detection battery: prepare the bait outside (a planted key, a loopback
 * listener, a marked host process, a marker variable), run the probes inside through the run
 * service, check the controls and the traces left outside, and judge each probe against what
 * the run's grade claims. See verify.h. */
#include "verify/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "egress/egress-internal.h"
#include "service/service.h"
#include "run/warden.h"
#include "setup/setup.h"
#include "verify/scripts.h"

#define MARKER_VAR "VESTIBULE_VERIFY_MARKER"

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

/* The probes, in the order they are shown. */
static const struct {
        const char *id, *title;
        enum verify_claim claim;
} probe_defs[] = {
    {"key", "read a planted fake key outside the workspace", VERIFY_CLAIM_ISOLATION},
    {"shadow", "read the host's /etc/shadow", VERIFY_CLAIM_ISOLATION},
    {"environ", "read the server's /proc/<pid>/environ", VERIFY_CLAIM_ISOLATION},
    {"hostenv", "read the host's environment variables", VERIFY_CLAIM_ISOLATION},
    {"loopback", "reach a listener on the host's 127.0.0.1", VERIFY_CLAIM_ISOLATION},
    {"route", "find a route but loopback", VERIFY_CLAIM_ISOLATION},
    {"offhost", "connect to 192.0.2.1:80 (off this machine)", VERIFY_CLAIM_ISOLATION},
    {"dns", "resolve a DNS name", VERIFY_CLAIM_ISOLATION},
    {"rootfs", "write to the root filesystem", VERIFY_CLAIM_ISOLATION},
    {"mknod", "create a device node", VERIFY_CLAIM_ISOLATION},
    {"mount", "mount a filesystem", VERIFY_CLAIM_SECCOMP},
    {"unshare", "unshare a new user namespace", VERIFY_CLAIM_SECCOMP},
    {"bpf", "load a bpf program", VERIFY_CLAIM_SECCOMP},
    /* issue 12 #3 (container backend review): both reach past a network namespace */
    {"vsock", "open an AF_VSOCK socket (reaches a VM's host)", VERIFY_CLAIM_SECCOMP},
    {"io_uring", "set up an io_uring", VERIFY_CLAIM_SECCOMP},
    {"hostproc", "see host processes", VERIFY_CLAIM_ISOLATION},
    {"symlink", "escape via a workspace symlink read by read_workspace", VERIFY_CLAIM_ISOLATION},
    {"daemon", "leave a setsid daemon behind", VERIFY_CLAIM_ISOLATION},
    /* issue 26: uname(2) answered by the host's kernel, not gVisor's Sentry */
    {"kernel", "reach the host's kernel (uname -r answered by it)", VERIFY_CLAIM_KERNEL},
    {"pids", "fork beyond the pids cap", VERIFY_CLAIM_PIDS},
    {"memory", "allocate beyond the memory cap", VERIFY_CLAIM_MEMORY},
    {"cpu", "burn CPU beyond the quota", VERIFY_CLAIM_CPU},
    /* network "allowlist" (docs/design/egress.md), with settings verify makes itself */
    {"egress_allowed", "reach an allowed host through the egress proxy", VERIFY_CLAIM_EGRESS},
    {"egress_unlisted", "reach a host not in the allowlist", VERIFY_CLAIM_EGRESS},
    {"egress_literal", "reach an IP literal (direct, or through the proxy)", VERIFY_CLAIM_EGRESS},
    {"egress_dns", "resolve a DNS name with the allowlist on", VERIFY_CLAIM_EGRESS},
    {"egress_private", "reach a private address behind an allowed, unpinned name",
     VERIFY_CLAIM_EGRESS},
};

/* ---- claims ----------------------------------------------------------------------------- */

bool verify_claimed(const char *grade, enum verify_claim c)
{
        static const char *const limit_word[] = {
            [VERIFY_CLAIM_MEMORY] = "memory",
            [VERIFY_CLAIM_CPU] = "cpu",
            [VERIFY_CLAIM_PIDS] = "pids",
        };
        const char *l;
        size_t n;

        if (!grade || strncmp(grade, "none", 4) == 0 || !grade[0])
                return false;
        switch (c) {
        case VERIFY_CLAIM_ISOLATION:
                return true;
        case VERIFY_CLAIM_SECCOMP:
                return !strstr(grade, "no seccomp");
        case VERIFY_CLAIM_KERNEL:
                return strncmp(grade, "gvisor", 6) == 0;
        case VERIFY_CLAIM_EGRESS:
                /* the backends with backend_ops.egress (src/egress/egress.h): native,
                 * container and gvisor (docs/design/egress.md, "Container backend", "gVisor
                 * backend") */
                return strncmp(grade, "native", 6) == 0 || strncmp(grade, "container", 9) == 0 ||
                       strncmp(grade, "gvisor", 6) == 0;
        case VERIFY_CLAIM_MEMORY:
        case VERIFY_CLAIM_CPU:
        case VERIFY_CLAIM_PIDS:
        default:
                l = strstr(grade, "limits not applied: ");
                if (!l)
                        return true;
                l += strlen("limits not applied: ");
                n = strcspn(l, ":);");
                /* the list is "memory, cpu, pids" or a part of it */
                for (const char *w = l; w < l + n;) {
                        size_t wl = strcspn(w, ",:);");
                        if (wl == strlen(limit_word[c]) && strncmp(w, limit_word[c], wl) == 0)
                                return false;
                        w += wl;
                        while (*w == ',' || *w == ' ')
                                w++;
                }
                return true;
        }
}

const char *verify_claim_none_text(enum verify_claim c)
{
        switch (c) {
        case VERIFY_CLAIM_SECCOMP:
                return "grade claims no seccomp filter";
        case VERIFY_CLAIM_MEMORY:
                return "grade claims no memory limit";
        case VERIFY_CLAIM_CPU:
                return "grade claims no CPU quota";
        case VERIFY_CLAIM_PIDS:
                return "grade claims no process limit";
        case VERIFY_CLAIM_EGRESS:
                return "this backend serves no network allowlist";
        case VERIFY_CLAIM_KERNEL:
                return "grade claims no kernel in between";
        case VERIFY_CLAIM_ISOLATION:
        default:
                return "grade claims no isolation";
        }
}

const char *verify_verdict_word(enum verify_verdict v)
{
        switch (v) {
        case VERIFY_HELD:
                return "held";
        case VERIFY_NOT_HELD:
                return "NOT HELD";
        case VERIFY_NOT_APPLICABLE:
                return "not applicable";
        case VERIFY_UNTESTED:
        default:
                return "not tested";
        }
}

/* ---- the bait outside ------------------------------------------------------------------- */

struct bait {
        char *base;     /* private temp dir: outside/ and workspace/ */
        char *key_path; /* base/outside/fake-key */
        char key_value[64];
        char *workspace;
        char token[33]; /* random hex, part of every marker */
        char env_marker[64], proc_marker[64], daemon_marker[64], rootfs_file[64], link_name[64];
        int listen_fd;
        int port;
        pid_t child; /* the marked host process */
        char shadow_sha256[65];
        char environ_sha256[65];
        char *cmdline; /* the server's, NULs as they are */
        size_t cmdline_len;
};

__attribute__((format(printf, 3, 4))) static void setf(char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(buf, size, fmt, ap);
        va_end(ap);
}

static int random_hex(char *buf, size_t nbytes)
{
        unsigned char raw[16];
        _cleanup_close_ int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

        if (fd < 0 || nbytes > sizeof(raw) || read(fd, raw, nbytes) != (ssize_t)nbytes)
                return -EIO;
        for (size_t i = 0; i < nbytes; i++)
                sprintf(buf + 2 * i, "%02x", raw[i]);
        return 0;
}

static char *read_file(const char *path, size_t *ret_len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct sbx_buf b = {0};

        if (fd < 0)
                return NULL;
        (void)sbx_buf_read_fd(&b, fd); /* what was read before an error is kept, as before */
        return sbx_buf_steal(&b, ret_len);
}

static bool mem_has(const char *hay, size_t n, const char *needle)
{
        return hay && memmem(hay, n, needle, strlen(needle)) != NULL;
}

/* Host pids whose cmdline holds @marker (up to @max), excluding ourselves. */
static size_t host_find(const char *marker, pid_t *ret, size_t max)
{
        _cleanup_(closedirp) DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;

        while (d && (de = readdir(d)) && n < max) {
                char path[64];
                size_t len = 0;
                _cleanup_free_ char *c = NULL;
                long pid = strtol(de->d_name, NULL, 10);

                if (pid <= 0 || pid == getpid())
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
                c = read_file(path, &len);
                if (mem_has(c, len, marker))
                        ret[n++] = (pid_t)pid;
        }
        return n;
}

static void bait_done(struct bait *b)
{
        if (b->child > 0) {
                kill(b->child, SIGKILL);
                while (waitpid(b->child, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (b->listen_fd >= 0)
                close(b->listen_fd);
        if (b->base) {
                /* from /tmp itself, not from /: the removal never crosses a mount, and /tmp is
                 * often one (a tmpfs) */
                const char *slash = strrchr(b->base, '/');
                _cleanup_free_ char *parent = xasprintf("%.*s", (int)(slash - b->base), b->base);
                _cleanup_close_ int fd =
                    open(parent[0] ? parent : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0 || setup_remove_tree(fd, slash + 1) < 0)
                        log_warning("cannot remove '%s', ignoring", b->base);
        }
        free(b->base);
        free(b->key_path);
        free(b->workspace);
        free(b->cmdline);
        unsetenv(MARKER_VAR);
}

static int bait_make(const struct sbx_config *cfg, struct bait *b, struct sbx_error *err)
{
        _cleanup_free_ char *outside = NULL;
        struct sockaddr_in sa = {.sin_family = AF_INET};
        socklen_t sl = sizeof(sa);
        struct sbx_error e = {0};
        FILE *f;

        b->listen_fd = -1;
        if (random_hex(b->token, 12) < 0)
                return sbx_fail(err, EIO, "cannot read /dev/urandom");
        setf(b->key_value, sizeof(b->key_value), "VESTIBULE-FAKE-KEY-%s", b->token);
        setf(b->env_marker, sizeof(b->env_marker), "vestibule-env-%s", b->token);
        setf(b->proc_marker, sizeof(b->proc_marker), "vestibule-host-%s", b->token);
        setf(b->daemon_marker, sizeof(b->daemon_marker), "vestibule-daemon-%s", b->token);
        setf(b->rootfs_file, sizeof(b->rootfs_file), "vestibule-verify-%s", b->token);
        setf(b->link_name, sizeof(b->link_name), "verify-link-%s", b->token);

        b->base = xstrdup("/tmp/vestibule-verify-XXXXXX");
        if (!mkdtemp(b->base)) {
                int r = sbx_fail(err, errno, "cannot create a temporary directory in /tmp: %m");
                free(b->base);
                b->base = NULL;
                return r;
        }
        /* readable by anyone, so only the sandbox can be what stops the read */
        chmod(b->base, 0755);
        outside = xasprintf("%s/outside", b->base);
        b->workspace = xasprintf("%s/workspace", b->base);
        b->key_path = xasprintf("%s/fake-key", outside);
        if (mkdir(outside, 0755) < 0 || mkdir(b->workspace, 0755) < 0)
                return sbx_fail(err, errno, "cannot create '%s': %m", outside);
        if (geteuid() == 0 && cfg->run_as_set &&
            chown(b->workspace, cfg->run_as_uid, cfg->run_as_gid) < 0)
                return sbx_fail(err, errno, "cannot give '%s' to uid %u: %m", b->workspace,
                                (unsigned)cfg->run_as_uid);
        f = fopen(b->key_path, "we");
        if (!f)
                return sbx_fail(err, errno, "cannot write '%s': %m", b->key_path);
        fprintf(f, "%s\n", b->key_value);
        fclose(f);
        chmod(b->key_path, 0644);

        /* the listener on the host's loopback */
        b->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (b->listen_fd < 0 || bind(b->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            listen(b->listen_fd, 16) < 0 ||
            getsockname(b->listen_fd, (struct sockaddr *)&sa, &sl) < 0)
                return sbx_fail(err, errno, "cannot listen on 127.0.0.1: %m");
        b->port = ntohs(sa.sin_port);

        /* the marker variable, and a marked host process that inherits it */
        if (setenv(MARKER_VAR, b->env_marker, 1) < 0)
                return sbx_fail(err, errno, "cannot set %s: %m", MARKER_VAR);
        b->child = fork();
        if (b->child < 0)
                return sbx_fail(err, errno, "cannot fork: %m");
        if (b->child == 0) {
                /* sleep itself, with the marker as its argv[0]: no shell that would leave a
                 * child behind when this one is killed, and no fd of ours kept open */
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (nul >= 0) {
                        dup2(nul, 0);
                        dup2(nul, 1);
                        dup2(nul, 2);
                }
                execl("/bin/sleep", b->proc_marker, "600", (char *)NULL);
                execl("/usr/bin/sleep", b->proc_marker, "600", (char *)NULL);
                _exit(127);
        }

        if (sbx_sha256_file("/etc/shadow", NULL, b->shadow_sha256, &e) < 0)
                b->shadow_sha256[0] = '\0';
        if (sbx_sha256_file("/proc/self/environ", NULL, b->environ_sha256, &e) < 0)
                b->environ_sha256[0] = '\0';
        b->cmdline = read_file("/proc/self/cmdline", &b->cmdline_len);
        if (!b->cmdline)
                b->cmdline = xstrdup("");
        return 0;
}

/* ---- running ---------------------------------------------------------------------------- */

struct outcome {
        int r;                 /* run_service_execute's return */
        struct sbx_error err;  /* when r < 0 */
        struct run_result res; /* when r == 0 */
        json_object *verify;   /* the VERIFY line's object, or NULL */
        char why[300];         /* when no VERIFY line: what the run did instead */
};

static void outcome_done(struct outcome *o)
{
        run_result_done(&o->res);
        if (o->verify)
                json_object_put(o->verify);
}

static void run_script_net(struct run_service *svc, const struct bait *b,
                           const struct sbx_config *cfg, const char *body, unsigned timeout_s,
                           const char *network, struct outcome *o)
{
        json_object *p = json_object_new_object();
        _cleanup_free_ char *code = NULL;
        unsigned char raw[16];
        char nonce[33];

        /* a new nonce per run: a result line baked into the rootfs cannot carry it */
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                abort();
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
        json_object_object_add(p, "nonce", json_object_new_string(nonce));
        json_object_object_add(p, "key_path", json_object_new_string(b->key_path));
        json_object_object_add(p, "key_value", json_object_new_string(b->key_value));
        json_object_object_add(p, "shadow_sha256", json_object_new_string(b->shadow_sha256));
        json_object_object_add(p, "server_pid", json_object_new_int(getpid()));
        json_object_object_add(p, "server_environ_sha256",
                               json_object_new_string(b->environ_sha256));
        json_object_object_add(p, "server_cmdline",
                               json_object_new_string_len(b->cmdline, (int)b->cmdline_len));
        json_object_object_add(p, "env_marker", json_object_new_string(b->env_marker));
        json_object_object_add(p, "proc_marker", json_object_new_string(b->proc_marker));
        json_object_object_add(p, "daemon_marker", json_object_new_string(b->daemon_marker));
        json_object_object_add(p, "rootfs_file", json_object_new_string(b->rootfs_file));
        json_object_object_add(p, "link_name", json_object_new_string(b->link_name));
        json_object_object_add(p, "port", json_object_new_int(b->port));
        json_object_object_add(p, "pids_max", json_object_new_int((int)cfg->pids_max));
        json_object_object_add(p, "mem_mb", json_object_new_int((int)cfg->mem_mb));
        json_object_object_add(p, "burners", json_object_new_int(2));
        /* the parameters as a JSON text inside a string literal (JSON's string escapes are
         * Python's too, with '/' left alone) */
        json_object *lit = json_object_new_string(json_object_to_json_string_ext(
            p, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        code = xasprintf("import json\nP = json.loads(%s)\n%s",
                         json_object_to_json_string_ext(lit, JSON_C_TO_STRING_PLAIN |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE),
                         body);
        json_object_put(lit);
        json_object_put(p);

        struct run_call call = {
            .language = "python",
            .code = code,
            .code_len = strlen(code),
            .timeout_s = timeout_s,
            .cancel_fd = -1,
            .network = network,
        };
        memset(o, 0, sizeof(*o));
        o->r = run_service_execute(svc, &call, &o->res, &o->err);
        if (o->r < 0) {
                setf(o->why, sizeof(o->why), "the run was refused: %s", o->err.msg);
                return;
        }
        const char *no_result = NULL;
        o->verify = verify_parse_result(o->res.out.data, o->res.out.len, nonce, &no_result);
        if (!o->verify) {
                const char *e = o->res.err.data ? o->res.err.data : "";
                size_t el = o->res.err.len > 200 ? 200 : o->res.err.len;
                setf(o->why, sizeof(o->why),
                     "the probe gave no result (%s; outcome %d, exit %d, signal %d): %.*s",
                     no_result, (int)o->res.outcome, o->res.exit_code, o->res.term_signal, (int)el,
                     e);
        }
}

/* @timeout_s is the probe's own bound; a longer VESTIBULE_DEFAULT_TIMEOUT_S stretches it (a
 * slow host: runsc under emulation took 15 s for print(1)). */
static unsigned probe_bound(const struct sbx_config *cfg, unsigned timeout_s)
{
        return cfg->default_timeout_s > timeout_s ? cfg->default_timeout_s : timeout_s;
}

static void run_script(struct run_service *svc, const struct bait *b, const struct sbx_config *cfg,
                       const char *body, unsigned timeout_s, struct outcome *o)
{
        run_script_net(svc, b, cfg, body, probe_bound(cfg, timeout_s), NULL, o);
}

json_object *verify_parse_result(const char *out, size_t len, const char *nonce,
                                 const char **ret_why)
{
        _cleanup_free_ char *tag = xasprintf("VERIFY %s ", nonce);
        size_t tl = strlen(tag);
        const char *found = NULL, *p = out, *end = out ? out + len : NULL;
        json_object *v;

        /* only at the start of a line, exactly once */
        while (p && p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

                if (ll >= tl && memcmp(p, tag, tl) == 0) {
                        if (found) {
                                *ret_why = "two result lines carry this run's nonce";
                                return NULL;
                        }
                        found = p;
                }
                p = nl ? nl + 1 : end;
        }
        if (!found) {
                *ret_why = "no result line with this run's nonce";
                return NULL;
        }
        const char *nl = memchr(found, '\n', (size_t)(end - found));
        _cleanup_free_ char *txt =
            xstrndup(found + tl, (nl ? (size_t)(nl - found) : (size_t)(end - found)) - tl);
        v = json_tokener_parse(txt);
        if (!v || !json_object_is_type(v, json_type_object)) {
                json_object_put(v);
                *ret_why = "the result line is not a JSON object";
                return NULL;
        }
        return v;
}

/* The JSON of probe @id in @o, or NULL. */
static json_object *got(const struct outcome *o, const char *id)
{
        json_object *v = NULL;

        return o->verify && json_object_object_get_ex(o->verify, id, &v) ? v : NULL;
}

static bool jbool(json_object *o, const char *k)
{
        json_object *v = NULL;

        return o && json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}

static const char *jtext(json_object *o, const char *k)
{
        json_object *v = NULL;

        return o && json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "";
}

static struct verify_probe *probe(struct verify_report *r, const char *id)
{
        for (size_t i = 0; i < r->n_probes; i++)
                if (strcmp(r->probes[i].id, id) == 0)
                        return &r->probes[i];
        abort();
}

__attribute__((format(printf, 4, 5))) static void judge(struct verify_report *r, const char *id,
                                                        enum verify_verdict v, const char *fmt, ...)
{
        struct verify_probe *p = probe(r, id);
        va_list ap;

        p->verdict = v;
        va_start(ap, fmt);
        vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
        va_end(ap);
}

/* The common case: the inside attempt said escaped or not; @control is the outside check. */
static void judge_simple(struct verify_report *r, const struct outcome *o, const char *id,
                         const char *control)
{
        json_object *j = got(o, id);

        if (!j)
                judge(r, id, VERIFY_UNTESTED, "%s", o->why[0] ? o->why : "no result");
        else
                judge(r, id, jbool(j, "escaped") ? VERIFY_NOT_HELD : VERIFY_HELD, "%s%s%s",
                      jtext(j, "detail"), control[0] ? " (control: " : "",
                      control[0] ? control : "");
        if (j && control[0]) {
                struct verify_probe *p = probe(r, id);
                size_t n = strlen(p->detail);
                if (n + 1 < sizeof(p->detail))
                        snprintf(p->detail + n, sizeof(p->detail) - n, ")");
        }
}

/* issue 26: the release uname(2) gave inside against this process's own (the control: the
 * host's kernel, which native and container runs share and so report alike). */
static void judge_kernel(struct verify_report *r, const struct outcome *o)
{
        json_object *j = got(o, "kernel");
        struct utsname host;
        const char *inside;

        if (!j || uname(&host) < 0) {
                judge(r, "kernel", VERIFY_UNTESTED, "%s", o->why[0] ? o->why : "no result");
                return;
        }
        inside = jtext(j, "detail");
        judge(r, "kernel", strcmp(inside, host.release) == 0 ? VERIFY_NOT_HELD : VERIFY_HELD,
              "uname -r inside: '%.100s' (control: the host's kernel is '%.100s'%s)", inside,
              host.release,
              strcmp(inside, host.release) == 0 ? ", the same: no kernel in between"
                                                : ", another: a kernel in between");
}

static bool control_unshare(void)
{
        pid_t pid = fork();
        int st;

        if (pid < 0)
                return false;
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Issue 12 #3 controls: whether this host, outside any sandbox, opens an AF_VSOCK socket
 * (a VM guest with a vsock device does) and sets up an io_uring; "" = yes, else the errno. */
static const char *control_vsock(void)
{
        int fd = socket(40 /* AF_VSOCK */, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return strerror(errno);
        close(fd);
        return "";
}

static const char *control_io_uring(void)
{
        char params[120] = {0}; /* struct io_uring_params */
        long fd = syscall(425 /* io_uring_setup, every arch's generic table */, 1, params);
        if (fd < 0)
                return strerror(errno);
        close((int)fd);
        return "";
}

/* Two busy processes for about 2 s on the host: CPU over wall time. */
static double control_cpu(void)
{
        uint64_t t0 = sbx_now_ms();
        struct rusage ru;
        pid_t kids[2];
        double cpu;

        for (int i = 0; i < 2; i++) {
                kids[i] = fork();
                if (kids[i] == 0) {
                        while (sbx_now_ms() - t0 < 2000)
                                ;
                        _exit(0);
                }
        }
        cpu = 0;
        for (int i = 0; i < 2; i++) {
                int st;
                if (kids[i] > 0 && wait4(kids[i], &st, 0, &ru) > 0)
                        cpu += (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
        }
        return cpu / ((double)(sbx_now_ms() - t0) / 1000.0);
}

/* Did anything open or read the planted key while the battery ran? An inotify watch on its
 * inode (taken before the run) sees an open through any path or mount of that file, so this
 * check does not take the sandbox's word. Return -1 when the watch could not be set. */
static int key_touched(int ino_fd)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;
        int seen = 0;

        if (ino_fd < 0)
                return -1;
        while ((n = read(ino_fd, buf, sizeof(buf))) > 0)
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        if (ev->mask & (IN_OPEN | IN_ACCESS))
                                seen = 1;
                        p += sizeof(*ev) + ev->len;
                }
        return seen;
}

static void judge_main(struct verify_report *r, struct run_service *svc,
                       const struct sbx_config *cfg, const struct bait *b, const struct outcome *o,
                       int key_seen)
{
        char ctl[240];
        struct stat st;
        pid_t found[8];
        size_t len = 0;
        _cleanup_free_ char *env = NULL;
        _cleanup_free_ char *path = NULL;
        bool child_env, child_seen;
        int fd;

        /* key: the server reads the same file (after the watch was read) */
        _cleanup_free_ char *k = read_file(b->key_path, NULL);
        judge_simple(r, o, "key",
                     mem_has(k, k ? strlen(k) : 0, b->key_value)
                         ? "the server reads it"
                         : "the server cannot read it either");
        if (key_seen > 0 && probe(r, "key")->verdict == VERIFY_HELD)
                judge(r, "key", VERIFY_NOT_HELD,
                      "the sandbox reported no read, but the host saw the key file opened "
                      "during the run (inotify)");
        setf(ctl, sizeof(ctl), "the host's /etc/shadow %s",
             stat("/etc/shadow", &st) == 0
                 ? (b->shadow_sha256[0] ? "exists, sha256 compared" : "exists, unreadable here")
                 : "does not exist");
        judge_simple(r, o, "shadow", ctl);
        {
                /* read something: the host's file, or the sandbox's own? */
                const char *h = jtext(got(o, "shadow"), "sha256");
                char own[65] = "";
                struct sbx_error e = {0};
                _cleanup_free_ char *rs = xasprintf("%s/python/etc/shadow", cfg->rootfs_dir);

                if (sbx_sha256_file(rs, NULL, own, &e) < 0)
                        own[0] = '\0';
                if (h[0] && !b->shadow_sha256[0] && strcmp(h, own) != 0)
                        judge(r, "shadow", VERIFY_UNTESTED,
                              "read an /etc/shadow (sha256 %.16s...) that is neither the rootfs's "
                              "own nor comparable with the host's, which this user cannot read",
                              h);
                else if (h[0] && strcmp(h, own) == 0 && strcmp(h, b->shadow_sha256) != 0)
                        judge(r, "shadow", VERIFY_HELD,
                              "read only the rootfs's own /etc/shadow (sha256 %.16s..., the "
                              "same as '%s'), not the host's (control: %s)",
                              h, rs,
                              b->shadow_sha256[0] ? "the host's differs"
                                                  : "host's unreadable here");
        }

        path = xasprintf("/proc/%d/environ", (int)b->child);
        for (int i = 0; i < 20; i++) {
                free(env);
                env = read_file(path, &len);
                if (mem_has(env, len, b->env_marker))
                        break;
                usleep(50000);
        }
        child_env = mem_has(env, len, b->env_marker);
        setf(ctl, sizeof(ctl), "the host reads the marker in /proc/%d/environ: %s", (int)b->child,
             child_env ? "yes" : "no");
        judge_simple(r, o, "environ", ctl);
        judge_simple(r, o, "hostenv",
                     child_env ? "the marker is in the host's environment" : "marker not seen");

        /* loopback: the server connects; the sandbox's attempt must not have arrived */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)b->port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bool host_conn = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0)
                close(fd);
        int accepted = 0, a;
        while ((a = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                accepted++;
                close(a);
        }
        setf(ctl, sizeof(ctl), "the server %s; the listener accepted %d connection(s), %s",
             host_conn ? "connects" : "cannot connect", accepted,
             accepted > (host_conn ? 1 : 0) ? "one from the sandbox" : "none from the sandbox");
        judge_simple(r, o, "loopback", ctl);
        if (got(o, "loopback") && accepted > (host_conn ? 1 : 0))
                probe(r, "loopback")->verdict = VERIFY_NOT_HELD;
        if (got(o, "loopback") && !host_conn)
                probe(r, "loopback")->verdict = VERIFY_UNTESTED;

        judge_simple(r, o, "route", "");
        judge_simple(r, o, "offhost", "");
        judge_simple(r, o, "dns", "");

        /* rootfs: also no trace in the native tree */
        judge_simple(r, o, "rootfs", "");
        static const char *const dirs[] = {"usr/bin", "etc", "."};
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *t =
                    xasprintf("%s/python/%s/%s", cfg->rootfs_dir, dirs[i], b->rootfs_file);
                if (lstat(t, &st) == 0) {
                        judge(r, "rootfs", VERIFY_NOT_HELD, "the file appeared on the host: '%s'",
                              t);
                        unlink(t);
                }
        }

        judge_simple(r, o, "mknod", "");
        judge_simple(r, o, "mount", "");
        judge_simple(r, o, "unshare",
                     control_unshare() ? "the host can unshare a user namespace"
                                       : "the host cannot unshare one either");
        {
                char bpfd[32] = "?";
                _cleanup_free_ char *t =
                    read_file("/proc/sys/kernel/unprivileged_bpf_disabled", NULL);
                if (t)
                        setf(bpfd, sizeof(bpfd), "%.*s", (int)strcspn(t, "\n"), t);
                setf(ctl, sizeof(ctl), "host kernel.unprivileged_bpf_disabled=%s", bpfd);
                judge_simple(r, o, "bpf", ctl);
        }
        {
                /* issue 12 #3 */
                const char *v = control_vsock(), *u = control_io_uring();
                char c1[160], c2[160];
                setf(c1, sizeof(c1), "%s%s",
                     *v ? "the host cannot open one either: " : "the host opens one", v);
                judge_simple(r, o, "vsock", c1);
                setf(c2, sizeof(c2), "%s%s",
                     *u ? "the host cannot set one up either: " : "the host sets one up", u);
                judge_simple(r, o, "io_uring", c2);
        }

        child_seen = false;
        size_t n = host_find(b->proc_marker, found, ELEMENTSOF(found));
        for (size_t i = 0; i < n; i++)
                child_seen |= found[i] == b->child;
        judge_simple(r, o, "hostproc",
                     child_seen ? "the host sees the marked process" : "marked process not seen");

        /* symlink: placed by the sandbox (or by us, if it could not), then read_workspace */
        _cleanup_free_ char *link = xasprintf("%s/%s", b->workspace, b->link_name);
        bool placed = o->verify && jbool(o->verify, "symlink_placed");
        if (lstat(link, &st) < 0) {
                placed = false;
                if (symlink(b->key_path, link) < 0) {
                        judge(r, "symlink", VERIFY_UNTESTED, "cannot place the symlink: %s",
                              strerror(errno));
                        return;
                }
        }
        _cleanup_free_ char *text = NULL;
        struct sbx_error e = {0};
        int rr = run_service_read_workspace(svc, b->link_name, &text, &e);
        if (rr < 0)
                judge(r, "symlink", VERIFY_HELD,
                      "link placed by %s; read_workspace refused: %.200s (control: the server "
                      "reads the key directly)",
                      placed ? "the sandbox" : "the battery", e.msg);
        else
                judge(r, "symlink", VERIFY_NOT_HELD, "read_workspace followed the link: %s",
                      mem_has(text, strlen(text), b->key_value) ? "returned the key"
                                                                : "returned something");
}

static void judge_daemon(struct verify_report *r, const struct bait *b, const struct outcome *o)
{
        json_object *j = got(o, "daemon");
        pid_t found[16];
        size_t n = 0;
        uint64_t t0 = sbx_now_ms();

        if (!j) {
                judge(r, "daemon", VERIFY_UNTESTED, "%s", o->why);
                return;
        }
        /* the run has returned: everything it started must be gone (allow 2 s to reap) */
        while ((n = host_find(b->daemon_marker, found, ELEMENTSOF(found))) > 0 &&
               sbx_now_ms() - t0 < 2000)
                usleep(100000);
        if (n > 0) {
                for (size_t i = 0; i < n; i++)
                        kill(found[i], SIGKILL);
                judge(r, "daemon", VERIFY_NOT_HELD,
                      "the daemon outlived the run as host pid %d (killed now)", (int)found[0]);
        } else if (!jbool(j, "started")) {
                judge(r, "daemon", VERIFY_UNTESTED, "the daemon did not start inside");
        } else {
                judge(r, "daemon", VERIFY_HELD,
                      "started inside, gone after the run (control: the host finds a marked "
                      "process of its own)");
        }
}

/* The last "forked N" progress line of the pids script in @o's stdout, or -1. */
static long forks_counted(const struct outcome *o)
{
        const char *p = o->res.out.data, *end = p ? p + o->res.out.len : NULL;
        long n = -1;

        while (p && p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
                char line[32];

                if (ll > 7 && ll < sizeof(line) && memcmp(p, "forked ", 7) == 0) {
                        memcpy(line, p, ll);
                        line[ll] = '\0';
                        n = strtol(line + 7, NULL, 10);
                }
                p = nl ? nl + 1 : end;
        }
        return n;
}

enum verify_verdict verify_judge_pids_unreported(const struct sbx_config *cfg, int run_r,
                                                 const struct run_result *res, long forks,
                                                 unsigned bound_s, const char *why, char *detail,
                                                 size_t size)
{
        const char *hit = run_r == 0 && res->limits_hit[0] ? res->limits_hit : "none";
        char peak[32] = "not measured";

        if (run_r == 0 && forks >= 0 && forks <= (long)cfg->pids_max &&
            strstr(res->limits_hit, "pids")) {
                setf(detail, size,
                     "%ld forks succeeded, then the sandbox was stopped at the cap (limits hit: "
                     "%.100s) (cap %u; control: the attempt goes to twice the cap + 64)",
                     forks, res->limits_hit, cfg->pids_max);
                return VERIFY_HELD;
        }
        if (run_r == 0 && res->usage.pids_peak.measured)
                setf(peak, sizeof(peak), "%llu", (unsigned long long)res->usage.pids_peak.value);
        if (run_r == 0 && res->oom_killed && forks >= 0 && forks <= (long)cfg->pids_max) {
                setf(detail, size,
                     "the memory cap (%u MiB) stopped the sandbox after %ld forks, before the "
                     "pids cap of %u (pids_peak %s): each forked process costs the run memory "
                     "too (gVisor: ~5 MiB of its Sentry's); a higher VESTIBULE_MEM_MB lets the "
                     "probe reach the pids cap",
                     cfg->mem_mb, forks, cfg->pids_max, peak);
                return VERIFY_UNTESTED;
        }
        if (run_r == 0 && res->outcome == RUN_OUTCOME_TIMED_OUT) {
                setf(detail, size,
                     "the run reached its bound of %u s after %ld forks, before the cap of %u "
                     "(pids_peak %s; limits hit: %.100s): this host forks too slowly to reach "
                     "the cap in time; a longer VESTIBULE_DEFAULT_TIMEOUT_S gives the probe longer",
                     bound_s, forks, cfg->pids_max, peak, hit);
                return VERIFY_UNTESTED;
        }
        setf(detail, size, "%.250s; %ld forks counted; limits hit: %.100s", why, forks, hit);
        return VERIFY_UNTESTED;
}

static void judge_pids(struct verify_report *r, const struct sbx_config *cfg,
                       const struct outcome *o, unsigned bound_s)
{
        json_object *j = got(o, "pids");
        char detail[400];

        if (!j) {
                /* No report: judged from the fork count, the limits the run hit, its bound */
                enum verify_verdict v = verify_judge_pids_unreported(
                    cfg, o->r, &o->res, o->r == 0 ? forks_counted(o) : -1, bound_s, o->why, detail,
                    sizeof(detail));
                judge(r, "pids", v, "%s", detail);
                return;
        }
        judge(r, "pids", jbool(j, "escaped") ? VERIFY_NOT_HELD : VERIFY_HELD,
              "%s (cap %u; control: the attempt goes to twice the cap + 64)", jtext(j, "detail"),
              cfg->pids_max);
}

static void judge_memory(struct verify_report *r, const struct sbx_config *cfg,
                         const struct outcome *o)
{
        json_object *j = got(o, "memory");

        if (j)
                judge(r, "memory", jbool(j, "escaped") ? VERIFY_NOT_HELD : VERIFY_HELD,
                      "%s (cap %u MiB, goal %u MiB)", jtext(j, "detail"), cfg->mem_mb,
                      cfg->mem_mb + 128);
        else if (o->r == 0 && (o->res.oom_killed || (o->res.outcome == RUN_OUTCOME_SIGNALED &&
                                                     o->res.term_signal == SIGKILL)))
                judge(r, "memory", VERIFY_HELD,
                      "killed by SIGKILL%s before reaching %u MiB (cap %u MiB)",
                      o->res.oom_killed ? " (out of memory)" : "", cfg->mem_mb + 128, cfg->mem_mb);
        else if (o->r == 0 && o->res.outcome == RUN_OUTCOME_EXITED && o->res.exit_code == 137)
                judge(r, "memory", VERIFY_HELD,
                      "exited 137 (killed) before reaching %u MiB (cap %u MiB)", cfg->mem_mb + 128,
                      cfg->mem_mb);
        else
                judge(r, "memory", VERIFY_UNTESTED, "%s", o->why);
}

static void judge_cpu(struct verify_report *r, const struct sbx_config *cfg,
                      const struct outcome *o)
{
        json_object *j = got(o, "cpu"), *v = NULL;
        double quota = (double)cfg->cpu_pct / 100.0, limit = quota * 1.25 + 0.05, ratio, ctl;

        if (!j) {
                judge(r, "cpu", VERIFY_UNTESTED, "%s", o->why);
                return;
        }
        double cpu = json_object_object_get_ex(j, "cpu_s", &v) ? json_object_get_double(v) : 0;
        double wall = json_object_object_get_ex(j, "wall_s", &v) ? json_object_get_double(v) : 1;
        ratio = wall > 0 ? cpu / wall : 0;
        ctl = control_cpu();
        if (ratio > limit)
                judge(r, "cpu", VERIFY_NOT_HELD,
                      "2 busy processes used %.0f%% of a core over %.1f s (quota %u%%)",
                      ratio * 100, wall, cfg->cpu_pct);
        else if (ctl <= limit)
                judge(r, "cpu", VERIFY_UNTESTED,
                      "inside %.0f%%, but the same burn on the host got only %.0f%% (quota "
                      "%u%%): the host is too busy to tell",
                      ratio * 100, ctl * 100, cfg->cpu_pct);
        else
                judge(r, "cpu", VERIFY_HELD,
                      "2 busy processes used %.0f%% of a core over %.1f s (quota %u%%; control: "
                      "%.0f%% on the host)",
                      ratio * 100, wall, cfg->cpu_pct, ctl * 100);
}

/* The egress probes: a service of their own whose settings allow verify.vestibule.test
 * (pinned to the bait's loopback listener) and localhost (not pinned), port 80 only. */
static void egress_probes(struct verify_report *r, const struct sbx_config *cfg,
                          const struct bait *b)
{
        static const char *const ids[] = {"egress_allowed", "egress_unlisted", "egress_literal",
                                          "egress_dns", "egress_private"};
        struct sbx_config c = *cfg;
        struct run_service *svc = NULL;
        struct sbx_error err = {0};
        struct outcome o;
        char pin[96], ctl[300];
        int accepted = 0, a;
        json_object *j;
        bool reached;

        memset(&c.egress, 0, sizeof(c.egress));
        snprintf(pin, sizeof(pin), "verify.vestibule.test=127.0.0.1:%d", b->port);
        if (config_egress_parse("verify.vestibule.test,localhost", "80", pin, &c.egress, &err) <
                0 ||
            run_service_new(&c, &svc, &err) < 0) {
                for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                        judge(r, ids[i], VERIFY_UNTESTED, "cannot set up: %s", err.msg);
                config_egress_done(&c.egress);
                return;
        }
        while ((a = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
                close(a); /* earlier probes' leftovers: only the proxy's counts below */
        run_script_net(svc, b, &c, verify_script_egress, probe_bound(&c, 30), "allowlist", &o);
        if (o.r == -EOPNOTSUPP) {
                for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                        judge(r, ids[i], VERIFY_NOT_APPLICABLE,
                              "this backend serves no network allowlist (a call asking for it is "
                              "Blocked: %.200s)",
                              o.err.msg);
                goto out;
        }
        while ((a = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
                accepted++;
                close(a);
        }
        j = got(&o, "egress_allowed");
        reached = j && jbool(j, "reached");
        if (!j)
                judge(r, "egress_allowed", VERIFY_UNTESTED, "%s", o.why[0] ? o.why : "no result");
        else
                judge(r, "egress_allowed", reached && accepted > 0 ? VERIFY_HELD : VERIFY_NOT_HELD,
                      "%s (control: the host's listener accepted %d connection(s) from the proxy)",
                      jtext(j, "detail"), accepted);
        /* each refusal counts only when the same run got through to the allowed host */
        snprintf(ctl, sizeof(ctl), "the same run %s the allowed host through the proxy",
                 reached ? "reached" : "did NOT reach");
        judge_simple(r, &o, "egress_unlisted", ctl);
        judge_simple(r, &o, "egress_literal", ctl);
        judge_simple(r, &o, "egress_dns", ctl);
        {
                struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
                bool loop = getaddrinfo("localhost", "80", &hints, &ai) == 0 && ai &&
                            egress_addr_class(ai->ai_addr) != NULL;
                if (ai)
                        freeaddrinfo(ai);
                snprintf(ctl + strlen(ctl), sizeof(ctl) - strlen(ctl),
                         "; the host resolves localhost to %s",
                         loop ? "loopback" : "a public address");
                judge_simple(r, &o, "egress_private", ctl);
        }
        for (size_t i = 1; !reached && i < ELEMENTSOF(ids); i++)
                if (probe(r, ids[i])->verdict == VERIFY_HELD)
                        probe(r, ids[i])->verdict = VERIFY_UNTESTED;
out:
        outcome_done(&o);
        run_service_free(svc);
        config_egress_done(&c.egress);
}

int verify_run(const struct sbx_config *cfg, struct verify_report *ret, struct sbx_error *err)
{
        struct verify_report *r = ret;
        struct bait b = {.listen_fd = -1};
        struct sbx_config c = *cfg;
        struct run_service *svc = NULL;
        struct outcome main_o, o;
        int k;

        memset(r, 0, sizeof(*r));
        for (size_t i = 0; i < ELEMENTSOF(probe_defs); i++)
                r->probes[r->n_probes++] = (struct verify_probe){
                    .id = probe_defs[i].id,
                    .title = probe_defs[i].title,
                    .claim = probe_defs[i].claim,
                    .verdict = VERIFY_UNTESTED,
                };

        k = bait_make(cfg, &b, err);
        if (k < 0) {
                bait_done(&b);
                return k;
        }
        c.workspace_dir = b.workspace;
        k = run_service_new(&c, &svc, err);
        if (k < 0) {
                bait_done(&b);
                return k;
        }

        /* watched from outside before the run: the key must not even be opened */
        int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ino >= 0 && inotify_add_watch(ino, b.key_path, IN_OPEN | IN_ACCESS) < 0) {
                close(ino);
                ino = -1;
        }
        run_script(svc, &b, &c, verify_script_main, 30, &main_o);
        int key_seen = key_touched(ino);
        if (ino >= 0)
                close(ino);
        if (main_o.r < 0) {
                r->ran = false;
                snprintf(r->blocked, sizeof(r->blocked), "%s", main_o.err.msg);
                snprintf(r->backend, sizeof(r->backend), "%s", main_o.res.backend);
                outcome_done(&main_o);
                goto out;
        }
        r->ran = true;
        snprintf(r->backend, sizeof(r->backend), "%s", main_o.res.backend);
        snprintf(r->grade, sizeof(r->grade), "%s", main_o.res.isolation);
        judge_main(r, svc, &c, &b, &main_o, key_seen);
        judge_kernel(r, &main_o);
        outcome_done(&main_o);
        run_script(svc, &b, &c, verify_script_daemon, 20, &o);
        judge_daemon(r, &b, &o);
        outcome_done(&o);

        /* the limits are tried only when the grade claims them: an unclaimed memory cap
         * would let the probe take the host's memory */
        if (verify_claimed(r->grade, VERIFY_CLAIM_PIDS)) {
                run_script(svc, &b, &c, verify_script_pids, 30, &o);
                judge_pids(r, &c, &o, probe_bound(&c, 30));
                outcome_done(&o);
        }
        if (verify_claimed(r->grade, VERIFY_CLAIM_MEMORY)) {
                run_script(svc, &b, &c, verify_script_memory, 30, &o);
                judge_memory(r, &c, &o);
                outcome_done(&o);
        }
        if (verify_claimed(r->grade, VERIFY_CLAIM_CPU)) {
                run_script(svc, &b, &c, verify_script_cpu, 20, &o);
                judge_cpu(r, &c, &o);
                outcome_done(&o);
        }
        if (verify_claimed(r->grade, VERIFY_CLAIM_EGRESS))
                egress_probes(r, &c, &b);

        for (size_t i = 0; i < r->n_probes; i++) {
                struct verify_probe *p = &r->probes[i];

                if (!verify_claimed(r->grade, p->claim)) {
                        /* what was measured stays in the detail, but is not judged */
                        char was[400];
                        snprintf(was, sizeof(was), "%s", p->detail);
                        p->verdict = VERIFY_NOT_APPLICABLE;
                        setf(p->detail, sizeof(p->detail), "%s%s%.300s",
                             strncmp(r->grade, "none", 4) == 0 ? "grade claims no isolation"
                                                               : verify_claim_none_text(p->claim),
                             was[0] ? "; measured: " : "", was);
                }
                switch (p->verdict) {
                case VERIFY_HELD:
                        r->held++;
                        break;
                case VERIFY_NOT_HELD:
                        r->not_held++;
                        break;
                case VERIFY_NOT_APPLICABLE:
                        r->not_applicable++;
                        break;
                case VERIFY_UNTESTED:
                default:
                        r->untested++;
                        break;
                }
        }
        r->ok = r->ran && r->not_held == 0 && r->untested == 0;
out:
        run_service_free(svc);
        bait_done(&b);
        return 0;
}

/* ---- output ----------------------------------------------------------------------------- */

/* @s escaped for the terminal: details quote what the sandbox printed (its stderr, values it
 * reported), and a backend's Blocked: text quotes engine replies (issue 12, finding 26). */
static char *safe(const char *s)
{
        return sbx_term_escape(s, strlen(s), false);
}

void verify_print(const struct verify_report *r, FILE *out)
{
        if (!r->ran) {
                _cleanup_free_ char *be = safe(r->backend), *bl = safe(r->blocked);
                fprintf(out, "verify%s%s: nothing ran. Blocked: %s\n", r->backend[0] ? " " : "", be,
                        bl);
                return;
        }
        {
                _cleanup_free_ char *be = safe(r->backend), *gr = safe(r->grade);
                fprintf(out, "verify: backend %s, isolation: %s\n", be, gr);
        }
        for (size_t i = 0; i < r->n_probes; i++) {
                const struct verify_probe *p = &r->probes[i];
                _cleanup_free_ char *detail = safe(p->detail);

                if (p->verdict == VERIFY_NOT_APPLICABLE)
                        fprintf(out, "  %-14s %-52s (%s)\n", "not applicable", p->title, detail);
                else
                        fprintf(out, "  %-14s %-52s %s\n", verify_verdict_word(p->verdict),
                                p->title, detail);
        }
        fprintf(out, "summary: %u held, %u NOT HELD, %u not applicable, %u not tested: %s\n",
                r->held, r->not_held, r->not_applicable, r->untested,
                r->ok ? "every boundary this grade claims held"
                      : "this grade claims more than held on this host");
}

json_object *verify_json(const struct verify_report *r)
{
        static const char *const ids[] = {"held", "not_held", "not_applicable", "not_tested"};
        json_object *o = json_object_new_object(), *a = json_object_new_array();
        json_object *s = json_object_new_object();

        json_object_object_add(o, "backend", json_object_new_string(r->backend));
        json_object_object_add(o, "ran", json_object_new_boolean(r->ran));
        json_object_object_add(o, "grade", r->ran ? json_object_new_string(r->grade) : NULL);
        json_object_object_add(o, "blocked", r->ran ? NULL : json_object_new_string(r->blocked));
        for (size_t i = 0; r->ran && i < r->n_probes; i++) {
                json_object *p = json_object_new_object();

                json_object_object_add(p, "id", json_object_new_string(r->probes[i].id));
                json_object_object_add(p, "title", json_object_new_string(r->probes[i].title));
                json_object_object_add(p, "verdict",
                                       json_object_new_string(ids[r->probes[i].verdict]));
                json_object_object_add(
                    p, "claimed",
                    json_object_new_boolean(verify_claimed(r->grade, r->probes[i].claim)));
                json_object_object_add(p, "detail", json_object_new_string(r->probes[i].detail));
                json_object_array_add(a, p);
        }
        json_object_object_add(o, "probes", a);
        json_object_object_add(s, "held", json_object_new_int((int)r->held));
        json_object_object_add(s, "not_held", json_object_new_int((int)r->not_held));
        json_object_object_add(s, "not_applicable", json_object_new_int((int)r->not_applicable));
        json_object_object_add(s, "not_tested", json_object_new_int((int)r->untested));
        json_object_object_add(o, "summary", s);
        json_object_object_add(o, "ok", json_object_new_boolean(r->ok));
        return o;
}
