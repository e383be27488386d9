/* service.c - the run service: validation, the root refusal, concurrency slots, the backend
 * ladder and the audit records, between a tool call and a backend. See service.h. */
#include "service/service.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/trace.h"
#include "common/xalloc.h"
#include "service/ladder.h"
#include "run/warden.h"
#include "service/files.h"
#include "workspace/workspace.h"

/* A call waits this long for a free slot before it is Blocked:. */
#define SLOT_WAIT_MS 5000
/* While waiting, the cancel fd is checked this often. */
#define SLOT_POLL_MS 100

struct run_service {
        const struct sbx_config *cfg;
        struct audit_log *audit;
        struct sbx_error audit_err; /* audit_open() failed: every call is Blocked: with this */
        struct ladder *ladder;

        pthread_mutex_t lock;
        pthread_cond_t slot_freed;
        unsigned slots_used;
        bool shutting_down;
};

int run_service_new(const struct sbx_config *cfg, struct run_service **ret, struct sbx_error *err)
{
        return run_service_new_with(cfg, NULL, NULL, ret, err);
}

int run_service_new_with(const struct sbx_config *cfg, backend_ctor_fn native,
                         backend_ctor_fn container, struct run_service **ret, struct sbx_error *err)
{
        struct run_service *s = xcalloc(1, sizeof(*s));
        pthread_condattr_t ca;

        (void)err;
        s->cfg = cfg;
        /* An invalid config means nothing may run, the audit directory included: do not even
         * look at it. */
        if (!cfg->invalid && audit_open(cfg, &s->audit, &s->audit_err) < 0) {
                s->audit = NULL;
                if (!s->audit_err.msg[0])
                        snprintf(s->audit_err.msg, sizeof(s->audit_err.msg),
                                 "the audit log at '%s' cannot be used: fix "
                                 "VESTIBULE_AUDIT_DIR and restart",
                                 cfg->audit_dir ? cfg->audit_dir : "(unset)");
                if (!s->audit_err.code)
                        s->audit_err.code = EINVAL;
                log_error("%s", s->audit_err.msg);
        }
        s->ladder = ladder_new(cfg, native, container);
        /* leftovers of a server killed mid-run: gone before the first tool call, not at it */
        engine_sweep_at_start(cfg);
        pthread_mutex_init(&s->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->slot_freed, &ca);
        pthread_condattr_destroy(&ca);
        *ret = s;
        return 0;
}

void run_service_shutdown(struct run_service *s)
{
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->shutting_down = true;
        pthread_cond_broadcast(&s->slot_freed);
        pthread_mutex_unlock(&s->lock);
        ladder_shutdown(s->ladder);
}

struct run_service *run_service_free(struct run_service *s)
{
        if (!s)
                return NULL;
        run_service_shutdown(s);
        s->ladder = ladder_free(s->ladder);
        s->audit = audit_close(s->audit);
        pthread_cond_destroy(&s->slot_freed);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

const struct sbx_config *run_service_config(struct run_service *s)
{
        return s->cfg;
}

/* --- slots ----------------------------------------------------------------------------- */

static bool fd_readable(int fd)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};

        return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

static int slot_acquire(struct run_service *s, int cancel_fd, struct sbx_error *err)
{
        unsigned max = s->cfg->max_concurrent ? s->cfg->max_concurrent : 1;
        uint64_t deadline = sbx_now_ms() + SLOT_WAIT_MS;
        int r = 0;

        pthread_mutex_lock(&s->lock);
        while (!s->shutting_down && s->slots_used >= max) {
                uint64_t now = sbx_now_ms(), wake;
                struct timespec ts;

                if (now >= deadline) {
                        r = sbx_fail(err, EBUSY,
                                     "all %u run slots are busy (VESTIBULE_MAX_CONCURRENT=%u) and "
                                     "none came free within %d s: retry in a few seconds",
                                     max, max, SLOT_WAIT_MS / 1000);
                        break;
                }
                if (fd_readable(cancel_fd)) {
                        r = sbx_fail(err, ECANCELED, "cancelled while waiting for a free run slot");
                        break;
                }
                wake = now + SLOT_POLL_MS < deadline ? now + SLOT_POLL_MS : deadline;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += (time_t)((wake - now) / 1000);
                ts.tv_nsec += (long)((wake - now) % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                (void)pthread_cond_timedwait(&s->slot_freed, &s->lock, &ts);
        }
        if (r == 0 && s->shutting_down)
                r = sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        if (r == 0)
                s->slots_used++;
        pthread_mutex_unlock(&s->lock);
        return r;
}

static void slot_release(struct run_service *s)
{
        pthread_mutex_lock(&s->lock);
        if (s->slots_used > 0)
                s->slots_used--;
        pthread_cond_signal(&s->slot_freed);
        pthread_mutex_unlock(&s->lock);
}

/* --- run_code -------------------------------------------------------------------------- */

/* The caller's value quoted back, when it is short and plain enough to be worth it. */
static void quote_value(char *buf, size_t size, const char *v)
{
        size_t n = v ? strlen(v) : 0;

        buf[0] = '\0';
        if (!v || n == 0 || n > 32)
                return;
        for (size_t i = 0; i < n; i++)
                if (!isprint((unsigned char)v[i]) || v[i] == '\'')
                        return;
        snprintf(buf, size, ": got '%s'", v);
}

static void record_blocked(struct run_service *s, const struct run_call *call,
                           const struct sbx_error *why)
{
        char note[256] = "";

        if (!s->audit)
                return;
        audit_blocked(s->audit, call->language ? call->language : "", call->code ? call->code : "",
                      call->code ? call->code_len : 0, why->msg, note, sizeof(note));
        if (note[0])
                log_warning("audit: blocked call %s", note);
}

static void join_note(char *dst, size_t size, const char *add)
{
        size_t n = strlen(dst);

        if (!add[0])
                return;
        if (n == 0)
                snprintf(dst, size, "%s", add);
        else if (n + 2 < size)
                snprintf(dst + n, size - n, "; %s", add);
}

static int validate(struct run_service *s, const struct run_call *call, enum sbx_language *ret_lang,
                    unsigned *ret_timeout_s, struct sbx_error *err)
{
        const struct sbx_config *cfg = s->cfg;
        long long t = call->timeout_s;
        char got[64];

        if (sbx_language_parse(call->language, ret_lang) < 0) {
                quote_value(got, sizeof(got), call->language);
                return sbx_fail(err, EINVAL, "language must be one of python, node, bash%s", got);
        }
        if (!call->code || call->code_len == 0)
                return sbx_fail(err, EINVAL,
                                "code is empty: send the program's source text in code");
        if (call->code_len > cfg->max_code_bytes)
                return sbx_fail(err, EINVAL,
                                "code is %zu bytes, over the limit of %zu bytes "
                                "(VESTIBULE_MAX_CODE_BYTES): send shorter code, or raise the "
                                "setting and restart the server",
                                call->code_len, cfg->max_code_bytes);
        if (t <= 0)
                t = cfg->default_timeout_s;
        if (t < 1 || t > (long long)cfg->max_timeout_s)
                return sbx_fail(err, EINVAL,
                                "timeout_seconds must be between 1 and %u "
                                "(VESTIBULE_MAX_TIMEOUT_S); got %lld: retry with a value in that "
                                "range",
                                cfg->max_timeout_s, t);
        *ret_timeout_s = (unsigned)t;
        return 0;
}

/* @code with every CRLF turned into LF (a lone CR stays); *@ret_len its new length. */
static char *crlf_to_lf(const char *code, size_t len, size_t *ret_len)
{
        char *out = xmalloc(len + 1);
        size_t n = 0;

        for (size_t i = 0; i < len; i++)
                if (!(code[i] == '\r' && i + 1 < len && code[i + 1] == '\n'))
                        out[n++] = code[i];
        out[n] = '\0';
        *ret_len = n;
        return out;
}

int run_service_execute(struct run_service *s, const struct run_call *call, struct run_result *res,
                        struct sbx_error *err)
{
        const struct sbx_config *cfg = s->cfg;
        struct run_request req = {0};
        struct backend_probe probe;
        struct backend *b = NULL;
        enum sbx_language lang = SBX_LANG_PYTHON;
        unsigned timeout_s = 0;
        char id[33] = "", note[256] = "";
        _cleanup_free_ char *bash_lf = NULL;
        const char *code = call->code;
        size_t code_len = call->code_len;
        int r;

        /* An invalid setting: nothing runs and nothing is recorded, since the audit
         * directory itself may be the bad setting. */
        if (cfg->invalid)
                return sbx_fail(err, ENOTRECOVERABLE, "%s", cfg->invalid_msg);
        if (!s->audit)
                return sbx_fail(err, s->audit_err.code ? s->audit_err.code : EINVAL, "%s",
                                s->audit_err.msg);

        r = validate(s, call, &lang, &timeout_s, err);
        if (r < 0)
                goto blocked;
        if (call->network && strcmp(call->network, "none") != 0 &&
            strcmp(call->network, "allowlist") != 0) {
                r = sbx_fail(err, EINVAL,
                             "network must be \"none\" (the default: no network) or "
                             "\"allowlist\" (only the hosts in VESTIBULE_EGRESS_ALLOW, through "
                             "the egress proxy); got '%.40s'",
                             call->network);
                goto blocked;
        }

        if (geteuid() == 0 && (!cfg->run_as_set || cfg->run_as_uid == 0)) {
                r = sbx_fail(err, EPERM, "%s", RUN_SERVICE_ROOT_BLOCKED);
                goto blocked;
        }

        r = slot_acquire(s, call->cancel_fd, err);
        if (r < 0)
                goto blocked;

        r = ladder_pick(s->ladder, &b, &probe, err);
        if (r < 0) {
                slot_release(s);
                goto blocked;
        }

        /* bash reads a CR before LF as part of the word ($'\r': command not found), and
         * clients on Windows send CRLF: bash code gets LF line ends. python (universal
         * newlines) and node (CR is a line terminator) take CRLF as it is, so their code
         * stays byte for byte what was sent. The audit records the code that ran. */
        if (lang == SBX_LANG_BASH && memmem(call->code, call->code_len, "\r\n", 2)) {
                bash_lf = crlf_to_lf(call->code, call->code_len, &code_len);
                code = bash_lf;
        }

        req = (struct run_request){
            .language = lang,
            .code = code,
            .code_len = code_len,
            .timeout_s = timeout_s,
            .cfg = cfg,
            .cancel_fd = call->cancel_fd,
            .progress = call->progress,
            .progress_userdata = call->progress_userdata,
            .network = call->network && strcmp(call->network, "allowlist") == 0
                           ? RUN_NETWORK_ALLOWLIST
                           : RUN_NETWORK_NONE,
        };
        /* Fail closed: a backend without the egress proxy never runs an allowlist call. */
        if (req.network == RUN_NETWORK_ALLOWLIST && !b->ops->egress) {
                r = sbx_fail(err, EOPNOTSUPP,
                             "network \"allowlist\" is not available on the %s backend; retry "
                             "with network \"none\", or run on the native backend "
                             "(VESTIBULE_BACKEND=native)",
                             b->ops->name);
                slot_release(s);
                goto blocked;
        }

        /* The timing trace (VESTIBULE_TRACE=timing): the service's own share of a run. */
        struct sbx_trace trace;
        sbx_trace_begin(&trace, cfg->trace_timing, "service");
        /* The start record goes to the disk while the backend builds the sandbox and runs
         * the code; the result waits for its confirmation (at most 2 s from now) below,
         * before the end record, so both are confirmed (or noted) before it is returned. */
        struct audit_pending *started =
            audit_start_async(s->audit, lang, timeout_s, b->ops->name, code, code_len, id);
        sbx_trace_lap(&trace, "audit_start");
        /* The log lost its last record (a full disk, a folder gone): this run starts only
         * once its own start record is confirmed, so none runs unrecorded (issue 12). */
        char lost[256] = "";
        if (audit_failing(s->audit, lost, sizeof(lost))) {
                audit_pending_wait(started, note, sizeof(note));
                started = NULL;
                if (note[0]) {
                        r = sbx_fail(err, EIO,
                                     "the audit log cannot record this run (%s), so it does not "
                                     "start; free space in '%s' or fix that folder, or point "
                                     "VESTIBULE_AUDIT_DIR at a filesystem of its own, then retry",
                                     note, cfg->audit_dir);
                        log_error("audit: %s", err->msg);
                        slot_release(s);
                        goto blocked;
                }
        }
        /* What the run creates or changes in the workspace comes back listed, images attached
         * (files.h); a read-only workspace cannot change. */
        struct run_files_before files = {0};
        if (!cfg->workspace_ro)
                run_files_before(cfg, &files);
        sbx_trace_lap(&trace, "files_before");
        r = b->ops->run(b, &req, res, err);
        if (r == -ESTALE) {
                /* The backend found, before any of the code ran, that the isolation its probe
                 * promised cannot be had (native: no cgroup after all). Probe again and run
                 * once more on the ladder's honest next grade instead of answering Blocked. */
                log_debug("%s: %s; picking again", b->ops->name, err->msg);
                ladder_invalidate(s->ladder, b);
                run_result_done(res);
                sbx_error_clear(err);
                r = ladder_pick(s->ladder, &b, &probe, err);
                if (r == 0 && req.network == RUN_NETWORK_ALLOWLIST && !b->ops->egress)
                        r = sbx_fail(err, EOPNOTSUPP,
                                     "network \"allowlist\" is not available on the %s backend",
                                     b->ops->name);
                else if (r == 0)
                        r = b->ops->run(b, &req, res, err);
        }
        sbx_trace_lap(&trace, "backend_run");
        if (r == 0 && !cfg->workspace_ro)
                run_files_after(cfg, &files, res);
        run_files_before_done(&files);
        sbx_trace_lap(&trace, "files_after");
        audit_pending_wait(started, note, sizeof(note));
        sbx_trace_lap(&trace, "audit_start_wait");
        if (r < 0) {
                /* Nothing was shown to run: the backend's state may have changed under us. */
                ladder_invalidate(s->ladder, b);
                res->outcome = RUN_OUTCOME_NONE;
                if (!res->backend[0])
                        snprintf(res->backend, sizeof(res->backend), "%s", b->ops->name);
                res->notes[0] = '\0';
                run_result_note(res, "%s", err->msg);
        }
        if (!res->isolation[0])
                snprintf(res->isolation, sizeof(res->isolation), "%s", probe.grade);
        {
                char end_note[256] = "";

                audit_end(s->audit, id, res, end_note, sizeof(end_note));
                join_note(note, sizeof(note), end_note);
        }
        sbx_trace_lap(&trace, "audit_end");
        snprintf(res->audit_note, sizeof(res->audit_note), "%s", note);
        slot_release(s);
        if (r < 0 && note[0])
                log_warning("audit: %s", note);
        return r;

blocked:
        record_blocked(s, call, err);
        return r;
}

/* --- read_workspace -------------------------------------------------------------------- */

/* A binary file's bytes into @ret->blob when it is at most VESTIBULE_MAX_IMAGE_BYTES (read
 * again through the same jailed open, workspace/changes.h), and the note that says what is
 * returned. */
static char *read_blob(const struct sbx_config *cfg, const char *path, size_t total,
                       struct run_ws_file *ret)
{
        struct sbx_error err = {0};
        uint64_t size = 0;
        int r;

        r = ws_read_file(cfg->workspace_dir, path, cfg->max_image_bytes, &ret->blob, &ret->blob_len,
                         &size, &err);
        if (r == -EFBIG)
                return xasprintf("binary file, %zu bytes: over VESTIBULE_MAX_IMAGE_BYTES (%zu), "
                                 "not returned",
                                 total, cfg->max_image_bytes);
        if (r < 0)
                return xasprintf("binary file, %zu bytes: not shown (%s)", total, err.msg);
        ret->mime = ws_sniff_image(ret->blob, ret->blob_len);
        if (ret->mime)
                return xasprintf("image (%s), %zu bytes: attached as image content", ret->mime,
                                 ret->blob_len);
        return xasprintf("binary file, %zu bytes: attached as an embedded resource (base64)",
                         ret->blob_len);
}

int run_service_read_workspace_file(struct run_service *s, const char *path,
                                    struct run_ws_file *ret, struct sbx_error *err)
{
        const struct sbx_config *cfg = s->cfg;
        _cleanup_free_ char *data = NULL;
        size_t len = 0, total = 0, shown;
        bool binary = false;
        int r;

        memset(ret, 0, sizeof(*ret));
        if (cfg->invalid)
                return sbx_fail(err, ENOTRECOVERABLE, "%s", cfg->invalid_msg);
        if (!path || !path[0])
                return sbx_fail(err, EINVAL,
                                "path is empty: give a file path relative to the workspace, "
                                "such as 'out/result.txt'");

        r = workspace_read(cfg->workspace_dir, path, cfg->max_output_bytes, &data, &len, &total,
                           &binary, err);
        if (r < 0)
                return r;
        ret->bytes = total;
        if (total == 0) {
                ret->text = xstrdup("");
                ret->note = xstrdup("empty file");
                return 0;
        }
        if (binary) {
                ret->binary = true;
                ret->text = xstrdup("");
                ret->note = read_blob(cfg, path, total, ret);
                return 0;
        }
        shown = total > len ? sbx_utf8_cut(data, len) : len;
        ret->text = sbx_text_sanitize(data, shown);
        ret->bytes_shown = shown;
        if (total > shown)
                ret->truncated = xasprintf("%zu of %zu bytes not shown", total - shown, total);
        return 0;
}

void run_ws_file_done(struct run_ws_file *f)
{
        if (!f)
                return;
        free(f->text);
        free(f->truncated);
        free(f->note);
        free(f->blob);
        memset(f, 0, sizeof(*f));
}

char *run_ws_file_text(const struct run_ws_file *f)
{
        size_t n = f->text ? strlen(f->text) : 0;

        if (f->note)
                return xasprintf("(%s)", f->note);
        if (f->truncated)
                return xasprintf("%s%s[truncated: %s]", f->text,
                                 n > 0 && f->text[n - 1] != '\n' ? "\n" : "", f->truncated);
        return xstrdup(f->text ? f->text : "");
}

int run_service_read_workspace(struct run_service *s, const char *path, char **ret_text,
                               struct sbx_error *err)
{
        struct run_ws_file f;
        int r = run_service_read_workspace_file(s, path, &f, err);

        if (r < 0)
                return r;
        *ret_text = run_ws_file_text(&f);
        run_ws_file_done(&f);
        return 0;
}
