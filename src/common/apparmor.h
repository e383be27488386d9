/* apparmor.h - the AppArmor profile that lets this binary create user namespaces on Ubuntu
 * 23.10+ (kernel.apparmor_restrict_unprivileged_userns=1) without a system-wide change: its
 * text (packaging/apparmor/vestibule-mcp.in, built in), where it goes, the command that installs
 * it, and whether it is loaded and applies to this process. Reads procfs and securityfs only;
 * used by native's Blocked text, doctor and `setup --apparmor`. See apparmor(7), apparmor.d(5),
 * and https://ubuntu.com/blog/ubuntu-23-10-restricted-unprivileged-user-namespaces */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* The path the .deb installs the binary at; its profile is /etc/apparmor.d/vestibule-mcp. */
#define SBX_APPARMOR_DEB_EXE "/usr/bin/vestibule-mcp"
/* Where AppArmor's securityfs lives when AppArmor is the running LSM. */
#define SBX_APPARMOR_FS "/sys/kernel/security/apparmor"

/* What the host says about AppArmor and this binary. */
struct sbx_apparmor {
        int restrict_userns; /* kernel.apparmor_restrict_unprivileged_userns: 0 or 1;
                              * -1 absent (not an Ubuntu kernel) */
        bool running;        /* SBX_APPARMOR_FS exists: AppArmor enforces here */
        char label[256];     /* this process's label ("unconfined", "vestibule-mcp
                              * (unconfined)"); "" when unreadable (no AppArmor) */
        char exe[PATH_MAX];  /* this binary's real path (/proc/self/exe) */
        char name[32];       /* the profile for @exe: "vestibule-mcp" for
                              * SBX_APPARMOR_DEB_EXE, else "vestibule-mcp-npm" */
        char file[64];       /* /etc/apparmor.d/<name> */
        bool file_exists;    /* @file is there */
        int loaded;          /* 1: @name is in the kernel's profile list; 0: not;
                              * -errno: the list is unreadable (EACCES unless root) */
        bool attached;       /* this process runs under the profile @name */
};

/**
 * sbx_apparmor_read() - fill @ret from this host (see struct sbx_apparmor).
 * @root: "" for the real host, or a folder holding proc/, sys/ and etc/ in their places (tests
 *        give a made-up host; /proc/self/exe is then still this process's).
 */
void sbx_apparmor_read(const char *root, struct sbx_apparmor *ret);

/**
 * sbx_apparmor_profiles_find() - is the profile @name in @list, the text of
 * SBX_APPARMOR_FS/profiles (one "name (mode)" per line, e.g. "vestibule-mcp (unconfined)")?
 * Return: 1 found, 0 not.
 */
int sbx_apparmor_profiles_find(const char *list, const char *name);

/**
 * sbx_apparmor_label_is() - is @label (a /proc/PID/attr/apparmor/current line: "unconfined",
 * "NAME (MODE)", a stack "A//&B (MODE)") the profile @name, alone or in a stack?
 */
bool sbx_apparmor_label_is(const char *label, const char *name);

/**
 * sbx_apparmor_profile_text() - the profile that grants @exe `userns`, named @name.
 * @exe:     an absolute path without '"', '\\', control characters or AppArmor glob
 *           characters (*?[]{}^), which an attachment would read as a pattern.
 * @ret:     on success the text (caller frees); untouched on error.
 * Return: 0, or -EINVAL with @err naming the character (install the .deb instead).
 */
int sbx_apparmor_profile_text(const char *name, const char *exe, char **ret, struct sbx_error *err);

/**
 * sbx_apparmor_fix() - the one command that installs and loads the profile for @a's binary,
 * into @buf: "sudo apparmor_parser -r /etc/apparmor.d/vestibule-mcp" where the .deb's file is
 * there, else "sudo '<exe>' setup --apparmor" (which writes it, then loads it).
 */
void sbx_apparmor_fix(const struct sbx_apparmor *a, char *buf, size_t size);
