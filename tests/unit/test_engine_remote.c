/* test_engine_remote.c - the container backend with a daemon that cannot see our files: the
 * pieces (plaintext refusal, loopback and certificate checks, which daemons share our files,
 * the hand-in tar, the copy-back's refusals against a hostile archive, the volume mounts in the
 * create body and their verification), then real runs on Docker behind a loopback TCP front
 * (tests/tools/engine-forward.mjs) and a mutual-TLS one with certificates made by openssl, so
 * the server sees tcp://127.0.0.1:PORT and must hand code and workspace in through volumes.
 * Nothing leaves the machine: the fronts listen on 127.0.0.1 and talk to the local socket. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lazy/archive.h"
#include <check.h>
#include "lazy/curl.h"

#include "common/chase.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/cellstream.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/run.h"
#include "run/sandbox.h"
#include "testutil.h"

#define IMG_PY "vestibule/python:bookworm"
#define IMG_NODE "vestibule/node:bookworm"
#define TAR_PY "/var/tmp/vestibule-images/python.tar"
#define TAR_NODE "/var/tmp/vestibule-images/node.tar"
#define DOCKER_SOCK_PATH "/var/run/docker.sock"
#define PODMAN_SOCK_PATH "/run/podman/podman.sock"
#define TEST_UID 2000

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");
        ck_assert_msg(f != NULL, "%s: %m", path);
        fputs(text, f);
        fclose(f);
}

static char *read_text(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = xcalloc(1, 65536);
        size_t n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *cmd = NULL;
        va_start(ap, fmt);
        ck_assert_int_ge(vasprintf(&cmd, fmt, ap), 0);
        va_end(ap);
        ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* ---------------------------------------------------------------------------------------- */
/* Endpoint checks                                                                           */

START_TEST(plaintext_only_to_loopback)
{
        struct engine_endpoint ep;
        struct sbx_error err = {0};
        static const char *const ok[] = {"tcp://127.0.0.1:2375", "tcp://127.8.9.10",
                                         "tcp://localhost:2375", "tcp://LOCALHOST",
                                         "tcp://[::1]:2375",     "tcp://[::ffff:127.0.0.1]:1"};
        static const char *const refused[] = {
            "tcp://10.0.0.5:2375", "tcp://docker.example:2375",        "tcp://[2001:db8::1]:2375",
            "tcp://128.0.0.1",     "tcp://localhost.example.com:2375", "tcp://0.0.0.0:2375"};

        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                ck_assert_msg(engine_endpoint_parse(ok[i], false, &ep, &err) == 0, "%s: %s", ok[i],
                              err.msg);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                ck_assert_msg(engine_endpoint_parse(refused[i], false, &ep, &err) == -EPERM, "%s",
                              refused[i]);
                ck_assert_ptr_nonnull(strstr(err.msg, "DOCKER_TLS_VERIFY"));
                ck_assert_ptr_nonnull(strstr(err.msg, refused[i]));
                /* control: the same address with TLS is fine */
                ck_assert_int_eq(engine_endpoint_parse(refused[i], true, &ep, &err), 0);
                ck_assert(ep.tls && ep.tls_verify && strncmp(ep.base_url, "https://", 8) == 0);
        }
        ck_assert(engine_host_is_loopback("127.0.0.1", 9));
        ck_assert(!engine_host_is_loopback("127.0.0.1x", 10));
        ck_assert(!engine_host_is_loopback("", 0));
}
END_TEST

START_TEST(cert_dir_needs_all_three_files)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        struct sbx_error err = {0};
        const char *pems[] = {"ca.pem", "cert.pem", "key.pem"};

        ck_assert_int_eq(engine_cert_dir_check("", "DOCKER_CERT_PATH", &err), -ENOENT);
        for (size_t i = 0; i < 3; i++) {
                ck_assert_int_eq(engine_cert_dir_check(d, "DOCKER_CERT_PATH", &err), -ENOENT);
                ck_assert_ptr_nonnull(strstr(err.msg, pems[i]));
                _cleanup_free_ char *f = xasprintf("%s/%s", d, pems[i]);
                write_file(f, "x");
        }
        ck_assert_int_eq(engine_cert_dir_check(d, "DOCKER_CERT_PATH", &err), 0);
        sh("rm -rf '%s'", d);
}
END_TEST

START_TEST(config_carries_the_engine_environment)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        size_t n = 0;
        char miss[300];

        fake_env_reset();
        fake_env_set("HOME", "/home/someone");
        fake_env_set("DOCKER_HOST", "tcp://127.0.0.1:2375");
        fake_env_set("DOCKER_CONTEXT", "");
        fake_env_set("CONTAINER_HOST", "unix:///run/x.sock");
        ck_assert_int_eq(config_load_from(fake_getenv, NULL, &c, &err), 0);
        ck_assert_str_eq(c->engine_env.docker_host, "tcp://127.0.0.1:2375");
        ck_assert_ptr_null(c->engine_env.docker_context); /* blank = unset */
        ck_assert_str_eq(c->engine_env.container_host, "unix:///run/x.sock");
        ck_assert_str_eq(c->engine_env.home, "/home/someone");
        ck_assert_ptr_null(c->engine_env.docker_tls_verify);
        /* the engine resolves from the config's copy, with no environment function */
        ck_assert_int_eq(engine_endpoints_resolve_env(SBX_RUNTIME_AUTO, &c->engine_env, &eps, &n,
                                                      miss, sizeof(miss), &err),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(eps[0].base_url, "http://127.0.0.1:2375");
        ck_assert_str_eq(eps[0].origin, "DOCKER_HOST");
        free(TAKE_PTR(eps));
        /* and the plaintext refusal holds through it */
        free(c->engine_env.docker_host);
        c->engine_env.docker_host = xstrdup("tcp://192.0.2.7:2375");
        ck_assert_int_eq(engine_endpoints_resolve_env(SBX_RUNTIME_AUTO, &c->engine_env, &eps, &n,
                                                      miss, sizeof(miss), &err),
                         -EPERM);
        config_free(c);
}
END_TEST

START_TEST(which_daemons_share_our_files)
{
        struct engine_endpoint unix_ep, tcp_ep, machine_ep;
        struct sbx_error err = {0};
        char why[300];

        ck_assert_int_eq(
            engine_endpoint_parse("unix:///var/run/docker.sock", false, &unix_ep, &err), 0);
        ck_assert_int_eq(engine_endpoint_parse("tcp://127.0.0.1:2375", false, &tcp_ep, &err), 0);
        ck_assert_int_eq(
            engine_endpoint_parse("unix:///home/u/.local/share/containers/podman/machine/"
                                  "podman.sock",
                                  false, &machine_ep, &err),
            0);
        /* the local Linux daemon: binds work */
        ck_assert(engine_daemon_shares_files(&unix_ep, "Debian GNU/Linux 12 (bookworm)", "vm", "vm",
                                             why, sizeof(why)));
        /* tcp://, even to the loopback: its filesystem is not known to be ours */
        ck_assert(!engine_daemon_shares_files(&tcp_ep, "Debian GNU/Linux 12 (bookworm)", "vm", "vm",
                                              why, sizeof(why)));
        ck_assert_ptr_nonnull(strstr(why, "tcp://"));
        /* Docker Desktop's VM, through its own unix socket */
        ck_assert(!engine_daemon_shares_files(&unix_ep, "Docker Desktop", "docker-desktop", "mac",
                                              why, sizeof(why)));
        ck_assert_ptr_nonnull(strstr(why, "Docker Desktop"));
        ck_assert(
            !engine_daemon_shares_files(&unix_ep, "Docker Desktop", "vm", "vm", why, sizeof(why)));
        /* a forwarded socket of another host */
        ck_assert(!engine_daemon_shares_files(&unix_ep, "Ubuntu 24.04", "buildbox", "laptop", why,
                                              sizeof(why)));
        ck_assert_ptr_nonnull(strstr(why, "buildbox"));
        ck_assert(
            !engine_daemon_shares_files(&unix_ep, "Ubuntu 24.04", "", "laptop", why, sizeof(why)));
        ck_assert(!engine_daemon_shares_files(&machine_ep, "fedora", "localhost", "localhost", why,
                                              sizeof(why)));
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The hand-in tar and the copy-back                                                         */

struct tar_entry {
        char name[256];
        mode_t mode;
        uid_t uid;
        gid_t gid;
        char link[256];
        char data[64];
};

static size_t tar_list(int fd, struct tar_entry *v, size_t max)
{
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        size_t n = 0;

        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        archive_read_support_format_tar(a);
        ck_assert_int_eq(archive_read_open_fd(a, fd, 10240), ARCHIVE_OK);
        while (archive_read_next_header(a, &e) == ARCHIVE_OK && n < max) {
                struct tar_entry *t = &v[n++];
                memset(t, 0, sizeof(*t));
                snprintf(t->name, sizeof(t->name), "%s", archive_entry_pathname(e));
                t->mode = archive_entry_mode(e);
                t->uid = archive_entry_uid(e);
                t->gid = archive_entry_gid(e);
                if (archive_entry_symlink(e))
                        snprintf(t->link, sizeof(t->link), "%s", archive_entry_symlink(e));
                la_ssize_t r = archive_read_data(a, t->data, sizeof(t->data) - 1);
                if (r > 0)
                        t->data[r] = '\0';
        }
        archive_read_free(a);
        return n;
}

static const struct tar_entry *tar_find(const struct tar_entry *v, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].name, name) == 0)
                        return &v[i];
        return NULL;
}

START_TEST(handin_tar_copies_workspace_without_following_links)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct engine_manifest m = {0};
        struct sbx_error err = {0};
        struct tar_entry v[32];
        unsigned skipped = 0;
        int fd = engine_tmpfile(&err);

        ck_assert_int_ge(fd, 0);
        sh("cd '%s' && mkdir -p sub/deeper && echo hello >a.txt && echo deep >sub/deeper/d.txt "
           "&& ln -s /etc/passwd pw && mkfifo pipe && chmod 4755 a.txt",
           ws);
        ck_assert_int_eq(engine_handin_tar(fd, ENGINE_HANDIN_BOTH, "main.py", "print(1)\n", 9, ws,
                                           2000, 2001, &m, &skipped, &err),
                         0);
        size_t n = tar_list(fd, v, 32);
        const struct tar_entry *t;

        t = tar_find(v, n, "sandbox/main.py");
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->data, "print(1)\n");
        ck_assert_uint_eq(t->uid, 0);
        ck_assert_uint_eq(t->mode & 0777, 0644);
        t = tar_find(v, n, "workspace/");
        ck_assert_ptr_nonnull(t);
        ck_assert(S_ISDIR(t->mode));
        ck_assert_uint_eq(t->uid, 2000); /* the volume root becomes the run user's */
        ck_assert_uint_eq(t->gid, 2001);
        t = tar_find(v, n, "workspace/a.txt");
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->data, "hello\n");
        ck_assert_uint_eq(t->mode & 07777, 0755); /* set-uid stripped */
        ck_assert_uint_eq(t->uid, 2000);
        ck_assert_ptr_nonnull(tar_find(v, n, "workspace/sub/deeper/d.txt"));
        /* the symlink stays a symlink; /etc/passwd's content never enters the tar */
        t = tar_find(v, n, "workspace/pw");
        ck_assert_ptr_nonnull(t);
        ck_assert(S_ISLNK(t->mode));
        ck_assert_str_eq(t->link, "/etc/passwd");
        ck_assert_str_eq(t->data, "");
        /* the fifo is left out and counted */
        ck_assert_ptr_null(tar_find(v, n, "workspace/pipe"));
        ck_assert_uint_eq(skipped, 1);
        /* last, after the workspace: the empty marker a volume-path spare waits for */
        ck_assert_uint_gt(n, 0);
        ck_assert_str_eq(v[n - 1].name, "sandbox/" ENGINE_HANDIN_GO);
        ck_assert(S_ISREG(v[n - 1].mode));
        ck_assert_str_eq(v[n - 1].data, "");
        /* the manifest: a.txt, sub, sub/deeper, sub/deeper/d.txt, pw */
        ck_assert_uint_eq(m.n, 5);
        engine_manifest_done(&m);
        close(fd);
        sh("rm -rf '%s'", ws);
}
END_TEST

/* Podman's two tars: the code's ends with the marker too; the workspace's holds none. */
START_TEST(handin_tar_code_part_ends_with_the_marker)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct sbx_error err = {0};
        struct tar_entry v[8];
        int fd = engine_tmpfile(&err), wfd = engine_tmpfile(&err);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(wfd, 0);
        sh("cd '%s' && echo hello >a.txt", ws);
        ck_assert_int_eq(engine_handin_tar(fd, ENGINE_HANDIN_CODE, "main.py", "print(1)\n", 9, ws,
                                           2000, 2001, NULL, NULL, &err),
                         0);
        size_t n = tar_list(fd, v, 8);
        ck_assert_uint_gt(n, 1);
        ck_assert_str_eq(v[n - 1].name, "./" ENGINE_HANDIN_GO);
        ck_assert_ptr_nonnull(tar_find(v, n, "./main.py"));
        ck_assert_int_eq(engine_handin_tar(wfd, ENGINE_HANDIN_WORKSPACE, "main.py", "print(1)\n", 9,
                                           ws, 2000, 2001, NULL, NULL, &err),
                         0);
        n = tar_list(wfd, v, 8);
        ck_assert_ptr_nonnull(tar_find(v, n, "./a.txt"));
        ck_assert_ptr_null(tar_find(v, n, "./" ENGINE_HANDIN_GO));
        close(fd);
        close(wfd);
        sh("rm -rf '%s'", ws);
}
END_TEST

/* The server runs each tool call on a worker thread with a 256 KiB stack (src/mcp/server.c):
 * the hand-in walk must fit in it whatever the workspace's shape. */
#if defined(__SANITIZE_ADDRESS__)
#define WORKER_STACK (1u << 20) /* as the server's under the sanitizers (larger frames) */
#else
#define WORKER_STACK (256u << 10)
#endif

struct handin_call {
        const char *ws;
        int fd;
        int rc;
        struct engine_manifest m;
        unsigned skipped;
        struct sbx_error err;
};

static void *handin_thread(void *p)
{
        struct handin_call *c = p;
        c->rc = engine_handin_tar(c->fd, ENGINE_HANDIN_BOTH, "main.py", "print(1)\n", 9, c->ws,
                                  2000, 2000, &c->m, &c->skipped, &c->err);
        return NULL;
}

static int handin_on_worker_stack(struct handin_call *c)
{
        pthread_attr_t attr;
        pthread_t t;

        c->fd = engine_tmpfile(&c->err);
        ck_assert_int_ge(c->fd, 0);
        ck_assert_int_eq(pthread_attr_init(&attr), 0);
        ck_assert_int_eq(pthread_attr_setstacksize(&attr, WORKER_STACK), 0);
        ck_assert_int_eq(pthread_create(&t, &attr, handin_thread, c), 0);
        pthread_join(t, NULL);
        pthread_attr_destroy(&attr);
        return c->rc;
}

/* issue 12 #22: `z/z/z` crashed the server (66 KB of stack per level on a 256 KiB thread). */
START_TEST(handin_deep_tree_fits_worker_stack)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct handin_call c = {.ws = ws};
        struct tar_entry v[64];

        /* control: a flat workspace went through before the fix too */
        sh("cd '%s' && echo top >top.txt && mkdir -p .git/refs/heads src/pkg/mod z/z/z/z/z/z/z/z "
           "&& echo ref >.git/refs/heads/main && echo deep >z/z/z/z/z/z/z/z/leaf.txt",
           ws);
        ck_assert_msg(handin_on_worker_stack(&c) == 0, "%s", c.err.msg);
        size_t n = tar_list(c.fd, v, 64);
        ck_assert_ptr_nonnull(tar_find(v, n, "workspace/top.txt"));
        ck_assert_ptr_nonnull(tar_find(v, n, "workspace/.git/refs/heads/main"));
        const struct tar_entry *t = tar_find(v, n, "workspace/z/z/z/z/z/z/z/z/leaf.txt");
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->data, "deep\n");
        /* top.txt, .git .git/refs .git/refs/heads .git/refs/heads/main, src src/pkg src/pkg/mod,
         * 8 z folders, leaf.txt */
        ck_assert_uint_eq(c.m.n, 1 + 4 + 3 + 8 + 1);
        engine_manifest_done(&c.m);
        close(c.fd);
        sh("rm -rf '%s'", ws);
}
END_TEST

/* Wide: thousands of entries in one folder and many sibling folders. */
START_TEST(handin_wide_tree)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct handin_call c = {.ws = ws};

        sh("cd '%s' && mkdir w && cd w && for i in $(seq 3000); do : >f$i; done && "
           "for i in $(seq 200); do mkdir -p s$i/a/b && : >s$i/a/b/x; done",
           ws);
        ck_assert_msg(handin_on_worker_stack(&c) == 0, "%s", c.err.msg);
        ck_assert_uint_eq(c.m.n, 1 + 3000 + 200 * 4);
        engine_manifest_done(&c.m);
        close(c.fd);
        sh("rm -rf '%s'", ws);
}
END_TEST

/* A tar written by hand, as a hostile or broken engine could send it. */
struct hostile {
        struct archive *a;
        int fd;
};

static void h_open(struct hostile *h)
{
        struct sbx_error err = {0};
        h->fd = engine_tmpfile(&err);
        ck_assert_int_ge(h->fd, 0);
        h->a = archive_write_new();
        archive_write_set_format_pax_restricted(h->a);
        ck_assert_int_eq(archive_write_open_fd(h->a, h->fd), ARCHIVE_OK);
}

static void h_add(struct hostile *h, const char *name, mode_t mode, const char *data,
                  const char *link, const char *hardlink)
{
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, name);
        archive_entry_set_mode(e, mode);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_size(e, data ? (la_int64_t)strlen(data) : 0);
        if (link)
                archive_entry_set_symlink(e, link);
        if (hardlink)
                archive_entry_set_hardlink(e, hardlink);
        ck_assert_int_eq(archive_write_header(h->a, e), ARCHIVE_OK);
        if (data)
                ck_assert_int_eq(archive_write_data(h->a, data, strlen(data)),
                                 (la_ssize_t)strlen(data));
        archive_entry_free(e);
}

static void h_close(struct hostile *h)
{
        ck_assert_int_eq(archive_write_close(h->a), ARCHIVE_OK);
        archive_write_free(h->a);
        ck_assert_int_eq(lseek(h->fd, 0, SEEK_SET), 0);
}

START_TEST(copyback_refuses_escapes)
{
        _cleanup_free_ char *base = sbx_test_tmpdir();
        _cleanup_free_ char *ws = xasprintf("%s/ws", base);
        _cleanup_free_ char *outside = xasprintf("%s/outside", base);
        _cleanup_free_ char *secret = xasprintf("%s/secret.txt", outside);
        struct engine_copyback cb = {0};
        struct sbx_error err = {0};
        struct hostile h;

        sh("mkdir -p '%s' '%s' && echo original >'%s'", ws, outside, secret);
        /* on the host already: a symlinked folder and a symlinked file pointing outside */
        sh("cd '%s' && ln -s ../outside linkdir && ln -s ../outside/secret.txt linkfile", ws);

        h_open(&h);
        h_add(&h, "./", S_IFDIR | 0755, NULL, NULL, NULL);
        h_add(&h, "/abs.txt", S_IFREG | 0644, "x", NULL, NULL);
        h_add(&h, "../escape.txt", S_IFREG | 0644, "x", NULL, NULL);
        h_add(&h, "sub/../../escape2.txt", S_IFREG | 0644, "x", NULL, NULL);
        h_add(&h, "linkdir/secret.txt", S_IFREG | 0644, "pwned", NULL, NULL);
        h_add(&h, "linkdir/new.txt", S_IFREG | 0644, "pwned", NULL, NULL);
        h_add(&h, "hl", S_IFREG | 0644, NULL, NULL, "../outside/secret.txt");
        h_add(&h, "dev", S_IFCHR | 0644, NULL, NULL, NULL);
        h_add(&h, ".vestibule-copyback-00000000", S_IFREG | 0644, "x", NULL, NULL);
        /* the controls: ordinary content is written */
        h_add(&h, "ok.txt", S_IFREG | 0644, "fine", NULL, NULL);
        h_add(&h, "d/", S_IFDIR | 0755, NULL, NULL, NULL);
        h_add(&h, "d/inner.txt", S_IFREG | 0600, "inner", NULL, NULL);
        h_add(&h, "made/by/parents.txt", S_IFREG | 0644, "p", NULL, NULL);
        h_add(&h, "ln", S_IFLNK | 0777, NULL, "ok.txt", NULL);
        h_add(&h, "hl-ok", S_IFREG | 0644, NULL, NULL, "ok.txt");
        /* a file entry over the host's symlink replaces the link, never writes through it */
        h_add(&h, "linkfile", S_IFREG | 0644, "replaced", NULL, NULL);
        h_close(&h);

        ck_assert_int_eq(engine_workspace_unpack(h.fd, ws, NULL, 0, 0, false, &cb, &err), 0);
        close(h.fd);

        /* nothing outside the workspace changed */
        _cleanup_free_ char *sec = read_text(secret);
        ck_assert_str_eq(sec, "original\n");
        _cleanup_free_ char *n1 = xasprintf("%s/new.txt", outside);
        _cleanup_free_ char *n2 = xasprintf("%s/escape.txt", base);
        _cleanup_free_ char *n3 = xasprintf("%s/abs.txt", ws);
        ck_assert_int_ne(access(n1, F_OK), 0);
        ck_assert_int_ne(access(n2, F_OK), 0);
        ck_assert_int_ne(access("/abs.txt", F_OK), 0);
        ck_assert_int_ne(access(n3, F_OK), 0);
        /* abs, .., .., linkdir x2, hl, dev, reserved name */
        ck_assert_msg(cb.refused == 8, "refused %u (%s)", cb.refused, cb.first_refusal);
        ck_assert_ptr_nonnull(strstr(cb.first_refusal, "absolute"));

        /* the controls landed */
        _cleanup_free_ char *okp = xasprintf("%s/ok.txt", ws);
        _cleanup_free_ char *ok = read_text(okp);
        ck_assert_str_eq(ok, "fine");
        _cleanup_free_ char *ip = xasprintf("%s/d/inner.txt", ws);
        _cleanup_free_ char *in = read_text(ip);
        ck_assert_str_eq(in, "inner");
        struct stat st;
        ck_assert_int_eq(stat(ip, &st), 0);
        ck_assert_uint_eq(st.st_mode & 0777, 0600);
        _cleanup_free_ char *pp = xasprintf("%s/made/by/parents.txt", ws);
        ck_assert_int_eq(access(pp, F_OK), 0);
        _cleanup_free_ char *lp = xasprintf("%s/ln", ws);
        char target[64] = "";
        ck_assert_int_gt(readlink(lp, target, sizeof(target) - 1), 0);
        ck_assert_str_eq(target, "ok.txt");
        _cleanup_free_ char *hp = xasprintf("%s/hl-ok", ws);
        struct stat a, b;
        ck_assert_int_eq(stat(hp, &a), 0);
        ck_assert_int_eq(stat(okp, &b), 0);
        ck_assert_uint_eq(a.st_ino, b.st_ino);
        _cleanup_free_ char *lf = xasprintf("%s/linkfile", ws);
        ck_assert_int_eq(lstat(lf, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        _cleanup_free_ char *lft = read_text(lf);
        ck_assert_str_eq(lft, "replaced");
        /* no temporary file left behind */
        _cleanup_free_ char *cmd =
            xasprintf("find '%s' -name '.vestibule-copyback-*' | grep -q .", base);
        ck_assert_int_ne(system(cmd), 0);
        sh("rm -rf '%s'", base);
}
END_TEST

/* Deeper than the limit: left out and counted, never a crash nor a refusal (issue 24: a run
 * could make such a tree, and the refusal then blocked every later run); the limit itself
 * works, and the copy-back keeps what was left out. */
START_TEST(handin_too_deep_is_left_out)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct handin_call c = {.ws = ws};

        /* 128 levels: the deepest allowed */
        sh("cd '%s' && for i in $(seq 128); do mkdir d && cd d || exit 1; done && echo ok >f", ws);
        ck_assert_msg(handin_on_worker_stack(&c) == 0, "%s", c.err.msg);
        ck_assert_uint_eq(c.m.n, 129);
        engine_manifest_done(&c.m);
        close(c.fd);
        /* one more level (and a sibling file at the deepest allowed level): the folder is left
         * out, counted; everything above it goes in */
        sh("cd '%s' && cd $(printf 'd/%%.0s' $(seq 128)) && mkdir d && echo no >d/f && echo yes "
           ">g",
           ws);
        memset(&c, 0, sizeof(c));
        c.ws = ws;
        ck_assert_msg(handin_on_worker_stack(&c) == 0, "%s", c.err.msg);
        ck_assert_uint_eq(c.skipped, 1);
        ck_assert_uint_eq(c.m.n, 130); /* 128 folders, f, g */
        _cleanup_free_ char *deep = xstrdup("");
        for (int i = 0; i < 128; i++) {
                char *next = xasprintf("%sd/", deep);
                free(deep);
                deep = next;
        }
        _cleanup_free_ char *rel_g = xasprintf("%sg", deep);
        bool has_g = false;
        for (size_t i = 0; i < c.m.n; i++) {
                has_g |= strcmp(c.m.v[i].rel, rel_g) == 0;
                ck_assert_msg(strlen(c.m.v[i].rel) <= strlen(rel_g), "%s went in", c.m.v[i].rel);
        }
        ck_assert(has_g);
        close(c.fd);
        /* the copy-back of a run that changed nothing deletes nothing it never had */
        struct engine_copyback cb = {0};
        struct hostile h;
        h_open(&h);
        h_add(&h, "./", S_IFDIR | 0755, NULL, NULL, NULL);
        h_close(&h);
        (void)engine_workspace_unpack(h.fd, ws, &c.m, 0, 0, false, &cb, &c.err);
        close(h.fd);
        _cleanup_free_ char *deep_f = xasprintf("%s/%sd/f", ws, deep);
        ck_assert_int_eq(access(deep_f, F_OK), 0);
        engine_manifest_done(&c.m);
        sh("rm -rf '%s'", ws);
}
END_TEST

START_TEST(copyback_deletes_only_what_the_run_deleted)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct engine_manifest m = {0};
        struct engine_copyback cb = {0};
        struct sbx_error err = {0};
        struct hostile h;
        int fd = engine_tmpfile(&err);

        sh("cd '%s' && echo keep >keep.txt && echo gone >gone.txt && echo mine >changed.txt && "
           "mkdir -p olddir && echo x >olddir/x.txt",
           ws);
        ck_assert_int_eq(
            engine_handin_tar(fd, ENGINE_HANDIN_BOTH, "main.py", "", 0, ws, 1, 1, &m, NULL, &err),
            0);
        close(fd);
        /* meanwhile on the host: changed.txt is rewritten (another writer), new.txt appears */
        sleep(1);
        sh("cd '%s' && echo 'someone else' >changed.txt && echo new >new.txt", ws);

        /* the run's workspace: only keep.txt is left */
        h_open(&h);
        h_add(&h, "./", S_IFDIR | 0755, NULL, NULL, NULL);
        h_add(&h, "./keep.txt", S_IFREG | 0644, "keep\n", NULL, NULL);
        h_close(&h);
        ck_assert_int_eq(engine_workspace_unpack(h.fd, ws, &m, 0, 0, false, &cb, &err), 0);
        close(h.fd);

        _cleanup_free_ char *gone = xasprintf("%s/gone.txt", ws);
        _cleanup_free_ char *oldx = xasprintf("%s/olddir/x.txt", ws);
        _cleanup_free_ char *oldd = xasprintf("%s/olddir", ws);
        _cleanup_free_ char *changed = xasprintf("%s/changed.txt", ws);
        _cleanup_free_ char *newf = xasprintf("%s/new.txt", ws);
        _cleanup_free_ char *keep = xasprintf("%s/keep.txt", ws);
        ck_assert_int_ne(access(gone, F_OK), 0);
        ck_assert_int_ne(access(oldx, F_OK), 0);
        ck_assert_int_ne(access(oldd, F_OK), 0);
        ck_assert_uint_eq(cb.deleted, 3);
        /* kept: changed here after the copy went in, new here, and what the run kept */
        _cleanup_free_ char *c = read_text(changed);
        ck_assert_str_eq(c, "someone else\n");
        ck_assert_int_eq(access(newf, F_OK), 0);
        ck_assert_int_eq(access(keep, F_OK), 0);
        engine_manifest_done(&m);
        sh("rm -rf '%s'", ws);
}
END_TEST

START_TEST(copyback_broken_archive_is_an_error)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct engine_copyback cb = {0};
        struct sbx_error err = {0};
        int fd = engine_tmpfile(&err);

        ck_assert_int_eq(write(fd, "this is not a tar archive at all, just text\n", 44), 44);
        ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
        ck_assert_int_lt(engine_workspace_unpack(fd, ws, NULL, 0, 0, false, &cb, &err), 0);
        ck_assert_str_ne(err.msg, "");
        close(fd);
        sh("rm -rf '%s'", ws);
}
END_TEST

/* issue 12 #25: a file that is mostly holes comes back with its holes (a 512 MiB truncate()
 * came back as 512 MiB of zeros on disk); its content stays the same. */
START_TEST(copyback_keeps_holes)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct engine_copyback cb = {0};
        struct sbx_error err = {0};
        struct hostile h;
        const la_int64_t size = 64ll << 20;
        static char block[65536];
        struct stat st;

        h_open(&h);
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, "sparse.bin");
        archive_entry_set_mode(e, S_IFREG | 0644);
        archive_entry_set_size(e, size);
        ck_assert_int_eq(archive_write_header(h.a, e), ARCHIVE_OK);
        archive_entry_free(e);
        /* zeros, as Docker's (non-sparse) tar sends a hole, then "tail" at the very end */
        memset(block, 0, sizeof(block));
        for (la_int64_t left = size - 4; left > 0;) {
                size_t n = left < (la_int64_t)sizeof(block) ? (size_t)left : sizeof(block);
                ck_assert_int_eq(archive_write_data(h.a, block, n), (la_ssize_t)n);
                left -= (la_int64_t)n;
        }
        ck_assert_int_eq(archive_write_data(h.a, "tail", 4), 4);
        h_add(&h, "dense.txt", S_IFREG | 0644, "dense", NULL, NULL); /* the control */
        h_close(&h);

        ck_assert_msg(engine_workspace_unpack(h.fd, ws, NULL, 0, 0, false, &cb, &err) == 0, "%s",
                      err.msg);
        close(h.fd);
        _cleanup_free_ char *f = xasprintf("%s/sparse.bin", ws);
        ck_assert_int_eq(stat(f, &st), 0);
        ck_assert_int_eq(st.st_size, size);
        ck_assert_msg((uint64_t)st.st_blocks * 512 < (1u << 20),
                      "%lld bytes on disk for a %lld-byte file of zeros",
                      (long long)st.st_blocks * 512, (long long)size);
        int fd = open(f, O_RDONLY | O_CLOEXEC);
        char tail[5] = "";
        ck_assert_int_eq(pread(fd, tail, 4, size - 4), 4);
        ck_assert_str_eq(tail, "tail");
        ck_assert_int_eq(pread(fd, tail, 4, size / 2), 4);
        ck_assert(memcmp(tail, "\0\0\0\0", 4) == 0);
        close(fd);
        _cleanup_free_ char *d = xasprintf("%s/dense.txt", ws);
        _cleanup_free_ char *dt = read_text(d);
        ck_assert_str_eq(dt, "dense");
        sh("rm -rf '%s'", ws);
}
END_TEST

/* issue 12 #25: the copy-back stops at its caps (entries, bytes written), says so, and deletes
 * nothing on a copy that was cut (what is missing from it was not seen). */
START_TEST(copyback_caps)
{
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        struct engine_copyback cb = {0};
        struct sbx_error err = {0};
        struct engine_manifest m = {0};
        struct hostile h;
        char name[32];

        /* a file that went in and is not in the (cut) copy: must survive */
        sh("cd '%s' && echo keep >zz-keep.txt", ws);
        struct stat kst;
        _cleanup_free_ char *keep = xasprintf("%s/zz-keep.txt", ws);
        ck_assert_int_eq(stat(keep, &kst), 0);
        m.v = xcalloc(1, sizeof(*m.v));
        m.v[0] = (struct engine_manifest_entry){
            .rel = xstrdup("zz-keep.txt"),
            .mode = kst.st_mode,
            .size = kst.st_size,
            .mtime_ns = (int64_t)kst.st_mtim.tv_sec * 1000000000 + kst.st_mtim.tv_nsec};
        m.n = 1;

        h_open(&h);
        for (int i = 0; i < 50; i++) {
                snprintf(name, sizeof(name), "f%02d.txt", i);
                h_add(&h, name, S_IFREG | 0644, "x", NULL, NULL);
        }
        h_close(&h);
        struct engine_copyback_caps caps = {.max_entries = 10, .max_data_bytes = 1 << 20};
        ck_assert_int_eq(
            engine_workspace_unpack_capped(h.fd, ws, &m, 0, 0, false, &caps, &cb, &err), 0);
        close(h.fd);
        ck_assert(cb.capped);
        ck_assert_uint_eq(cb.files, 10);
        ck_assert_msg(strstr(cb.cap_note, "10 entries"), "%s", cb.cap_note);
        ck_assert_int_eq(access(keep, F_OK), 0); /* not deleted */
        _cleanup_free_ char *f10 = xasprintf("%s/f10.txt", ws);
        ck_assert_int_ne(access(f10, F_OK), 0);

        /* bytes: 3 files of 600 KiB of data against a 1 MiB cap */
        static char big[600 << 10];
        memset(big, 'b', sizeof(big) - 1);
        h_open(&h);
        for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof(name), "big%d.bin", i);
                h_add(&h, name, S_IFREG | 0644, big, NULL, NULL);
        }
        h_close(&h);
        memset(&cb, 0, sizeof(cb));
        caps = (struct engine_copyback_caps){.max_entries = 1000, .max_data_bytes = 1 << 20};
        ck_assert_int_eq(
            engine_workspace_unpack_capped(h.fd, ws, &m, 0, 0, false, &caps, &cb, &err), 0);
        close(h.fd);
        ck_assert(cb.capped);
        ck_assert_msg(strstr(cb.cap_note, "1 MiB"), "%s", cb.cap_note);
        ck_assert_uint_eq(cb.files, 1); /* the second would pass the cap: not written */
        ck_assert_int_eq(access(keep, F_OK), 0);
        /* control: without caps everything comes back */
        h_open(&h);
        for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof(name), "big%d.bin", i);
                h_add(&h, name, S_IFREG | 0644, big, NULL, NULL);
        }
        h_close(&h);
        memset(&cb, 0, sizeof(cb));
        ck_assert_int_eq(engine_workspace_unpack(h.fd, ws, NULL, 0, 0, false, &cb, &err), 0);
        close(h.fd);
        ck_assert(!cb.capped);
        ck_assert_uint_eq(cb.files, 3);
        engine_manifest_done(&m);
        sh("rm -rf '%s'", ws);
}
END_TEST

START_TEST(tar_names)
{
        static const struct {
                const char *in, *out;
        } ok[] = {{"./", ""},     {".", ""},       {"./a/b", "a/b"}, {"a//b/./c/", "a/b/c"},
                  {"...", "..."}, {"a..b", "a..b"}};
        static const char *const bad[] = {"/etc/passwd", "..", "../x", "a/../../x", "a/.."};
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *r = NULL;
                const char *why = NULL;
                ck_assert_int_eq(sbx_path_clean(ok[i].in, &r, &why), 0);
                ck_assert_str_eq(r, ok[i].out);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *r = NULL;
                const char *why = NULL;
                ck_assert_int_eq(sbx_path_clean(bad[i], &r, &why), -EPERM);
                ck_assert_ptr_nonnull(why);
        }
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* The create body with volumes                                                              */

static const char *const test_cmd[] = {"true", NULL};

static struct engine_run_spec vol_spec(void)
{
        struct engine_run_spec s = {.image = IMG_PY,
                                    .cmd = test_cmd,
                                    .uid = 2000,
                                    .gid = 2000,
                                    .workspace = "/host/ws",
                                    .code_dir = "/host/code",
                                    .workspace_volume = "vestibule-ws-1",
                                    .code_volume = "vestibule-code-1",
                                    .memory_bytes = 256u << 20,
                                    .nano_cpus = 750000000,
                                    .pids_max = 128,
                                    .tmpfs_mb = 64,
                                    .owner = "h:1:1"};
        return s;
}

static json_object *inspect_with_mounts(const char *mounts_json)
{
        _cleanup_free_ char *j = xasprintf(
            "{\"HostConfig\":{\"NetworkMode\":\"none\",\"CapDrop\":[\"ALL\"],\"SecurityOpt\":"
            "[\"no-new-privileges\"],\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,noexec\"},"
            "\"IpcMode\":\"none\",\"CgroupnsMode\":\"private\",\"Memory\":268435456,\"MemorySwap\":"
            "268435456,\"NanoCpus\":"
            "750000000,\"PidsLimit\":128},\"Config\":{\"User\":\"2000:2000\"},\"Mounts\":%s}",
            mounts_json);
        return json_tokener_parse(j);
}

START_TEST(volume_mounts_in_body_and_verified)
{
        struct engine_run_spec s = vol_spec();
        _cleanup_(json_putp) json_object *b = engine_create_body(&s);
        const char *text = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
        char degraded[64] = "";
        struct sbx_error err = {0};

        ck_assert_ptr_nonnull(strstr(text, "{\"Type\":\"volume\",\"Source\":\"vestibule-code-1\","
                                           "\"Target\":\"\\/sandbox\",\"ReadOnly\":true,"
                                           "\"VolumeOptions\":{\"NoCopy\":true,\"Labels\":{"
                                           "\"vestibule.run\":\"1\",\"vestibule.owner\":"
                                           "\"h:1:1\"}}}"));
        ck_assert_ptr_nonnull(strstr(text, "{\"Type\":\"volume\",\"Source\":\"vestibule-ws-1\","
                                           "\"Target\":\"\\/workspace\",\"ReadOnly\":false,"
                                           "\"VolumeOptions\":{\"NoCopy\":true,\"Labels\":{"
                                           "\"vestibule.run\":\"1\",\"vestibule.owner\":"
                                           "\"h:1:1\"}}}"));
        ck_assert_ptr_null(strstr(text, "/host/"));
        ck_assert_ptr_null(strstr(text, "\"bind\""));

        /* the engine's answer as asked */
        static const char good[] =
            "[{\"Type\":\"volume\",\"Name\":\"vestibule-code-1\",\"Destination\":\"/sandbox\","
            "\"RW\":false},{\"Type\":\"volume\",\"Name\":\"vestibule-ws-1\",\"Destination\":"
            "\"/workspace\",\"RW\":true}]";
        _cleanup_(json_putp) json_object *i1 = inspect_with_mounts(good);
        ck_assert_msg(engine_verify_inspect(i1, &s, degraded, sizeof(degraded), &err) == 0, "%s",
                      err.msg);
        /* /sandbox writable: refused */
        static const char rw[] =
            "[{\"Type\":\"volume\",\"Name\":\"vestibule-code-1\",\"Destination\":\"/sandbox\","
            "\"RW\":true},{\"Type\":\"volume\",\"Name\":\"vestibule-ws-1\",\"Destination\":"
            "\"/workspace\",\"RW\":true}]";
        _cleanup_(json_putp) json_object *i2 = inspect_with_mounts(rw);
        ck_assert_int_eq(engine_verify_inspect(i2, &s, degraded, sizeof(degraded), &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "/sandbox volume"));
        /* another volume at /sandbox: refused */
        static const char other[] =
            "[{\"Type\":\"volume\",\"Name\":\"someone-elses\",\"Destination\":\"/sandbox\","
            "\"RW\":false},{\"Type\":\"volume\",\"Name\":\"vestibule-ws-1\",\"Destination\":"
            "\"/workspace\",\"RW\":true}]";
        _cleanup_(json_putp) json_object *i3 = inspect_with_mounts(other);
        ck_assert_int_eq(engine_verify_inspect(i3, &s, degraded, sizeof(degraded), &err), -EPERM);
        /* a bind where a volume was asked for: refused */
        static const char bindm[] =
            "[{\"Type\":\"bind\",\"Source\":\"/\",\"Destination\":\"/sandbox\",\"RW\":false},"
            "{\"Type\":\"volume\",\"Name\":\"vestibule-ws-1\",\"Destination\":\"/workspace\","
            "\"RW\":true}]";
        _cleanup_(json_putp) json_object *i4 = inspect_with_mounts(bindm);
        ck_assert_int_eq(engine_verify_inspect(i4, &s, degraded, sizeof(degraded), &err), -EPERM);
        /* the workspace volume missing: refused */
        static const char nows[] = "[{\"Type\":\"volume\",\"Name\":\"vestibule-code-1\","
                                   "\"Destination\":\"/sandbox\",\"RW\":false}]";
        _cleanup_(json_putp) json_object *i5 = inspect_with_mounts(nows);
        ck_assert_int_eq(engine_verify_inspect(i5, &s, degraded, sizeof(degraded), &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "/workspace volume"));

        /* the helper: both volumes writable, never a bind, no network, no capabilities */
        _cleanup_(json_putp) json_object *hb =
            engine_helper_body(IMG_PY, "vestibule-code-1", "vestibule-ws-1", "h:1:1", false);
        const char *ht = json_object_to_json_string_ext(hb, JSON_C_TO_STRING_PLAIN);
        ck_assert_ptr_nonnull(strstr(ht, "\"NetworkMode\":\"none\""));
        ck_assert_ptr_nonnull(strstr(ht, "\"CapDrop\":[\"ALL\"]"));
        ck_assert_ptr_nonnull(strstr(ht, "\"vestibule.run\":\"1\""));
        ck_assert_ptr_nonnull(strstr(ht, "\"vestibule.owner\":\"h:1:1\""));
        ck_assert_ptr_null(strstr(ht, "\"bind\""));
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Real runs through a loopback TCP / TLS front for Docker                                  */

static char *ws_dir;
static struct sbx_config test_cfg;
static struct backend *test_backend;
static pid_t fwd_pid = -1;
static char fwd_port[16];
static char *fwd_log;
static char *cert_dir;
static char host_url[64];

static void cfg_init(void)
{
        if (!ws_dir) {
                ws_dir = sbx_test_tmpdir();
                chmod(ws_dir, 0777);
        }
        sbx_test_config(&test_cfg, ws_dir);
        test_cfg.runtime = SBX_RUNTIME_DOCKER;
        test_cfg.backend = SBX_BACKEND_CONTAINER;
        test_cfg.image_python = (char *)IMG_PY;
        test_cfg.image_node = (char *)IMG_NODE;
        if (geteuid() == 0) {
                test_cfg.run_as_set = true;
                test_cfg.run_as_uid = TEST_UID;
                test_cfg.run_as_gid = TEST_UID;
        }
}

/* Start tests/tools/engine-forward.mjs (TLS with certificates in @tls_dir, else plain) and
 * read the port it listens on. */
static const char *fwd_socket = DOCKER_SOCK_PATH; /* the local engine behind the front */

static void forwarder_start(const char *tls_dir)
{
        int p[2];
        _cleanup_free_ char *script =
            xasprintf("%s/tests/tools/engine-forward.mjs", VESTIBULE_SOURCE_DIR);
        char buf[64] = "";
        size_t got = 0;

        static char *log_dir;
        if (!log_dir)
                log_dir = sbx_test_tmpdir(); /* not in the workspace: copied in and back */
        free(fwd_log);
        fwd_log = xasprintf("%s/forward.log", log_dir);
        unlink(fwd_log);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        fwd_pid = fork();
        ck_assert_int_ge(fwd_pid, 0);
        if (fwd_pid == 0) {
                dup2(p[1], 1);
                if (tls_dir)
                        execlp("node", "node", script, "--socket", fwd_socket, "--tls", tls_dir,
                               "--log", fwd_log, (char *)NULL);
                else
                        execlp("node", "node", script, "--socket", fwd_socket, "--log", fwd_log,
                               (char *)NULL);
                _exit(127);
        }
        close(p[1]);
        while (got < sizeof(buf) - 1 && !strchr(buf, '\n')) {
                ssize_t n = read(p[0], buf + got, sizeof(buf) - 1 - got);
                if (n <= 0)
                        break;
                got += (size_t)n;
                buf[got] = '\0';
        }
        close(p[0]);
        ck_assert_msg(sscanf(buf, "port %15s", fwd_port) == 1, "forwarder said '%s'", buf);
        snprintf(host_url, sizeof(host_url), "tcp://127.0.0.1:%s", fwd_port);
}

static unsigned forwarder_lines(const char *prefix)
{
        _cleanup_free_ char *log = read_text(fwd_log);
        unsigned n = 0;
        for (const char *p = log; p && (p = strstr(p, prefix)); p++)
                if (p == log || p[-1] == '\n')
                        n++;
        return n;
}

static void teardown(void)
{
        test_backend = backend_free(test_backend);
        if (fwd_pid > 0) {
                kill(fwd_pid, SIGTERM);
                waitpid(fwd_pid, NULL, 0);
                fwd_pid = -1;
        }
}

static void env_for_tcp(const char *tls_certs)
{
        fake_env_reset();
        fake_env_set(test_cfg.runtime == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST",
                     host_url);
        if (tls_certs) {
                fake_env_set("DOCKER_TLS_VERIFY", "1");
                fake_env_set("DOCKER_CERT_PATH", tls_certs);
        }
}

static void backend_up(void)
{
        struct sbx_error err = {0};
        ck_assert_int_eq(engine_backend_new_with_env(&test_cfg, fake_getenv, &test_backend, &err),
                         0);
}

struct run_out {
        int rc;
        struct sbx_error err;
        struct run_result res;
        const char *text;
};

static struct run_out run_code(enum sbx_language lang, const char *code, unsigned timeout_s)
{
        struct run_out o = {0};
        struct run_request req = {.language = lang,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = timeout_s,
                                  .cfg = &test_cfg,
                                  .cancel_fd = -1};
        if (!test_backend)
                backend_up();
        o.rc = test_backend->ops->run(test_backend, &req, &o.res, &o.err);
        o.text = o.res.out.data ? o.res.out.data : "";
        return o;
}

static void expect_exit0(const struct run_out *o)
{
        ck_assert_msg(o->rc == 0, "run failed: %s", o->err.msg);
        ck_assert_msg(o->res.outcome == RUN_OUTCOME_EXITED && o->res.exit_code == 0,
                      "outcome %d exit %d stderr '%s' notes '%s'", o->res.outcome, o->res.exit_code,
                      o->res.err.data ? o->res.err.data : "", o->res.notes);
}

static const char *kv(const char *text, const char *key, char *buf, size_t size)
{
        _cleanup_free_ char *k = xasprintf("%s=", key);
        const char *p = text;
        while ((p = strstr(p, k))) {
                if (p == text || p[-1] == '\n') {
                        size_t n = strcspn(p + strlen(k), "\n");
                        snprintf(buf, size, "%.*s", (int)n, p + strlen(k));
                        return buf;
                }
                p++;
        }
        snprintf(buf, size, "<missing>");
        return buf;
}

/* Our containers and volumes on the engine (through the local socket: the check must not
 * depend on the path under test). */
static unsigned ours_left(const char *what)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        char me[160];
        _cleanup_free_ char *local = xasprintf("unix://%s", fwd_socket);
        fake_env_reset();
        fake_env_set(test_cfg.runtime == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST",
                     local);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        sbx_owner_label(getpid(), me, sizeof(me));
        _cleanup_free_ char *path = xasprintf("/%s", what);
        ck_assert_int_eq(sbx_test_engine(&c, "GET", path, NULL, NULL, &r, &err), 200);
        unsigned n = 0;
        for (const char *p = r.raw; (p = strstr(p, me)); p++)
                n++;
        return n;
}

static bool docker_answers(void)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        cfg_init();
        fake_env_reset();
        fake_env_set("DOCKER_HOST", "unix://" DOCKER_SOCK_PATH);
        return engine_connect(&test_cfg, fake_getenv, &c, &err) == 0;
}

/* Both images in the engine behind the front (imported from the tarballs when missing), and
 * the grade that engine gives through its own socket, for comparison. */
static void images_or_fail(char *ret_grade, size_t size)
{
        struct sbx_error err = {0};
        char have[8];
        struct engine_conn c;
        struct backend_probe p;
        struct backend *b = NULL;
        _cleanup_free_ char *local = xasprintf("unix://%s", fwd_socket);
        const char *imgs[2][2] = {{IMG_PY, TAR_PY}, {IMG_NODE, TAR_NODE}};

        fake_env_reset();
        fake_env_set(test_cfg.runtime == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST",
                     local);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        for (size_t i = 0; i < 2; i++)
                if (engine_image_label(&c, imgs[i][0], "vestibule.image", have, sizeof(have),
                                       &err) < 0)
                        ck_assert_msg(engine_setup_import_with_env(&test_cfg, fake_getenv,
                                                                   imgs[i][1], imgs[i][0],
                                                                   &err) >= 0,
                                      "%s", err.msg);
        ck_assert_int_eq(engine_backend_new_with_env(&test_cfg, fake_getenv, &b, &err), 0);
        ck_assert_int_eq(b->ops->probe(b, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        snprintf(ret_grade, size, "%s", p.grade);
        backend_free(b);
}

/* What a bind mount gives, through the volume path: the probe's view of the sandbox. */
static const char probe_py[] =
    "import os, errno\n"
    "def st(k):\n"
    "    for l in open('/proc/self/status'):\n"
    "        if l.startswith(k + ':'): return l.split()[1]\n"
    "print('uid=%d' % os.getuid())\n"
    "print('ifaces=' + ','.join(sorted(os.listdir('/sys/class/net'))))\n"
    "print('capeff=' + st('CapEff'))\n"
    "print('nnp=' + st('NoNewPrivs'))\n"
    "def w(p):\n"
    "    try:\n"
    "        open(p, 'w').write('x'); return 'ok'\n"
    "    except OSError as e: return errno.errorcode[e.errno]\n"
    "print('rootwrite=' + w('/probe-root'))\n"
    "print('sandboxwrite=' + w('/sandbox/x'))\n"
    "print('sandboxnew=' + w('/sandbox/main.py'))\n"
    "print('wsowner=%d' % os.stat('/workspace').st_uid)\n"
    "print('wswrite=' + w('/workspace/.probe'))\n"
    "try: os.unlink('/workspace/.probe')\n"
    "except OSError: pass\n"
    "print('input=' + open('/workspace/input.txt').read().strip())\n"
    "m = [l.split()[1] + ':' + l.split()[3].split(',')[0] for l in open('/proc/self/mounts')\n"
    "     if l.split()[1] in ('/sandbox', '/workspace')]\n"
    "print('mounts=' + ','.join(sorted(m)))\n";

static void check_remote_runs(const char *tls_certs, const char *want_grade)
{
        char a[256];
        _cleanup_free_ char *uid =
            xasprintf("%u", (unsigned)(test_cfg.run_as_set ? test_cfg.run_as_uid : geteuid()));
        _cleanup_free_ char *input = xasprintf("%s/input.txt", ws_dir);
        _cleanup_free_ char *made = xasprintf("%s/made/here.txt", ws_dir);
        _cleanup_free_ char *doomed = xasprintf("%s/doomed.txt", ws_dir);
        _cleanup_free_ char *late = xasprintf("%s/late.txt", ws_dir);
        struct backend_probe p;
        struct sbx_error err = {0};
        struct stat st;

        env_for_tcp(tls_certs);
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, want_grade);

        /* print(1) */
        struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "1\n");
        ck_assert_str_eq(o.res.isolation, want_grade);
        ck_assert_str_eq(o.res.notes, "");
        run_result_done(&o.res);
        /* it went through the front, not some socket found on the side */
        ck_assert_uint_gt(forwarder_lines("conn"), 0);

        /* an empty workspace (0700, the user's): its root stays the run user's inside, not
         * the image's /workspace owner (a new volume would copy that without NoCopy) */
        _cleanup_free_ char *empty = sbx_test_tmpdir();
        ck_assert_int_eq(chmod(empty, 0700), 0);
        if (test_cfg.run_as_set)
                ck_assert_int_eq(chown(empty, test_cfg.run_as_uid, test_cfg.run_as_gid), 0);
        test_cfg.workspace_dir = empty;
        o = run_code(SBX_LANG_BASH, "stat -c %u:%a /workspace; echo hi >/workspace/first.txt\n",
                     10);
        expect_exit0(&o);
        _cleanup_free_ char *want = xasprintf("%s:700\n", uid);
        ck_assert_str_eq(o.text, want);
        run_result_done(&o.res);
        _cleanup_free_ char *first = xasprintf("%s/first.txt", empty);
        _cleanup_free_ char *ft = read_text(first);
        ck_assert_ptr_nonnull(ft);
        ck_assert_str_eq(ft, "hi\n");
        unlink(first);
        rmdir(empty);
        test_cfg.workspace_dir = ws_dir;

        /* lockdown and the hand-in, from inside; the workspace input is read */
        write_file(input, "from the host\n");
        chmod(input, 0644);
        o = run_code(SBX_LANG_PYTHON, probe_py, 20);
        expect_exit0(&o);
        ck_assert_str_eq(kv(o.text, "uid", a, sizeof(a)), uid);
        ck_assert_str_eq(kv(o.text, "ifaces", a, sizeof(a)), "lo");
        ck_assert_str_eq(kv(o.text, "capeff", a, sizeof(a)), "0000000000000000");
        ck_assert_str_eq(kv(o.text, "nnp", a, sizeof(a)), "1");
        ck_assert_str_eq(kv(o.text, "rootwrite", a, sizeof(a)), "EROFS");
        ck_assert_str_eq(kv(o.text, "sandboxwrite", a, sizeof(a)), "EROFS");
        ck_assert_str_eq(kv(o.text, "sandboxnew", a, sizeof(a)), "EROFS");
        ck_assert_str_eq(kv(o.text, "wsowner", a, sizeof(a)), uid);
        ck_assert_str_eq(kv(o.text, "wswrite", a, sizeof(a)), "ok");
        ck_assert_str_eq(kv(o.text, "input", a, sizeof(a)), "from the host");
        ck_assert_str_eq(kv(o.text, "mounts", a, sizeof(a)), "/sandbox:ro,/workspace:rw");
        run_result_done(&o.res);

        /* writes come back (owned by the run's user), deletions too */
        write_file(doomed, "delete me\n");
        o = run_code(SBX_LANG_PYTHON,
                     "import os\nos.makedirs('/workspace/made', exist_ok=True)\n"
                     "open('/workspace/made/here.txt','w').write('hi from the sandbox')\n"
                     "os.unlink('/workspace/doomed.txt')\n"
                     "os.symlink('/etc/passwd', '/workspace/pwlink')\n",
                     10);
        expect_exit0(&o);
        ck_assert_str_eq(o.res.notes, "");
        run_result_done(&o.res);
        _cleanup_free_ char *got = read_text(made);
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, "hi from the sandbox");
        ck_assert_int_eq(stat(made, &st), 0);
        ck_assert_uint_eq(st.st_uid, test_cfg.run_as_set ? test_cfg.run_as_uid : geteuid());
        ck_assert_int_ne(access(doomed, F_OK), 0);
        /* a symlink comes back as a symlink, as it would through a bind mount */
        _cleanup_free_ char *pwl = xasprintf("%s/pwlink", ws_dir);
        ck_assert_int_eq(lstat(pwl, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        unlink(pwl);

        /* a run that times out still hands back what it wrote */
        o = run_code(SBX_LANG_PYTHON,
                     "import time\nopen('/workspace/late.txt','w').write('before the deadline')\n"
                     "print('wrote', flush=True)\ntime.sleep(60)\n",
                     2);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_TIMED_OUT);
        run_result_done(&o.res);
        _cleanup_free_ char *lt = read_text(late);
        ck_assert_ptr_nonnull(lt);
        ck_assert_str_eq(lt, "before the deadline");

        /* node and bash get their code the same way */
        o = run_code(SBX_LANG_NODE, "console.log(6 * 7)\n", 10);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "42\n");
        run_result_done(&o.res);
        o = run_code(SBX_LANG_BASH, "cat /workspace/input.txt\n", 10);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "from the host\n");
        run_result_done(&o.res);

        /* VESTIBULE_WORKSPACE_RO: read-only inside, the host folder untouched */
        test_cfg.workspace_ro = true;
        o = run_code(SBX_LANG_PYTHON,
                     "import errno\nprint(open('/workspace/input.txt').read().strip())\n"
                     "try:\n    open('/workspace/ro.txt','w'); print('ok')\n"
                     "except OSError as e: print(errno.errorcode[e.errno])\n",
                     10);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "from the host\nEROFS\n");
        run_result_done(&o.res);
        test_cfg.workspace_ro = false;
        _cleanup_free_ char *ro = xasprintf("%s/ro.txt", ws_dir);
        ck_assert_int_ne(access(ro, F_OK), 0);

        unlink(input);
        unlink(made);
        unlink(late);
        _cleanup_free_ char *madedir = xasprintf("%s/made", ws_dir);
        rmdir(madedir);

        /* nothing left: no container, no volume (removals finish before shutdown returns) */
        test_backend = backend_free(test_backend);
        ck_assert_uint_eq(ours_left("containers/json?all=1"), 0);
        ck_assert_uint_eq(ours_left("volumes"), 0);
}

START_TEST(tcp_loopback_runs_through_volumes)
{
        char grade[320];
        cfg_init();
        images_or_fail(grade, sizeof(grade));
        ck_assert_str_eq(grade, "container"); /* rootful Docker here enforces every limit */
        forwarder_start(NULL);
        check_remote_runs(NULL, grade);
}
END_TEST

/* Issue 12 #22 and #25 through a real engine in volume mode, each run on a thread with the
 * server's worker stack (256 KiB): a deep and wide workspace goes in and comes back; a file
 * truncate()d to 512 MiB inside comes back with its holes. */
struct worker_run {
        enum sbx_language lang;
        const char *code;
        unsigned timeout_s;
        struct run_out o;
};

static void *worker_run_thread(void *p)
{
        struct worker_run *w = p;
        w->o = run_code(w->lang, w->code, w->timeout_s);
        return NULL;
}

static struct run_out run_on_worker_stack(enum sbx_language lang, const char *code,
                                          unsigned timeout_s)
{
        struct worker_run w = {.lang = lang, .code = code, .timeout_s = timeout_s};
        pthread_attr_t attr;
        pthread_t t;
        if (!test_backend)
                backend_up();
        ck_assert_int_eq(pthread_attr_init(&attr), 0);
        ck_assert_int_eq(pthread_attr_setstacksize(&attr, WORKER_STACK), 0);
        ck_assert_int_eq(pthread_create(&t, &attr, worker_run_thread, &w), 0);
        pthread_join(t, NULL);
        pthread_attr_destroy(&attr);
        return w.o;
}

START_TEST(tcp_deep_tree_and_sparse_file)
{
        char grade[320];
        struct stat st;
        cfg_init();
        images_or_fail(grade, sizeof(grade));
        forwarder_start(NULL);
        env_for_tcp(NULL);
        _cleanup_free_ char *ws = sbx_test_tmpdir();
        ck_assert_int_eq(chmod(ws, 0777), 0);
        test_cfg.workspace_dir = ws;
        sh("cd '%s' && mkdir -p .git/refs/heads src/pkg/mod z/z/z/z/z/z/z/z/z/z && echo ref "
           ">.git/refs/heads/main && echo deep >z/z/z/z/z/z/z/z/z/z/leaf.txt && mkdir wide && "
           "for i in $(seq 500); do echo $i >wide/f$i; done && chmod -R a+rwX .",
           ws);
        struct run_out o = run_on_worker_stack(
            SBX_LANG_PYTHON,
            "import os\nprint(open('/workspace/z/z/z/z/z/z/z/z/z/z/leaf.txt').read().strip())\n"
            "print(len(os.listdir('/workspace/wide')))\n"
            "os.makedirs('/workspace/made/a/b/c/d/e', exist_ok=True)\n"
            "open('/workspace/made/a/b/c/d/e/new.txt', 'w').write('back')\n"
            "with open('/workspace/sparse.bin', 'w') as f:\n"
            "    f.truncate(512 << 20)\n",
            60);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "deep\n500\n");
        ck_assert_str_eq(o.res.notes, "");
        run_result_done(&o.res);
        _cleanup_free_ char *nf = xasprintf("%s/made/a/b/c/d/e/new.txt", ws);
        _cleanup_free_ char *nt = read_text(nf);
        ck_assert_ptr_nonnull(nt);
        ck_assert_str_eq(nt, "back");
        _cleanup_free_ char *sp = xasprintf("%s/sparse.bin", ws);
        ck_assert_int_eq(stat(sp, &st), 0);
        ck_assert_int_eq(st.st_size, 512ll << 20);
        fprintf(stderr, "512 MiB truncate() in volume mode: %lld bytes on disk\n",
                (long long)st.st_blocks * 512);
        ck_assert_msg((uint64_t)st.st_blocks * 512 < (1u << 20), "%lld bytes on disk",
                      (long long)st.st_blocks * 512);
        test_backend = backend_free(test_backend);
        test_cfg.workspace_dir = ws_dir;
        sh("rm -rf '%s'", ws);
}
END_TEST

START_TEST(podman_tcp_runs_through_volumes)
{
        char grade[320];
        cfg_init();
        test_cfg.runtime = SBX_RUNTIME_PODMAN;
        fwd_socket = PODMAN_SOCK_PATH;
        images_or_fail(grade, sizeof(grade));
        ck_assert_str_eq(grade, "container"); /* through Podman's own socket */
        forwarder_start(NULL);
        /* Behind tcp:// the engine is remote: our derived seccomp profile (a file on the
         * engine's host, seccomp_profile.c) cannot be handed to it, so the grade says that
         * namespaces are not blocked instead of claiming the full container grade. */
        check_remote_runs(NULL, "container-degraded (namespaces not blocked: the Podman engine is "
                                "remote: its seccomp profile files are not on this host)");
}
END_TEST

/* A session through the mutual-TLS front (the volume path over tcp+TLS: the attach connection
 * is hijacked through libcurl's TLS, cells_attach.c): state persists across cells, a cell's
 * last bytes on both streams are in its result, and a cell's file reaches the host. */
static void check_remote_session(const char *tls_certs)
{
        struct sandbox_spec spec = {
            .language = SBX_LANG_PYTHON, .cfg = &test_cfg, .mode = SANDBOX_MODE_CELLS};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        const char *cells[] = {"x = 20\n",
                               "import sys\nprint('o' * 5000 + 'END')\n"
                               "_ = sys.stderr.write('e' * 5000 + 'ERR')\n"
                               "_ = open('/workspace/from-session.txt', 'w').write(str(x + 1))\n"};

        env_for_tcp(tls_certs); /* check_remote_runs() freed its backend */
        backend_up();
        ck_assert_msg(test_backend->ops->cells->prepare(test_backend, &spec, &sb, &err) == 0,
                      "session over TLS: %s", err.msg);
        for (size_t i = 0; i < ELEMENTSOF(cells); i++) {
                struct run_request req = {.language = SBX_LANG_PYTHON,
                                          .code = cells[i],
                                          .code_len = strlen(cells[i]),
                                          .timeout_s = 20,
                                          .cfg = &test_cfg,
                                          .cancel_fd = -1};
                struct run_result res = {0};
                ck_assert_msg(sandbox_run_program(test_backend->ops->cells, sb, &req, &res, &err) ==
                                  0,
                              "cell %zu: %s", i, err.msg);
                ck_assert_msg(res.outcome == RUN_OUTCOME_EXITED && res.exit_code == 0,
                              "cell %zu: outcome %d exit %d '%.300s' notes '%.300s'", i,
                              res.outcome, res.exit_code, res.err.data ? res.err.data : "",
                              res.notes);
                if (i == 1) {
                        ck_assert_uint_eq(res.out.len, 5004);
                        ck_assert(memcmp(res.out.data + 5000, "END\n", 4) == 0);
                        ck_assert_uint_eq(res.err.len, 5003);
                        ck_assert(memcmp(res.err.data + 5000, "ERR", 3) == 0);
                }
                run_result_done(&res);
        }
        test_backend->ops->cells->destroy(sb);
        _cleanup_free_ char *made = xasprintf("%s/from-session.txt", ws_dir);
        _cleanup_free_ char *t = read_text(made);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t, "21");
        unlink(made);
        test_backend = backend_free(test_backend);
        ck_assert_uint_eq(ours_left("containers/json?all=1"), 0);
        ck_assert_uint_eq(ours_left("volumes"), 0);
}

START_TEST(tls_runs_through_volumes)
{
        char grade[320];
        cfg_init();
        images_or_fail(grade, sizeof(grade));
        free(cert_dir);
        cert_dir = sbx_test_tmpdir();
        sh("sh '%s/tests/tools/make-test-certs.sh' '%s'", VESTIBULE_SOURCE_DIR, cert_dir);
        forwarder_start(cert_dir);
        check_remote_runs(cert_dir, grade);
        check_remote_session(cert_dir);
        /* the front verified our client certificate and refused none */
        ck_assert_uint_eq(forwarder_lines("tls-refused"), 0);
}
END_TEST

START_TEST(tls_wrong_client_cert_or_plaintext_blocked)
{
        struct backend_probe p;
        struct sbx_error err = {0};

        cfg_init();
        free(cert_dir);
        cert_dir = sbx_test_tmpdir();
        sh("sh '%s/tests/tools/make-test-certs.sh' '%s'", VESTIBULE_SOURCE_DIR, cert_dir);
        forwarder_start(cert_dir);

        /* a client certificate from another CA: the daemon (front) refuses the handshake */
        _cleanup_free_ char *rogue = xasprintf("%s/rogue", cert_dir);
        env_for_tcp(rogue);
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert(!p.usable);
        ck_assert_msg(strstr(p.blocked, "127.0.0.1"), "%s", p.blocked);
        /* the front logs the refused handshake on its own schedule: wait for it (bounded) */
        for (int i = 0; i < 100 && forwarder_lines("tls-refused") == 0; i++)
                usleep(50000);
        ck_assert_uint_gt(forwarder_lines("tls-refused"), 0);
        test_backend = backend_free(test_backend);

        /* a CA that did not sign the daemon's certificate: we refuse the daemon */
        _cleanup_free_ char *wrongca = xasprintf("%s/wrongca", cert_dir);
        sh("mkdir -p '%s' && cp '%s/cert.pem' '%s/key.pem' '%s/' && cp '%s/rogue/rogue-ca.pem' "
           "'%s/ca.pem'",
           wrongca, cert_dir, cert_dir, wrongca, cert_dir, wrongca);
        env_for_tcp(wrongca);
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert(!p.usable);
        ck_assert_msg(strstr(p.blocked, "TLS handshake"), "%s", p.blocked);
        ck_assert_msg(strstr(p.blocked, "DOCKER_CERT_PATH"), "%s", p.blocked);
        test_backend = backend_free(test_backend);

        /* plaintext to the TLS port: no answer we accept */
        env_for_tcp(NULL);
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert(!p.usable);
        test_backend = backend_free(test_backend);

        /* control: the right certificates work */
        env_for_tcp(cert_dir);
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
}
END_TEST

START_TEST(sweep_removes_dead_owners_volumes)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        char me[160];

        cfg_init();
        fake_env_reset();
        fake_env_set("DOCKER_HOST", "unix://" DOCKER_SOCK_PATH);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        /* a dead owner (this host, a pid that does not run) and a live one: ourselves */
        _cleanup_free_ char *dead = sbx_test_owner_label_of(999999999, 1);
        ck_assert_int_eq(engine_volume_create(&c, "vestibule-test-dead-owner", dead, NULL, &err),
                         0);
        sbx_owner_label(getpid(), me, sizeof(me));
        ck_assert_int_eq(engine_volume_create(&c, "vestibule-test-live-owner", me, NULL, &err), 0);
        ck_assert_int_ge(engine_sweep(&c, &err), 1);
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        ck_assert_int_eq(sbx_test_engine(&c, "GET", "/volumes", NULL, NULL, &r, &err), 200);
        ck_assert_ptr_null(strstr(r.raw, "vestibule-test-dead-owner"));
        ck_assert_ptr_nonnull(strstr(r.raw, "vestibule-test-live-owner"));
        ck_assert_int_eq(engine_volume_remove(&c, "vestibule-test-live-owner", &err), 0);
}
END_TEST

/* The exit sweep finds ours by label; a container created after it, mounting a volume it removed,
 * makes Docker create that volume again. It must come back labelled as ours, or no sweep ever
 * finds it (seen on the Docker Desktop stand-in: a server SIGKILLed by its client mid-exit left
 * unlabelled vestibule-code-/ws- volumes). */
START_TEST(volume_made_again_at_create_is_labelled)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        char code[64], ws[64];

        cfg_init();
        fake_env_reset();
        fake_env_set("DOCKER_HOST", "unix://" DOCKER_SOCK_PATH);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        _cleanup_free_ char *dead = sbx_test_owner_label_of(999999999, 1);
        ck_assert_int_eq(engine_volume_name("code", code, sizeof(code)), 0);
        ck_assert_int_eq(engine_volume_name("ws", ws, sizeof(ws)), 0);
        _cleanup_(json_putp) json_object *hb = engine_helper_body(IMG_PY, code, ws, dead, false);
        _cleanup_(engine_reply_done) struct engine_reply cr = {0};
        ck_assert_int_eq(sbx_test_engine(&c, "POST", "/containers/create", NULL,
                                         json_object_to_json_string(hb), &cr, &err),
                         201);
        /* control: the engine made both volumes at the create */
        _cleanup_(engine_reply_done) struct engine_reply v1 = {0};
        ck_assert_int_eq(sbx_test_engine(&c, "GET", "/volumes/{}", code, NULL, &v1, &err), 200);
        ck_assert_int_ge(engine_sweep(&c, &err), 1);
        _cleanup_(engine_reply_done) struct engine_reply v2 = {0};
        _cleanup_(engine_reply_done) struct engine_reply v3 = {0};
        long s_code = sbx_test_engine(&c, "GET", "/volumes/{}", code, NULL, &v2, &err);
        long s_ws = sbx_test_engine(&c, "GET", "/volumes/{}", ws, NULL, &v3, &err);
        if (s_code == 200)
                (void)engine_volume_remove(&c, code, &err);
        if (s_ws == 200)
                (void)engine_volume_remove(&c, ws, &err);
        ck_assert_msg(s_code == 404 && s_ws == 404, "the sweep left %s (%ld: %s), %s (%ld)", code,
                      s_code, v2.raw ? v2.raw : "", ws, s_ws);
}
END_TEST

/* A spare's prepare() on the volume path, on its own thread (the warm keeper's). */
struct spare_build {
        struct backend *b;
        struct sandbox *sb;
        int rc;
        struct sbx_error err;
};

static void *spare_build_thread(void *p)
{
        struct spare_build *w = p;
        struct sandbox_spec spec = {.language = SBX_LANG_PYTHON,
                                    .cfg = &test_cfg,
                                    .mode = SANDBOX_MODE_ONE_SHOT,
                                    .network = RUN_NETWORK_NONE,
                                    .spare = true};
        w->rc = w->b->ops->sandbox->prepare(w->b, &spec, &w->sb, &w->err);
        return NULL;
}

/* The server's exit sweep (shutdown()) while a spare is built: once shutdown() returns, nothing
 * of the server's is on the engine, and nothing comes after (a prepare() in progress made its
 * containers after the sweep, mounting by name volumes the sweep had removed; seen on the Docker
 * Desktop stand-in). The shutdown comes at 0..175 ms into the build (~200 ms here through the TCP
 * front). */
START_TEST(exit_sweep_comes_after_a_spare_in_progress)
{
        char grade[320];
        unsigned late = 0, built = 0;

        cfg_init();
        images_or_fail(grade, sizeof(grade));
        forwarder_start(NULL);
        for (unsigned i = 0; i < 8; i++) {
                struct spare_build w = {0};
                pthread_t t;

                env_for_tcp(NULL);
                backend_up();
                struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)", 30); /* probed */
                expect_exit0(&o);
                run_result_done(&o.res);
                w.b = test_backend;
                ck_assert_int_eq(pthread_create(&t, NULL, spare_build_thread, &w), 0);
                usleep(i * 25000);
                test_backend->ops->shutdown(test_backend);
                pthread_join(t, NULL);
                built += w.rc == 0;
                /* before destroy(): what the prepare made after the sweep is still there */
                unsigned n = ours_left("containers/json?all=1") + ours_left("volumes");
                late += n > 0;
                fprintf(stderr, "round %u: shutdown at %u ms, prepare %d, left %u\n", i, i * 25,
                        w.rc, n);
                if (w.sb)
                        test_backend->ops->sandbox->destroy(w.sb);
                test_backend = backend_free(test_backend);
        }
        ck_assert_msg(late == 0, "%u of 8 rounds left the server's containers or volumes", late);
        ck_assert_uint_eq(ours_left("containers/json?all=1"), 0);
        ck_assert_uint_eq(ours_left("volumes"), 0);
}
END_TEST

/* ---- a volume-path session's attach stream (cellstream.c) ---- */

struct cs_seen {
        char out[256], err[256], recs[256];
        size_t out_n, err_n, recs_n;
        size_t err_at_rec; /* stderr bytes seen when the last record was handed on */
};

static void cs_data(void *ud, int stream, const char *buf, size_t n)
{
        struct cs_seen *v = ud;
        char *to = stream == 1 ? v->out : v->err;
        size_t *at = stream == 1 ? &v->out_n : &v->err_n;

        ck_assert(*at + n < sizeof(v->out));
        memcpy(to + *at, buf, n);
        *at += n;
}

static void cs_record(void *ud, const char *rec, size_t n)
{
        struct cs_seen *v = ud;

        ck_assert(v->recs_n + n + 1 < sizeof(v->recs));
        memcpy(v->recs + v->recs_n, rec, n);
        v->recs_n += n;
        v->recs[v->recs_n++] = '|';
        v->err_at_rec = v->err_n;
}

/* One Docker frame of @stream carrying @s into @buf at @at; returns the new length. */
static size_t cs_frame(char *buf, size_t at, int stream, const char *s)
{
        size_t n = strlen(s);

        buf[at] = (char)stream;
        buf[at + 1] = buf[at + 2] = buf[at + 3] = 0;
        buf[at + 4] = 0;
        buf[at + 5] = 0;
        buf[at + 6] = (char)(n >> 8);
        buf[at + 7] = (char)n;
        memcpy(buf + at + 8, s, n);
        return at + 8 + n;
}

#define CS_MARK "\036vsb-00112233445566778899aabbccddeeff:"

/* The ordering the volume path rests on: a record is handed on only once both streams carried
 * it, so every stderr byte before it is already out. Control: the record seen on stdout alone
 * is held (with the stdout-only rule the result would end before "late-err" arrived). */
START_TEST(cellstream_record_waits_for_both_streams)
{
        struct engine_cellstream cs;
        struct cs_seen v = {0};
        char buf[512];
        size_t n;

        engine_cellstream_init(&cs, CS_MARK, cs_data, cs_record, &v);
        n = cs_frame(buf, 0, 1, "out-a" CS_MARK "1 ok 0\n");
        ck_assert_int_eq(engine_cellstream_feed(&cs, buf, n), 0);
        ck_assert_uint_eq(v.recs_n, 0); /* control: stdout's record alone is held */
        ck_assert_uint_eq(v.out_n, 5);
        n = cs_frame(buf, 0, 2, "late-err");
        n = cs_frame(buf, n, 2, CS_MARK "1 ok 0\n");
        ck_assert_int_eq(engine_cellstream_feed(&cs, buf, n), 0);
        ck_assert_uint_eq(v.recs_n, 7);
        ck_assert(memcmp(v.recs, "1 ok 0|", 7) == 0);
        ck_assert_uint_eq(v.err_at_rec, 8); /* all of stderr before the record */
        ck_assert(memcmp(v.err, "late-err", 8) == 0);
}
END_TEST

/* A mark split anywhere across reads is found; a near-mark is the cell's data, byte for byte. */
START_TEST(cellstream_split_marks_and_near_marks)
{
        static const char body[] = "x\036vsb-0011y" CS_MARK "2 exit 3\nz";
        char buf[512];
        size_t n = cs_frame(buf, 0, 1, body);

        n = cs_frame(buf, n, 2, CS_MARK "2 exit 3\n");
        for (size_t step = 1; step <= n; step++) {
                struct engine_cellstream cs;
                struct cs_seen v = {0};
                engine_cellstream_init(&cs, CS_MARK, cs_data, cs_record, &v);
                for (size_t off = 0; off < n; off += step)
                        ck_assert_int_eq(
                            engine_cellstream_feed(&cs, buf + off, n - off < step ? n - off : step),
                            0);
                ck_assert_msg(v.out_n == 12 && memcmp(v.out, "x\036vsb-0011yz", 12) == 0,
                              "step %zu: stdout %zu bytes '%.*s'", step, v.out_n, (int)v.out_n,
                              v.out);
                ck_assert_msg(v.recs_n == 9 && memcmp(v.recs, "2 exit 3|", 9) == 0, "step %zu",
                              step);
        }
}
END_TEST

/* What a cell can forge breaks only its own stream: a record on one stream twice, records
 * that differ, an endless record, a frame that is not stdout/stderr. */
START_TEST(cellstream_forgeries_break_the_stream)
{
        const char *cases[][2] = {
            {CS_MARK "1 ok 0\n" CS_MARK "2 ok 0\n", NULL},
            {CS_MARK "1 ok 0\n", CS_MARK "1 exit 9\n"},
            {CS_MARK "1 ok 0000000000000000000000000000000000000000000000000000000000000000000"
                     "00000000000000000000000000000000000000000000000000000000000000000000",
             NULL},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct engine_cellstream cs;
                struct cs_seen v = {0};
                char buf[512];
                size_t n = cs_frame(buf, 0, 1, cases[i][0]);
                if (cases[i][1])
                        n = cs_frame(buf, n, 2, cases[i][1]);
                engine_cellstream_init(&cs, CS_MARK, cs_data, cs_record, &v);
                ck_assert_msg(engine_cellstream_feed(&cs, buf, n) == -EPROTO, "case %zu", i);
                ck_assert_uint_eq(v.recs_n, 0);
        }
        struct engine_cellstream cs;
        struct cs_seen v = {0};
        char bad[9] = {3, 0, 0, 0, 0, 0, 0, 1, 'x'};
        engine_cellstream_init(&cs, CS_MARK, cs_data, cs_record, &v);
        ck_assert_int_eq(engine_cellstream_feed(&cs, bad, sizeof(bad)), -EPROTO);
}
END_TEST

static Suite *remote_suite(bool *ret_engine)
{
        Suite *s = suite_create("engine_remote");
        TCase *tc;

        tc = tcase_create("endpoint");
        tcase_add_test(tc, plaintext_only_to_loopback);
        tcase_add_test(tc, cert_dir_needs_all_three_files);
        tcase_add_test(tc, which_daemons_share_our_files);
        tcase_add_test(tc, config_carries_the_engine_environment);
        suite_add_tcase(s, tc);

        tc = tcase_create("archive");
        tcase_add_test(tc, tar_names);
        tcase_add_test(tc, handin_tar_copies_workspace_without_following_links);
        tcase_add_test(tc, handin_tar_code_part_ends_with_the_marker);
        tcase_add_test(tc, copyback_refuses_escapes);
        tcase_add_test(tc, copyback_deletes_only_what_the_run_deleted);
        tcase_add_test(tc, copyback_broken_archive_is_an_error);
        tcase_add_test(tc, handin_deep_tree_fits_worker_stack);
        tcase_add_test(tc, handin_too_deep_is_left_out);
        tcase_add_test(tc, handin_wide_tree);
        tcase_add_test(tc, copyback_keeps_holes);
        tcase_add_test(tc, copyback_caps);
        tcase_set_timeout(tc, 60);
        suite_add_tcase(s, tc);

        tc = tcase_create("body");
        tcase_add_test(tc, volume_mounts_in_body_and_verified);
        suite_add_tcase(s, tc);

        tc = tcase_create("cellstream");
        tcase_add_test(tc, cellstream_record_waits_for_both_streams);
        tcase_add_test(tc, cellstream_split_marks_and_near_marks);
        tcase_add_test(tc, cellstream_forgeries_break_the_stream);
        suite_add_tcase(s, tc);

        *ret_engine = access(TAR_PY, R_OK) == 0 && system("node --version >/dev/null 2>&1") == 0 &&
                      system("openssl version >/dev/null 2>&1") == 0 && docker_answers();
        if (*ret_engine) {
                tc = tcase_create("docker_tcp");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 240);
                tcase_add_test(tc, tcp_loopback_runs_through_volumes);
                tcase_add_test(tc, sweep_removes_dead_owners_volumes);
                tcase_add_test(tc, volume_made_again_at_create_is_labelled);
                tcase_add_test(tc, exit_sweep_comes_after_a_spare_in_progress);
                tcase_add_test(tc, tcp_deep_tree_and_sparse_file);
                suite_add_tcase(s, tc);
                tc = tcase_create("docker_tls");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 240);
                tcase_add_test(tc, tls_runs_through_volumes);
                tcase_add_test(tc, tls_wrong_client_cert_or_plaintext_blocked);
                suite_add_tcase(s, tc);
        }
        if (*ret_engine && geteuid() == 0 && access(PODMAN_SOCK_PATH, F_OK) == 0 &&
            access(TAR_NODE, R_OK) == 0) {
                tc = tcase_create("podman_tcp");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 300);
                tcase_add_test(tc, podman_tcp_runs_through_volumes);
                suite_add_tcase(s, tc);
        }
        return s;
}

int main(void)
{
        bool engine = false;
        struct sbx_error err = {0};
        int rc;

        /* the tests call libarchive and libcurl themselves (src/lazy): load them first */
        if (lazy_curl_load(&err) < 0 || lazy_archive_load(&err) < 0) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
        }
        if (getenv("SBX_TEST_DEBUG"))
                sbx_log_set_level(SBX_LOG_DEBUG);
        rc = sbx_test_run(remote_suite(&engine));
        if (rc == 0 && !engine)
                sbx_test_skip("no Docker Engine at /var/run/docker.sock, no node or openssl, or "
                              "no image tarball in /var/tmp/vestibule-images: the remote runs "
                              "were not tested");
        return rc;
}
