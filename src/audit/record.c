/* record.c - the audit log's records: start, end, session and blocked, each built as one JSON
 * line and handed to the writer (writer.c).
 *
 * What a record holds: see the seed, "Usage numbers and the audit log". Strings are JSON with
 * every control character, DEL and C1 escaped as \uXXXX, so even `cat` of the raw file cannot
 * drive a terminal. Code that is not valid UTF-8 cannot be JSON text: each invalid byte is
 * written as the four characters \xNN ("code_utf8": false says so); code_sha256 and code_bytes
 * always describe the exact bytes the run received. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit-internal.h"
#include "audit/audit.h"
#include "common/buf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/xalloc.h"
#include "lazy/sha256.h"

bool audit_json_str(struct sbx_buf *b, const char *s, size_t n, bool ascii)
{
        static const char hex[] = "0123456789abcdef";
        bool utf8 = true;
        size_t i = 0;

        (void)sbx_buf_add(b, "\"", 1);
        while (i < n) {
                unsigned char ch = (unsigned char)s[i];
                uint32_t cp = 0;
                int l = sbx_utf8_decode(s + i, n - i, &cp);

                if (l <= 0) {
                        char e[6] = {'\\', '\\', 'x', hex[ch >> 4], hex[ch & 15], 0};
                        (void)sbx_buf_add(b, e, 5);
                        utf8 = false;
                        i++;
                        continue;
                }
                if (cp == '"')
                        (void)sbx_buf_add(b, "\\\"", 2);
                else if (cp == '\\')
                        (void)sbx_buf_add(b, "\\\\", 2);
                else if (cp == '\n')
                        (void)sbx_buf_add(b, "\\n", 2);
                else if (cp == '\t')
                        (void)sbx_buf_add(b, "\\t", 2);
                else if (cp == '\r' && !ascii)
                        (void)sbx_buf_add(b, "\\r", 2);
                else if (cp >= 0x20 && cp < 0x7f)
                        (void)sbx_buf_add(b, s + i, 1);
                else if (!ascii && cp > 0x9f)
                        (void)sbx_buf_add(b, s + i, (size_t)l);
                else if (cp < 0x10000)
                        (void)sbx_buf_printf(b, "\\u%04x", (unsigned)cp);
                else {
                        uint32_t v = cp - 0x10000;
                        (void)sbx_buf_printf(b, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)),
                                             (unsigned)(0xdc00 + (v & 0x3ff)));
                }
                i += (size_t)l;
        }
        (void)sbx_buf_add(b, "\"", 1);
        return utf8;
}

static bool sb_json_str(struct sbx_buf *b, const char *s, size_t n)
{
        return audit_json_str(b, s, n, false);
}

static void sb_json_cstr(struct sbx_buf *b, const char *s)
{
        if (!s)
                (void)sbx_buf_puts(b, "null");
        else
                sb_json_str(b, s, strlen(s));
}

/* --- records ----------------------------------------------------------------------------- */

static void new_id(char ret_id[33])
{
        static const char hex[] = "0123456789abcdef";
        static unsigned long counter;
        unsigned char rnd[16];
        ssize_t n = getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);

        if (n != (ssize_t)sizeof(rnd)) {
                /* Early boot without entropy: unique within the process is enough. */
                struct timespec ts;
                unsigned long c = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
                clock_gettime(CLOCK_REALTIME, &ts);
                snprintf(ret_id, 33, "%08x%08lx%08lx%08lx", (unsigned)getpid(),
                         (unsigned long)ts.tv_sec & 0xffffffffUL,
                         (unsigned long)ts.tv_nsec & 0xffffffffUL, c & 0xffffffffUL);
                return;
        }
        for (size_t i = 0; i < sizeof(rnd); i++) {
                ret_id[2 * i] = hex[rnd[i] >> 4];
                ret_id[2 * i + 1] = hex[rnd[i] & 15];
        }
        ret_id[32] = '\0';
}

/* "2026-11-29T17:04:55.123Z" */
static void rfc3339_now(char buf[32])
{
        struct timespec now;
        struct tm tm;
        char base[24];

        clock_gettime(CLOCK_REALTIME, &now);
        gmtime_r(&now.tv_sec, &tm);
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, 32, "%.20s.%03uZ", base, (unsigned)(now.tv_nsec / 1000000L) % 1000u);
}

static void record_head(struct sbx_buf *b, const char *kind, const char *id)
{
        char t[32];

        rfc3339_now(t);
        (void)sbx_buf_printf(b, "{\"v\":1,\"kind\":\"%s\",\"id\":", kind);
        sb_json_cstr(b, id);
        (void)sbx_buf_printf(b, ",\"time\":\"%s\",\"pid\":%d", t, (int)getpid());
}

/* The first 4 KiB of the code, cut on a character boundary, its SHA-256 and its size. */
static void record_code(struct sbx_buf *b, const char *code, size_t code_len)
{
        char hex[SBX_SHA256_HEX_LEN + 1];
        size_t keep = code_len < AUDIT_CODE_MAX_BYTES ? code_len : AUDIT_CODE_MAX_BYTES;
        bool utf8;

        if (!code)
                code_len = keep = 0;
        /* Do not split a valid multi-byte character at the cut. */
        if (keep < code_len) {
                size_t start = keep;
                while (start > 0 && start > keep - 3 && ((unsigned char)code[start] & 0xc0) == 0x80)
                        start--;
                int l = sbx_utf8_decode(code + start, code_len - start, NULL);
                if (l > 0 && start + (size_t)l > keep)
                        keep = start;
        }
        (void)sbx_buf_puts(b, ",\"code\":");
        utf8 = sb_json_str(b, code ? code : "", keep);
        (void)sbx_buf_printf(b, ",\"code_utf8\":%s,\"code_truncated\":%s,\"code_bytes\":%zu",
                             utf8 ? "true" : "false", keep < code_len ? "true" : "false", code_len);
        struct sbx_error herr = {0};
        if (sbx_sha256_hex(code ? code : "", code_len, hex, &herr) == 0) {
                (void)sbx_buf_printf(b, ",\"code_sha256\":\"%s\"", hex);
        } else {
                /* the record still says what ran (the code itself, its size) and why no hash */
                log_warning("audit: %s", herr.msg);
                (void)sbx_buf_puts(b, ",\"code_sha256\":null,\"code_sha256_error\":");
                sb_json_cstr(b, herr.msg);
        }
}

static const char *const lang_names[] = {"python", "node", "bash"};

struct audit_pending *audit_start_async(struct audit_log *log, enum sbx_language lang,
                                        unsigned timeout_s, const char *backend, const char *code,
                                        size_t code_len, char ret_id[33])
{
        return audit_start_async_batch(log, lang, timeout_s, backend, code, code_len, 0, ret_id);
}

struct audit_pending *audit_start_async_batch(struct audit_log *log, enum sbx_language lang,
                                              unsigned timeout_s, const char *backend,
                                              const char *code, size_t code_len, unsigned batch_ms,
                                              char ret_id[33])
{
        struct audit_pending *p;
        struct sbx_buf b = {0};

        new_id(ret_id);
        record_head(&b, "start", ret_id);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, (size_t)lang < ELEMENTSOF(lang_names) ? lang_names[lang] : "unknown");
        (void)sbx_buf_printf(&b, ",\"timeout_s\":%u,\"backend\":", timeout_s);
        sb_json_cstr(&b, backend);
        record_code(&b, code, code_len);
        (void)sbx_buf_puts(&b, "}\n");
        p = audit_queue(log, b.data, b.len, batch_ms);
        return p;
}

void audit_start(struct audit_log *log, enum sbx_language lang, unsigned timeout_s,
                 const char *backend, const char *code, size_t code_len, char ret_id[33],
                 char *note, size_t note_size)
{
        audit_pending_wait(audit_start_async(log, lang, timeout_s, backend, code, code_len, ret_id),
                           note, note_size);
}

/* The record's outcome: the result's name, except that a call that never ran "failed". */
static const char *outcome_name(enum run_outcome o)
{
        return o == RUN_OUTCOME_NONE ? "failed" : run_outcome_name(o);
}

static void record_measure(struct sbx_buf *b, const char *name, const struct run_measure *m)
{
        if (m->measured)
                (void)sbx_buf_printf(b, ",\"%s\":%llu", name, (unsigned long long)m->value);
        else
                (void)sbx_buf_printf(b, ",\"%s\":null", name);
}

/* A fixed-size char array from struct run_result, NUL-terminated or not. */
static void record_field(struct sbx_buf *b, const char *name, const char *s, size_t size)
{
        (void)sbx_buf_printf(b, ",\"%s\":", name);
        sb_json_str(b, s, strnlen(s, size));
}

void audit_end(struct audit_log *log, const char *id, const struct run_result *res, char *note,
               size_t note_size)
{
        audit_pending_wait(audit_end_async(log, id, res), note, note_size);
}

/* The end record's usage: wall time, the measures, and why any was not measured. */
static void record_usage(struct sbx_buf *b, const struct run_usage *u)
{
        (void)sbx_buf_printf(b, ",\"wall_ms\":%llu", (unsigned long long)u->wall_ms);
        record_measure(b, "cpu_us", &u->cpu_us);
        record_measure(b, "mem_peak_bytes", &u->mem_peak_bytes);
        record_measure(b, "pids_peak", &u->pids_peak);
        if (!u->cpu_us.measured || !u->mem_peak_bytes.measured || !u->pids_peak.measured) {
                const char *sep = "";
                (void)sbx_buf_puts(b, ",\"not_measured\":{");
                if (!u->cpu_us.measured) {
                        (void)sbx_buf_puts(b, "\"cpu_us\":");
                        sb_json_str(b, u->cpu_us.why,
                                    strnlen(u->cpu_us.why, sizeof(u->cpu_us.why)));
                        sep = ",";
                }
                if (!u->mem_peak_bytes.measured) {
                        (void)sbx_buf_printf(b, "%s\"mem_peak_bytes\":", sep);
                        sb_json_str(b, u->mem_peak_bytes.why,
                                    strnlen(u->mem_peak_bytes.why, sizeof(u->mem_peak_bytes.why)));
                        sep = ",";
                }
                if (!u->pids_peak.measured) {
                        (void)sbx_buf_printf(b, "%s\"pids_peak\":", sep);
                        sb_json_str(b, u->pids_peak.why,
                                    strnlen(u->pids_peak.why, sizeof(u->pids_peak.why)));
                }
                (void)sbx_buf_puts(b, "}");
        }
}

/* Every decision of the egress proxy, folded by host:port and verdict. */
static void record_egress(struct sbx_buf *b, const struct run_egress *g)
{
        (void)sbx_buf_puts(b, ",\"egress\":{\"policy\":\"allowlist\",\"decisions\":[");
        for (size_t i = 0; i < g->n_entries; i++) {
                const struct run_egress_entry *e = &g->entries[i];
                (void)sbx_buf_puts(b, i ? ",{\"host\":" : "{\"host\":");
                sb_json_str(b, e->host, strnlen(e->host, sizeof(e->host)));
                (void)sbx_buf_printf(b, ",\"port\":%u,\"verdict\":\"%s\",\"reason\":", e->port,
                                     e->allowed ? "allowed" : "denied");
                if (e->reason)
                        sb_json_cstr(b, e->reason);
                else
                        (void)sbx_buf_puts(b, "null");
                /* bytes_unknown: connections whose bytes were never recorded (open when the
                 * proxy died), left out of bytes_up and bytes_down */
                (void)sbx_buf_printf(b,
                                     ",\"connections\":%u,\"bytes_up\":%llu,\"bytes_down\":%llu,"
                                     "\"bytes_unknown\":%u}",
                                     e->connections, (unsigned long long)e->bytes_up,
                                     (unsigned long long)e->bytes_down, e->bytes_unknown);
        }
        (void)sbx_buf_printf(b, "],\"unlisted\":%llu", (unsigned long long)g->records_dropped);
        record_field(b, "note", g->note, sizeof(g->note));
        (void)sbx_buf_puts(b, "}");
}

struct audit_pending *audit_end_async(struct audit_log *log, const char *id,
                                      const struct run_result *res)
{
        struct sbx_buf b = {0};

        record_head(&b, "end", id ? id : "");
        (void)sbx_buf_printf(&b, ",\"outcome\":\"%s\"", outcome_name(res->outcome));
        if (res->outcome == RUN_OUTCOME_EXITED)
                (void)sbx_buf_printf(&b, ",\"exit_code\":%d", res->exit_code);
        else
                (void)sbx_buf_puts(&b, ",\"exit_code\":null");
        if (res->outcome == RUN_OUTCOME_SIGNALED) {
                const char *abbrev = sigabbrev_np(res->term_signal);
                (void)sbx_buf_printf(&b, ",\"signal\":%d,\"signal_name\":", res->term_signal);
                if (abbrev)
                        (void)sbx_buf_printf(&b, "\"SIG%s\"", abbrev);
                else
                        (void)sbx_buf_puts(&b, "null");
        } else
                (void)sbx_buf_puts(&b, ",\"signal\":null");
        record_usage(&b, &res->usage);
        /* Output: its sizes only, never its content. */
        (void)sbx_buf_printf(&b, ",\"stdout_bytes\":%llu,\"stderr_bytes\":%llu",
                             (unsigned long long)res->out.total,
                             (unsigned long long)res->err.total);
        record_field(&b, "blocked_syscalls", res->blocked_syscalls, sizeof(res->blocked_syscalls));
        (void)sbx_buf_printf(&b, ",\"blocked_reporting_stopped\":%s,\"oom\":%s",
                             res->blocked_reporting_stopped ? "true" : "false",
                             res->oom_killed ? "true" : "false");
        if (res->oom_killed)
                (void)sbx_buf_printf(&b, ",\"mem_limit_bytes\":%llu",
                                     (unsigned long long)res->mem_limit_bytes);
        record_field(&b, "limits_hit", res->limits_hit, sizeof(res->limits_hit));
        record_field(&b, "image", res->image, sizeof(res->image));
        record_field(&b, "backend", res->backend, sizeof(res->backend));
        record_field(&b, "isolation", res->isolation, sizeof(res->isolation));
        if (res->egress.on)
                record_egress(&b, &res->egress);
        if (res->session[0]) {
                record_field(&b, "session", res->session, sizeof(res->session));
                (void)sbx_buf_printf(&b, ",\"session_call\":%llu",
                                     (unsigned long long)res->session_call);
        }
        (void)sbx_buf_puts(&b, "}\n");
        return audit_queue(log, b.data, b.len, 0);
}

void audit_session(struct audit_log *log, bool start, const char *session, const char *language,
                   const char *backend, const char *isolation, const char *reason,
                   unsigned long long calls, char *note, size_t note_size)
{
        struct sbx_buf b = {0};
        char id[33];

        new_id(id);
        record_head(&b, start ? "session_start" : "session_end", id);
        (void)sbx_buf_puts(&b, ",\"session\":");
        sb_json_cstr(&b, session);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, language);
        (void)sbx_buf_puts(&b, ",\"backend\":");
        sb_json_cstr(&b, backend ? backend : "");
        if (start) {
                (void)sbx_buf_puts(&b, ",\"isolation\":");
                sb_json_cstr(&b, isolation ? isolation : "");
        } else {
                (void)sbx_buf_printf(&b, ",\"calls\":%llu,\"reason\":", calls);
                sb_json_cstr(&b, reason ? reason : "");
        }
        (void)sbx_buf_puts(&b, "}\n");
        audit_submit(log, b.data, b.len, note, note_size);
}

void audit_blocked(struct audit_log *log, const char *language, const char *code, size_t code_len,
                   const char *reason, char *note, size_t note_size)
{
        struct sbx_buf b = {0};
        char id[33];

        new_id(id);
        record_head(&b, "blocked", id);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, language);
        record_code(&b, code, code_len);
        (void)sbx_buf_puts(&b, ",\"reason\":");
        sb_json_cstr(&b, reason ? reason : "");
        (void)sbx_buf_puts(&b, "}\n");
        audit_submit(log, b.data, b.len, note, note_size);
}

void audit_host_start(struct audit_log *log, const char *what, unsigned timeout_s,
                      const char *backend, const char *text, size_t text_len, char ret_id[33],
                      char *note, size_t note_size)
{
        struct sbx_buf b = {0};

        new_id(ret_id);
        record_head(&b, "start", ret_id);
        (void)sbx_buf_puts(&b, ",\"language\":");
        sb_json_cstr(&b, what);
        (void)sbx_buf_printf(&b, ",\"timeout_s\":%u,\"backend\":", timeout_s);
        sb_json_cstr(&b, backend ? backend : "");
        record_code(&b, text, text_len);
        (void)sbx_buf_puts(&b, "}\n");
        audit_submit(log, b.data, b.len, note, note_size);
}

void audit_host_end(struct audit_log *log, const char *id, const struct audit_host_end *e,
                    char *note, size_t note_size)
{
        struct sbx_buf b = {0};

        record_head(&b, "end", id);
        (void)sbx_buf_puts(&b, ",\"outcome\":");
        sb_json_cstr(&b, e->outcome ? e->outcome : "failed");
        if (e->have_exit)
                (void)sbx_buf_printf(&b, ",\"exit_code\":%d", e->exit_code);
        if (e->wall_ms)
                (void)sbx_buf_printf(&b, ",\"wall_ms\":%llu", (unsigned long long)e->wall_ms);
        if (e->cpu_us)
                (void)sbx_buf_printf(&b, ",\"cpu_us\":%llu", (unsigned long long)e->cpu_us);
        if (e->mem_peak_bytes)
                (void)sbx_buf_printf(&b, ",\"mem_peak_bytes\":%llu",
                                     (unsigned long long)e->mem_peak_bytes);
        if (e->isolation) {
                (void)sbx_buf_puts(&b, ",\"isolation\":");
                sb_json_cstr(&b, e->isolation);
        }
        if (e->blocked && e->blocked[0]) {
                (void)sbx_buf_puts(&b, ",\"blocked_syscalls\":");
                sb_json_cstr(&b, e->blocked);
        }
        if (e->tried && e->tried[0]) {
                (void)sbx_buf_puts(&b, ",\"tried\":");
                sb_json_cstr(&b, e->tried);
        }
        (void)sbx_buf_puts(&b, "}\n");
        audit_submit(log, b.data, b.len, note, note_size);
}
