/* test_lazy.c - the on-first-use library loading (src/lazy) and SHA-256 (lazy/sha256):
 * the loader's error paths, every table resolving on this machine, SHA-256 against the
 * FIPS 180-4 vectors through libcrypto, and the real server: which libraries a fresh
 * `vestibule-mcp` maps after initialize + tools/list, with controls where they must appear. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"
#include "lazy/archive.h"
#include "lazy/crypto.h"
#include "lazy/curl.h"
#include "lazy/lazy.h"
#include "lazy/sdbus.h"
#include "lazy/yaml.h"
#include "testutil.h"

/* ---- SHA-256 ---------------------------------------------------------------------------- */

START_TEST(sha256_fips_vectors)
{
        /* FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf"), through
         * lazy/sha256.h, which loads libcrypto on first use. */
        static const struct {
                const char *in;
                const char *hex;
        } v[] = {
            {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
            {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
            {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        };
        struct sbx_error err = {0};
        char out[65];

        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                ck_assert_int_eq(sbx_sha256_hex(v[i].in, strlen(v[i].in), out, &err), 0);
                ck_assert_str_eq(out, v[i].hex);
        }
        /* NULL with length 0 is the empty input */
        ck_assert_int_eq(sbx_sha256_hex(NULL, 0, out, &err), 0);
        ck_assert_str_eq(out, v[0].hex);
        /* control: a one-bit change changes the digest */
        ck_assert_int_eq(sbx_sha256_hex("abd", 3, out, &err), 0);
        ck_assert_str_ne(out, v[1].hex);
}
END_TEST

/* ---- the loader ------------------------------------------------------------------------- */

START_TEST(loader_missing_library_names_the_package)
{
        struct lazy_state st =
            LAZY_STATE_INIT("libvestibule-no-such-lib.so.9", "libvestibule-nope9", "a test");
        struct sbx_error err = {0};

        ck_assert_ptr_null(lazy_open(&st));
        ck_assert_int_eq(st.code, ENOENT);
        ck_assert_int_eq(lazy_result(&st, &err), -ENOENT);
        ck_assert_int_eq(err.code, ENOENT);
        ck_assert_msg(strstr(err.msg, "libvestibule-nope9 is not installed") &&
                          strstr(err.msg, "apt-get install libvestibule-nope9") &&
                          strstr(err.msg, "libvestibule-no-such-lib.so.9") &&
                          strstr(err.msg, "a test needs"),
                      "%s", err.msg);
        ck_assert_int_eq(lazy_result(&st, NULL), -ENOENT); /* NULL err is fine */
}
END_TEST

START_TEST(loader_missing_symbol_names_it)
{
        struct lazy_state st = LAZY_STATE_INIT("libc.so.6", "libc6", "a test");
        struct sbx_error err = {0};
        void *h = lazy_open(&st);

        ck_assert_ptr_nonnull(h); /* control: the library itself loads */
        ck_assert_ptr_nonnull(lazy_sym(&st, h, "getpid"));
        ck_assert_int_eq(lazy_result(&st, &err), 0);
        ck_assert_ptr_null(lazy_sym(&st, h, "vestibule_no_such_function"));
        ck_assert_int_eq(lazy_result(&st, &err), -ENOSYS);
        ck_assert_msg(strstr(err.msg, "'vestibule_no_such_function'") && strstr(err.msg, "libc6"),
                      "%s", err.msg);
        /* the first failure is kept */
        ck_assert_ptr_null(lazy_sym(&st, h, "another_missing_one"));
        ck_assert_ptr_nonnull(strstr(st.msg, "vestibule_no_such_function"));
}
END_TEST

START_TEST(loader_require_aborts_on_failure)
{
        struct lazy_state st = LAZY_STATE_INIT("libvestibule-no-such-lib.so.9", "x", "a test");

        ck_assert_ptr_null(lazy_open(&st));
        lazy_require(&st); /* raises SIGABRT */
}
END_TEST

START_TEST(loader_require_returns_when_loaded)
{
        struct lazy_state st = LAZY_STATE_INIT("libc.so.6", "libc6", "a test");

        ck_assert_ptr_nonnull(lazy_open(&st));
        lazy_require(&st);
}
END_TEST

static void check_table(const void *tbl, const char *const *names, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                void (*f)(void);
                memcpy(&f, (const char *)tbl + i * sizeof(f), sizeof(f));
                ck_assert_msg(f != NULL, "%s is unresolved", names[i]);
        }
}

/* Every table on this machine: not mapped before its load (nothing links it), every entry
 * resolved after, a real call works, and the library is mapped. */
START_TEST(tables_load_on_first_use)
{
        struct sbx_error err = {0};

        ck_assert_int_eq(lazy_is_loaded("libc.so.6"), 1); /* control: the probe sees libc */
        ck_assert_int_eq(lazy_is_loaded("libyaml-0.so.2"), 0);
        ck_assert_int_eq(lazy_is_loaded("libarchive.so.13"), 0);
        ck_assert_int_eq(lazy_is_loaded("libsystemd.so.0"), 0);
        ck_assert_int_eq(lazy_sdbus_loaded(), 0);

        ck_assert_msg(lazy_yaml_load(&err) == 0, "%s", err.msg);
        ck_assert_msg(lazy_archive_load(&err) == 0, "%s", err.msg);
        ck_assert_msg(lazy_curl_load(&err) == 0, "%s", err.msg);
        ck_assert_msg(lazy_crypto_load(&err) == 0, "%s", err.msg);
        ck_assert_msg(lazy_sdbus_load(&err) == 0, "%s", err.msg);
        ck_assert_int_eq(lazy_sdbus_loaded(), 1);
        ck_assert_int_eq(lazy_is_loaded("libyaml-0.so.2"), 1);
        ck_assert_int_eq(lazy_is_loaded("libarchive.so.13"), 1);
        ck_assert_int_eq(lazy_is_loaded("libcurl.so.4"), 1);
        ck_assert_int_eq(lazy_is_loaded("libcrypto.so.3"), 1);
        ck_assert_int_eq(lazy_is_loaded("libsystemd.so.0"), 1);

        /* Every entry resolved. The names are stringified (#n: not renamed by the headers'
         * macros); the tables hold function pointers only, in the order of the lists. */
#define NAME_(n) #n,
/* NOLINTNEXTLINE(bugprone-macro-parentheses): a term of a sum, 0 LIST(ONE_) */
#define ONE_(n) +1
#define CHECK_TABLE_(tbl, LIST)                                                                    \
        do {                                                                                       \
                static const char *const names[] = {LIST(NAME_)};                                  \
                ck_assert_uint_eq(sizeof(*tbl()), (0 LIST(ONE_)) * sizeof(void (*)(void)));        \
                check_table(tbl(), names, 0 LIST(ONE_));                                           \
        } while (0)
        CHECK_TABLE_(lazy_yaml, LAZY_YAML_SYMBOLS);
        CHECK_TABLE_(lazy_archive, LAZY_ARCHIVE_SYMBOLS);
        CHECK_TABLE_(lazy_curl, LAZY_CURL_SYMBOLS);
        CHECK_TABLE_(lazy_crypto, LAZY_CRYPTO_SYMBOLS);
        CHECK_TABLE_(lazy_sdbus, LAZY_SDBUS_SYMBOLS);

        /* real calls through the tables */
        {
                yaml_parser_t p;
                yaml_document_t d;
                const char *text = "a: 1\n";
                ck_assert(yaml_parser_initialize(&p));
                yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
                ck_assert(yaml_parser_load(&p, &d));
                ck_assert_ptr_nonnull(yaml_document_get_root_node(&d));
                /* cppcheck-suppress internalAstError */
                ck_assert_int_eq(yaml_document_get_root_node(&d)->type, YAML_MAPPING_NODE);
                yaml_document_delete(&d);
                yaml_parser_delete(&p);
        }
        {
                char *e = curl_easy_escape(NULL, "a b", 0);
                ck_assert_str_eq(e, "a%20b");
                curl_free(e);
        }
        {
                /* a real call into libsystemd: whatever the bus says, never the -ELIBACC of a
                 * library that did not load */
                _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
                int r = lazy_sd_bus_open_address("unix:path=/nonexistent/bus", &bus);
                ck_assert_int_ne(r, -ELIBACC);
                ck_assert(r < 0 || bus != NULL);
        }
        {
                struct archive *a = archive_read_new();
                ck_assert_ptr_nonnull(a);
                ck_assert_int_eq(archive_read_free(a), ARCHIVE_OK);
        }
}
END_TEST

/* sd-bus's cleanup helpers never need libsystemd for the empty objects a failed open leaves. */
START_TEST(sdbus_cleanups_without_the_library)
{
        ck_assert_int_eq(lazy_sdbus_loaded(), 0);
        {
                _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                (void)bus, (void)e, (void)m;
        }
        ck_assert_int_eq(lazy_sdbus_loaded(), 0);
        ck_assert_int_eq(lazy_is_loaded("libsystemd.so.0"), 0);
}
END_TEST

/* ---- the real server -------------------------------------------------------------------- */

struct server {
        pid_t pid;
        FILE *in;  /* its stdin */
        FILE *out; /* its stdout */
        char *dir;
};

/* Start VESTIBULE_BIN with a clean environment plus @extra ("K=V", NULL-terminated). */
static void server_start(struct server *s, const char *const *extra)
{
        int to[2], from[2];
        char *env[32];
        size_t n = 0;

        s->dir = sbx_test_tmpdir();
        ck_assert_int_eq(chmod(s->dir, 0755), 0);
        /* @extra first: getenv() takes the first of two equal names */
        for (size_t i = 0; extra && extra[i]; i++)
                env[n++] = xstrdup(extra[i]);
        env[n++] = xstrdup("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
        env[n++] = xasprintf("HOME=%s", s->dir);
        env[n++] = xasprintf("XDG_CONFIG_HOME=%s/xdg", s->dir);
        env[n++] = xasprintf("VESTIBULE_WORKSPACE=%s/ws", s->dir);
        env[n++] = xasprintf("VESTIBULE_AUDIT_DIR=%s/audit", s->dir);
        env[n++] = xstrdup("VESTIBULE_LOG_LEVEL=error");
        env[n++] = xstrdup("ASAN_OPTIONS=detect_leaks=0");
        env[n] = NULL;
        ck_assert_int_eq(pipe2(to, O_CLOEXEC), 0);
        ck_assert_int_eq(pipe2(from, O_CLOEXEC), 0);
        s->pid = fork();
        ck_assert_int_ge(s->pid, 0);
        if (s->pid == 0) {
                dup2(to[0], 0);
                dup2(from[1], 1);
                execle(VESTIBULE_BIN, VESTIBULE_BIN, (char *)NULL, env);
                _exit(127);
        }
        for (size_t i = 0; i < n; i++)
                free(env[i]);
        close(to[0]);
        close(from[1]);
        s->in = fdopen(to[1], "w");
        s->out = fdopen(from[0], "r");
        ck_assert(s->in && s->out);
}

/* Send one request; return the response line with "id":@id (caller frees). */
static char *server_call(struct server *s, int id, const char *method, const char *params)
{
        char *line = NULL, *want = xasprintf("\"id\":%d", id);
        size_t cap = 0;

        fprintf(s->in, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":%s}\n", id,
                method, params);
        fflush(s->in);
        while (getline(&line, &cap, s->out) > 0) {
                if (strstr(line, want)) {
                        free(want);
                        return line;
                }
        }
        ck_abort_msg("the server closed stdout before answering %s", method);
        return NULL;
}

static void server_init(struct server *s)
{
        _cleanup_free_ char *a = NULL, *b = NULL;

        a = server_call(s, 1, "initialize",
                        "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                        "\"clientInfo\":{\"name\":\"test_lazy\",\"version\":\"1\"}}");
        ck_assert_msg(strstr(a, "\"result\""), "%s", a);
        fputs("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n", s->in);
        fflush(s->in);
        b = server_call(s, 2, "tools/list", "{}");
        ck_assert_msg(strstr(b, "run_code"), "%s", b);
}

static void server_stop(struct server *s)
{
        int status;

        fclose(s->in);
        ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
        fclose(s->out);
        free(s->dir);
}

/* Whether /proc/PID/maps of @s has a mapping whose path contains @what. */
static bool maps_has(const struct server *s, const char *what)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/maps", (int)s->pid);
        _cleanup_(fclosep) FILE *f = fopen(path, "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &cap, f) > 0)
                if (strstr(line, what))
                        return true;
        return false;
}

static long status_kib(const struct server *s, const char *key)
{
        _cleanup_free_ char *path = xasprintf("/proc/%d/status", (int)s->pid);
        _cleanup_(fclosep) FILE *f = fopen(path, "re");
        _cleanup_free_ char *line = NULL;
        size_t cap = 0, kl = strlen(key);

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &cap, f) > 0)
                if (strncmp(line, key, kl) == 0 && line[kl] == ':')
                        return strtol(line + kl + 1, NULL, 10);
        return -1;
}

static const char *const lazy_libs[] = {"libcurl.so", "libarchive.so", "libyaml-0.so",
                                        "libsystemd.so", "libcrypto.so"};

START_TEST(server_idle_maps_none_of_them)
{
        static const char *const env[] = {"VESTIBULE_BACKEND=native",
                                          "VESTIBULE_ROOTFS_DIR=/nonexistent-rootfs", NULL};
        struct server s;

        server_start(&s, env);
        server_init(&s);
        ck_assert(maps_has(&s, "libc.so.6"));    /* control: the probe reads real maps */
        ck_assert(maps_has(&s, "libjson-c.so")); /* control: a linked library shows */
        for (size_t i = 0; i < sizeof(lazy_libs) / sizeof(lazy_libs[0]); i++)
                ck_assert_msg(!maps_has(&s, lazy_libs[i]), "%s is mapped in an idle server",
                              lazy_libs[i]);
#ifndef __SANITIZE_ADDRESS__
        /* Release: a generous bound (the target, 4 MiB, is the bench's to report); ASan's
         * shadow memory makes any bound meaningless in Debug. */
        {
                long rss = status_kib(&s, "VmRSS");
                ck_assert_msg(rss > 0 && rss < 8L * 1024, "idle VmRSS %ld KiB", rss);
        }
#else
        ck_assert_int_gt(status_kib(&s, "VmRSS"), 0);
#endif
        server_stop(&s);
}
END_TEST

/* control: a container server loads libcurl (against a socket that is not there): with
 * VESTIBULE_BACKEND=container its start-up sweep of dead servers' containers (issue 12 #17,
 * engine_sweep_at_start) already does, in the background; after a container call it is mapped
 * in any case. */
START_TEST(server_container_call_maps_libcurl)
{
        _cleanup_free_ char *dh = NULL, *r = NULL;
        const char *env[6] = {"VESTIBULE_BACKEND=container", NULL};
        struct server s;
        size_t n = 1;

        if (geteuid() == 0)
                env[n++] = "VESTIBULE_RUN_AS=2000:2000";
        dh = xasprintf("DOCKER_HOST=unix:///nonexistent-vestibule-%d.sock", (int)getpid());
        env[n++] = dh;
        env[n] = NULL;
        server_start(&s, env);
        server_init(&s);
        r = server_call(&s, 3, "tools/call",
                        "{\"name\":\"run_code\",\"arguments\":{\"language\":\"python\","
                        "\"code\":\"print(1)\"}}");
        ck_assert_msg(strstr(r, "\"isError\":true") && strstr(r, "nonexistent-vestibule"), "%s", r);
        ck_assert_msg(maps_has(&s, "libcurl.so"), "libcurl is not mapped after a container call");
        ck_assert(!maps_has(&s, "libarchive.so"));
        ck_assert(!maps_has(&s, "libyaml-0.so"));
        server_stop(&s);
}
END_TEST

/* control: a config file loads libyaml; a broken libyaml is an error naming the package. */
START_TEST(server_config_file_maps_libyaml)
{
        static const char *const env[] = {"VESTIBULE_BACKEND=native", NULL};
        struct server s;
        _cleanup_free_ char *cfgdir = NULL, *cfg = NULL;
        FILE *f;

        server_start(&s, env);
        server_init(&s);
        ck_assert(!maps_has(&s, "libyaml-0.so"));
        server_stop(&s);

        /* same environment, with a config file now */
        {
                struct server t;
                _cleanup_free_ char *xdg = NULL;
                const char *env2[3] = {"VESTIBULE_BACKEND=native", NULL, NULL};
                char *base = sbx_test_tmpdir();

                cfgdir = xasprintf("%s/vestibule", base);
                ck_assert_int_eq(mkdir(cfgdir, 0755), 0);
                cfg = xasprintf("%s/config.yaml", cfgdir);
                f = fopen(cfg, "we");
                ck_assert_ptr_nonnull(f);
                fputs("log_level: error\n", f);
                fclose(f);
                xdg = xasprintf("XDG_CONFIG_HOME=%s", base);
                env2[1] = xdg;
                server_start(&t, env2);
                server_init(&t);
                ck_assert_msg(maps_has(&t, "libyaml-0.so"), "a config file did not load libyaml");
                ck_assert(!maps_has(&t, "libcurl.so"));
                server_stop(&t);
                free(base);
        }
}
END_TEST

START_TEST(server_broken_libyaml_is_a_clear_error)
{
        struct server s;
        _cleanup_free_ char *base = sbx_test_tmpdir();
        _cleanup_free_ char *libdir = xasprintf("%s/lib", base);
        _cleanup_free_ char *lib = xasprintf("%s/libyaml-0.so.2", libdir);
        _cleanup_free_ char *cfgdir = xasprintf("%s/vestibule", base);
        _cleanup_free_ char *cfg = xasprintf("%s/config.yaml", cfgdir);
        _cleanup_free_ char *xdg = xasprintf("XDG_CONFIG_HOME=%s", base);
        _cleanup_free_ char *llp = xasprintf("LD_LIBRARY_PATH=%s", libdir);
        _cleanup_free_ char *r = NULL;
        const char *env[] = {"VESTIBULE_BACKEND=native", xdg, llp, NULL};
        FILE *f;

        /* a file that is not a library where the dynamic linker looks first */
        ck_assert_int_eq(mkdir(libdir, 0755), 0);
        ck_assert_int_eq(mkdir(cfgdir, 0755), 0);
        f = fopen(lib, "we");
        ck_assert_ptr_nonnull(f);
        fputs("not an ELF file\n", f);
        fclose(f);
        f = fopen(cfg, "we");
        ck_assert_ptr_nonnull(f);
        fputs("log_level: error\n", f);
        fclose(f);
        server_start(&s, env);
        server_init(&s);
        r = server_call(&s, 3, "tools/call",
                        "{\"name\":\"run_code\",\"arguments\":{\"language\":\"python\","
                        "\"code\":\"print(1)\"}}");
        ck_assert_msg(strstr(r, "\"isError\":true") && strstr(r, "libyaml-0-2 is not installed") &&
                          strstr(r, "apt-get install libyaml-0-2"),
                      "%s", r);
        server_stop(&s);
}
END_TEST

static Suite *lazy_suite(void)
{
        Suite *s = suite_create("lazy");
        TCase *tc;

        tc = tcase_create("sha256");
        tcase_add_test(tc, sha256_fips_vectors);
        suite_add_tcase(s, tc);

        tc = tcase_create("loader");
        tcase_add_test(tc, loader_missing_library_names_the_package);
        tcase_add_test(tc, loader_missing_symbol_names_it);
        tcase_add_test_raise_signal(tc, loader_require_aborts_on_failure, SIGABRT);
        tcase_add_test(tc, loader_require_returns_when_loaded);
        tcase_add_test(tc, tables_load_on_first_use);
        tcase_add_test(tc, sdbus_cleanups_without_the_library);
        suite_add_tcase(s, tc);

        tc = tcase_create("server");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, server_idle_maps_none_of_them);
        tcase_add_test(tc, server_container_call_maps_libcurl);
        tcase_add_test(tc, server_config_file_maps_libyaml);
        tcase_add_test(tc, server_broken_libyaml_is_a_clear_error);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(lazy_suite());
}
