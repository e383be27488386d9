/* stats.c - a run's usage as the engine samples it: the newline-delimited JSON of
 * GET /containers/{id}/stats?stream=1 (docs.docker.com/engine/api/v1.41/#operation/ContainerStats),
 * or on Podman libpod's GET /v4.0.0/libpod/containers/stats?stream=true&interval=1
 * (docs.podman.io/en/v4.3/_static/api.html#tag/containers/operation/ContainerStatsLibpod: its
 * compat stream sends one sample only), taken apart line by line. The bytes are the engine's
 * and untrusted: figures are used only when they are non-negative JSON integers, a line is
 * capped, and nothing stops the stream (tests/unit/test_engine_stats.c, tests/fuzz/fuzz_stats.c).
 */
#include "engine/stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/xalloc.h"

/* @o's integer at @path (NULL-terminated keys) into *@ret; false when absent or not an
 * integer >= 0. */
static bool jcount(json_object *o, const char *const *path, uint64_t *ret)
{
        for (; *path; path++)
                if (!json_object_is_type(o, json_type_object) ||
                    !json_object_object_get_ex(o, *path, &o))
                        return false;
        if (!json_object_is_type(o, json_type_int) || json_object_get_int64(o) < 0)
                return false;
        *ret = (uint64_t)json_object_get_int64(o);
        return true;
}

/* libpod's sample: the first object of its "Stats" array, or NULL (the compat shape). A
 * container that is gone gives zeros there (measured): those figures are not taken. */
static json_object *libpod_entry(json_object *o)
{
        json_object *a, *e;

        if (!json_object_object_get_ex(o, "Stats", &a) ||
            !json_object_is_type(a, json_type_array) || json_object_array_length(a) < 1)
                return NULL;
        e = json_object_array_get_idx(a, 0);
        return json_object_is_type(e, json_type_object) ? e : NULL;
}

int engine_stats_sample(struct engine_stats *s, const char *json, size_t n)
{
        static const char *const cpu[] = {"cpu_stats", "cpu_usage", "total_usage", NULL};
        static const char *const max_usage[] = {"memory_stats", "max_usage", NULL};
        static const char *const usage[] = {"memory_stats", "usage", NULL};
        static const char *const pids[] = {"pids_stats", "current", NULL};
        static const char *const lp_mem[] = {"MemUsage", NULL};
        static const char *const lp_pids[] = {"PIDs", NULL};
        static const char *const lp_cpu[] = {"CPUNano", NULL};
        json_tokener *tok = json_tokener_new();
        json_object *o;
        uint64_t v, mem = 0, p = 0;
        bool has_mem, has_pids;

        if (!tok)
                abort();
        o = n <= ENGINE_STATS_LINE_MAX ? json_tokener_parse_ex(tok, json, (int)n) : NULL;
        json_tokener_free(tok);
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        json_object *lp = libpod_entry(o);
        if (lp) { /* libpod: {"Error":null,"Stats":[{"MemUsage":..,"PIDs":..,"CPUNano":..}]} */
                has_mem = jcount(lp, lp_mem, &mem) && mem > 0;
                has_pids = jcount(lp, lp_pids, &p) && p > 0;
        } else {
                has_mem = jcount(o, max_usage, &mem) || jcount(o, usage, &mem);
                has_pids = jcount(o, pids, &p) && p > 0;
        }
        if (!has_mem && !has_pids) {
                json_object_put(o);
                return 0;
        }
        s->samples++;
        if (has_mem) {
                s->has_mem = true;
                s->mem_peak = mem > s->mem_peak ? mem : s->mem_peak;
        }
        if (has_pids) {
                s->has_pids = true;
                s->pids_peak = p > s->pids_peak ? p : s->pids_peak;
        }
        if (jcount(lp ? lp : o, lp ? lp_cpu : cpu, &v)) {
                s->has_cpu = true;
                s->cpu_ns = v > s->cpu_ns ? v : s->cpu_ns; /* a counter: never goes back */
        }
        json_object_put(o);
        return 1;
}

/* The line in s->line ended: take it (blank lines are keep-alives). */
static void line_end(struct engine_stats *s)
{
        if (s->overlong || (s->len > 0 && engine_stats_sample(s, s->line, s->len) < 0))
                s->bad++;
        s->len = 0;
        s->overlong = false;
}

size_t engine_stats_feed(void *ud, const char *buf, size_t n)
{
        struct engine_stats *s = ud;

        for (size_t i = 0; i < n;) {
                const char *nl = memchr(buf + i, '\n', n - i);
                size_t k = nl ? (size_t)(nl - (buf + i)) : n - i;

                if (!s->overlong && s->len + k > ENGINE_STATS_LINE_MAX) {
                        s->overlong = true;
                        s->len = 0;
                }
                if (!s->overlong && k > 0) {
                        if (!s->line)
                                s->line = xmalloc(ENGINE_STATS_LINE_MAX);
                        memcpy(s->line + s->len, buf + i, k);
                        s->len += k;
                }
                i += k;
                if (nl) {
                        line_end(s);
                        i++;
                }
        }
        return n;
}

static void not_measured(struct run_measure *m, const char *why)
{
        *m = (struct run_measure){0};
        snprintf(m->why, sizeof(m->why), "%s", why);
}

static void sampled(struct run_measure *m, bool has, uint64_t v)
{
        if (!has) {
                not_measured(m, "the container engine's samples did not give it");
                return;
        }
        *m = (struct run_measure){.measured = true, .at_least = true, .value = v};
}

void engine_stats_usage(const struct engine_stats *s, const char *no_cpu, struct run_usage *u)
{
        if (s->samples == 0) {
                const char *why = "the run ended before the container engine's first usage "
                                  "sample (it samples about once a second)";
                not_measured(&u->cpu_us, why);
                not_measured(&u->mem_peak_bytes, why);
                not_measured(&u->pids_peak, why);
                return;
        }
        sampled(&u->cpu_us, s->has_cpu, s->cpu_ns / 1000u);
        sampled(&u->mem_peak_bytes, s->has_mem, s->mem_peak);
        sampled(&u->pids_peak, s->has_pids, s->pids_peak);
        if (no_cpu)
                not_measured(&u->cpu_us, no_cpu);
}

void engine_stats_done(struct engine_stats *s)
{
        free(s->line);
        s->line = NULL;
        s->len = 0;
}
