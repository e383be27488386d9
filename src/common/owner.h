/* owner.h - owner labels: "<hostname>@<pid namespace>:<pid>:<start time>", which names one
 * process of one host for as long as it lives and never another after it (a pid reused later
 * has another start time). The pid namespace is the inode of /proc/<pid>/ns/pid
 * (pid_namespaces(7), https://man7.org/linux/man-pages/man7/pid_namespaces.7.html): a server in
 * a container that has the host's name (`docker run --network host` gives it) sees other pids
 * and must not judge the host's labels. Written on what a server makes that must outlive a
 * SIGKILL of it only as long as it lives: the engine's containers and volumes (the label
 * vestibule.owner), the code folders in /tmp ("<folder>.owner"), the gvisor backend's sandbox
 * folders. The next server's start-up sweep removes what a gone owner left. The start time is
 * field 22 of /proc/<pid>/stat (proc_pid_stat(5),
 * https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/**
 * sbx_proc_start_time() - field 22 of /proc/@pid/stat: when the process started, in clock ticks
 * since boot (sysconf(_SC_CLK_TCK)). Return: that time, or 0 when the file cannot be read or
 * parsed (no such process).
 */
unsigned long long sbx_proc_start_time(pid_t pid);

/**
 * sbx_owner_label() - "<hostname>@<pid namespace inode>:<pid>:<start time>" of process @pid
 * into @ret (@size bytes, NUL-terminated, cut to fit; 320 hold any). The hostname is
 * gethostname(2)'s ("localhost" when it has none). Return: 0, -ESRCH when @pid's start time
 * cannot be read, or -errno when its /proc/@pid/ns/pid link cannot be.
 */
int sbx_owner_label(pid_t pid, char *ret, size_t size);

/**
 * sbx_owner_alive() - whether @label (sbx_owner_label()'s form; NULL and "" are fine) names a
 * process that lives now on this host. Judged by /proc only when the label's place is ours:
 * our host name and our pid namespace, or our host name alone (the form labels had before the
 * namespace was added). Any other place (another host's name, or ours with another pid
 * namespace) counts as alive: not ours to judge. A label that does not parse, of a pid that is
 * gone or whose start time differs (reused), is not alive. Return: true or false; reads /proc
 * only.
 */
bool sbx_owner_alive(const char *label);

/**
 * sbx_owner_gone_each() - for each "<name>.owner" file directly in /tmp whose name starts with
 * @prefix (e.g. "vestibule-gvisor-"), whose text is an owner label (up to 319 bytes; read without
 * following a link or blocking) naming no live process (sbx_owner_alive()), call
 * @fn(@tmp_fd, name, owner_file, @ud): @name is the folder's name ("<prefix>…", < 256 bytes),
 * @owner_file the owner file's, both relative to @tmp_fd (an O_DIRECTORY fd of /tmp, borrowed
 * for the call). @fn returns 1 when it removed the folder (the owner file is then its to
 * remove), else 0. Used by the start-up sweeps of the engine's code folders and the gvisor
 * backend's sandbox folders. Return: the sum of @fn's answers (0 when /tmp cannot be read).
 */
unsigned sbx_owner_gone_each(const char *prefix,
                             int (*fn)(int tmp_fd, const char *name, const char *owner_file,
                                       void *ud),
                             void *ud);
