/* test_gvisor.c - the gvisor backend (src/gvisor/): the OCI spec it writes (json-c read back),
 * runsc's version line (and a fuzz loop over it), and real runs in runsc as the test user: the
 * output and grade, a kernel in between (the Sentry's release, with this process's own uname as
 * the control that gives the other answer), the rootfs read-only and the workspace shared, the
 * /tmp cap, no network but lo, and the timeout and cancel killing every process of the
 * sandbox (with the control that counts them while the program runs). */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "common/cleanup.h"
#include "common/fileio.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "egress/egress.h"
#include "gvisor/gvisor.h"
#include "gvisor/spec.h"
#include "run/backend.h"
#include "run/sandbox.h"
#include "testutil.h"

static struct sbx_config cfg;
static char *workspace;
static struct backend *backend;
static pid_t owner_pid; /* the server whose sandboxes count (sandbox_processes()) */

static const char *rootfs_dir(void)
{
        const char *d = getenv("VESTIBULE_ROOTFS_DIR");
        return d && *d ? d : "/var/tmp/vestibule-images/rootfs";
}

/* ---- the spec ----------------------------------------------------------------------------- */

static const char *const test_argv[] = {"python3", "/sandbox/main.py", NULL};
static const char *const test_env[] = {"PATH=/usr/bin:/bin", "HOME=/tmp", NULL};

static struct gvisor_spec_in spec_in(void)
{
        return (struct gvisor_spec_in){.rootfs = "/r/python",
                                       .workspace = "/w",
                                       .code_dir = "/c",
                                       .tmpfs_mb = 64,
                                       .host_uid = 0,
                                       .host_gid = 0,
                                       .argv = test_argv,
                                       .envp = test_env,
                                       .nofile_max = 1024,
                                       .fsize_max_bytes = 1u << 20};
}

static json_object *spec_of(const struct gvisor_spec_in *in)
{
        struct sbx_error err = {0};
        _cleanup_free_ char *text = NULL;
        json_object *o;

        ck_assert_msg(gvisor_spec_json(in, &text, &err) == 0, "%s", err.msg);
        o = json_tokener_parse(text);
        ck_assert_ptr_nonnull(o);
        return o;
}

static json_object *at(json_object *o, const char *key)
{
        json_object *v = NULL;

        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no '%s'", key);
        return v;
}

/* The mount at @dest, or NULL. */
static json_object *mount_at(json_object *spec, const char *dest)
{
        json_object *m = at(spec, "mounts");

        for (size_t i = 0; i < json_object_array_length(m); i++) {
                json_object *e = json_object_array_get_idx(m, i);
                if (strcmp(json_object_get_string(at(e, "destination")), dest) == 0)
                        return e;
        }
        return NULL;
}

static bool has_option(json_object *mount, const char *opt)
{
        json_object *o = at(mount, "options");

        for (size_t i = 0; i < json_object_array_length(o); i++)
                if (strcmp(json_object_get_string(json_object_array_get_idx(o, i)), opt) == 0)
                        return true;
        return false;
}

START_TEST(spec_has_what_the_sandbox_needs)
{
        struct gvisor_spec_in in = spec_in();
        json_object *s = spec_of(&in), *l = at(s, "linux"), *map, *ns;
        bool user = false, net = false;

        ck_assert(json_object_get_boolean(at(at(s, "root"), "readonly")));
        ck_assert_str_eq(json_object_get_string(at(at(s, "root"), "path")), "/r/python");
        map = at(l, "uidMappings");
        ck_assert_int_eq(json_object_array_length(map), 1);
        ck_assert_int_eq(json_object_get_int(at(json_object_array_get_idx(map, 0), "size")), 1);
        ck_assert_int_eq(json_object_array_length(at(l, "gidMappings")), 1);
        ns = at(l, "namespaces");
        for (size_t i = 0; i < json_object_array_length(ns); i++) {
                const char *t =
                    json_object_get_string(at(json_object_array_get_idx(ns, i), "type"));
                user |= strcmp(t, "user") == 0;
                net |= strcmp(t, "network") == 0;
        }
        ck_assert(user && net);
        ck_assert(has_option(mount_at(s, "/workspace"), "rw"));
        ck_assert(has_option(mount_at(s, "/sandbox"), "ro"));
        ck_assert(has_option(mount_at(s, "/tmp"), "size=64m"));
        ck_assert_str_eq(json_object_get_string(at(at(s, "process"), "cwd")), "/workspace");
        ck_assert(json_object_get_boolean(at(at(s, "process"), "noNewPrivileges")));
        ck_assert_int_eq(json_object_array_length(at(at(s, "process"), "rlimits")), 3);
        /* no capability, and the syscall rules for runsc --oci-seccomp */
        ck_assert_int_eq(
            json_object_array_length(at(at(at(s, "process"), "capabilities"), "bounding")), 0);
        ck_assert_str_eq(json_object_get_string(at(at(l, "seccomp"), "defaultAction")),
                         "SCMP_ACT_ALLOW");
        ck_assert_int_ge(json_object_array_length(at(at(l, "seccomp"), "syscalls")), 3);
        ck_assert_str_eq(
            json_object_get_string(json_object_array_get_idx(at(at(s, "process"), "env"), 0)),
            "PATH=/usr/bin:/bin");
        json_object_put(s);
}
END_TEST

START_TEST(spec_workspace_read_only_when_set)
{
        struct gvisor_spec_in in = spec_in();
        json_object *s;

        in.workspace_ro = 1;
        in.fsize_max_bytes = 0;
        s = spec_of(&in);
        ck_assert(has_option(mount_at(s, "/workspace"), "ro"));
        ck_assert(!has_option(mount_at(s, "/workspace"), "rw"));
        ck_assert_int_eq(json_object_array_length(at(at(s, "process"), "rlimits")), 2);
        json_object_put(s);
}
END_TEST

START_TEST(spec_refuses_relative_paths_and_no_program)
{
        struct gvisor_spec_in in = spec_in();
        struct sbx_error err = {0};
        char *text = NULL;
        static const char *const empty[] = {NULL};

        in.workspace = "w";
        ck_assert_int_eq(gvisor_spec_json(&in, &text, &err), -EINVAL);
        ck_assert_ptr_null(text);
        ck_assert_ptr_nonnull(strstr(err.msg, "workspace"));
        in = spec_in();
        in.argv = empty;
        ck_assert_int_eq(gvisor_spec_json(&in, &text, &err), -EINVAL);
        in = spec_in();
        in.tmpfs_mb = 0;
        ck_assert_int_eq(gvisor_spec_json(&in, &text, &err), -EINVAL);
        ck_assert_ptr_null(text);
}
END_TEST

/* A session's channel folder is bound read-write at /sandbox/chan, only when given. */
START_TEST(spec_chan_dir_bound_rw_only_when_set)
{
        struct gvisor_spec_in in = spec_in();
        json_object *spec = spec_of(&in), *m;

        ck_assert_ptr_null(mount_at(spec, "/sandbox/chan"));
        json_object_put(spec);
        in.chan_dir = "/c-chan";
        spec = spec_of(&in);
        m = mount_at(spec, "/sandbox/chan");
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(json_object_get_string(at(m, "source")), "/c-chan");
        ck_assert(has_option(m, "rw"));
        ck_assert(has_option(mount_at(spec, "/sandbox"), "ro")); /* the code stays read-only */
        json_object_put(spec);
        in.chan_dir = "relative";
        struct sbx_error err = {0};
        char *json = NULL;
        ck_assert_int_eq(gvisor_spec_json(&in, &json, &err), -EINVAL);
        ck_assert_ptr_null(json);
}
END_TEST

START_TEST(version_line_parsed)
{
        char v[32];
        const char *out = "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n";

        ck_assert_int_eq(gvisor_parse_version(out, strlen(out), v, sizeof(v)), 0);
        ck_assert_str_eq(v, "0.0~20221219.0");
        ck_assert_int_eq(gvisor_parse_version("runsc version \n", 15, v, sizeof(v)), -EINVAL);
        ck_assert_int_eq(gvisor_parse_version("runc version 1", 14, v, sizeof(v)), -EINVAL);
        /* control chars and quotes are dropped, the cut holds */
        out = "runsc version 1\"2;3$(x)456789012345678901234567890123456789";
        ck_assert_int_eq(gvisor_parse_version(out, strlen(out), v, 8), 0);
        ck_assert_str_eq(v, "123x456");
}
END_TEST

/* A fuzz loop: random bytes after the prefix never write past the buffer, and what is kept
 * is only [A-Za-z0-9.~+_-]. */
START_TEST(version_fuzz)
{
        char in[80], v[16];
        unsigned seed = 26;

        memcpy(in, "runsc version ", 14);
        for (int round = 0; round < 20000; round++) {
                size_t len = 14 + (size_t)(rand_r(&seed) % 60);
                for (size_t i = 14; i < len; i++)
                        in[i] = (char)(rand_r(&seed) & 0xff);
                memset(v, 'Z', sizeof(v));
                if (gvisor_parse_version(in, len, v, sizeof(v)) == 0) {
                        ck_assert(strlen(v) < sizeof(v));
                        ck_assert_uint_eq(strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQR"
                                                    "STUVWXYZ0123456789.~+_-"),
                                          strlen(v));
                }
        }
}
END_TEST

/* ---- real runs ---------------------------------------------------------------------------- */

static void run_setup(void)
{
        struct sbx_error err = {0};
        struct gvisor_runsc_facts f;
        char *tree = xasprintf("%s/python/usr/bin/python3", rootfs_dir());
        bool have_tree = access(tree, X_OK) == 0;

        free(tree);
        if (gvisor_runsc_facts(&f, &err) < 0)
                sbx_test_skip(err.msg);
        if (!have_tree)
                sbx_test_skip("no python rootfs: run vestibule-mcp setup (VESTIBULE_ROOTFS_DIR)");
        sbx_test_become_user(); /* runsc runs rootless, as the server's own user */
        owner_pid = getpid();
        workspace = sbx_test_tmpdir();
        sbx_test_config(&cfg, workspace);
        cfg.backend = SBX_BACKEND_GVISOR;
        cfg.rootfs_dir = (char *)rootfs_dir();
        ck_assert_int_eq(gvisor_backend_new(&cfg, &backend, &err), 0);
}

static void run_teardown(void)
{
        backend = backend_free(backend);
        sbx_test_tmpdir_remove(&workspace);
}

static int run(const char *code, unsigned timeout_s, int cancel_fd, struct run_result *res,
               struct sbx_error *err)
{
        return sbx_test_backend_run(backend, &cfg, SBX_LANG_PYTHON, code, timeout_s, cancel_fd, res,
                                    err);
}

/* Does this host give each run a cgroup with memory, cpu and pids (cgroup_limits_detect())? */
static bool host_limits_full(void)
{
        struct cgroup_limits_info li;

        cgroup_limits_detect(&cfg, &li);
        return li.path != CGROUP_LIMITS_NONE && !li.missing[0];
}

static const char *out(const struct run_result *r)
{
        return r->out.data ? r->out.data : "";
}

START_TEST(probe_verifies_and_python_runs)
{
        struct backend_probe p;
        struct run_result res;
        struct sbx_error err = {0};

        ck_assert_int_eq(backend->ops->probe(backend, &p, &err), 0);
        ck_assert_msg(p.usable, "%s", p.blocked);
        ck_assert_ptr_nonnull(strstr(p.details, "runsc rootless probe: ok"));
        ck_assert_msg(run("print(1)\n", 20, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
        ck_assert_int_eq(res.exit_code, 0);
        ck_assert_str_eq(out(&res), "1\n");
        ck_assert_str_eq(res.backend, "gvisor");
        /* the grade follows the host's cgroup path (src/cgroup), found here independently */
        if (host_limits_full()) {
                ck_assert_str_eq(res.isolation, "gvisor");
                ck_assert_msg(res.usage.mem_peak_bytes.measured, "%s",
                              res.usage.mem_peak_bytes.why);
                ck_assert(res.usage.pids_peak.measured);
        } else {
                ck_assert_msg(strncmp(res.isolation, "gvisor-degraded (limits not applied: ", 37) ==
                                  0,
                              "%s", res.isolation);
                ck_assert(!res.usage.mem_peak_bytes.measured);
        }
        ck_assert(res.usage.cpu_us.measured);
        run_result_done(&res);
        ck_assert_msg(run("import sys; sys.exit(7)\n", 20, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(res.exit_code, 7);
        run_result_done(&res);
}
END_TEST

/* The Sentry answers uname, not the host's kernel; this process's uname is the control. */
START_TEST(a_kernel_is_in_between)
{
        struct run_result res;
        struct sbx_error err = {0};
        struct utsname host;
        char *want_not;

        ck_assert_int_eq(uname(&host), 0);
        ck_assert_msg(run("import os; print(os.uname().release)\n", 20, -1, &res, &err) == 0, "%s",
                      err.msg);
        want_not = xasprintf("%s\n", host.release);
        ck_assert_str_ne(out(&res), want_not);
        ck_assert_str_ne(out(&res), "");
        free(want_not);
        run_result_done(&res);
}
END_TEST

START_TEST(rootfs_read_only_workspace_shared_tmp_capped_no_network)
{
        struct run_result res;
        struct sbx_error err = {0};
        char buf[16];
        _cleanup_free_ char *f = NULL;
        const char *code =
            "import os, socket\n"
            "open('/workspace/made', 'w').write('yes')\n"
            "try:\n    open('/usr/x', 'w'); print('usr writable')\n"
            "except OSError as e: print('usr', e.errno in (13, 30))\n"
            "try:\n    open('/tmp/big', 'wb').write(b'x' * (70 << 20)); print('tmp uncapped')\n"
            "except OSError as e: print('tmp', e.errno in (27, 28))\n"
            "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev') if ':' in l))\n";

        ck_assert_msg(run(code, 30, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(out(&res), "usr True\ntmp True\n['lo']\n");
        f = xasprintf("%s/made", workspace);
        ck_assert_int_eq(sbx_read_small_file(AT_FDCWD, f, 0, buf, sizeof(buf)), 3);
        ck_assert_str_eq(buf, "yes");
        run_result_done(&res);
}
END_TEST

/* Inside the Sentry the sandbox's uid 0 holds no capability and the OCI seccomp rules refuse
 * namespaces, device nodes and io_uring (runsc --oci-seccomp). Each call's answer is printed;
 * the control is the unprivileged user namespace this test's own user can make outside. */
START_TEST(privileged_calls_refused_inside)
{
        struct run_result res;
        struct sbx_error err = {0};
        const char *code =
            "import os, ctypes\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def tell(name, r):\n"
            "    print(name, 'ok' if r >= 0 else os.strerror(ctypes.get_errno()))\n"
            "tell('unshare', libc.unshare(0x10000000))\n"
            "try:\n    os.mknod('/tmp/n', 0o20666, os.makedev(1, 3)); print('mknod ok')\n"
            "except OSError as e: print('mknod', e.strerror)\n"
            "buf = ctypes.create_string_buffer(120)\n"
            "tell('io_uring', libc.syscall(425, 1, buf))\n";
        pid_t pid = fork();
        int st;

        ck_assert_int_ge(pid, 0);
        if (pid == 0)
                _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
        waitpid(pid, &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "control: this user cannot unshare a user namespace outside");
        ck_assert_msg(run(code, 20, -1, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(out(&res), "unshare Operation not permitted\nmknod Operation not "
                                    "permitted\nio_uring Operation not permitted\n");
        run_result_done(&res);
}
END_TEST

/* Threads start (clone3 is ENOSYS in the Sentry, so glibc falls back to clone, which the syscall
 * rules allow without namespace flags), node starts (its platform makes threads at once), and
 * python3 from bash has /sandbox (where sitecustomize.py now is for every language) on its path. */
START_TEST(python_threads_and_node_start)
{
        struct run_result res;
        struct sbx_error err = {0};
        char *node = xasprintf("%s/node/usr/bin/node", rootfs_dir());
        struct run_request req = {.language = SBX_LANG_NODE,
                                  .code = "console.log(6 * 7)\n",
                                  .code_len = 19,
                                  .timeout_s = 20,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};

        ck_assert_msg(run("import threading\nt = threading.Thread(target=print, args=('thr',))\n"
                          "t.start(); t.join()\n",
                          20, -1, &res, &err) == 0,
                      "%s", err.msg);
        ck_assert_str_eq(out(&res), "thr\n");
        run_result_done(&res);
        req.language = SBX_LANG_BASH;
        req.code = "python3 -c 'import sys; print(\"/sandbox\" in sys.path)'\n";
        req.code_len = strlen(req.code);
        memset(&res, 0, sizeof(res));
        ck_assert_msg(backend->ops->run(backend, &req, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(out(&res), "True\n");
        run_result_done(&res);
        if (access(node, X_OK) == 0) {
                req.language = SBX_LANG_NODE;
                req.code = "console.log(6 * 7)\n";
                req.code_len = strlen(req.code);
                memset(&res, 0, sizeof(res));
                ck_assert_msg(backend->ops->run(backend, &req, &res, &err) == 0, "%s", err.msg);
                ck_assert_str_eq(out(&res), "42\n");
                run_result_done(&res);
        }
        free(node);
}
END_TEST

/* Processes of this user whose command line names a gvisor sandbox folder. */
/* Whose sandboxes count: the server's pid (this process, or server_death's child). Other
 * servers on the host (another suite, a warm spare) run gvisor sandboxes too: a host-wide count
 * failed whenever one did. Ours are the folders whose runsc state names a container
 * "vestibule-<owner>-N" (src/gvisor/backend.c), remembered once seen (destroy removes them). */
static char known[64][40];
static size_t n_known;

static bool ours(const char *dir)
{
        char path[300], want[40];
        struct dirent *de;
        DIR *d;
        bool yes = false;

        for (size_t i = 0; i < n_known; i++)
                if (strcmp(known[i], dir) == 0)
                        return true;
        snprintf(path, sizeof(path), "/tmp/%s/state", dir);
        snprintf(want, sizeof(want), "vestibule-%d-", (int)owner_pid);
        d = opendir(path);
        while (d && !yes && (de = readdir(d)))
                yes = strstr(de->d_name, want) != NULL;
        if (d)
                closedir(d);
        if (yes && n_known < ELEMENTSOF(known))
                snprintf(known[n_known++], sizeof(known[0]), "%s", dir);
        return yes;
}

static int sandbox_processes(void)
{
        DIR *d = opendir("/proc");
        struct dirent *de;
        int n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d))) {
                char path[300], buf[4096], dir[40];
                const char *p;
                ssize_t len;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
                len = sbx_read_small_file(AT_FDCWD, path, SBX_READ_PREFIX, buf, sizeof(buf));
                for (ssize_t i = 0; i + 1 < len; i++)
                        if (buf[i] == '\0')
                                buf[i] = ' ';
                if (len <= 0 || !(p = strstr(buf, "/tmp/vestibule-gvisor-")))
                        continue;
                snprintf(dir, sizeof(dir), "%.*s", (int)strcspn(p + 5, "/ "), p + 5);
                if (ours(dir))
                        n++;
        }
        closedir(d);
        return n;
}

struct watcher {
        int seen;      /* processes counted while the program ran (the control) */
        int cancel_fd; /* -1: let the timeout end it */
};

static void *watch(void *arg)
{
        struct watcher *w = arg;

        /* the most seen at once: runsc, its user-namespace child, the gofer, the sandbox */
        for (int i = 0; i < 100 && w->seen < 4; i++) {
                int n;
                usleep(50000);
                n = sandbox_processes();
                w->seen = n > w->seen ? n : w->seen;
        }
        if (w->cancel_fd >= 0) {
                uint64_t one = 1;
                (void)!write(w->cancel_fd, &one, sizeof(one));
        }
        return NULL;
}

static void kill_everything(bool by_cancel)
{
        struct run_result res;
        struct sbx_error err = {0};
        struct watcher w = {.cancel_fd = by_cancel ? eventfd(0, EFD_CLOEXEC) : -1};
        pthread_t t;
        const char *code = "import os, time\nos.fork(); os.fork()\nos.setsid() if os.fork() == 0 "
                           "else None\nprint('up', flush=True)\ntime.sleep(100)\n";

        ck_assert_int_eq(sandbox_processes(), 0);
        ck_assert_int_eq(pthread_create(&t, NULL, watch, &w), 0);
        ck_assert_msg(run(code, by_cancel ? 30 : 3, w.cancel_fd, &res, &err) == 0, "%s", err.msg);
        pthread_join(t, NULL);
        ck_assert_int_eq(res.outcome, by_cancel ? RUN_OUTCOME_CANCELLED : RUN_OUTCOME_TIMED_OUT);
        ck_assert_msg(w.seen >= 2, "control: only %d sandbox processes seen while it ran", w.seen);
        gvisor_backend_settle(backend); /* destroy's reaper: after the result */
        ck_assert_int_eq(sandbox_processes(), 0);
        /* without a cgroup, runsc's rusage: cut short by the kill, so a floor */
        ck_assert(res.usage.cpu_us.at_least || host_limits_full());
        if (w.cancel_fd >= 0)
                close(w.cancel_fd);
        run_result_done(&res);
}

START_TEST(timeout_kills_every_process)
{
        kill_everything(false);
}
END_TEST

START_TEST(cancel_kills_every_process)
{
        kill_everything(true);
}
END_TEST

/* A server that dies (SIGKILL: no destroy) takes its sandbox along: runsc has the fork's
 * death signal, its gofer and sandbox are attached to it. Control: the processes were there. */
START_TEST(server_death_kills_the_run)
{
        pid_t server = fork();
        int seen = 0, left = -1;

        ck_assert_int_ge(server, 0);
        owner_pid = server;
        if (server == 0) {
                struct run_result res;
                struct sbx_error err = {0};
                run("import time\nprint('up', flush=True)\ntime.sleep(100)\n", 60, -1, &res, &err);
                _exit(0);
        }
        for (int i = 0; i < 200 && seen < 4; i++) {
                usleep(50000);
                seen = sandbox_processes();
        }
        ck_assert_msg(seen >= 4, "control: only %d sandbox processes seen while it ran", seen);
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
        for (int i = 0; i < 40 && left != 0; i++) {
                usleep(50000);
                left = sandbox_processes();
        }
        ck_assert_int_eq(left, 0);
        /* the folders the dead server left are for the next start's sweep; remove them here
         * (only ours: other servers' sandboxes may be running) */
        for (size_t i = 0; i < n_known; i++) {
                char *cmd = xasprintf("rm -rf '/tmp/%s'", known[i]);
                (void)!system(cmd);
                free(cmd);
        }
        owner_pid = getpid();
}
END_TEST

/* A cancel that came before the sandbox started (the eventfd already readable). */
START_TEST(cancel_before_start)
{
        struct run_result res;
        struct sbx_error err = {0};
        int efd = eventfd(0, EFD_CLOEXEC);
        uint64_t one = 1;

        ck_assert_int_eq(write(efd, &one, sizeof(one)), 8);
        ck_assert_msg(run("import time\ntime.sleep(100)\n", 30, efd, &res, &err) == 0, "%s",
                      err.msg);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_CANCELLED);
        gvisor_backend_settle(backend);
        ck_assert_int_eq(sandbox_processes(), 0);
        close(efd);
        run_result_done(&res);
}
END_TEST

/* One program of @lang in a sandbox of @ops prepared with @spare (a warm spare: started before
 * the code exists); run_in() a python one. */
static int run_lang(const struct sandbox_ops *ops, struct sandbox *sb, enum sbx_language lang,
                    const char *code, struct run_result *res, struct sbx_error *err)
{
        struct run_request req = {.language = lang,
                                  .code = code,
                                  .code_len = strlen(code),
                                  .timeout_s = 20,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};

        memset(res, 0, sizeof(*res));
        return sandbox_run_program(ops, sb, &req, res, err);
}

static int run_in(const struct sandbox_ops *ops, struct sandbox *sb, const char *code,
                  struct run_result *res, struct sbx_error *err)
{
        return run_lang(ops, sb, SBX_LANG_PYTHON, code, res, err);
}

static struct sandbox *prepare_lang(const struct sandbox_ops *ops, enum sandbox_mode mode,
                                    bool spare, enum sbx_language lang)
{
        struct sandbox_spec spec = {.language = lang, .cfg = &cfg, .mode = mode, .spare = spare};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};

        ck_assert_msg(ops->prepare(backend, &spec, &sb, &err) == 0, "%s", err.msg);
        return sb;
}

static struct sandbox *prepare(const struct sandbox_ops *ops, enum sandbox_mode mode, bool spare)
{
        return prepare_lang(ops, mode, spare, SBX_LANG_PYTHON);
}

/* A spare runs the code it is handed after its start, once, as a cold run would (argv, file,
 * stdin /dev/null, the traceback from the program's own frame); a second start is refused. */
START_TEST(spare_runs_its_code_once_as_a_cold_run)
{
        const struct sandbox_ops *ops = backend->ops->sandbox;
        struct sandbox *sb = prepare(ops, SANDBOX_MODE_ONE_SHOT, true);
        struct run_result res;
        struct sbx_error err = {0};

        usleep(300000); /* the spare waits: nothing of the code exists yet */
        ck_assert_msg(run_in(ops, sb,
                             "import sys\nprint(sys.argv, __file__, sys.path[0], __name__, "
                             "sys.stdin.read() == '')\n1/0\n",
                             &res, &err) == 0,
                      "%s", err.msg);
        ck_assert_str_eq(out(&res),
                         "['/sandbox/main.py'] /sandbox/main.py /sandbox __main__ True\n");
        ck_assert_int_eq(res.exit_code, 1);
        ck_assert_msg(res.err.data && strstr(res.err.data, "Traceback (most recent call last):\n"
                                                           "  File \"/sandbox/main.py\", line 3"),
                      "%s", res.err.data ? res.err.data : "");
        ck_assert_ptr_null(strstr(res.err.data, "<string>"));
        run_result_done(&res);
        struct run_request again = {.language = SBX_LANG_PYTHON,
                                    .code = "1",
                                    .code_len = 1,
                                    .timeout_s = 5,
                                    .cfg = &cfg,
                                    .cancel_fd = -1};
        struct sandbox_io io;
        ck_assert_int_eq(ops->start(sb, &again, &io, &err), -EALREADY);
        ops->destroy(sb);
}
END_TEST

/* Node's spare (node itself, waiting in its preload module) runs the code as a cold run does:
 * the same argv, execArgv, require.main, __filename, stdin (an empty character device), a
 * Worker, and the same uncaught exception's stack, from the program's frame down to node's
 * own main; the control is the cold sandbox's run of the same code. What differs (the
 * preload file in /sandbox) is left out of the view. */
START_TEST(node_spare_runs_its_code_as_a_cold_run)
{
        static const char code[] =
            "const fs = require('fs');\n"
            "console.log(JSON.stringify([process.argv, process.execArgv, require.main === "
            "module, __filename, fs.fstatSync(0).isCharacterDevice(), fs.readFileSync(0).length, "
            "Object.keys(require.cache), fs.readdirSync('/sandbox').filter((f) => "
            "!f.startsWith('.'))]));\n"
            "const { Worker } = require('worker_threads');\n"
            "new Worker('console.log(\"worker\")', { eval: true }).on('exit', () => { throw new "
            "Error('boom'); });\n";
        const struct sandbox_ops *ops = backend->ops->sandbox;
        struct run_result cold, warm;
        struct sbx_error err = {0};
        struct sandbox *sb;
        char *node = xasprintf("%s/node/usr/bin/node", rootfs_dir());

        if (access(node, X_OK) < 0) {
                free(node);
                sbx_test_skip("no node rootfs: run vestibule-mcp setup (VESTIBULE_ROOTFS_DIR)");
        }
        free(node);
        sb = prepare_lang(ops, SANDBOX_MODE_ONE_SHOT, false, SBX_LANG_NODE);
        ck_assert_msg(run_lang(ops, sb, SBX_LANG_NODE, code, &cold, &err) == 0, "%s", err.msg);
        ops->destroy(sb);
        sb = prepare_lang(ops, SANDBOX_MODE_ONE_SHOT, true, SBX_LANG_NODE);
        usleep(300000); /* the spare waits: nothing of the code exists yet */
        ck_assert_msg(run_lang(ops, sb, SBX_LANG_NODE, code, &warm, &err) == 0, "%s", err.msg);
        ops->destroy(sb);
        ck_assert_str_eq(out(&cold), "[[\"/usr/bin/node\",\"/sandbox/main.js\"],[],true,"
                                     "\"/sandbox/main.js\",true,0,[\"/sandbox/main.js\"],"
                                     "[\"main.js\",\"sitecustomize.py\"]]\nworker\n");
        ck_assert_str_eq(out(&warm), out(&cold));
        ck_assert_int_eq(cold.exit_code, 1);
        ck_assert_int_eq(warm.exit_code, 1);
        ck_assert_ptr_nonnull(cold.err.data);
        ck_assert_ptr_nonnull(warm.err.data);
        ck_assert_msg(strstr(cold.err.data, "Error: boom\n    at Worker.<anonymous> "
                                            "(/sandbox/main.js:"),
                      "%s", cold.err.data);
        ck_assert_str_eq(warm.err.data, cold.err.data);
        run_result_done(&cold);
        run_result_done(&warm);
}
END_TEST

/* Bash's spare (the cold run's own `bash /sandbox/main.sh`, waiting in its BASH_ENV file) runs
 * the script as a cold run does: the same $0, $-, $_, BASH_SOURCE, FUNCNAME, options,
 * variables and environment (no BASH_ENV: a bash the script starts does not wait), stdin
 * empty, a top-level `return` refused; the control is the cold sandbox's run of the same code.
 * The spare's file in /sandbox is left out of the view. */
START_TEST(bash_spare_runs_its_code_as_a_cold_run)
{
        static const char code[] =
            "echo \"$0|$#|$-|$_|${BASH_SOURCE[*]}|${BASH_LINENO[*]}|${BASH_ARGC[*]}|$SHLVL|"
            "${BASH_ENV-none}\"\n"
            "f() { echo \"${FUNCNAME[*]}\"; }; f\n"
            "shopt | cksum; set -o | cksum; env | sort | cksum\n"
            "declare -p | grep -v '^declare -[-a-z]* "
            "\\(_\\|BASHPID\\|BASH_LINENO\\|RANDOM\\|SRANDOM\\|EPOCH[A-Z]*\\|SECONDS\\)=' | cksum\n"
            "bash -c 'echo child'\n"
            "wc -c\n"
            "ls -A /sandbox | grep -v '^\\.'\n"
            "return 5\n";
        const struct sandbox_ops *ops = backend->ops->sandbox;
        struct run_result cold, warm;
        struct sbx_error err = {0};
        struct sandbox *sb;

        sb = prepare_lang(ops, SANDBOX_MODE_ONE_SHOT, false, SBX_LANG_BASH);
        ck_assert_msg(run_lang(ops, sb, SBX_LANG_BASH, code, &cold, &err) == 0, "%s", err.msg);
        ops->destroy(sb);
        sb = prepare_lang(ops, SANDBOX_MODE_ONE_SHOT, true, SBX_LANG_BASH);
        usleep(300000); /* the spare waits: nothing of the code exists yet */
        ck_assert_msg(run_lang(ops, sb, SBX_LANG_BASH, code, &warm, &err) == 0, "%s", err.msg);
        ops->destroy(sb);
        ck_assert_msg(strncmp(out(&cold),
                              "/sandbox/main.sh|0|hB|bash|/sandbox/main.sh|0|0|1|none\n"
                              "f main\n",
                              60) == 0,
                      "%s", out(&cold));
        ck_assert_msg(strstr(out(&cold), "\nchild\n0\nmain.sh\nsitecustomize.py\n"), "%s",
                      out(&cold));
        ck_assert_str_eq(out(&warm), out(&cold));
        ck_assert_ptr_nonnull(cold.err.data);
        ck_assert_ptr_nonnull(warm.err.data);
        ck_assert_msg(strstr(cold.err.data, "return: can only"), "%s", cold.err.data);
        ck_assert_str_eq(warm.err.data, cold.err.data);
        ck_assert_int_eq(warm.exit_code, cold.exit_code);
        run_result_done(&cold);
        run_result_done(&warm);
}
END_TEST

/* Destroy leaves a sandbox's end (the wait for its processes, its folder's removal) to a reaper
 * thread, after the result; the server's exit (backend_free) still waits for all of it: no
 * process and no folder of the destroyed sandbox is left once it returns. Control: the spare's
 * processes and folder were seen before the destroy. */
START_TEST(destroy_is_finished_by_the_exit)
{
        const struct sandbox_ops *ops = backend->ops->sandbox;
        struct sandbox *sb[3];
        int seen = 0;

        n_known = 0;
        for (size_t i = 0; i < ELEMENTSOF(sb); i++)
                sb[i] = prepare(ops, SANDBOX_MODE_ONE_SHOT, true);
        for (int i = 0; i < 200 && (seen < 3 || n_known < ELEMENTSOF(sb)); i++) {
                usleep(50000);
                seen = sandbox_processes();
        }
        ck_assert_msg(seen >= 3 && n_known == ELEMENTSOF(sb),
                      "control: %d processes of %zu folders seen", seen, n_known);
        for (size_t i = 0; i < ELEMENTSOF(sb); i++)
                ops->destroy(sb[i]);
        backend = backend_free(backend);
        ck_assert_int_eq(sandbox_processes(), 0);
        for (size_t i = 0; i < n_known; i++) {
                char *dir = xasprintf("/tmp/%s", known[i]);
                ck_assert_msg(access(dir, F_OK) < 0 && errno == ENOENT, "'%s' left behind", dir);
                free(dir);
        }
}
END_TEST

/* A spare gets no new way to the host: a FIFO the host made in the workspace cannot be opened
 * from it (EPERM, as from a cold run); the control is a session, whose runsc has
 * --host-fifo=open (its channels, cells.c) and opens it (tests/adversarial/server.md). */
START_TEST(spare_cannot_open_a_host_fifo_a_session_can)
{
        const char *probe =
            "import os\ntry:\n    fd = os.open('/workspace/hostfifo', os.O_WRONLY | "
            "os.O_NONBLOCK)\n    print('opened')\nexcept OSError as e:\n    "
            "print('refused', e.errno)\n";
        char *fifo = xasprintf("%s/hostfifo", workspace);
        int rd;
        struct run_result res;
        struct sbx_error err = {0};
        struct sandbox *sb;

        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a reader: opens need not wait */
        ck_assert_int_ge(rd, 0);
        sb = prepare(backend->ops->sandbox, SANDBOX_MODE_ONE_SHOT, true);
        ck_assert_msg(run_in(backend->ops->sandbox, sb, probe, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(out(&res), "refused 1\n");
        run_result_done(&res);
        backend->ops->sandbox->destroy(sb);
        sb = prepare(backend->ops->cells, SANDBOX_MODE_CELLS, false);
        ck_assert_msg(run_in(backend->ops->cells, sb, probe, &res, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(out(&res), "opened\n");
        run_result_done(&res);
        backend->ops->cells->destroy(sb);
        close(rd);
        unlink(fifo);
        free(fifo);
}
END_TEST

/* Output past 64 KiB reaches the result whole (runsc's pipes raised: the Sentry's short write
 * to a full pipe lost the rest, tests/adversarial/server.md). */
START_TEST(output_past_a_pipe_buffer_is_whole)
{
        struct run_result res;
        struct sbx_error err = {0};

        ck_assert_msg(run("import os\nn = os.write(1, b'o' * 300000)\nos._exit(0 if n == 300000 "
                          "else 3)\n",
                          20, -1, &res, &err) == 0,
                      "%s", err.msg);
        ck_assert_uint_eq(res.out.total, 300000);
        ck_assert_int_eq(res.exit_code, 0); /* the program's own write was not short */
        run_result_done(&res);
}
END_TEST

/* A session keeps its variables between cells; a cell that runs past its deadline is
 * interrupted (through ctl, cells.c) and the session lives on. */
START_TEST(session_cells_persist_and_interrupt)
{
        const struct sandbox_ops *ops = backend->ops->cells;
        struct sandbox *sb = prepare(ops, SANDBOX_MODE_CELLS, false);
        struct run_result res;
        struct sbx_error err = {0};
        struct run_request req = {.language = SBX_LANG_PYTHON,
                                  .code = "import time\ntime.sleep(30)",
                                  .code_len = strlen("import time\ntime.sleep(30)"),
                                  .timeout_s = 1,
                                  .cfg = &cfg,
                                  .cancel_fd = -1};

        ck_assert_int_eq(run_in(ops, sb, "x = 41", &res, &err), 0);
        run_result_done(&res);
        memset(&res, 0, sizeof(res));
        ck_assert_int_eq(sandbox_run_program(ops, sb, &req, &res, &err), 0);
        ck_assert_int_eq(res.outcome, RUN_OUTCOME_TIMED_OUT);
        ck_assert_msg(res.err.data && strstr(res.err.data, "KeyboardInterrupt"), "%s",
                      res.err.data ? res.err.data : "");
        run_result_done(&res);
        ck_assert(ops->alive(sb));
        ck_assert_int_eq(run_in(ops, sb, "x += 1\nprint(x)", &res, &err), 0);
        ck_assert_str_eq(out(&res), "42\n");
        run_result_done(&res);
        ops->destroy(sb);
}
END_TEST

/* The session's interpreter runs on between cells, allocating as it goes: a python thread, a
 * node timer. A read blocked on a host FIFO holds its process's address space under gVisor
 * (runsc 20240729: the Sentry copies into the reader's memory around the host read), so the
 * runner's fd 4 is a pipe of the Sentry's fed by a cat (cells.c). Before: the python thread
 * made one tick per cell, and node's first cell that printed its value never ended (its JIT's
 * mprotect waited for the next cell); tests/adversarial/server.md. */
START_TEST(session_interpreter_runs_between_cells)
{
        static const struct {
                enum sbx_language lang;
                const char *spawn, *count;
        } c[] = {
            {SBX_LANG_PYTHON,
             "import threading, time\nn = [0]\ndef bg():\n    while True:\n"
             "        b = bytearray(1 << 20)\n        n[0] += 1\n        time.sleep(0.05)\n"
             "threading.Thread(target=bg, daemon=True).start()\n1",
             "n[0]"},
            {SBX_LANG_NODE,
             "globalThis.n = 0;\nsetInterval(() => { globalThis.keep = Buffer.alloc(1 << 20); "
             "n++; }, 50);\n1",
             "n"},
        };

        for (size_t i = 0; i < ELEMENTSOF(c); i++) {
                const struct sandbox_ops *ops = backend->ops->cells;
                struct sandbox *sb = prepare_lang(ops, SANDBOX_MODE_CELLS, false, c[i].lang);
                struct run_result res;
                struct sbx_error err = {0};
                long n1, n2;

                ck_assert_msg(run_lang(ops, sb, c[i].lang, c[i].spawn, &res, &err) == 0, "%s",
                              err.msg);
                ck_assert_int_eq(res.outcome, RUN_OUTCOME_EXITED);
                ck_assert_str_eq(out(&res), "1\n"); /* a printed value, then the cell's end */
                run_result_done(&res);
                ck_assert_int_eq(run_lang(ops, sb, c[i].lang, c[i].count, &res, &err), 0);
                n1 = strtol(out(&res), NULL, 10);
                run_result_done(&res);
                usleep(1500 * 1000);
                ck_assert_int_eq(run_lang(ops, sb, c[i].lang, c[i].count, &res, &err), 0);
                n2 = strtol(out(&res), NULL, 10);
                run_result_done(&res);
                ck_assert_msg(n2 >= n1 + 10, "%s: %ld then %ld ticks in 1.5 s (30 expected)",
                              sbx_language_name(c[i].lang), n1, n2);
                ops->destroy(sb);
        }
}
END_TEST

/* ---- the network allowlist (docs/design/egress.md, "gVisor backend") ------------------------ */

static struct sandbox *prepare_net(const struct sandbox_ops *ops, enum sandbox_mode mode,
                                   bool spare, int *ret_r, struct sbx_error *err)
{
        struct sandbox_spec spec = {.language = SBX_LANG_PYTHON,
                                    .cfg = &cfg,
                                    .mode = mode,
                                    .spare = spare,
                                    .network = RUN_NETWORK_ALLOWLIST};
        struct sandbox *sb = NULL;

        *ret_r = ops->prepare(backend, &spec, &sb, err);
        return sb;
}

/* Fail closed where no relay exists: a warm spare (built with network "none") and a session
 * are refused an allowlist sandbox before anything starts; the control is the same spec for a
 * one-shot cold run, which is prepared. */
START_TEST(allowlist_refused_for_a_spare_and_a_session)
{
        struct sbx_error err = {0};
        struct sandbox *sb;
        int r;

        sb = prepare_net(backend->ops->sandbox, SANDBOX_MODE_ONE_SHOT, true, &r, &err);
        ck_assert_int_eq(r, -EOPNOTSUPP);
        ck_assert_ptr_null(sb);
        ck_assert_msg(strstr(err.msg, "warm spare"), "%s", err.msg);
        memset(&err, 0, sizeof(err));
        sb = prepare_net(backend->ops->cells, SANDBOX_MODE_CELLS, false, &r, &err);
        ck_assert_int_eq(r, -EOPNOTSUPP);
        ck_assert_ptr_null(sb);
        ck_assert_msg(strstr(err.msg, "no network"), "%s", err.msg);
        memset(&err, 0, sizeof(err));
        sb = prepare_net(backend->ops->sandbox, SANDBOX_MODE_ONE_SHOT, false, &r, &err);
        ck_assert_msg(r == 0 && sb, "the control: a cold allowlist sandbox is prepared: %s",
                      err.msg);
        backend->ops->sandbox->destroy(sb);
}
END_TEST

/* The proxy cannot start (its executable is gone): the run fails and its code never ran (no
 * file in the workspace). The control, with the proxy back: the same code runs, its request
 * for an unlisted host reaches the proxy through the relay and is refused (403), the verdict is
 * in the result, and a direct connection and DNS fail (lo only, no resolver). */
START_TEST(allowlist_without_its_proxy_runs_nothing)
{
        static const char code[] =
            "import os, socket\n"
            "open('/workspace/ran', 'w').close()\n"
            "print('proxy', os.environ.get('HTTPS_PROXY'))\n"
            "s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
            "s.sendall(b'CONNECT evil.example:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "print(s.recv(200).split(b'\\r\\n')[0].decode())\n"
            "try:\n    socket.create_connection(('192.0.2.1', 80), timeout=3)\n"
            "    print('direct: CONNECTED')\nexcept OSError as e:\n    print('direct:', e.errno)\n"
            "try:\n    socket.getaddrinfo('example.com', 80)\n    print('dns: RESOLVED')\n"
            "except OSError as e:\n    print('dns: fails')\n";
        _cleanup_free_ char *ran = xasprintf("%s/ran", workspace);
        const struct sandbox_ops *ops = backend->ops->sandbox;
        struct run_result res;
        struct sbx_error err = {0};
        struct sandbox *sb;
        int r;

        ck_assert_int_eq(config_egress_parse("a.example", NULL, NULL, &cfg.egress, &err), 0);
        egress_set_proxy_exe("/nonexistent/vestibule-mcp");
        sb = prepare_net(ops, SANDBOX_MODE_ONE_SHOT, false, &r, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        r = run_in(ops, sb, code, &res, &err);
        ck_assert_int_lt(r, 0);
        ck_assert_msg(strstr(err.msg, "egress: the proxy did not start; nothing was run"), "%s",
                      err.msg);
        ck_assert_int_eq(access(ran, F_OK), -1);
        run_result_done(&res);
        ops->destroy(sb);

        egress_set_proxy_exe(VESTIBULE_BIN); /* the control */
        memset(&err, 0, sizeof(err));
        sb = prepare_net(ops, SANDBOX_MODE_ONE_SHOT, false, &r, &err);
        ck_assert_msg(r == 0, "%s", err.msg);
        ck_assert_msg(run_in(ops, sb, code, &res, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(access(ran, F_OK), 0);
        ck_assert_str_eq(out(&res), "proxy http://127.0.0.1:3128\nHTTP/1.1 403 Forbidden\n"
                                    "direct: 113\ndns: fails\n");
        ck_assert(res.egress.on);
        ck_assert_uint_eq(res.egress.n_entries, 1);
        ck_assert_str_eq(res.egress.entries[0].host, "evil.example");
        ck_assert(!res.egress.entries[0].allowed);
        run_result_done(&res);
        ops->destroy(sb);
        config_egress_done(&cfg.egress);
        memset(&cfg.egress, 0, sizeof(cfg.egress));
        unlink(ran);
}
END_TEST

static Suite *gvisor_suite(void)
{
        Suite *s = suite_create("gvisor");
        TCase *tc;

        tc = tcase_create("spec");
        tcase_add_test(tc, spec_has_what_the_sandbox_needs);
        tcase_add_test(tc, spec_workspace_read_only_when_set);
        tcase_add_test(tc, spec_refuses_relative_paths_and_no_program);
        tcase_add_test(tc, spec_chan_dir_bound_rw_only_when_set);
        tcase_add_test(tc, version_line_parsed);
        tcase_add_test(tc, version_fuzz);
        suite_add_tcase(s, tc);

        tc = tcase_create("runs");
        tcase_add_checked_fixture(tc, run_setup, run_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, probe_verifies_and_python_runs);
        tcase_add_test(tc, a_kernel_is_in_between);
        tcase_add_test(tc, rootfs_read_only_workspace_shared_tmp_capped_no_network);
        tcase_add_test(tc, privileged_calls_refused_inside);
        tcase_add_test(tc, python_threads_and_node_start);
        tcase_add_test(tc, timeout_kills_every_process);
        tcase_add_test(tc, cancel_kills_every_process);
        tcase_add_test(tc, server_death_kills_the_run);
        tcase_add_test(tc, cancel_before_start);
        tcase_add_test(tc, spare_runs_its_code_once_as_a_cold_run);
        tcase_add_test(tc, node_spare_runs_its_code_as_a_cold_run);
        tcase_add_test(tc, bash_spare_runs_its_code_as_a_cold_run);
        tcase_add_test(tc, destroy_is_finished_by_the_exit);
        tcase_add_test(tc, spare_cannot_open_a_host_fifo_a_session_can);
        tcase_add_test(tc, output_past_a_pipe_buffer_is_whole);
        tcase_add_test(tc, session_cells_persist_and_interrupt);
        tcase_add_test(tc, session_interpreter_runs_between_cells);
        tcase_add_test(tc, allowlist_refused_for_a_spare_and_a_session);
        tcase_add_test(tc, allowlist_without_its_proxy_runs_nothing);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(gvisor_suite());
}
