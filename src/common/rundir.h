/* rundir.h - the user's runtime folder (/run/user/UID) and its D-Bus socket, found without the
 * environment that normally names them.
 *
 * An MCP client may start the server with a bare environment (the TypeScript SDK passes only
 * HOME, LOGNAME, PATH, SHELL, TERM and USER), so XDG_RUNTIME_DIR and DBUS_SESSION_BUS_ADDRESS
 * are often missing even on a desktop where the user manager runs. pam_systemd/logind create
 * the runtime folder as /run/user/UID, owned by the user, mode 0700 (pam_systemd(8),
 * systemd-logind.service(8)), and the user manager's bus listens on its `bus` socket
 * (dbus-daemon's session.conf with dbus-user-session, or dbus-broker's user unit). libdbus
 * derives the same socket from $XDG_RUNTIME_DIR and checks it with lstat: ours, a socket
 * (dbus/dbus-sysdeps-unix.c, _dbus_lookup_user_bus). We derive the folder the way logind makes
 * it and check both before trusting them: a folder or socket another user could have put
 * there would hand our StartTransientUnit calls to them. Pure file checks, no environment:
 * src/config reads the variables, the callers decide which wins. See docs/design/environment.md.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

/* Where logind creates the users' runtime folders. */
#define SBX_USER_RUNTIME_BASE "/run/user"

/**
 * sbx_runtime_dir_check() - whether @path is a usable runtime folder of @uid: lstat (a symlink
 * is refused, not followed), a directory, owned by @uid, mode exactly 0700 (as logind makes
 * it: anything looser lets others swap what is inside).
 * Return: 0, or -ENOENT (missing), -ELOOP (a symlink), -ENOTDIR, -EPERM (another owner),
 * -EACCES (another mode), other -errno from lstat; @err (may be NULL) says which, as a short
 * fact ("the runtime folder '/run/user/1000' has mode 0755, not 0700") a grade can quote; the
 * caller adds the fix.
 */
int sbx_runtime_dir_check(const char *path, uid_t uid, struct sbx_error *err);

/**
 * sbx_bus_socket_check() - whether @path is a D-Bus socket @uid may trust: lstat (a symlink
 * is refused), a socket, owned by @uid (libdbus's _dbus_lookup_user_bus checks the same).
 * Return: 0, or -ENOENT, -ELOOP, -ENOTSOCK, -EPERM, other -errno from lstat; @err says which.
 */
int sbx_bus_socket_check(const char *path, uid_t uid, struct sbx_error *err);

/**
 * sbx_user_runtime_dir() - @base/@uid ("/run/user/1000" for SBX_USER_RUNTIME_BASE) when
 * sbx_runtime_dir_check() accepts it and @base itself is a directory owned by root (or @uid)
 * that group and others cannot write (else the folder could be swapped after the check).
 * @base is a parameter so tests can build trees in a
 * temporary folder; production passes SBX_USER_RUNTIME_BASE.
 * @ret: @size bytes, receives the folder's path; set only on success.
 * Return: 0, the check's -errno, -EPERM (@base not trusted), or -ENAMETOOLONG; @err says which and
 * how to fix it.
 */
int sbx_user_runtime_dir(const char *base, uid_t uid, char *ret, size_t size,
                         struct sbx_error *err);

/**
 * sbx_user_bus_address() - the D-Bus address of @uid's user bus found from @base alone:
 * "unix:path=@base/@uid/bus" when the folder passes sbx_runtime_dir_check() and the socket
 * sbx_bus_socket_check().
 * @ret: @size bytes, receives the address; set only on success.
 * Return: 0 or -errno as above; @err says what was missing or wrong and the fix.
 */
int sbx_user_bus_address(const char *base, uid_t uid, char *ret, size_t size,
                         struct sbx_error *err);

/**
 * sbx_bus_unix_address() - the D-Bus address "unix:path=..." of @socket_path, every byte
 * outside [-0-9A-Za-z_/.\*] escaped as %XX (D-Bus specification, "Server Addresses").
 * No check of the file. @ret: @size bytes, set only on success.
 * Return: 0 or -ENAMETOOLONG.
 */
int sbx_bus_unix_address(const char *socket_path, char *ret, size_t size, struct sbx_error *err);

/**
 * sbx_user_bus_resolve() - the address of @uid's user bus, as a client connecting to it would
 * pick it: @env_address (DBUS_SESSION_BUS_ADDRESS) as given, else "unix:path=" +
 * @env_runtime_dir (XDG_RUNTIME_DIR) + "/bus" (what sd_bus_open_user(3) does with the two
 * variables; a user who names them is trusted, as systemd trusts them), else, when neither
 * was passed (the MCP SDK's default environment), sbx_user_bus_address() on /run/user.
 * NULL or "" counts as not passed. @ret: @size bytes, set on success.
 * Return: 0 or -errno with @err a short fact naming the path that was missing or wrong.
 */
int sbx_user_bus_resolve(const char *env_address, const char *env_runtime_dir, uid_t uid, char *ret,
                         size_t size, struct sbx_error *err);
