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

#include "common/cleanup.h"
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
        free(r->out.data);
        free(r->err.data);
        r->out.data = r->err.data = NULL;
        r->out.len = r->err.len = 0;
        for (size_t i = 0; i < r->n_files; i++)
                free(r->files[i].path);
        free(r->files);
        r->files = NULL;
        r->n_files = 0;
        for (size_t i = 0; i < r->n_images; i++)
                free(r->images[i].data);
        free(r->images);
        r->images = NULL;
        r->n_images = 0;
}

uint64_t run_stream_append(struct run_stream *s, const void *buf, size_t n, size_t cap)
{
        if (s->len < cap && n > 0) {
                size_t take = cap - s->len < n ? cap - s->len : n;

                s->data = xrealloc(s->data, s->len + take + 1);
                memcpy(s->data + s->len, buf, take);
                s->len += take;
                s->data[s->len] = '\0';
        }
        s->total += n;
        return s->total;
}

/* --- UTF-8 ----------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at @s (at most @n bytes), or 0 when the bytes there are
 * not one (invalid lead byte, bad continuation, overlong form, surrogate, > U+10FFFF, or cut
 * short by @n). @ret_cp gets the code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        unsigned char c = s[0];
        size_t len;
        uint32_t cp, min;

        if (c < 0x80) {
                *ret_cp = c;
                return 1;
        }
        if (c >= 0xc2 && c <= 0xdf) {
                len = 2;
                cp = c & 0x1f;
                min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
                len = 3;
                cp = c & 0x0f;
                min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4;
                cp = c & 0x07;
                min = 0x10000;
        } else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return len;
}

size_t sbx_utf8_cut(const char *s, size_t n)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = n, back = 0;

        /* Walk back over at most 3 continuation bytes to the lead byte of the last sequence;
         * if that sequence is incomplete, cut before it. Invalid bytes are kept: they are shown
         * escaped anyway, and dropping them would hide output. */
        while (i > 0 && back < 3 && (u[i - 1] & 0xc0) == 0x80) {
                i--;
                back++;
        }
        if (i == 0)
                return n;
        {
                unsigned char c = u[i - 1];
                size_t need = c >= 0xf0 && c <= 0xf4   ? 4
                              : c >= 0xe0 && c <= 0xef ? 3
                              : c >= 0xc2 && c <= 0xdf ? 2
                                                       : 0;
                if (need > 1 && back + 1 < need)
                        return i - 1;
        }
        return n;
}

/* A growing string. */
struct sbuf {
        char *p;
        size_t len, size;
};

static void sbuf_grow(struct sbuf *b, size_t more)
{
        if (b->len + more + 1 <= b->size)
                return;
        size_t size = b->size ? b->size : 256;
        while (size < b->len + more + 1)
                size *= 2;
        b->p = xrealloc(b->p, size);
        b->size = size;
}

static void sbuf_add(struct sbuf *b, const char *s, size_t n)
{
        sbuf_grow(b, n);
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
}

static void sbuf_puts(struct sbuf *b, const char *s)
{
        sbuf_add(b, s, strlen(s));
}

static void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n <= 0)
                return;
        sbuf_grow(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
}

static void sanitize_into(struct sbuf *b, const char *s, size_t n)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0;

        sbuf_grow(b, n);
        while (i < n) {
                uint32_t cp = 0;
                size_t len = utf8_seq(u + i, n - i, &cp);
                char esc[8];

                if (len == 0) {
                        snprintf(esc, sizeof(esc), "\\x%02x", u[i]);
                        sbuf_add(b, esc, 4);
                        i++;
                } else if (cp == '\t' || cp == '\n') {
                        sbuf_add(b, s + i, 1);
                        i++;
                } else if (cp < 0x20 || cp == 0x7f) {
                        snprintf(esc, sizeof(esc), "\\x%02x", (unsigned)cp);
                        sbuf_add(b, esc, 4);
                        i++;
                } else if (cp >= 0x80 && cp <= 0x9f) {
                        /* C1 controls (CSI is U+009B) are valid UTF-8 but still drive
                         * terminals. */
                        snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)cp);
                        sbuf_add(b, esc, 6);
                        i += len;
                } else {
                        sbuf_add(b, s + i, len);
                        i += len;
                }
        }
}

char *sbx_text_sanitize(const char *s, size_t n)
{
        struct sbuf b = {0};

        sbuf_grow(&b, 0);
        b.p[0] = '\0';
        if (s)
                sanitize_into(&b, s, n);
        return b.p;
}

/* --- the result text ------------------------------------------------------------------- */

static void format_stream(struct sbuf *b, const char *label, const struct run_stream *st,
                          size_t cap)
{
        size_t shown = st->len < cap ? st->len : cap;
        uint64_t more;

        if (st->total > shown)
                shown = sbx_utf8_cut(st->data, shown);
        more = st->total > shown ? st->total - shown : 0;

        if (shown == 0 && more == 0) {
                sbuf_printf(b, "%s: (empty)\n", label);
                return;
        }
        sbuf_printf(b, "%s:\n", label);
        sanitize_into(b, st->data, shown);
        if (shown > 0 && st->data[shown - 1] != '\n')
                sbuf_puts(b, "\n");
        if (more > 0)
                sbuf_printf(b, "[truncated: %llu bytes more]\n", (unsigned long long)more);
}

static void format_signal(struct sbuf *b, int sig)
{
        const char *abbrev = sigabbrev_np(sig);

        if (abbrev)
                sbuf_printf(b, "killed by signal SIG%s (%d)\n", abbrev, sig);
        else
                sbuf_printf(b, "killed by signal %d\n", sig);
}

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

static void format_usage(struct sbuf *b, const struct run_usage *u)
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
        char v[64];

        sbuf_printf(b, "usage: wall %llu ms", (unsigned long long)u->wall_ms);
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
                sbuf_printf(b, ", %s %s", items[i].name, v);
        }
        /* Group the unmeasured figures by reason: "cpu, mem_peak and pids_peak not measured:
         * not readable from outside a container". */
        for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                const char *names[ELEMENTSOF(items)];
                size_t k = 0;

                if (items[i].m->measured || done[i])
                        continue;
                for (size_t j = i; j < ELEMENTSOF(items); j++)
                        if (!items[j].m->measured && !done[j] &&
                            strcmp(items[j].m->why, items[i].m->why) == 0) {
                                names[k++] = items[j].name;
                                done[j] = true;
                        }
                sbuf_puts(b, "; ");
                for (size_t j = 0; j < k; j++) {
                        if (j > 0)
                                sbuf_puts(b, j + 1 == k ? " and " : ", ");
                        sbuf_puts(b, names[j]);
                }
                sbuf_puts(b, " not measured: ");
                if (items[i].m->why[0])
                        sanitize_into(b, items[i].m->why,
                                      strnlen(items[i].m->why, sizeof(items[i].m->why)));
                else
                        sbuf_puts(b, "no reason given");
        }
        sbuf_puts(b, "\n");
}

/* One backend-supplied line (or several, '\n'-separated), escaped like output. */
static void format_field(struct sbuf *b, const char *prefix, const char *s, size_t size)
{
        size_t n = strnlen(s, size);

        if (n == 0)
                return;
        sbuf_puts(b, prefix);
        sanitize_into(b, s, n);
        if (s[n - 1] != '\n')
                sbuf_puts(b, "\n");
}

/* A file name on one line: escaped like output, and newlines and tabs too, so a name can
 * never start a line of its own. */
static void format_name(struct sbuf *b, const char *s)
{
        while (*s) {
                size_t n = strcspn(s, "\n\t");

                if (n > 0)
                        sanitize_into(b, s, n);
                s += n;
                if (*s) {
                        sbuf_printf(b, "\\x%02x", (unsigned char)*s);
                        s++;
                }
        }
}

/* "files: plot.png (new, 23.4 KiB, image attached), data.csv (changed, 120 B), and 3 more" */
static void format_files(struct sbuf *b, const struct run_result *r)
{
        if (r->n_files == 0 && r->files_more == 0 && !r->files_note[0])
                return;
        if (r->n_files > 0 || r->files_more > 0) {
                sbuf_puts(b, "files: ");
                for (size_t i = 0; i < r->n_files; i++) {
                        const struct run_file *f = &r->files[i];
                        char v[64];

                        format_bytes(v, sizeof(v), f->bytes);
                        if (i > 0)
                                sbuf_puts(b, ", ");
                        format_name(b, f->path);
                        sbuf_printf(b, " (%s, %s", f->created ? "new" : "changed", v);
                        if (f->attached)
                                sbuf_puts(b, ", image attached");
                        else if (f->mime && f->not_why)
                                sbuf_printf(b, ", image not attached: %s", f->not_why);
                        sbuf_puts(b, ")");
                }
                if (r->files_more > 0)
                        sbuf_printf(b, "%sand %zu more", r->n_files ? ", " : "", r->files_more);
                sbuf_puts(b, "\n");
        }
        format_field(b, "files: ", r->files_note, sizeof(r->files_note));
}

char *run_result_format(const struct run_result *r, unsigned timeout_s, size_t cap)
{
        struct sbuf b = {0};

        format_stream(&b, "stdout", &r->out, cap);
        format_stream(&b, "stderr", &r->err, cap);

        switch (r->outcome) {
        case RUN_OUTCOME_EXITED:
                sbuf_printf(&b, "exit code: %d\n", r->exit_code);
                break;
        case RUN_OUTCOME_SIGNALED:
                format_signal(&b, r->term_signal);
                break;
        case RUN_OUTCOME_TIMED_OUT:
                sbuf_printf(&b, "timed out after %u s\n", timeout_s);
                break;
        case RUN_OUTCOME_CANCELLED:
                sbuf_puts(&b, "cancelled\n");
                break;
        case RUN_OUTCOME_FLOODED:
                sbuf_printf(&b, "[stopped: printed more than twice the %zu-byte output cap]\n",
                            cap);
                break;
        case RUN_OUTCOME_NONE:
        default:
                sbuf_puts(&b, "not run: nothing was executed\n");
                break;
        }

        format_usage(&b, &r->usage);
        format_field(&b, "limits hit: ", r->limits_hit, sizeof(r->limits_hit));
        if (r->oom_killed) {
                if (r->mem_limit_bytes > 0 && r->mem_limit_bytes % (1024ull * 1024) == 0)
                        sbuf_printf(&b,
                                    "[out of memory: the kernel killed a process in the sandbox "
                                    "at its %llu MiB limit]\n",
                                    (unsigned long long)(r->mem_limit_bytes / (1024ull * 1024)));
                else if (r->mem_limit_bytes > 0) {
                        char v[64];

                        format_bytes(v, sizeof(v), r->mem_limit_bytes);
                        sbuf_printf(&b,
                                    "[out of memory: the kernel killed a process in the sandbox "
                                    "at its %s limit]\n",
                                    v);
                } else
                        sbuf_puts(&b, "[out of memory: the kernel killed a process in the "
                                      "sandbox at its memory limit]\n");
        }
        format_field(&b, "blocked syscalls: ", r->blocked_syscalls, sizeof(r->blocked_syscalls));
        if (r->blocked_reporting_stopped)
                sbuf_puts(&b, "[blocked syscalls: reporting stopped after 256 reports; later "
                              "ones failed with ENOSYS]\n");
        format_files(&b, r);
        format_field(&b, "audit: ", r->audit_note, sizeof(r->audit_note));
        format_field(&b, "", r->notes, sizeof(r->notes));
        sbuf_puts(&b, "isolation: ");
        if (r->isolation[0])
                sanitize_into(&b, r->isolation, strnlen(r->isolation, sizeof(r->isolation)));
        else
                sbuf_puts(&b, "none (not reported by the backend)");
        return b.p;
}
