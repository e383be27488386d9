/* ladder.c - backend choice and probe cache. See ladder.h. */
#include "service/ladder.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "engine/engine.h"
#include "gvisor/gvisor.h"
#include "naive/naive.h"
#include "native/backend.h"
#include "run/warden.h"

/* An unusable probe (or a constructor failure) is retried after this long. */
#define LADDER_RETRY_MS 5000

enum { RUNG_NAIVE, RUNG_NATIVE, RUNG_CONTAINER, RUNG_GVISOR, RUNG_N };

struct rung {
        const char *name;
        backend_ctor_fn ctor;
        struct backend *b;
        bool have_probe;
        uint64_t probed_ms;
        struct backend_probe probe; /* when !usable, probe.blocked says why */
};

struct ladder {
        const struct sbx_config *cfg;
        pthread_mutex_t lock;
        struct rung rungs[RUNG_N];
        bool gvisor_in_auto; /* auto tries the gvisor rung (not with test doubles) */
};

bool ladder_native_supported(void)
{
#ifdef __linux__
        return true;
#else
        return false;
#endif
}

enum ladder_choice ladder_decide(const struct backend_probe *nat, const struct backend_probe *con)
{
        return ladder_decide_all(NULL, nat, con);
}

enum ladder_choice ladder_decide_all(const struct backend_probe *gv,
                                     const struct backend_probe *nat,
                                     const struct backend_probe *con)
{
        bool g_ok = gv && gv->usable, n_ok = nat && nat->usable, c_ok = con && con->usable;

        /* A kernel in between beats the host's kernel, grade for grade: full gvisor first,
         * gvisor-degraded first among the degraded. A full native or container beats a
         * degraded gvisor: their limits protect the host from what the code spends. */
        if (g_ok && !gv->degraded)
                return LADDER_CHOICE_GVISOR;
        if (n_ok && !nat->degraded)
                return LADDER_CHOICE_NATIVE;
        /* A full container beats degraded native: its limits protect the host. */
        if (c_ok && !con->degraded)
                return LADDER_CHOICE_CONTAINER;
        if (g_ok)
                return LADDER_CHOICE_GVISOR;
        if (n_ok)
                return LADDER_CHOICE_NATIVE;
        if (c_ok)
                return LADDER_CHOICE_CONTAINER;
        return LADDER_CHOICE_NONE;
}

void ladder_blocked_text(char *buf, size_t size, const struct backend_probe *nat,
                         const struct backend_probe *con)
{
        const char *c = con && con->blocked[0] ? con->blocked : "not usable on this host";

        if (!nat) {
                snprintf(buf, size,
                         "no sandbox is usable: this build runs code only in containers; "
                         "container: %.900s",
                         c);
                return;
        }
        /* Each reason is a backend's own Blocked: text, well under 480 bytes; both fit. */
        snprintf(buf, size, "no sandbox is usable on this host. native: %.480s. container: %.480s",
                 nat->blocked[0] ? nat->blocked : "not usable on this host", c);
}

struct ladder *ladder_new(const struct sbx_config *cfg, backend_ctor_fn native,
                          backend_ctor_fn container)
{
        struct ladder *l = xcalloc(1, sizeof(*l));

        l->cfg = cfg;
        pthread_mutex_init(&l->lock, NULL);
        l->rungs[RUNG_NAIVE] = (struct rung){.name = "naive", .ctor = naive_backend_new};
        l->rungs[RUNG_NATIVE] =
            (struct rung){.name = "native", .ctor = native ? native : native_backend_new};
        l->rungs[RUNG_CONTAINER] =
            (struct rung){.name = "container", .ctor = container ? container : engine_backend_new};
        /* tests that pass doubles for the two never get a real gvisor rung in auto */
        l->rungs[RUNG_GVISOR] = (struct rung){.name = "gvisor", .ctor = gvisor_backend_new};
        l->gvisor_in_auto = !native && !container;
        return l;
}

struct ladder *ladder_free(struct ladder *l)
{
        if (!l)
                return NULL;
        for (size_t i = 0; i < RUNG_N; i++)
                l->rungs[i].b = backend_free(l->rungs[i].b);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
}

/* Create and probe @r as needed (lock held). Afterwards r->probe says usable or why not. */
static void rung_probe(struct ladder *l, struct rung *r)
{
        struct sbx_error err = {0};
        uint64_t now = sbx_now_ms();
        int k;

        if (r->have_probe && (r->probe.usable || now - r->probed_ms < LADDER_RETRY_MS))
                return;
        memset(&r->probe, 0, sizeof(r->probe));
        r->have_probe = true;
        r->probed_ms = now;
        if (!r->b) {
                k = r->ctor(l->cfg, &r->b, &err);
                if (k < 0 || !r->b) {
                        r->b = NULL;
                        snprintf(r->probe.blocked, sizeof(r->probe.blocked), "%s",
                                 err.msg[0] ? err.msg : "the backend could not be created");
                        log_debug("%s backend unavailable: %s", r->name, r->probe.blocked);
                        return;
                }
        }
        k = r->b->ops->probe(r->b, &r->probe, &err);
        if (k < 0) {
                r->probe.usable = false;
                snprintf(r->probe.blocked, sizeof(r->probe.blocked), "%s",
                         err.msg[0] ? err.msg : "its probe failed");
        } else if (!r->probe.usable && !r->probe.blocked[0])
                snprintf(r->probe.blocked, sizeof(r->probe.blocked), "not usable on this host");
        log_debug("%s backend probe: %s", r->name,
                  r->probe.usable ? r->probe.grade : r->probe.blocked);
}

/* The native rung inside a container: not probed, its Blocked: text says why (@marker: the
 * file that showed it, config_in_container()). */
static void native_skip(struct rung *r, const char *marker)
{
        memset(&r->probe, 0, sizeof(r->probe));
        r->have_probe = true;
        r->probed_ms = sbx_now_ms();
        snprintf(r->probe.blocked, sizeof(r->probe.blocked),
                 "not used: this server runs in its OCI image (%.60s), inside a container, "
                 "where the container engine is the sandbox; set VESTIBULE_BACKEND=native to "
                 "try it anyway",
                 marker && *marker ? marker : "a container marker");
}

static int take(struct rung *r, struct backend **ret_b, struct backend_probe *ret_probe)
{
        *ret_b = r->b;
        *ret_probe = r->probe;
        return 0;
}

int ladder_pick(struct ladder *l, struct backend **ret_b, struct backend_probe *ret_probe,
                struct sbx_error *err)
{
        struct rung *nat = &l->rungs[RUNG_NATIVE], *con = &l->rungs[RUNG_CONTAINER], *r = NULL;
        struct rung *gv = &l->rungs[RUNG_GVISOR];
        bool gv_on = l->gvisor_in_auto && ladder_native_supported() && !l->cfg->in_container;
        int ret;

        pthread_mutex_lock(&l->lock);
        switch (l->cfg->backend) {
        case SBX_BACKEND_NAIVE:
                r = &l->rungs[RUNG_NAIVE];
                break;
        case SBX_BACKEND_NATIVE:
                r = nat;
                break;
        case SBX_BACKEND_CONTAINER:
                r = con;
                break;
        case SBX_BACKEND_GVISOR:
                r = gv;
                break;
        case SBX_BACKEND_AUTO:
        default: {
                enum ladder_choice c;

                /* Each rung is probed only when the ones above it did not win: a host with
                 * native never touches the container engine. Inside a container neither gvisor
                 * nor native is tried: their namespaces would nest in the engine's, under a
                 * seccomp filter and an AppArmor profile this server did not choose. */
                if (gv_on) {
                        rung_probe(l, gv);
                        if (gv->probe.usable && !gv->probe.degraded) {
                                ret = take(gv, ret_b, ret_probe);
                                goto out;
                        }
                }
                if (ladder_native_supported() && l->cfg->in_container)
                        native_skip(nat, l->cfg->in_container_marker);
                else if (ladder_native_supported()) {
                        rung_probe(l, nat);
                        if (nat->probe.usable && !nat->probe.degraded) {
                                ret = take(nat, ret_b, ret_probe);
                                goto out;
                        }
                }
                rung_probe(l, con);
                c = ladder_decide_all(gv_on ? &gv->probe : NULL,
                                      ladder_native_supported() ? &nat->probe : NULL, &con->probe);
                if (c == LADDER_CHOICE_GVISOR) {
                        ret = take(gv, ret_b, ret_probe);
                } else if (c == LADDER_CHOICE_NATIVE) {
                        ret = take(nat, ret_b, ret_probe);
                } else if (c == LADDER_CHOICE_CONTAINER) {
                        ret = take(con, ret_b, ret_probe);
                } else {
                        char why[sizeof(err->msg)];

                        ladder_blocked_text(why, sizeof(why),
                                            ladder_native_supported() ? &nat->probe : NULL,
                                            &con->probe);
                        ret = sbx_fail(err, ENOENT, "%s", why);
                }
                goto out;
        }
        }
        rung_probe(l, r);
        if (r->probe.usable)
                ret = take(r, ret_b, ret_probe);
        else
                ret = sbx_fail(err, ENOENT, "%s (VESTIBULE_BACKEND=%s)", r->probe.blocked, r->name);
out:
        pthread_mutex_unlock(&l->lock);
        return ret;
}

void ladder_invalidate(struct ladder *l, struct backend *b)
{
        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < RUNG_N; i++)
                if (l->rungs[i].b == b)
                        l->rungs[i].have_probe = false;
        pthread_mutex_unlock(&l->lock);
}

void ladder_shutdown(struct ladder *l)
{
        if (!l)
                return;
        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < RUNG_N; i++)
                if (l->rungs[i].b && l->rungs[i].b->ops->shutdown)
                        l->rungs[i].b->ops->shutdown(l->rungs[i].b);
        pthread_mutex_unlock(&l->lock);
}
