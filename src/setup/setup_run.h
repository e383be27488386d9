/* setup_run.h - the setup command below argument parsing, so tests can drive it without the
 * process environment (setup_main() reads the settings through config_load()). */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "setup/setup.h"

struct sbx_config;

/* What setup_run() did, for the lines it prints at the end. */
struct setup_run_state {
        bool no_engine;       /* no container engine answered */
        bool imported_debian; /* a tarball was imported under the Debian-built image name */
        bool engine_pulled;   /* the pinned registry images were pulled into the engine */
};

struct setup_run_args {
        const char *rootfs_dir; /* absolute */
        const char *from_tar;   /* with language */
        const char *language;
        bool from_debian;
        /* with from_debian: python from build.sh's python-data recipe (numpy, pandas,
         * matplotlib, scipy), installed as python; saved as python-data.tar */
        bool python_data;
        /* with from_debian: also keep the built python.tar and node.tar in this folder (for
         * --from-tar on other machines); a second run rebuilds unless both are there and are
         * the bytes installed. NULL: the build folder is deleted whole. */
        const char *save_tars;
        /* neither: pull these (name@sha256:...) from their registry; NULL = images/pins */
        const char *image_python;
        const char *image_node;
        bool force;
        FILE *out;      /* result lines (stdout) */
        FILE *progress; /* progress lines (stderr); NULL = quiet */
        bool progress_tty;
        const volatile sig_atomic_t *cancel;
        /* The settings: the engine step (VESTIBULE_RUNTIME, DOCKER_HOST, the image names) and
         * the MCP config lines. NULL: native only, no engine step, no MCP config lines. */
        const struct sbx_config *cfg;
        bool native_only; /* do not touch the engine even when one answers */
        const char *exe;  /* the vestibule-mcp path for the MCP config; NULL = this process */
        struct setup_run_state *state; /* set by setup_run() */
        /* the readiness check setup ends with (setup.h, setup_readiness_fn); NULL: setup says
         * the check did not run */
        setup_readiness_fn readiness;
};

/**
 * setup_run() - do what @a asks, then the readiness check (@a->readiness; when none is
 * given, say it did not run).
 * Return: 0 ready/done, 1 installed but the readiness check says Blocked:, or -errno with @err.
 */
int setup_run(const struct setup_run_args *a, struct sbx_error *err);

/** setup_run_install() - setup_install() with @a's options, printing one result line. */
int setup_run_install(const struct setup_run_args *a, const struct setup_source *src,
                      struct sbx_error *err);

/**
 * setup_engine_import() - after @language's native install from tarball @tar: when a container
 * engine answers (the engine module's endpoint resolution, VESTIBULE_RUNTIME honoured), import
 * @tar under engine_image_for() with VESTIBULE_IMAGE_SOURCE=debian, unless an image of the same
 * tarball is already there. No engine: one line saying so, and 0 (native may be enough).
 * Return: 0, or -errno with @err (a failed import; -ENOTUNIQ when a foreign image holds the
 * name).
 */
int setup_engine_import(const struct setup_run_args *a, const char *language, const char *tar,
                        struct sbx_error *err);

/** setup_engine_present() - 1 when the image setup_engine_import() makes for @language is in
 * the engine, 0 when not, < 0 when no engine answers or none applies. */
int setup_engine_present(const struct setup_run_args *a, const char *language);

/** setup_print_mcp_config() - the `claude mcp add` line and the JSON for an MCP client, with
 * the VESTIBULE_* settings that differ from their defaults (and VESTIBULE_IMAGE_SOURCE=debian
 * when setup imported a tarball under the Debian-built name). */
void setup_print_mcp_config(const struct setup_run_args *a);

/**
 * setup_engine_pull() - registry mode: when a container engine answers, make @image
 * (name@sha256:...) present in it by digest through the Engine API, with progress; no engine:
 * one line saying so, and 0. Return: 0 or -errno with @err (a failed pull).
 */
int setup_engine_pull(const struct setup_run_args *a, const char *language, const char *image,
                      struct sbx_error *err);
