/* state.h - the container backend's state, one per backend (struct backend's state): the
 * connection and what the probe learned (probe.c), the background removals and the create lock
 * (container.c), the owner label. Private to src/engine; backend.c makes and frees it
 * (engine_backend_new(), engine.h). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "engine/engine.h"

struct engine_state {
        pthread_mutex_t lock;
        /* Rootless Podman 4.3 reads the user's subordinate ids through libsubid for every
         * keep-id create, and concurrent creates crash its service (SIGSEGV in
         * subid_get_gid_ranges, seen in CI) or fail with "keep-id requires additional UIDs":
         * creates on rootless Podman are made one at a time. */
        pthread_mutex_t create_lock;
        bool ready; /* connected and probed */
        struct engine_conn conn;
        engine_getenv_fn getenv_fn;
        bool rootless_podman;
        bool rootless_docker; /* SecurityOptions name=rootless: the run's uid is a subuid here */
        /* The daemon cannot see our files (tcp://, Docker Desktop, a forwarded socket): code
         * and workspace go through volumes (volume.c). */
        bool volumes;
        char daemon_os[128];       /* /info OperatingSystem */
        char daemon_name[256];     /* /info Name: the daemon's host name */
        char seccomp_profile[512]; /* Podman: our derived profile's host path; "" = none */
        char seccomp_default[512]; /* Podman: the engine's default profile it came from */
        char *seccomp_json;        /* Docker: our profile, handed over as JSON text (static) */
        char grade[320];           /* "container" or "container-degraded (...)" */
        char owner[160];           /* our vestibule.owner label */
        /* VESTIBULE_CONTAINER_RUNTIME ("" = the engine's default) and what the probe saw of it
         * (runtime.c): listed in /info Runtimes, and the grade's words for it */
        char runtime[72];
        bool runtime_listed;
        char runtime_note[128]; /* "runtime runsc: gVisor's kernel in between"; "" = none */
        /* runsc opens the host's FIFOs (sessions' and spares' pipes in the code folder) and
         * connects to its unix sockets (the egress relay's) only when told to: runtimeArgs
         * --host-fifo=open, --host-uds=open (runsc flags). "" = allowed; else the fix. */
        char runtime_fifo_why[240], runtime_uds_why[240];
        /* runsc registered without --network=none: Docker's NetworkMode none gives it no
         * network namespace it accepts, so its start would be refused after its sandbox and
         * gofer started, and those outlive the refusal on the engine's host (runtime.c) */
        bool runtime_netns_refused;
        bool shutting_down;
        unsigned pending_removals; /* background removals still running */
        unsigned building;         /* prepare()s past their snapshot, not returned yet */
        bool warned_unpinned;      /* the unpinned-image warning was logged */
        pthread_cond_t removed;    /* signalled when pending_removals or building drops */
        char cgroup_driver[16];    /* the engine's: "cgroupfs", "systemd" */
        bool hostcg;               /* each run gets a parent cgroup of ours (hostcg.c) */
        char usage_why[160];       /* !hostcg: why usage is not measured */
        unsigned long run_seq;     /* numbers the parent cgroups */
        /* "<image id> <interpreter>" pairs whose image was seen to hold `timeout` and that
         * interpreter (image_programs_check()): checked once per image id */
        char **programs_ok;
        size_t n_programs_ok, cap_programs_ok; /* used, room for (GREEDY_REALLOC) */
};

/* engine_jget() - member @k of JSON object @o, or NULL (also when @o is NULL); borrowed from @o
 * (json_object_object_get_ex(3), json-c). */
static inline json_object *engine_jget(json_object *o, const char *k)
{
        json_object *v = NULL;
        return o && json_object_object_get_ex(o, k, &v) ? v : NULL;
}
