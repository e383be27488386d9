/* warm.c - the warm spares' keeper: one background thread that prepares a spare sandbox per
 * (backend, language) after a call of that pair, and drops spares that idled out. See warm.h. */
#include "service/warm.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/warden.h"

/* (backend, ops, language) kept: 3 languages x at most 2 backends in use (native, container),
 * plus native's session spares, fits; one beyond this is simply not kept warm. */
#define WARM_SLOTS 12
/* The keeper's thread stack: it only calls prepare() (the native clone has its own). */
#define WARM_STACK_BYTES ((size_t)256 * 1024)

/* The demand for one (backend, ops, language). Whether a spare of it exists is the
 * registry's to say (its SPARE entries are the one record of a spare, with their age). */
enum warm_state {
        WARM_NONE = 0, /* nothing to do: a spare is registered, or none is wanted */
        WARM_WANTED,   /* a call asked for one: the thread builds it */
        WARM_BUILDING, /* the thread is in prepare() for it */
};

struct warm_slot {
        struct backend *b;
        const struct sandbox_ops *ops; /* b->ops->sandbox, or b->ops->cells (a session's) */
        enum sandbox_mode mode;        /* ONE_SHOT, or CELLS for a session's */
        enum sbx_language language;
        enum warm_state state;
        unsigned gen; /* bumped by warm_drop(): a spare prepared before is not kept */
};

struct warm_keeper {
        const struct sbx_config *cfg;
        struct sandbox_registry *reg;
        pthread_mutex_t lock;
        pthread_cond_t work;  /* the thread: a slot is WANTED, or stop */
        pthread_cond_t built; /* warm_take(): a BUILDING slot is done */
        pthread_t thread;
        bool started, stop;
        struct warm_slot slots[WARM_SLOTS];
        unsigned n_slots;
};

static struct warm_slot *slot_find(struct warm_keeper *w, struct backend *b,
                                   const struct sandbox_ops *ops, enum sbx_language l)
{
        for (unsigned i = 0; i < w->n_slots; i++)
                if (w->slots[i].b == b && w->slots[i].ops == ops && w->slots[i].language == l)
                        return &w->slots[i];
        return NULL;
}

/* Build the spare of @sl (BUILDING; the lock is dropped during prepare). */
static void build_one(struct warm_keeper *w, struct warm_slot *sl)
{
        struct backend *b = sl->b;
        /* network "none" always: an allowlist call never takes a spare (service.c, dispatch)
         * and native's start() refuses a call of another network (fail closed) */
        struct sandbox_spec spec = {.language = sl->language,
                                    .cfg = w->cfg,
                                    .mode = sl->mode,
                                    .network = RUN_NETWORK_NONE,
                                    .spare = true};
        struct sandbox *sb = NULL;
        struct sbx_error err = {0};
        unsigned gen = sl->gen;
        int r;

        pthread_mutex_unlock(&w->lock);
        r = sl->ops->prepare(b, &spec, &sb, &err);
        if (r < 0)
                log_debug("warm: no %s%s spare for %s: %s", sbx_language_name(spec.language),
                          sl->mode == SANDBOX_MODE_CELLS ? " session" : "", b->ops->name, err.msg);
        pthread_mutex_lock(&w->lock);
        if (r == 0 && (sl->gen != gen || w->stop)) {
                /* dropped (probe invalidated) or stopping while it was built: never used */
                pthread_mutex_unlock(&w->lock);
                sl->ops->destroy(sb);
                pthread_mutex_lock(&w->lock);
                r = -ESTALE;
        } else if (r == 0) {
                pthread_mutex_unlock(&w->lock);
                (void)sandbox_registry_add_spare(w->reg, b, sl->ops, sb, spec.language);
                pthread_mutex_lock(&w->lock);
        }
        if (sl->state == WARM_BUILDING)
                sl->state = WARM_NONE;
        pthread_cond_broadcast(&w->built);
}

/* Drop the spares unused for VESTIBULE_WARM_IDLE_S (the registry knows their age); return when
 * the next one is due (UINT64_MAX: none left). */
static uint64_t drop_idle(struct warm_keeper *w)
{
        uint64_t next = UINT64_MAX;

        pthread_mutex_unlock(&w->lock);
        sandbox_registry_drop_idle_spares(w->reg, (uint64_t)w->cfg->warm_idle_s * 1000, &next);
        pthread_mutex_lock(&w->lock);
        return next;
}

static void *keeper_main(void *userdata)
{
        struct warm_keeper *w = userdata;

        pthread_mutex_lock(&w->lock);
        while (!w->stop) {
                struct warm_slot *todo = NULL;
                uint64_t next = drop_idle(w), now;

                for (unsigned i = 0; i < w->n_slots && !todo; i++)
                        if (w->slots[i].state == WARM_WANTED)
                                todo = &w->slots[i];
                if (todo) {
                        todo->state = WARM_BUILDING;
                        build_one(w, todo);
                        continue;
                }
                /* drop_idle() let the lock go: a warm_keeper_free() in that window set stop
                 * and broadcast to no one, and a wait now would never end */
                if (w->stop)
                        break;
                now = sbx_now_ms();
                if (next == UINT64_MAX) {
                        pthread_cond_wait(&w->work, &w->lock);
                } else if (next > now) {
                        struct timespec ts = sbx_deadline_ts(next - now);
                        (void)pthread_cond_timedwait(&w->work, &w->lock, &ts);
                }
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

struct warm_keeper *warm_keeper_new(const struct sbx_config *cfg, struct sandbox_registry *reg)
{
        struct warm_keeper *w = xcalloc(1, sizeof(*w));
        pthread_condattr_t ca;

        w->cfg = cfg;
        w->reg = reg;
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->work, &ca);
        pthread_cond_init(&w->built, &ca);
        pthread_condattr_destroy(&ca);
        return w;
}

void warm_keeper_stop(struct warm_keeper *w)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->work);
        pthread_cond_broadcast(&w->built);
        pthread_mutex_unlock(&w->lock);
}

struct warm_keeper *warm_keeper_free(struct warm_keeper *w)
{
        if (!w)
                return NULL;
        warm_keeper_stop(w);
        if (w->started)
                pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->built);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

static struct sandbox *take_of(struct warm_keeper *w, struct sandbox_entry *e, struct backend *b,
                               const struct sandbox_ops *ops, enum sbx_language language,
                               unsigned wait_ms)
{
        struct sandbox *sb;
        struct warm_slot *sl;
        struct timespec ts;

        if (!w || !w->cfg->warm || !ops)
                return NULL;
        sb = sandbox_registry_take_spare(w->reg, e, b, ops, language);
        if (sb)
                return sb;
        pthread_mutex_lock(&w->lock);
        sl = slot_find(w, b, ops, language);
        if (!sl || (sl->state != WARM_BUILDING && sl->state != WARM_WANTED)) {
                pthread_mutex_unlock(&w->lock);
                return NULL;
        }
        ts = sbx_deadline_ts(wait_ms);
        while (!w->stop && (sl->state == WARM_BUILDING || sl->state == WARM_WANTED))
                if (pthread_cond_timedwait(&w->built, &w->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&w->lock);
        return sandbox_registry_take_spare(w->reg, e, b, ops, language);
}

struct sandbox *warm_take(struct warm_keeper *w, struct sandbox_entry *e, struct backend *b,
                          enum sbx_language language, unsigned wait_ms)
{
        return take_of(w, e, b, b->ops->sandbox, language, wait_ms);
}

struct sandbox *warm_take_session(struct warm_keeper *w, struct sandbox_entry *e, struct backend *b,
                                  enum sbx_language language, unsigned wait_ms)
{
        if (!b->ops->cells || !b->ops->cells->claim)
                return NULL;
        return take_of(w, e, b, b->ops->cells, language, wait_ms);
}

static void want_of(struct warm_keeper *w, struct backend *b, const struct sandbox_ops *ops,
                    enum sandbox_mode mode, enum sbx_language language)
{
        struct warm_slot *sl;

        if (!w || !w->cfg->warm || !ops)
                return;
        pthread_mutex_lock(&w->lock);
        sl = slot_find(w, b, ops, language);
        if (!sl && w->n_slots < WARM_SLOTS) {
                sl = &w->slots[w->n_slots++];
                *sl = (struct warm_slot){.b = b, .ops = ops, .mode = mode, .language = language};
        }
        /* at most one per key: none is wanted while one is registered */
        if (sl && sl->state == WARM_NONE && !w->stop &&
            !sandbox_registry_has_spare(w->reg, b, ops, language)) {
                sl->state = WARM_WANTED;
                if (!w->started) {
                        pthread_attr_t a;
                        pthread_attr_init(&a);
                        pthread_attr_setstacksize(&a, WARM_STACK_BYTES);
                        w->started = pthread_create(&w->thread, &a, keeper_main, w) == 0;
                        pthread_attr_destroy(&a);
                        if (!w->started) {
                                log_warning("warm: cannot start the spares' thread, ignoring");
                                sl->state = WARM_NONE;
                        }
                }
                pthread_cond_signal(&w->work);
        }
        pthread_mutex_unlock(&w->lock);
}

void warm_want(struct warm_keeper *w, struct backend *b, enum sbx_language language)
{
        want_of(w, b, b->ops->sandbox, SANDBOX_MODE_ONE_SHOT, language);
}

void warm_want_session(struct warm_keeper *w, struct backend *b, enum sbx_language language)
{
        if (b->ops->cells && b->ops->cells->claim)
                want_of(w, b, b->ops->cells, SANDBOX_MODE_CELLS, language);
}

void warm_drop(struct warm_keeper *w, struct backend *b)
{
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        for (unsigned i = 0; i < w->n_slots; i++) {
                struct warm_slot *sl = &w->slots[i];
                if (sl->b != b)
                        continue;
                sl->gen++;
                sl->state = WARM_NONE;
        }
        pthread_cond_broadcast(&w->built);
        pthread_mutex_unlock(&w->lock);
        sandbox_registry_drop_spare(w->reg, b, NULL, SBX_LANG_PYTHON);
}
