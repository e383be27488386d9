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
#include "engine/engine.h"
#include "run/sandbox.h"
#include "run/warden.h"
#include "service/files.h"
#include "service/ladder.h"
#include "service/registry.h"
#include "service/sessions.h"
#include "service/warm.h"
#include "workspace/workspace.h"

/* A call whose language's spare is being built waits this long for it, then prepares its own. */
#define WARM_WAIT_MS 1000
/* A call waits this long for a free slot before it is Blocked:. */
#define SLOT_WAIT_MS 5000

struct run_service {
        const struct sbx_config *cfg;
        struct audit_log *audit;
        struct sbx_error audit_err; /* audit_open() failed: every call is Blocked: with this */
        struct ladder *ladder;
        /* every live sandbox, and the calls about to have one: the concurrency slots */
        struct sandbox_registry *registry;
        /* sessions (docs/design/sessions.md): one record each, holding its registry entry
         * (IDLE between calls) */
        struct run_sessions *sessions;
        struct warm_keeper *warm; /* the warm spares (warm.h) */
};

static void session_ended(void *ud, const struct session_info *info, const char *reason);

int run_service_new(const struct sbx_config *cfg, struct run_service **ret, struct sbx_error *err)
{
        return run_service_new_with(cfg, NULL, NULL, ret, err);
}

int run_service_new_with(const struct sbx_config *cfg, backend_ctor_fn native,
                         backend_ctor_fn container, struct run_service **ret, struct sbx_error *err)
{
        struct run_service *s = xcalloc(1, sizeof(*s));

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
        s->registry = sandbox_registry_new(cfg->max_concurrent);
        s->sessions =
            sessions_new(s->registry, cfg->max_sessions, cfg->session_idle_s, session_ended, s);
        s->warm = warm_keeper_new(cfg, s->registry);
        *ret = s;
        return 0;
}

void run_service_shutdown(struct run_service *s)
{
        if (!s)
                return;
        /* no session starts or idles out from now on; each one's end is recorded */
        sessions_stop(s->sessions);
        sessions_end_all(s->sessions, "the server exited");
        /* kill every registered sandbox, destroy those no call owns; the calls' own threads
         * destroy theirs as their wardens return */
        warm_keeper_stop(s->warm); /* no spare is built from now on */
        sandbox_registry_shutdown(s->registry);
        /* no backend starts a sandbox from now on */
        ladder_shutdown(s->ladder);
}

struct run_service *run_service_free(struct run_service *s)
{
        if (!s)
                return NULL;
        run_service_shutdown(s);
        s->warm = warm_keeper_free(s->warm); /* joins a prepare in progress */
        /* before the backends: destroying a sandbox calls into its backend */
        s->registry = sandbox_registry_free(s->registry);
        s->sessions = sessions_free(s->sessions);
        s->ladder = ladder_free(s->ladder);
        s->audit = audit_close(s->audit);
        free(s);
        return NULL;
}

const struct sbx_config *run_service_config(struct run_service *s)
{
        return s->cfg;
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

/* What every call and every session start passes first: valid settings and an open audit log.
 * An invalid setting runs and records nothing, since the audit directory itself may be the
 * bad setting. */
static int service_ready(const struct run_service *s, struct sbx_error *err)
{
        if (s->cfg->invalid)
                return sbx_fail(err, ENOTRECOVERABLE, "%s", s->cfg->invalid_msg);
        if (!s->audit)
                return sbx_fail(err, s->audit_err.code ? s->audit_err.code : EINVAL, "%s",
                                s->audit_err.msg);
        return 0;
}

/* Code never runs as root: a server running as root needs VESTIBULE_RUN_AS, not uid 0. */
static int refuse_root(const struct sbx_config *cfg, struct sbx_error *err)
{
        if (geteuid() == 0 && (!cfg->run_as_set || cfg->run_as_uid == 0))
                return sbx_fail(err, EPERM, "%s", RUN_SERVICE_ROOT_BLOCKED);
        return 0;
}

/* One call on its way through the service: what its steps share. */
struct call {
        struct run_request req;
        struct backend *b;
        struct backend_probe probe;
        struct sandbox_entry *slot; /* its entry in the registry: the concurrency slot */
        struct audit_pending *started;
        char id[33];
        char note[256];
        char *bash_lf;   /* owned: bash code with LF line ends */
        bool ran;        /* past the start record: the end record tells the rest */
        bool session;    /* a call in a session: a failure ends that session, not the backend */
        bool warm_taken; /* its sandbox was a warm spare */
        struct sbx_trace trace;
};

/* The checks before a call may take a slot: the arguments, and root. */
static int admit(struct run_service *s, const struct run_call *rc, struct call *c,
                 struct sbx_error *err)
{
        const struct sbx_config *cfg = s->cfg;
        enum sbx_language lang = SBX_LANG_PYTHON;
        unsigned timeout_s = 0;
        const char *code = rc->code;
        size_t code_len = rc->code_len;
        int r;

        r = validate(s, rc, &lang, &timeout_s, err);
        if (r < 0)
                return r;
        if (rc->network && strcmp(rc->network, "none") != 0 &&
            strcmp(rc->network, "allowlist") != 0)
                return sbx_fail(err, EINVAL,
                                "network must be \"none\" (the default: no network) or "
                                "\"allowlist\" (only the hosts in VESTIBULE_EGRESS_ALLOW, through "
                                "the egress proxy); got '%.40s'",
                                rc->network);
        r = refuse_root(cfg, err);
        if (r < 0)
                return r;
        /* bash reads a CR before LF as part of the word ($'\r': command not found), and
         * clients on Windows send CRLF: bash code gets LF line ends. python (universal
         * newlines) and node (CR is a line terminator) take CRLF as it is, so their code
         * stays byte for byte what was sent. The audit records the code that ran. */
        if (lang == SBX_LANG_BASH && memmem(rc->code, rc->code_len, "\r\n", 2)) {
                c->bash_lf = crlf_to_lf(rc->code, rc->code_len, &code_len);
                code = c->bash_lf;
        }
        c->req = (struct run_request){
            .language = lang,
            .code = code,
            .code_len = code_len,
            .timeout_s = timeout_s,
            .cfg = cfg,
            .cancel_fd = rc->cancel_fd,
            .progress = rc->progress,
            .progress_userdata = rc->progress_userdata,
            .network = rc->network && strcmp(rc->network, "allowlist") == 0 ? RUN_NETWORK_ALLOWLIST
                                                                            : RUN_NETWORK_NONE,
        };
        return 0;
}

/* Fail closed: a backend without the egress proxy never runs an allowlist call. */
static int check_network(const struct call *c, struct sbx_error *err)
{
        if (c->req.network != RUN_NETWORK_ALLOWLIST || c->b->ops->egress)
                return 0;
        return sbx_fail(err, EOPNOTSUPP,
                        "network \"allowlist\" is not available on the %s backend; retry with "
                        "network \"none\", or run on the native backend (VESTIBULE_BACKEND=native)",
                        c->b->ops->name);
}

/* How long a session cell's start record waits for the cell's end record to share one
 * fdatasync (docs/design/sessions.md, "Measured"). */
#define AUDIT_SESSION_BATCH_MS 5u

/* The start record. It goes to the disk while the backend builds the sandbox and runs the
 * code; the result waits for its confirmation (finish()). But when the log lost its last
 * record (a full disk, a folder gone), this run starts only once its own start record is
 * confirmed, so none runs unrecorded (issue 12). */
static int audit_begin(struct run_service *s, struct call *c, struct sbx_error *err)
{
        char lost[256] = "";

        /* a session's cell usually ends within a millisecond: its end record then shares the
         * start record's fdatasync (the start record waits AUDIT_SESSION_BATCH_MS for it) */
        c->started = audit_start_async_batch(s->audit, c->req.language, c->req.timeout_s,
                                             c->b->ops->name, c->req.code, c->req.code_len,
                                             c->session ? AUDIT_SESSION_BATCH_MS : 0, c->id);
        sbx_trace_lap(&c->trace, "audit_start");
        if (!audit_failing(s->audit, lost, sizeof(lost)))
                return 0;
        audit_pending_wait(c->started, c->note, sizeof(c->note));
        c->started = NULL;
        if (!c->note[0])
                return 0;
        /* the server's first record, only slow (a loaded disk took over 2 s to sync it): the
         * log is not known to fail, so the run goes on with the note in its result; a folder
         * full or unwritable at start-up fails that write at once and is refused below */
        if (strcmp(lost, AUDIT_WHY_UNPROVEN) == 0 && strcmp(c->note, AUDIT_NOTE_UNCONFIRMED) == 0)
                return 0;
        sbx_fail(err, EIO,
                 "the audit log cannot record this run (%s), so it does not start; free space "
                 "in '%s' or fix that folder, or point VESTIBULE_AUDIT_DIR at a filesystem of "
                 "its own, then retry",
                 c->note, s->cfg->audit_dir);
        log_error("audit: %s", err->msg);
        return -EIO;
}

/* One run on c->b through its sandbox ops (every backend has them): a spare of the registry,
 * or a sandbox prepared now; registered until the call releases its slot. */
static int dispatch(struct run_service *s, struct call *c, struct run_result *res,
                    struct sbx_error *err)
{
        const struct sandbox_ops *ops = c->b->ops->sandbox;
        struct sandbox_spec spec = {
            .language = c->req.language, .cfg = s->cfg, .network = c->req.network};
        struct sandbox *sb;
        int r;

        /* a spare is built for network "none" (warm.c): an allowlist call never takes one
         * and builds its own sandbox, with its own egress listener */
        sb = c->req.network == RUN_NETWORK_NONE
                 ? warm_take(s->warm, c->slot, c->b, c->req.language, WARM_WAIT_MS)
                 : NULL;
        if (sb) {
                /* a warm spare: started ahead, so the run's figures count from the hand-over */
                res->usage.from_handover = true;
                c->warm_taken = true;
        } else {
                r = ops->prepare(c->b, &spec, &sb, err);
                if (r < 0)
                        return r;
                sandbox_registry_attach(s->registry, c->slot, c->b, ops, sb);
        }
        sbx_trace_lap(&c->trace, c->warm_taken ? "take_spare" : "prepare");
        r = sandbox_run_program(ops, sb, &c->req, res, err);
        /* destroyed now (its slot kept): the files step and the audit follow */
        sandbox_registry_discard(s->registry, c->slot);
        if (r == -ESTALE && c->warm_taken) {
                /* The spare no longer matched what it was built from (settings, workspace, its
                 * Python user site, rootfs, probe answer) and ran nothing: that is the spare's
                 * staleness, not yet the backend's. A sandbox prepared now; only when that one
                 * says -ESTALE too is the probe asked again (run_on_ladder). The spares and the
                 * sessions of the backend are left alone. */
                log_debug("%s: spare not used: %s; preparing one now", c->b->ops->name, err->msg);
                run_result_done(res);
                sbx_error_clear(err);
                res->usage.from_handover = false;
                c->warm_taken = false;
                r = ops->prepare(c->b, &spec, &sb, err);
                if (r < 0)
                        return r;
                sandbox_registry_attach(s->registry, c->slot, c->b, ops, sb);
                sbx_trace_lap(&c->trace, "prepare");
                r = sandbox_run_program(ops, sb, &c->req, res, err);
                sandbox_registry_discard(s->registry, c->slot);
        }
        /* the next call of this language finds a spare (built in the background) */
        if (r == 0)
                warm_want(s->warm, c->b, c->req.language);
        return r;
}

/* dispatch(), and once more on the ladder's next pick when the backend found, before any of
 * the code ran, that the isolation its probe promised cannot be had (-ESTALE; native: no
 * cgroup after all): an honest next grade instead of Blocked:. */
static int run_on_ladder(struct run_service *s, struct call *c, struct run_result *res,
                         struct sbx_error *err)
{
        int r = dispatch(s, c, res, err);

        if (r != -ESTALE)
                return r;
        log_debug("%s: %s; picking again", c->b->ops->name, err->msg);
        ladder_invalidate(s->ladder, c->b);
        warm_drop(s->warm, c->b);
        sandbox_registry_drop_backend(s->registry, c->b);
        run_result_done(res);
        sbx_error_clear(err);
        r = ladder_pick(s->ladder, &c->b, &c->probe, err);
        if (r == 0)
                r = check_network(c, err);
        if (r == 0)
                r = dispatch(s, c, res, err);
        return r;
}

/* After the run: the files it changed, the audit's end record, the result's last facts. */
static void finish(struct run_service *s, struct call *c, int r, struct run_files_before *files,
                   struct run_result *res, const struct sbx_error *err)
{
        struct audit_pending *ended;
        char end_note[256] = "";

        if (r == 0 && !s->cfg->workspace_ro)
                run_files_after(s->cfg, files, res);
        sbx_trace_lap(&c->trace, "files_after");
        if (r < 0) {
                /* Nothing was shown to run: the backend's state may have changed under us (a
                 * session's own failure ends only that session). */
                if (!c->session) {
                        ladder_invalidate(s->ladder, c->b);
                        warm_drop(s->warm, c->b);
                        sandbox_registry_drop_backend(s->registry, c->b);
                }
                res->outcome = RUN_OUTCOME_NONE;
                if (!res->backend[0])
                        snprintf(res->backend, sizeof(res->backend), "%s", c->b->ops->name);
                res->notes[0] = '\0';
                run_result_note(res, "%s", err->msg);
        }
        if (!res->isolation[0])
                snprintf(res->isolation, sizeof(res->isolation), "%s", c->probe.grade);
        /* the end record is queued before the start record's confirmation is waited for: the
         * writer may then confirm both with one fdatasync (a session's cell); both are
         * confirmed, or noted, before the result */
        ended = audit_end_async(s->audit, c->id, res);
        audit_pending_wait(c->started, c->note, sizeof(c->note));
        sbx_trace_lap(&c->trace, "audit_start_wait");
        audit_pending_wait(ended, end_note, sizeof(end_note));
        join_note(c->note, sizeof(c->note), end_note);
        sbx_trace_lap(&c->trace, "audit_end");
        snprintf(res->audit_note, sizeof(res->audit_note), "%s", c->note);
}

/* A slot and a backend are had: record, run, list the files, record the end. */
static int run_call(struct run_service *s, struct call *c, struct run_result *res,
                    struct sbx_error *err)
{
        struct run_files_before files = {0};
        int r;

        /* The timing trace (VESTIBULE_TRACE=timing): the service's own share of a run. */
        sbx_trace_begin(&c->trace, s->cfg->trace_timing, "service");
        r = audit_begin(s, c, err);
        if (r < 0)
                return r;
        c->ran = true;
        /* What the run creates or changes in the workspace comes back listed, images attached
         * (files.h); a read-only workspace cannot change. */
        if (!s->cfg->workspace_ro)
                run_files_before(s->cfg, &files);
        sbx_trace_lap(&c->trace, "files_before");
        r = run_on_ladder(s, c, res, err);
        sbx_trace_lap(&c->trace, "backend_run");
        finish(s, c, r, &files, res, err);
        run_files_before_done(&files);
        if (r < 0 && c->note[0])
                log_warning("audit: %s", c->note);
        return r;
}

/* --- sessions (docs/design/sessions.md) ------------------------------------------------ */

/* The end record of session @info, which is over (@reason): the session table's
 * sessions_ended_fn. */
static void session_ended(void *ud, const struct session_info *info, const char *reason)
{
        struct run_service *s = ud;
        char note[256] = "";

        audit_session(s->audit, false, info->id, sbx_language_name(info->language), info->backend,
                      NULL, reason, info->calls, note, sizeof(note));
        if (note[0])
                log_warning("audit: session end %s", note);
}

/* Prepared on the sessions' thread: a native init dies with the thread that cloned it. */
struct session_prep {
        struct backend *b;
        const struct sandbox_ops *ops;
        struct sandbox_spec spec;
        struct sandbox *sb;
        struct sbx_error err;
};

static int session_prepare(void *arg)
{
        struct session_prep *p = arg;

        return p->ops->prepare(p->b, &p->spec, &p->sb, &p->err);
}

int run_service_session_start(struct run_service *s, const char *language,
                              struct run_session_started *ret, struct sbx_error *err)
{
        const struct sbx_config *cfg = s->cfg;
        struct session_prep p = {.spec = {.cfg = cfg, .mode = SANDBOX_MODE_CELLS}};
        struct sandbox_entry *slot = NULL;
        struct backend_probe probe;
        struct session_info info = {0};
        char note[256] = "";
        int r;

        r = service_ready(s, err);
        if (r < 0)
                return r;
        if (sbx_language_parse(language, &p.spec.language) < 0)
                return sbx_fail(err, EINVAL, "language must be one of python, node, bash");
        r = refuse_root(cfg, err);
        if (r < 0)
                return r;
        r = sessions_reserve(s->sessions, info.id, err);
        if (r < 0)
                return r;
        r = sandbox_registry_acquire(s->registry, -1, SLOT_WAIT_MS, &slot, err);
        if (r < 0) {
                sessions_unreserve(s->sessions);
                return r;
        }
        r = ladder_pick(s->ladder, &p.b, &probe, err);
        if (r == 0 && !p.b->ops->cells)
                r = sbx_fail(err, EOPNOTSUPP,
                             "the %s backend has no sessions (the native and container "
                             "backends have): call run_code without session, or set "
                             "VESTIBULE_BACKEND=native or container and restart",
                             p.b->ops->name);
        if (r == 0) {
                p.ops = p.b->ops->cells;
                /* a session's spare (the runner started and ready, warm.c) when one is kept
                 * and nothing it was built from changed since; else prepared now */
                p.sb = warm_take_session(s->warm, slot, p.b, p.spec.language, WARM_WAIT_MS);
                /* (warm_take_session() gives none of ops without claim()) */
                if (p.sb && (!p.ops || !p.ops->claim || p.ops->claim(p.sb, &p.err) < 0)) {
                        log_debug("session_start: spare refused: %s", p.err.msg);
                        sandbox_registry_discard(s->registry, slot);
                        p.sb = NULL;
                        p.err = (struct sbx_error){0};
                }
        }
        if (r == 0 && !p.sb) {
                r = sessions_on_thread(s->sessions, session_prepare, &p);
                if (r < 0 && p.err.msg[0])
                        *err = p.err;
                else if (r < 0)
                        sbx_fail(err, -r, "the server is shutting down: retry after restart");
                if (r == 0)
                        sandbox_registry_attach(s->registry, slot, p.b, p.ops, p.sb);
        }
        if (r < 0) {
                sandbox_registry_release(s->registry, slot);
                sessions_unreserve(s->sessions);
                return r;
        }
        /* the next session_start of this language finds one (built in the background) */
        warm_want_session(s->warm, p.b, p.spec.language);
        info.language = p.spec.language;
        info.created_ms = sbx_now_ms();
        snprintf(info.backend, sizeof(info.backend), "%s", p.b->ops->name);
        snprintf(info.grade, sizeof(info.grade), "%s", probe.grade);
        /* the record holds the entry (parked) from now on */
        r = sessions_add(s->sessions, &info, slot, err);
        if (r < 0) {
                sandbox_registry_release(s->registry, slot);
                return r;
        }
        audit_session(s->audit, true, info.id, sbx_language_name(info.language), info.backend,
                      info.grade, NULL, 0, note, sizeof(note));
        *ret = (struct run_session_started){0};
        snprintf(ret->id, sizeof(ret->id), "%s", info.id);
        snprintf(ret->isolation, sizeof(ret->isolation), "%s", info.grade);
        snprintf(ret->audit_note, sizeof(ret->audit_note), "%s", note);
        return 0;
}

int run_service_session_end(struct run_service *s, const char *id, unsigned long long *ret_calls,
                            struct sbx_error *err)
{
        struct session_info info;
        int r;

        if (!id || !id[0])
                return sbx_fail(err, EINVAL,
                                "session is empty: pass the handle session_start "
                                "returned");
        r = sessions_end(s->sessions, id, "it was ended by session_end", &info, err);
        if (r < 0)
                return r;
        *ret_calls = info.calls;
        return 0;
}

/* Why a call ended its session, from what the call's result says. */
static void session_ended_why(const struct run_result *res, char *buf, size_t size)
{
        if (res->outcome == RUN_OUTCOME_TIMED_OUT || res->outcome == RUN_OUTCOME_CANCELLED ||
            res->outcome == RUN_OUTCOME_FLOODED)
                snprintf(buf, size,
                         "the cell did not stop within 2 s of its interrupt (SIGINT), so its "
                         "sandbox was killed; start another with session_start");
        else if (res->oom_killed)
                snprintf(buf, size,
                         "the interpreter was killed at the memory limit (VESTIBULE_MEM_MB, for "
                         "the whole session); start another with session_start");
        else
                snprintf(buf, size,
                         "the session's interpreter exited; start another with session_start");
}

/* A session's call after admit(): its record's entry resumed (sessions.c), one cell, then the
 * entry goes back to the record (parked) or, when the call ended the session, away. */
static int session_call(struct run_service *s, const struct run_call *rc, struct call *c,
                        struct run_result *res, struct sbx_error *err)
{
        struct run_files_before files = {0};
        struct session_info info;
        const struct sandbox_ops *ops;
        bool alive;
        int r;

        sbx_trace_begin(&c->trace, s->cfg->trace_timing, "service");
        r = sessions_begin_call(s->sessions, rc->session, c->req.language, rc->cancel_fd,
                                SLOT_WAIT_MS, &info, &c->slot, err);
        if (r < 0)
                return r;
        c->session = true;
        c->b = sandbox_entry_backend(c->slot);
        snprintf(c->probe.grade, sizeof(c->probe.grade), "%s", info.grade);
        ops = sandbox_entry_ops(c->slot);
        sbx_trace_lap(&c->trace, "session_resume");
        r = audit_begin(s, c, err);
        if (r == 0) {
                c->ran = true;
                if (!s->cfg->workspace_ro)
                        run_files_before(s->cfg, &files);
                sbx_trace_lap(&c->trace, "files_before");
                r = sandbox_run_program(ops, sandbox_entry_sandbox(c->slot), &c->req, res, err);
                sbx_trace_lap(&c->trace, "cell");
        }
        alive = ops->alive && ops->alive(sandbox_entry_sandbox(c->slot));
        snprintf(res->session, sizeof(res->session), "%s", info.id);
        res->session_call = info.calls;
        res->session_age_ms = sbx_now_ms() - info.created_ms;
        if (!alive && !res->session_ended[0]) /* the backend may have said why already */
                session_ended_why(res, res->session_ended, sizeof(res->session_ended));
        else if (r == 0 && res->outcome != RUN_OUTCOME_EXITED)
                run_result_note(res, "the cell was interrupted (SIGINT) and stopped; the session "
                                     "lives on with its state");
        if (c->ran)
                finish(s, c, r, &files, res, err);
        run_files_before_done(&files);
        sessions_end_call(s->sessions, info.id, c->slot, alive ? NULL : res->session_ended);
        sbx_trace_lap(&c->trace, "session_park");
        return r;
}

int run_service_execute(struct run_service *s, const struct run_call *call, struct run_result *res,
                        struct sbx_error *err)
{
        struct call c = {0};
        int r;

        r = service_ready(s, err);
        if (r < 0)
                return r;
        r = admit(s, call, &c, err);
        /* a session's sandbox is built once, without an egress listener: fail closed */
        if (r == 0 && call->session && c.req.network != RUN_NETWORK_NONE)
                r = sbx_fail(err, EINVAL,
                             "network \"allowlist\" is not available in a session (its sandbox "
                             "has no network); call run_code without session for an allowlist "
                             "run");
        if (r == 0 && call->session) {
                r = session_call(s, call, &c, res, err);
                goto done;
        }
        if (r == 0)
                r = sandbox_registry_acquire(s->registry, call->cancel_fd, SLOT_WAIT_MS, &c.slot,
                                             err);
        if (r == 0) {
                r = ladder_pick(s->ladder, &c.b, &c.probe, err);
                if (r == 0)
                        r = check_network(&c, err);
                if (r == 0)
                        r = run_call(s, &c, res, err);
                sandbox_registry_release(s->registry, c.slot);
        }
done:
        free(c.bash_lf);
        /* a call refused before it ran gets a record of its own */
        if (r < 0 && !c.ran)
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
        /* the bytes go back as base64 in a reply of one line (files.h): what cannot fit, or
         * an image too large to decode, is not returned */
        uint64_t budget = RUN_REPLY_MAX_BYTES - RUN_REPLY_FIXED_BYTES;
        const char *why = ret->mime ? run_image_refusal(ret->blob, ret->blob_len, &budget)
                          : 4 * (((uint64_t)ret->blob_len + 2) / 3) > budget
                              ? "over the reply's size"
                              : NULL;
        if (why) {
                free(ret->blob);
                ret->blob = NULL;
                ret->blob_len = 0;
                ret->mime = NULL;
                return xasprintf("binary file, %zu bytes: %s, not returned", total, why);
        }
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
