/* files.h - the files a run created or changed in the workspace, and the images among them,
 * put into its result (run_result.files, .images). The service takes a snapshot of the
 * workspace before handing the run to a backend and compares after it returns (for a remote
 * engine, after the copy back), with workspace/changes.h. docs/design/results.md. */
#pragma once

#include <stdbool.h>

#include "config/config.h"
#include "run/run.h"
#include "workspace/changes.h"

/* The most directory entries one snapshot looks at; a larger workspace is listed in part,
 * and the result says so. */
#define RUN_FILES_MAX_ENTRIES 20000

struct run_files_before {
        struct ws_snapshot snap;
        bool taken;   /* false: the folder did not exist yet (everything after is new) or
                         could not be listed (see why) */
        bool missing; /* the workspace folder did not exist before the run */
        char why[160];
};

/**
 * run_files_before() - snapshot @cfg->workspace_dir into @ret before the run.
 * Never fails: what went wrong is kept in @ret->why for the result. Release with
 * run_files_before_done().
 */
void run_files_before(const struct sbx_config *cfg, struct run_files_before *ret);

/** run_files_before_done() - free what @b holds. NULL-safe. */
void run_files_before_done(struct run_files_before *b);

/* The widest and tallest image attached, in pixels (Claude's API refuses larger ones). */
#define RUN_IMAGE_MAX_SIDE 8000

/**
 * run_files_after() - fill @res->files (at most RUN_FILES_MAX, in path order, the rest
 * counted in files_more), @res->files_note, and @res->images: the image files among them
 * (PNG, JPEG, GIF, WebP by their bytes; symlinks are never listed nor followed), in path
 * order, at most @cfg->max_images of at most @cfg->max_image_bytes each, none over
 * RUN_IMAGE_MAX_SIDE pixels a side by its header, and no more than fit in the reply's 10 MiB
 * line beside the output; the others stay listed with why they were not attached.
 */
void run_files_after(const struct sbx_config *cfg, const struct run_files_before *before,
                     struct run_result *res);
