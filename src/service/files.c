/* files.c - what a run changed in the workspace, into its result. See files.h. */
#include "service/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/xalloc.h"

void run_files_before(const struct sbx_config *cfg, struct run_files_before *ret)
{
        struct sbx_error err = {0};
        int r;

        *ret = (struct run_files_before){0};
        if (!cfg->workspace_dir || !cfg->workspace_dir[0]) {
                snprintf(ret->why, sizeof(ret->why), "no workspace folder is set");
                return;
        }
        r = ws_snapshot_take(cfg->workspace_dir, RUN_FILES_MAX_ENTRIES, &ret->snap, &err);
        if (r == -ENOENT) {
                ret->missing = true;
                return;
        }
        if (r < 0) {
                snprintf(ret->why, sizeof(ret->why), "not listed: %.140s", err.msg);
                return;
        }
        ret->taken = true;
}

void run_files_before_done(struct run_files_before *b)
{
        if (!b)
                return;
        ws_snapshot_done(&b->snap);
}

/* What the images of one result may take of its reply (RUN_REPLY_MAX_BYTES, files.h): room for
 * the rest, RUN_REPLY_FIXED_BYTES for the fixed parts, and 12 bytes for each byte of output and
 * listed path (each is in the text and in structuredContent, and JSON writes a control byte as
 * 6). */
#define FILES_STR_(x) #x
#define FILES_STR(x) FILES_STR_(x)

static uint64_t images_budget(const struct run_result *res)
{
        uint64_t rest = RUN_REPLY_FIXED_BYTES + 12 * ((uint64_t)res->out.len + res->err.len);

        for (size_t i = 0; i < res->n_files; i++)
                rest += 12 * (uint64_t)strlen(res->files[i].path) + 64;
        return rest >= RUN_REPLY_MAX_BYTES ? 0 : RUN_REPLY_MAX_BYTES - rest;
}

const char *run_image_refusal(const unsigned char *data, size_t len, uint64_t *budget)
{
        uint32_t w = 0, h = 0;
        uint64_t b64 = 4 * (((uint64_t)len + 2) / 3);

        if (ws_image_size(data, len, &w, &h) < 0)
                return "its size in pixels could not be read from its header";
        if (w == 0 || h == 0)
                return "its header says it has no pixels";
        if (w > RUN_IMAGE_MAX_SIDE || h > RUN_IMAGE_MAX_SIDE)
                return "over " FILES_STR(RUN_IMAGE_MAX_SIDE) " pixels a side";
        if (b64 > *budget)
                return "over the reply's size";
        *budget -= b64;
        return NULL;
}

/* Attach the image file @i of @res when the caps allow and its base64 text fits in what is left
 * of *@budget (bytes, lowered by what it takes); else say why not. */
static void attach_image(const struct sbx_config *cfg, struct run_result *res, size_t i,
                         uint64_t *budget)
{
        struct run_file *f = &res->files[i];
        struct sbx_error err = {0};
        unsigned char *data = NULL;
        size_t len = 0;
        uint64_t size = 0;
        int r;

        if (f->bytes > cfg->max_image_bytes) {
                f->not_why = "over VESTIBULE_MAX_IMAGE_BYTES";
                return;
        }
        if (res->n_images >= cfg->max_images) {
                f->not_why = "over VESTIBULE_MAX_IMAGES";
                return;
        }
        r = ws_read_file(cfg->workspace_dir, f->path, cfg->max_image_bytes, &data, &len, &size,
                         &err);
        if (r == -EFBIG) {
                f->not_why = "over VESTIBULE_MAX_IMAGE_BYTES";
                return;
        }
        if (r < 0) {
                f->not_why = "could not be read again";
                return;
        }
        /* the bytes read now must still be the image that was sniffed */
        if (!ws_sniff_image(data, len) || strcmp(ws_sniff_image(data, len), f->mime) != 0) {
                free(data);
                f->not_why = "it changed while it was read";
                return;
        }
        f->not_why = run_image_refusal(data, len, budget);
        if (f->not_why) {
                free(data);
                return;
        }
        GREEDY_REALLOC(res->images, res->cap_images, res->n_images + 1);
        res->images[res->n_images++] = (struct run_image){
            .mime = f->mime,
            .data = data,
            .len = len,
            .file = i,
        };
        f->attached = true;
}

void run_files_after(const struct sbx_config *cfg, const struct run_files_before *before,
                     struct run_result *res)
{
        struct ws_snapshot after = {0}, empty = {0};
        struct ws_changes ch = {0};
        struct sbx_error err = {0};
        int r;

        if (!before->taken && !before->missing) {
                snprintf(res->files_note, sizeof(res->files_note), "%s", before->why);
                return;
        }
        r = ws_snapshot_take(cfg->workspace_dir, RUN_FILES_MAX_ENTRIES, &after, &err);
        if (r == -ENOENT)
                return; /* no workspace before nor after: nothing was written */
        if (r < 0) {
                snprintf(res->files_note, sizeof(res->files_note), "not listed: %.140s", err.msg);
                return;
        }
        ws_changes_diff(before->taken ? &before->snap : &empty, &after, RUN_FILES_MAX, &ch);
        if (after.incomplete || (before->taken && before->snap.incomplete))
                snprintf(res->files_note, sizeof(res->files_note), "the list may be incomplete: %s",
                         after.incomplete ? after.why : before->snap.why);

        res->files = ch.n ? xcalloc(ch.n, sizeof(*res->files)) : NULL;
        for (size_t i = 0; i < ch.n; i++) {
                uint64_t size = 0;

                res->files[i] = (struct run_file){
                    .bytes = ch.v[i].bytes,
                    .created = ch.v[i].kind == WS_NEW,
                };
                res->files[i].path = ch.v[i].path; /* moved: the list gives it up below */
                ch.v[i].path = NULL;
                res->files[i].mime = ws_sniff_file(cfg->workspace_dir, res->files[i].path, &size);
                if (size)
                        res->files[i].bytes = size;
        }
        res->n_files = ch.n;
        res->files_more = ch.more;
        uint64_t budget = images_budget(res);
        for (size_t i = 0; i < res->n_files; i++)
                if (res->files[i].mime)
                        attach_image(cfg, res, i, &budget);
        ws_changes_done(&ch);
        ws_snapshot_done(&after);
}
