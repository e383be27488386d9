/* verify.h - `vestibule-mcp verify`: the leak-detection battery. Each probe is a real attempt
 * from inside a sandbox, made through the real run path (run_service_execute() with python
 * code, as a run_code call), with a control from outside showing the attempt could succeed
 * where nothing stops it. The verdicts are then held against what the run's isolation grade
 * claims: a boundary the grade claims that did not hold fails the battery.
 *
 * The battery never sends a packet off this machine: the off-host TCP connection (to the
 * documentation address 192.0.2.1) and the DNS lookup are tried only after the sandbox showed
 * it has no route and no interface but loopback; when it has one, those probes are NOT HELD
 * without being tried. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include <json-c/json.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"

enum verify_verdict {
        VERIFY_HELD = 0,
        VERIFY_NOT_HELD,
        VERIFY_NOT_APPLICABLE, /* the grade claims no such boundary (a degraded limit) */
        VERIFY_UNTESTED,       /* the attempt or its control could not be made */
};

/* What a grade claims; a probe is judged only when its claim is made. */
enum verify_claim {
        VERIFY_CLAIM_ISOLATION = 0, /* every sandbox grade: filesystem, network, processes */
        VERIFY_CLAIM_SECCOMP,       /* a seccomp filter ("no seccomp filter" degrades it) */
        VERIFY_CLAIM_MEMORY,        /* a memory cap */
        VERIFY_CLAIM_CPU,           /* a CPU quota */
        VERIFY_CLAIM_PIDS,          /* a process count cap */
        VERIFY_CLAIM_EGRESS,        /* network "allowlist" through the egress proxy: the
                                       backends whose runs serve it (native) */
        VERIFY_CLAIM_KERNEL,        /* a kernel between the code and the host's: gVisor's
                                       Sentry ("gvisor" grades, src/gvisor/gvisor.h) */
};

#define VERIFY_MAX_PROBES 32

struct verify_probe {
        const char *id;    /* "key", "shadow", "loopback", ... (stable, for --json) */
        const char *title; /* "read a planted fake key outside the workspace" */
        enum verify_claim claim;
        enum verify_verdict verdict;
        char detail[400]; /* what the attempt met, and the control */
};

struct verify_report {
        char backend[16]; /* the backend the runs went through */
        char grade[320];  /* the isolation line the runs ended with */
        bool ran;         /* false: nothing could run (@blocked says why) */
        char blocked[1024];
        struct verify_probe probes[VERIFY_MAX_PROBES];
        size_t n_probes;
        unsigned held, not_held, not_applicable, untested;
        bool ok; /* ran, and every probe the grade claims held */
};

/**
 * verify_claimed() - does @grade (an isolation line) claim boundary @c? "native" and
 * "container" claim all; "...-degraded (limits not applied: memory, cpu: ...)" not those
 * limits; "no seccomp filter" not the seccomp-only ones; "none (...)" nothing.
 */
bool verify_claimed(const char *grade, enum verify_claim c);

/** verify_claim_none_text() - "grade claims no memory limit" and the like, for @c. */
const char *verify_claim_none_text(enum verify_claim c);

/**
 * verify_run() - run the battery through @cfg's backend choice as the server would (for --all,
 * pass a copy with ->backend set). Creates and removes its own temporary workspace, planted key
 * and listener; @cfg's workspace is not touched. Sets a marker variable in this process's
 * environment (VESTIBULE_VERIFY_MARKER) for the environment probes.
 * Return: 0 with @ret filled (even when Blocked: then !ret->ran), or -errno with @err when the
 * battery itself could not be prepared (no temp dir, no listener).
 */
int verify_run(const struct sbx_config *cfg, struct verify_report *ret, struct sbx_error *err);

/**
 * verify_parse_result() - the battery's result in a run's stdout @out (@len bytes): the JSON
 * object of the one line "VERIFY <@nonce> {...}". What verify trusts: the probes run inside
 * the sandbox, in the rootfs's own interpreter, and report what they met. The per-run nonce
 * (32 hex digits from getrandom(2), passed in the script) makes a line baked into a rootfs
 * (a forged "VERIFY {...}" printed by a wrapper or sitecustomize) count for nothing, and a
 * second result line makes the run count as no result. It cannot stop an interpreter that
 * reads its own script: for that, the checks made from outside (the key's inotify watch, the
 * loopback listener, the rootfs tree, the daemon search, read_workspace on the placed link)
 * decide against the report wherever they disagree; the rest take the sandbox's word
 * (README, "What verify trusts").
 * Return: a new object, or NULL with a static reason in *@ret_why.
 */
json_object *verify_parse_result(const char *out, size_t len, const char *nonce,
                                 const char **ret_why);

/**
 * verify_judge_pids_unreported() - the pids probe's verdict when its run printed no report.
 * HELD when the run named the pids cap as reached (@res->limits_hit, from the run's cgroup's
 * pids.events "max") and its successful forks (@forks, the last "forked N" line; -1 none)
 * stayed within @cfg->pids_max: the cap stopped the sandbox before the report (gVisor in a
 * scope: runsc's threads and a stub process per forked task count against pids.max, and its
 * Sentry exits once it cannot start a thread; cgroup-v2.rst, "PID"). Otherwise UNTESTED: a run
 * the memory cap stopped first (@res->oom_killed, the pids cap not reached: under gVisor each
 * fork costs ~5 MiB of the scope's memory, so at 256 MiB and 128 pids both caps come at ~44
 * forks) says so, naming both caps, pids_peak and the setting; a run stopped at its bound
 * (@bound_s seconds, RUN_OUTCOME_TIMED_OUT) before the cap names the bound, the forks, pids_peak
 * and the setting that gives it longer (the systemd VM under emulation and load); else @why
 * (what the run did instead), the forks and the limits hit. @run_r is run_service_execute()'s
 * return; @res is read only when it is 0. Writes the reason into @detail (@size bytes, cut to fit).
 */
enum verify_verdict verify_judge_pids_unreported(const struct sbx_config *cfg, int run_r,
                                                 const struct run_result *res, long forks,
                                                 unsigned bound_s, const char *why, char *detail,
                                                 size_t size);

/** verify_print() - one line per probe, then the summary line. */
void verify_print(const struct verify_report *r, FILE *out);

/** verify_json() - the report as a new JSON object. */
json_object *verify_json(const struct verify_report *r);

/** verify_verdict_word() - "held", "NOT HELD", "not applicable", "not tested". */
const char *verify_verdict_word(enum verify_verdict v);
