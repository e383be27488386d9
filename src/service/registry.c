/* registry.c - the one registry of live sandboxes: a list under one lock, the running count
 * as the concurrency limit, and shutdown as one loop (registry.h). */
#include "service/registry.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

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
        enum sbx_language language;
        char session_id[64]; /* IDLE, and RUNNING after a resume; "" = none */
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
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
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
                             struct sandbox *sb)
{
        sandbox_registry_attach_ops(r, e, b, b->ops->sandbox, sb);
}

void sandbox_registry_attach_ops(struct sandbox_registry *r, struct sandbox_entry *e,
                                 struct backend *b, const struct sandbox_ops *ops,
                                 struct sandbox *sb)
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

struct sandbox *sandbox_registry_take_spare(struct sandbox_registry *r, struct sandbox_entry *e,
                                            struct backend *b, enum sbx_language language)
{
        return sandbox_registry_take_spare_of(r, e, b, b->ops->sandbox, language);
}

struct sandbox *sandbox_registry_take_spare_of(struct sandbox_registry *r, struct sandbox_entry *e,
                                               struct backend *b, const struct sandbox_ops *ops,
                                               enum sbx_language language)
{
        struct sandbox_entry *spare = NULL;
        struct sandbox *sb = NULL;

        pthread_mutex_lock(&r->lock);
        for (struct sandbox_entry *it = r->head; it && !r->shutting_down; it = it->next)
                if (it->state == SANDBOX_STATE_SPARE && it->b == b && it->ops == ops &&
                    it->language == language) {
                        spare = it;
                        break;
                }
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

int sandbox_registry_add_spare(struct sandbox_registry *r, struct backend *b, struct sandbox *sb,
                               enum sbx_language language)
{
        return sandbox_registry_add_spare_of(r, b, b->ops->sandbox, sb, language);
}

int sandbox_registry_add_spare_of(struct sandbox_registry *r, struct backend *b,
                                  const struct sandbox_ops *ops, struct sandbox *sb,
                                  enum sbx_language language)
{
        struct sandbox_entry *e = xcalloc(1, sizeof(*e));

        *e = (struct sandbox_entry){
            .state = SANDBOX_STATE_SPARE, .b = b, .sb = sb, .ops = ops, .language = language};
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
        e->session_id[0] = '\0';
        pthread_mutex_unlock(&r->lock);
        if (gone.sb)
                gone.ops->destroy(gone.sb);
}

static bool session_id_ok(const char *id)
{
        size_t n = id ? strlen(id) : 0;

        return n > 0 && n < sizeof(((struct sandbox_entry *)0)->session_id);
}

/* Under the lock: the entry holding session @id, in any state. */
static struct sandbox_entry *find_session(struct sandbox_registry *r, const char *id)
{
        for (struct sandbox_entry *it = r->head; it; it = it->next)
                if (it->session_id[0] && strcmp(it->session_id, id) == 0)
                        return it;
        return NULL;
}

int sandbox_registry_park(struct sandbox_registry *r, struct sandbox_entry *e,
                          const char *session_id, struct sbx_error *err)
{
        struct sandbox_entry *other;
        int rc = 0;

        if (!session_id_ok(session_id))
                return sbx_fail(err, EINVAL, "a session id is 1 to 63 bytes");
        pthread_mutex_lock(&r->lock);
        other = find_session(r, session_id);
        if (r->shutting_down)
                rc = sbx_fail(err, ESHUTDOWN, "the server is shutting down: retry after restart");
        else if (other && other != e)
                rc = sbx_fail(err, EEXIST, "session '%s' exists already", session_id);
        else if (e->state != SANDBOX_STATE_RUNNING)
                rc = sbx_fail(err, EINVAL, "only a running sandbox can be parked");
        if (rc == 0) {
                memcpy(e->session_id, session_id, strlen(session_id) + 1);
                e->state = SANDBOX_STATE_IDLE;
                r->running--;
                pthread_cond_signal(&r->freed);
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

int sandbox_registry_resume(struct sandbox_registry *r, const char *session_id, int cancel_fd,
                            unsigned wait_ms, struct sandbox_entry **ret, struct sbx_error *err)
{
        struct sandbox_entry *e;
        int rc;

        if (!session_id_ok(session_id))
                return sbx_fail(err, EINVAL, "a session id is 1 to 63 bytes");
        pthread_mutex_lock(&r->lock);
        rc = wait_slot(r, cancel_fd, wait_ms, err);
        if (rc == 0) {
                e = find_session(r, session_id);
                if (e && e->state == SANDBOX_STATE_IDLE) {
                        e->state = SANDBOX_STATE_RUNNING; /* counted by wait_slot */
                        *ret = e;
                } else {
                        r->running--;
                        pthread_cond_signal(&r->freed);
                        rc = sbx_fail(err, ENOENT,
                                      "no idle session '%s': it ended, or another call uses it",
                                      session_id);
                }
        }
        pthread_mutex_unlock(&r->lock);
        return rc;
}

int sandbox_registry_drop_session(struct sandbox_registry *r, const char *session_id)
{
        struct sandbox_entry *e;
        int rc = -ENOENT;

        pthread_mutex_lock(&r->lock);
        e = session_id_ok(session_id) ? find_session(r, session_id) : NULL;
        if (e && e->state == SANDBOX_STATE_IDLE) {
                unlink_entry(r, e);
                rc = 0;
        } else if (e) {
                rc = -EBUSY;
        }
        pthread_mutex_unlock(&r->lock);
        if (rc == 0)
                destroy_entry(e);
        return rc;
}

/* Unlink every entry of @b that @match accepts (under the lock), then destroy them outside
 * it; how many. @match NULL: every entry of @b not counted as running. */
static unsigned drop_where(struct sandbox_registry *r, struct backend *b,
                           bool (*match)(const struct sandbox_entry *e, const void *arg),
                           const void *arg)
{
        struct sandbox_entry *drop = NULL, **p;
        unsigned n = 0;

        pthread_mutex_lock(&r->lock);
        for (p = &r->head; *p;) {
                struct sandbox_entry *e = *p;

                if (e->b == b && (match ? match(e, arg) : !counts_running(e->state))) {
                        *p = e->next;
                        e->next = drop;
                        drop = e;
                        n++;
                } else {
                        p = &e->next;
                }
        }
        pthread_mutex_unlock(&r->lock);
        destroy_list(drop);
        return n;
}

unsigned sandbox_registry_drop_backend(struct sandbox_registry *r, struct backend *b)
{
        return drop_where(r, b, NULL, NULL);
}

unsigned sandbox_registry_drop_spare(struct sandbox_registry *r, struct backend *b,
                                     enum sbx_language language)
{
        return sandbox_registry_drop_spare_of(r, b, b->ops->sandbox, language);
}

struct spare_key {
        const struct sandbox_ops *ops;
        enum sbx_language language;
};

static bool spare_of_ops(const struct sandbox_entry *e, const void *arg)
{
        const struct spare_key *k = arg;
        return e->state == SANDBOX_STATE_SPARE && e->ops == k->ops && e->language == k->language;
}

unsigned sandbox_registry_drop_spare_of(struct sandbox_registry *r, struct backend *b,
                                        const struct sandbox_ops *ops, enum sbx_language language)
{
        struct spare_key k = {.ops = ops, .language = language};

        return drop_where(r, b, spare_of_ops, &k);
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
                if (!counts_running(e->state)) {
                        *p = e->next;
                        e->next = drop;
                        drop = e;
                } else {
                        p = &e->next;
                }
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
