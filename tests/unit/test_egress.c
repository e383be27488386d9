/* test_egress.c - the egress allowlist: the settings' parser and name matcher, the address
 * classifier, the proxy's request parser, the record folding, and one run's proxy for real
 * (a process on a loopback listener, an upstream on 127.0.0.1 reached through a pin): allowed,
 * refused, and refused once the proxy is killed (fail closed). */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "egress/egress-internal.h"
#include "egress/egress.h"
#include "run/run.h"
#include "testutil.h"

/* A config from @env (name, value pairs ending in NULL), as config_load() reads the process's. */
static int sbx_test_config_with(const char *const env[][2], struct sbx_config **ret,
                                struct sbx_error *err)
{
        fake_env_reset();
        fake_env_set("HOME", "/tmp");
        for (size_t i = 0; env[i][0]; i++)
                fake_env_set(env[i][0], env[i][1]);
        return config_load_from(fake_getenv, NULL, ret, err);
}

/* The pid of this process's child named EGRESS_PROC_NAME, or -1. */
static pid_t proxy_child(void)
{
        DIR *d = opendir("/proc");
        struct dirent *e;
        pid_t found = -1;

        while (d && found < 0 && (e = readdir(d))) {
                char path[300], st[256], comm[32];
                int pid, ppid;
                FILE *f;
                bool ok;

                if (e->d_name[0] < '1' || e->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                ok = fgets(st, sizeof(st), f) != NULL;
                fclose(f);
                if (!ok)
                        continue;
                if (sscanf(st, "%d (%31[^)]) %*c %d", &pid, comm, &ppid) == 3 &&
                    ppid == (int)getpid() && strcmp(comm, EGRESS_PROC_NAME) == 0)
                        found = pid;
        }
        if (d)
                closedir(d);
        return found;
}

static bool is_zombie(pid_t pid)
{
        char path[64], st[256] = "";
        const char *p;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (!fgets(st, sizeof(st), f))
                st[0] = '\0';
        fclose(f);
        p = strrchr(st, ')');
        return p && p[1] == ' ' && p[2] == 'Z';
}

static struct sbx_egress parse_ok(const char *allow, const char *ports, const char *pin)
{
        struct sbx_egress e = {0};
        struct sbx_error err = {0};

        ck_assert_msg(config_egress_parse(allow, ports, pin, &e, &err) == 0, "%s", err.msg);
        return e;
}

static void parse_bad(const char *allow, const char *ports, const char *pin, const char *names)
{
        struct sbx_egress e = {0};
        struct sbx_error err = {0};

        ck_assert_int_eq(config_egress_parse(allow, ports, pin, &e, &err), -EINVAL);
        ck_assert_msg(strstr(err.msg, names), "'%s' not named in: %s", names, err.msg);
        config_egress_done(&e);
}

START_TEST(allow_exact_and_suffix)
{
        struct sbx_egress e =
            parse_ok("pypi.org, .pythonhosted.org  Registry.NPMJS.org.", NULL, NULL);

        ck_assert(config_egress_allows(&e, "pypi.org"));
        ck_assert(!config_egress_allows(&e, "www.pypi.org")); /* exact means exact */
        ck_assert(!config_egress_allows(&e, "evilpypi.org"));
        ck_assert(config_egress_allows(&e, "files.pythonhosted.org"));
        ck_assert(config_egress_allows(&e, "pythonhosted.org"));      /* the suffix's own name */
        ck_assert(!config_egress_allows(&e, "evilpythonhosted.org")); /* a label boundary */
        ck_assert(!config_egress_allows(&e, "pythonhosted.org.evil.com"));
        ck_assert(config_egress_allows(&e, "registry.npmjs.org")); /* lower-cased, dot dropped */
        ck_assert_uint_eq(e.n_ports, 2);
        ck_assert_uint_eq(e.ports[0], 443);
        ck_assert_uint_eq(e.ports[1], 80);
        config_egress_done(&e);

        /* control: empty means nothing at all */
        e = parse_ok(NULL, NULL, NULL);
        ck_assert(!config_egress_allows(&e, "pypi.org"));
        config_egress_done(&e);
}
END_TEST

START_TEST(settings_refused_with_their_names)
{
        parse_bad("*.example.com", NULL, NULL, "'.example.com'");
        parse_bad("exa mple..com", NULL, NULL, "VESTIBULE_EGRESS_ALLOW");
        parse_bad("a_b.com", NULL, NULL, "VESTIBULE_EGRESS_ALLOW");
        parse_bad("a.com", "443,http", NULL, "VESTIBULE_EGRESS_PORTS");
        parse_bad("a.com", "0", NULL, "VESTIBULE_EGRESS_PORTS");
        parse_bad("a.com", "65536", NULL, "VESTIBULE_EGRESS_PORTS");
        parse_bad("a.com", NULL, "a.com=localhost:80", "numeric IP");
        parse_bad("a.com", NULL, "b.com=127.0.0.1:80", "not in VESTIBULE_EGRESS_ALLOW");
        parse_bad("a.com", NULL, "a.com=127.0.0.1:99999", "VESTIBULE_EGRESS_PIN");
        parse_bad("a.com", NULL, "a.com", "host=address:port");

        struct sbx_egress e = parse_ok("a.com,.b.com", "8080", "a.com=[::1]:3141,x.b.com=10.0.0.2");
        ck_assert_uint_eq(e.n_pins, 2);
        ck_assert_str_eq(config_egress_pin(&e, "a.com")->addr, "::1");
        ck_assert_uint_eq(config_egress_pin(&e, "a.com")->port, 3141);
        ck_assert_uint_eq(config_egress_pin(&e, "x.b.com")->port, 0);
        ck_assert_ptr_null(config_egress_pin(&e, "b.com"));
        config_egress_done(&e);
}
END_TEST

START_TEST(invalid_setting_blocks_via_config)
{
        static const char *const env[][2] = {{"VESTIBULE_EGRESS_PORTS", "443,x"}, {NULL, NULL}};
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        ck_assert_int_eq(sbx_test_config_with(env, &c, &err), 0);
        ck_assert(c->invalid);
        ck_assert_msg(strstr(c->invalid_msg, "VESTIBULE_EGRESS_PORTS"), "%s", c->invalid_msg);
        config_free(c);
        ck_assert(config_is_setting("VESTIBULE_EGRESS_ALLOW"));
        ck_assert(config_is_setting("VESTIBULE_EGRESS_PIN"));
}
END_TEST

static const char *cls4(const char *a)
{
        struct sockaddr_in in = {.sin_family = AF_INET};
        ck_assert_int_eq(inet_pton(AF_INET, a, &in.sin_addr), 1);
        return egress_addr_class((struct sockaddr *)&in);
}

static const char *cls6(const char *a)
{
        struct sockaddr_in6 in = {.sin6_family = AF_INET6};
        ck_assert_int_eq(inet_pton(AF_INET6, a, &in.sin6_addr), 1);
        return egress_addr_class((struct sockaddr *)&in);
}

START_TEST(address_classes)
{
        ck_assert_str_eq(cls4("127.0.0.1"), "loopback");
        ck_assert_str_eq(cls4("127.255.0.9"), "loopback");
        ck_assert_str_eq(cls4("10.1.2.3"), "private");
        ck_assert_str_eq(cls4("172.16.0.1"), "private");
        ck_assert_str_eq(cls4("172.31.255.255"), "private");
        ck_assert_str_eq(cls4("192.168.1.1"), "private");
        ck_assert_str_eq(cls4("169.254.169.254"), "cloud metadata");
        ck_assert_str_eq(cls4("169.254.1.1"), "link-local");
        ck_assert_str_eq(cls4("100.64.0.1"), "shared (CGNAT)");
        ck_assert_str_eq(cls4("0.0.0.0"), "unspecified");
        ck_assert_str_eq(cls4("224.0.0.1"), "multicast");
        ck_assert_str_eq(cls4("255.255.255.255"), "reserved");
        ck_assert_str_eq(cls6("::1"), "loopback");
        ck_assert_str_eq(cls6("::"), "unspecified");
        ck_assert_str_eq(cls6("fd00:ec2::254"), "cloud metadata");
        ck_assert_str_eq(cls6("fd12::1"), "private");
        ck_assert_str_eq(cls6("fe80::1"), "link-local");
        ck_assert_str_eq(cls6("ff02::1"), "multicast");
        ck_assert_str_eq(cls6("::ffff:127.0.0.1"), "loopback");
        ck_assert_str_eq(cls6("::ffff:169.254.169.254"), "cloud metadata");
        ck_assert_str_eq(cls6("64:ff9b::a9fe:a9fe"), "cloud metadata");
        /* controls: public addresses pass, next to the blocks' edges */
        ck_assert_ptr_null(cls4("93.184.216.34"));
        ck_assert_ptr_null(cls4("172.32.0.1"));
        ck_assert_ptr_null(cls4("11.0.0.1"));
        ck_assert_ptr_null(cls4("100.128.0.1"));
        ck_assert_ptr_null(cls6("2606:4700::1111"));
        ck_assert_ptr_null(cls6("::ffff:8.8.8.8"));
}
END_TEST

static int parse(const char *s, struct egress_request *r)
{
        memset(r, 0, sizeof(*r));
        return egress_parse_request(s, strlen(s), r);
}

START_TEST(request_parser)
{
        struct egress_request r;

        ck_assert_int_eq(parse("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: x\r\n\r\n", &r), 1);
        ck_assert(r.connect);
        ck_assert_str_eq(r.host, "pypi.org");
        ck_assert_uint_eq(r.port, 443);
        ck_assert(!r.host_is_ip);
        ck_assert_int_eq(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_str_eq(r.host, "::1");
        ck_assert(r.host_is_ip);
        ck_assert_int_eq(parse("GET http://a.example/x?y HTTP/1.1\n\n", &r), 1);
        ck_assert(!r.connect);
        ck_assert_uint_eq(r.port, 80);
        ck_assert_uint_eq(r.target_len, 4);
        ck_assert_int_eq(parse("GET http://a.example:8080 HTTP/1.0\r\n\r\n", &r), 1);
        ck_assert_uint_eq(r.port, 8080);
        ck_assert_uint_eq(r.target_len, 0);
        /* numbers that getaddrinfo would read as addresses are literals, not names */
        ck_assert_int_eq(parse("CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert(r.host_is_ip);
        ck_assert_int_eq(parse("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert(r.host_is_ip);
        /* incomplete, malformed, other schemes, too long */
        ck_assert_int_eq(parse("CONNECT a.example:443 HTTP/1.1\r\n", &r), 0);
        ck_assert_int_eq(parse("CONNECT a.example HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("CONNECT a.example:0 HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("CONNECT a.example:65536 HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("CONNECT user@a.example:443 HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("GET /local HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("GET https://a.example/ HTTP/1.1\r\n\r\n", &r), -EPROTONOSUPPORT);
        ck_assert_int_eq(parse("GET http://a..example/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("GET http://a.example/ HTTP/2.0\r\n\r\n", &r), -EINVAL);
        ck_assert_int_eq(parse("GET http://a\x01.example/ HTTP/1.1\r\n\r\n", &r), -EINVAL);
        {
                _cleanup_free_ char *big = xmalloc(EGRESS_MAX_HEAD_BYTES + 1);
                memset(big, 'A', EGRESS_MAX_HEAD_BYTES);
                big[EGRESS_MAX_HEAD_BYTES] = '\0';
                ck_assert_int_eq(parse(big, &r), -E2BIG);
        }
}
END_TEST

START_TEST(decide)
{
        struct sbx_egress e = parse_ok("a.example,.b.example,10.0.0.1", "443", NULL);
        struct egress_request r;

        ck_assert_int_eq(parse("CONNECT a.example:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r), EGRESS_WHY_OK);
        ck_assert_int_eq(parse("CONNECT a.example:80 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r), EGRESS_WHY_PORT);
        ck_assert_int_eq(parse("CONNECT c.example:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r), EGRESS_WHY_NOT_ALLOWED);
        ck_assert_int_eq(parse("CONNECT x.b.example:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r), EGRESS_WHY_OK);
        ck_assert_int_eq(parse("CONNECT 10.0.0.2:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r), EGRESS_WHY_LITERAL);
        ck_assert_int_eq(parse("CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n", &r), 1);
        ck_assert_int_eq(egress_decide_name(&e, &r),
                         EGRESS_WHY_OK); /* named: resolving judges it */
        ck_assert_str_eq(egress_reason_text(EGRESS_WHY_NOT_ALLOWED),
                         "not in VESTIBULE_EGRESS_ALLOW");
        config_egress_done(&e);
}
END_TEST

START_TEST(records_fold)
{
        static const char rec[] = "D 1 1 80 0 a.example\n"
                                  "D 2 1 80 0 a.example\n"
                                  "D 3 0 443 1 evil.example\n"
                                  "C 1 10 100\n"
                                  "C 2 5 50\n"
                                  "garbage line\n"
                                  "D 4 0 443 99 bad.reason\n"
                                  "D 5 1 80 0 torn";
        struct run_egress g = {0};

        egress_records_parse(rec, sizeof(rec) - 1, &g);
        ck_assert_uint_eq(g.n_entries, 2);
        ck_assert_str_eq(g.entries[0].host, "a.example");
        ck_assert_uint_eq(g.entries[0].connections, 2);
        ck_assert_uint_eq(g.entries[0].bytes_up, 15);
        ck_assert_uint_eq(g.entries[0].bytes_down, 150);
        ck_assert(!g.entries[1].allowed);
        ck_assert_str_eq(g.entries[1].reason, "not in VESTIBULE_EGRESS_ALLOW");
        free(g.entries);
}
END_TEST

/* ---- one real proxy ---------------------------------------------------------------------- */

static int listen_loopback(uint16_t *ret_port)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t al = sizeof(a);
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_ge(s, 0);
        ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(s, 16), 0);
        ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &al), 0);
        *ret_port = ntohs(a.sin_port);
        return s;
}

/* The upstream: answers every connection with "pong" and closes. */
static void *upstream_main(void *arg)
{
        int ls = *(int *)arg;
        for (;;) {
                int c = accept(ls, NULL, NULL);
                if (c < 0)
                        return NULL;
                if (write(c, "pong", 4) != 4) {
                        /* the client went away */
                }
                close(c);
        }
}

/* Connect to the proxy, send @req, read the answer into @buf. Return bytes read or -errno. */
static ssize_t ask(uint16_t port, const char *req, char *buf, size_t size)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        _cleanup_close_ int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        size_t n = 0;

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
                return -errno;
        if (write(s, req, strlen(req)) < 0)
                return -errno;
        for (;;) {
                struct pollfd p = {.fd = s, .events = POLLIN};
                ssize_t r;
                if (poll(&p, 1, 5000) <= 0)
                        break;
                r = read(s, buf + n, size - 1 - n);
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        buf[n] = '\0';
        return (ssize_t)n;
}

START_TEST(proxy_allows_refuses_and_fails_closed)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};
        struct egress_session *s = NULL;
        struct run_egress g = {0};
        uint16_t up_port, px_port;
        int up_ls = listen_loopback(&up_port), px_ls = listen_loopback(&px_port);
        pthread_t t;
        char pin[64], buf[2048];

        pthread_create(&t, NULL, upstream_main, &up_ls);
        snprintf(pin, sizeof(pin), "mirror.test=127.0.0.1:%u", up_port);
        const char *const env[][2] = {{"VESTIBULE_EGRESS_ALLOW", "mirror.test,localhost"},
                                      {"VESTIBULE_EGRESS_PIN", pin},
                                      {NULL, NULL}};
        ck_assert_int_eq(sbx_test_config_with(env, &c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_msg(egress_session_start(c, px_ls, &s, &err) == 0, "%s", err.msg);

        ck_assert_int_gt(ask(px_port, "CONNECT mirror.test:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
                         0);
        ck_assert_msg(strstr(buf, "200 Connection established") && strstr(buf, "pong"), "%s", buf);
        ck_assert_int_gt(ask(px_port, "CONNECT other.test:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
                         0);
        ck_assert_msg(strstr(buf, "403") &&
                          strstr(buf, "other.test:443: not in VESTIBULE_EGRESS_ALLOW"),
                      "%s", buf);
        ck_assert_int_gt(ask(px_port, "CONNECT localhost:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
                         0);
        ck_assert_msg(strstr(buf, "resolves to a private address"), "%s", buf);

        /* kill the proxy: the listener dies with it, so the next client is refused */
        {
                pid_t px = proxy_child();
                ck_assert_int_gt(px, 0);
                ck_assert_int_eq(kill(px, SIGKILL), 0);
                /* a zombie has closed its fds: the listener is gone */
                for (int i = 0; i < 100 && !is_zombie(px); i++)
                        usleep(50 * 1000);
                ck_assert(is_zombie(px));
        }
        ck_assert_int_eq(ask(px_port, "CONNECT mirror.test:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
                         -ECONNREFUSED);
        egress_session_finish(s, &g);
        ck_assert(g.on);
        ck_assert_msg(strstr(g.note, "killed by signal 9"), "%s", g.note);
        ck_assert_uint_eq(g.n_entries, 3);
        ck_assert(g.entries[0].allowed);
        ck_assert_uint_eq(g.entries[0].bytes_down, 4);
        ck_assert_str_eq(g.entries[1].reason, "not in VESTIBULE_EGRESS_ALLOW");
        ck_assert_str_eq(g.entries[2].reason, "resolves to a private address");
        free(g.entries);
        config_free(c);
}
END_TEST

START_TEST(proxy_that_cannot_start_blocks)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};
        struct egress_session *s = NULL;
        static const char *const env[][2] = {{"VESTIBULE_EGRESS_ALLOW", "a.test"}, {NULL, NULL}};
        int not_listening = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_eq(sbx_test_config_with(env, &c, &err), 0);
        ck_assert_int_lt(egress_session_start(c, not_listening, &s, &err), 0);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(err.msg, "egress proxy could not start"), "%s", err.msg);
        config_free(c);
}
END_TEST

/* One header line ending in a bare LF (no NUL: copied by its size). */
static const char bare_lf_line[3] = {'a', ':', '\n'};

/* Adversarial (tests/adversarial/server.md): a head of bare-LF header lines. Each line grows
 * by one byte on the way upstream ("\n" -> "\r\n"); the old buffer (head + 64 bytes)
 * overflowed on the heap once enough of them came (the fuzz stage found it). The Debug
 * (ASan) run of this suite aborts on any write past the buffer; both runs check every byte. */
START_TEST(upstream_head_of_bare_lf_lines_stays_in_bounds)
{
        /* 2,600 lines of "a:\n" fill most of EGRESS_MAX_HEAD_BYTES (8 KiB) */
        enum { LINES = 2600 };
        size_t cap = 64 + (size_t)LINES * 3 + 2, n = 0, out_len = 0;
        _cleanup_free_ char *head = xmalloc(cap);
        struct egress_request r = {0};

        n += (size_t)snprintf(head, cap, "GET http://mirror.test/x HTTP/1.1\n");
        for (int i = 0; i < LINES; i++) {
                memcpy(head + n, bare_lf_line, sizeof(bare_lf_line));
                n += sizeof(bare_lf_line);
        }
        head[n++] = '\n';
        ck_assert_int_le(n, EGRESS_MAX_HEAD_BYTES);
        ck_assert_int_eq(egress_parse_request(head, n, &r), 1);
        ck_assert_uint_eq(r.head_len, n);

        _cleanup_free_ char *out = egress_upstream_head(head, &r, &out_len);
        static const char first[] = "GET /x HTTP/1.1\r\n", last[] = "Connection: close\r\n\r\n";
        ck_assert_uint_eq(out_len, strlen(first) + (size_t)LINES * 4 + strlen(last));
        ck_assert(memcmp(out, first, strlen(first)) == 0);
        for (size_t i = 0; i < LINES; i++)
                ck_assert(memcmp(out + strlen(first) + i * 4, "a:\r\n", 4) == 0);
        ck_assert(memcmp(out + out_len - strlen(last), last, strlen(last)) == 0);
}
END_TEST

/* The same head through the real proxy process: it forwards and relays the answer, and lives
 * on for the next client (before the fix, an ASan build of the proxy died on it). */
START_TEST(proxy_survives_a_head_of_bare_lf_lines)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};
        struct egress_session *s = NULL;
        struct run_egress g = {0};
        uint16_t up_port, px_port;
        int up_ls = listen_loopback(&up_port), px_ls = listen_loopback(&px_port);
        pthread_t t;
        char pin[64], buf[2048];
        size_t cap = 8192, n = 0;
        _cleanup_free_ char *req = xmalloc(cap);

        pthread_create(&t, NULL, upstream_main, &up_ls);
        snprintf(pin, sizeof(pin), "mirror.test=127.0.0.1:%u", up_port);
        const char *const env[][2] = {{"VESTIBULE_EGRESS_ALLOW", "mirror.test"},
                                      {"VESTIBULE_EGRESS_PORTS", "80,443"},
                                      {"VESTIBULE_EGRESS_PIN", pin},
                                      {NULL, NULL}};
        ck_assert_int_eq(sbx_test_config_with(env, &c, &err), 0);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        ck_assert_msg(egress_session_start(c, px_ls, &s, &err) == 0, "%s", err.msg);

        n += (size_t)snprintf(req, cap, "GET http://mirror.test/x HTTP/1.1\n");
        while (n + 4 < cap - 64) {
                memcpy(req + n, bare_lf_line, sizeof(bare_lf_line));
                n += sizeof(bare_lf_line);
        }
        req[n++] = '\n';
        req[n] = '\0';
        ck_assert_int_gt(ask(px_port, req, buf, sizeof(buf)), 0);
        ck_assert_msg(strstr(buf, "pong"), "%s", buf);
        /* control: the proxy still answers, and refuses what it must */
        ck_assert_int_gt(ask(px_port, "CONNECT other.test:443 HTTP/1.1\r\n\r\n", buf, sizeof(buf)),
                         0);
        ck_assert_msg(strstr(buf, "403"), "%s", buf);
        egress_session_finish(s, &g);
        ck_assert_msg(!strstr(g.note, "signal"), "%s", g.note);
        ck_assert_uint_eq(g.n_entries, 2);
        ck_assert(g.entries[0].allowed);
        free(g.entries);
        config_free(c);
}
END_TEST

static Suite *egress_suite(void)
{
        Suite *s = suite_create("egress");
        TCase *tc = tcase_create("settings");
        tcase_add_test(tc, allow_exact_and_suffix);
        tcase_add_test(tc, settings_refused_with_their_names);
        tcase_add_test(tc, invalid_setting_blocks_via_config);
        suite_add_tcase(s, tc);
        tc = tcase_create("classify");
        tcase_add_test(tc, address_classes);
        tcase_add_test(tc, request_parser);
        tcase_add_test(tc, upstream_head_of_bare_lf_lines_stays_in_bounds);
        tcase_add_test(tc, decide);
        tcase_add_test(tc, records_fold);
        suite_add_tcase(s, tc);
        tc = tcase_create("proxy");
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, proxy_allows_refuses_and_fails_closed);
        tcase_add_test(tc, proxy_that_cannot_start_blocks);
        tcase_add_test(tc, proxy_survives_a_head_of_bare_lf_lines);
        suite_add_tcase(s, tc);
        return s;
}

int main(int argc, char **argv)
{
        /* the session execs /proc/self/exe egress-proxy: this binary plays the server's part */
        if (argc > 1 && strcmp(argv[1], "egress-proxy") == 0)
                return egress_proxy_main(argc - 1, argv + 1);
        return sbx_test_run(egress_suite());
}
