/* run.h - the run contract: one request/result model shared by every backend (naive, native,
 * container), and the one text format a result is shown in (MCP tool result, `vestibule-mcp
 * run`). Backends fill a struct run_result; only result.c turns it into text. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/utf8.h" /* sbx_utf8_cut() */
#include "config/config.h"

enum sbx_language {
        SBX_LANG_PYTHON = 0, /* python3 /sandbox/main.py (python rootfs) */
        SBX_LANG_NODE,       /* node /sandbox/main.js (node rootfs) */
        SBX_LANG_BASH,       /* bash /sandbox/main.sh (python rootfs) */
};

/** sbx_language_parse() - "python"|"node"|"bash" -> enum. Return 0 or -EINVAL. */
int sbx_language_parse(const char *s, enum sbx_language *ret);
/** sbx_language_name() - enum -> "python"|"node"|"bash". Static string. */
const char *sbx_language_name(enum sbx_language l);
/** sbx_language_script() - file name of the script under /sandbox: "main.py", "main.js", "main.sh".
 */
const char *sbx_language_script(enum sbx_language l);

/* Called from the backend's supervising thread about every few seconds while a run goes on.
 * @elapsed_ms since start, @timeout_ms the run's deadline. Must not block. */
typedef void (*run_progress_fn)(void *userdata, uint64_t elapsed_ms, uint64_t timeout_ms);

/* The run_code `network` argument: none (the default: lo only) or the egress allowlist. */
enum run_network {
        RUN_NETWORK_NONE = 0,
        RUN_NETWORK_ALLOWLIST,
};

struct run_request {
        enum sbx_language language;
        const char *code; /* not NUL-terminated necessarily; @code_len bytes; borrowed */
        size_t code_len;
        unsigned timeout_s;           /* already validated: 1..cfg->max_timeout_s */
        const struct sbx_config *cfg; /* borrowed */
        int cancel_fd;                /* eventfd/pipe that becomes readable on cancel; -1 = none */
        run_progress_fn progress;     /* may be NULL */
        void *progress_userdata;
        enum run_network network; /* RUN_NETWORK_NONE unless the call asked for "allowlist" */
};

/* One output stream as captured: its head (the first cap bytes), its tail (a ring of the last
 * cap/2 bytes), and how much the program wrote. The result shows all of it when it fits the
 * cap, else the first cap - cap/2 bytes and the last cap/2 (docs/design/results.md). */
struct run_stream {
        /* The head: the first (at most cfg->max_output_bytes) bytes, any bytes, NUL-terminated.
         * Grown as an sbx_buf by run_stream_append(); read as @data and @len, the names
         * every reader of a result uses (an sbx_buf starts with the same two fields). */
        union {
                struct sbx_buf head; /* owned */
                struct {
                        char *data;
                        size_t len;
                };
        };
        char *ring;       /* owned; the last ring_len bytes written, circular from ring_pos */
        size_t ring_size; /* cap/2, fixed at the first append */
        size_t ring_len, ring_pos;
        uint64_t total;      /* bytes the program wrote to this stream, as far as they were read */
        uint64_t stopped_at; /* a flood: @total when the server stopped the run; 0 = not */
};

enum run_outcome {
        RUN_OUTCOME_NONE = 0, /* nothing was executed (a backend failure before exec) */
        RUN_OUTCOME_EXITED,   /* exit_code holds the status */
        RUN_OUTCOME_SIGNALED, /* term_signal holds the signal */
        RUN_OUTCOME_TIMED_OUT,
        RUN_OUTCOME_CANCELLED,
        RUN_OUTCOME_FLOODED, /* stopped: printed more than twice the output cap */
};

/* A usage figure and, when not measured, why. Figures come from where the code cannot
 * write: a cgroup read after exit, the engine, wait4() rusage; never the code's output. */
struct run_measure {
        bool measured;
        bool at_least; /* sampled (the engine's stats): the true figure is at least @value */
        uint64_t value;
        char why[160]; /* when !measured: "Linux 5.19+ needed", "not readable from outside a
                          container" */
};

struct run_usage {
        uint64_t wall_ms;          /* always measured, by the server's monotonic clock */
        bool from_handover;        /* the sandbox and its interpreter were started ahead (a warm
                                      spare): wall and cpu count from the code's hand-over */
        struct run_measure cpu_us; /* user+system CPU time, microseconds */
        struct run_measure mem_peak_bytes;
        struct run_measure pids_peak;
};

/* A regular file in the workspace that the run created or changed (see workspace/changes.h),
 * and, for an image, whether its bytes were attached to the result. */
struct run_file {
        char *path; /* relative to the workspace; owned */
        uint64_t bytes;
        bool created;        /* new, else changed */
        const char *mime;    /* "image/png" ... told from the bytes; NULL = not an image */
        bool attached;       /* its bytes are in run_result.images */
        const char *not_why; /* an image not attached: why ("over VESTIBULE_MAX_IMAGE_BYTES");
                                static string; NULL otherwise */
};

/* An image attached to the result (MCP image content). */
struct run_image {
        const char *mime;    /* static string */
        unsigned char *data; /* owned; @len bytes, at most cfg->max_image_bytes */
        size_t len;
        size_t file; /* index into run_result.files */
};

/* One host:port the run's code asked the egress proxy for, with one verdict
 * (docs/design/egress.md). Entries with the same host, port, verdict and reason are merged. */
struct run_egress_entry {
        char host[256]; /* as the request named it (a name or an IP literal); raw bytes */
        uint16_t port;
        bool allowed;
        const char *reason; /* a denial's reason, a static string: "not in
                               VESTIBULE_EGRESS_ALLOW", "port not allowed", "resolves to a
                               private address", "IP literal not in the allowlist", ...; NULL
                               when allowed */
        unsigned connections;
        uint64_t bytes_up, bytes_down; /* relayed to / from the host */
        unsigned bytes_unknown;        /* allowed connections whose bytes were never recorded
                                          (open when the proxy died): bytes_up and bytes_down
                                          leave them out */
};

/* The network policy a run had, and what it did with it. */
struct run_egress {
        bool on;                          /* network "allowlist": a proxy served the run */
        struct run_egress_entry *entries; /* owned; in the order first tried */
        size_t n_entries, cap_entries;
        uint64_t records_dropped; /* refusals made but not listed (past the proxy's
                                     EGRESS_MAX_RECORDS, or past 64 refused entries); an
                                     allowed connection is always listed */
        char note[256];           /* "the proxy exited during the run (...)"; "" = none */
};

struct run_result {
        enum run_outcome outcome;
        int exit_code;   /* RUN_OUTCOME_EXITED */
        int term_signal; /* RUN_OUTCOME_SIGNALED */
        struct run_stream out, err;
        struct run_usage usage;

        bool oom_killed;          /* the kernel/engine said a process hit the memory cap */
        uint64_t mem_limit_bytes; /* for the out-of-memory note */
        char limits_hit[256]; /* "cpu (throttled in 40 of 41 periods of 100 ms), pids"; "" = none */
        char blocked_syscalls[2048];        /* "mount, bpf"; "" = none. Fits every name the filter
                                               reports, but the list is still marked when full: */
        unsigned blocked_syscalls_unlisted; /* refused calls whose names did not fit */
        bool blocked_reporting_stopped;     /* more than 256 reports: further ones got ENOSYS */
        char audit_note[256]; /* "not recorded (...)" / "not confirmed (...)"; "" = recorded */
        char notes[512]; /* extra notes, '\n'-separated ("" = none), added with run_result_note();
                            each is shown as its own "note: " line */

        char backend[16];    /* "native", "container", "naive" */
        char image[256];     /* the image or rootfs that ran, for the audit log */
        char isolation[320]; /* "native", "container-degraded (limits not applied: ...)", "none
                                (...)" */

        /* What the run created or changed in the workspace (filled by the service, after the
         * backend): at most RUN_FILES_MAX listed, the rest counted; images among them attached
         * up to cfg->max_images. files_note says why the list may be incomplete (a capped or
         * unreadable walk, or the workspace could not be listed); "" = complete. */
        struct run_file *files;
        size_t n_files;
        size_t files_more;
        char files_note[192];
        struct run_image *images;
        size_t n_images, cap_images;
        struct run_egress egress; /* filled by the backend when the call asked for network */

        /* A call in a session (run_code with session, docs/design/sessions.md), filled by the
         * service: the handle, this call's number (1 = the first), the session's age when the
         * call ended; and why this call ended the session ("" = the session lives on; a backend
         * that ended it for a cause only it knows says so first, sbx_runner_channel_broken()).
         * session[0] == '\0': not a session call. */
        char session[64];
        uint64_t session_call;
        uint64_t session_age_ms;
        char session_ended[256];
};

/* The most files a result lists by name; the rest are counted. */
#define RUN_FILES_MAX 50

_Static_assert(offsetof(struct run_stream, data) == offsetof(struct sbx_buf, data) &&
                   offsetof(struct run_stream, len) == offsetof(struct sbx_buf, len),
               "run_stream's data and len must be its head sbx_buf's");

/**
 * run_outcome_name() - the outcome's name in results and records: "exited", "signaled",
 * "timed_out", "cancelled", "flooded", or "not_run" (RUN_OUTCOME_NONE, or out of range).
 * A static string. docs/design/results.md.
 */
const char *run_outcome_name(enum run_outcome o);

/** run_result_done() - free what @r holds (the stream buffers); @r itself is not freed. */
void run_result_done(struct run_result *r);

/**
 * run_stream_append() - add @n bytes to @s, keeping the first @cap bytes and the last @cap/2
 * (in a ring), and counting all. @cap must be the same on every call for one stream.
 * Return: the new total.
 */
uint64_t run_stream_append(struct run_stream *s, const void *buf, size_t n, size_t cap);

/**
 * run_result_note() - append one note to @r->notes (printf-style). A newline or other control
 * byte inside the note is stored as "\xNN", so a note can never make a line of its own (a
 * workspace file name holding "\nisolation: native", say). A note that does not fit is cut.
 */
void run_result_note(struct run_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One stream as shown: docs/design/results.md, "run_code: structuredContent". */
struct run_view_stream {
        char *head;      /* escaped; "" when the stream is empty */
        char *tail;      /* escaped; NULL unless the stream was cut */
        char *truncated; /* "N of M bytes not shown (the first A and the last B are)"; or NULL */
        uint64_t bytes;  /* written by the program, as read */
        uint64_t shown;  /* raw bytes in head and tail */
        size_t head_raw, tail_raw; /* raw bytes in each */
        uint64_t stopped_at;
};

/* Every fact of a result, each as one escaped string in the words both the text block and
 * structuredContent use. Strings are owned; NULL = the fact does not apply. */
struct run_view {
        char fence[17]; /* 16 lowercase hex digits from getrandom(2), found in neither stream */
        struct run_view_stream out, err;
        char *outcome_text;    /* "exit code: 3", "timed out after 7 s", ... */
        char *usage_text;      /* the "usage: " line without its label */
        char *not_measured[3]; /* why cpu, mem_peak, pids_peak were not measured; NULL = were */
        uint64_t stopped_at;   /* a flood: the stream's count when stopped; 0 = not flooded */
        char *limits_hit, *out_of_memory, *blocked_syscalls, *blocked_reporting_stopped, *audit;
        unsigned blocked_syscalls_unlisted;
        char **notes; /* n_notes one-line strings (cap_notes: room for, GREEDY_REALLOC) */
        size_t n_notes, cap_notes;
        char *files;            /* the "files: " line without its label (names escaped to one line);
                                   NULL when the run changed no file */
        char *files_note;       /* why that list may be incomplete; NULL when complete */
        bool egress_on;         /* the run had network "allowlist" */
        char *egress;           /* the "egress: " line without its label; NULL when off */
        char *egress_note;      /* the proxy ended early, ...; NULL = none */
        char **egress_hosts;    /* per egress entry, its host escaped to one line; NULL-ended */
        char *isolation;        /* the full grade line after "isolation: " */
        char *isolation_grade;  /* "native", "container", "native-degraded", ..., "none" */
        char *isolation_reason; /* inside the grade's parentheses; NULL when none */
        char *session;          /* the "session: " line without its label; NULL = no session */
        char *session_ended;    /* why the call ended its session; NULL = it lives on */
};

/**
 * run_view_build() - @v gets every fact of @r (see struct run_view) for a run with @timeout_s
 * and the output cap @cap (bytes shown per stream). Free with run_view_done().
 */
void run_view_build(struct run_view *v, const struct run_result *r, unsigned timeout_s, size_t cap);

/** run_view_done() - free what @v holds; @v itself is not freed. */
void run_view_done(struct run_view *v);

/**
 * run_view_text() - the result text of @v (docs/design/results.md, "The text block"): each
 * non-empty stream between "---<fence>---" lines (head, a "N bytes not shown" fence line and
 * the tail when cut), the outcome line, "usage: ...", optional "limits hit:", out-of-memory,
 * "blocked syscalls:", "files:", "egress:", "audit:" and "note:" lines, and last "isolation:
 * <grade>". Return: a new NUL-terminated valid UTF-8 string; the caller frees it.
 */
char *run_view_text(const struct run_view *v);

/**
 * run_result_format() - run_view_build(), run_view_text(), run_view_done() in one: the text a
 * client and `vestibule-mcp run` show for @r.
 * @timeout_s: the run's timeout, for the timed-out line. @cap: bytes shown per stream.
 * Return: a new NUL-terminated UTF-8 string; the caller frees it.
 */
char *run_result_format(const struct run_result *r, unsigned timeout_s, size_t cap);

/**
 * sbx_text_sanitize() - copy @n bytes of @s into a new valid-UTF-8 string that can neither drive
 * a terminal nor hide or reorder text: invalid sequences and control bytes (all C0 except '\t'
 * and '\n', DEL) appear as "\xNN"; C1 controls (U+0080..U+009F), bidi controls (U+061C,
 * U+200E/F, U+202A..U+202E, U+2066..U+2069), zero-width and invisible characters (U+200B..U+200D,
 * U+2060, U+FEFF) and the separators U+2028/U+2029 as "\uNNNN". Caller frees.
 */
char *sbx_text_sanitize(const char *s, size_t n);

/**
 * sbx_text_sanitize_line() - sbx_text_sanitize(), and '\t' and '\n' escaped too ("\x09",
 * "\x0a"): the result is one line. For notes, reasons, file names. Caller frees.
 */
char *sbx_text_sanitize_line(const char *s, size_t n);
