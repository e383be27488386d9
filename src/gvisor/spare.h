/* spare.h - the gvisor backend's warm spares (src/gvisor/spare.c); internal to src/gvisor.
 * A spare is a started runsc sandbox whose pid 1 reads its stdin (a pipe the server holds the
 * write end of) until EOF and then runs /sandbox/<script>: the interpreter itself, started and
 * waiting (python's bootstrap, node's preload module, bash's BASH_ENV file:
 * src/gvisor/backend.c). The hand-over writes the code into the run's code folder
 * and closes the pipe: the only thing that reaches the spare is that EOF, over the stdin it
 * already had (/dev/null on a cold run); runsc gets no new flag (no --host-fifo, no
 * --host-uds).
 * docs/design/lifecycle.md, "gVisor spares". */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "config/config.h"

/* What a spare was built from; checked again when a call takes it. */
struct gvisor_stamp {
        char settings[1024]; /* gvisor_spare_settings()'s text */
        char grade[320];     /* the probe's grade */
        unsigned probe_gen;  /* the backend's probe generation */
        dev_t tree_dev;      /* the rootfs tree held (setup swaps trees by rename) */
        ino_t tree_ino;
        uint64_t made_ms; /* sbx_now_ms() when it was built */
};

/**
 * gvisor_spare_stamp_take() - fill @ret from @cfg, the rootfs tree @tree_path (stat'ed now),
 * the probe's @grade and @gen. Return: 0, or -errno with @err when the tree cannot be stat'ed.
 */
int gvisor_spare_stamp_take(const struct sbx_config *cfg, const char *tree_path, const char *grade,
                            unsigned gen, struct gvisor_stamp *ret, struct sbx_error *err);

/**
 * gvisor_spare_stamp_check() - is what @st was built from still so: the settings (workspace
 * path and inode, its Python user site, /tmp size, read-only flag), the tree @tree_path, the
 * probe's @grade and @gen, and an age under VESTIBULE_WARM_IDLE_S x 1.5 + 10 s?
 * Return: 0, or -ESTALE with @err saying what changed (the caller runs nothing in the spare).
 */
int gvisor_spare_stamp_check(const struct gvisor_stamp *st, const struct sbx_config *cfg,
                             const char *tree_path, const char *grade, unsigned gen,
                             struct sbx_error *err);
