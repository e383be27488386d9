/* spec.h - the OCI runtime spec (config.json) of one gVisor sandbox (src/gvisor/spec.c): what
 * `runsc --rootless --network=none --ignore-cgroups run` is handed in its bundle. The fields
 * follow the OCI runtime specification 1.0 (github.com/opencontainers/runtime-spec,
 * config.md and config-linux.md); gVisor's rootless recipe (gvisor.dev/docs/user_guide/
 * quick_start/oci, "rootless") maps one uid: runsc re-runs itself as root of a user namespace
 * that maps the calling user, so the sandbox's uid 0 is host id @host_uid of that namespace. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

/* Everything the spec is built from; every string borrowed for the call. */
struct gvisor_spec_in {
        const char *rootfs;      /* absolute path of the tree that becomes /; mounted read-only */
        const char *workspace;   /* absolute path bound at /workspace */
        int workspace_ro;        /* non-zero: /workspace read-only too */
        const char *code_dir;    /* absolute path bound read-only at /sandbox */
        const char *chan_dir;    /* NULL, or an absolute path bound read-write at /sandbox/chan
                                    (a session's FIFOs: a FIFO on a read-only mount cannot be
                                    opened for writing, cells.c); @code_dir/chan must exist */
        unsigned tmpfs_mb;       /* size of the /tmp tmpfs, MiB (> 0) */
        uid_t host_uid;          /* uid_map's host side of the sandbox's uid 0 */
        gid_t host_gid;          /* gid_map's host side of the sandbox's gid 0 */
        const char *const *argv; /* the program; NULL-ended, at least one entry */
        const char *const *envp; /* its environment; NULL-ended */
        unsigned nofile_max;     /* RLIMIT_NOFILE soft = hard (> 0) */
        unsigned long long fsize_max_bytes; /* RLIMIT_FSIZE soft = hard; 0 = not set */
};

/**
 * gvisor_spec_json() - the config.json text for @in: process (uid/gid 0, @argv, @envp, cwd
 * /workspace, noNewPrivileges, rlimits NOFILE, CORE 0 and FSIZE), root (@rootfs, readonly),
 * mounts (/proc, /dev as runsc makes it, /tmp tmpfs "size=<@tmpfs_mb>m,mode=1777,nosuid,nodev",
 * /workspace rbind rw or ro, /sandbox rbind ro, /sandbox/chan rbind rw when @chan_dir), linux
 * namespaces (pid, network, ipc, uts, mount, user) with one-entry uid and gid mappings 0 ->
 * @host_uid / @host_gid.
 * @ret: a new NUL-ended string (free()), set only on success.
 * Return: 0, or -EINVAL with @err when a field is missing or not absolute, -ENOMEM.
 */
int gvisor_spec_json(const struct gvisor_spec_in *in, char **ret, struct sbx_error *err);
