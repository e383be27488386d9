/* registry.c - the one registry of live sandboxes: a list under one lock, the running count
 * as the concurrency limit, and shutdown as one loop (registry.h). */
#include "service/registry.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "run/warden.h"

/* While waiting for a slot, the cancel fd is checked this often. */
#define SLOT_POLL_MS 100

struct sandbox_entry {
        struct sandbox_entry *next;
        enum sandbox_state state;
        struct backend *b;             /* NULL while PREPARING */
        struct sandbox *sb;            /* NULL while PREPARING */
        const struct sandbox_ops *ops; /* @sb's ops: b->ops->sandbox, or b->ops->cells */
        enum sbx_language language;    /* a SPARE's */
        uint64_t spare_since_ms;       /* a SPARE's: when it was added (sbx_now_ms()) */
};

struct sandbox_registry {
        pthread_mutex_t lock;
        pthread_cond_t freed; /* a running slot came free, or shutdown */
        unsigned max_running;
        unsigned running; /* entries PREPARING or RUNNING */
        bool shutting_down;
        struct sandbox_entry *head;
};

struct sandbox_registry *sandbox_registry_new(unsigned max_running)
{
        struct sandbox_registry *r = xcalloc(1, sizeof(*r));
        pthread_condattr_t ca;

        r->max_running = max_running ? max_running : 1;
        pthread_mutex_init(&r->lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&r->freed, &ca);
        pthread_condattr_destroy(&ca);
        return r;
}

static bool counts_running(enum sandbox_state s)
{
        return s == SANDBOX_STATE_PREPARING || s == SANDBOX_STATE_RUNNING;
}

/* Under the lock. */
static void unlink_entry(struct sandbox_registry *r, struct sandbox_entry *e)
{
        for (struct sandbox_entry **p = &r->head; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        break;
                }
        e->next = NULL;
        if (counts_running(e->state) && r->running > 0) {
                r->running--;
                pthread_cond_signal(&r->freed);
        }
}

static void link_entry(struct sandbox_registry *r, struct sandbox_entry *e)
{
        e->next = r->head;
        r->head = e;
        if (counts_running(e->state))
                r->running++;
}

static void kill_entry(struct sandbox_entry *e)
{
        if (e->sb)
                e->ops->kill(e->sb);
}

/* Outside the lock: an entry already unlinked. */
static void destroy_entry(struct sandbox_entry *e)
{
        if (e->sb)
                e->ops->destroy(e->sb);
        free(e);
}

static void destroy_list(struct sandbox_entry *list)
{
        while (list) {
                struct sandbox_entry *next = list->next;

                destroy_entry(list);
                list = next;
        }
}

static bool fd_readable(int fd)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};

        return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

static void timed_wait(struct sandbox_registry *r, uint64_t ms)
{
        struct timespec ts = sbx_deadline_ts(ms);

        (void)pthread_cond_timedwait(&r->freed, &r->lock, &ts);
}

/* Under the lock: wait until a running slot is free, and count it taken. */
static int wait_slot(struct sandbox_registry *r, int cancel_fd, unsigned wait_ms,
                     struct sbx_error *err)
{
        uint64_t deadline = sbx_now_ms() + wait_ms;

        while (!r->shutting_down && r->running >= r->max_running) {
                uint64_t now = sbx_now_ms();

                if (now >= deadline)
                        return sbx_fail(err, EBUSY,
                                        "all %u run slots are busy (VESTIBULE_MAX_CONCURRENT=%u) "
                                        "and none came free within %u s: retry in a few seconds",
                                        r->max_running, r->max_running, wait_ms / 1000);
                if (fd_readable(cancel_fd))
                        return sbx_fail(err, ECANCELED,
                                        "cancelled while waiting for a free run slot");
                timed_wait(r, deadline - now < SLOT_POLL_MS ? deadline - now : SLOT_POLL_MS);
        }
        if (r->shutting_down)
                return sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        r->running++;
        return 0;
}

int sandbox_registry_acquire(struct sandbox_registry *r, int cancel_fd, unsigned wait_ms,
                             struct sandbox_entry **ret, struct sbx_error *err)
{
        struct sandbox_entry *e;
        int rc;

        pthread_mutex_lock(&r->lock);
        rc = wait_slot(r, cancel_fd, wait_ms, err);
        if (rc == 0) {
                e = xcalloc(1, sizeof(*e));
                e->state = SANDBOX_STATE_PREPARING;
                e->next = r->head;
                r->head = e; /* counted by wait_slot */
                *ret = e;
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

void sandbox_registry_attach(struct sandbox_registry *r, struct sandbox_entry *e, struct backend *b,
                             const struct sandbox_ops *ops, struct sandbox *sb)
{
        pthread_mutex_lock(&r->lock);
        e->b = b;
        e->sb = sb;
        e->ops = ops;
        e->state = SANDBOX_STATE_RUNNING;
        if (r->shutting_down)
                kill_entry(e);
        pthread_mutex_unlock(&r->lock);
}

/* Under the lock: the first SPARE of (@b, @ops, @language). */
static struct sandbox_entry *find_spare(struct sandbox_registry *r, struct backend *b,
                                        const struct sandbox_ops *ops, enum sbx_language language)
{
        for (struct sandbox_entry *it = r->head; it; it = it->next)
                if (it->state == SANDBOX_STATE_SPARE && it->b == b && it->ops == ops &&
                    it->language == language)
                        return it;
        return NULL;
}

struct sandbox *sandbox_registry_take_spare(struct sandbox_registry *r, struct sandbox_entry *e,
                                            struct backend *b, const struct sandbox_ops *ops,
                                            enum sbx_language language)
{
        struct sandbox_entry *spare;
        struct sandbox *sb = NULL;

        pthread_mutex_lock(&r->lock);
        spare = r->shutting_down ? NULL : find_spare(r, b, ops, language);
        if (spare) {
                unlink_entry(r, spare);
                sb = spare->sb;
                e->b = b;
                e->sb = sb;
                e->ops = spare->ops;
                e->language = language;
                e->state = SANDBOX_STATE_RUNNING;
                free(spare);
        }
        pthread_mutex_unlock(&r->lock);
        return sb;
}

bool sandbox_registry_has_spare(struct sandbox_registry *r, struct backend *b,
                                const struct sandbox_ops *ops, enum sbx_language language)
{
        bool has;

        pthread_mutex_lock(&r->lock);
        has = find_spare(r, b, ops, language) != NULL;
        pthread_mutex_unlock(&r->lock);
        return has;
}

int sandbox_registry_add_spare(struct sandbox_registry *r, struct backend *b,
                               const struct sandbox_ops *ops, struct sandbox *sb,
                               enum sbx_language language)
{
        struct sandbox_entry *e = xcalloc(1, sizeof(*e));

        *e = (struct sandbox_entry){.state = SANDBOX_STATE_SPARE,
                                    .b = b,
                                    .sb = sb,
                                    .ops = ops,
                                    .language = language,
                                    .spare_since_ms = sbx_now_ms()};
        pthread_mutex_lock(&r->lock);
        if (!r->shutting_down) {
                link_entry(r, e);
                e = NULL;
        }
        pthread_mutex_unlock(&r->lock);
        if (!e)
                return 0;
        destroy_entry(e);
        return -ESHUTDOWN;
}

void sandbox_registry_release(struct sandbox_registry *r, struct sandbox_entry *e)
{
        if (!e)
                return;
        pthread_mutex_lock(&r->lock);
        unlink_entry(r, e);
        pthread_mutex_unlock(&r->lock);
        destroy_entry(e);
}

void sandbox_registry_discard(struct sandbox_registry *r, struct sandbox_entry *e)
{
        struct sandbox_entry gone = {0};

        pthread_mutex_lock(&r->lock);
        gone.b = e->b;
        gone.sb = e->sb;
        gone.ops = e->ops;
        e->b = NULL;
        e->sb = NULL;
        e->state = SANDBOX_STATE_PREPARING;
        pthread_mutex_unlock(&r->lock);
        if (gone.sb)
                gone.ops->destroy(gone.sb);
}

int sandbox_registry_park(struct sandbox_registry *r, struct sandbox_entry *e,
                          struct sbx_error *err)
{
        int rc = 0;

        pthread_mutex_lock(&r->lock);
        if (r->shutting_down)
                rc = sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        else if (e->state != SANDBOX_STATE_RUNNING)
                rc = sbx_fail(err, EINVAL, "only a running sandbox can be parked");
        if (rc == 0) {
                e->state = SANDBOX_STATE_IDLE;
                r->running--;
                pthread_cond_signal(&r->freed);
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

int sandbox_registry_resume(struct sandbox_registry *r, struct sandbox_entry *e, int cancel_fd,
                            unsigned wait_ms, struct sbx_error *err)
{
        int rc;

        pthread_mutex_lock(&r->lock);
        rc = wait_slot(r, cancel_fd, wait_ms, err);
        if (rc == 0 && e->state == SANDBOX_STATE_IDLE) {
                e->state = SANDBOX_STATE_RUNNING; /* counted by wait_slot */
        } else if (rc == 0) {
                r->running--;
                pthread_cond_signal(&r->freed);
                rc = sbx_fail(err, ENOENT, "the session's sandbox %s",
                              e->state == SANDBOX_STATE_GONE ? "was destroyed by the server"
                                                             : "is not idle");
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

/* Under the lock: an IDLE @e gives up its sandbox and becomes GONE; its sandbox is moved to a
 * new unlinked entry, pushed on *@drop to be destroyed outside the lock. */
static void idle_to_gone(struct sandbox_entry *e, struct sandbox_entry **drop)
{
        struct sandbox_entry *husk = xcalloc(1, sizeof(*husk));

        *husk = (struct sandbox_entry){.b = e->b, .sb = e->sb, .ops = e->ops, .next = *drop};
        *drop = husk;
        e->sb = NULL;
        e->state = SANDBOX_STATE_GONE;
}

/* Destroy every sandbox that @match accepts (under the lock): a SPARE's entry is unlinked, an
 * IDLE one becomes GONE (idle_to_gone()); the sandboxes are destroyed outside the lock.
 * Return: how many. */
static unsigned drop_where(struct sandbox_registry *r,
                           bool (*match)(const struct sandbox_entry *e, const void *arg),
                           const void *arg)
{
        struct sandbox_entry *drop = NULL, **p;
        unsigned n = 0;

        pthread_mutex_lock(&r->lock);
        for (p = &r->head; *p;) {
                struct sandbox_entry *e = *p;

                if (!match(e, arg)) {
                        p = &e->next;
                        continue;
                }
                n++;
                if (e->state == SANDBOX_STATE_IDLE) {
                        idle_to_gone(e, &drop);
                        p = &e->next;
                        continue;
                }
                *p = e->next;
                e->next = drop;
                drop = e;
        }
        pthread_mutex_unlock(&r->lock);
        destroy_list(drop);
        return n;
}

static bool idle_or_spare_of(const struct sandbox_entry *e, const void *arg)
{
        return e->b == arg && (e->state == SANDBOX_STATE_SPARE || e->state == SANDBOX_STATE_IDLE);
}

unsigned sandbox_registry_drop_backend(struct sandbox_registry *r, struct backend *b)
{
        return drop_where(r, idle_or_spare_of, b);
}

struct spare_key {
        struct backend *b;
        const struct sandbox_ops *ops; /* NULL: any */
        enum sbx_language language;
        uint64_t before_ms; /* 0: any age; else added before this */
};

static bool spare_matches(const struct sandbox_entry *e, const void *arg)
{
        const struct spare_key *k = arg;

        if (e->state != SANDBOX_STATE_SPARE)
                return false;
        if (k->before_ms)
                return e->spare_since_ms < k->before_ms;
        return e->b == k->b && (!k->ops || (e->ops == k->ops && e->language == k->language));
}

unsigned sandbox_registry_drop_spare(struct sandbox_registry *r, struct backend *b,
                                     const struct sandbox_ops *ops, enum sbx_language language)
{
        struct spare_key k = {.b = b, .ops = ops, .language = language};

        return drop_where(r, spare_matches, &k);
}

unsigned sandbox_registry_drop_idle_spares(struct sandbox_registry *r, uint64_t idle_ms,
                                           uint64_t *ret_next_due_ms)
{
        uint64_t now = sbx_now_ms(), next = UINT64_MAX;
        struct spare_key k = {.before_ms = now >= idle_ms ? now - idle_ms + 1 : 0};
        unsigned n = k.before_ms ? drop_where(r, spare_matches, &k) : 0;

        pthread_mutex_lock(&r->lock);
        for (struct sandbox_entry *it = r->head; it; it = it->next)
                if (it->state == SANDBOX_STATE_SPARE && it->spare_since_ms + idle_ms < next)
                        next = it->spare_since_ms + idle_ms;
        pthread_mutex_unlock(&r->lock);
        if (ret_next_due_ms)
                *ret_next_due_ms = next;
        return n;
}

void sandbox_registry_shutdown(struct sandbox_registry *r)
{
        struct sandbox_entry *drop = NULL, **p;

        if (!r)
                return;
        pthread_mutex_lock(&r->lock);
        r->shutting_down = true;
        for (p = &r->head; *p;) {
                struct sandbox_entry *e = *p;

                kill_entry(e);
                if (e->state == SANDBOX_STATE_SPARE) {
                        *p = e->next;
                        e->next = drop;
                        drop = e;
                        continue;
                }
                if (e->state == SANDBOX_STATE_IDLE)
                        idle_to_gone(e, &drop);
                p = &e->next;
        }
        pthread_cond_broadcast(&r->freed);
        pthread_mutex_unlock(&r->lock);
        destroy_list(drop);
}

struct sandbox_registry *sandbox_registry_free(struct sandbox_registry *r)
{
        struct sandbox_entry *left;

        if (!r)
                return NULL;
        sandbox_registry_shutdown(r);
        pthread_mutex_lock(&r->lock);
        left = r->head;
        r->head = NULL;
        pthread_mutex_unlock(&r->lock);
        if (left)
                log_debug("registry: destroying sandboxes whose calls never released them");
        destroy_list(left);
        pthread_cond_destroy(&r->freed);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
}

unsigned sandbox_registry_count(struct sandbox_registry *r, enum sandbox_state state)
{
        unsigned n = 0;

        pthread_mutex_lock(&r->lock);
        for (struct sandbox_entry *it = r->head; it; it = it->next)
                n += it->state == state;
        pthread_mutex_unlock(&r->lock);
        return n;
}

struct sandbox *sandbox_entry_sandbox(const struct sandbox_entry *e)
{
        return e->sb;
}

struct backend *sandbox_entry_backend(const struct sandbox_entry *e)
{
        return e->b;
}

const struct sandbox_ops *sandbox_entry_ops(const struct sandbox_entry *e)
{
        return e->ops;
}
