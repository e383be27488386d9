/* setup_run.h - the setup command below argument parsing, so tests can drive it without the
 * process environment (setup_main() reads the settings through config_load()). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "setup/setup.h"

struct setup_run_args {
        const char *rootfs_dir; /* absolute */
        const char *from_tar;   /* with language */
        const char *language;
        bool from_debian;
        /* neither: pull these (name@sha256:...) from their registry; NULL = images/pins */
        const char *image_python;
        const char *image_node;
        bool force;
        FILE *out;      /* result lines (stdout) */
        FILE *progress; /* progress lines (stderr); NULL = quiet */
        bool progress_tty;
        const volatile sig_atomic_t *cancel;
};

/**
 * setup_run() - do what @a asks, then the readiness check (or say it is not connected).
 * Return: 0 ready/done, 1 installed but the readiness check says Blocked:, or -errno with @err.
 */
int setup_run(const struct setup_run_args *a, struct sbx_error *err);

/** setup_run_install() - setup_install() with @a's options, printing one result line. */
int setup_run_install(const struct setup_run_args *a, const struct setup_source *src,
                      struct sbx_error *err);
