/* test_setup_engine.c - the engine half of `vestibule-mcp setup`: which name a rootfs tarball is
 * imported under (and that the container backend runs the same name), importing it into a real
 * engine (then finding it present), no engine answering, and the MCP config lines. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lazy/curl.h"

#include "common/cleanup.h"
#include "lazy/sha256.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "config/pins.h"
#include "engine/engine.h"
#include "setup/pins.h"
#include "setup/setup.h"
#include "setup/setup_run.h"
#include "testutil.h"

#define TAR_PY "/var/tmp/vestibule-images/python.tar"

static struct sbx_config *load_cfg(void)
{
        struct sbx_config *c = NULL;
        struct sbx_error err = {0};

        if (!fake_getenv("HOME"))
                fake_env_set("HOME", getenv("HOME")); /* the one real variable it reads */
        ck_assert_msg(config_load_from(fake_getenv, NULL, &c, &err) == 0, "%s", err.msg);
        ck_assert_msg(!c->invalid, "%s", c->invalid_msg);
        return c;
}

/* ---- the name: setup and the backend agree ----------------------------------------------- */

START_TEST(image_for_follows_image_source)
{
        struct sbx_config *c;

        c = load_cfg();
        ck_assert_str_eq(engine_image_for(c, "python"), SBX_PIN_IMAGE_PYTHON);
        ck_assert_str_eq(engine_image_for(c, "node"), SBX_PIN_IMAGE_NODE);
        config_free(c);

        fake_env_set("VESTIBULE_IMAGE_SOURCE", "debian");
        c = load_cfg();
        ck_assert_str_eq(engine_image_for(c, "python"), "vestibule/python:bookworm");
        ck_assert_str_eq(engine_image_for(c, "bash"), "vestibule/python:bookworm");
        ck_assert_str_eq(engine_image_for(c, "node"), "vestibule/node:bookworm");
        config_free(c);

        /* An explicit name wins over the source. */
        fake_env_set("VESTIBULE_IMAGE_PYTHON", "example.org/mine:1");
        c = load_cfg();
        ck_assert_str_eq(engine_image_for(c, "python"), "example.org/mine:1");
        ck_assert_str_eq(engine_image_for(c, "node"), "vestibule/node:bookworm");
        config_free(c);
}
END_TEST

START_TEST(debian_names_match_pins)
{
        struct setup_pins p = {0};
        struct sbx_error err = {0};

        ck_assert_msg(setup_pins_load(&p, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(p.python_debian, ENGINE_DEBIAN_IMAGE_PYTHON);
        ck_assert_str_eq(p.node_debian, ENGINE_DEBIAN_IMAGE_NODE);
        setup_pins_done(&p);
}
END_TEST

static void remove_tmp(const char *tmp)
{
        const char *slash = strrchr(tmp, '/');
        _cleanup_free_ char *parent = xstrndup(tmp, (size_t)(slash - tmp));
        _cleanup_close_ int fd = open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd >= 0)
                (void)setup_remove_tree(fd, slash + 1);
}

/* ---- a real engine ------------------------------------------------------------------------ */

static char *run_capture(const struct setup_run_args *a0, int *ret_r, struct sbx_error *err)
{
        struct setup_run_args a = *a0;
        char *buf = NULL;
        size_t len = 0;

        a.out = open_memstream(&buf, &len);
        ck_assert_ptr_nonnull(a.out);
        *ret_r = setup_run(&a, err);
        fclose(a.out);
        fprintf(stderr, "%s", buf);
        return buf;
}

static void image_delete(const struct sbx_config *c, const char *ref)
{
        struct engine_conn conn;
        _cleanup_(engine_reply_done) struct engine_reply resp = {0};
        struct sbx_error err = {0};

        if (engine_connect(c, engine_env_getenv, &conn, &err) < 0)
                return;
        (void)sbx_test_engine(&conn, "DELETE", "/images/{}?force=1", ref, NULL, &resp, &err);
}

START_TEST(from_tar_imports_into_engine_then_present)
{
        _cleanup_free_ char *tmp = sbx_test_tmpdir();
        _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", tmp);
        _cleanup_free_ char *ref = xasprintf("vestibule/setup-test-python:p%d", (int)getpid());
        _cleanup_free_ char *out1 = NULL, *out2 = NULL, *want_rootfs = NULL, *want_img = NULL;
        struct sbx_config *c;
        struct engine_conn conn;
        struct sbx_error err = {0};
        char sha[65], label[80];
        int r = -1;

        if (access(TAR_PY, R_OK) != 0)
                sbx_test_skip(TAR_PY " is missing (images/build.sh -o /var/tmp/vestibule-images)");
        fake_env_set("VESTIBULE_IMAGE_PYTHON", ref);
        c = load_cfg();
        if (engine_connect(c, engine_env_getenv, &conn, &err) < 0)
                sbx_test_skip("no container engine answers");
        image_delete(c, ref);

        struct setup_run_args a = {.rootfs_dir = rootfs,
                                   .from_tar = TAR_PY,
                                   .language = "python",
                                   .cfg = c,
                                   .exe = "/opt/v/vestibule-mcp"};
        out1 = run_capture(&a, &r, &err);
        ck_assert_msg(r == 0, "setup failed: %s", err.msg);
        want_img = xasprintf("setup: python image imported in the container engine as '%s'", ref);
        ck_assert_msg(strstr(out1, want_img), "no import line in:\n%s", out1);

        /* The engine really holds it, carrying the tarball's sha256. */
        ck_assert(sbx_sha256_file(TAR_PY, NULL, sha, &err) == 0);
        ck_assert_msg(
            engine_image_label(&conn, ref, "vestibule.tar-sha256", label, sizeof(label), &err) == 0,
            "%s", err.msg);
        ck_assert_str_eq(label, sha);

        /* The MCP config names the settings that differ from the defaults. */
        want_rootfs = xasprintf("'VESTIBULE_ROOTFS_DIR=%s'", rootfs);
        ck_assert_msg(strstr(out1, "claude mcp add vestibule"), "%s", out1);
        ck_assert_msg(strstr(out1, want_rootfs), "%s", out1);
        ck_assert_msg(strstr(out1, "-- '/opt/v/vestibule-mcp'"), "%s", out1);
        ck_assert_msg(strstr(out1, "\"VESTIBULE_IMAGE_PYTHON\": \"vestibule/setup-test-python"),
                      "%s", out1);
        ck_assert_msg(strstr(out1, "\"command\": \"/opt/v/vestibule-mcp\""), "%s", out1);
        ck_assert_msg(strstr(out1, "VESTIBULE_IMAGE_SOURCE=debian"), "%s", out1);

        /* Second run: nothing to import. */
        out2 = run_capture(&a, &r, &err);
        ck_assert_msg(r == 0, "second setup failed: %s", err.msg);
        free(want_img);
        want_img =
            xasprintf("setup: python image already present in the container engine as '%s'", ref);
        ck_assert_msg(strstr(out2, want_img), "no already-present line in:\n%s", out2);
        ck_assert_msg(strstr(out2, "python rootfs already installed"), "%s", out2);

        image_delete(c, ref);
        config_free(c);
        remove_tmp(tmp);
}
END_TEST

START_TEST(from_tar_without_engine_says_so_and_installs)
{
        _cleanup_free_ char *tmp = sbx_test_tmpdir();
        _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", tmp);
        _cleanup_free_ char *out = NULL, *py = NULL;
        struct sbx_config *c;
        struct sbx_error err = {0};
        int r = -1;

        if (access(TAR_PY, R_OK) != 0)
                sbx_test_skip(TAR_PY " is missing (images/build.sh -o /var/tmp/vestibule-images)");
        /* through the config, as the server reads DOCKER_HOST (struct sbx_engine_env) */
        fake_env_set("DOCKER_HOST", "unix:///nonexistent/docker.sock");
        c = load_cfg();
        struct setup_run_args a = {
            .rootfs_dir = rootfs, .from_tar = TAR_PY, .language = "python", .cfg = c};
        out = run_capture(&a, &r, &err);
        ck_assert_msg(r == 0, "setup failed: %s", err.msg);
        ck_assert_msg(strstr(out, "setup: no container engine answers, python not imported"), "%s",
                      out);
        ck_assert_msg(strstr(out, "/nonexistent/docker.sock"), "the line names no endpoint:\n%s",
                      out);
        py = xasprintf("%s/python/usr/bin/python3", rootfs);
        ck_assert_msg(access(py, X_OK) == 0, "native rootfs not installed");
        config_free(c);
        remove_tmp(tmp);
}
END_TEST

/* ---- registry mode: pull by digest through the engine from a loopback docker-registry ----- */

#define REGISTRY_BIN "/usr/bin/docker-registry"

static size_t collect(char *d, size_t size, size_t n, void *ud)
{
        FILE *f = ud;
        return fwrite(d, size, n, f);
}

/* POST @path with X-Registry-Auth {} and return the body. */
/* noinline: GCC otherwise takes the open_memstream buffer for a dangling local. */
__attribute__((noinline)) static char *engine_post_auth(const struct engine_conn *c,
                                                        const char *path, long *ret_status)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct curl_slist *h = curl_slist_append(NULL, "X-Registry-Auth: e30=");
        CURL *e = engine_easy_new(c, path, true);

        curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
        ck_assert_int_eq(curl_easy_perform(e), CURLE_OK);
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, ret_status);
        curl_easy_cleanup(e);
        curl_slist_free_all(h);
        fclose(f);
        return buf;
}

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

static pid_t start_registry(const char *dir, int port)
{
        _cleanup_free_ char *conf = xasprintf("%s/registry.yml", dir);
        _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/v2/", port);
        FILE *f = fopen(conf, "w");
        pid_t pid;
        int i;

        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                "    rootdirectory: %s/reg\nhttp:\n  addr: 127.0.0.1:%d\n",
                dir, port);
        fclose(f);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execl(REGISTRY_BIN, REGISTRY_BIN, "serve", conf, (char *)NULL);
                _exit(127);
        }
        for (i = 0; i < 100; i++) {
                CURL *e = curl_easy_init();
                long st = 0;
                curl_easy_setopt(e, CURLOPT_URL, url);
                curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
                if (curl_easy_perform(e) == CURLE_OK)
                        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &st);
                curl_easy_cleanup(e);
                if (st == 200)
                        break;
                usleep(100 * 1000);
        }
        ck_assert_msg(i < 100, "docker-registry did not start on 127.0.0.1:%d", port);
        return pid;
}

/* The "sha256:..." of the {"aux":{"Digest":..}} line of a push answer. */
static char *push_digest(const char *body)
{
        const char *d = strstr(body, "\"Digest\":\"sha256:");

        ck_assert_msg(d, "no digest in the push answer: %s", body);
        return xstrndup(d + 10, 71);
}

START_TEST(registry_mode_pulls_into_engine_by_digest)
{
        _cleanup_free_ char *tmp = sbx_test_tmpdir();
        _cleanup_free_ char *tar = xasprintf("%s/tiny.tar", tmp), *cmd = NULL, *name = NULL;
        _cleanup_free_ char *tagged = NULL, *push = NULL, *body = NULL, *digest = NULL;
        _cleanup_free_ char *ref = NULL, *out = NULL, *out2 = NULL, *bad = NULL;
        struct sbx_config *c;
        struct engine_conn conn;
        struct sbx_error err = {0};
        struct setup_run_state st = {0};
        char sha[65];
        long status = 0;
        pid_t reg;
        int port, r;

        if (access(REGISTRY_BIN, X_OK) != 0)
                sbx_test_skip(REGISTRY_BIN " is missing: apt-get install docker-registry");
        c = load_cfg();
        if (engine_connect(c, engine_env_getenv, &conn, &err) < 0)
                sbx_test_skip("no container engine answers");
        port = free_port();
        reg = start_registry(tmp, port);

        /* A tiny image, tagged for the loopback registry, pushed through the Engine API. */
        cmd = xasprintf("mkdir -p %s/t/etc && echo tiny > %s/t/etc/tiny && "
                        "tar -C %s/t -cf %s etc",
                        tmp, tmp, tmp, tar);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert(sbx_sha256_file(tar, NULL, sha, &err) == 0);
        name = xasprintf("127.0.0.1:%d/vestibule/tiny", port);
        tagged = xasprintf("%s:t%d", name, (int)getpid());
        ck_assert_msg(engine_image_import(&conn, tar, tagged, sha, &err) == 0, "%s", err.msg);
        push = xasprintf("/images/%s/push?tag=t%d", name, (int)getpid());
        body = engine_post_auth(&conn, push, &status);
        ck_assert_msg(status == 200 && !strstr(body, "\"error"), "push failed: %s", body);
        digest = push_digest(body);
        ref = xasprintf("%s@%s", name, digest);
        image_delete(c, tagged);
        image_delete(c, ref);

        struct setup_run_args a = {.rootfs_dir = tmp, .cfg = c, .state = &st, .progress = stderr};
        {
                size_t len = 0;
                a.out = open_memstream(&out, &len);
                r = setup_engine_pull(&a, "python", ref, &err);
                fclose(a.out);
        }
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(strstr(out, "python image pulled in the container engine"), "%s", out);
        ck_assert(st.engine_pulled);
        /* The engine now has it by that digest. */
        {
                char label[80] = "";
                ck_assert_msg(engine_image_label(&conn, ref, "vestibule.tar-sha256", label,
                                                 sizeof(label), &err) == 0,
                              "%s", err.msg);
                ck_assert_str_eq(label, sha);
        }
        {
                size_t len = 0;
                a.out = open_memstream(&out2, &len);
                r = setup_engine_pull(&a, "python", ref, &err);
                fclose(a.out);
        }
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(strstr(out2, "python image already present"), "%s", out2);

        /* Control: a digest the registry lacks fails, naming it. */
        bad = xasprintf("%s@sha256:%064d", name, 0);
        {
                char *o = NULL;
                size_t len = 0;
                a.out = open_memstream(&o, &len);
                r = setup_engine_pull(&a, "python", bad, &err);
                fclose(a.out);
                free(o);
        }
        ck_assert_int_lt(r, 0);
        ck_assert_msg(strstr(err.msg, "sha256:0000"), "%s", err.msg);
        /* A tag is never pulled. */
        ck_assert_int_eq(engine_image_pull(&conn, tagged, NULL, false, &err), -EINVAL);

        image_delete(c, ref);
        kill(reg, SIGTERM);
        waitpid(reg, NULL, 0);
        config_free(c);
        remove_tmp(tmp);
}
END_TEST

/* ---- the native registry path on the recipe-built images, pushed through the Engine API --- */

#define TAR_NODE "/var/tmp/vestibule-images/node.tar"

/* Start the real CLI with @argv and exactly @envp, output into @log; return its pid. */
static pid_t cli_start(char *const argv[], char *const envp[], const char *log)
{
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

                if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
                        _exit(127);
                execve(VESTIBULE_BIN, argv, envp);
                _exit(127);
        }
        return pid;
}

static char *read_text(const char *path)
{
        FILE *f = fopen(path, "r");
        char *buf = NULL;
        size_t cap = 0, len = 0, n;

        ck_assert_ptr_nonnull(f);
        do {
                if (len + 4096 + 1 > cap) {
                        cap = (len + 4096 + 1) * 2;
                        buf = xrealloc(buf, cap);
                }
                n = fread(buf + len, 1, 4096, f);
                len += n;
        } while (n > 0);
        fclose(f);
        buf[len] = '\0';
        return buf;
}

static int cli_wait(pid_t pid)
{
        int status;

        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Is there a .python.partial-* tree under @dir holding usr/lib (the unpack is under way)? */
static bool unpacking(const char *dir)
{
        DIR *d = opendir(dir);
        bool yes = false;

        if (!d)
                return false;
        for (struct dirent *de; !yes && (de = readdir(d));) {
                _cleanup_free_ char *p = NULL;

                if (strncmp(de->d_name, ".python.partial-", 16) != 0)
                        continue;
                p = xasprintf("%s/%s/usr/lib", dir, de->d_name);
                yes = access(p, F_OK) == 0;
        }
        closedir(d);
        return yes;
}

static int count_new_pull_dirs(time_t since)
{
        DIR *d = opendir("/var/tmp");
        int n = 0;

        ck_assert_ptr_nonnull(d);
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *p = NULL;
                struct stat st;

                if (strncmp(de->d_name, "vestibule-pull-", 15) != 0)
                        continue;
                p = xasprintf("/var/tmp/%s", de->d_name);
                if (stat(p, &st) == 0 && st.st_ctime >= since)
                        n++;
        }
        closedir(d);
        return n;
}

/* Import @tar into the engine as @name:@tag, push it to the loopback registry; return
 * name@<manifest digest>. */
static char *import_and_push(struct engine_conn *conn, const struct sbx_config *c, const char *tar,
                             const char *name, const char *tag)
{
        _cleanup_free_ char *tagged = xasprintf("%s:%s", name, tag);
        _cleanup_free_ char *push = xasprintf("/images/%s/push?tag=%s", name, tag);
        _cleanup_free_ char *body = NULL, *digest = NULL;
        struct sbx_error err = {0};
        char sha[65];
        long status = 0;

        ck_assert(sbx_sha256_file(tar, NULL, sha, &err) == 0);
        ck_assert_msg(engine_image_import(conn, tar, tagged, sha, &err) == 0, "%s", err.msg);
        body = engine_post_auth(conn, push, &status);
        ck_assert_msg(status == 200 && !strstr(body, "\"error"), "push failed: %s", body);
        digest = push_digest(body);
        image_delete(c, tagged);
        return xasprintf("%s@%s", name, digest);
}

START_TEST(registry_native_pull_of_recipe_images_pushed_through_engine)
{
        _cleanup_free_ char *tmp = sbx_test_tmpdir();
        _cleanup_free_ char *rootfs = xasprintf("%s/rootfs", tmp);
        _cleanup_free_ char *log = xasprintf("%s/cli.log", tmp);
        _cleanup_free_ char *py = NULL, *node = NULL, *tag = xasprintf("t%d", (int)getpid());
        _cleanup_free_ char *e_py = NULL, *e_node = NULL, *e_root = NULL, *e_home = NULL;
        _cleanup_free_ char *e_dh = NULL, *e_ws = NULL, *name_py = NULL, *name_node = NULL;
        _cleanup_free_ char *text = NULL, *id = NULL;
        struct sbx_config *c;
        struct engine_conn conn;
        struct sbx_error err = {0};
        time_t t0 = time(NULL);
        int port, i, rc;
        pid_t reg, pid;

        if (access(REGISTRY_BIN, X_OK) != 0)
                sbx_test_skip(REGISTRY_BIN " is missing: apt-get install docker-registry");
        if (access(TAR_PY, R_OK) != 0 || access(TAR_NODE, R_OK) != 0)
                sbx_test_skip(TAR_PY " and node.tar are missing (vestibule-mcp setup --from-debian "
                                     "--save-tars /var/tmp/vestibule-images)");
        c = load_cfg();
        if (engine_connect(c, engine_env_getenv, &conn, &err) < 0)
                sbx_test_skip("no container engine answers");
        chmod(tmp, 0755);
        port = free_port();
        reg = start_registry(tmp, port);

        /* the recipe-built images, into the engine and pushed to the loopback registry by it */
        name_py = xasprintf("127.0.0.1:%d/vestibule/python", port);
        name_node = xasprintf("127.0.0.1:%d/vestibule/node", port);
        py = import_and_push(&conn, c, TAR_PY, name_py, tag);
        node = import_and_push(&conn, c, TAR_NODE, name_node, tag);

        e_py = xasprintf("VESTIBULE_IMAGE_PYTHON=%s", py);
        e_node = xasprintf("VESTIBULE_IMAGE_NODE=%s", node);
        e_root = xasprintf("VESTIBULE_ROOTFS_DIR=%s", rootfs);
        e_home = xasprintf("HOME=%s", tmp);
        e_dh = xasprintf("DOCKER_HOST=unix://%s/no-engine.sock", tmp); /* the native half only */
        e_ws = xasprintf("VESTIBULE_WORKSPACE=%s/ws", tmp);
        char *envp[] = {"PATH=/usr/bin:/bin",
                        "LANG=C.UTF-8",
                        e_home,
                        e_dh,
                        e_py,
                        e_node,
                        e_root,
                        e_ws,
                        "VESTIBULE_BACKEND=native",
                        geteuid() == 0 ? "VESTIBULE_RUN_AS=2000:2000" : NULL,
                        NULL};
        char *setup_argv[] = {"vestibule-mcp", "setup", NULL};

        /* Ctrl-C while the pulled python layers unpack: exit 130, nothing installed, no
         * download folder left */
        pid = cli_start(setup_argv, envp, log);
        for (i = 0; i < 2400 && !unpacking(rootfs); i++) {
                ck_assert_int_eq(waitpid(pid, NULL, WNOHANG), 0);
                usleep(25 * 1000);
        }
        ck_assert_msg(unpacking(rootfs), "setup never got to unpacking");
        ck_assert_int_eq(kill(pid, SIGINT), 0);
        rc = cli_wait(pid);
        text = read_text(log);
        ck_assert_msg(rc == 130, "exit %d: %s", rc, text);
        {
                DIR *d = opendir(rootfs);

                ck_assert_ptr_nonnull(d);
                for (struct dirent *de; (de = readdir(d));)
                        ck_assert_msg(de->d_name[0] == '.' &&
                                          (strcmp(de->d_name, ".") == 0 ||
                                           strcmp(de->d_name, "..") == 0 ||
                                           strcmp(de->d_name, ".setup.lock") == 0 ||
                                           strcmp(de->d_name, ".swap.lock") == 0),
                                      "left after Ctrl-C: '%s'", de->d_name);
                closedir(d);
        }
        ck_assert_int_eq(count_new_pull_dirs(t0), 0);
        free(TAKE_PTR(text));

        /* the same, left alone: both pulled by digest, checked, installed */
        pid = cli_start(setup_argv, envp, log);
        rc = cli_wait(pid);
        text = read_text(log);
        ck_assert_msg(strstr(text, "setup: python rootfs installed") &&
                          strstr(text, "setup: node rootfs installed"),
                      "exit %d: %s", rc, text);
        ck_assert_msg(strstr(text, "ready in this terminal's environment: isolation native"),
                      "exit %d: %s", rc, text);
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(setup_installed_identity(rootfs, "python", &id, NULL, &err), 0);
        ck_assert_str_eq(id, strchr(py, '@') + 1); /* recorded under the pinned digest */
        ck_assert_int_eq(count_new_pull_dirs(t0), 0);
        free(TAKE_PTR(text));

        /* 6*7 through the native backend on what setup pulled */
        {
                char *run_py[] = {"vestibule-mcp", "run", "--language", "python", "-c",
                                  "print(6*7)",    NULL};
                char *run_node[] = {"vestibule-mcp",    "run", "--language", "node", "-c",
                                    "console.log(6*7)", NULL};
                char **runs[] = {run_py, run_node};

                for (i = 0; i < 2; i++) {
                        rc = cli_wait(cli_start(runs[i], envp, log));
                        text = read_text(log);
                        ck_assert_msg(rc == 0 && strstr(text, "42\n") &&
                                          strstr(text, "isolation: native"),
                                      "exit %d: %s", rc, text);
                        free(TAKE_PTR(text));
                }
        }

        /* the registry gone: a second setup makes no request and is done */
        kill(reg, SIGTERM);
        waitpid(reg, NULL, 0);
        rc = cli_wait(cli_start(setup_argv, envp, log));
        text = read_text(log);
        ck_assert_msg(rc == 0 && strstr(text, "python rootfs already installed from") &&
                          strstr(text, "node rootfs already installed from"),
                      "exit %d: %s", rc, text);
        free(TAKE_PTR(text));

        config_free(c);
        remove_tmp(tmp);
}
END_TEST

static Suite *setup_engine_suite(void)
{
        Suite *s = suite_create("setup_engine");
        TCase *tc;

        tc = tcase_create("image name");
        tcase_add_test(tc, image_for_follows_image_source);
        tcase_add_test(tc, debian_names_match_pins);
        suite_add_tcase(s, tc);

        tc = tcase_create("import");
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, from_tar_imports_into_engine_then_present);
        tcase_add_test(tc, from_tar_without_engine_says_so_and_installs);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry pull");
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, registry_mode_pulls_into_engine_by_digest);
        suite_add_tcase(s, tc);

        tc = tcase_create("registry native pull");
        tcase_set_timeout(tc, 1200);
        tcase_add_test(tc, registry_native_pull_of_recipe_images_pushed_through_engine);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(setup_engine_suite());
}
