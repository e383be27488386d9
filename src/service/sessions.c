/* sessions.c - the session table and its thread. See sessions.h. */
#include "service/sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/warden.h"
#include "service/registry.h"

/* At most this many sessions (VESTIBULE_MAX_SESSIONS is capped at 64 by config). */
#define SESSIONS_MAX 64
/* Handles that ended, remembered so a late call is told why. */
#define SESSIONS_GONE 64

/* The one record of a session. */
struct session {
        struct session_info info;
        struct sandbox_entry *entry; /* its sandbox and ops, in the registry; held here */
        uint64_t last_ms;            /* end of the last call (or the start) */
        bool used;
        bool busy; /* a call holds @entry (resumed: RUNNING) */
};

struct gone {
        char id[SESSION_ID_MAX];
        char reason[160];
};

struct job {
        int (*fn)(void *arg);
        void *arg;
        int r;
        bool running, done;
};

struct run_sessions {
        pthread_mutex_t lock;
        pthread_cond_t wake; /* the thread: a job, a stop, or a change of the idle clocks */
        pthread_cond_t done; /* a job finished */
        pthread_t thread;
        bool started, stop;
        unsigned max, reserved;
        uint64_t idle_ms;
        char key[9]; /* this server process's part of every handle */
        struct session s[SESSIONS_MAX];
        struct gone gone[SESSIONS_GONE];
        unsigned gone_next;
        struct job *job;
        struct sandbox_registry *reg; /* where every record's entry is */
        sessions_ended_fn ended;
        void *ended_ud;
};

static void random_hex(char *buf, size_t bytes)
{
        unsigned char raw[32];
        size_t got = 0;

        while (got < bytes) {
                ssize_t n = getrandom(raw + got, bytes - got, 0);
                if (n > 0)
                        got += (size_t)n;
                else if (errno != EINTR)
                        abort(); /* getrandom(2) does not fail on Linux 3.17+ once seeded */
        }
        for (size_t i = 0; i < bytes; i++)
                snprintf(buf + 2 * i, 3, "%02x", raw[i]);
}

static struct session *find(struct run_sessions *t, const char *id)
{
        for (unsigned i = 0; i < SESSIONS_MAX; i++)
                if (t->s[i].used && strcmp(t->s[i].info.id, id) == 0)
                        return &t->s[i];
        return NULL;
}

/* Under the lock: the first idle session past its idle time, or NULL; *@ret_wait_ms until the
 * next one is due otherwise. */
static struct session *next_expired(struct run_sessions *t, uint64_t *ret_wait_ms)
{
        uint64_t now = sbx_now_ms(), wait = 60000;

        for (unsigned i = 0; i < SESSIONS_MAX; i++) {
                struct session *x = &t->s[i];
                if (!x->used || x->busy)
                        continue;
                if (now >= x->last_ms + t->idle_ms)
                        return x;
                if (x->last_ms + t->idle_ms - now < wait)
                        wait = x->last_ms + t->idle_ms - now;
        }
        *ret_wait_ms = wait;
        return NULL;
}

static void remember_gone(struct run_sessions *t, const char *id, const char *reason)
{
        struct gone *g = &t->gone[t->gone_next++ % SESSIONS_GONE];

        snprintf(g->id, sizeof(g->id), "%s", id);
        snprintf(g->reason, sizeof(g->reason), "%s", reason);
}

/* Session @gone (a copy of its record) left the table: release its entry, which destroys its
 * sandbox, unless a call holds it (that call releases it), and tell the service. Outside the
 * lock. */
static void session_over(struct run_sessions *t, const struct session *gone, const char *reason)
{
        if (!gone->busy)
                sandbox_registry_release(t->reg, gone->entry);
        t->ended(t->ended_ud, &gone->info, reason);
}

static void *thread_main(void *arg)
{
        struct run_sessions *t = arg;

        pthread_mutex_lock(&t->lock);
        while (!t->stop) {
                uint64_t wait_ms = 0;
                struct session *x;
                struct timespec ts;

                if (t->job && !t->job->running) {
                        struct job *j = t->job;
                        j->running = true;
                        pthread_mutex_unlock(&t->lock);
                        j->r = j->fn(j->arg);
                        pthread_mutex_lock(&t->lock);
                        j->done = true;
                        t->job = NULL;
                        pthread_cond_broadcast(&t->done);
                        continue;
                }
                x = next_expired(t, &wait_ms);
                if (x) {
                        struct session gone = *x;
                        char reason[96];

                        snprintf(reason, sizeof(reason),
                                 "it expired after %llu s without a call "
                                 "(VESTIBULE_SESSION_IDLE_S)",
                                 (unsigned long long)(t->idle_ms / 1000u));
                        /* out of the table first: no call may take it while it ends */
                        x->used = false;
                        remember_gone(t, gone.info.id, reason);
                        pthread_mutex_unlock(&t->lock);
                        log_info("session '%s': idle for %llu s, ending it", gone.info.id,
                                 (unsigned long long)(t->idle_ms / 1000u));
                        session_over(t, &gone, reason);
                        pthread_mutex_lock(&t->lock);
                        continue;
                }
                ts = sbx_deadline_ts(wait_ms);
                (void)pthread_cond_timedwait(&t->wake, &t->lock, &ts);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

struct run_sessions *sessions_new(struct sandbox_registry *reg, unsigned max_sessions,
                                  unsigned idle_s, sessions_ended_fn ended, void *ud)
{
        struct run_sessions *t = xcalloc(1, sizeof(*t));
        pthread_condattr_t ca;

        pthread_mutex_init(&t->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->wake, &ca);
        pthread_cond_init(&t->done, &ca);
        pthread_condattr_destroy(&ca);
        t->max = max_sessions < SESSIONS_MAX ? max_sessions : SESSIONS_MAX;
        t->idle_ms = (uint64_t)(idle_s ? idle_s : 1) * 1000u;
        t->reg = reg;
        t->ended = ended;
        t->ended_ud = ud;
        random_hex(t->key, 4);
        return t;
}

/* The thread starts with the first session, so a server that never has one never has it. */
static int ensure_thread(struct run_sessions *t)
{
        int r = 0;

        if (!t->started && !t->stop) {
                r = -pthread_create(&t->thread, NULL, thread_main, t);
                t->started = r == 0;
        }
        return t->stop ? -ESHUTDOWN : r;
}

void sessions_stop(struct run_sessions *t)
{
        bool join;

        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        join = t->started;
        t->started = false;
        pthread_cond_broadcast(&t->wake);
        pthread_cond_broadcast(&t->done);
        pthread_mutex_unlock(&t->lock);
        if (join)
                pthread_join(t->thread, NULL);
}

struct run_sessions *sessions_free(struct run_sessions *t)
{
        if (!t)
                return NULL;
        sessions_stop(t);
        pthread_cond_destroy(&t->wake);
        pthread_cond_destroy(&t->done);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
}

int sessions_on_thread(struct run_sessions *t, int (*fn)(void *arg), void *arg)
{
        struct job *j = xcalloc(1, sizeof(*j));
        int r;

        j->fn = fn;
        j->arg = arg;
        pthread_mutex_lock(&t->lock);
        r = ensure_thread(t);
        while (r == 0 && t->job && !t->stop) /* one job at a time */
                pthread_cond_wait(&t->done, &t->lock);
        if (r == 0 && !t->stop) {
                t->job = j;
                pthread_cond_broadcast(&t->wake);
                /* a job the thread took runs to its end, even when a stop comes meanwhile */
                while (!j->done && !(t->stop && !j->running))
                        pthread_cond_wait(&t->done, &t->lock);
                r = j->done ? j->r : -ESHUTDOWN;
                if (t->job == j)
                        t->job = NULL;
        } else if (r == 0) {
                r = -ESHUTDOWN;
        }
        pthread_mutex_unlock(&t->lock);
        free(j);
        return r;
}

int sessions_reserve(struct run_sessions *t, char ret_id[SESSION_ID_MAX], struct sbx_error *err)
{
        unsigned used = 0;
        char rnd[33];
        int r = 0;

        pthread_mutex_lock(&t->lock);
        for (unsigned i = 0; i < SESSIONS_MAX; i++)
                used += t->s[i].used;
        if (t->stop)
                r = sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        else if (t->max == 0)
                r = sbx_fail(err, EUSERS,
                             "sessions are off on this server (VESTIBULE_MAX_SESSIONS=0): call "
                             "run_code without session, or set VESTIBULE_MAX_SESSIONS and "
                             "restart");
        else if (used + t->reserved >= t->max)
                r = sbx_fail(err, EUSERS,
                             "%u sessions are open, the most this server allows "
                             "(VESTIBULE_MAX_SESSIONS=%u): end one with session_end, or let one "
                             "idle out (VESTIBULE_SESSION_IDLE_S=%llu), then retry; or raise "
                             "VESTIBULE_MAX_SESSIONS and restart",
                             used + t->reserved, t->max, (unsigned long long)(t->idle_ms / 1000u));
        if (r == 0) {
                t->reserved++;
                random_hex(rnd, 16);
                snprintf(ret_id, SESSION_ID_MAX, "vs-%s-%s", t->key, rnd);
        }
        pthread_mutex_unlock(&t->lock);
        return r;
}

void sessions_unreserve(struct run_sessions *t)
{
        pthread_mutex_lock(&t->lock);
        if (t->reserved > 0)
                t->reserved--;
        pthread_mutex_unlock(&t->lock);
}

int sessions_add(struct run_sessions *t, const struct session_info *info,
                 struct sandbox_entry *entry, struct sbx_error *err)
{
        int r = sandbox_registry_park(t->reg, entry, err);

        pthread_mutex_lock(&t->lock);
        if (t->reserved > 0)
                t->reserved--;
        /* its idle clock needs the thread, also when its sandbox was a spare (no job ran) */
        if (r == 0 && ensure_thread(t) < 0 && !t->stop)
                log_warning("sessions: cannot start the sessions' thread: idle sessions will "
                            "not expire, ignoring");
        for (unsigned i = 0; r == 0 && i < SESSIONS_MAX; i++)
                if (!t->s[i].used) {
                        t->s[i] = (struct session){
                            .info = *info, .entry = entry, .last_ms = sbx_now_ms(), .used = true};
                        break;
                }
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
        return r;
}

/* Why @id names no session of this table. */
static int unknown(struct run_sessions *t, const char *id, struct sbx_error *err)
{
        static const char start[] = "start one with session_start and pass its handle";
        size_t n = strlen(id);

        for (unsigned i = 0; i < SESSIONS_GONE; i++)
                if (t->gone[i].id[0] && strcmp(t->gone[i].id, id) == 0)
                        return sbx_fail(err, ENOENT, "session '%s' has ended: %s; %s", id,
                                        t->gone[i].reason, start);
        /* "vs-" + 8 + "-" + 32 */
        if (n != 44 || strncmp(id, "vs-", 3) != 0 || id[11] != '-' ||
            strspn(id + 3, "0123456789abcdef") != 8 || strspn(id + 12, "0123456789abcdef") != 32)
                return sbx_fail(err, ENOENT,
                                "'%.60s' is not a session handle (session_start returns one, "
                                "such as 'vs-0a1b2c3d-...'): %s",
                                id, start);
        if (strncmp(id + 3, t->key, 8) != 0)
                return sbx_fail(err, ENOENT,
                                "session '%s' belongs to another server process (sessions end "
                                "with the server that started them): %s",
                                id, start);
        return sbx_fail(err, ENOENT, "no session '%s' on this server: %s", id, start);
}

/* Under the lock: find @id for a call of @language, mark it busy and count the call (a call
 * refused for its language is not one); its record into @ret, its entry into *@ret_entry. */
static int claim_call(struct run_sessions *t, const char *id, enum sbx_language language,
                      struct session_info *ret, struct sandbox_entry **ret_entry,
                      struct sbx_error *err)
{
        struct session *x = find(t, id);

        if (!x)
                return unknown(t, id, err);
        if (x->busy)
                return sbx_fail(err, EBUSY,
                                "a call is running in session '%s' (a session runs one call at a "
                                "time): wait for its result, or cancel it, then retry",
                                id);
        if (language == x->info.language) {
                x->busy = true;
                x->info.calls++;
                *ret = x->info;
                *ret_entry = x->entry;
                return 0;
        }
        *ret = x->info;
        x->last_ms = sbx_now_ms();
        return sbx_fail(err, EINVAL,
                        "session '%s' runs %s, not %s: pass language '%s', or start a %s session "
                        "with session_start",
                        id, sbx_language_name(x->info.language), sbx_language_name(language),
                        sbx_language_name(x->info.language), sbx_language_name(language));
}

/* The call in @id is over, its entry parked again: the idle clock restarts. Return: false when
 * the session left the table meanwhile (server exit): then the call still holds the entry. */
static bool call_over(struct run_sessions *t, const char *id)
{
        struct session *x;

        pthread_mutex_lock(&t->lock);
        x = find(t, id);
        if (x) {
                x->busy = false;
                x->last_ms = sbx_now_ms();
        }
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
        return x != NULL;
}

/* Session @id leaves the table (@reason remembered); *@ret gets its record as it was. */
static bool take_out(struct run_sessions *t, const char *id, const char *reason,
                     struct session *ret)
{
        struct session *x;

        pthread_mutex_lock(&t->lock);
        x = find(t, id);
        if (x) {
                *ret = *x;
                x->used = false;
                remember_gone(t, id, reason);
        }
        pthread_mutex_unlock(&t->lock);
        return x != NULL;
}

int sessions_begin_call(struct run_sessions *t, const char *id, enum sbx_language language,
                        int cancel_fd, unsigned wait_ms, struct session_info *ret,
                        struct sandbox_entry **ret_entry, struct sbx_error *err)
{
        static const char why[] = "its sandbox was ended by the server (its backend was reset)";
        struct sandbox_entry *e = NULL;
        struct session gone;
        int r;

        pthread_mutex_lock(&t->lock);
        r = claim_call(t, id, language, ret, &e, err);
        pthread_mutex_unlock(&t->lock);
        if (r < 0)
                return r;
        r = sandbox_registry_resume(t->reg, e, cancel_fd, wait_ms, err);
        if (r == 0) {
                *ret_entry = e;
                return 0;
        }
        if (r != -ENOENT) {
                if (!call_over(t, id))
                        sandbox_registry_release(t->reg, e); /* no record holds it now */
                return r;
        }
        /* GONE: the registry destroyed its sandbox; this call holds the entry and frees it */
        sandbox_registry_release(t->reg, e);
        if (take_out(t, id, why, &gone))
                t->ended(t->ended_ud, &gone.info, why);
        return sbx_fail(err, ENOENT, "session '%s' has ended: %s; start another with session_start",
                        id, why);
}

void sessions_end_call(struct run_sessions *t, const char *id, struct sandbox_entry *entry,
                       const char *why_ended)
{
        struct sbx_error err = {0};
        struct session gone;

        if (!why_ended && sandbox_registry_park(t->reg, entry, &err) == 0) {
                if (!call_over(t, id))
                        sandbox_registry_release(t->reg, entry); /* no record holds it now */
                return;
        }
        /* over, or the park refused (the server is shutting down): this call releases it */
        sandbox_registry_release(t->reg, entry);
        if (take_out(t, id, why_ended ? why_ended : "the server is shutting down", &gone))
                t->ended(t->ended_ud, &gone.info, why_ended ? why_ended : "the server exited");
}

int sessions_end(struct run_sessions *t, const char *id, const char *reason,
                 struct session_info *ret_info, struct sbx_error *err)
{
        struct session *x, gone = {0};
        int r = 0;

        pthread_mutex_lock(&t->lock);
        x = find(t, id);
        if (!x) {
                r = unknown(t, id, err);
        } else if (x->busy) {
                r = sbx_fail(err, EBUSY,
                             "a call is running in session '%s': wait for its result or cancel "
                             "it, then call session_end again",
                             id);
        } else {
                gone = *x;
                x->used = false;
                remember_gone(t, id, reason);
        }
        pthread_mutex_unlock(&t->lock);
        if (r < 0 || !gone.used) /* (unknown() always fails) */
                return r < 0 ? r : -ENOENT;
        session_over(t, &gone, reason);
        *ret_info = gone.info;
        return 0;
}

void sessions_end_all(struct run_sessions *t, const char *reason)
{
        struct session *gone = xcalloc(SESSIONS_MAX, sizeof(*gone));
        unsigned n = 0;

        pthread_mutex_lock(&t->lock);
        for (unsigned i = 0; i < SESSIONS_MAX; i++)
                if (t->s[i].used) {
                        gone[n++] = t->s[i];
                        t->s[i].used = false;
                        remember_gone(t, t->s[i].info.id, reason);
                }
        pthread_mutex_unlock(&t->lock);
        for (unsigned i = 0; i < n; i++)
                session_over(t, &gone[i], reason);
        free(gone);
}
