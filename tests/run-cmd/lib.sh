# shellcheck shell=bash
# lib.sh - what the tests/run-cmd scripts share. Sourced, not run.

# rc_roots_left USER [BEFORE]: the host view's mount-point folders of USER that a run left
# behind, one path a line. Each run names its folder /tmp/vestibule-hostroot-<pid>-XXXXXX after
# the server's own pid (src/native/hostrun.c, host_prepare), so a folder whose server has ended
# is a leftover, at once, and one whose server still runs belongs to a live run (CI runs the
# run-cmd, mcp-wrap and run-overlay scripts side by side as the same user) and is not listed.
# A name without a pid comes from an older build and is not listed either. BEFORE: a file of
# paths (this function's output, or any list) to leave out, those there before the test began.
rc_roots_left() {
        local user=$1 before=${2:-/dev/null} d pid
        for d in /tmp/vestibule-hostroot-*; do
                [ -d "$d" ] && [ "$(stat -c %U "$d")" = "$user" ] || continue
                pid=${d#/tmp/vestibule-hostroot-}
                pid=${pid%%-*}
                case $pid in '' | *[!0-9]*) continue ;; esac
                [ ! -d "/proc/$pid" ] || continue
                grep -qxF "$d" "$before" || echo "$d"
        done
}

# rc_roots_control USER: the control of rc_roots_left: a folder named after a pid that has
# ended, made as USER, must be listed (status 1 if not); it is removed after.
rc_roots_control() {
        local user=$1 pid d rc=0
        sleep 0 &
        pid=$!
        wait "$pid"
        d=$(runuser -u "$user" -- mktemp -d "/tmp/vestibule-hostroot-$pid-XXXXXX") || return 1
        rc_roots_left "$user" | grep -qxF "$d" || rc=1
        rmdir "$d"
        return "$rc"
}

# rc_prologue NAME TOOL...: the prologue of a script here, run as root (each command then runs
# as the test user): user (RUN_CMD_USER, default vestibule-test), bin (VESTIBULE_BIN, made
# absolute), here (this folder); exit 77 saying why when not root, there is no such user or a
# TOOL is not on PATH; then base (RUN_CMD_DIR, default a new /var/tmp/NAME.XXXXXX), home and
# proj under it (made), and the test user's copy of the binary at $base/vestibule-mcp.
# shellcheck disable=SC2034 # the variables are the calling script's
rc_prologue() {
        local name=$1 t
        shift
        user=${RUN_CMD_USER:-vestibule-test}
        bin=$(realpath "${VESTIBULE_BIN:?set VESTIBULE_BIN to the vestibule-mcp binary}")
        here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
        [ "$(id -u)" = 0 ] || { echo "skip: run as root (each command runs as $user)"; exit 77; }
        id "$user" >/dev/null 2>&1 || { echo "skip: no user $user"; exit 77; }
        for t in "$@"; do
                command -v "$t" >/dev/null || { echo "skip: no $t"; exit 77; }
        done
        base=${RUN_CMD_DIR:-$(mktemp -d "/var/tmp/$name.XXXXXX")}
        home=$base/home
        proj=$base/proj
        mkdir -p "$home" "$proj"
        install -m 0755 "$bin" "$base/vestibule-mcp"
}

# rc_kill_tree PID: SIGTERM PID's descendants, deepest first, then PID (a background as_user is a
# subshell over runuser over the command: killing the subshell alone leaves the command running).
rc_kill_tree() {
        local k
        for k in $(pgrep -P "$1"); do rc_kill_tree "$k"; done
        kill "$1" 2>/dev/null || true
}
