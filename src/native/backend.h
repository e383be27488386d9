/* native/backend.h - what the rest of the server needs from the native Linux backend
 * (src/native/backend.c): its constructor, for the service's ladder (src/service/ladder.c),
 * and the user-namespace check, for doctor (src/doctor/doctor.c). Everything else under
 * src/native is internal (native.h). */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "config/config.h"
#include "run/backend.h"

/**
 * native_backend_new() - a new native backend in *@ret (free with backend_free(),
 * run/backend.h); @cfg is borrowed and must outlive it. Only allocates: the host checks are in
 * its probe(). Return: 0, or -errno with @err.
 */
int native_backend_new(const struct sbx_config *cfg, struct backend **ret, struct sbx_error *err);

/**
 * native_userns_check() - can this process create the user namespaces a native sandbox needs?
 * Tries it for real (a child in new user, pid, mount, net, uts, ipc and cgroup namespaces),
 * and when that fails names the cause: the sysctls (user.max_user_namespaces,
 * kernel.apparmor_restrict_unprivileged_userns, kernel.unprivileged_userns_clone) or a seccomp
 * filter on the server itself (Seccomp: 2 in /proc/self/status and unshare(0), a no-op the
 * kernel always allows, refused: a container's default profile). The native probe and doctor
 * both use it, so they agree. See user_namespaces(7), seccomp(2), proc_pid_status(5).
 * @why: on failure, the cause and its fix (NUL-terminated, cut at @size).
 * Return: 0 when usable, else -errno (EPERM, ENOSPC, ...) with @why filled.
 */
int native_userns_check(char *why, size_t size);
