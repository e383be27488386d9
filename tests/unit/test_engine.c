/* test_engine.c - the container backend: pure parsing tests (endpoint resolution with an
 * injected environment and temp config dirs, context hashing, version negotiation, stream
 * demux, create body, inspect verification, owner labels), then real runs against Docker and
 * Podman (started by scripts/start-engines.sh), each lockdown property checked from inside the
 * container by a probe, next to a control run of the same probe on the host. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <dirent.h>
#include "lazy/curl.h"

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "run/backend.h"
#include "run/run.h"
#include "testutil.h"
#include "workspace/workspace.h"

/* ---------------------------------------------------------------------------------------- */
/* Test doubles for functions other modules own (weak: the real ones win once they land).    */

__attribute__((weak)) uint64_t run_stream_append(struct run_stream *s, const void *buf, size_t n,
                                                 size_t cap)
{
        if (s->len < cap) {
                size_t take = cap - s->len < n ? cap - s->len : n;
                s->data = xrealloc(s->data, s->len + take + 1);
                memcpy(s->data + s->len, buf, take);
                s->len += take;
                s->data[s->len] = '\0';
        }
        s->total += n;
        return s->total;
}

__attribute__((weak)) const char *sbx_language_script(enum sbx_language l)
{
        return l == SBX_LANG_NODE ? "main.js" : l == SBX_LANG_BASH ? "main.sh" : "main.py";
}

__attribute__((weak)) int workspace_ensure(const char *dir, struct sbx_error *err)
{
        (void)err;
        mkdir(dir, 0700);
        return 0;
}

__attribute__((weak)) void run_result_done(struct run_result *r)
{
        free(r->out.data);
        free(r->err.data);
        r->out.data = r->err.data = NULL;
}

__attribute__((weak)) struct backend *backend_free(struct backend *b)
{
        if (!b)
                return NULL;
        if (b->ops->shutdown)
                b->ops->shutdown(b);
        if (b->ops->destroy)
                b->ops->destroy(b);
        free(b);
        return NULL;
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

static void mkdir_p(const char *path)
{
        _cleanup_free_ char *cmd = xasprintf("mkdir -p '%s'", path);
        ck_assert_int_eq(system(cmd), 0);
}

/* A real listening unix socket at @path (closed fd leaks intentionally: test process). */
static void make_socket(const char *path)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(fd, 1), 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Endpoint resolution                                                                       */

START_TEST(endpoint_parse_schemes)
{
        struct engine_endpoint ep;
        struct sbx_error err = {0};

        ck_assert_int_eq(engine_endpoint_parse("unix:///var/run/docker.sock", false, &ep, &err), 0);
        ck_assert(ep.is_unix && ep.local);
        ck_assert_str_eq(ep.sock_path, "/var/run/docker.sock");
        ck_assert_str_eq(ep.base_url, "http://localhost");

        ck_assert_int_eq(engine_endpoint_parse("tcp://127.0.0.5", false, &ep, &err), 0);
        ck_assert(!ep.is_unix && !ep.local && !ep.tls);
        ck_assert_str_eq(ep.base_url, "http://127.0.0.5:2375");
        /* plain HTTP to anything but the loopback: refused, naming the fix */
        ck_assert_int_eq(engine_endpoint_parse("tcp://10.0.0.5", false, &ep, &err), -EPERM);
        ck_assert_ptr_nonnull(strstr(err.msg, "DOCKER_TLS_VERIFY"));
        ck_assert_int_eq(engine_endpoint_parse("tcp://h.example:2376", true, &ep, &err), 0);
        ck_assert_str_eq(ep.base_url, "https://h.example:2376");
        ck_assert(ep.tls && ep.tls_verify);
        ck_assert_int_eq(engine_endpoint_parse("tcp://h", true, &ep, &err), 0);
        ck_assert_str_eq(ep.base_url, "https://h:2376");

        ck_assert_int_eq(engine_endpoint_parse("npipe:////./pipe/docker_engine", false, &ep, &err),
                         -EPROTONOSUPPORT);
        ck_assert_ptr_nonnull(strstr(err.msg, "WSL2"));
        ck_assert_int_eq(engine_endpoint_parse("ssh://me@host", false, &ep, &err),
                         -EPROTONOSUPPORT);
        ck_assert_ptr_nonnull(strstr(err.msg, "ssh -L"));
        ck_assert_int_eq(engine_endpoint_parse("fd://", false, &ep, &err), -EPROTONOSUPPORT);
        ck_assert_ptr_nonnull(strstr(err.msg, "unsupported scheme"));
        ck_assert_int_eq(engine_endpoint_parse("unix://relative.sock", false, &ep, &err), -EINVAL);
        char longp[200];
        memset(longp, 'a', sizeof(longp));
        memcpy(longp, "unix:///", 8);
        longp[sizeof(longp) - 1] = '\0';
        ck_assert_int_eq(engine_endpoint_parse(longp, false, &ep, &err), -ENAMETOOLONG);
}
END_TEST

START_TEST(context_hash_matches_docker_cli)
{
        char h[65];
        /* sha256("desktop-linux"), the directory the docker CLI uses for that context */
        ck_assert_int_eq(engine_context_hash("desktop-linux", h, NULL), 0);
        ck_assert_str_eq(h, "fe9c6bd7a66301f49ca9b6a70b217107cd1284598bfc254700c989b916da791e");
}
END_TEST

START_TEST(resolve_docker_host_wins)
{
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        size_t n = 0;
        char miss[300];
        struct sbx_error err = {0};

        _cleanup_free_ char *certs = sbx_test_tmpdir();
        fake_env_reset();
        fake_env_set("DOCKER_HOST", "tcp://build.example:2376");
        fake_env_set("DOCKER_TLS_VERIFY", "1");
        fake_env_set("DOCKER_CERT_PATH", certs);
        fake_env_set("DOCKER_CONTEXT", "colima");
        /* the certificates must be there: a clear error naming DOCKER_CERT_PATH first */
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_AUTO, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "DOCKER_CERT_PATH"));
        ck_assert_ptr_nonnull(strstr(err.msg, "ca.pem"));
        free(TAKE_PTR(eps));
        const char *pems[] = {"ca.pem", "cert.pem", "key.pem"};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *f = xasprintf("%s/%s", certs, pems[i]);
                write_file(f, "x");
        }
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_AUTO, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert(eps[0].explicit_choice && eps[0].tls && eps[0].tls_verify);
        ck_assert_str_eq(eps[0].base_url, "https://build.example:2376");
        ck_assert_str_eq(eps[0].cert_dir, certs);
        ck_assert_str_eq(eps[0].origin, "DOCKER_HOST");

        free(TAKE_PTR(eps));
        fake_env_set("DOCKER_HOST", "ssh://x");
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_AUTO, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         -EPROTONOSUPPORT);
        ck_assert_ptr_nonnull(strstr(err.msg, "DOCKER_HOST"));
}
END_TEST

START_TEST(resolve_context_from_config_and_env)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        char hash[65], miss[300];
        size_t n = 0;
        struct sbx_error err = {0};

        _cleanup_free_ char *cfgdir = xasprintf("%s/.docker", d);
        mkdir_p(cfgdir);
        _cleanup_free_ char *cj = xasprintf("%s/config.json", cfgdir);
        write_file(cj, "{\"auths\":{},\"currentContext\":\"colima\"}");
        ck_assert_int_eq(engine_context_hash("colima", hash, NULL), 0);
        _cleanup_free_ char *md = xasprintf("%s/contexts/meta/%s", cfgdir, hash);
        mkdir_p(md);
        _cleanup_free_ char *mj = xasprintf("%s/meta.json", md);
        write_file(mj, "{\"Name\":\"colima\",\"Metadata\":{},\"Endpoints\":{\"docker\":{\"Host\":"
                       "\"unix:///home/u/.colima/default/docker.sock\",\"SkipTLSVerify\":false}}}");
        ck_assert_int_eq(engine_context_hash("remote", hash, NULL), 0);
        _cleanup_free_ char *md2 = xasprintf("%s/contexts/meta/%s", cfgdir, hash);
        mkdir_p(md2);
        _cleanup_free_ char *mj2 = xasprintf("%s/meta.json", md2);
        write_file(mj2, "{\"Name\":\"remote\",\"Endpoints\":{\"docker\":{\"Host\":"
                        "\"tcp://r.example:2376\",\"SkipTLSVerify\":true}}}");
        _cleanup_free_ char *tls = xasprintf("%s/contexts/tls/%s/docker", cfgdir, hash);
        mkdir_p(tls);

        /* currentContext from $HOME/.docker/config.json */
        fake_env_reset();
        fake_env_set("HOME", d);
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_DOCKER, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(eps[0].sock_path, "/home/u/.colima/default/docker.sock");
        ck_assert_ptr_nonnull(strstr(eps[0].origin, "colima"));
        free(TAKE_PTR(eps));

        /* DOCKER_CONTEXT beats currentContext; TLS dir + SkipTLSVerify */
        fake_env_set("DOCKER_CONTEXT", "remote");
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_DOCKER, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(eps[0].base_url, "https://r.example:2376");
        ck_assert(eps[0].tls && !eps[0].tls_verify);
        ck_assert_str_eq(eps[0].cert_dir, tls);
        free(TAKE_PTR(eps));

        /* DOCKER_CONFIG moves the store; a context that does not exist is an error */
        fake_env_set("DOCKER_CONTEXT", "nosuch");
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_DOCKER, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         -ENOENT);
        ck_assert_ptr_nonnull(strstr(err.msg, "nosuch"));

        /* "default" means: no context, the known sockets */
        fake_env_set("DOCKER_CONTEXT", "default");
        fake_env_set("DOCKER_CONFIG", "/nonexistent");
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_DOCKER, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        for (size_t i = 0; i < n; i++)
                ck_assert(!eps[i].explicit_choice);
}
END_TEST

START_TEST(resolve_known_sockets_in_order)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        char miss[1000];
        size_t n = 0;
        struct sbx_error err = {0};

        _cleanup_free_ char *home = xasprintf("%s/home", d);
        _cleanup_free_ char *xdg = xasprintf("%s/xdg", d);
        _cleanup_free_ char *desk = xasprintf("%s/.docker/run", home);
        _cleanup_free_ char *pod = xasprintf("%s/podman", xdg);
        mkdir_p(desk);
        mkdir_p(pod);
        _cleanup_free_ char *s1 = xasprintf("%s/docker.sock", desk);
        _cleanup_free_ char *s2 = xasprintf("%s/podman.sock", pod);
        make_socket(s1);
        make_socket(s2);

        fake_env_reset();
        fake_env_set("HOME", home);
        fake_env_set("XDG_RUNTIME_DIR", xdg);
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_AUTO, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        /* Docker Desktop's socket comes before Podman's; /var/run/docker.sock may precede. */
        ssize_t i_desk = -1, i_pod = -1;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(eps[i].sock_path, s1) == 0)
                        i_desk = (ssize_t)i;
                if (strcmp(eps[i].sock_path, s2) == 0)
                        i_pod = (ssize_t)i;
        }
        ck_assert(i_desk >= 0 && i_pod > i_desk);
        ck_assert_ptr_nonnull(strstr(eps[i_desk].origin, "Docker Desktop"));
        /* places that had no socket are named for the Blocked: text */
        ck_assert_ptr_nonnull(strstr(miss, ".colima/default/docker.sock"));
        free(TAKE_PTR(eps));

        /* docker: no Podman sockets */
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_DOCKER, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_ne(eps[i].sock_path, s2);
        free(TAKE_PTR(eps));

        /* podman: as root the rootful socket first (when there is one), then the rootless
         * one; never Docker's */
        struct stat st;
        bool rootful =
            geteuid() == 0 && stat("/run/podman/podman.sock", &st) == 0 && S_ISSOCK(st.st_mode);
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_PODMAN, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        ck_assert_uint_ge(n, 1);
        ck_assert_str_eq(eps[0].sock_path, rootful ? "/run/podman/podman.sock" : s2);
        if (rootful)
                ck_assert_str_eq(eps[1].sock_path, s2);
        for (size_t i = 0; i < n; i++)
                ck_assert_str_ne(eps[i].sock_path, s1);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Version negotiation                                                                       */

START_TEST(api_version_table)
{
        static const struct {
                const char *server, *min, *want; /* want NULL = refused */
                const char *msg_has;
        } t[] = {
            {"1.41", "1.12", "1.41", NULL},    /* Debian 20.10 */
            {"1.41", NULL, "1.41", NULL},      /* Podman 4.3 */
            {"1.43", "1.12", "1.43", NULL},    /* 24.0 */
            {"1.47", "1.24", "1.47", NULL},    /* 27.x */
            {"1.52", "1.44", "1.47", NULL},    /* Docker 29: min(server, newest) */
            {"1.40", "1.12", NULL, "too old"}, /* 19.03 */
            {"1.60", "1.50", NULL, "too new"}, /* a future engine */
            {"", NULL, NULL, "API version"},   {"abc", NULL, NULL, "API version"},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                char v[16] = "";
                struct sbx_error err = {0};
                int r = engine_api_negotiate(t[i].server, t[i].min, v, &err);
                if (t[i].want) {
                        ck_assert_msg(r == 0, "%s: %s", t[i].server, err.msg);
                        ck_assert_str_eq(v, t[i].want);
                } else {
                        ck_assert_int_eq(r, -EPROTO);
                        ck_assert_msg(strstr(err.msg, t[i].msg_has), "%s", err.msg);
                }
        }
        ck_assert_int_lt(engine_api_cmp("1.9", "1.41"), 0);
        ck_assert_int_gt(engine_api_cmp("1.100", "1.41"), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Demux                                                                                     */

struct sink {
        char out[256], err[256];
        size_t nout, nerr;
};

static void sink_fn(void *ud, int stream, const char *buf, size_t n)
{
        struct sink *s = ud;
        if (stream == 1) {
                memcpy(s->out + s->nout, buf, n);
                s->nout += n;
        } else {
                memcpy(s->err + s->nerr, buf, n);
                s->nerr += n;
        }
}

START_TEST(demux_split_frames)
{
        /* stdout "hello\n", an empty stderr frame, stderr "oops", stdout "!" */
        static const unsigned char wire[] = {
            1, 0, 0, 0, 0, 0, 0, 6, 'h', 'e', 'l', 'l', 'o', '\n', 2, 0, 0, 0, 0, 0, 0,  0,
            2, 0, 0, 0, 0, 0, 0, 4, 'o', 'o', 'p', 's', 1,   0,    0, 0, 0, 0, 0, 1, '!'};
        /* every split point, and byte by byte */
        for (size_t cut = 0; cut <= sizeof(wire); cut++) {
                struct engine_demux d = {0};
                struct sink s = {0};
                ck_assert_int_eq(engine_demux_feed(&d, (const char *)wire, cut, sink_fn, &s), 0);
                ck_assert_int_eq(engine_demux_feed(&d, (const char *)wire + cut, sizeof(wire) - cut,
                                                   sink_fn, &s),
                                 0);
                ck_assert_uint_eq(s.nout, 7);
                ck_assert(memcmp(s.out, "hello\n!", 7) == 0);
                ck_assert_uint_eq(s.nerr, 4);
                ck_assert(memcmp(s.err, "oops", 4) == 0);
        }
        struct engine_demux d = {0};
        struct sink s = {0};
        for (size_t i = 0; i < sizeof(wire); i++)
                ck_assert_int_eq(engine_demux_feed(&d, (const char *)wire + i, 1, sink_fn, &s), 0);
        ck_assert_uint_eq(s.nout + s.nerr, 11);
}
END_TEST

START_TEST(demux_refuses_garbage)
{
        struct engine_demux d = {0};
        struct sink s = {0};
        /* a raw (non-multiplexed) stream, as with Tty true */
        ck_assert_int_eq(engine_demux_feed(&d, "hello world\n", 12, sink_fn, &s), -EPROTO);
        ck_assert_uint_eq(s.nout + s.nerr, 0);
        /* stays broken */
        static const unsigned char ok[] = {1, 0, 0, 0, 0, 0, 0, 1, 'x'};
        ck_assert_int_eq(engine_demux_feed(&d, (const char *)ok, sizeof(ok), sink_fn, &s), -EPROTO);
        /* stream 0 (stdin) was never asked for */
        struct engine_demux d2 = {0};
        static const unsigned char in0[] = {0, 0, 0, 0, 0, 0, 0, 1, 'x'};
        ck_assert_int_eq(engine_demux_feed(&d2, (const char *)in0, sizeof(in0), sink_fn, &s),
                         -EPROTO);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Create body and inspect verification                                                      */

static const char *const test_cmd[] = {"timeout", "--kill-after=1",   "5",
                                       "python3", "/sandbox/main.py", NULL};

static struct engine_run_spec test_spec(void)
{
        return (struct engine_run_spec){
            .image = "vestibule/python:bookworm",
            .cmd = test_cmd,
            .uid = 2000,
            .gid = 2000,
            .workspace = "/home/u/ws",
            .workspace_ro = true,
            .code_dir = "/tmp/vestibule-code-abc",
            .memory_bytes = 256u << 20,
            .nano_cpus = 750000000,
            .pids_max = 128,
            .tmpfs_mb = 64,
            .owner = "h:1:2",
            .init = true,
        };
}

static json_object *path_get(json_object *o, const char *a, const char *b)
{
        json_object *x = NULL, *y = NULL;
        ck_assert_msg(json_object_object_get_ex(o, a, &x), "%s", a);
        if (!b)
                return x;
        ck_assert_msg(json_object_object_get_ex(x, b, &y), "%s.%s", a, b);
        return y;
}

START_TEST(create_body_has_every_lockdown_option)
{
        struct engine_run_spec s = test_spec();
        _cleanup_(json_putp) json_object *b = engine_create_body(&s);
        const char *txt = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);

        ck_assert_str_eq(json_object_get_string(path_get(b, "Image", NULL)),
                         "vestibule/python:bookworm");
        ck_assert_str_eq(json_object_get_string(path_get(b, "User", NULL)), "2000:2000");
        ck_assert_str_eq(json_object_get_string(path_get(b, "WorkingDir", NULL)), "/workspace");
        ck_assert(json_object_get_boolean(path_get(b, "NetworkDisabled", NULL)));
        ck_assert(!json_object_get_boolean(path_get(b, "Tty", NULL)));
        ck_assert_str_eq(json_object_get_string(path_get(b, "Labels", "vestibule.run")), "1");
        ck_assert_str_eq(json_object_get_string(path_get(b, "Labels", "vestibule.owner")), "h:1:2");
        ck_assert_str_eq(json_object_get_string(path_get(b, "HostConfig", "NetworkMode")), "none");
        ck_assert_str_eq(json_object_get_string(path_get(b, "HostConfig", "IpcMode")), "none");
        ck_assert(json_object_get_boolean(path_get(b, "HostConfig", "ReadonlyRootfs")));
        ck_assert_int_eq(json_object_get_int64(path_get(b, "HostConfig", "Memory")), 268435456);
        ck_assert_int_eq(json_object_get_int64(path_get(b, "HostConfig", "MemorySwap")), 268435456);
        ck_assert_int_eq(json_object_get_int64(path_get(b, "HostConfig", "NanoCpus")), 750000000);
        ck_assert_int_eq(json_object_get_int64(path_get(b, "HostConfig", "PidsLimit")), 128);
        /* the fixed minimal environment, the same as the native backend's */
        ck_assert_ptr_nonnull(strstr(txt,
                                     "\"Env\":[\"PATH=\\/usr\\/local\\/bin:\\/usr\\/bin:\\/bin\","
                                     "\"HOME=\\/tmp\",\"LANG=C.UTF-8\",\"TZ=UTC\","));
        ck_assert_ptr_nonnull(strstr(txt, "\"CapDrop\":[\"ALL\"]"));
        ck_assert_ptr_nonnull(strstr(txt, "\"SecurityOpt\":[\"no-new-privileges\"]"));
        ck_assert_ptr_nonnull(
            strstr(txt, "\"\\/tmp\":\"rw,noexec,nosuid,nodev,size=64m,mode=1777\""));
        ck_assert_ptr_nonnull(strstr(txt, "{\"Name\":\"nofile\",\"Soft\":1024,\"Hard\":1024}"));
        ck_assert_ptr_nonnull(strstr(txt, "{\"Name\":\"nproc\""));
        ck_assert_ptr_nonnull(strstr(txt, "{\"Name\":\"core\",\"Soft\":0,\"Hard\":0}"));
        ck_assert_ptr_nonnull(strstr(txt,
                                     "\"Source\":\"\\/home\\/u\\/ws\",\"Target\":\"\\/workspace\","
                                     "\"ReadOnly\":true"));
        ck_assert_ptr_nonnull(strstr(txt, "\"Target\":\"\\/sandbox\",\"ReadOnly\":true"));
        ck_assert_ptr_nonnull(strstr(txt, "\"Cmd\":[\"timeout\",\"--kill-after=1\",\"5\","
                                          "\"python3\",\"\\/sandbox\\/main.py\"]"));
        ck_assert_ptr_nonnull(strstr(txt, "\"max-size\":\"1m\""));
        ck_assert_ptr_null(strstr(txt, "UsernsMode"));
        s.userns_keep_id = true;
        _cleanup_(json_putp) json_object *b2 = engine_create_body(&s);
        ck_assert_str_eq(json_object_get_string(path_get(b2, "HostConfig", "UsernsMode")),
                         "keep-id");
}
END_TEST

/* An inspect answer as Docker gives it for the spec, with @mutate applied. */
static json_object *fake_inspect(const char *mutate)
{
        const char *base =
            "{\"Config\":{\"User\":\"2000:2000\"},\"HostConfig\":{\"NetworkMode\":\"none\","
            "\"CapDrop\":[\"ALL\"],\"CapAdd\":null,\"SecurityOpt\":[\"no-new-privileges\"],"
            "\"ReadonlyRootfs\":true,\"Tmpfs\":{\"/tmp\":\"rw,noexec,nosuid,nodev,size=64m\"},"
            "\"IpcMode\":\"none\",\"CgroupnsMode\":\"private\",\"Memory\":268435456,\"MemorySwap\":"
            "268435456,"
            "\"NanoCpus\":750000000,\"PidsLimit\":128},\"Mounts\":[{\"Destination\":"
            "\"/workspace\",\"RW\":false},{\"Destination\":\"/sandbox\",\"RW\":false}]}";
        _cleanup_free_ char *t = xstrdup(base);
        if (mutate) {
                /* "old|new" */
                const char *bar = strchr(mutate, '|');
                _cleanup_free_ char *old = xstrndup(mutate, (size_t)(bar - mutate));
                char *at = strstr(t, old);
                ck_assert_msg(at, "%s", old);
                char *n = xasprintf("%.*s%s%s", (int)(at - t), t, bar + 1, at + strlen(old));
                free(t);
                t = n;
        }
        json_object *j = json_tokener_parse(t);
        ck_assert_ptr_nonnull(j);
        return j;
}

START_TEST(verify_inspect_catches_dropped_options)
{
        struct engine_run_spec s = test_spec();
        static const struct {
                const char *mutate;
                int rc;
                const char *has; /* in err.msg (rc<0) or in degraded */
        } t[] = {
            {NULL, 0, ""},
            {"\"NetworkMode\":\"none\"|\"NetworkMode\":\"bridge\"", -EPERM, "NetworkMode"},
            {"\"CapDrop\":[\"ALL\"]|\"CapDrop\":[]", -EPERM, "CapDrop"},
            {"\"CapAdd\":null|\"CapAdd\":[\"CAP_SYS_ADMIN\"]", -EPERM, "CapDrop"},
            {"[\"no-new-privileges\"]|[]", -EPERM, "no-new-privileges"},
            {"\"ReadonlyRootfs\":true|\"ReadonlyRootfs\":false", -EPERM, "ReadonlyRootfs"},
            {"rw,noexec,|rw,", -EPERM, "Tmpfs"},
            {"\"IpcMode\":\"none\"|\"IpcMode\":\"shareable\"", -EPERM, "IpcMode"},
            {"\"CgroupnsMode\":\"private\"|\"CgroupnsMode\":\"host\"", -EPERM, "CgroupnsMode"},
            {"\"User\":\"2000:2000\"|\"User\":\"\"", -EPERM, "User"},
            {"\"/sandbox\",\"RW\":false|\"/sandbox\",\"RW\":true", -EPERM, "/sandbox"},
            {"\"/workspace\",\"RW\":false|\"/workspace\",\"RW\":true", -EPERM, "/workspace"},
            {"\"Memory\":268435456|\"Memory\":0", 0, "memory"},
            {"\"PidsLimit\":128|\"PidsLimit\":null", 0, "pids"},
            {"\"NanoCpus\":750000000|\"NanoCpus\":0", 0, "cpu"},
            /* Podman: caps listed one by one, CPU as quota/period */
            {"[\"ALL\"]|[\"AUDIT_WRITE\",\"CHOWN\",\"DAC_OVERRIDE\",\"FOWNER\",\"FSETID\","
             "\"KILL\",\"MKNOD\",\"NET_BIND_SERVICE\",\"NET_RAW\",\"SETFCAP\",\"SETGID\","
             "\"SETPCAP\",\"SETUID\",\"SYS_CHROOT\"]",
             0, ""},
            /* ... but not when one of the defaults is missing from the list */
            {"[\"ALL\"]|[\"AUDIT_WRITE\",\"CHOWN\",\"DAC_OVERRIDE\",\"FOWNER\",\"FSETID\","
             "\"KILL\",\"MKNOD\",\"NET_BIND_SERVICE\",\"NET_RAW\",\"SETFCAP\",\"SETGID\","
             "\"SETPCAP\",\"SYS_CHROOT\"]",
             -EPERM, "CapDrop"},
            {"\"NanoCpus\":750000000|\"NanoCpus\":0,\"CpuQuota\":75000,\"CpuPeriod\":100000", 0,
             ""},
        };
        /* keep-id: Podman's compat inspect says "private"; libpod's IDMappings decide */
        {
                struct engine_run_spec k = test_spec();
                k.userns_keep_id = k.podman = true;
                char deg[64] = "";
                struct sbx_error e = {0};
                _cleanup_(json_putp) json_object *j = fake_inspect(NULL);
                ck_assert_int_eq(engine_verify_inspect(j, &k, deg, sizeof(deg), &e), -EPERM);
                ck_assert_ptr_nonnull(strstr(e.msg, "keep-id"));
                json_object_object_add(
                    j, "IDMappings",
                    json_tokener_parse("{\"UidMap\":[\"0:1:2000\",\"2000:0:1\"]}"));
                ck_assert_int_eq(engine_verify_inspect(j, &k, deg, sizeof(deg), &e), 0);
        }
        /* VESTIBULE_CONTAINER_RUNTIME: the body asks for it, and an engine that dropped it
         * (HostConfig.Runtime "runc" or missing: the container would run on the host's
         * kernel while the grade claims gVisor's) is refused */
        {
                struct engine_run_spec r = test_spec();
                char deg[64] = "";
                struct sbx_error e = {0};
                _cleanup_(json_putp) json_object *none = engine_create_body(&r);
                ck_assert(!json_object_object_get_ex(path_get(none, "HostConfig", NULL), "Runtime",
                                                     NULL));
                r.runtime = "runsc";
                _cleanup_(json_putp) json_object *b = engine_create_body(&r);
                ck_assert_str_eq(json_object_get_string(path_get(b, "HostConfig", "Runtime")),
                                 "runsc");
                _cleanup_(json_putp) json_object *j = fake_inspect(NULL);
                ck_assert_int_eq(engine_verify_inspect(j, &r, deg, sizeof(deg), &e), -EPERM);
                ck_assert_ptr_nonnull(strstr(e.msg, "HostConfig.Runtime"));
                _cleanup_(json_putp) json_object *k =
                    fake_inspect("\"IpcMode\"|\"Runtime\":\"runc\",\"IpcMode\"");
                ck_assert_int_eq(engine_verify_inspect(k, &r, deg, sizeof(deg), &e), -EPERM);
                _cleanup_(json_putp) json_object *ok =
                    fake_inspect("\"IpcMode\"|\"Runtime\":\"runsc\",\"IpcMode\"");
                ck_assert_int_eq(engine_verify_inspect(ok, &r, deg, sizeof(deg), &e), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_(json_putp) json_object *j = fake_inspect(t[i].mutate);
                char degraded[128] = "";
                struct sbx_error err = {0};
                int r = engine_verify_inspect(j, &s, degraded, sizeof(degraded), &err);
                ck_assert_msg(r == t[i].rc, "case %zu: %d %s", i, r, err.msg);
                if (r < 0)
                        ck_assert_msg(strstr(err.msg, t[i].has), "case %zu: %s", i, err.msg);
                else if (*t[i].has)
                        ck_assert_str_eq(degraded, t[i].has);
                else
                        ck_assert_msg(!*degraded, "case %zu: %s", i, degraded);
        }
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Owner labels                                                                              */

START_TEST(owner_label_liveness)
{
        char me[160], host[256] = "", lbl[400];
        pid_t child;
        int st;

        ck_assert_int_eq(sbx_owner_label(getpid(), me, sizeof(me)), 0);
        ck_assert(sbx_owner_alive(me));
        gethostname(host, sizeof(host) - 1);

        /* a dead process: fork, reap, its pid is gone */
        child = fork();
        if (child == 0)
                _exit(0);
        waitpid(child, &st, 0);
        /* the place part of our own label: "<host>@<pid namespace>" */
        int place_len = (int)(strchr(me, ':') - me);
        ck_assert_msg(strncmp(me, host, strlen(host)) == 0 && me[strlen(host)] == '@', "%s", me);
        snprintf(lbl, sizeof(lbl), "%.*s:%d:12345", place_len, me, (int)child);
        ck_assert(!sbx_owner_alive(lbl));
        /* the same in the form without the namespace (labels written before it) */
        snprintf(lbl, sizeof(lbl), "%s:%d:12345", host, (int)child);
        ck_assert(!sbx_owner_alive(lbl));
        /* a live pid with another start time (pid reuse) */
        snprintf(lbl, sizeof(lbl), "%.*s:%d:1", place_len, me, (int)getpid());
        ck_assert(!sbx_owner_alive(lbl));
        /* this host name, another pid namespace: not ours to judge */
        snprintf(lbl, sizeof(lbl), "%s@1:%d:12345", host, (int)child);
        ck_assert(sbx_owner_alive(lbl));
        /* another host's server: not ours to judge */
        ck_assert(sbx_owner_alive("some-other-host.example:1:1"));
        /* no or broken label: a leftover */
        ck_assert(!sbx_owner_alive(NULL));
        ck_assert(!sbx_owner_alive("garbage"));
}
END_TEST

/* A server in another pid namespace of this host name (the OCI image run with `docker run
 * --network host`, which gives the container the host's name) must not judge this server's
 * label by its own /proc: there the pid is another process or none, and its start-up sweep
 * removed the live sandboxes of host servers (tests/adversarial/server.md). In a child with
 * its own mount and pid namespaces (and user namespace, when not root) and /proc mounted afresh:
 * the parent's label is alive (not ours to judge); controls: the same label in the form without the
 * namespace is judged there, and gone, and the child's own label is alive. */
START_TEST(owner_label_other_pid_namespace)
{
        char me[160], host[256] = "", legacy[400];
        unsigned long long st = sbx_proc_start_time(getpid());
        int pfd[2], status;

        ck_assert_int_eq(sbx_owner_label(getpid(), me, sizeof(me)), 0);
        gethostname(host, sizeof(host) - 1);
        snprintf(legacy, sizeof(legacy), "%s:%d:%llu", host, (int)getpid(), st);
        ck_assert(pipe(pfd) == 0);
        pid_t child = fork();
        if (child == 0) {
                close(pfd[0]);
                char res[4] = "EEE";
                /* (root needs no user namespace, and may run where they are off) */
                if (unshare(CLONE_NEWNS | CLONE_NEWPID | (geteuid() ? CLONE_NEWUSER : 0)) < 0) {
                        (void)!write(pfd[1], "U", 1);
                        _exit(0);
                }
                pid_t g = fork(); /* pid 1 of the new namespace */
                if (g == 0) {
                        char mine[160];
                        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
                                0) {
                                (void)!write(pfd[1], "M", 1);
                                _exit(0);
                        }
                        res[0] = sbx_owner_alive(me) ? 'A' : 'G';
                        res[1] = sbx_owner_alive(legacy) ? 'A' : 'G';
                        res[2] = sbx_owner_label(getpid(), mine, sizeof(mine)) == 0 &&
                                         sbx_owner_alive(mine)
                                     ? 'A'
                                     : 'G';
                        (void)!write(pfd[1], res, 3);
                        _exit(0);
                }
                int gs;
                waitpid(g, &gs, 0);
                _exit(0);
        }
        close(pfd[1]);
        char got[4] = "";
        ssize_t n = read(pfd[0], got, 3);
        close(pfd[0]);
        waitpid(child, &status, 0);
        ck_assert_msg(n == 3,
                      "the namespaced child could not run the check (%.*s): U = "
                      "unshare refused, M = mounting /proc refused",
                      (int)(n > 0 ? n : 0), got);
        ck_assert_msg(got[1] == 'G', "control: a label judged by /proc there must be gone (%s)",
                      got);
        ck_assert_msg(got[2] == 'A', "control: the child's own label is alive there (%s)", got);
        ck_assert_msg(got[0] == 'A',
                      "a server in another pid namespace of the same host name judged this live "
                      "server's label '%s' gone (%s)",
                      me, got);
}
END_TEST

/* The server in its OCI image finds its container id in the engine's bind mounts, and the
 * owner label takes it (ENGINE_OWNER_CONTAINER) with the pid and start time kept. */
START_TEST(owner_container_id_and_label)
{
        static const char id[] = "6a656c56bd72462b16a1b3376ae20112baad7aafa2e2015b73094800a0992ae7";
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *docker = xasprintf("%s/docker", d),
                            *podman = xasprintf("%s/podman", d), *host = xasprintf("%s/host", d);
        char got[65] = "", owner[160], tiny[40];
        FILE *f;

        f = fopen(docker, "w");
        fprintf(f,
                "130 1 0:50 / / rw - overlay overlay rw\n"
                "147 130 254:0 /var/lib/docker/containers/%s/resolv.conf /etc/resolv.conf "
                "rw - ext4 /dev/vda rw\n",
                id);
        fclose(f);
        ck_assert_int_eq(engine_self_container_id(docker, got, sizeof(got)), 0);
        ck_assert_str_eq(got, id);
        f = fopen(podman, "w");
        fprintf(f,
                "1 0 0:5 /var/lib/containers/storage/overlay-containers/%s/userdata/hostname "
                "/etc/hostname rw - tmpfs tmpfs rw\n",
                id);
        fclose(f);
        ck_assert_int_eq(engine_self_container_id(podman, got, sizeof(got)), 0);
        ck_assert_str_eq(got, id);
        /* controls: a host's mounts, a short or upper-case id, a missing file */
        f = fopen(host, "w");
        fprintf(f,
                "22 27 0:21 / /proc rw - proc proc rw\n"
                "30 27 0:1 /srv/containers/abc123/x /x rw - ext4 /dev/vda rw\n"
                "31 27 0:1 /srv/containers/%.63s/x /y rw - ext4 /dev/vda rw\n",
                id);
        fclose(f);
        ck_assert_int_eq(engine_self_container_id(host, got, sizeof(got)), -ENOENT);
        ck_assert_int_eq(engine_self_container_id("/nonexistent/mountinfo", got, sizeof(got)),
                         -ENOENT);
        ck_assert_int_eq(engine_self_container_id(docker, tiny, sizeof(tiny)), -ENOENT);

        snprintf(owner, sizeof(owner), "6a656c56bd72:1:4242");
        ck_assert_int_eq(engine_owner_in_container(owner, sizeof(owner), id), 0);
        ck_assert_str_eq(owner, "container/"
                                "6a656c56bd72462b16a1b3376ae20112baad7aafa2e2015b73094800a0992ae7"
                                ":1:4242");
        /* another host's form to sbx_owner_alive(): never judged by pid here */
        ck_assert(sbx_owner_alive(owner));
        snprintf(owner, sizeof(owner), "garbage");
        ck_assert_int_eq(engine_owner_in_container(owner, sizeof(owner), id), -EINVAL);
        snprintf(owner, sizeof(owner), "h:1:2");
        ck_assert_int_eq(engine_owner_in_container(owner, sizeof(owner), "short"), -EINVAL);
        snprintf(tiny, sizeof(tiny), "h:1:2");
        ck_assert_int_eq(engine_owner_in_container(tiny, sizeof(tiny), id), -ENAMETOOLONG);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Real engines                                                                              */

#define IMG_PY "vestibule/python:bookworm"
#define IMG_NODE "vestibule/node:bookworm"
#define TAR_PY "/var/tmp/vestibule-images/python.tar"
#define TAR_NODE "/var/tmp/vestibule-images/node.tar"
#define DOCKER_SOCK "unix:///var/run/docker.sock"
#define PODMAN_SOCK "unix:///run/podman/podman.sock"
/* the test user's rootless Podman; SBX_TEST_ROOTLESS_SOCK=/path points the rootless cases at
 * another service of that user (a second storage, say) */
static const char *rootless_path(void)
{
        const char *p = getenv("SBX_TEST_ROOTLESS_SOCK");
        return p && *p ? p : "/run/user/2000/podman/podman.sock";
}
static char rootless_host[128];
#define ROOTLESS_SOCK                                                                              \
        (snprintf(rootless_host, sizeof(rootless_host), "unix://%s", rootless_path()),             \
         rootless_host)
#define TEST_UID 2000

static char *ws_dir;
static struct sbx_config test_cfg;

static void cfg_init(enum sbx_runtime_choice rt)
{
        if (!ws_dir) {
                ws_dir = sbx_test_tmpdir();
                chmod(ws_dir, 0777);
        }
        sbx_test_config(&test_cfg, ws_dir);
        test_cfg.runtime = rt;
        test_cfg.backend = SBX_BACKEND_CONTAINER;
        test_cfg.image_python = (char *)IMG_PY;
        test_cfg.image_node = (char *)IMG_NODE;
        if (geteuid() == 0) {
                test_cfg.run_as_set = true;
                test_cfg.run_as_uid = TEST_UID;
                test_cfg.run_as_gid = TEST_UID;
        }
}

/* Connect to @host, skip the test when nothing answers; import both images (idempotent). */
static void engine_or_skip(const char *host, enum sbx_runtime_choice rt)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        char why[600];

        cfg_init(rt);
        fake_env_reset();
        fake_env_set(rt == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST", host);
        /* main() added this TCase only when the engine answered and the tarballs exist */
        ck_assert_msg(engine_connect(&test_cfg, fake_getenv, &c, &err) == 0, "%s: %s", host,
                      err.msg);
        if (engine_setup_import_with_env(&test_cfg, fake_getenv, TAR_PY, IMG_PY, &err) < 0 ||
            engine_setup_import_with_env(&test_cfg, fake_getenv, TAR_NODE, IMG_NODE, &err) < 0) {
                snprintf(why, sizeof(why), "cannot import the test images into %s: %.400s", host,
                         err.msg);
                ck_abort_msg("%s", why);
        }
}

struct run_out {
        int rc;
        struct sbx_error err;
        struct run_result res;
        char *text; /* stdout */
};

static struct backend *test_backend;

static void backend_up(void)
{
        struct sbx_error err = {0};
        ck_assert_int_eq(engine_backend_new_with_env(&test_cfg, fake_getenv, &test_backend, &err),
                         0);
}

static struct run_out run_code(enum sbx_language lang, const char *code, unsigned timeout_s,
                               int cancel_fd)
{
        struct run_out o = {0};
        struct run_request req = {.language = lang,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = timeout_s,
                                  .cfg = &test_cfg,
                                  .cancel_fd = cancel_fd};
        if (!test_backend)
                backend_up();
        o.rc = test_backend->ops->run(test_backend, &req, &o.res, &o.err);
        o.text = o.res.out.data ? o.res.out.data : (char *)"";
        return o;
}

static void expect_exit0(const struct run_out *o)
{
        ck_assert_msg(o->rc == 0, "run failed: %s", o->err.msg);
        ck_assert_msg(o->res.outcome == RUN_OUTCOME_EXITED && o->res.exit_code == 0,
                      "outcome %d exit %d stderr '%s'", o->res.outcome, o->res.exit_code,
                      o->res.err.data ? o->res.err.data : "");
}

/* The probe: prints key=value lines about what this process can see and do. The same code
 * runs on the host as the control, so each property is shown to be able to fail. */
static const char probe_py[] =
    "import os, socket, errno, ctypes\n"
    "def st(k):\n"
    "    for l in open('/proc/self/status'):\n"
    "        if l.startswith(k + ':'): return l.split()[1]\n"
    "print('uid=%d' % os.getuid())\n"
    "print('ifaces=' + ','.join(sorted(os.listdir('/sys/class/net'))))\n"
    "s = socket.socket(); s.settimeout(2)\n"
    "try:\n"
    "    s.connect(('192.0.2.1', 9)); r = 'ok'\n"
    "except OSError as e: r = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "
    "'timeout'\n"
    "print('connect=' + r)\n"
    "print('capeff=' + st('CapEff')); print('capbnd=' + st('CapBnd'))\n"
    "print('nnp=' + st('NoNewPrivs')); print('seccomp=' + st('Seccomp'))\n"
    "try:\n"
    "    open('/vestibule-probe-rootwrite', 'w').close(); r = 'ok'\n"
    "    os.unlink('/vestibule-probe-rootwrite')\n"
    "except OSError as e: r = errno.errorcode[e.errno]\n"
    "print('rootwrite=' + r)\n"
    "v = os.statvfs('/tmp')\n"
    "print('tmpsize=%d' % (v.f_blocks * v.f_frsize))\n"
    "print('tmpnoexec=%d' % (1 if v.f_flag & os.ST_NOEXEC else 0))\n"
    "print('devshm=%d' % os.path.exists('/dev/shm'))\n"
    "try:\n"
    "    open('/sandbox/x', 'w'); r = 'ok'\n"
    "except OSError as e: r = errno.errorcode[e.errno]\n"
    "print('sandboxwrite=' + r)\n";

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

/* Run the probe on the host (the control) as the test user. */
static char *host_probe(void)
{
        _cleanup_free_ char *dir = sbx_test_tmpdir();
        _cleanup_free_ char *f = xasprintf("%s/probe.py", dir);
        write_file(f, probe_py);
        chmod(dir, 0755);
        chmod(f, 0644);
        _cleanup_free_ char *cmd = xasprintf("cd / && python3 '%s' 2>&1", f);
        FILE *p = popen(cmd, "r");
        ck_assert_ptr_nonnull(p);
        char *out = xcalloc(1, 8192);
        size_t n = fread(out, 1, 8191, p);
        out[n] = '\0';
        pclose(p);
        unlink(f);
        rmdir(dir);
        return out;
}

static void check_lockdown_probe(void)
{
        char a[128], b[128];
        struct run_out o = run_code(SBX_LANG_PYTHON, probe_py, 20, -1);
        _cleanup_free_ char *host = host_probe();
        _cleanup_free_ char *uid =
            xasprintf("%u", (unsigned)(test_cfg.run_as_set ? test_cfg.run_as_uid : geteuid()));
        expect_exit0(&o);
        /* network: only lo; control: the host has more interfaces */
        ck_assert_str_eq(kv(o.text, "ifaces", a, sizeof(a)), "lo");
        ck_assert_str_ne(kv(host, "ifaces", b, sizeof(b)), "lo");
        ck_assert_str_eq(kv(o.text, "connect", a, sizeof(a)), "ENETUNREACH");
        /* capabilities: all zero; the control runs as root here and has some */
        ck_assert_str_eq(kv(o.text, "capeff", a, sizeof(a)), "0000000000000000");
        ck_assert_str_eq(kv(o.text, "capbnd", a, sizeof(a)), "0000000000000000");
        ck_assert_str_ne(kv(host, "capbnd", b, sizeof(b)), "0000000000000000");
        /* no_new_privs and the engine's seccomp filter; control: neither on the host */
        ck_assert_str_eq(kv(o.text, "nnp", a, sizeof(a)), "1");
        ck_assert_str_eq(kv(host, "nnp", b, sizeof(b)), "0");
        ck_assert_str_eq(kv(o.text, "seccomp", a, sizeof(a)), "2");
        ck_assert_str_eq(kv(host, "seccomp", b, sizeof(b)), "0");
        /* read-only root; control: root on the host can write to / */
        ck_assert_str_eq(kv(o.text, "rootwrite", a, sizeof(a)), "EROFS");
        if (geteuid() == 0)
                ck_assert_str_eq(kv(host, "rootwrite", b, sizeof(b)), "ok");
        /* not root inside */
        ck_assert_str_eq(kv(o.text, "uid", a, sizeof(a)), uid);
        ck_assert_str_ne(kv(o.text, "uid", a, sizeof(a)), "0");
        /* /tmp: the configured size, noexec; control: the host's /tmp is another size */
        _cleanup_free_ char *sz = xasprintf("%llu", (unsigned long long)test_cfg.tmpfs_mb << 20);
        ck_assert_str_eq(kv(o.text, "tmpsize", a, sizeof(a)), sz);
        ck_assert_str_ne(kv(host, "tmpsize", b, sizeof(b)), sz);
        ck_assert_str_eq(kv(o.text, "tmpnoexec", a, sizeof(a)), "1");
        /* IpcMode none: no /dev/shm */
        ck_assert_str_eq(kv(o.text, "devshm", a, sizeof(a)), "0");
        ck_assert_str_eq(kv(host, "devshm", b, sizeof(b)), "1");
        /* the code dir is read-only */
        ck_assert_str_eq(kv(o.text, "sandboxwrite", a, sizeof(a)), "EROFS");
        run_result_done(&o.res);
}

/* pids cap: a fork loop stops below the cap; the control (host) goes past it. */
static const char forkloop_py[] = "import os, time\n"
                                  "n = 0\n"
                                  "for i in range(200):\n"
                                  "    try: pid = os.fork()\n"
                                  "    except OSError: break\n"
                                  "    if pid == 0:\n"
                                  "        time.sleep(3); os._exit(0)\n"
                                  "    n += 1\n"
                                  "print('forks=%d' % n)\n";

static void check_pids_cap(void)
{
        char a[64];
        struct run_out o = run_code(SBX_LANG_PYTHON, forkloop_py, 20, -1);
        expect_exit0(&o);
        long forks = strtol(kv(o.text, "forks", a, sizeof(a)), NULL, 10);
        ck_assert_msg(forks > 0 && forks < (long)test_cfg.pids_max, "forks=%ld cap %u", forks,
                      test_cfg.pids_max);
        /* control: the same loop on the host reaches 200 */
        _cleanup_free_ char *dir = sbx_test_tmpdir();
        _cleanup_free_ char *f = xasprintf("%s/f.py", dir);
        write_file(f, forkloop_py);
        _cleanup_free_ char *cmd = xasprintf("python3 '%s'", f);
        FILE *p = popen(cmd, "r");
        char buf[256] = "";
        size_t n = fread(buf, 1, sizeof(buf) - 1, p);
        buf[n] = '\0';
        pclose(p);
        ck_assert_str_eq(kv(buf, "forks", a, sizeof(a)), "200");
        unlink(f);
        rmdir(dir);
        run_result_done(&o.res);
}

/* 300 MiB in 1 MiB steps (this VM faults pages in at ~100 MiB/s: keep it small) */
static const char memhog_py[] = "b = []\n"
                                "for i in range(300):\n"
                                "    b.append(bytearray(1 << 20))\n"
                                "print('allocated=%d' % len(b))\n";

struct cancel_arg {
        int fd;
        unsigned delay_ms;
        uint64_t sent_ms; /* when the cancel was sent (monotonic) */
};

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *cancel_later(void *p)
{
        struct cancel_arg *c = p;
        usleep(c->delay_ms * 1000);
        c->sent_ms = mono_ms();
        ck_assert_int_eq(write(c->fd, "x", 1), 1);
        return NULL;
}

/* The run behaviours every engine shares. */
static void check_behaviours(void)
{
        /* exit code and stderr */
        struct run_out o = run_code(SBX_LANG_PYTHON,
                                    "import sys\nprint('out')\nprint('err', file=sys.stderr)\n"
                                    "sys.exit(3)\n",
                                    10, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(o.res.exit_code, 3);
        ck_assert_str_eq(o.text, "out\n");
        ck_assert_str_eq(o.res.err.data, "err\n");
        run_result_done(&o.res);

        /* bash and node */
        o = run_code(SBX_LANG_BASH, "echo \"bash $BASH_VERSION\" | cut -c1-4\n", 10, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "bash\n");
        run_result_done(&o.res);
        o = run_code(SBX_LANG_NODE, "console.log(6 * 7)\n", 10, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "42\n");
        run_result_done(&o.res);

        /* timeout: the run ends near its deadline, reported as timed out */
        uint64_t t_call = mono_ms();
        o = run_code(SBX_LANG_PYTHON, "import time\nprint('start', flush=True)\ntime.sleep(60)\n",
                     2, -1);
        uint64_t call_ms = mono_ms() - t_call;
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        /* the whole call (create and removal dispatch included) within timeout + grace + 2 s */
        ck_assert_msg(call_ms < 2000 + 3000 + 2000, "a 2 s timeout answered after %llu ms",
                      (unsigned long long)call_ms);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_str_eq(o.text, "start\n");
        ck_assert_msg(o.res.usage.wall_ms >= 1900 && o.res.usage.wall_ms < 7000, "wall %llu",
                      (unsigned long long)o.res.usage.wall_ms);
        run_result_done(&o.res);

        /* cancel: a readable cancel_fd ends the run at once */
        int pfd[2];
        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
        struct cancel_arg ca = {.fd = pfd[1], .delay_ms = 1000};
        pthread_t t;
        pthread_create(&t, NULL, cancel_later, &ca);
        o = run_code(SBX_LANG_PYTHON, "import time\ntime.sleep(30)\n", 30, pfd[0]);
        uint64_t returned = mono_ms();
        pthread_join(t, NULL);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        /* the slot is free promptly: cancel sent -> engine_run returned */
        ck_assert_msg(ca.sent_ms && returned - ca.sent_ms <= 3000,
                      "returned %llu ms after the cancel",
                      (unsigned long long)(returned - ca.sent_ms));
        fprintf(stderr, "cancel -> return: %llu ms\n", (unsigned long long)(returned - ca.sent_ms));
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_CANCELLED);
        ck_assert_msg(o.res.usage.wall_ms < 5000, "wall %llu",
                      (unsigned long long)o.res.usage.wall_ms);
        close(pfd[0]);
        close(pfd[1]);
        run_result_done(&o.res);

        /* flood: stopped past twice the cap, output kept to the cap */
        o = run_code(SBX_LANG_PYTHON, "while True:\n    print('y' * 1023)\n", 20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_FLOODED);
        ck_assert_uint_eq(o.res.out.len, test_cfg.max_output_bytes);
        ck_assert_uint_gt(o.res.out.total, 2 * test_cfg.max_output_bytes);
        ck_assert_msg(o.res.usage.wall_ms < 10000, "wall %llu",
                      (unsigned long long)o.res.usage.wall_ms);
        run_result_done(&o.res);

        /* workspace: writable, and files belong to the run's uid on the host */
        o = run_code(SBX_LANG_PYTHON, "open('/workspace/made-here.txt','w').write('hi')\n", 10, -1);
        expect_exit0(&o);
        _cleanup_free_ char *wf = xasprintf("%s/made-here.txt", ws_dir);
        struct stat sst;
        ck_assert_int_eq(stat(wf, &sst), 0);
        ck_assert_uint_eq(sst.st_uid, test_cfg.run_as_set ? test_cfg.run_as_uid : geteuid());
        unlink(wf);
        run_result_done(&o.res);

        /* usage: wall always; the rest measured from the host (check_usage) or says why not */
        o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        expect_exit0(&o);
        ck_assert(o.res.usage.cpu_us.measured || *o.res.usage.cpu_us.why);
        ck_assert(o.res.usage.mem_peak_bytes.measured || *o.res.usage.mem_peak_bytes.why);
        ck_assert(o.res.usage.pids_peak.measured || *o.res.usage.pids_peak.why);
        ck_assert_str_eq(o.res.backend, "container");
        ck_assert_str_eq(o.res.image, IMG_PY);
        run_result_done(&o.res);
}

/* Nothing of ours is left on the engine after the runs. */
static void check_nothing_left(const char *host)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        char me[160];
        /* containers are removed in the background after each result: the backend's
         * shutdown waits for those removals */
        test_backend = backend_free(test_backend);
        fake_env_reset();
        fake_env_set(test_cfg.runtime == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST",
                     host);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        sbx_owner_label(getpid(), me, sizeof(me));
        ck_assert_int_eq(sbx_test_engine(&c, "GET", "/containers/json?all=1", NULL, NULL, &r, &err),
                         200);
        ck_assert_msg(!strstr(r.raw, me), "containers of this process left: %s", r.raw);
}

/* An image without coreutils `timeout` (a tiny rootfs): a clear Blocked:, not a result. */
static void check_no_timeout_image(const char *host)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *cmd =
            xasprintf("cd '%s' && mkdir -p r/workspace r/sandbox r/tmp r/etc && "
                      "echo 'root:x:0:0::/:/bin/sh' >r/etc/passwd && tar -C r -cf img.tar .",
                      d);
        _cleanup_free_ char *tar = xasprintf("%s/img.tar", d);
        struct engine_conn c;
        struct sbx_error err = {0};
        ck_assert_int_eq(system(cmd), 0);
        fake_env_reset();
        fake_env_set(test_cfg.runtime == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST",
                     host);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        ck_assert_msg(engine_image_import(&c, tar, "vestibule/notimeout:test", "0", &err) == 0,
                      "%s", err.msg);
        test_cfg.image_python = (char *)"vestibule/notimeout:test";
        struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        ck_assert_int_eq(o.rc, -ENOENT);
        ck_assert_msg(strstr(o.err.msg, "no coreutils `timeout`") &&
                          strstr(o.err.msg, "vestibule/notimeout:test"),
                      "%s", o.err.msg);
        run_result_done(&o.res);
        test_cfg.image_python = (char *)IMG_PY;
        /* control: the real image runs */
        o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        expect_exit0(&o);
        run_result_done(&o.res);
        _cleanup_free_ char *rm = xasprintf("rm -rf '%s'", d);
        ck_assert_int_eq(system(rm), 0);
        /* the test removes what it made: the image too (containers first: their removal
         * runs in the background until the backend shuts down) */
        test_backend = backend_free(test_backend);
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        ck_assert_msg(sbx_test_engine(&c, "DELETE", "/images/{}?force=1",
                                      "vestibule/notimeout:test", NULL, &r, &err) == 200,
                      "image removal: HTTP %ld %s %s", r.status, r.raw ? r.raw : "", err.msg);
        char have[8];
        ck_assert_int_eq(engine_image_label(&c, "vestibule/notimeout:test", "vestibule.image", have,
                                            sizeof(have), &err),
                         -ENOENT);
}

/* Usage from the host (hostcg.c): a parent cgroup per run whose counters outlive the
 * container. Each figure is checked against a control run that differs only in that figure,
 * so a constant (or a figure read from the wrong place) fails. */
static void check_usage_measured(bool podman)
{
        struct run_out small = run_code(SBX_LANG_PYTHON, "print(1)\n", 20, -1);
        expect_exit0(&small);
        const struct run_usage *u = &small.res.usage;
        fprintf(stderr, "print(1): cpu %llu us, mem_peak %llu B, pids_peak %llu\n",
                (unsigned long long)u->cpu_us.value, (unsigned long long)u->mem_peak_bytes.value,
                (unsigned long long)u->pids_peak.value);
        ck_assert_msg(u->cpu_us.measured, "cpu not measured: %s", u->cpu_us.why);
        ck_assert_uint_gt(u->cpu_us.value, 0);
        if (podman) {
                /* conmon shares the run's cgroup: the peaks are lower bounds (the container's
                 * own cgroup polled while it lives, ctrcg.c; the parent's minus conmon's) */
                ck_assert_msg(u->mem_peak_bytes.measured && u->pids_peak.measured,
                              "not measured: mem '%s' pids '%s'", u->mem_peak_bytes.why,
                              u->pids_peak.why);
                ck_assert(u->mem_peak_bytes.at_least && u->pids_peak.at_least);
                ck_assert_uint_lt(u->mem_peak_bytes.value, 100u << 20);
                ck_assert_uint_lt(u->pids_peak.value, 20);
        } else {
                ck_assert_msg(u->mem_peak_bytes.measured && u->pids_peak.measured,
                              "not measured: mem '%s' pids '%s'", u->mem_peak_bytes.why,
                              u->pids_peak.why);
                ck_assert_uint_gt(u->mem_peak_bytes.value, 1u << 20);   /* an interpreter ran */
                ck_assert_uint_lt(u->mem_peak_bytes.value, 100u << 20); /* and held little */
                ck_assert_uint_ge(u->pids_peak.value, 2); /* init + timeout + python */
                ck_assert_uint_lt(u->pids_peak.value, 20);
        }

        /* memory: 200 MiB touched -> a peak above 200 MiB (Podman: a lower bound, polled or the
         * parent's minus conmon's ~11 MB) */
        struct run_out big = run_code(SBX_LANG_PYTHON,
                                      "b = bytearray(200 << 20)\n"
                                      "for i in range(0, len(b), 4096): b[i] = 1\n",
                                      30, -1);
        expect_exit0(&big);
        ck_assert(big.res.usage.mem_peak_bytes.measured);
        ck_assert_msg(big.res.usage.mem_peak_bytes.value >= (podman ? 180ull : 200ull) << 20,
                      "peak %llu", (unsigned long long)big.res.usage.mem_peak_bytes.value);
        run_result_done(&big.res);

        /* CPU: ~1 s of busy loop -> at least 0.5 s more CPU than print(1) */
        struct run_out busy = run_code(SBX_LANG_PYTHON,
                                       "import time\nt = time.process_time()\n"
                                       "while time.process_time() - t < 1.0: pass\n",
                                       30, -1);
        expect_exit0(&busy);
        ck_assert(busy.res.usage.cpu_us.measured);
        ck_assert_msg(busy.res.usage.cpu_us.value >= 1000000 &&
                          busy.res.usage.cpu_us.value > u->cpu_us.value + 500000,
                      "busy cpu %llu us, print(1) %llu us",
                      (unsigned long long)busy.res.usage.cpu_us.value,
                      (unsigned long long)u->cpu_us.value);
        run_result_done(&busy.res);

        /* pids: 20 children alive for 1 s -> a peak above 20 (and above print(1)'s) */
        struct run_out forks = run_code(SBX_LANG_PYTHON,
                                        "import os, time\nkids = []\n"
                                        "for i in range(20):\n"
                                        "    p = os.fork()\n"
                                        "    if p == 0: time.sleep(1); os._exit(0)\n"
                                        "    kids.append(p)\n"
                                        "for p in kids: os.waitpid(p, 0)\n",
                                        30, -1);
        expect_exit0(&forks);
        ck_assert(forks.res.usage.pids_peak.measured);
        ck_assert_msg(forks.res.usage.pids_peak.value > 20 &&
                          forks.res.usage.pids_peak.value > u->pids_peak.value,
                      "pids_peak %llu", (unsigned long long)forks.res.usage.pids_peak.value);
        run_result_done(&forks.res);
        run_result_done(&small.res);
}

/* After the backend is gone no parent cgroup of this process is left on the host. */
static void check_no_cgroup_left(void)
{
        char pfx[64];
        snprintf(pfx, sizeof(pfx), "%d-", (int)getpid());
        test_backend = backend_free(test_backend);
        const char *tops[] = {"/sys/fs/cgroup/memory/vestibule", "/sys/fs/cgroup/pids/vestibule",
                              "/sys/fs/cgroup/cpu/vestibule", "/sys/fs/cgroup/systemd/vestibule"};
        for (size_t i = 0; i < ELEMENTSOF(tops); i++) {
                DIR *d = opendir(tops[i]);
                struct dirent *de;
                if (!d)
                        continue;
                while ((de = readdir(d)))
                        ck_assert_msg(strncmp(de->d_name, pfx, strlen(pfx)) != 0,
                                      "run cgroup left: %s/%s", tops[i], de->d_name);
                closedir(d);
        }
}

START_TEST(docker_print1_grade_container)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        struct backend_probe p;
        struct sbx_error err = {0};
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "1\n");
        ck_assert_str_eq(o.res.isolation, "container");
        run_result_done(&o.res);
        check_nothing_left(DOCKER_SOCK);
}
END_TEST

START_TEST(docker_lockdown_from_inside)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        check_lockdown_probe();
        check_pids_cap();
}
END_TEST

START_TEST(docker_memory_cap_oom)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        test_cfg.mem_mb = 128;
        struct run_out o = run_code(SBX_LANG_PYTHON, memhog_py, 20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert(o.res.oom_killed);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_SIGNALED);
        ck_assert_int_eq(o.res.term_signal, SIGKILL);
        ck_assert_uint_eq(o.res.mem_limit_bytes, 128u << 20);
        ck_assert_ptr_null(strstr(o.text, "allocated="));
        run_result_done(&o.res);
        /* control: with room for it, the same program finishes */
        test_cfg.mem_mb = 1024;
        o = run_code(SBX_LANG_PYTHON, memhog_py, 30, -1);
        expect_exit0(&o);
        ck_assert(!o.res.oom_killed);
        ck_assert_str_eq(o.text, "allocated=300\n");
        run_result_done(&o.res);
}
END_TEST

START_TEST(docker_behaviours)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        check_behaviours();
        check_nothing_left(DOCKER_SOCK);
}
END_TEST

START_TEST(docker_sweep_removes_dead_owners_only)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        struct engine_conn c;
        struct sbx_error err = {0};
        char dead[300], live[160];
        long status = 0;
        pid_t child;
        int wst;

        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        child = fork();
        if (child == 0)
                _exit(0);
        waitpid(child, &wst, 0);
        _cleanup_free_ char *dead_label = sbx_test_owner_label_of((int)child, 999);
        snprintf(dead, sizeof(dead), "%s", dead_label);
        sbx_owner_label(getpid(), live, sizeof(live));

        char *ids[2];
        const char *owners[2] = {dead, live};
        for (int i = 0; i < 2; i++) {
                _cleanup_free_ char *body = xasprintf(
                    "{\"Image\":\"%s\",\"Cmd\":[\"true\"],\"Labels\":{\"vestibule.run\":\"1\","
                    "\"vestibule.owner\":\"%s\"},\"HostConfig\":{\"NetworkMode\":\"none\"}}",
                    IMG_PY, owners[i]);
                _cleanup_(engine_reply_done) struct engine_reply j = {0};
                json_object *idj;
                status = sbx_test_engine(&c, "POST", "/containers/create", NULL, body, &j, &err);
                ck_assert_msg(status == 201, "%ld %s %s", status, j.msg, err.msg);
                ck_assert(json_object_object_get_ex(j.json, "Id", &idj));
                ids[i] = xstrdup(json_object_get_string(idj));
        }
        int n = engine_sweep(&c, &err);
        ck_assert_msg(n >= 1, "%d %s", n, err.msg);
        for (int i = 0; i < 2; i++) {
                _cleanup_(engine_reply_done) struct engine_reply g = {0};
                status = sbx_test_engine(&c, "GET", "/containers/{}/json", ids[i], NULL, &g, &err);
                ck_assert_int_eq(status, i == 0 ? 404 : 200); /* dead owner gone, live kept */
        }
        /* and a new backend's first use sweeps too: relabel-free check via shutdown */
        _cleanup_(engine_reply_done) struct engine_reply d = {0};
        sbx_test_engine(&c, "DELETE", "/containers/{}?force=1", ids[1], NULL, &d, &err);
        free(ids[0]);
        free(ids[1]);
}
END_TEST

START_TEST(docker_missing_image_blocked)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        test_cfg.image_python = (char *)"vestibule/nosuch:never";
        struct backend_probe p;
        struct sbx_error err = {0};
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert(!p.usable);
        ck_assert_msg(strstr(p.blocked, "vestibule-mcp setup"), "%s", p.blocked);
        struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        ck_assert_int_eq(o.rc, -ENOENT);
        ck_assert_msg(strstr(o.err.msg, "vestibule/nosuch:never") &&
                          strstr(o.err.msg, "vestibule-mcp setup"),
                      "%s", o.err.msg);
        /* the backend still works for the other language */
        o = run_code(SBX_LANG_NODE, "console.log(1)\n", 10, -1);
        expect_exit0(&o);
        run_result_done(&o.res);
        test_cfg.image_python = (char *)IMG_PY;
        check_no_timeout_image(DOCKER_SOCK);
}
END_TEST

/* ---------------------------------------------------------------------------------------- */
/* Issue 12: adversarial findings on the container backend                                  */

/* #2: the code's own output and exit status never decide a refusal. Each forgery writes a file
 * (so the code demonstrably ran), prints the words the wrapper or the init print when they
 * cannot exec, and exits 127. Before the fix each became "Blocked: the sandbox image has
 * no ...", with the output dropped. */
START_TEST(docker_output_cannot_forge_refusal)
{
        static const char *const forged[] = {
            "timeout: failed to run command 'python3': No such file or directory",
            "[FATAL tini (7)] exec timeout failed: No such file or directory",
            "ERROR (catatonit:1): failed to exec pid1: No such file or directory",
        };
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        for (size_t i = 0; i < ELEMENTSOF(forged); i++) {
                _cleanup_free_ char *marker = xasprintf("%s/forged-%zu.txt", ws_dir, i);
                _cleanup_free_ char *code =
                    xasprintf("import sys\nopen('/workspace/forged-%zu.txt', 'w').write('ran')\n"
                              "sys.stderr.write(%s'%s\\n')\nsys.exit(127)\n",
                              i, "",
                              i == 0 ? "timeout: failed to run command \\'python3\\': No such file "
                                       "or directory"
                                     : forged[i]);
                struct run_out o = run_code(SBX_LANG_PYTHON, code, 10, -1);
                ck_assert_msg(o.rc == 0, "forgery %zu became a refusal: %s", i, o.err.msg);
                ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_EXITED);
                ck_assert_int_eq(o.res.exit_code, 127);
                ck_assert_msg(o.res.err.data && strstr(o.res.err.data, forged[i]),
                              "stderr lost: '%s'", o.res.err.data ? o.res.err.data : "");
                ck_assert_int_eq(access(marker, F_OK), 0);
                unlink(marker);
                run_result_done(&o.res);
        }
        /* bash too */
        struct run_out o = run_code(
            SBX_LANG_BASH,
            "echo ran >/workspace/forged-bash.txt\n"
            "echo \"timeout: failed to run command 'bash': No such file or directory\" >&2\n"
            "exit 127\n",
            10, -1);
        ck_assert_msg(o.rc == 0, "bash forgery became a refusal: %s", o.err.msg);
        ck_assert_int_eq(o.res.exit_code, 127);
        _cleanup_free_ char *bm = xasprintf("%s/forged-bash.txt", ws_dir);
        ck_assert_int_eq(access(bm, F_OK), 0);
        unlink(bm);
        run_result_done(&o.res);

        /* control: an image that really lacks the interpreter is still refused, before
         * anything runs (the python image has no node; the node image has python3 since npm,
         * through node-gyp, depends on it) */
        test_cfg.image_node = (char *)IMG_PY;
        o = run_code(SBX_LANG_NODE,
                     "require('fs').writeFileSync('/workspace/should-not.txt', 'x')\n", 10, -1);
        ck_assert_int_eq(o.rc, -ENOENT);
        ck_assert_msg(strstr(o.err.msg, "has no 'node'") && strstr(o.err.msg, IMG_PY), "%s",
                      o.err.msg);
        _cleanup_free_ char *sn = xasprintf("%s/should-not.txt", ws_dir);
        ck_assert_int_ne(access(sn, F_OK), 0);
        run_result_done(&o.res);
        test_cfg.image_node = (char *)IMG_NODE;
        check_nothing_left(DOCKER_SOCK);
}
END_TEST

/* #9: the outcome comes from what the server saw, not from exit statuses the code can choose.
 * (a) exit 124 shortly before the deadline is an exit, not a timeout: the program exits 120 ms
 *     before the deadline counted from its container's start (PID 1's start time), which is
 *     never later than the server's own start of the clock;
 * (b) a child OOM-killed while the main program exits 0: exit code 0, with the OOM noted;
 * (c) SIGSTOP on the in-container `timeout` wrapper: the server's deadline still ends the run. */
static const char exit124_py[] =
    "import os, sys, time\n"
    "hz = os.sysconf('SC_CLK_TCK')\n"
    "start = int(open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19]) / hz\n"
    "up = float(open('/proc/uptime').read().split()[0])\n"
    "time.sleep(max(0.0, start + %u - 0.12 - up))\n"
    "print('exiting 124', flush=True)\n"
    "sys.exit(124)\n";

START_TEST(docker_outcomes_not_forged_by_exit_status)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        /* (a) */
        _cleanup_free_ char *code = xasprintf(exit124_py, 3u);
        struct run_out o = run_code(SBX_LANG_PYTHON, code, 3, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_msg(o.res.outcome == RUN_OUTCOME_EXITED && o.res.exit_code == 124,
                      "exit 124 before the deadline: outcome %d exit %d wall %llu ms",
                      o.res.outcome, o.res.exit_code, (unsigned long long)o.res.usage.wall_ms);
        ck_assert_str_eq(o.text, "exiting 124\n");
        run_result_done(&o.res);
        /* control: a program that overruns is a timeout */
        o = run_code(SBX_LANG_PYTHON, "import time\ntime.sleep(30)\n", 2, -1);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_TIMED_OUT);
        run_result_done(&o.res);

        /* (b) */
        test_cfg.mem_mb = 128;
        o = run_code(SBX_LANG_PYTHON,
                     "import os\npid = os.fork()\nif pid == 0:\n    b = []\n    while True:\n"
                     "        b.append(bytearray(1 << 20))\n"
                     "_, st = os.waitpid(pid, 0)\nprint('child signal %d' % os.WTERMSIG(st))\n",
                     20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_str_eq(o.text, "child signal 9\n");
        ck_assert_msg(o.res.outcome == RUN_OUTCOME_EXITED && o.res.exit_code == 0,
                      "child OOM: outcome %d exit %d signal %d", o.res.outcome, o.res.exit_code,
                      o.res.term_signal);
        ck_assert(o.res.oom_killed); /* the OOM is still said */
        run_result_done(&o.res);
        /* control: the main program OOM-killed is a SIGKILL */
        o = run_code(SBX_LANG_PYTHON, memhog_py, 20, -1);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_SIGNALED);
        ck_assert_int_eq(o.res.term_signal, SIGKILL);
        ck_assert(o.res.oom_killed);
        run_result_done(&o.res);
        test_cfg.mem_mb = 256;

        /* (c) */
        uint64_t t0 = mono_ms();
        o = run_code(SBX_LANG_PYTHON,
                     "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\n"
                     "print('stopped the wrapper', flush=True)\ntime.sleep(60)\n",
                     3, -1);
        uint64_t call_ms = mono_ms() - t0;
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_str_eq(o.text, "stopped the wrapper\n");
        fprintf(stderr, "SIGSTOPped wrapper, 3 s timeout: wall %llu ms, call %llu ms\n",
                (unsigned long long)o.res.usage.wall_ms, (unsigned long long)call_ms);
        ck_assert_msg(o.res.usage.wall_ms < 4500 && call_ms < 5500,
                      "a 3 s run lasted %llu ms (call %llu ms)",
                      (unsigned long long)o.res.usage.wall_ms, (unsigned long long)call_ms);
        run_result_done(&o.res);
        check_nothing_left(DOCKER_SOCK);
}
END_TEST

/* #10: the code folder on the host is the run user's alone (0700/0600): another local user
 * cannot read the code while it runs. The run still reads it (the control). */
struct bg_run {
        const char *code;
        unsigned timeout_s;
        struct run_out o;
};

static void *bg_run_thread(void *p)
{
        struct bg_run *b = p;
        b->o = run_code(SBX_LANG_PYTHON, b->code, b->timeout_s, -1);
        return NULL;
}

/* The /tmp/vestibule-code-* folder whose script holds @marker, into @ret; false if none yet. */
static bool find_code_dir(const char *marker, char *ret, size_t size)
{
        DIR *d = opendir("/tmp");
        struct dirent *de;
        bool found = false;
        while (d && !found && (de = readdir(d))) {
                if (strncmp(de->d_name, "vestibule-code-", 15) != 0)
                        continue;
                _cleanup_free_ char *f = xasprintf("/tmp/%s/main.py", de->d_name);
                _cleanup_fclose_ FILE *fp = fopen(f, "re");
                char buf[512] = "";
                if (fp && fread(buf, 1, sizeof(buf) - 1, fp) > 0 && strstr(buf, marker)) {
                        snprintf(ret, size, "/tmp/%.200s", de->d_name);
                        found = true;
                }
        }
        if (d)
                closedir(d);
        return found;
}

/* Whether uid @uid (gid @gid) can open @path for reading. */
static bool can_read_as(const char *path, uid_t uid, gid_t gid)
{
        pid_t p = fork();
        int st;
        if (p == 0) {
                if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                        _exit(2);
                _exit(open(path, O_RDONLY | O_CLOEXEC) >= 0 ? 0 : 1);
        }
        waitpid(p, &st, 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) != 2);
        return WEXITSTATUS(st) == 0;
}

START_TEST(docker_code_dir_private)
{
        char dir[256] = "";
        struct stat st;
        pthread_t t;
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        if (geteuid() != 0)
                return; /* needs another user to try: root only (main() notes it) */
        _cleanup_free_ char *marker = xasprintf("marker-docker-code-dir-private-%d", (int)getpid());
        _cleanup_free_ char *code =
            xasprintf("import time\n# %s\nprint(open('/sandbox/main.py').read().count('marker-'))\n"
                      "time.sleep(3)\n",
                      marker);
        struct bg_run b = {.code = code, .timeout_s = 20};
        ck_assert_int_eq(pthread_create(&t, NULL, bg_run_thread, &b), 0);
        for (int i = 0; i < 200 && !find_code_dir(marker, dir, sizeof(dir)); i++)
                usleep(20000);
        ck_assert_msg(*dir, "the run's code folder was not found in /tmp");
        _cleanup_free_ char *file = xasprintf("%s/main.py", dir);
        ck_assert_int_eq(stat(dir, &st), 0);
        ck_assert_msg((st.st_mode & 077) == 0, "code folder mode %o", st.st_mode & 07777);
        ck_assert_int_eq(stat(file, &st), 0);
        ck_assert_msg((st.st_mode & 077) == 0, "code file mode %o", st.st_mode & 07777);
        /* another local user (nobody) cannot read it; control: the run user can */
        ck_assert(!can_read_as(file, 65534, 65534));
        ck_assert(can_read_as(file, test_cfg.run_as_uid, test_cfg.run_as_gid));
        pthread_join(t, NULL);
        expect_exit0(&b.o);
        ck_assert_str_eq(b.o.text, "2\n"); /* the run read its own code */
        run_result_done(&b.o.res);
        ck_assert_int_ne(access(dir, F_OK), 0); /* removed after the run */
}
END_TEST

/* #17: a server killed with kill -9 mid-run leaves its container running; the next server
 * removes it at start, before any tool call, and logs how many. A live server's container
 * (the control: labelled with this test process) is kept. Through the real binary. */
struct server {
        pid_t pid;
        int in; /* its stdin */
        char *log;
};

static void server_start(struct server *sv, const char *dir, const char *name)
{
        int p[2];
        sv->log = xasprintf("%s/%s.log", dir, name);
        _cleanup_free_ char *home = xasprintf("%s/home", dir);
        _cleanup_free_ char *audit = xasprintf("%s/audit-%s", dir, name);
        mkdir(home, 0700);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        sv->pid = fork();
        ck_assert_int_ge(sv->pid, 0);
        if (sv->pid == 0) {
                _cleanup_free_ char *e_home = xasprintf("HOME=%s", home);
                _cleanup_free_ char *e_ws = xasprintf("VESTIBULE_WORKSPACE=%s", ws_dir);
                _cleanup_free_ char *e_audit = xasprintf("VESTIBULE_AUDIT_DIR=%s", audit);
                char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                e_home,
                                e_ws,
                                e_audit,
                                "VESTIBULE_BACKEND=container",
                                "VESTIBULE_RUN_AS=2000:2000",
                                "VESTIBULE_IMAGE_PYTHON=" IMG_PY,
                                "VESTIBULE_IMAGE_NODE=" IMG_NODE,
                                "DOCKER_HOST=" DOCKER_SOCK,
                                NULL};
                int lfd = open(sv->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
                dup2(p[0], 0);
                dup2(nul, 1);
                dup2(lfd, 2);
                execle(VESTIBULE_BIN, VESTIBULE_BIN, (char *)NULL, envp);
                _exit(127);
        }
        close(p[0]);
        sv->in = p[1];
}

static void server_send(struct server *sv, const char *line)
{
        size_t n = strlen(line);
        ck_assert_int_eq(write(sv->in, line, n), (ssize_t)n);
        ck_assert_int_eq(write(sv->in, "\n", 1), 1);
}

/* Our test containers whose owner label holds ":<pid>:" and are running (@running) or any. */
static unsigned containers_of(const struct engine_conn *c, pid_t pid, bool running)
{
        _cleanup_(engine_reply_done) struct engine_reply r = {0};
        struct sbx_error err = {0};
        char needle[32];
        unsigned n = 0;
        snprintf(needle, sizeof(needle), ":%d:", (int)pid);
        ck_assert_int_eq(sbx_test_engine(c, "GET",
                                         running ? "/containers/json" : "/containers/json?all=1",
                                         NULL, NULL, &r, &err),
                         200);
        json_object *list = r.json;
        for (size_t i = 0; list && i < json_object_array_length(list); i++) {
                json_object *ctr = json_object_array_get_idx(list, i), *labels, *o;
                if (json_object_object_get_ex(ctr, "Labels", &labels) &&
                    json_object_object_get_ex(labels, "vestibule.owner", &o) &&
                    strstr(json_object_get_string(o), needle))
                        n++;
        }
        return n;
}

START_TEST(docker_killed_server_swept_at_next_start)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        struct server a = {0}, b = {0};
        long status = 0;
        char live[160];
        int wst;
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        if (geteuid() != 0)
                return; /* the server as root runs code as the test user (VESTIBULE_RUN_AS) */
        _cleanup_free_ char *dir = sbx_test_tmpdir();
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);

        /* control: a container of a live owner (this process) */
        sbx_owner_label(getpid(), live, sizeof(live));
        _cleanup_free_ char *body =
            xasprintf("{\"Image\":\"%s\",\"Cmd\":[\"true\"],\"Labels\":{\"vestibule.run\":\"1\","
                      "\"vestibule.owner\":\"%s\"},\"HostConfig\":{\"NetworkMode\":\"none\"}}",
                      IMG_PY, live);
        _cleanup_(engine_reply_done) struct engine_reply j = {0};
        json_object *idj;
        status = sbx_test_engine(&c, "POST", "/containers/create", NULL, body, &j, &err);
        ck_assert_msg(status == 201, "%ld %s %s", status, j.msg, err.msg);
        ck_assert(json_object_object_get_ex(j.json, "Id", &idj));
        _cleanup_free_ char *live_id = xstrdup(json_object_get_string(idj));

        /* server A starts a long run, then is killed with SIGKILL */
        server_start(&a, dir, "a");
        server_send(&a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                        "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
                        "\"name\":\"t\",\"version\":\"1\"}}}");
        server_send(&a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        server_send(&a, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                        "\"name\":\"run_code\",\"arguments\":{\"language\":\"python\",\"code\":"
                        "\"import time\\ntime.sleep(50)\\n\",\"timeout_seconds\":55}}}");
        unsigned running = 0;
        for (int i = 0; i < 300 && !running; i++) {
                usleep(100000);
                running = containers_of(&c, a.pid, true);
        }
        ck_assert_msg(running == 1, "server A's run never started (log %s)", a.log);
        kill(a.pid, SIGKILL);
        waitpid(a.pid, &wst, 0);
        close(a.in);
        /* the bug's precondition: the orphan runs on (checked at once: any other server on
         * this engine sweeps dead owners' containers at its next tool call) */
        ck_assert_uint_eq(containers_of(&c, a.pid, true), 1);

        /* server B: started, never asked anything; its start-up sweep removes the orphan */
        uint64_t t0 = mono_ms();
        server_start(&b, dir, "b");
        unsigned left = 1;
        while (left && mono_ms() - t0 < 15000) {
                usleep(100000);
                left = containers_of(&c, a.pid, false);
        }
        fprintf(stderr, "start-up sweep: orphan gone %llu ms after the next server started\n",
                (unsigned long long)(mono_ms() - t0));
        ck_assert_msg(left == 0, "server A's container still there 15 s after server B started");
        _cleanup_free_ char *blog = NULL;
        for (int i = 0; i < 50; i++) {
                free(blog);
                _cleanup_fclose_ FILE *f = fopen(b.log, "re");
                blog = xcalloc(1, 8192);
                if (f)
                        (void)!fread(blog, 1, 8191, f);
                if (strstr(blog, "start-up sweep"))
                        break;
                usleep(100000);
        }
        ck_assert_msg(strstr(blog, "removed 1 leftover") && strstr(blog, "start-up sweep"),
                      "server B's log: %s", blog);
        /* and server A's code folder in /tmp (found by its .owner file naming server A) */
        ck_assert_msg(strstr(blog, "removed 1 code folder"), "server B's log: %s", blog);
        _cleanup_free_ char *apfx = xasprintf(":%d:", (int)a.pid);
        DIR *td = opendir("/tmp");
        struct dirent *tde;
        while (td && (tde = readdir(td))) {
                if (strncmp(tde->d_name, "vestibule-code-", 15) != 0 ||
                    !strstr(tde->d_name, ".owner"))
                        continue;
                _cleanup_free_ char *of = xasprintf("/tmp/%s", tde->d_name);
                _cleanup_fclose_ FILE *ofp = fopen(of, "re");
                char lbl[200] = "";
                if (ofp)
                        (void)!fread(lbl, 1, sizeof(lbl) - 1, ofp);
                ck_assert_msg(!strstr(lbl, apfx), "server A's code folder %s is still there", of);
        }
        if (td)
                closedir(td);
        /* the control: the live owner's container is still there */
        _cleanup_(engine_reply_done) struct engine_reply g = {0}, d = {0};
        ck_assert_int_eq(sbx_test_engine(&c, "GET", "/containers/{}/json", live_id, NULL, &g, &err),
                         200);
        close(b.in); /* stdin closed: server B exits */
        waitpid(b.pid, &wst, 0);
        sbx_test_engine(&c, "DELETE", "/containers/{}?force=1", live_id, NULL, &d, &err);
        free(a.log);
        free(b.log);
        _cleanup_free_ char *rm = xasprintf("rm -rf '%s'", dir);
        ck_assert_int_eq(system(rm), 0);
}
END_TEST

/* #11 (container): what the run can read about the host. The parent cgroup of each run is
 * named after the server (hostcg.c: /vestibule/<pid>-<start>-<n>); with the host's cgroup
 * namespace the run saw that path, the server's pid in it, in /proc/self/cgroup and in
 * mountinfo. A private cgroup namespace shows "/" instead. The probe prints the lines that
 * name the server's pid or "vestibule". */
static void check_no_server_pid_in_cgroup_view(void)
{
        char a[256];
        _cleanup_free_ char *code =
            xasprintf("import re\n"
                      "pat = re.compile(r'/vestibule/|[/-]%d-')\n"
                      "for f in ('/proc/self/cgroup', '/proc/self/mountinfo', '/proc/1/cgroup'):\n"
                      "    hits = [l for l in open(f).read().splitlines() if pat.search(l)]\n"
                      "    print('%%s=%%d %%s' %% (f.split('/')[-1] + f.split('/')[2], len(hits),\n"
                      "          hits[0][:120] if hits else ''))\n"
                      "print('cgroupns=' + open('/proc/self/cgroup').read().splitlines()[0])\n",
                      (int)getpid());
        struct run_out o = run_code(SBX_LANG_PYTHON, code, 20, -1);
        expect_exit0(&o);
        fprintf(stderr, "cgroup view: %s", o.text);
        ck_assert_msg(strncmp(kv(o.text, "cgroupself", a, sizeof(a)), "0 ", 2) == 0,
                      "/proc/self/cgroup names the server: %s", o.text);
        ck_assert_msg(strncmp(kv(o.text, "mountinfoself", a, sizeof(a)), "0 ", 2) == 0,
                      "mountinfo names the server: %s", o.text);
        ck_assert_msg(strncmp(kv(o.text, "cgroup1", a, sizeof(a)), "0 ", 2) == 0,
                      "PID 1's cgroup names the server: %s", o.text);
        run_result_done(&o.res);
}

START_TEST(docker_no_server_pid_in_cgroup_view)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        check_no_server_pid_in_cgroup_view();
}
END_TEST

/* #20: a fork bomb at the process cap says so (limits hit: pids), read from the host's
 * cgroup (the run's parent cgroup's pids.peak reached the cap); the control, a run with a few
 * processes, says nothing. And the run's cgroup files on the host are not readable by other
 * local users while it runs (the /vestibule top of each hierarchy is 0700). */
START_TEST(docker_pids_cap_reported_and_cgroup_private)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        if (geteuid() != 0)
                return; /* the host cgroups are read by a root server only */
        test_cfg.pids_max = 32;
        struct run_out o = run_code(SBX_LANG_PYTHON, forkloop_py, 20, -1);
        expect_exit0(&o);
        ck_assert_msg(strstr(o.res.limits_hit, "pids"), "limits hit: '%s' (pids_peak %llu)",
                      o.res.limits_hit, (unsigned long long)o.res.usage.pids_peak.value);
        run_result_done(&o.res);
        o = run_code(SBX_LANG_PYTHON, "import subprocess\nsubprocess.run(['true'])\n", 20, -1);
        expect_exit0(&o);
        ck_assert_msg(!strstr(o.res.limits_hit, "pids"), "limits hit: '%s'", o.res.limits_hit);
        run_result_done(&o.res);
        test_cfg.pids_max = 64;

        /* the cgroup files of a run in flight */
        pthread_t t;
        struct bg_run b = {.code = "import time\ntime.sleep(4)\n", .timeout_s = 20};
        ck_assert_int_eq(pthread_create(&t, NULL, bg_run_thread, &b), 0);
        char found[512] = "";
        _cleanup_free_ char *pat = xasprintf("%d-", (int)getpid());
        for (int i = 0; i < 300 && !*found; i++) {
                usleep(20000);
                DIR *d = opendir("/sys/fs/cgroup/pids/vestibule");
                struct dirent *de;
                while (d && !*found && (de = readdir(d))) {
                        if (strncmp(de->d_name, pat, strlen(pat)) != 0)
                                continue;
                        _cleanup_free_ char *sub =
                            xasprintf("/sys/fs/cgroup/pids/vestibule/%s", de->d_name);
                        DIR *d2 = opendir(sub);
                        struct dirent *de2;
                        while (d2 && (de2 = readdir(d2)))
                                if (strlen(de2->d_name) == 64)
                                        snprintf(found, sizeof(found), "%s/%s/pids.current", sub,
                                                 de2->d_name);
                        if (d2)
                                closedir(d2);
                }
                if (d)
                        closedir(d);
        }
        ck_assert_msg(*found, "no container cgroup of this process under /vestibule");
        ck_assert(can_read_as(found, 0, 0)); /* it is there */
        ck_assert_msg(!can_read_as(found, 65534, 65534), "'%s' readable by nobody", found);
        /* control: an ordinary cgroup file is readable by nobody */
        ck_assert(can_read_as("/sys/fs/cgroup/memory/memory.usage_in_bytes", 65534, 65534));
        pthread_join(t, NULL);
        expect_exit0(&b.o);
        run_result_done(&b.o.res);
}
END_TEST

/* A socket only root may use, at @path (mode 0600, root-owned). */
static void make_root_socket(const char *path)
{
        make_socket(path);
        ck_assert_int_eq(chown(path, 0, 0), 0);
        ck_assert_int_eq(chmod(path, 0600), 0);
}

static void drop_to_test_user(void)
{
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(TEST_UID, TEST_UID, TEST_UID), 0);
        ck_assert_int_eq(setresuid(TEST_UID, TEST_UID, TEST_UID), 0);
}

/* Not root: the user's own rootless Podman socket comes before the rootful one, also when
 * XDG_RUNTIME_DIR is unset (runuser): /run/user/UID is used when it is the user's. */
START_TEST(resolve_podman_rootless_first_when_not_root)
{
        if (geteuid() != 0)
                sbx_test_skip("needs root to become the test user");
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ struct engine_endpoint *eps = NULL;
        char miss[1000];
        size_t n = 0;
        struct sbx_error err = {0};
        _cleanup_free_ char *xdg = xasprintf("%s/xdg", d);
        _cleanup_free_ char *pod = xasprintf("%s/podman", xdg);
        _cleanup_free_ char *s2 = xasprintf("%s/podman.sock", pod);
        mkdir_p(pod);
        make_socket(s2);
        ck_assert_int_eq(chmod(d, 0755), 0);
        ck_assert_int_eq(chown(s2, TEST_UID, TEST_UID), 0);
        struct stat st;
        bool rootful = stat("/run/podman/podman.sock", &st) == 0 && S_ISSOCK(st.st_mode);

        drop_to_test_user();
        fake_env_reset();
        fake_env_set("XDG_RUNTIME_DIR", xdg);
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_PODMAN, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        ck_assert_uint_ge(n, 1);
        ck_assert_str_eq(eps[0].sock_path, s2);
        if (rootful) {
                ck_assert_uint_eq(n, 2);
                ck_assert_str_eq(eps[1].sock_path, "/run/podman/podman.sock");
        }
        free(TAKE_PTR(eps));

        /* no XDG_RUNTIME_DIR: /run/user/2000 when it exists and is ours */
        fake_env_reset();
        ck_assert_int_eq(engine_endpoints_resolve(SBX_RUNTIME_PODMAN, fake_getenv, &eps, &n, miss,
                                                  sizeof(miss), &err),
                         0);
        bool have_run_user =
            stat("/run/user/2000/podman/podman.sock", &st) == 0 && S_ISSOCK(st.st_mode);
        if (have_run_user) {
                ck_assert_uint_ge(n, 1);
                ck_assert_str_eq(eps[0].sock_path, "/run/user/2000/podman/podman.sock");
        } else {
                ck_assert_ptr_nonnull(strstr(miss, "/run/user/2000/podman/podman.sock"));
        }
}
END_TEST

/* A permission-denied candidate does not end the search: a later working engine wins; when
 * none works the EACCES (docker-group explanation) is what is reported. The working engine is
 * the real Docker, reached through a socket the test user may use, forwarded by root. */
static void forward_forever(int lfd, const char *target)
{
        for (;;) {
                int c = accept(lfd, NULL, NULL);
                if (c < 0)
                        continue;
                if (fork() == 0) {
                        struct sockaddr_un a = {.sun_family = AF_UNIX};
                        int t = socket(AF_UNIX, SOCK_STREAM, 0);
                        snprintf(a.sun_path, sizeof(a.sun_path), "%s", target);
                        if (connect(t, (struct sockaddr *)&a, sizeof(a)) < 0)
                                _exit(1);
                        if (fork() == 0) {
                                char b[8192];
                                ssize_t k;
                                while ((k = read(c, b, sizeof(b))) > 0)
                                        if (write(t, b, (size_t)k) != k)
                                                break;
                                shutdown(t, SHUT_WR);
                                _exit(0);
                        }
                        char b[8192];
                        ssize_t k;
                        while ((k = read(t, b, sizeof(b))) > 0)
                                if (write(c, b, (size_t)k) != k)
                                        break;
                        _exit(0);
                }
                close(c);
        }
}

START_TEST(eacces_candidate_does_not_stop_the_search)
{
        if (geteuid() != 0)
                sbx_test_skip("needs root to become the test user");
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *home = xasprintf("%s/home", d);
        _cleanup_free_ char *xdg = xasprintf("%s/xdg", d);
        _cleanup_free_ char *desk = xasprintf("%s/.docker/run", home);
        _cleanup_free_ char *pod = xasprintf("%s/podman", xdg);
        _cleanup_free_ char *denied = xasprintf("%s/docker.sock", desk);
        _cleanup_free_ char *works = xasprintf("%s/podman.sock", pod);
        mkdir_p(desk);
        mkdir_p(pod);
        ck_assert_int_eq(chmod(d, 0755), 0);
        make_root_socket(denied);

        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", works);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(lfd, 16), 0);
        ck_assert_int_eq(chmod(works, 0666), 0);
        pid_t fw = fork();
        ck_assert_int_ge(fw, 0);
        if (fw == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL); /* ends with the test */
                signal(SIGCHLD, SIG_IGN);
                forward_forever(lfd, "/var/run/docker.sock");
        }
        close(lfd);

        drop_to_test_user();
        fake_env_reset();
        fake_env_set("HOME", home);
        fake_env_set("XDG_RUNTIME_DIR", xdg);
        struct engine_conn c;
        struct sbx_error err = {0};
        /* auto: Docker's candidates are denied (/var/run/docker.sock and Desktop's), then the
         * "rootless Podman" socket works */
        cfg_init(SBX_RUNTIME_AUTO);
        int r = engine_connect(&test_cfg, fake_getenv, &c, &err);
        ck_assert_msg(r == 0, "%d %s", r, err.msg);
        ck_assert_str_eq(c.ep.sock_path, works);

        /* control: without the working socket the permission problem is reported */
        fake_env_set("XDG_RUNTIME_DIR", "/nonexistent-xdg");
        r = engine_connect(&test_cfg, fake_getenv, &c, &err);
        ck_assert_int_eq(r, -EACCES);
        ck_assert_msg(strstr(err.msg, "docker group"), "%s", err.msg);
}
END_TEST

START_TEST(docker_socket_without_permission_blocked)
{
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        struct stat sst;
        ck_assert_int_eq(stat("/var/run/docker.sock", &sst), 0);
        ck_assert_msg((sst.st_mode & 0006) == 0, "docker.sock is world-accessible");
        /* control: root can connect (engine_or_skip did) */
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(TEST_UID, TEST_UID, TEST_UID), 0);
        ck_assert_int_eq(setresuid(TEST_UID, TEST_UID, TEST_UID), 0);
        struct engine_conn c;
        struct sbx_error err = {0};
        test_cfg.run_as_set = false;
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), -EACCES);
        ck_assert_msg(strstr(err.msg, "docker group") && strstr(err.msg, "usermod -aG docker") &&
                          strstr(err.msg, "become root"),
                      "%s", err.msg);
        /* and through the backend: a Blocked: probe, not a crash */
        struct backend_probe p;
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert(!p.usable);
        ck_assert_ptr_nonnull(strstr(p.blocked, "docker group"));
}
END_TEST

START_TEST(unreachable_engine_blocked)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *host = xasprintf("unix://%s/nothing.sock", d);
        struct engine_conn c;
        struct sbx_error err = {0};
        cfg_init(SBX_RUNTIME_DOCKER);
        fake_env_reset();
        fake_env_set("DOCKER_HOST", host);
        ck_assert_int_lt(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        ck_assert_msg(strstr(err.msg, "cannot reach Docker Engine at") &&
                          strstr(err.msg, "nothing.sock") && strstr(err.msg, "DOCKER_HOST"),
                      "%s", err.msg);
        /* a socket that is not an engine: refused connection */
        _cleanup_free_ char *sp = xasprintf("%s/dead.sock", d);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", sp);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        close(fd); /* bound, never listening: ECONNREFUSED */
        _cleanup_free_ char *h2 = xasprintf("unix://%s", sp);
        fake_env_set("DOCKER_HOST", h2);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), -ECONNREFUSED);
        ck_assert_ptr_nonnull(strstr(err.msg, "start it"));
}
END_TEST

START_TEST(podman_rootful_runs)
{
        engine_or_skip(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        struct backend_probe p;
        struct sbx_error err = {0};
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_str_eq(p.grade, "container");
        struct run_out o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "1\n");
        ck_assert_str_eq(o.res.isolation, "container");
        run_result_done(&o.res);
        check_lockdown_probe();
        check_pids_cap();
        check_nothing_left(PODMAN_SOCK);
}
END_TEST

START_TEST(podman_rootful_behaviours)
{
        engine_or_skip(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        check_behaviours();
        check_no_timeout_image(PODMAN_SOCK);
        check_nothing_left(PODMAN_SOCK);
}
END_TEST

/* OOM on rootful Podman: the engine never says OOMKilled, the kernel's log does (hostcg.c).
 * A memory bomb over the cap is reported as out of memory; the controls: the same program
 * under a cap it fits in finishes, and a SIGKILL that is not the OOM killer's (the same exit
 * 137 before the deadline) is not called out of memory, not even "likely". */
START_TEST(podman_rootful_oom_from_kernel)
{
        if (geteuid() != 0)
                sbx_test_skip("reading the kernel log needs root");
        engine_or_skip(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        test_cfg.mem_mb = 128;
        struct run_out o = run_code(SBX_LANG_PYTHON, memhog_py, 20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_msg(o.res.oom_killed, "not reported as OOM: outcome %d exit %d notes '%s'",
                      o.res.outcome, o.res.exit_code, o.res.notes);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_SIGNALED);
        ck_assert_int_eq(o.res.term_signal, SIGKILL);
        ck_assert_ptr_null(strstr(o.res.notes, "likely"));
        ck_assert_uint_eq(o.res.mem_limit_bytes, 128u << 20);
        ck_assert_ptr_null(strstr(o.text, "allocated="));
        run_result_done(&o.res);

        /* issue 12 #9 on Podman: a child OOM-killed while the program exits 0 keeps exit 0,
         * with the OOM said (from the kernel's log) */
        o = run_code(SBX_LANG_PYTHON,
                     "import os\npid = os.fork()\nif pid == 0:\n    b = []\n    while True:\n"
                     "        b.append(bytearray(1 << 20))\n"
                     "_, st = os.waitpid(pid, 0)\nprint('child signal %d' % os.WTERMSIG(st))\n",
                     20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert_str_eq(o.text, "child signal 9\n");
        ck_assert_msg(o.res.outcome == RUN_OUTCOME_EXITED && o.res.exit_code == 0 &&
                          o.res.oom_killed,
                      "child OOM: outcome %d exit %d oom %d", o.res.outcome, o.res.exit_code,
                      o.res.oom_killed);
        run_result_done(&o.res);

        /* control 1: room for it -> it finishes, no OOM */
        test_cfg.mem_mb = 1024;
        o = run_code(SBX_LANG_PYTHON, memhog_py, 30, -1);
        expect_exit0(&o);
        ck_assert(!o.res.oom_killed);
        ck_assert_str_eq(o.text, "allocated=300\n");
        run_result_done(&o.res);

        /* control 2: killed by SIGKILL, but not by the OOM killer: exit 137, no OOM claim */
        test_cfg.mem_mb = 128;
        o = run_code(SBX_LANG_PYTHON, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
                     20, -1);
        ck_assert_msg(o.rc == 0, "%s", o.err.msg);
        ck_assert(!o.res.oom_killed);
        ck_assert_int_eq(o.res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(o.res.exit_code, 137);
        ck_assert_msg(!strstr(o.res.notes, "memory"), "%s", o.res.notes);
        run_result_done(&o.res);
        test_cfg.mem_mb = 256;
        check_no_cgroup_left();
}
END_TEST

/* The CPU cap on rootful Podman (cgroup v1): the kernel's CFS quota of the container's cgroup,
 * read from inside, follows VESTIBULE_CPU_PCT; controls: another setting gives another quota,
 * and the host's own root cgroup has none (-1). A throttling count is not asserted: on a
 * loaded 2-core host the runs may never reach their quota. */
static const char quota_py[] = "d = '/sys/fs/cgroup/cpu/'\n"
                               "print('quota=%s/%s' % (open(d + 'cpu.cfs_quota_us').read().strip(),"
                               " open(d + 'cpu.cfs_period_us').read().strip()))\n";

START_TEST(podman_rootful_cpu_quota)
{
        char a[64];
        engine_or_skip(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        test_cfg.cpu_pct = 75;
        struct run_out o = run_code(SBX_LANG_PYTHON, quota_py, 20, -1);
        expect_exit0(&o);
        ck_assert_str_eq(kv(o.text, "quota", a, sizeof(a)), "75000/100000");
        run_result_done(&o.res);
        test_cfg.cpu_pct = 150;
        o = run_code(SBX_LANG_PYTHON, quota_py, 20, -1);
        expect_exit0(&o);
        ck_assert_str_eq(kv(o.text, "quota", a, sizeof(a)), "150000/100000");
        run_result_done(&o.res);
        FILE *f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fscanf(f, "%63s", a), 1);
        fclose(f);
        ck_assert_str_eq(a, "-1");
}
END_TEST

START_TEST(podman_rootful_usage)
{
        if (geteuid() != 0)
                sbx_test_skip("host cgroup accounting needs a root server");
        engine_or_skip(PODMAN_SOCK, SBX_RUNTIME_PODMAN);
        check_usage_measured(true);
        check_no_cgroup_left();
}
END_TEST

START_TEST(docker_usage)
{
        if (geteuid() != 0)
                sbx_test_skip("host cgroup accounting needs a root server");
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        check_usage_measured(false);
        check_no_cgroup_left();
}
END_TEST

/* The kernel's oom-kill record names the memcg that hit its limit. */
START_TEST(kmsg_oom_record_matching)
{
        const char *id = "a4740b2eb5a64c935618ac5d3aac0d97926508a35e1410e2896e053dc92e071a";
        char rec[1024];
        snprintf(rec, sizeof(rec),
                 "6,6576,12255028015,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),"
                 "cpuset=libpod-%s,mems_allowed=0,oom_memcg=/vestibule/1-2-3/libpod-%s,"
                 "task_memcg=/vestibule/1-2-3/libpod-%s,task=python3,pid=17748,uid=2000\n",
                 id, id, id);
        ck_assert(engine_kmsg_line_is_oom_of(rec, id));
        /* Docker's and systemd's naming */
        snprintf(rec, sizeof(rec),
                 "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg="
                 "/docker/%s,task_memcg=/docker/%s,task=python3",
                 id, id);
        ck_assert(engine_kmsg_line_is_oom_of(rec, id));
        snprintf(rec, sizeof(rec),
                 "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg="
                 "/machine.slice/libpod-%s.scope,task=x",
                 id);
        ck_assert(engine_kmsg_line_is_oom_of(rec, id));
        /* another container, a prefix of the id, the id only in task_memcg (the limit was hit
         * elsewhere), another record kind, no oom_memcg: all no */
        snprintf(rec, sizeof(rec),
                 "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg="
                 "/libpod_parent/libpod-%sff,task=x",
                 id);
        ck_assert(!engine_kmsg_line_is_oom_of(rec, id));
        snprintf(rec, sizeof(rec),
                 "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg="
                 "/libpod_parent,task_memcg=/libpod_parent/libpod-%s,task=x",
                 id);
        ck_assert(!engine_kmsg_line_is_oom_of(rec, id));
        snprintf(rec, sizeof(rec),
                 "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg="
                 "/docker/%.20s,task=x",
                 id);
        ck_assert(!engine_kmsg_line_is_oom_of(rec, id));
        snprintf(rec, sizeof(rec),
                 "3,1,2,-;Memory cgroup out of memory: Killed process 1 "
                 "(python3) oom_memcg=/docker/%s",
                 id);
        ck_assert(!engine_kmsg_line_is_oom_of(rec, id));
        ck_assert(!engine_kmsg_line_is_oom_of("6,1,2,-;oom-kill:constraint=CONSTRAINT_NONE", id));
        ck_assert(!engine_kmsg_line_is_oom_of("no separator", id));
}
END_TEST

struct killer_arg {
        pid_t pid;
        unsigned delay_ms;
};

static void *kill_later(void *p)
{
        struct killer_arg *k = p;
        usleep(k->delay_ms * 1000);
        kill(k->pid, SIGKILL);
        return NULL;
}

/* The engine dies mid-run: a private Podman API service (same storage as the rootful one) is
 * killed while a run streams. The run ends with a clear Blocked:, the process stays up, and
 * the rootful service (the control) still runs code afterwards. */
START_TEST(podman_engine_stopped_mid_run)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        _cleanup_free_ char *sock = xasprintf("%s/p.sock", d);
        _cleanup_free_ char *host = xasprintf("unix://%s", sock);
        struct engine_conn c;
        struct sbx_error err = {0};
        pid_t svc = fork();

        ck_assert_int_ge(svc, 0);
        if (svc == 0) {
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                dup2(fd, 1);
                dup2(fd, 2);
                execlp("podman", "podman", "--cgroup-manager=cgroupfs", "--events-backend=file",
                       "--runtime", "runc", "system", "service", "--time=0", host, (char *)NULL);
                _exit(127);
        }
        cfg_init(SBX_RUNTIME_PODMAN);
        fake_env_reset();
        fake_env_set("CONTAINER_HOST", host);
        bool up = false;
        for (int i = 0; i < 120 && !up; i++) {
                usleep(250000);
                up = engine_connect(&test_cfg, fake_getenv, &c, &err) == 0;
        }
        ck_assert_msg(up, "private podman service did not come up: %s", err.msg);

        struct killer_arg k = {.pid = svc, .delay_ms = 4000};
        pthread_t t;
        pthread_create(&t, NULL, kill_later, &k);
        struct run_out o = run_code(
            SBX_LANG_PYTHON, "import time\nprint('up', flush=True)\ntime.sleep(20)\n", 15, -1);
        pthread_join(t, NULL);
        waitpid(svc, NULL, 0);
        ck_assert_int_lt(o.rc, 0);
        ck_assert_msg(strstr(o.err.msg, "container engine"), "%s", o.err.msg);
        run_result_done(&o.res);
        test_backend = backend_free(test_backend); /* shutdown copes with a dead engine */

        /* control: the rootful service still answers and runs code; clean our leftover */
        fake_env_set("CONTAINER_HOST", PODMAN_SOCK);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        o = run_code(SBX_LANG_PYTHON, "print(1)\n", 10, -1);
        expect_exit0(&o);
        run_result_done(&o.res);
        test_backend = backend_free(test_backend); /* removes everything this process owns */
        check_nothing_left(PODMAN_SOCK);
}
END_TEST

/* Rootless Podman as the test user: limits are not applied on this cgroup v1 host, and the
 * grade must say exactly that. Runs in a child that became the test user. */
/* Four runs at once on rootless Podman (keep-id): Podman 4.3 sometimes answers a create with a
 * transient "keep-id requires additional UIDs or GIDs" 500; the backend retries that, so every
 * run must succeed. Repeated a few rounds to give the race its chance. */
static void *parallel_run(void *p)
{
        struct run_out *o = p;
        *o = run_code(SBX_LANG_PYTHON, "import os\nprint(os.getuid())\n", 20, -1);
        return NULL;
}

START_TEST(podman_rootless_parallel_runs)
{
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(TEST_UID, TEST_UID, TEST_UID), 0);
        ck_assert_int_eq(setresuid(TEST_UID, TEST_UID, TEST_UID), 0);
        engine_or_skip(ROOTLESS_SOCK, SBX_RUNTIME_PODMAN);
        backend_up();
        /* one run first, so the engine probe is done before the four start together */
        struct run_out w = run_code(SBX_LANG_PYTHON, "print(1)\n", 20, -1);
        expect_exit0(&w);
        run_result_done(&w.res);
        for (int round = 0; round < 3; round++) {
                struct run_out o[4];
                pthread_t t[4];
                for (int i = 0; i < 4; i++)
                        ck_assert_int_eq(pthread_create(&t[i], NULL, parallel_run, &o[i]), 0);
                for (int i = 0; i < 4; i++)
                        pthread_join(t[i], NULL);
                for (int i = 0; i < 4; i++) {
                        expect_exit0(&o[i]);
                        ck_assert_str_eq(o[i].text, "2000\n");
                        run_result_done(&o[i].res);
                }
        }
}
END_TEST

/* A proxy in front of the rootless Podman socket: it answers the first *fails_left creates with
 * Podman 4.3's transient keep-id 500 and passes everything else through. The engine client
 * opens one connection per request, so the first request of a connection is the one to look
 * at. Counters live in shared memory (one process per connection). */
struct inject_counters {
        int fails_left;
        int creates; /* create requests seen, injected or passed */
};

static void inject_forever(int lfd, const char *target, struct inject_counters *ctr)
{
        static const char body[] =
            "{\"cause\":\"keep-id requires additional UIDs or GIDs defined in /etc/subuid and "
            "/etc/subgid to function correctly\",\"message\":\"keep-id requires additional UIDs "
            "or GIDs defined in /etc/subuid and /etc/subgid to function correctly: injected by "
            "test_engine\",\"response\":500}";
        for (;;) {
                int c = accept(lfd, NULL, NULL);
                if (c < 0)
                        continue;
                if (fork() != 0) {
                        close(c);
                        continue;
                }
                char head[16384];
                size_t n = 0;
                while (n < sizeof(head) - 1) {
                        ssize_t k = read(c, head + n, sizeof(head) - 1 - n);
                        if (k <= 0)
                                break;
                        n += (size_t)k;
                        head[n] = '\0';
                        if (strstr(head, "\r\n\r\n"))
                                break;
                }
                head[n] = '\0';
                const char *eol = strstr(head, "\r\n");
                bool create = strncmp(head, "POST ", 5) == 0 && eol &&
                              memmem(head, (size_t)(eol - head), "/containers/create", 18);
                if (create) {
                        __atomic_add_fetch(&ctr->creates, 1, __ATOMIC_SEQ_CST);
                        if (__atomic_sub_fetch(&ctr->fails_left, 1, __ATOMIC_SEQ_CST) >= 0) {
                                char resp[1024];
                                int len = snprintf(resp, sizeof(resp),
                                                   "HTTP/1.1 500 Internal Server Error\r\n"
                                                   "Content-Type: application/json\r\n"
                                                   "Content-Length: %zu\r\nConnection: close"
                                                   "\r\n\r\n%s",
                                                   strlen(body), body);
                                if (write(c, resp, (size_t)len) != len)
                                        _exit(1);
                                shutdown(c, SHUT_WR);
                                _exit(0);
                        }
                        __atomic_add_fetch(&ctr->fails_left, 1, __ATOMIC_SEQ_CST);
                }
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                int t = socket(AF_UNIX, SOCK_STREAM, 0);
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", target);
                if (connect(t, (struct sockaddr *)&a, sizeof(a)) < 0 ||
                    write(t, head, n) != (ssize_t)n)
                        _exit(1);
                if (fork() == 0) {
                        char b[8192];
                        ssize_t k;
                        while ((k = read(c, b, sizeof(b))) > 0)
                                if (write(t, b, (size_t)k) != k)
                                        break;
                        shutdown(t, SHUT_WR);
                        _exit(0);
                }
                char b[8192];
                ssize_t k;
                while ((k = read(t, b, sizeof(b))) > 0)
                        if (write(c, b, (size_t)k) != k)
                                break;
                _exit(0);
        }
}

/* keep-id on rootless Podman: files the code writes in the workspace belong to the user (the
 * control, the same container without keep-id, writes them as a subordinate uid); and the
 * backend's retry of Podman's transient keep-id create error, with the error injected by a
 * proxy in front of the real engine: one failure is retried and the run succeeds, more than
 * the retries fail the run with the engine's message after exactly 1 + retries attempts. */
START_TEST(podman_rootless_keep_id)
{
        _cleanup_free_ char *d = sbx_test_tmpdir();
        ck_assert_int_eq(chmod(d, 0777), 0);
        drop_to_test_user();
        engine_or_skip(ROOTLESS_SOCK, SBX_RUNTIME_PODMAN);

        /* 1. keep-id: our uid inside and on the workspace file */
        struct run_out o = run_code(SBX_LANG_PYTHON,
                                    "import os\nopen('/workspace/keepid.txt', 'w').write('x')\n"
                                    "print(os.getuid())\n",
                                    20, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "2000\n");
        run_result_done(&o.res);
        _cleanup_free_ char *kf = xasprintf("%s/keepid.txt", ws_dir);
        struct stat sst;
        ck_assert_int_eq(stat(kf, &sst), 0);
        ck_assert_uint_eq(sst.st_uid, TEST_UID);
        unlink(kf);

        /* control: the same user without keep-id is a subordinate uid on the host */
        struct engine_conn c;
        struct sbx_error err = {0};
        long status = 0;
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);
        _cleanup_free_ char *body =
            xasprintf("{\"Image\":\"%s\",\"User\":\"2000:2000\",\"Cmd\":[\"touch\","
                      "\"/workspace/nokeepid.txt\"],\"Labels\":{\"vestibule.run\":\"1\"},"
                      "\"HostConfig\":{\"NetworkMode\":\"none\",\"Mounts\":[{\"Type\":\"bind\","
                      "\"Source\":\"%s\",\"Target\":\"/workspace\"}]}}",
                      IMG_PY, ws_dir);
        _cleanup_(engine_reply_done) struct engine_reply cj = {0}, sr = {0}, wr = {0}, dr = {0};
        json_object *idj;
        status = sbx_test_engine(&c, "POST", "/containers/create", NULL, body, &cj, &err);
        ck_assert_msg(status == 201 && json_object_object_get_ex(cj.json, "Id", &idj), "%ld %s %s",
                      status, cj.msg, err.msg);
        const char *cid = json_object_get_string(idj);
        status = sbx_test_engine(&c, "POST", "/containers/{}/start", cid, NULL, &sr, &err);
        ck_assert_msg(status == 204, "start %ld %s %s", status, sr.msg, err.msg);
        ck_assert_int_eq(sbx_test_engine(&c, "POST", "/containers/{}/wait", cid, NULL, &wr, &err),
                         200);
        sbx_test_engine(&c, "DELETE", "/containers/{}?force=1", cid, NULL, &dr, &err);
        _cleanup_free_ char *nf = xasprintf("%s/nokeepid.txt", ws_dir);
        ck_assert_int_eq(stat(nf, &sst), 0);
        ck_assert_uint_ne(sst.st_uid, TEST_UID);
        ck_assert_uint_ne(sst.st_uid, 0);
        unlink(nf);
        test_backend = backend_free(test_backend);

        /* 2. the retry, through the injecting proxy */
        struct inject_counters *ctr =
            mmap(NULL, sizeof(*ctr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(ctr, MAP_FAILED);
        _cleanup_free_ char *ps = xasprintf("%s/inject.sock", d);
        _cleanup_free_ char *phost = xasprintf("unix://%s", ps);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", ps);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(lfd, 64), 0);
        pid_t px = fork();
        ck_assert_int_ge(px, 0);
        if (px == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                signal(SIGCHLD, SIG_IGN);
                inject_forever(lfd, rootless_path(), ctr);
        }
        close(lfd);
        fake_env_reset();
        fake_env_set("CONTAINER_HOST", phost);

        ctr->fails_left = 1;
        ctr->creates = 0;
        o = run_code(SBX_LANG_PYTHON, "import os\nprint(os.getuid())\n", 20, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "2000\n");
        ck_assert_int_eq(ctr->fails_left, 0); /* the injected failure was used ... */
        ck_assert_int_eq(ctr->creates, 2);    /* ... and retried once */
        run_result_done(&o.res);

        /* control: more failures than retries -> the run fails, naming the engine's error */
        ctr->fails_left = 10;
        ctr->creates = 0;
        o = run_code(SBX_LANG_PYTHON, "print(1)\n", 20, -1);
        ck_assert_int_lt(o.rc, 0);
        ck_assert_msg(strstr(o.err.msg, "keep-id requires additional UIDs"), "%s", o.err.msg);
        ck_assert_int_eq(ctr->creates, 3); /* 1 + ENGINE_CREATE_RETRIES */
        run_result_done(&o.res);
        test_backend = backend_free(test_backend);
        kill(px, SIGKILL);
        waitpid(px, NULL, 0);
        unlink(ps);
}
END_TEST

START_TEST(podman_rootless_degraded)
{
        ck_assert_int_eq(setgroups(0, NULL), 0);
        ck_assert_int_eq(setresgid(TEST_UID, TEST_UID, TEST_UID), 0);
        ck_assert_int_eq(setresuid(TEST_UID, TEST_UID, TEST_UID), 0);
        engine_or_skip(ROOTLESS_SOCK, SBX_RUNTIME_PODMAN);
        struct backend_probe p;
        struct sbx_error err = {0};
        backend_up();
        ck_assert_int_eq(test_backend->ops->probe(test_backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert(p.degraded);
        ck_assert_str_eq(p.grade, "container-degraded (limits not applied: memory, cpu, pids: "
                                  "rootless Podman on cgroup v1)");
        struct run_out o = run_code(SBX_LANG_PYTHON, "import os\nprint(os.getuid())\n", 10, -1);
        expect_exit0(&o);
        ck_assert_str_eq(o.text, "2000\n"); /* keep-id: our uid inside */
        ck_assert_str_eq(o.res.isolation, p.grade);
        /* rootless on cgroup v1: no cgroup to read usage from, and it says so */
        ck_assert(!o.res.usage.cpu_us.measured && !o.res.usage.mem_peak_bytes.measured &&
                  !o.res.usage.pids_peak.measured);
        ck_assert_msg(strstr(o.res.usage.mem_peak_bytes.why, "rootless"), "%s",
                      o.res.usage.mem_peak_bytes.why);
        run_result_done(&o.res);
        /* the security options still hold */
        char a[64];
        o = run_code(SBX_LANG_PYTHON, probe_py, 20, -1);
        expect_exit0(&o);
        ck_assert_str_eq(kv(o.text, "ifaces", a, sizeof(a)), "lo");
        ck_assert_str_eq(kv(o.text, "capeff", a, sizeof(a)), "0000000000000000");
        ck_assert_str_eq(kv(o.text, "nnp", a, sizeof(a)), "1");
        ck_assert_str_eq(kv(o.text, "rootwrite", a, sizeof(a)), "EROFS");
        run_result_done(&o.res);
        check_nothing_left(ROOTLESS_SOCK);
}
END_TEST

static void teardown(void)
{
        test_backend = backend_free(test_backend);
}

/* Whether an engine answers at @host (as the current user). */
static bool engine_answers(const char *host, enum sbx_runtime_choice rt)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        cfg_init(rt);
        fake_env_reset();
        fake_env_set(rt == SBX_RUNTIME_PODMAN ? "CONTAINER_HOST" : "DOCKER_HOST", host);
        bool ok = engine_connect(&test_cfg, fake_getenv, &c, &err) == 0;
        if (!ok)
                fprintf(stderr, "engine at %s: %s\n", host, err.msg);
        return ok;
}

static char missing[600];

/* ---- the Engine API layer (api.c): request targets and the status check ------------------ */

static char *esc_ok(const char *in, size_t n, bool query)
{
        char *out = NULL;
        struct sbx_error err = {0};
        int r = engine_escape(in, n, query, &out, &err);
        ck_assert_msg(r == 0, "'%s': %d %s", in, r, err.msg);
        return out;
}

static int esc_refused(const char *in, size_t n, bool query)
{
        char *out = NULL;
        struct sbx_error err = {0};
        int r = engine_escape(in, n, query, &out, &err);
        ck_assert_msg(r < 0, "'%.*s' was not refused: '%s'", (int)n, in, out ? out : "");
        ck_assert_ptr_null(out);
        ck_assert_msg(err.msg[0], "refusal without a message");
        return r;
}

/* The unreserved set the escaping and the fuzz target's oracle share, held against RFC 3986
 * §2.3 written out here as a list: every one of the 256 bytes. */
START_TEST(unreserved_is_rfc3986_set)
{
        static const char rfc[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
        unsigned n = 0;

        for (unsigned c = 0; c < 256; c++) {
                bool want = c != 0 && strchr(rfc, (int)c) != NULL;

                ck_assert_msg(engine_unreserved((unsigned char)c) == want, "byte 0x%02x", c);
                n += want;
        }
        ck_assert_uint_eq(n, sizeof(rfc) - 1);
        ck_assert(engine_dot_piece("a/../b", 6) && engine_dot_piece(".", 1));
        ck_assert(!engine_dot_piece("...", 3) && !engine_dot_piece("a.b/c..", 7));
}
END_TEST

START_TEST(escape_path_parts_and_query_values)
{
        static const struct {
                const char *in, *path, *query;
        } ok[] = {
            {"0123abcdefABC-._~", "0123abcdefABC-._~", "0123abcdefABC-._~"},
            {"a/b", "a%2Fb", "a%2Fb"},
            {"id?all=1", "id%3Fall%3D1", "id%3Fall%3D1"},
            {"id#frag", "id%23frag", "id%23frag"},
            {"100%", "100%25", "100%25"},
            {"two words", "two%20words", "two%20words"},
            {"vestibule/python:bookworm", "vestibule%2Fpython%3Abookworm",
             "vestibule%2Fpython%3Abookworm"},
            {"x&force=1", "x%26force%3D1", "x%26force%3D1"},
            {"...", "...", "..."},
            {"..a/b..", "..a%2Fb..", "..a%2Fb.."},
            {"\xc3\xa9\n\x7f", "%C3%A9%0A%7F", "%C3%A9%0A%7F"},
            /* the filter the sweep sends (it was a hand-written literal before) */
            {"{\"label\":[\"vestibule.run=1\"]}",
             "%7B%22label%22%3A%5B%22vestibule.run%3D1%22%5D%7D",
             "%7B%22label%22%3A%5B%22vestibule.run%3D1%22%5D%7D"},
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *p = esc_ok(ok[i].in, strlen(ok[i].in), false);
                _cleanup_free_ char *q = esc_ok(ok[i].in, strlen(ok[i].in), true);
                ck_assert_str_eq(p, ok[i].path);
                ck_assert_str_eq(q, ok[i].query);
        }
        /* a path part the engine would resolve to another endpoint: refused */
        static const char *const dots[] = {"",       ".",   "..",    "../x",           "x/..",
                                           "a/../b", "./a", "a/./b", "../../images/x", "/..",
                                           "../"};
        for (size_t i = 0; i < ELEMENTSOF(dots); i++)
                ck_assert_int_eq(esc_refused(dots[i], strlen(dots[i]), false), -EINVAL);
        /* in a query value a dot is a dot (control: the same bytes pass there) */
        _cleanup_free_ char *qd = esc_ok("../x", 4, true), *qe = esc_ok("", 0, true);
        ck_assert_str_eq(qd, "..%2Fx");
        ck_assert_str_eq(qe, "");
        /* a NUL byte, in either, is refused (no id, name or path holds one) */
        ck_assert_int_eq(esc_refused("abc\0def", 7, false), -EINVAL);
        ck_assert_int_eq(esc_refused("abc\0def", 7, true), -EINVAL);
        ck_assert_int_eq(esc_refused("\0", 1, false), -EINVAL);
        /* too long; control: the longest allowed passes */
        _cleanup_free_ char *big = xmalloc(ENGINE_PART_MAX_BYTES + 2);
        memset(big, 'a', ENGINE_PART_MAX_BYTES + 1);
        big[ENGINE_PART_MAX_BYTES + 1] = '\0';
        ck_assert_int_eq(esc_refused(big, ENGINE_PART_MAX_BYTES + 1, false), -ENAMETOOLONG);
        _cleanup_free_ char *fits = esc_ok(big, ENGINE_PART_MAX_BYTES, false);
        ck_assert_uint_eq(strlen(fits), ENGINE_PART_MAX_BYTES);
}
END_TEST

START_TEST(call_target_escapes_every_part)
{
        struct sbx_error err = {0};
        char *t = NULL;

        struct engine_call inspect = {.path = "/containers/{}/json", .parts = {"abc123"}};
        ck_assert_int_eq(engine_call_target(&inspect, &t, &err), 0);
        ck_assert_str_eq(t, "/containers/abc123/json");
        free(TAKE_PTR(t));

        /* an id that would change the endpoint or add a query: it stays one path part */
        struct engine_call evil = {.path = "/containers/{}/json", .parts = {"x/json?all=1#"}};
        ck_assert_int_eq(engine_call_target(&evil, &t, &err), 0);
        ck_assert_str_eq(t, "/containers/x%2Fjson%3Fall%3D1%23/json");
        free(TAKE_PTR(t));
        struct engine_call up = {.path = "/containers/{}/json", .parts = {"../../images/x"}};
        ck_assert_int_eq(engine_call_target(&up, &t, &err), -EINVAL);
        ck_assert_ptr_null(t);

        struct engine_call arch = {
            .path = "/containers/{}/archive",
            .parts = {"c1"},
            .query = {{"path", "/workspace/a b&c=d?.txt"}, {"skipped", NULL}, {"force", "1"}}};
        ck_assert_int_eq(engine_call_target(&arch, &t, &err), 0);
        ck_assert_str_eq(t, "/containers/c1/archive?path=%2Fworkspace%2Fa%20b%26c%3Dd%3F.txt"
                            "&force=1");
        free(TAKE_PTR(t));

        /* as many parts as holes, or it is a bug of ours, said as such */
        struct engine_call few = {.path = "/a/{}/b/{}", .parts = {"x"}};
        ck_assert_int_eq(engine_call_target(&few, &t, &err), -EINVAL);
        ck_assert_ptr_nonnull(strstr(err.msg, "bug"));
        struct engine_call many = {.path = "/a/{}", .parts = {"x", "y"}};
        ck_assert_int_eq(engine_call_target(&many, &t, &err), -EINVAL);
        ck_assert_ptr_null(t);
}
END_TEST

/* Against the real engine: an id holding '?' stays an id (the engine answers "no such
 * container"), where the same bytes put into the path by hand reach the container list. The
 * status check names the call and the fix; a status the call accepts is no error. */
START_TEST(docker_escaped_id_stays_an_id)
{
        struct engine_conn c;
        struct sbx_error err = {0};
        engine_or_skip(DOCKER_SOCK, SBX_RUNTIME_DOCKER);
        ck_assert_int_eq(engine_connect(&test_cfg, fake_getenv, &c, &err), 0);

        /* control: unescaped, the "id" json?all=1 turns the inspect into a list (HTTP 200) */
        _cleanup_(engine_reply_done) struct engine_reply raw = {0}, rep = {0}, ok404 = {0};
        ck_assert_int_eq(
            sbx_test_engine(&c, "GET", "/containers/json?all=1/json", NULL, NULL, &raw, &err), 200);
        ck_assert(json_object_is_type(raw.json, json_type_array));

        int r = engine_get(&c,
                           &(struct engine_call){.path = "/containers/{}/json",
                                                 .parts = {"json?all=1"},
                                                 .ok = {200},
                                                 .body = ENGINE_BODY_JSON,
                                                 .timeout_ms = 10000,
                                                 .what = "inspect the test container"},
                           &rep, &err);
        ck_assert_int_eq(r, -ENOENT);
        ck_assert_int_eq(rep.status, 404);
        ck_assert_ptr_null(rep.json);
        ck_assert_msg(strstr(err.msg, "cannot inspect the test container") &&
                          strstr(err.msg, "HTTP 404") && strstr(err.msg, "no such"),
                      "%s", err.msg);

        /* 404 listed as fine: 0, the status in the reply */
        r = engine_delete(&c,
                          &(struct engine_call){.path = "/containers/{}",
                                                .parts = {"vestibule-no-such-container"},
                                                .ok = {204, 404},
                                                .timeout_ms = 10000},
                          &ok404, &err);
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(ok404.status, 404);
}
END_TEST

static void note_missing(const char *what)
{
        size_t used = strlen(missing);
        snprintf(missing + used, sizeof(missing) - used, "%s%s", used ? "; " : "", what);
}

static Suite *engine_suite(void)
{
        Suite *s = suite_create("engine");
        TCase *tc;
        bool images = access(TAR_PY, R_OK) == 0 && access(TAR_NODE, R_OK) == 0;
        bool root = geteuid() == 0;

        tc = tcase_create("endpoint");
        tcase_add_test(tc, endpoint_parse_schemes);
        tcase_add_test(tc, context_hash_matches_docker_cli);
        tcase_add_test(tc, resolve_docker_host_wins);
        tcase_add_test(tc, resolve_context_from_config_and_env);
        tcase_add_test(tc, resolve_known_sockets_in_order);
        tcase_add_test(tc, resolve_podman_rootless_first_when_not_root);
        suite_add_tcase(s, tc);

        tc = tcase_create("version");
        tcase_add_test(tc, api_version_table);
        suite_add_tcase(s, tc);

        tc = tcase_create("api");
        tcase_add_test(tc, unreserved_is_rfc3986_set);
        tcase_add_test(tc, escape_path_parts_and_query_values);
        tcase_add_test(tc, call_target_escapes_every_part);
        suite_add_tcase(s, tc);

        tc = tcase_create("demux");
        tcase_add_test(tc, demux_split_frames);
        tcase_add_test(tc, demux_refuses_garbage);
        suite_add_tcase(s, tc);

        tc = tcase_create("body");
        tcase_add_test(tc, create_body_has_every_lockdown_option);
        tcase_add_test(tc, verify_inspect_catches_dropped_options);
        suite_add_tcase(s, tc);

        tc = tcase_create("owner");
        tcase_add_test(tc, owner_label_liveness);
        tcase_add_test(tc, owner_label_other_pid_namespace);
        tcase_add_test(tc, owner_container_id_and_label);
        tcase_add_test(tc, kmsg_oom_record_matching);
        tcase_add_test(tc, unreachable_engine_blocked);
        suite_add_tcase(s, tc);

        if (!images)
                note_missing("no image tarballs in /var/tmp/vestibule-images");
        if (!images) {
        } else if (!engine_answers(DOCKER_SOCK, SBX_RUNTIME_DOCKER)) {
                note_missing("no Docker Engine at /var/run/docker.sock "
                             "(scripts/start-engines.sh)");
        } else {
                tc = tcase_create("docker");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 180);
                tcase_add_test(tc, docker_print1_grade_container);
                tcase_add_test(tc, docker_escaped_id_stays_an_id);
                tcase_add_test(tc, docker_lockdown_from_inside);
                tcase_add_test(tc, docker_memory_cap_oom);
                tcase_add_test(tc, docker_behaviours);
                tcase_add_test(tc, docker_sweep_removes_dead_owners_only);
                tcase_add_test(tc, docker_missing_image_blocked);
                tcase_add_test(tc, docker_usage);
                if (root) {
                        tcase_add_test(tc, docker_socket_without_permission_blocked);
                        tcase_add_test(tc, eacces_candidate_does_not_stop_the_search);
                } else
                        note_missing("socket permission test needs root");
                suite_add_tcase(s, tc);
                /* issue 12's findings, in a TCase of their own (CK_RUN_CASE=docker_hard) */
                tc = tcase_create("docker_hard");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 180);
                tcase_add_test(tc, docker_output_cannot_forge_refusal);
                tcase_add_test(tc, docker_outcomes_not_forged_by_exit_status);
                tcase_add_test(tc, docker_code_dir_private);
                tcase_add_test(tc, docker_killed_server_swept_at_next_start);
                tcase_add_test(tc, docker_no_server_pid_in_cgroup_view);
                tcase_add_test(tc, docker_pids_cap_reported_and_cgroup_private);
                suite_add_tcase(s, tc);
        }
        if (!images) {
        } else if (!engine_answers(PODMAN_SOCK, SBX_RUNTIME_PODMAN)) {
                note_missing("no rootful Podman at /run/podman/podman.sock");
        } else {
                tc = tcase_create("podman");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 240);
                tcase_add_test(tc, podman_rootful_runs);
                tcase_add_test(tc, podman_rootful_behaviours);
                tcase_add_test(tc, podman_rootful_oom_from_kernel);
                tcase_add_test(tc, podman_rootful_usage);
                tcase_add_test(tc, podman_rootful_cpu_quota);
                if (root)
                        tcase_add_test(tc, podman_engine_stopped_mid_run);
                suite_add_tcase(s, tc);
        }
        if (images && root && access(rootless_path(), F_OK) == 0) {
                tc = tcase_create("podman_rootless");
                tcase_add_checked_fixture(tc, NULL, teardown);
                tcase_set_timeout(tc, 240);
                tcase_add_test(tc, podman_rootless_degraded);
                tcase_add_test(tc, podman_rootless_parallel_runs);
                tcase_add_test(tc, podman_rootless_keep_id);
                suite_add_tcase(s, tc);
        } else if (images) {
                note_missing("no rootless Podman for the test user (needs root + "
                             "scripts/start-engines.sh)");
        }
        return s;
}

int main(void)
{
        int rc;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (getenv("SBX_TEST_DEBUG"))
                sbx_log_set_level(SBX_LOG_DEBUG);
        rc = sbx_test_run(engine_suite());
        /* What ran must pass; what could not run is a skip (a failure under MUST_RUN). */
        if (rc == 0 && *missing)
                sbx_test_skip(missing);
        return rc;
}
