/* doctor.h - `vestibule-mcp doctor`: what each backend would give on this host right now and
 * why, every prerequisite checked with the value found, and the grade VESTIBULE_BACKEND=auto
 * would pick (by the ladder's own rule, ladder_decide()). Also the one-line readiness check that
 * `setup` ends with. Reads the host; never runs code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include "common/apparmor.h"
#include "config/config.h"
#include "run/backend.h"

enum doctor_status {
        DOCTOR_OK = 0, /* the prerequisite holds */
        DOCTOR_INFO,   /* a fact, neither good nor bad */
        DOCTOR_WARN,   /* works, but weakens a grade or may surprise */
        DOCTOR_FAIL,   /* the prerequisite does not hold */
};

struct doctor_check {
        char name[48];    /* "kernel", "cgroup v2", "landlock" */
        char value[1024]; /* what was found, with the fix when it is not OK (1024: a path
                           * and the command naming it again) */
        enum doctor_status status;
};

#define DOCTOR_MAX_CHECKS 24

/* One backend's prerequisites and the probe's verdict. */
struct doctor_backend {
        const char *name; /* "gvisor", "native", "container" */
        bool tried;       /* false: not tried on this build (native off Linux) */
        struct backend_probe probe;
        struct doctor_check checks[DOCTOR_MAX_CHECKS];
        size_t n_checks;
};

struct doctor_report {
        struct doctor_check host[DOCTOR_MAX_CHECKS]; /* settings and the user running this */
        size_t n_host;
        struct doctor_backend native, container;
        struct doctor_backend gvisor; /* runsc (src/gvisor/gvisor.h): found, version, platform,
                                         the rootless probe's run */
        const char
            *backend_setting; /* VESTIBULE_BACKEND as set: auto|gvisor|native|container|naive */
        bool usable;          /* a run would execute (with @grade) */
        const char *picked;   /* "gvisor", "native", "container", "naive" or NULL */
        char grade[320];      /* the isolation line a run would get */
        char blocked[1024];   /* when !usable: the Blocked: text */
};

/**
 * doctor_collect() - check everything and probe both backends (each through its real probe, in
 * this process, as the server would) for @cfg.
 * Return: 0 (the report says what is missing; nothing here fails on a bad host).
 */
int doctor_collect(const struct sbx_config *cfg, struct doctor_report *ret);

/** doctor_print() - the report as text, one line per check, then the pick. */
void doctor_print(const struct doctor_report *r, FILE *out);

/** doctor_json() - the report as a new JSON object (caller puts it). */
json_object *doctor_json(const struct doctor_report *r);

/**
 * doctor_readiness_line() - load the settings as the server would (this process's
 * environment) and say in one line whether a run would work: "ready in this terminal's
 * environment: isolation <grade>", or "Blocked: <fix>".
 * Return: 0 ready, 1 blocked.
 */
int doctor_readiness_line(char *buf, size_t size);

/** doctor_readiness_print() - doctor_readiness_line() printed to @out; setup's last step. */
int doctor_readiness_print(FILE *out);

/**
 * doctor_apparmor_check() - the "apparmor profile" check for the facts in @a (from
 * sbx_apparmor_read()): OK when this process runs under its profile, INFO "not needed here"
 * where AppArmor or kernel.apparmor_restrict_unprivileged_userns (Ubuntu's) is absent or 0,
 * FAIL naming the one command that loads the profile (sbx_apparmor_fix()) otherwise.
 * @ret: filled whole.
 */
void doctor_apparmor_check(const struct sbx_apparmor *a, struct doctor_check *ret);
