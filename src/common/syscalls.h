/* syscalls.h - the system calls every sandbox may make, by name: the native backend's seccomp
 * filter allows them (src/native/seccomp.c) and the container backend's generated profile lists
 * them (src/engine/seccomp_profile.c), from this one list so the two never drift apart. It
 * follows what Docker's default profile allows a container without added capabilities
 * (written out from that profile's behaviour, not copied: docs/design/engine-api.md), minus
 * fcntl, which each backend adds on its own terms (native refuses F_SETLEASE by its argument).
 * Names an architecture or a libseccomp does not know are skipped by whoever applies the list.
 * seccomp(2), syscalls(2). */
#pragma once

#include <stddef.h>

/* The names, in alphabetical order; sbx_sandbox_syscalls_n of them. Static strings. */
extern const char *const sbx_sandbox_syscalls[];
extern const size_t sbx_sandbox_syscalls_n;

/* The calls no sandbox may make, by name: each changes what the sandbox is made of (mounts,
 * namespaces, root), reaches kernel attack surface a sandbox has no use for (bpf, keyrings,
 * perf, userfaultfd, io_uring, raw I/O ports), or touches the whole machine (reboot, modules,
 * kexec, swap, accounting, the kernel log, the clock, the host name). The native filter
 * reports and refuses them (EPERM); the container profile refuses them with EPERM, so a
 * container grade refuses what the native grade refuses. sbx_denied_syscalls_n of them. */
extern const char *const sbx_denied_syscalls[];
extern const size_t sbx_denied_syscalls_n;
