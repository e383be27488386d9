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

/* One reply is one line of JSON, and an MCP client drops a line over 10 MiB (the TS SDK's stdio
 * transport; src/mcp/mcp-internal.h, MCP_MAX_FRAME_BYTES_DEFAULT). Images get what is left
 * after RUN_REPLY_FIXED_BYTES for the reply's fixed parts and room for its text. */
#define RUN_REPLY_MAX_BYTES ((uint64_t)10 << 20)
#define RUN_REPLY_FIXED_BYTES ((uint64_t)1 << 20)

/**
 * run_image_refusal() - why the image @data (@len bytes, told an image by ws_sniff_image())
 * cannot go into a reply, or NULL: then its base64 size is taken from *@budget (bytes). Refused:
 * a side over RUN_IMAGE_MAX_SIDE pixels by its header (a small file can declare 100000x100000
 * and make a client decode gigabytes: ws_image_size()), a header that says no size or none, and
 * base64 text over *@budget ("over the reply's size"). A static string.
 */
const char *run_image_refusal(const unsigned char *data, size_t len, uint64_t *budget);

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
