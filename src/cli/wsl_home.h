/* wsl_home.h - `install-client --wsl`: the Windows user's profile folder as WSL mounts it,
 * asked of Windows through WSL's interop (cmd.exe, wslpath) rather than guessed from $USER:
 * a Linux user name in WSL is often not the Windows one. */
#pragma once

#include <stddef.h>

/**
 * wsl_windows_home() - the Windows profile folder (%USERPROFILE%) as a WSL path: runs
 * `cmd.exe /c echo %USERPROFILE%` (found on PATH: WSL's interop puts C:\Windows\system32 there,
 * https://learn.microsoft.com/windows/wsl/filesystems#interoperability-between-windows-and-linux-commands)
 * and `wslpath -u` on its answer (https://learn.microsoft.com/windows/wsl/filesystems,
 * wslpath), each with stdin and stderr on /dev/null and at most 10 s.
 * @ret:     on success a new string (free()), e.g. "/mnt/c/Users/al"; untouched on failure.
 * @why:     on failure, @why_size bytes saying what did not answer (for the caller's note).
 * Return: 0, or -ENOENT (no cmd.exe or wslpath on PATH), -EIO (one failed, timed out or
 * printed nothing usable).
 */
int wsl_windows_home(char **ret, char *why, size_t why_size);
