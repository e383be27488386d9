/* backend.h - the seam every isolation backend plugs into (backend_free() is in
 * src/run/backend.c). The run service and the MCP layer drive a backend through this header
 * only; a backend's own header is included just for its constructor (the service's ladder,
 * doctor). A backend is a singleton object created for the server's life; its ops must be safe
 * to call from several run threads at once. */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "config/config.h"
#include "run/run.h"
#include "run/sandbox.h"

struct backend;

/* What a backend would give on this host now, and why. */
struct backend_probe {
        bool usable;     /* a run would execute with @grade */
        bool degraded;   /* @grade is a "-degraded (...)" grade */
        char grade[320]; /* the isolation line: "native", "container-degraded (limits not applied:
                            ...)" */
        char blocked[1024]; /* when !usable: the Blocked: text naming the fix (retry or restart) */
        char details[640];  /* facts for `doctor`, one "key: value" per line ('\n'-separated,
                             * no trailing newline), e.g. "landlock: ABI 7, applied in every
                             * run"; "" = none. Additive: backends may leave it empty. */
};

struct backend_ops {
        const char *name; /* "native", "container", "naive" */
        /* The backend serves run_code's network "allowlist" (src/egress/egress.h): its run
         * has no route but the egress proxy. A call asking for it on a backend without it is
         * Blocked, never run with another network. */
        bool egress;

        /**
         * probe() - check the prerequisites (cheaply; the caller caches) and say what a run
         * would get. Fills @ret even when the backend is not usable. Return 0, or -errno when
         * the probe itself failed (then @err says why; treat as not usable).
         */
        int (*probe)(struct backend *b, struct backend_probe *ret, struct sbx_error *err);

        /**
         * run() - execute one request in a fresh sandbox and fill @res (which the caller
         * zeroed; the backend sets isolation, backend, image, usage, output, outcome). Blocks
         * until the run ended and everything it started is gone. Return 0 when the result is
         * to be shown (a non-zero exit, a timeout and a cancel are results), or -errno with
         * @err holding the Blocked: text when nothing could be run or the sandbox could not be
         * set up as claimed.
         */
        int (*run)(struct backend *b, const struct run_request *req, struct run_result *res,
                   struct sbx_error *err);

        /**
         * sandbox - the backend's sandbox lifecycle (src/run/sandbox.h), or NULL for a
         * backend that only has run(). The service drives these ops when they are there, and
         * run() otherwise. A backend with sandbox ops may set run = sandbox_run_once.
         */
        const struct sandbox_ops *sandbox;
        /**
         * cells - the sandbox ops of a session (SANDBOX_MODE_CELLS: one live interpreter fed
         * cells, docs/design/sessions.md), or NULL when the backend has no sessions.
         */
        const struct sandbox_ops *cells;

        /**
         * shutdown() - server exit: refuse new runs from now on, and kill the runs in flight
         * that the service's registry does not hold (a backend with run() only). May be NULL.
         */
        void (*shutdown)(struct backend *b);

        /** destroy() - free @b->state. May be NULL. */
        void (*destroy)(struct backend *b);
};

struct backend {
        const struct backend_ops *ops;
        const struct sbx_config *cfg; /* borrowed; outlives the backend */
        void *state;                  /* the backend's own */
};

/* A backend's constructor, as the ladder calls it (tests pass doubles): a new backend in
 * *@ret (free with backend_free()); @cfg is borrowed and must outlive it. A constructor only
 * allocates: host checks happen in probe(). Return 0, or -errno with @err. The backends'
 * constructors live a layer above this header and are declared in their own headers:
 * naive_backend_new() in src/naive/naive.h, native_backend_new() in src/native/backend.h,
 * engine_backend_new() in src/engine/engine.h. */
typedef int (*backend_ctor_fn)(const struct sbx_config *cfg, struct backend **ret,
                               struct sbx_error *err);

/** backend_free() - shutdown() and destroy(), then free. Accepts NULL; returns NULL. */
struct backend *backend_free(struct backend *b);
