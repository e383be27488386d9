/* runsc.h - starting runsc and ending what it started (src/gvisor/runsc.c); internal to
 * src/gvisor. runsc's command line: `runsc help run`, `runsc flags` (gVisor 20221219). */
#pragma once

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "common/error.h"

/* One `runsc run` of a bundle, as the server's own user. */
struct gvisor_runsc_run {
        const char *runsc;  /* absolute path (gvisor_runsc_facts) */
        const char *root;   /* runsc's --root state folder, private to this sandbox */
        const char *bundle; /* the folder holding config.json */
        const char *log;    /* runsc's --log file (its own errors, not the program's) */
        const char *id;     /* the container id, unique in @root */
        bool host_fifo;     /* --host-fifo=open: the program may open host FIFOs in its mounts
                               (a warm spare's /sandbox/<script>, a session's channels:
                               spare.c, cells.c); off for a cold run */
        bool host_uds;      /* --host-uds=open: the program may connect(2) to host unix
                               sockets in its mounts (an allowlist run's proxy socket,
                               /sandbox/.egress.sock: docs/design/egress.md, "gVisor"); off
                               otherwise */
        pid_t pid;          /* set by gvisor_runsc_start(): the runsc process, leader of its own
                               process group (set on both sides of the fork) */
        bool stdin_pipe;    /* the program's stdin is a new pipe (its write end in @in_fd: a
                               warm spare's "go", spare.h) rather than /dev/null */
        int in_fd;          /* set by gvisor_runsc_start(): that write end, or -1 */
        int out_fd, err_fd; /* read ends of the program's stdout and stderr (-1 once closed) */
        int go_fd;          /* write end that lets the held child exec runsc, or -1 */
};

/**
 * gvisor_runsc_start() - fork and exec `@runsc --rootless --network=none --ignore-cgroups
 * --oci-seccomp --host-fifo=open|none --host-uds=open|none --root @root --log @log run --bundle
 * @bundle @id` in a new process group (setpgid: one group holds runsc, its user-namespace child and
 * its gofer; the sandbox process runsc starts in a session of its own is "attached": it dies with
 * runsc, runsc/sandbox.go), stdin /dev/null (or a new pipe when @stdin_pipe: its write end in
 * @in_fd, the caller's to close), stdout and stderr to new pipes, no other fd, environment PATH
 * only. The child is held before its exec until gvisor_runsc_go(): the caller puts it in the run's
 * cgroup first, so runsc, its gofer and its sandbox (the Sentry) are all born there. A caller that
 * gives up kills @r->pid. Return: 0 with @r->pid, @r->in_fd, @r->out_fd, @r->err_fd, @r->go_fd set;
 * -errno with @err.
 */
int gvisor_runsc_start(struct gvisor_runsc_run *r, struct sbx_error *err);

/**
 * gvisor_runsc_go() - let the child gvisor_runsc_start() held exec runsc; closes @r->go_fd.
 * Return: 0, or -EPIPE with @err when the child is gone.
 */
int gvisor_runsc_go(struct gvisor_runsc_run *r, struct sbx_error *err);

/**
 * gvisor_keeper_start() - fork a child that only waits (pause(2), no fd, dies with the forking
 * thread: PR_SET_PDEATHSIG), to sit in a run's systemd scope beside runsc: systemd removes an
 * empty scope's cgroup at once, and the keeper keeps it (and its usage files) until the run's
 * end has been read. The caller kills it (cgroup.kill or SIGKILL) and reaps it.
 * Return: 0 with *@ret set, or -errno with @err.
 */
int gvisor_keeper_start(pid_t *ret, struct sbx_error *err);

/**
 * gvisor_runsc_kill() - SIGKILL @pid's process group, then every process whose command line
 * names the state folder @root (runsc's gofer and sandbox, "--root=@root"), found in /proc.
 * Idempotent; async-thread-safe; bounded by one /proc walk. Return: processes signalled in the
 * walk (0 when the group's kill took everything).
 */
int gvisor_runsc_kill(pid_t pid, const char *root);

/**
 * gvisor_runsc_left() - how many processes still name @root on their command line (zombies
 * not counted; /proc/PID/cmdline, proc(5)): 0 after a clean end. For tests and destroy's check.
 * Signals nothing; a process that cannot be read (gone meanwhile) is not counted.
 */
int gvisor_runsc_left(const char *root);

/**
 * gvisor_runsc_fatal() - runsc's own fatal error in its --log file @log (the text after
 * "FATAL ERROR: ", as runsc writes it; only the file's first 16 KiB are read), copied into @ret
 * (NUL-ended, cut at @size). Return: true when there was one; false when none, or @log cannot be
 * read.
 */
bool gvisor_runsc_fatal(const char *log, char *ret, size_t size);

/**
 * gvisor_runsc_capture() - run `@argv` (argv[0] absolute) with stdout and stderr into @ret
 * (NUL-ended, cut at @size), for at most @timeout_ms; killed (its group) past it.
 * Return: the wait status (>= 0), or -errno with @err (-ETIMEDOUT past the bound).
 */
int gvisor_runsc_capture(const char *const *argv, unsigned timeout_ms, char *ret, size_t size,
                         struct sbx_error *err);
