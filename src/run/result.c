/* result.c - the run contract's helpers: languages, output capture, and the one text format a
 * result is shown in. Everything the sandboxed code printed passes through sbx_text_sanitize()
 * before it reaches a client, so the text is valid UTF-8 and cannot drive a terminal. */
#include "run/run.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "common/utf8.h"
#include "common/xalloc.h"

static const char *const language_names[] = {
    [SBX_LANG_PYTHON] = "python",
    [SBX_LANG_NODE] = "node",
    [SBX_LANG_BASH] = "bash",
};

static const char *const language_scripts[] = {
    [SBX_LANG_PYTHON] = "main.py",
    [SBX_LANG_NODE] = "main.js",
    [SBX_LANG_BASH] = "main.sh",
};

int sbx_language_parse(const char *s, enum sbx_language *ret)
{
        if (!s)
                return -EINVAL;
        /* Case-insensitive: agents write "Python" as often as "python". */
        for (size_t i = 0; i < ELEMENTSOF(language_names); i++)
                if (strcasecmp(s, language_names[i]) == 0) {
                        *ret = (enum sbx_language)i;
                        return 0;
                }
        return -EINVAL;
}

const char *sbx_language_name(enum sbx_language l)
{
        if ((unsigned)l >= ELEMENTSOF(language_names))
                return "unknown";
        return language_names[l];
}

const char *sbx_language_script(enum sbx_language l)
{
        if ((unsigned)l >= ELEMENTSOF(language_scripts))
                return "main.txt";
        return language_scripts[l];
}

void run_result_done(struct run_result *r)
{
        if (!r)
                return;
        sbx_buf_done(&r->out.head);
        sbx_buf_done(&r->err.head);
        free(r->out.ring);
        free(r->err.ring);
        r->out.ring = r->err.ring = NULL;
        r->out.ring_len = r->err.ring_len = r->out.ring_size = r->err.ring_size = 0;
        for (size_t i = 0; i < r->n_files; i++)
                free(r->files[i].path);
        free(r->files);
        r->files = NULL;
        r->n_files = 0;
        for (size_t i = 0; i < r->n_images; i++)
                free(r->images[i].data);
        free(r->images);
        r->images = NULL;
        r->n_images = r->cap_images = 0;
        free(r->egress.entries);
        r->egress.entries = NULL;
        r->egress.n_entries = r->egress.cap_entries = 0;
}

const char *run_outcome_name(enum run_outcome o)
{
        switch (o) {
        case RUN_OUTCOME_EXITED:
                return "exited";
        case RUN_OUTCOME_SIGNALED:
                return "signaled";
        case RUN_OUTCOME_TIMED_OUT:
                return "timed_out";
        case RUN_OUTCOME_CANCELLED:
                return "cancelled";
        case RUN_OUTCOME_FLOODED:
                return "flooded";
        case RUN_OUTCOME_NONE:
        default:
                return "not_run";
        }
}

uint64_t run_stream_append(struct run_stream *s, const void *buf, size_t n, size_t cap)
{
        const char *b = buf;

        if (s->len < cap && n > 0) {
                size_t take = cap - s->len < n ? cap - s->len : n;

                s->head.max = cap;
                (void)sbx_buf_add(&s->head, buf, take); /* fits: take <= cap - len */
        }
        /* The tail: a ring of the last cap/2 bytes, so a flood's or a long log's end (where the
         * traceback is) is shown too. Only its last ring_size bytes of @buf matter. */
        if (n > 0 && cap / 2 > 0) {
                if (!s->ring) {
                        s->ring_size = cap / 2;
                        s->ring = xmalloc(s->ring_size);
                        s->ring_len = s->ring_pos = 0;
                }
                if (n >= s->ring_size) {
                        memcpy(s->ring, b + n - s->ring_size, s->ring_size);
                        s->ring_pos = 0;
                        s->ring_len = s->ring_size;
                } else {
                        /* write at the end of the ring's content, wrapping */
                        size_t end = (s->ring_pos + s->ring_len) % s->ring_size;
                        size_t first = s->ring_size - end < n ? s->ring_size - end : n;

                        memcpy(s->ring + end, b, first);
                        memcpy(s->ring, b + first, n - first);
                        if (s->ring_len + n > s->ring_size) {
                                s->ring_pos =
                                    (s->ring_pos + s->ring_len + n - s->ring_size) % s->ring_size;
                                s->ring_len = s->ring_size;
                        } else
                                s->ring_len += n;
                }
        }
        s->total += n;
        return s->total;
}

void run_result_note(struct run_result *r, const char *fmt, ...)
{
        char note[sizeof(r->notes)];
        size_t used = strnlen(r->notes, sizeof(r->notes));
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(note, sizeof(note), fmt, ap);
        va_end(ap);
        if (used > 0 && used + 1 < sizeof(r->notes))
                r->notes[used++] = '\n';
        /* Control bytes as "\xNN": one note is one line, whatever a file name holds. */
        for (const unsigned char *p = (const unsigned char *)note; *p; p++) {
                if (used + (*p < 0x20 || *p == 0x7f ? 4 : 1) >= sizeof(r->notes))
                        break;
                if (*p < 0x20 || *p == 0x7f)
                        used += (size_t)snprintf(r->notes + used, sizeof(r->notes) - used,
                                                 "\\x%02x", *p);
                else
                        r->notes[used++] = (char)*p;
        }
        r->notes[used] = '\0';
}

/* --- text made safe to show (UTF-8 checked by common/utf8.h, grown in common/buf.h) ------ */

/* Characters that are valid UTF-8 and printable to a terminal, yet hide, join or reorder the
 * text around them, so a reader (or a model) sees something else than what is there:
 * bidi controls (Unicode's Bidi_Control), zero-width and invisible characters, and the line
 * and paragraph separators some readers treat as line ends. */
static bool invisible(uint32_t cp)
{
        return cp == 0x061c ||                   /* ARABIC LETTER MARK */
               (cp >= 0x200b && cp <= 0x200f) || /* ZWSP, ZWNJ, ZWJ, LRM, RLM */
               (cp >= 0x2028 && cp <= 0x202e) || /* LS, PS, LRE, RLE, PDF, LRO, RLO */
               (cp >= 0x2060 && cp <= 0x2064) || /* WORD JOINER, invisible operators */
               (cp >= 0x2066 && cp <= 0x2069) || /* LRI, RLI, FSI, PDI */
               cp == 0xfeff;                     /* BOM, ZERO WIDTH NO-BREAK SPACE */
}

/* @oneline: '\t' and '\n' are escaped too (notes, reasons, file names). */
static void sanitize_into_mode(struct sbx_buf *b, const char *s, size_t n, bool oneline)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0;

        (void)sbx_buf_reserve(b, n);
        while (i < n) {
                uint32_t cp = 0;
                size_t len = sbx_utf8_whole(u + i, n - i, &cp);
                char esc[16];

                if (len == 0) {
                        snprintf(esc, sizeof(esc), "\\x%02x", u[i]);
                        (void)sbx_buf_add(b, esc, 4);
                        i++;
                } else if ((cp == '\t' || cp == '\n') && !oneline) {
                        (void)sbx_buf_add(b, s + i, 1);
                        i++;
                } else if (cp < 0x20 || cp == 0x7f) {
                        snprintf(esc, sizeof(esc), "\\x%02x", (unsigned)cp);
                        (void)sbx_buf_add(b, esc, 4);
                        i++;
                } else if ((cp >= 0x80 && cp <= 0x9f) || invisible(cp)) {
                        /* C1 controls (CSI is U+009B) are valid UTF-8 but still drive
                         * terminals. */
                        snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
                        (void)sbx_buf_add(b, esc, 6);
                        i += len;
                } else {
                        (void)sbx_buf_add(b, s + i, len);
                        i += len;
                }
        }
}

static char *sanitize_mode(const char *s, size_t n, bool oneline)
{
        struct sbx_buf b = {0};

        (void)sbx_buf_reserve(&b, 0);
        b.data[0] = '\0';
        if (s)
                sanitize_into_mode(&b, s, n, oneline);
        return b.data;
}

char *sbx_text_sanitize(const char *s, size_t n)
{
        return sanitize_mode(s, n, false);
}

char *sbx_text_sanitize_line(const char *s, size_t n)
{
        return sanitize_mode(s, n, true);
}

/* --- the view: every fact once, in the words both views use --------------------------- */

static void format_bytes(char *buf, size_t size, uint64_t bytes)
{
        if (bytes >= 1024ull * 1024 * 1024)
                snprintf(buf, size, "%.1f GiB", (double)bytes / (1024.0 * 1024 * 1024));
        else if (bytes >= 1024ull * 1024)
                snprintf(buf, size, "%.1f MiB", (double)bytes / (1024.0 * 1024));
        else if (bytes >= 1024)
                snprintf(buf, size, "%.1f KiB", (double)bytes / 1024.0);
        else
                snprintf(buf, size, "%llu B", (unsigned long long)bytes);
}

/* A backend's fixed-size string field as one escaped line, or NULL when empty. */
static char *field_line(const char *s, size_t size)
{
        size_t n = strnlen(s, size);

        while (n > 0 && s[n - 1] == '\n')
                n--;
        return n > 0 ? sbx_text_sanitize_line(s, n) : NULL;
}

/* The stream's ring in order, into a new buffer of *@ret_len bytes. */
static char *ring_linear(const struct run_stream *st, size_t *ret_len)
{
        char *t = xmalloc(st->ring_len + 1);

        for (size_t i = 0; i < st->ring_len; i++)
                t[i] = st->ring[(st->ring_pos + i) % st->ring_size];
        t[st->ring_len] = '\0';
        *ret_len = st->ring_len;
        return t;
}

static void view_stream(struct run_view_stream *vs, const struct run_stream *st, size_t cap)
{
        size_t head = st->len < cap ? st->len : cap;

        memset(vs, 0, sizeof(*vs));
        vs->bytes = st->total;
        vs->stopped_at = st->stopped_at;
        if (st->total <= head) {
                /* all of it fits */
                vs->head = sbx_text_sanitize(st->data, head);
                vs->shown = vs->head_raw = head;
                return;
        }
        /* Cut: the first cap - cap/2 bytes and the last cap/2 (from the ring), each on a UTF-8
         * boundary. A stream captured without a ring (cap/2 == 0) shows its head only. */
        {
                size_t tail_want = st->ring ? (cap / 2 < st->ring_len ? cap / 2 : st->ring_len) : 0;
                size_t head_want = cap - (st->ring ? cap / 2 : 0);
                size_t tlen = 0, skip = 0;
                _cleanup_free_ char *ring = st->ring ? ring_linear(st, &tlen) : NULL;
                const char *tail = ring ? ring + (tlen - tail_want) : NULL;
                uint64_t not_shown;
                char both[96];

                if (head_want > head)
                        head_want = head;
                head_want = sbx_utf8_cut(st->data, head_want);
                /* the tail starts at a sequence's lead byte: skip at most 3 continuation bytes */
                while (tail && skip < 3 && skip < tail_want &&
                       ((unsigned char)tail[skip] & 0xc0) == 0x80)
                        skip++;
                tail_want -= skip;
                vs->head = sbx_text_sanitize(st->data, head_want);
                vs->tail = sbx_text_sanitize(tail ? tail + skip : "", tail_want);
                vs->shown = head_want + tail_want;
                vs->head_raw = head_want;
                vs->tail_raw = tail_want;
                not_shown = st->total - vs->shown;
                if (tail_want > 0)
                        snprintf(both, sizeof(both), "the first %zu and the last %zu are",
                                 head_want, tail_want);
                else
                        snprintf(both, sizeof(both), "the first %zu are", head_want);
                vs->truncated =
                    xasprintf("%llu of %llu bytes not shown (%s)", (unsigned long long)not_shown,
                              (unsigned long long)st->total, both);
                if (!st->ring || tail_want == 0) {
                        free(vs->tail);
                        vs->tail = NULL;
                }
        }
}

static char *signal_text(int sig)
{
        const char *abbrev = sigabbrev_np(sig);

        if (abbrev)
                return xasprintf("killed by signal SIG%s (%d)", abbrev, sig);
        return xasprintf("killed by signal %d", sig);
}

/* A flooded run: the stream that flooded and its byte count when the run was stopped. A backend
 * that does not mark the stream (the container backend reads no more once it stops the run)
 * gives the larger stream's count. 0 = not known. */
static uint64_t flood_stop(const struct run_result *r, const char **ret_name)
{
        if (r->out.stopped_at || r->err.stopped_at) {
                *ret_name = r->out.stopped_at ? "stdout" : "stderr";
                return r->out.stopped_at ? r->out.stopped_at : r->err.stopped_at;
        }
        *ret_name = r->out.total >= r->err.total ? "stdout" : "stderr";
        return r->out.total >= r->err.total ? r->out.total : r->err.total;
}

static char *outcome_text(const struct run_result *r, unsigned timeout_s, size_t cap)
{
        switch (r->outcome) {
        case RUN_OUTCOME_EXITED:
                return xasprintf("exit code: %d", r->exit_code);
        case RUN_OUTCOME_SIGNALED:
                return signal_text(r->term_signal);
        case RUN_OUTCOME_TIMED_OUT:
                return xasprintf("timed out after %u s", timeout_s);
        case RUN_OUTCOME_CANCELLED:
                return xstrdup("cancelled");
        case RUN_OUTCOME_FLOODED: {
                const char *name = NULL;
                uint64_t at = flood_stop(r, &name);

                /* what was read of that stream until the program was dead (its truncation
                 * note's count) is said too, so the two numbers agree */
                uint64_t all = strcmp(name, "stdout") == 0 ? r->out.total : r->err.total;
                if (at > 0 && all > at)
                        return xasprintf("stopped at %llu bytes of %s: more than twice the "
                                         "%zu-byte output cap (%llu bytes of it were read in all, "
                                         "until the program was dead)",
                                         (unsigned long long)at, name, cap,
                                         (unsigned long long)all);
                if (at > 0)
                        return xasprintf("stopped at %llu bytes of %s: more than twice the "
                                         "%zu-byte output cap",
                                         (unsigned long long)at, name, cap);
                return xasprintf("stopped: printed more than twice the %zu-byte output cap", cap);
        }
        case RUN_OUTCOME_NONE:
        default:
                return xstrdup("not run: nothing was executed");
        }
}

static char *usage_text(const struct run_usage *u, char *const *why)
{
        const struct {
                const char *name;
                const struct run_measure *m;
        } items[] = {
            {"cpu", &u->cpu_us},
            {"mem_peak", &u->mem_peak_bytes},
            {"pids_peak", &u->pids_peak},
        };
        bool done[ELEMENTSOF(items)] = {false};
        struct sbx_buf b = {0};
        char v[64];

        (void)sbx_buf_printf(&b, "wall %llu ms", (unsigned long long)u->wall_ms);
        if (u->from_handover)
                (void)sbx_buf_puts(
                    &b, " (counted from the code's hand-over: the sandbox was started ahead)");
        for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                const struct run_measure *m = items[i].m;

                if (!m->measured)
                        continue;
                if (i == 0) {
                        if (m->value > 0 && m->value < 1000)
                                snprintf(v, sizeof(v), "<1 ms");
                        else
                                snprintf(v, sizeof(v), "%llu ms",
                                         (unsigned long long)((m->value + 500) / 1000));
                } else if (i == 1)
                        format_bytes(v, sizeof(v), m->value);
                else
                        snprintf(v, sizeof(v), "%llu", (unsigned long long)m->value);
                (void)sbx_buf_printf(&b, ", %s %s%s", items[i].name, m->at_least ? "at least " : "",
                                     v);
        }
        /* Group the unmeasured figures by reason: "cpu, mem_peak and pids_peak not measured:
         * not readable from outside a container". */
        for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                const char *names[ELEMENTSOF(items)];
                size_t k = 0;

                if (items[i].m->measured || done[i])
                        continue;
                for (size_t j = i; j < ELEMENTSOF(items); j++)
                        if (!items[j].m->measured && !done[j] && strcmp(why[j], why[i]) == 0) {
                                names[k++] = items[j].name;
                                done[j] = true;
                        }
                (void)sbx_buf_puts(&b, "; ");
                for (size_t j = 0; j < k; j++) {
                        if (j > 0)
                                (void)sbx_buf_puts(&b, j + 1 == k ? " and " : ", ");
                        (void)sbx_buf_puts(&b, names[j]);
                }
                (void)sbx_buf_puts(&b, " not measured: ");
                (void)sbx_buf_puts(&b, why[i]);
        }
        return b.data;
}

static char *oom_text(const struct run_result *r)
{
        if (!r->oom_killed)
                return NULL;
        if (r->mem_limit_bytes > 0 && r->mem_limit_bytes % (1024ull * 1024) == 0)
                return xasprintf("the kernel killed a process in the sandbox at its %llu MiB limit",
                                 (unsigned long long)(r->mem_limit_bytes / (1024ull * 1024)));
        if (r->mem_limit_bytes > 0) {
                char v[64];

                format_bytes(v, sizeof(v), r->mem_limit_bytes);
                return xasprintf("the kernel killed a process in the sandbox at its %s limit", v);
        }
        return xstrdup("the kernel killed a process in the sandbox at its memory limit");
}

/* The grade alone and its reason: "native-degraded (limits not applied: x)" ->
 * "native-degraded", "limits not applied: x". */
static void split_grade(const char *iso, char **ret_grade, char **ret_reason)
{
        const char *open = strstr(iso, " (");
        size_t n = strlen(iso);

        if (!open || n < 2 || iso[n - 1] != ')') {
                *ret_grade = xstrdup(iso);
                *ret_reason = NULL;
                return;
        }
        *ret_grade = xstrndup(iso, (size_t)(open - iso));
        *ret_reason = xstrndup(open + 2, (size_t)(iso + n - 1 - (open + 2)));
}

/* 16 hex digits that appear in neither stream (its head, nor its tail). */
static void pick_fence(char fence[17], const struct run_view *v)
{
        for (int attempt = 0;; attempt++) {
                uint64_t x = 0;

                if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x)) {
                        /* no entropy at all (never on Linux 3.17+): still differ per result */
                        struct timespec ts;

                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                            ((uint64_t)attempt << 56) ^ (uint64_t)(uintptr_t)v;
                }
                snprintf(fence, 17, "%016llx", (unsigned long long)x);
                if (!strstr(v->out.head, fence) && !strstr(v->err.head, fence) &&
                    !(v->out.tail && strstr(v->out.tail, fence)) &&
                    !(v->err.tail && strstr(v->err.tail, fence)))
                        return;
        }
}

/* "plot.png (new, 23.4 KiB, image attached), data.csv (changed, 120 B), and 3 more": each
 * name escaped to one line, so a file name can never start a line of its own. */
static char *files_line(const struct run_result *r)
{
        struct sbx_buf b = {0};

        if (r->n_files == 0 && r->files_more == 0)
                return NULL;
        for (size_t i = 0; i < r->n_files; i++) {
                const struct run_file *f = &r->files[i];
                _cleanup_free_ char *name = sbx_text_sanitize_line(f->path, strlen(f->path));
                char v[64];

                format_bytes(v, sizeof(v), f->bytes);
                (void)sbx_buf_printf(&b, "%s%s (%s, %s", i > 0 ? ", " : "", name,
                                     f->created ? "new" : "changed", v);
                if (f->attached)
                        (void)sbx_buf_puts(&b, ", image attached");
                else if (f->mime && f->not_why)
                        (void)sbx_buf_printf(&b, ", image not attached: %s", f->not_why);
                (void)sbx_buf_puts(&b, ")");
        }
        if (r->files_more > 0)
                (void)sbx_buf_printf(&b, "%sand %zu more", r->n_files ? ", " : "", r->files_more);
        return b.data;
}

/* The "egress: " line (docs/design/egress.md): the policy, then each host:port tried with its
 * verdict; the names escaped to one line each into @v->egress_hosts. */
static void egress_view(struct run_view *v, const struct run_result *r)
{
        const struct run_egress *g = &r->egress;
        struct sbx_buf b = {0};

        if (!g->on)
                return;
        v->egress_on = true;
        v->egress_hosts = xcalloc(g->n_entries + 1, sizeof(char *));
        (void)sbx_buf_puts(&b, "allowlist");
        if (g->n_entries == 0)
                (void)sbx_buf_puts(&b, "; no connection was asked for");
        for (size_t i = 0; i < g->n_entries; i++) {
                const struct run_egress_entry *e = &g->entries[i];
                char up[32], down[32];
                char *h = sbx_text_sanitize_line(e->host, strnlen(e->host, sizeof(e->host)));
                bool v6 = strchr(h, ':') != NULL;

                v->egress_hosts[i] = h;
                format_bytes(up, sizeof(up), e->bytes_up);
                format_bytes(down, sizeof(down), e->bytes_down);
                if (e->allowed && e->bytes_unknown >= e->connections)
                        (void)sbx_buf_printf(&b,
                                             "; %s%s%s:%u allowed (%u connection%s, bytes unknown)",
                                             v6 ? "[" : "", h, v6 ? "]" : "", e->port,
                                             e->connections, e->connections == 1 ? "" : "s");
                else if (e->allowed)
                        (void)sbx_buf_printf(
                            &b, "; %s%s%s:%u allowed (%u connection%s, %s%s up, %s down%s)",
                            v6 ? "[" : "", h, v6 ? "]" : "", e->port, e->connections,
                            e->connections == 1 ? "" : "s", e->bytes_unknown ? "at least " : "", up,
                            down, e->bytes_unknown ? "; bytes of the rest unknown" : "");
                else
                        (void)sbx_buf_printf(&b, "; %s%s%s:%u denied: %s (%u connection%s)",
                                             v6 ? "[" : "", h, v6 ? "]" : "", e->port,
                                             e->reason ? e->reason : "refused", e->connections,
                                             e->connections == 1 ? "" : "s");
        }
        if (g->records_dropped)
                (void)sbx_buf_printf(&b, "; and %llu more refused connections not listed",
                                     (unsigned long long)g->records_dropped);
        v->egress = b.data;
        v->egress_note = field_line(g->note, sizeof(g->note));
}

void run_view_build(struct run_view *v, const struct run_result *r, unsigned timeout_s, size_t cap)
{
        const struct run_measure *m[3] = {&r->usage.cpu_us, &r->usage.mem_peak_bytes,
                                          &r->usage.pids_peak};

        memset(v, 0, sizeof(*v));
        if (cap == 0)
                cap = 1;
        view_stream(&v->out, &r->out, cap);
        view_stream(&v->err, &r->err, cap);
        v->outcome_text = outcome_text(r, timeout_s, cap);
        if (r->outcome == RUN_OUTCOME_FLOODED) {
                const char *name = NULL;

                v->stopped_at = flood_stop(r, &name);
        }
        for (size_t i = 0; i < 3; i++)
                if (!m[i]->measured) {
                        v->not_measured[i] = field_line(m[i]->why, sizeof(m[i]->why));
                        if (!v->not_measured[i])
                                v->not_measured[i] = xstrdup("no reason given");
                }
        v->usage_text = usage_text(&r->usage, v->not_measured);
        v->limits_hit = field_line(r->limits_hit, sizeof(r->limits_hit));
        v->out_of_memory = oom_text(r);
        v->blocked_syscalls = field_line(r->blocked_syscalls, sizeof(r->blocked_syscalls));
        v->blocked_syscalls_unlisted = r->blocked_syscalls_unlisted;
        if (r->blocked_reporting_stopped)
                v->blocked_reporting_stopped = xstrdup("reporting stopped after 256 reports; "
                                                       "later ones failed with ENOSYS");
        v->audit = field_line(r->audit_note, sizeof(r->audit_note));
        {
                size_t n = strnlen(r->notes, sizeof(r->notes));
                const char *p = r->notes, *end = r->notes + n;

                while (p < end) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

                        if (len > 0) {
                                GREEDY_REALLOC(v->notes, v->cap_notes, v->n_notes + 1);
                                v->notes[v->n_notes++] = sbx_text_sanitize_line(p, len);
                        }
                        p += len + 1;
                }
        }
        v->files = files_line(r);
        v->files_note = field_line(r->files_note, sizeof(r->files_note));
        egress_view(v, r);
        v->isolation = field_line(r->isolation, sizeof(r->isolation));
        if (!v->isolation)
                v->isolation = xstrdup("none (not reported by the backend)");
        split_grade(v->isolation, &v->isolation_grade, &v->isolation_reason);
        if (r->session[0]) {
                _cleanup_free_ char *id = field_line(r->session, sizeof(r->session));
                v->session =
                    xasprintf("%s, call %llu, age %llu s", id, (unsigned long long)r->session_call,
                              (unsigned long long)(r->session_age_ms / 1000u));
                v->session_ended = field_line(r->session_ended, sizeof(r->session_ended));
        }
        pick_fence(v->fence, v);
}

static void view_stream_done(struct run_view_stream *vs)
{
        free(vs->head);
        free(vs->tail);
        free(vs->truncated);
        memset(vs, 0, sizeof(*vs));
}

void run_view_done(struct run_view *v)
{
        if (!v)
                return;
        view_stream_done(&v->out);
        view_stream_done(&v->err);
        free(v->outcome_text);
        free(v->usage_text);
        for (size_t i = 0; i < 3; i++)
                free(v->not_measured[i]);
        free(v->limits_hit);
        free(v->out_of_memory);
        free(v->blocked_syscalls);
        free(v->blocked_reporting_stopped);
        free(v->audit);
        for (size_t i = 0; i < v->n_notes; i++)
                free(v->notes[i]);
        free(v->notes);
        free(v->files);
        free(v->files_note);
        for (size_t i = 0; v->egress_hosts && v->egress_hosts[i]; i++)
                free(v->egress_hosts[i]);
        free(v->egress_hosts);
        free(v->egress);
        free(v->egress_note);
        free(v->isolation);
        free(v->session);
        free(v->session_ended);
        free(v->isolation_grade);
        free(v->isolation_reason);
        memset(v, 0, sizeof(*v));
}

/* --- the result text ------------------------------------------------------------------- */

static void text_part(struct sbx_buf *b, const char *s)
{
        (void)sbx_buf_puts(b, s);
        if (s[0] && s[strlen(s) - 1] != '\n')
                (void)sbx_buf_puts(b, "\n");
}

static void text_stream(struct sbx_buf *b, const char *label, const struct run_view_stream *vs,
                        const char *fence)
{
        if (vs->bytes == 0) {
                (void)sbx_buf_printf(b, "%s: (empty)\n", label);
                return;
        }
        if (vs->truncated && vs->tail)
                (void)sbx_buf_printf(b, "%s (%llu bytes, first %zu and last %zu shown) ---%s---\n",
                                     label, (unsigned long long)vs->bytes, vs->head_raw,
                                     vs->tail_raw, fence);
        else if (vs->truncated)
                (void)sbx_buf_printf(b, "%s (%llu bytes, first %zu shown) ---%s---\n", label,
                                     (unsigned long long)vs->bytes, vs->head_raw, fence);
        else
                (void)sbx_buf_printf(b, "%s (%llu bytes) ---%s---\n", label,
                                     (unsigned long long)vs->bytes, fence);
        text_part(b, vs->head);
        if (vs->tail) {
                (void)sbx_buf_printf(b, "---%s--- %llu bytes not shown\n", fence,
                                     (unsigned long long)(vs->bytes - vs->shown));
                text_part(b, vs->tail);
        }
        (void)sbx_buf_printf(b, "---%s--- end of %s\n", fence, label);
        if (vs->truncated)
                (void)sbx_buf_printf(b, "[%s truncated: %s]\n", label, vs->truncated);
}

char *run_view_text(const struct run_view *v)
{
        struct sbx_buf b = {0};

        text_stream(&b, "stdout", &v->out, v->fence);
        text_stream(&b, "stderr", &v->err, v->fence);
        (void)sbx_buf_printf(&b, "%s\n", v->outcome_text);
        (void)sbx_buf_printf(&b, "usage: %s\n", v->usage_text);
        if (v->limits_hit)
                (void)sbx_buf_printf(&b, "limits hit: %s\n", v->limits_hit);
        if (v->out_of_memory)
                (void)sbx_buf_printf(&b, "out of memory: %s\n", v->out_of_memory);
        if (v->blocked_syscalls && v->blocked_syscalls_unlisted)
                (void)sbx_buf_printf(&b, "blocked syscalls: %s (+%u more calls not listed)\n",
                                     v->blocked_syscalls, v->blocked_syscalls_unlisted);
        else if (v->blocked_syscalls)
                (void)sbx_buf_printf(&b, "blocked syscalls: %s\n", v->blocked_syscalls);
        if (v->blocked_reporting_stopped)
                (void)sbx_buf_printf(&b, "blocked syscalls: %s\n", v->blocked_reporting_stopped);
        if (v->files)
                (void)sbx_buf_printf(&b, "files: %s\n", v->files);
        if (v->files_note)
                (void)sbx_buf_printf(&b, "files: %s\n", v->files_note);
        if (v->egress)
                (void)sbx_buf_printf(&b, "egress: %s\n", v->egress);
        if (v->egress_note)
                (void)sbx_buf_printf(&b, "egress: %s\n", v->egress_note);
        if (v->audit)
                (void)sbx_buf_printf(&b, "audit: %s\n", v->audit);
        for (size_t i = 0; i < v->n_notes; i++)
                (void)sbx_buf_printf(&b, "note: %s\n", v->notes[i]);
        if (v->session)
                (void)sbx_buf_printf(&b, "session: %s\n", v->session);
        if (v->session_ended)
                (void)sbx_buf_printf(&b, "session ended: %s\n", v->session_ended);
        (void)sbx_buf_printf(&b, "isolation: %s", v->isolation);
        return b.data;
}

char *run_result_format(const struct run_result *r, unsigned timeout_s, size_t cap)
{
        struct run_view v;
        char *t;

        run_view_build(&v, r, timeout_s, cap);
        t = run_view_text(&v);
        run_view_done(&v);
        return t;
}
