/* reader.c - `vestibule-mcp audit`: the audit log read back and printed.
 *
 * audit_print() joins start and end by id across all *.jsonl files of the folder
 * (sorted by name, which starts with the file's UTC creation time), and prints every value
 * escaped again (control bytes, C1, bidi overrides, invalid UTF-8), since anyone who can write
 * the folder can put anything in it (invisible and line-breaking characters too: issue 24).
 * Unreadable lines are skipped and counted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit-internal.h"
#include "audit/audit.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* --- reading: `vestibule-mcp audit` ------------------------------------------------------ */

/* Append @s escaped for a terminal (sbx_term_escape(): the one escaper every console
 * printer of untrusted text uses). */
static void sb_term(struct sbx_buf *b, const char *s, size_t n)
{
        _cleanup_free_ char *e = sbx_term_escape(s, n, false);

        (void)sbx_buf_puts(b, e);
}

/* ASCII-only JSON: non-ASCII as \uXXXX, so the output is safe on any terminal. */
static void sb_json_ascii_str(struct sbx_buf *b, const char *s, size_t n)
{
        (void)audit_json_str(b, s, n, true);
}

static void sb_json_ascii(struct sbx_buf *b, json_object *o)
{
        switch (json_object_get_type(o)) {
        case json_type_null:
                (void)sbx_buf_puts(b, "null");
                return;
        case json_type_boolean:
                (void)sbx_buf_puts(b, json_object_get_boolean(o) ? "true" : "false");
                return;
        case json_type_int:
                (void)sbx_buf_printf(b, "%lld", (long long)json_object_get_int64(o));
                return;
        case json_type_double:
                if (isfinite(json_object_get_double(o)))
                        (void)sbx_buf_printf(b, "%.17g", json_object_get_double(o));
                else
                        (void)sbx_buf_puts(b, "null");
                return;
        case json_type_string:
                sb_json_ascii_str(b, json_object_get_string(o),
                                  (size_t)json_object_get_string_len(o));
                return;
        case json_type_array: {
                size_t n = json_object_array_length(o);
                (void)sbx_buf_puts(b, "[");
                for (size_t i = 0; i < n; i++) {
                        if (i)
                                (void)sbx_buf_puts(b, ",");
                        sb_json_ascii(b, json_object_array_get_idx(o, i));
                }
                (void)sbx_buf_puts(b, "]");
                return;
        }
        case json_type_object: {
                bool first = true;
                (void)sbx_buf_puts(b, "{");
                json_object_object_foreach(o, key, val)
                {
                        if (!first)
                                (void)sbx_buf_puts(b, ",");
                        first = false;
                        sb_json_ascii_str(b, key, strlen(key));
                        (void)sbx_buf_puts(b, ":");
                        sb_json_ascii(b, val);
                }
                (void)sbx_buf_puts(b, "}");
                return;
        }
        }
}

struct audit_call {
        json_object *start, *end, *blocked; /* borrowed from the records array */
};

struct audit_reader {
        json_object *records; /* array owning every parsed record */
        json_object *by_id;   /* id -> index into calls (start records only) */
        struct audit_call *calls;
        size_t n_calls, cap_calls;
        size_t corrupt;
};

static struct audit_call *call_new(struct audit_reader *rd)
{
        GREEDY_REALLOC(rd->calls, rd->cap_calls, rd->n_calls + 1);
        memset(&rd->calls[rd->n_calls], 0, sizeof(rd->calls[0]));
        return &rd->calls[rd->n_calls++];
}

static const char *jstr(json_object *o, const char *key, size_t *len)
{
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) ||
            !json_object_is_type(v, json_type_string))
                return NULL;
        if (len)
                *len = (size_t)json_object_get_string_len(v);
        return json_object_get_string(v);
}

static bool jint(json_object *o, const char *key, int64_t *ret)
{
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        *ret = json_object_get_int64(v);
        return true;
}

static void reader_line(struct audit_reader *rd, const char *line, size_t len)
{
        enum json_tokener_error jerr;
        json_object *o, *idx;
        const char *kind, *id;

        if (len == 0)
                return;
        if (strlen(line) != len) { /* a NUL byte: not a record we wrote */
                rd->corrupt++;
                return;
        }
        o = json_tokener_parse_verbose(line, &jerr);
        kind = jstr(o, "kind", NULL);
        id = jstr(o, "id", NULL);
        if (!o || !json_object_is_type(o, json_type_object) || !kind || !id) {
                json_object_put(o);
                rd->corrupt++;
                return;
        }
        json_object_array_add(rd->records, o);
        if (strcmp(kind, "start") == 0) {
                struct audit_call *c = call_new(rd);
                c->start = o;
                json_object_object_add(rd->by_id, id,
                                       json_object_new_int64((int64_t)rd->n_calls - 1));
        } else if (strcmp(kind, "blocked") == 0) {
                call_new(rd)->blocked = o;
        } else if (strcmp(kind, "end") == 0) {
                int64_t at;
                if (json_object_object_get_ex(rd->by_id, id, &idx) && rd->calls &&
                    (at = json_object_get_int64(idx)) >= 0 && (size_t)at < rd->n_calls) {
                        struct audit_call *c = &rd->calls[at];
                        if (!c->end) {
                                c->end = o;
                                return;
                        }
                }
                call_new(rd)->end = o; /* its start was lost */
        } else
                rd->corrupt++;
}

static int reader_file(struct audit_reader *rd, int dir_fd, const char *name)
{
        _cleanup_close_ int fd = -1;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        ssize_t n;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return -EINVAL;
        f = fdopen(fd, "r");
        if (!f)
                return -errno;
        fd = -1;
        while ((n = getline(&line, &cap, f)) >= 0) {
                size_t len = (size_t)n;
                if (len && line[len - 1] == '\n')
                        line[--len] = '\0';
                reader_line(rd, line, len);
        }
        return 0;
}

static int name_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "wall 118 ms, cpu 30 ms, mem_peak 14.2 MiB, pids_peak 3" */
static void print_usage(struct sbx_buf *b, json_object *end)
{
        int64_t v;

        if (jint(end, "wall_ms", &v))
                (void)sbx_buf_printf(b, "wall %lld ms", (long long)v);
        if (jint(end, "cpu_us", &v))
                (void)sbx_buf_printf(b, ", cpu %lld ms", (long long)(v / 1000));
        if (jint(end, "mem_peak_bytes", &v))
                (void)sbx_buf_printf(b, ", mem_peak %.1f MiB", (double)v / (1024.0 * 1024.0));
        if (jint(end, "pids_peak", &v))
                (void)sbx_buf_printf(b, ", pids_peak %lld", (long long)v);
}

/* The first line of the code, at most 60 characters, escaped. */
static void print_first_line(struct sbx_buf *b, json_object *rec)
{
        size_t len = 0, i = 0, chars = 0;
        const char *code = jstr(rec, "code", &len);
        bool more;

        if (!code) {
                (void)sbx_buf_puts(b, "(no code)");
                return;
        }
        while (i < len && code[i] == '\n')
                i++; /* skip leading blank lines */
        size_t start = i;
        while (i < len && code[i] != '\n' && chars < 60) {
                int l = sbx_utf8_decode(code + i, len - i, NULL);
                i += l > 0 ? (size_t)l : 1;
                chars++;
        }
        more = i < len;
        sb_term(b, code + start, i - start);
        if (more)
                (void)sbx_buf_puts(b, " ...");
}

static void print_call(struct sbx_buf *b, const struct audit_call *c)
{
        json_object *first = c->start ? c->start : c->blocked ? c->blocked : c->end;
        const char *s;
        size_t len;
        int64_t v;

        s = jstr(first, "time", &len);
        sb_term(b, s ? s : "?", s ? len : 1);
        (void)sbx_buf_puts(b, "  ");
        s = jstr(c->start ? c->start : c->blocked, "language", &len);
        sb_term(b, s ? s : "?", s ? len : 1);
        (void)sbx_buf_puts(b, "  ");
        if (c->blocked) {
                (void)sbx_buf_puts(b, "blocked: ");
                s = jstr(c->blocked, "reason", &len);
                sb_term(b, s ? s : "", s ? (len > 100 ? 100 : len) : 0);
                if (s && len > 100)
                        (void)sbx_buf_puts(b, " ...");
        } else if (!c->end) {
                (void)sbx_buf_puts(b, "no end");
        } else {
                s = jstr(c->end, "outcome", &len);
                sb_term(b, s ? s : "?", s ? len : 1);
                if (jint(c->end, "exit_code", &v))
                        (void)sbx_buf_printf(b, " (exit code %lld)", (long long)v);
                else if ((s = jstr(c->end, "signal_name", &len))) {
                        (void)sbx_buf_puts(b, " (");
                        sb_term(b, s, len);
                        (void)sbx_buf_puts(b, ")");
                }
                if (!c->start)
                        (void)sbx_buf_puts(b, ", start record missing");
                (void)sbx_buf_puts(b, "  ");
                print_usage(b, c->end);
                s = jstr(c->end, "isolation", &len);
                (void)sbx_buf_puts(b, "  isolation: ");
                sb_term(b, s ? s : "?", s ? len : 1);
                s = jstr(c->end, "blocked_syscalls", &len);
                if (s && len) {
                        (void)sbx_buf_puts(b, "  blocked syscalls: ");
                        sb_term(b, s, len);
                }
                s = jstr(c->end, "tried", &len);
                if (s && len) {
                        (void)sbx_buf_puts(b, "  tried: ");
                        sb_term(b, s, len);
                }
        }
        if (c->start || c->blocked) {
                (void)sbx_buf_puts(b, "  | ");
                print_first_line(b, c->start ? c->start : c->blocked);
        }
        (void)sbx_buf_puts(b, "\n");
}

static void print_call_json(struct sbx_buf *b, const struct audit_call *c)
{
        json_object *first = c->start ? c->start : c->blocked ? c->blocked : c->end;
        size_t len = 0;
        const char *id = jstr(first, "id", &len);

        (void)sbx_buf_puts(b, "{\"id\":");
        sb_json_ascii_str(b, id ? id : "", id ? len : 0);
        (void)sbx_buf_puts(b, ",\"status\":");
        (void)sbx_buf_puts(b, c->blocked  ? "\"blocked\""
                              : !c->end   ? "\"no end\""
                              : !c->start ? "\"no start\""
                                          : "\"ended\"");
        if (c->start) {
                (void)sbx_buf_puts(b, ",\"start\":");
                sb_json_ascii(b, c->start);
        }
        if (c->end) {
                (void)sbx_buf_puts(b, ",\"end\":");
                sb_json_ascii(b, c->end);
        }
        if (c->blocked) {
                (void)sbx_buf_puts(b, ",\"blocked\":");
                sb_json_ascii(b, c->blocked);
        }
        (void)sbx_buf_puts(b, "}\n");
}

static int write_all(int fd, const char *s, size_t n, struct sbx_error *err)
{
        while (n > 0) {
                ssize_t w = write(fd, s, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return sbx_fail(err, errno, "cannot write the audit listing: %s",
                                        strerror(errno));
                s += w;
                n -= (size_t)w;
        }
        return 0;
}

static void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

int audit_print(const char *dir, unsigned n, bool json, int out_fd, struct sbx_error *err)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct audit_reader rd = {0};
        struct sbx_buf b = {0}, shown = {0};
        char **names = NULL;
        size_t n_names = 0, cap_names = 0, unreadable = 0, from;
        struct dirent *de;
        int r = 0;

        sb_term(&shown, dir, strlen(dir));
        d = opendir(dir);
        if (!d) {
                int e = errno;
                if (e == ENOENT) {
                        if (!json)
                                (void)sbx_buf_printf(&b,
                                                     "no audit records yet: '%s' does not exist "
                                                     "(VESTIBULE_AUDIT_DIR)\n",
                                                     shown.data);
                        r = write_all(out_fd, b.data ? b.data : "", b.len, err);
                        sbx_buf_done(&b);
                        sbx_buf_done(&shown);
                        return r;
                }
                r = sbx_fail(err, e, "cannot read the audit folder '%s': %s", shown.data,
                             strerror(e));
                sbx_buf_done(&shown);
                return r;
        }
        while ((de = readdir(d))) {
                size_t l = strlen(de->d_name);
                if (l <= 6 || strcmp(de->d_name + l - 6, ".jsonl") != 0 || de->d_name[0] == '.')
                        continue;
                GREEDY_REALLOC(names, cap_names, n_names + 1);
                names[n_names++] = xstrdup(de->d_name);
        }
        if (n_names)
                qsort(names, n_names, sizeof(*names), name_cmp);

        rd.records = json_object_new_array();
        rd.by_id = json_object_new_object();
        for (size_t i = 0; i < n_names; i++) {
                if (reader_file(&rd, dirfd(d), names[i]) < 0)
                        unreadable++;
                free(names[i]);
        }
        free(names);

        from = n && rd.n_calls > n ? rd.n_calls - n : 0;
        for (size_t i = from; i < rd.n_calls; i++) {
                if (json)
                        print_call_json(&b, &rd.calls[i]);
                else
                        print_call(&b, &rd.calls[i]);
        }
        if (!json) {
                if (rd.n_calls == 0)
                        (void)sbx_buf_printf(&b, "no audit records yet in '%s'\n", shown.data);
                if (rd.corrupt || unreadable)
                        (void)sbx_buf_printf(
                            &b,
                            "(skipped %zu unreadable line%s and %zu unreadable file%s "
                            "in '%s')\n",
                            rd.corrupt, rd.corrupt == 1 ? "" : "s", unreadable,
                            unreadable == 1 ? "" : "s", shown.data);
        } else if (rd.corrupt || unreadable)
                log_warning("skipped %zu unreadable lines and %zu unreadable files in '%s'",
                            rd.corrupt, unreadable, shown.data);

        r = write_all(out_fd, b.data ? b.data : "", b.len, err);
        sbx_buf_done(&b);
        sbx_buf_done(&shown);
        free(rd.calls);
        json_object_put(rd.records);
        json_object_put(rd.by_id);
        return r;
}
