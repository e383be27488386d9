/* conn.h - what conn.c shares with backend.c and sweep.c (the rest of conn.c is in engine.h): the
 * container and volume listing and removal that both the sweep and a backend's shutdown use.
 * Private to src/engine. */
#pragma once

#include <json-c/json.h>

#include "common/error.h"
#include "engine/engine.h"

/* The run's code folders: /tmp/<prefix>XXXXXX, with "<folder>.owner" next to it holding the
 * owner label (the start-up sweep removes those of servers that are gone). */
#define ENGINE_CODE_DIR_PREFIX "vestibule-code-"

/* Remove container @id (force, with its anonymous volumes); a missing one is fine. Return 0
 * or -errno with @err. */
int container_remove(const struct engine_conn *c, const char *id, struct sbx_error *err);

/* The containers labelled vestibule.run=1 (all states) as a new JSON array in *@ret. Return 0
 * or -errno with @err. */
int list_ours(const struct engine_conn *c, json_object **ret, struct sbx_error *err);

/* Label @key of container or volume @ctr (as /containers/json or /volumes list them), or
 * NULL. Borrowed from @ctr. */
const char *labels_get(json_object *ctr, const char *key);

/* Remove the volumes labelled vestibule.run=1 whose owner is gone (@only_owner NULL), or
 * those of @only_owner. Return the number removed, or -errno with @err. */
int sweep_volumes(const struct engine_conn *c, const char *only_owner, struct sbx_error *err);

/* The code folders (/tmp/ENGINE_CODE_DIR_PREFIX*, with their "<folder>.owner" files) of
 * servers and runs of this host that are gone (killed mid-run), removed with what is in them
 * (sweep.c). Return how many folders were removed. */
unsigned engine_sweep_code_dirs(void);
