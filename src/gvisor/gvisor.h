/* gvisor.h - what the rest of the server needs from the gVisor backend (src/gvisor/): its
 * constructor, for the service's ladder (src/service/ladder.c), and runsc's facts, for doctor
 * and setup. The backend runs each program in a fresh gVisor sandbox: `runsc --rootless
 * --network=none --ignore-cgroups run` (gvisor.dev/docs/user_guide/rootless, runsc help run)
 * on an OCI bundle it writes (spec.h), as the server's own, unprivileged user. Everything
 * else under src/gvisor is internal. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"

/**
 * gvisor_backend_new() - a new gvisor backend in *@ret (free with backend_free(),
 * run/backend.h); @cfg is borrowed and must outlive it. Only allocates: the host checks (runsc
 * found, a real tiny rootless run) are in its probe(). Return: 0, or -errno with @err.
 */
int gvisor_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err);

/**
 * gvisor_backend_settle() - wait until every sandbox @b destroyed so far is gone: its
 * processes ended, its cgroup and its folder /tmp/vestibule-gvisor-XXXXXX removed. destroy()
 * hands that to a reaper thread, after the result (src/gvisor/backend.c, reap_later);
 * backend_free() waits for it too. For tests that check what a run leaves.
 */
void gvisor_backend_settle(struct backend *b);

/* What this host's runsc is. */
struct gvisor_runsc_facts {
        bool found;         /* an executable runsc is at @path */
        char path[64];      /* "/usr/bin/runsc", or "" */
        char version[64];   /* "0.0~20221219.0" (runsc --version's first line), or "" */
        char platform[160]; /* the platform runs use and why ("ptrace (runsc's default ...)") */
};

/**
 * gvisor_runsc_facts() - look for runsc in /usr/bin, /usr/sbin, /usr/local/bin and
 * /usr/local/sbin (no PATH: the server's environment is not trusted) and ask its version
 * (`runsc --version`, bounded to 5 s). Fills @ret always.
 * Return: 0 when found, -ENOENT when not (install it: apt install runsc), or another -errno
 * with @err when it is there but does not answer.
 */
int gvisor_runsc_facts(struct gvisor_runsc_facts *ret, struct sbx_error *err);

/**
 * gvisor_parse_version() - the version in `runsc --version`'s output @out (@len bytes, not
 * NUL-ended): the word after "runsc version " on the first line, cut at @size - 1 bytes, only
 * [A-Za-z0-9.~+_-] kept. Pure; fuzzed (tests/unit/test_gvisor.c).
 * Return: 0 with @ret filled, or -EINVAL when @out does not start with "runsc version ".
 */
int gvisor_parse_version(const char *out, size_t len, char *ret, size_t size);
