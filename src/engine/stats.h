/* stats.h - a run's usage as the engine samples it (stats.c): the stream of
 * GET /containers/{id}/stats?stream=1 (docs.docker.com/engine/api/v1.41/#operation/ContainerStats),
 * read beside the run's attach and wait, for a server that cannot read the host's cgroups (not
 * root, or an engine on another machine). Private to src/engine. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run/run.h"

#define ENGINE_STATS_LINE_MAX 65536 /* one sample's JSON; Docker's are 2-5 KB */

/* The samples seen so far; zeroed = none. The bytes are the engine's: untrusted. */
struct engine_stats {
        char *line; /* the sample being received (malloc'd, up to ENGINE_STATS_LINE_MAX) */
        size_t len;
        bool overlong;    /* the current line went past the cap: it is skipped */
        unsigned samples; /* samples of a live container (memory or pids figures in them) */
        unsigned bad;     /* lines that were not a JSON object, or overlong */
        bool has_cpu, has_mem, has_pids;
        uint64_t cpu_ns;    /* the last sample's cpu_stats.cpu_usage.total_usage, ns */
        uint64_t mem_peak;  /* the largest memory_stats.max_usage (cgroup v1), else .usage, bytes */
        uint64_t pids_peak; /* the largest pids_stats.current */
};

/**
 * engine_stats_sample() - take one sample, @n bytes of JSON at @json (not NUL-terminated).
 * Figures are used only when they are JSON integers >= 0; an object with neither
 * memory_stats.usage nor pids_stats.current (Docker's sample of a container not running) is
 * not counted. Return 1 (counted), 0 (an empty sample) or -EBADMSG (not a JSON object).
 */
int engine_stats_sample(struct engine_stats *s, const char *json, size_t n);

/**
 * engine_stats_feed() - a curl on_data callback (engine_call.on_data, @ud = the struct
 * engine_stats): split the stream into lines of newline-delimited JSON and take each with
 * engine_stats_sample(); a line over ENGINE_STATS_LINE_MAX is skipped. Return @n (the stream
 * is never stopped for bad bytes; they are counted in ->bad).
 */
size_t engine_stats_feed(void *ud, const char *buf, size_t n);

/**
 * engine_stats_usage() - the run's cpu, mem_peak and pids_peak from @s into @u, each marked
 * a lower bound (run_measure.at_least: the engine samples about once a second, so the peaks
 * between samples and the CPU after the last one are not seen). Without samples (the run ended
 * before the first) each says why it is not measured. With @no_cpu (a warm spare: its
 * interpreter's start-up is in the container's CPU too) cpu says @no_cpu's reason instead.
 */
void engine_stats_usage(const struct engine_stats *s, const char *no_cpu, struct run_usage *u);

/** engine_stats_done() - free @s's buffer; a zeroed @s is fine. */
void engine_stats_done(struct engine_stats *s);
