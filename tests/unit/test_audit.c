/* test_audit.c - the audit log on a real disk: file and folder modes, record contents (the
 * SHA-256 of known input, the 4 KiB cut, never the output), blocked records, the refusal of a
 * folder inside the workspace or rootfs folder, failing and stalled writes as notes, and
 * `audit` printing: joining, N, "no end", corrupt lines, and escaping that keeps recorded code
 * from driving a terminal. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include "lazy/crypto.h"
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit-internal.h"
#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/xalloc.h"
#include "testutil.h"

static char *top;
static struct sbx_config cfg;

static void setup(void)
{
        top = sbx_test_tmpdir();
        memset(&cfg, 0, sizeof(cfg));
        cfg.audit_dir = xasprintf("%s/state/audit", top);
        cfg.workspace_dir = xasprintf("%s/state/workspace", top);
        cfg.rootfs_dir = xasprintf("%s/state/rootfs", top);
        umask(022);
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("chmod -R u+rwX '%s'; rm -rf '%s'", top, top);
        (void)!system(cmd);
        free(cfg.audit_dir);
        free(cfg.workspace_dir);
        free(cfg.rootfs_dir);
        free(top);
}

static struct audit_log *open_log(void)
{
        struct audit_log *log = NULL;
        struct sbx_error err = {0};

        ck_assert_msg(audit_open(&cfg, &log, &err) == 0, "%s", err.msg);
        ck_assert_ptr_nonnull(log);
        return log;
}

static char *slurp(const char *path)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        char *buf;

        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        ck_assert_int_eq(fstat(fd, &st), 0);
        buf = xmalloc((size_t)st.st_size + 1);
        ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
        buf[st.st_size] = '\0';
        return buf;
}

/* The @i-th line (0-based) of the file, parsed. */
static json_object *record(const char *path, int i)
{
        _cleanup_free_ char *all = slurp(path);
        char *save = NULL, *line = strtok_r(all, "\n", &save);

        for (int k = 0; k < i && line; k++)
                line = strtok_r(NULL, "\n", &save);
        ck_assert_msg(line, "no line %d in %s", i, path);
        json_object *o = json_tokener_parse(line);
        ck_assert_msg(o, "line %d is not JSON: %s", i, line);
        return o;
}

static size_t count_lines(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

static const char *get_s(json_object *o, const char *k)
{
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, k, &v), "no '%s'", k);
        ck_assert_msg(json_object_is_type(v, json_type_string), "'%s' not a string", k);
        return json_object_get_string(v);
}

static int64_t get_i(json_object *o, const char *k)
{
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, k, &v), "no '%s'", k);
        ck_assert_msg(json_object_is_type(v, json_type_int), "'%s' not an int", k);
        return json_object_get_int64(v);
}

static bool get_b(json_object *o, const char *k)
{
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, k, &v), "no '%s'", k);
        ck_assert_msg(json_object_is_type(v, json_type_boolean), "'%s' not a bool", k);
        return json_object_get_boolean(v);
}

static bool is_null(json_object *o, const char *k)
{
        json_object *v = NULL;
        return json_object_object_get_ex(o, k, &v) && v == NULL;
}

static void sha256_hex(const void *data, size_t n, char out[65])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;

        ck_assert_int_eq(EVP_Digest(data, n, md, &len, EVP_sha256(), NULL), 1);
        for (unsigned i = 0; i < len; i++)
                snprintf(out + (size_t)2 * i, 3, "%02x", md[i]);
}

static void start(struct audit_log *log, const char *code, char id[33])
{
        char note[256];
        audit_start(log, SBX_LANG_PYTHON, 10, "naive", code, strlen(code), id, note, sizeof(note));
        ck_assert_msg(note[0] == '\0', "note: %s", note);
}

static void fake_result(struct run_result *r)
{
        static char out[] = "SECRET-OUTPUT-TEXT";
        memset(r, 0, sizeof(*r));
        r->outcome = RUN_OUTCOME_EXITED;
        r->exit_code = 3;
        r->out.data = out;
        r->out.len = sizeof(out) - 1;
        r->out.total = 12345;
        r->err.total = 7;
        r->usage.wall_ms = 118;
        r->usage.cpu_us.measured = true;
        r->usage.cpu_us.value = 30000;
        snprintf(r->usage.mem_peak_bytes.why, sizeof(r->usage.mem_peak_bytes.why),
                 "Linux 5.19+ needed");
        r->usage.pids_peak.measured = true;
        r->usage.pids_peak.value = 3;
        snprintf(r->blocked_syscalls, sizeof(r->blocked_syscalls), "mount, bpf");
        snprintf(r->limits_hit, sizeof(r->limits_hit), "pids");
        snprintf(r->backend, sizeof(r->backend), "native");
        snprintf(r->image, sizeof(r->image), "python-rootfs");
        snprintf(r->isolation, sizeof(r->isolation), "native");
}

static void end(struct audit_log *log, const char *id)
{
        struct run_result r;
        char note[256];

        fake_result(&r);
        audit_end(log, id, &r, note, sizeof(note));
        ck_assert_msg(note[0] == '\0', "note: %s", note);
}

/* audit_print into a string. */
static char *print(const char *dir, unsigned n, bool json)
{
        struct sbx_error err = {0};
        int fd = memfd_create("audit-out", MFD_CLOEXEC);
        struct stat st;
        char *buf;

        ck_assert_int_ge(fd, 0);
        ck_assert_msg(audit_print(dir, n, json, fd, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(fstat(fd, &st), 0);
        buf = xmalloc((size_t)st.st_size + 1);
        ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
        buf[st.st_size] = '\0';
        close(fd);
        return buf;
}

/* --- files ------------------------------------------------------------------------------- */

START_TEST(open_creates_nothing_and_names_the_file)
{
        struct audit_log *log = open_log();
        struct stat st;
        regex_t re;
        const char *path = audit_path(log);
        _cleanup_free_ char *prefix = xasprintf("%s/", cfg.audit_dir);
        _cleanup_free_ char *pid = xasprintf("-%d.jsonl", (int)getpid());

        ck_assert_int_eq(strncmp(path, prefix, strlen(prefix)), 0);
        ck_assert_int_eq(regcomp(&re, "^[0-9]{8}T[0-9]{6}Z-[0-9]+\\.jsonl$", REG_EXTENDED), 0);
        ck_assert_msg(regexec(&re, path + strlen(prefix), 0, NULL, 0) == 0, "%s", path);
        regfree(&re);
        ck_assert_ptr_nonnull(strstr(path, pid));
        ck_assert_int_eq(stat(cfg.audit_dir, &st), -1); /* nothing yet */
        audit_close(log);
        ck_assert_int_eq(stat(cfg.audit_dir, &st), -1); /* never used: no file */
        ck_assert_ptr_null(audit_close(NULL));
}
END_TEST

START_TEST(modes_0700_folders_0600_file)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *state = xasprintf("%s/state", top);
        char id[33];
        struct stat st;

        start(log, "print(1)", id);
        ck_assert_int_eq(stat(state, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700); /* a missing parent: 0700 too */
        ck_assert_int_eq(stat(cfg.audit_dir, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0700);
        ck_assert_int_eq(lstat(audit_path(log), &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        audit_close(log);
}
END_TEST

START_TEST(existing_folder_keeps_its_mode)
{
        struct audit_log *log;
        _cleanup_free_ char *state = xasprintf("%s/state", top);
        char id[33];
        struct stat st;

        ck_assert_int_eq(mkdir(state, 0755), 0);
        ck_assert_int_eq(mkdir(cfg.audit_dir, 0750), 0);
        log = open_log();
        start(log, "print(1)", id);
        ck_assert_int_eq(stat(cfg.audit_dir, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0750);
        ck_assert_int_eq(stat(audit_path(log), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        audit_close(log);
}
END_TEST

START_TEST(planted_symlink_is_not_followed)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *state = xasprintf("%s/state", top);
        _cleanup_free_ char *target = xasprintf("%s/target", top);
        _cleanup_free_ char *contents = NULL;
        char id[33], note[256];
        int fd;

        ck_assert_int_eq(mkdir(state, 0700), 0);
        ck_assert_int_eq(mkdir(cfg.audit_dir, 0700), 0);
        fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(symlink(target, audit_path(log)), 0);
        audit_start(log, SBX_LANG_BASH, 5, "naive", "echo hi", 7, id, note, sizeof(note));
        ck_assert_msg(strncmp(note, "not recorded (cannot open the audit file: ", 42) == 0, "%s",
                      note);
        contents = slurp(target);
        ck_assert_str_eq(contents, ""); /* nothing written through the link */
        audit_close(log);
}
END_TEST

/* --- records ----------------------------------------------------------------------------- */

START_TEST(start_and_end_records)
{
        struct audit_log *log = open_log();
        char id[33];
        regex_t re;
        json_object *s, *e, *nm;

        start(log, "abc", id);
        ck_assert_uint_eq(strlen(id), 32);
        end(log, id);

        s = record(audit_path(log), 0);
        ck_assert_int_eq(get_i(s, "v"), 1);
        ck_assert_str_eq(get_s(s, "kind"), "start");
        ck_assert_str_eq(get_s(s, "id"), id);
        ck_assert_int_eq(
            regcomp(&re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
                    REG_EXTENDED),
            0);
        ck_assert_msg(regexec(&re, get_s(s, "time"), 0, NULL, 0) == 0, "%s", get_s(s, "time"));
        ck_assert_int_eq(get_i(s, "pid"), getpid());
        ck_assert_str_eq(get_s(s, "language"), "python");
        ck_assert_int_eq(get_i(s, "timeout_s"), 10);
        ck_assert_str_eq(get_s(s, "backend"), "naive");
        ck_assert_str_eq(get_s(s, "code"), "abc");
        ck_assert_int_eq(get_i(s, "code_bytes"), 3);
        ck_assert(!get_b(s, "code_truncated"));
        ck_assert(get_b(s, "code_utf8"));
        ck_assert_str_eq(get_s(s, "code_sha256"),
                         "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

        e = record(audit_path(log), 1);
        ck_assert_str_eq(get_s(e, "kind"), "end");
        ck_assert_str_eq(get_s(e, "id"), id);
        ck_assert_msg(regexec(&re, get_s(e, "time"), 0, NULL, 0) == 0, "%s", get_s(e, "time"));
        regfree(&re);
        ck_assert_str_eq(get_s(e, "outcome"), "exited");
        ck_assert_int_eq(get_i(e, "exit_code"), 3);
        ck_assert(is_null(e, "signal"));
        ck_assert_int_eq(get_i(e, "wall_ms"), 118);
        ck_assert_int_eq(get_i(e, "cpu_us"), 30000);
        ck_assert(is_null(e, "mem_peak_bytes"));
        ck_assert_int_eq(get_i(e, "pids_peak"), 3);
        ck_assert(json_object_object_get_ex(e, "not_measured", &nm));
        ck_assert_str_eq(get_s(nm, "mem_peak_bytes"), "Linux 5.19+ needed");
        ck_assert_int_eq(get_i(e, "stdout_bytes"), 12345);
        ck_assert_int_eq(get_i(e, "stderr_bytes"), 7);
        ck_assert_str_eq(get_s(e, "blocked_syscalls"), "mount, bpf");
        ck_assert(!get_b(e, "oom"));
        ck_assert_str_eq(get_s(e, "limits_hit"), "pids");
        ck_assert_str_eq(get_s(e, "image"), "python-rootfs");
        ck_assert_str_eq(get_s(e, "backend"), "native");
        ck_assert_str_eq(get_s(e, "isolation"), "native");
        json_object_put(s);
        json_object_put(e);

        /* Never the output's content. */
        _cleanup_free_ char *all = slurp(audit_path(log));
        ck_assert_ptr_null(strstr(all, "SECRET-OUTPUT"));
        ck_assert_uint_eq(count_lines(all), 2);
        audit_close(log);
}
END_TEST

START_TEST(end_record_outcomes)
{
        struct audit_log *log = open_log();
        static const struct {
                enum run_outcome o;
                const char *name;
        } cases[] = {
            {RUN_OUTCOME_NONE, "failed"},         {RUN_OUTCOME_SIGNALED, "signaled"},
            {RUN_OUTCOME_TIMED_OUT, "timed_out"}, {RUN_OUTCOME_CANCELLED, "cancelled"},
            {RUN_OUTCOME_FLOODED, "flooded"},
        };
        char note[256];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct run_result r;
                fake_result(&r);
                r.outcome = cases[i].o;
                r.term_signal = 9;
                r.oom_killed = i == 0;
                r.mem_limit_bytes = 256u << 20;
                audit_end(log, "someid", &r, note, sizeof(note));
                ck_assert_str_eq(note, "");
        }
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *e = record(audit_path(log), (int)i);
                ck_assert_str_eq(get_s(e, "outcome"), cases[i].name);
                ck_assert(is_null(e, "exit_code"));
                if (cases[i].o == RUN_OUTCOME_SIGNALED) {
                        ck_assert_int_eq(get_i(e, "signal"), 9);
                        ck_assert_str_eq(get_s(e, "signal_name"), "SIGKILL");
                } else
                        ck_assert(is_null(e, "signal"));
                ck_assert(get_b(e, "oom") == (i == 0));
                if (i == 0)
                        ck_assert_int_eq(get_i(e, "mem_limit_bytes"), 256 << 20);
                json_object_put(e);
        }
        audit_close(log);
}
END_TEST

/* Issue 22 item 5 (leftover of issue 24's Low): the egress decisions in the end record carry
 * bytes_unknown, the allowed connections whose bytes were never recorded (open when the proxy
 * died); a connection that ended has 0 (the control). */
START_TEST(end_record_egress_bytes_unknown)
{
        struct audit_log *log = open_log();
        struct run_egress_entry ents[2] = {
            {.host = "pypi.vst.test",
             .port = 80,
             .allowed = true,
             .connections = 2,
             .bytes_up = 10,
             .bytes_down = 20,
             .bytes_unknown = 1},
            {.host = "files.vst.test", .port = 80, .allowed = true, .connections = 1},
        };
        struct run_result r;
        char note[256];
        json_object *e, *g, *d;

        fake_result(&r);
        r.egress.on = true;
        r.egress.entries = ents;
        r.egress.n_entries = 2;
        audit_end(log, "someid", &r, note, sizeof(note));
        ck_assert_str_eq(note, "");
        e = record(audit_path(log), 0);
        ck_assert(json_object_object_get_ex(e, "egress", &g));
        ck_assert(json_object_object_get_ex(g, "decisions", &d));
        ck_assert_uint_eq(json_object_array_length(d), 2);
        ck_assert_str_eq(get_s(json_object_array_get_idx(d, 0), "host"), "pypi.vst.test");
        ck_assert_int_eq(get_i(json_object_array_get_idx(d, 0), "connections"), 2);
        ck_assert_int_eq(get_i(json_object_array_get_idx(d, 0), "bytes_up"), 10);
        ck_assert_int_eq(get_i(json_object_array_get_idx(d, 0), "bytes_unknown"), 1);
        ck_assert_int_eq(get_i(json_object_array_get_idx(d, 1), "bytes_unknown"), 0);
        json_object_put(e);
        audit_close(log);
}
END_TEST

START_TEST(code_cut_at_4k_on_a_character)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *code = xmalloc(5001);
        char id[33], want[65];
        json_object *s;

        memset(code, 'a', 5000);
        code[5000] = '\0';
        start(log, code, id);
        /* 4095 bytes, then a 2-byte character across the 4 KiB mark. */
        code[4095] = '\xc3';
        code[4096] = '\xa9';
        start(log, code, id);

        s = record(audit_path(log), 0);
        ck_assert_uint_eq(strlen(get_s(s, "code")), 4096);
        ck_assert(get_b(s, "code_truncated"));
        ck_assert_int_eq(get_i(s, "code_bytes"), 5000);
        memset(code + 4095, 'a', 2);
        sha256_hex(code, 5000, want); /* of all 5000 bytes, not of the kept 4096 */
        ck_assert_str_eq(get_s(s, "code_sha256"), want);
        json_object_put(s);

        s = record(audit_path(log), 1);
        ck_assert_uint_eq(strlen(get_s(s, "code")), 4095);
        ck_assert(get_b(s, "code_utf8"));
        json_object_put(s);
        audit_close(log);
}
END_TEST

START_TEST(code_not_utf8_is_escaped)
{
        struct audit_log *log = open_log();
        static const char code[] = "a\xff"
                                   "b\x1b[31m\xc2\x9b\"q\"\\";
        char id[33], note[256], want[65];
        json_object *s;
        _cleanup_free_ char *raw = NULL;

        audit_start(log, SBX_LANG_NODE, 3, NULL, code, sizeof(code) - 1, id, note, sizeof(note));
        ck_assert_str_eq(note, "");
        raw = slurp(audit_path(log));
        /* The raw file holds no control bytes and no C1 either. */
        ck_assert_ptr_null(strchr(raw, '\x1b'));
        ck_assert_ptr_null(strstr(raw, "\xc2\x9b"));
        ck_assert_ptr_null(memchr(raw, 0xff, strlen(raw)));
        s = record(audit_path(log), 0);
        ck_assert_str_eq(get_s(s, "code"), "a\\xffb\x1b[31m\xc2\x9b\"q\"\\");
        ck_assert(!get_b(s, "code_utf8"));
        ck_assert(is_null(s, "backend"));
        ck_assert_str_eq(get_s(s, "language"), "node");
        sha256_hex(code, sizeof(code) - 1, want);
        ck_assert_str_eq(get_s(s, "code_sha256"), want);
        json_object_put(s);
        audit_close(log);
}
END_TEST

START_TEST(blocked_record)
{
        struct audit_log *log = open_log();
        char note[256];
        json_object *b;

        audit_blocked(log, "cobol", "DISPLAY 'HI'.", 13,
                      "Blocked: language 'cobol' is not supported; use python, node or bash", note,
                      sizeof(note));
        ck_assert_str_eq(note, "");
        audit_blocked(log, NULL, NULL, 0, NULL, note, sizeof(note));
        ck_assert_str_eq(note, "");
        b = record(audit_path(log), 0);
        ck_assert_str_eq(get_s(b, "kind"), "blocked");
        ck_assert_uint_eq(strlen(get_s(b, "id")), 32);
        ck_assert_str_eq(get_s(b, "language"), "cobol");
        ck_assert_str_eq(get_s(b, "code"), "DISPLAY 'HI'.");
        ck_assert_int_eq(get_i(b, "code_bytes"), 13);
        ck_assert_uint_eq(strlen(get_s(b, "code_sha256")), 64);
        ck_assert_ptr_nonnull(strstr(get_s(b, "reason"), "cobol"));
        json_object_put(b);
        b = record(audit_path(log), 1);
        ck_assert(is_null(b, "language"));
        ck_assert_str_eq(get_s(b, "code"), "");
        ck_assert_str_eq(get_s(b, "code_sha256"),
                         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        json_object_put(b);
        audit_close(log);
}
END_TEST

static void *writer_thread(void *arg)
{
        struct audit_log *log = arg;
        for (int i = 0; i < 20; i++) {
                char id[33];
                start(log, "print('concurrent')", id);
                end(log, id);
        }
        return NULL;
}

START_TEST(concurrent_writers)
{
        struct audit_log *log = open_log();
        pthread_t t[6];

        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, writer_thread, log), 0);
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                pthread_join(t[i], NULL);
        _cleanup_free_ char *all = slurp(audit_path(log));
        ck_assert_uint_eq(count_lines(all), (size_t)6 * 20 * 2);
        _cleanup_free_ char *out = print(cfg.audit_dir, 0, false);
        ck_assert_uint_eq(count_lines(out), (size_t)6 * 20);
        ck_assert_ptr_null(strstr(out, "no end"));
        ck_assert_ptr_null(strstr(out, "skipped"));
        audit_close(log);
}
END_TEST

START_TEST(writer_thread_takes_no_signals)
{
        struct audit_log *log = open_log();
        char id[33], path[300], line[256];
        int others = 0;
        DIR *d;
        struct dirent *de;

        start(log, "print(1)", id); /* starts the writer */
        d = opendir("/proc/self/task");
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || atoi(de->d_name) == getpid())
                        continue;
                snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                while (fgets(line, sizeof(line), f))
                        if (strncmp(line, "SigBlk:", 7) == 0) {
                                unsigned long long mask = strtoull(line + 7, NULL, 16);
                                ck_assert_msg(mask & (1ULL << (SIGTERM - 1)), "%s", line);
                                ck_assert_msg(mask & (1ULL << (SIGCHLD - 1)), "%s", line);
                                ck_assert_msg(mask & (1ULL << (SIGINT - 1)), "%s", line);
                                others++;
                        }
                fclose(f);
        }
        closedir(d);
        ck_assert_int_eq(others, 1);
        /* Control: this (main) thread's own mask is untouched. */
        sigset_t cur;
        ck_assert_int_eq(pthread_sigmask(SIG_SETMASK, NULL, &cur), 0);
        ck_assert(!sigismember(&cur, SIGTERM));
        audit_close(log);
}
END_TEST

START_TEST(deleted_file_is_recreated)
{
        struct audit_log *log = open_log();
        char id[33];
        _cleanup_free_ char *all = NULL;
        struct stat st;

        start(log, "print(1)", id);
        ck_assert_int_eq(unlink(audit_path(log)), 0);
        start(log, "print(2)", id);
        ck_assert_int_eq(stat(audit_path(log), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0600);
        all = slurp(audit_path(log));
        ck_assert_uint_eq(count_lines(all), 1);
        ck_assert_ptr_nonnull(strstr(all, "print(2)"));
        audit_close(log);
}
END_TEST

/* --- refusals and failures --------------------------------------------------------------- */

static void expect_refused(const char *audit_dir, const char *needle)
{
        struct audit_log *log = NULL;
        struct sbx_error err = {0};
        char *saved = cfg.audit_dir;

        cfg.audit_dir = (char *)audit_dir;
        ck_assert_msg(audit_open(&cfg, &log, &err) == -EINVAL, "'%s' accepted", audit_dir);
        cfg.audit_dir = saved;
        ck_assert_ptr_null(log);
        ck_assert_msg(strstr(err.msg, needle), "'%s': %s", audit_dir, err.msg);
        ck_assert_msg(strstr(err.msg, "VESTIBULE_AUDIT_DIR"), "%s", err.msg);
}

START_TEST(refuses_folder_inside_workspace_or_rootfs)
{
        _cleanup_free_ char *in_ws = xasprintf("%s/audit", cfg.workspace_dir);
        _cleanup_free_ char *in_rootfs = xasprintf("%s/python/audit", cfg.rootfs_dir);
        _cleanup_free_ char *dotted = xasprintf("%s/state//./workspace/", top);
        _cleanup_free_ char *parent = xasprintf("%s/state", top);
        _cleanup_free_ char *link = xasprintf("%s/link", top);
        _cleanup_free_ char *via_link = xasprintf("%s/link/audit", top);
        _cleanup_free_ char *sibling = xasprintf("%s/state/workspace2", top);
        struct audit_log *log = NULL;
        struct sbx_error err = {0};

        /* Nothing exists yet: compared as normalised paths. */
        expect_refused(in_ws, "the workspace");
        expect_refused(in_rootfs, "the rootfs folder");
        expect_refused(dotted, "the workspace");
        expect_refused(parent, "the workspace"); /* the workspace would be inside the log */
        expect_refused("relative/audit", "not an absolute path");

        /* Through a symlink to the existing workspace: only resolving shows it. */
        ck_assert_int_eq(mkdir(parent, 0700), 0);
        ck_assert_int_eq(mkdir(cfg.workspace_dir, 0700), 0);
        ck_assert_int_eq(symlink(cfg.workspace_dir, link), 0);
        expect_refused(via_link, "the workspace");

        /* Control: a sibling folder whose name starts the same is fine. */
        char *saved = cfg.audit_dir;
        cfg.audit_dir = sibling;
        ck_assert_msg(audit_open(&cfg, &log, &err) == 0, "%s", err.msg);
        cfg.audit_dir = saved;
        audit_close(log);
}
END_TEST

START_TEST(unwritable_folder_gives_a_note)
{
        _cleanup_free_ char *file = xasprintf("%s/plainfile", top);
        _cleanup_free_ char *bad = xasprintf("%s/plainfile/audit", top);
        struct audit_log *log = NULL;
        struct sbx_error err = {0};
        struct run_result r;
        char id[33] = "", note[256];
        int fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);

        ck_assert_int_ge(fd, 0);
        close(fd);
        free(cfg.audit_dir);
        cfg.audit_dir = xstrdup(bad);
        ck_assert_int_eq(audit_open(&cfg, &log, &err), 0);
        audit_start(log, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id, note, sizeof(note));
        ck_assert_str_eq(note, "not recorded (cannot create the audit folder: Not a directory)");
        ck_assert_uint_eq(strlen(id), 32); /* an id all the same, for the end record */
        fake_result(&r);
        audit_end(log, id, &r, note, sizeof(note));
        ck_assert_str_eq(note, "not recorded (cannot create the audit folder: Not a directory)");
        audit_blocked(log, "python", "x", 1, "why", note, sizeof(note));
        ck_assert_ptr_nonnull(strstr(note, "not recorded ("));
        audit_close(log);

        /* No log at all: a note too, never a crash. */
        audit_start(NULL, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id, note, sizeof(note));
        ck_assert_ptr_nonnull(strstr(note, "not recorded ("));
}
END_TEST

/* Root ignores modes: run @fn in a child that drops to the unprivileged test ids first. */
static void as_unprivileged(void (*fn)(int out_fd), char *buf, size_t size)
{
        int p[2];
        pid_t pid;
        ssize_t n;
        size_t got = 0;
        int status;

        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(2000, 2000, 2000) < 0 ||
                                       setresuid(2000, 2000, 2000) < 0))
                        _exit(3);
                fn(p[1]);
                _exit(0);
        }
        close(p[1]);
        while ((n = read(p[0], buf + got, size - 1 - got)) > 0)
                got += (size_t)n;
        buf[got] = '\0';
        close(p[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static void start_and_report(int out_fd)
{
        struct audit_log *log = NULL;
        struct sbx_error err = {0};
        char id[33], note[256];

        if (audit_open(&cfg, &log, &err) < 0)
                _exit(4);
        audit_start(log, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id, note, sizeof(note));
        (void)!write(out_fd, note, strlen(note));
        audit_close(log);
}

START_TEST(permission_denied_gives_a_note)
{
        _cleanup_free_ char *state = xasprintf("%s/state", top);
        char note[512];

        /* A folder the server's user may not write to; control: a writable one records. */
        ck_assert_int_eq(chmod(top, 0755), 0);
        ck_assert_int_eq(mkdir(state, 0555), 0);
        as_unprivileged(start_and_report, note, sizeof(note));
        ck_assert_str_eq(note, "not recorded (cannot create the audit folder: Permission denied)");

        ck_assert_int_eq(chmod(state, 0777), 0);
        as_unprivileged(start_and_report, note, sizeof(note));
        ck_assert_str_eq(note, "");
}
END_TEST

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(stalled_disk_is_not_confirmed_after_2s)
{
        struct audit_log *log = open_log();
        char id[33], note[256];
        double t0, dt;

        audit_set_writer_delay_ms(log, 3000);
        t0 = now_s();
        audit_start(log, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id, note, sizeof(note));
        dt = now_s() - t0;
        ck_assert_str_eq(note, "not confirmed (the disk did not answer within 2 s)");
        ck_assert_msg(dt >= 1.9 && dt < 2.8, "waited %.2f s", dt);
        /* The writer finishes later, and close waits for it (it is done within 2 s). */
        audit_close(log);
        {
                /* The path is gone with the log; find the one file. */
                _cleanup_free_ char *out = print(cfg.audit_dir, 0, true);
                ck_assert_uint_eq(count_lines(out), 1);
                ck_assert_ptr_nonnull(strstr(out, id));
        }
}
END_TEST

/* --- the start record in the background (audit_start_async) ------------------------------- */

/* The record is queued at once and on disk once the wait returns without a note; an end
 * record written before that wait still lands after it. */
START_TEST(async_start_lands_before_the_end)
{
        struct audit_log *log = open_log();
        struct audit_pending *p;
        char id[33], note[256] = "x";
        json_object *s, *e;

        p = audit_start_async(log, SBX_LANG_NODE, 7, "native", "1+1", 3, id);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq(strlen(id), 32);
        end(log, id); /* before the wait: the queue keeps the order */
        audit_pending_wait(p, note, sizeof(note));
        ck_assert_msg(note[0] == '\0', "note: %s", note);

        s = record(audit_path(log), 0);
        e = record(audit_path(log), 1);
        ck_assert_str_eq(get_s(s, "kind"), "start");
        ck_assert_str_eq(get_s(s, "id"), id);
        ck_assert_str_eq(get_s(s, "language"), "node");
        ck_assert_int_eq(get_i(s, "timeout_s"), 7);
        ck_assert_str_eq(get_s(s, "code"), "1+1");
        ck_assert_str_eq(get_s(e, "kind"), "end");
        ck_assert_str_eq(get_s(e, "id"), id);
        json_object_put(s);
        json_object_put(e);
        audit_close(log);
}
END_TEST

/* The wait is bounded by 2 s from the queueing, not from the wait: a run that took longer than
 * that while the disk hung adds nothing to the result's time, and still says not confirmed. */
START_TEST(async_start_late_wait_adds_nothing)
{
        struct audit_log *log = open_log();
        struct audit_pending *p;
        char id[33], note[256];
        double t0, dt;

        audit_set_writer_delay_ms(log, 4000);
        p = audit_start_async(log, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id);
        usleep(2300 * 1000);
        t0 = now_s();
        audit_pending_wait(p, note, sizeof(note));
        dt = now_s() - t0;
        ck_assert_str_eq(note, "not confirmed (the disk did not answer within 2 s)");
        /* the deadline has passed already: no second 2 s wait (generous bound for load) */
        ck_assert_msg(dt < 1.0, "waited %.2f s", dt);
        audit_close(log);
}
END_TEST

/* Group commit (a session's cell): a start record that may wait for its end record is
 * confirmed together with it as soon as the end record comes, not after its whole wait; both
 * land in order. Control: alone, it is confirmed only once its wait is over. */
START_TEST(batched_start_is_confirmed_with_its_end)
{
        struct audit_log *log = open_log();
        struct audit_pending *p, *q;
        char id[33], note[256] = "x", enote[256] = "x";
        struct run_result res = {0};
        json_object *s, *e;
        double t0, dt;

        /* control: nothing follows, so the writer waits the 400 ms before the sync */
        t0 = now_s();
        p = audit_start_async_batch(log, SBX_LANG_PYTHON, 10, "native", "a = 1", 5, 400, id);
        audit_pending_wait(p, note, sizeof(note));
        dt = now_s() - t0;
        ck_assert_msg(note[0] == '\0', "note: %s", note);
        ck_assert_msg(dt >= 0.35, "confirmed after %.3f s, before its wait was over", dt);
        end(log, id);

        /* the end record follows at once: both confirmed well before the 2 s wait is over */
        res.outcome = RUN_OUTCOME_EXITED;
        t0 = now_s();
        p = audit_start_async_batch(log, SBX_LANG_PYTHON, 10, "native", "a", 1, 2000, id);
        q = audit_end_async(log, id, &res);
        audit_pending_wait(p, note, sizeof(note));
        audit_pending_wait(q, enote, sizeof(enote));
        dt = now_s() - t0;
        ck_assert_msg(note[0] == '\0' && enote[0] == '\0', "notes: %s / %s", note, enote);
        ck_assert_msg(dt < 1.0, "confirmed after %.3f s: the writer waited out its 2 s", dt);
        s = record(audit_path(log), 2);
        e = record(audit_path(log), 3);
        ck_assert_str_eq(get_s(s, "kind"), "start");
        ck_assert_str_eq(get_s(s, "id"), id);
        ck_assert_str_eq(get_s(e, "kind"), "end");
        ck_assert_str_eq(get_s(e, "id"), id);
        json_object_put(s);
        json_object_put(e);
        audit_close(log);
}
END_TEST

/* A closed log (NULL) and a NULL pending record: the note says so, nothing crashes. */
START_TEST(async_start_without_a_log)
{
        struct audit_pending *p;
        char id[33], note[256] = "x";

        p = audit_start_async(NULL, SBX_LANG_PYTHON, 10, "naive", "print(1)", 8, id);
        ck_assert_ptr_nonnull(p);
        audit_pending_wait(p, note, sizeof(note));
        ck_assert_str_eq(note, "not recorded (the audit log is not open)");
        snprintf(note, sizeof(note), "x");
        audit_pending_wait(NULL, note, sizeof(note));
        ck_assert_str_eq(note, "");
}
END_TEST

/* --- audit_print ------------------------------------------------------------------------- */

START_TEST(print_joins_and_shows_no_end)
{
        struct audit_log *log = open_log();
        char id1[33], id2[33], note[256];
        _cleanup_free_ char *out = NULL;
        char *line2;

        start(log, "print(1)\nprint(2)", id1);
        end(log, id1);
        start(log, "import time\ntime.sleep(100)", id2);
        audit_blocked(log, "ruby", "puts 1", 6, "Blocked: language 'ruby' is not supported", note,
                      sizeof(note));
        out = print(cfg.audit_dir, 20, false);
        ck_assert_uint_eq(count_lines(out), 3);
        ck_assert_msg(strstr(out, "python  exited (exit code 3)  wall 118 ms, cpu 30 ms, "
                                  "pids_peak 3  isolation: native  blocked syscalls: mount, bpf"
                                  "  | print(1) ..."),
                      "%s", out);
        line2 = strchr(out, '\n') + 1;
        ck_assert_msg(strncmp(strstr(line2, "python"), "python  no end  | import time ...", 33) ==
                          0,
                      "%s", out);
        ck_assert_msg(strstr(out, "ruby  blocked: Blocked: language 'ruby' is not supported  | "
                                  "puts 1\n"),
                      "%s", out);
        audit_close(log);
}
END_TEST

START_TEST(print_last_n)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *out = NULL, *all = NULL;

        for (int i = 0; i < 30; i++) {
                char id[33];
                _cleanup_free_ char *code = xasprintf("print(%d)", i);
                start(log, code, id);
                end(log, id);
        }
        out = print(cfg.audit_dir, 5, false);
        ck_assert_uint_eq(count_lines(out), 5);
        ck_assert_ptr_nonnull(strstr(out, "| print(25)\n"));
        ck_assert_ptr_nonnull(strstr(out, "| print(29)\n"));
        ck_assert_ptr_null(strstr(out, "| print(24)\n"));
        /* The newest last. */
        const char *tail = "| print(29)\n";
        ck_assert_str_eq(out + strlen(out) - strlen(tail), tail);
        all = print(cfg.audit_dir, 0, false);
        ck_assert_uint_eq(count_lines(all), 30);
        audit_close(log);
}
END_TEST

static bool terminal_safe(const char *s)
{
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '\n')
                        continue;
                if (*p < 0x20 || *p == 0x7f)
                        return false;
                if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) /* C1 */
                        return false;
        }
        return true;
}

START_TEST(print_escapes_everything)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *out = NULL, *json = NULL, *extra = NULL;
        static const char evil[] = "\x1b]0;pwned\x07print(1)\xc2\x9b"
                                   "2J\xe2\x80\xae"
                                   "cba\xff\ttab";
        char id[33], note[256];

        audit_start(log, SBX_LANG_BASH, 10, "naive", evil, sizeof(evil) - 1, id, note,
                    sizeof(note));
        ck_assert_str_eq(note, "");
        audit_close(log);
        /* A hand-made file with raw control bytes in its strings, as a tamperer might write. */
        extra = xasprintf("%s/20000101T000000Z-1.jsonl", cfg.audit_dir);
        int fd = open(extra, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        static const char line[] =
            "{\"v\":1,\"kind\":\"blocked\",\"id\":\"x\",\"time\":\"t\x1b[2J\","
            "\"language\":\"py\x9b\",\"code\":\"c\",\"reason\":\"r\x07\"}\n";
        ck_assert_int_eq(write(fd, line, sizeof(line) - 1), (ssize_t)sizeof(line) - 1);
        close(fd);

        out = print(cfg.audit_dir, 0, false);
        ck_assert_msg(terminal_safe(out), "%s", out);
        ck_assert_msg(strstr(out, "\\x1b]0;pwned\\x07print(1)\\u009b2J\\u202ecba\\xff\\x09tab"),
                      "%s", out);
        ck_assert_msg(strstr(out, "t\\x1b[2J"), "%s", out);
        ck_assert_msg(strstr(out, "py\\x9b"), "%s", out);
        ck_assert_msg(strstr(out, "r\\x07"), "%s", out);

        json = print(cfg.audit_dir, 0, true);
        ck_assert_uint_eq(count_lines(json), 2);
        for (const unsigned char *p = (const unsigned char *)json; *p; p++)
                ck_assert_msg(*p == '\n' || (*p >= 0x20 && *p < 0x7f), "byte 0x%02x in --json", *p);
        /* Each line is JSON again. */
        char *save = NULL;
        for (char *l = strtok_r(json, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                json_object *o = json_tokener_parse(l);
                ck_assert_msg(o, "not JSON: %s", l);
                json_object_put(o);
        }
}
END_TEST

/* Issue 24: line and paragraph separators, zero-width space, BOM and soft hyphen are invisible or
 * break a line on a terminal; they are printed as \uXXXX like the bidi controls. */
START_TEST(print_escapes_invisible_characters)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *out = NULL;
        static const char code[] = "a\xe2\x80\xa8"
                                   "b\xe2\x80\xa9"
                                   "c\xe2\x80\x8b"
                                   "d\xef\xbb\xbf"
                                   "e\xc2\xad"
                                   "f\xc3\xa9";
        char id[33], note[256];

        audit_start(log, SBX_LANG_BASH, 10, "naive", code, sizeof(code) - 1, id, note,
                    sizeof(note));
        ck_assert_str_eq(note, "");
        audit_close(log);
        out = print(cfg.audit_dir, 0, false);
        ck_assert_msg(strstr(out, "| a\\u2028b\\u2029c\\u200bd\\ufeffe\\u00adf\xc3\xa9\n"), "%s",
                      out);
}
END_TEST

START_TEST(print_json_joined)
{
        struct audit_log *log = open_log();
        _cleanup_free_ char *out = NULL;
        char id1[33], id2[33];
        json_object *o, *st;

        start(log, "print(1)", id1);
        end(log, id1);
        start(log, "print(2)", id2);
        out = print(cfg.audit_dir, 0, true);
        ck_assert_uint_eq(count_lines(out), 2);
        char *nl = strchr(out, '\n');
        *nl = '\0';
        o = json_tokener_parse(out);
        ck_assert_ptr_nonnull(o);
        ck_assert_str_eq(get_s(o, "id"), id1);
        ck_assert_str_eq(get_s(o, "status"), "ended");
        ck_assert(json_object_object_get_ex(o, "start", &st));
        ck_assert_str_eq(get_s(st, "code"), "print(1)");
        ck_assert(json_object_object_get_ex(o, "end", &st));
        ck_assert_str_eq(get_s(st, "outcome"), "exited");
        json_object_put(o);
        o = json_tokener_parse(nl + 1);
        ck_assert_ptr_nonnull(o);
        ck_assert_str_eq(get_s(o, "status"), "no end");
        json_object_put(o);
        audit_close(log);
}
END_TEST

START_TEST(print_across_files_and_corrupt_lines)
{
        _cleanup_free_ char *f1 = NULL, *f2 = NULL, *out = NULL;
        int fd;

        _cleanup_free_ char *state = xasprintf("%s/state", top);
        ck_assert_int_eq(mkdir(state, 0700), 0);
        ck_assert_int_eq(mkdir(cfg.audit_dir, 0700), 0);
        f1 = xasprintf("%s/20260102T000000Z-7.jsonl", cfg.audit_dir);
        f2 = xasprintf("%s/20260101T000000Z-9.jsonl", cfg.audit_dir);
        /* The older file (by name) holds the start; the newer one its end and junk. */
        static const char older[] =
            "{\"v\":1,\"kind\":\"start\",\"id\":\"A\",\"time\":\"2026-01-01T00:00:00.000Z\","
            "\"language\":\"python\",\"code\":\"first()\"}\n"
            "not json at all\n"
            "{\"kind\":1,\"id\":\"B\"}\n"
            "{\"v\":1,\"kind\":\"start\",\"id\":\"B\",\"time\":\"2026-01-01T00:00:01.000Z\","
            "\"language\":\"node\",\"code\":\"second()\"}\n";
        static const char newer[] =
            "{\"v\":1,\"kind\":\"end\",\"id\":\"A\",\"time\":\"2026-01-02T00:00:00.000Z\","
            "\"outcome\":\"timed_out\",\"exit_code\":null,\"wall_ms\":10000,"
            "\"isolation\":\"none (naive: development only)\"}\n"
            "{\"v\":1,\"kind\":\"end\",\"id\":\"Z\",\"time\":\"2026-01-02T00:00:01.000Z\","
            "\"outcome\":\"exited\",\"exit_code\":0,\"isolation\":\"native\"}\n"
            "{\"v\":1,\"kind\":\"start\",\"id\":\"C\",\"ti";
        fd = open(f2, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(write(fd, older, sizeof(older) - 1), (ssize_t)sizeof(older) - 1);
        close(fd);
        fd = open(f1, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_eq(write(fd, newer, sizeof(newer) - 1), (ssize_t)sizeof(newer) - 1);
        close(fd);

        out = print(cfg.audit_dir, 0, false);
        ck_assert_msg(count_lines(out) == 4, "%s", out); /* A, B, Z, and the footer */
        ck_assert_msg(strstr(out, "2026-01-01T00:00:00.000Z  python  timed_out  wall 10000 ms  "
                                  "isolation: none (naive: development only)  | first()\n"),
                      "%s", out);
        ck_assert_msg(strstr(out, "node  no end  | second()\n"), "%s", out);
        ck_assert_msg(strstr(out, "?  exited (exit code 0), start record missing"), "%s", out);
        ck_assert_msg(strstr(out, "(skipped 3 unreadable lines and 0 unreadable files"), "%s", out);
}
END_TEST

START_TEST(print_missing_or_empty_folder)
{
        _cleanup_free_ char *out = print(cfg.audit_dir, 20, false);
        ck_assert_msg(strstr(out, "no audit records yet"), "%s", out);
        free(out);
        out = print(cfg.audit_dir, 20, true);
        ck_assert_str_eq(out, "");
        free(out);
        _cleanup_free_ char *state = xasprintf("%s/state", top);
        ck_assert_int_eq(mkdir(state, 0700), 0);
        ck_assert_int_eq(mkdir(cfg.audit_dir, 0700), 0);
        out = print(cfg.audit_dir, 20, false);
        ck_assert_msg(strstr(out, "no audit records yet in"), "%s", out);
}
END_TEST

static Suite *audit_suite(void)
{
        Suite *s = suite_create("audit");
        TCase *tc;

        tc = tcase_create("files");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, open_creates_nothing_and_names_the_file);
        tcase_add_test(tc, modes_0700_folders_0600_file);
        tcase_add_test(tc, existing_folder_keeps_its_mode);
        tcase_add_test(tc, planted_symlink_is_not_followed);
        suite_add_tcase(s, tc);

        tc = tcase_create("records");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, start_and_end_records);
        tcase_add_test(tc, end_record_outcomes);
        tcase_add_test(tc, end_record_egress_bytes_unknown);
        tcase_add_test(tc, code_cut_at_4k_on_a_character);
        tcase_add_test(tc, code_not_utf8_is_escaped);
        tcase_add_test(tc, blocked_record);
        tcase_add_test(tc, concurrent_writers);
        tcase_add_test(tc, deleted_file_is_recreated);
        tcase_add_test(tc, writer_thread_takes_no_signals);
        suite_add_tcase(s, tc);

        tc = tcase_create("refusals_and_failures");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, refuses_folder_inside_workspace_or_rootfs);
        tcase_add_test(tc, unwritable_folder_gives_a_note);
        tcase_add_test(tc, permission_denied_gives_a_note);
        tcase_add_test(tc, stalled_disk_is_not_confirmed_after_2s);
        tcase_set_timeout(tc, 30);
        suite_add_tcase(s, tc);

        tc = tcase_create("async_start");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, async_start_lands_before_the_end);
        tcase_add_test(tc, async_start_late_wait_adds_nothing);
        tcase_add_test(tc, async_start_without_a_log);
        tcase_add_test(tc, batched_start_is_confirmed_with_its_end);
        tcase_set_timeout(tc, 30);
        suite_add_tcase(s, tc);

        tc = tcase_create("print");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, print_joins_and_shows_no_end);
        tcase_add_test(tc, print_last_n);
        tcase_add_test(tc, print_escapes_everything);
        tcase_add_test(tc, print_escapes_invisible_characters);
        tcase_add_test(tc, print_json_joined);
        tcase_add_test(tc, print_across_files_and_corrupt_lines);
        tcase_add_test(tc, print_missing_or_empty_folder);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return sbx_test_run(audit_suite());
}
