#!/usr/bin/env bash
# Prove the test VM gives what the native backend's cgroup path needs: systemd as PID 1, pure
# cgroup v2, the unprivileged user inside its own user manager with cpu, memory and pids
# delegated, transient scopes whose limits bite, user namespaces, no network.
#
# On the host:   scripts/vm/selftest.sh
#     builds tests/vm/scope-demo.c against libsystemd, boots the VM (scripts/vm/run.sh) and
#     runs itself inside; exit 0 only when every check passed.
# In the VM:     bash selftest.sh --guest [SCOPE_DEMO_BINARY]   (as vestibule-test)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ${1:-} != --guest ]]; then
        set -e
        [[ -z ${VESTIBULE_VM:-} ]] || { echo "selftest: already inside the VM; use --guest" >&2; exit 2; }
        bin=$(mktemp -d "${TMPDIR:-/var/tmp}/vestibule-vm-selftest.XXXXXX")
        trap 'rm -rf "$bin"' EXIT
        chmod 0755 "$bin"
        # shellcheck disable=SC2046 # pkg-config prints several words on purpose
        ${CC:-cc} -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o "$bin/scope-demo" \
                "$repo/tests/vm/scope-demo.c" $(pkg-config --cflags --libs libsystemd)
        set +e
        "$here/run.sh" --ro-share "$repo" --ro-share "$bin" "$@" -- \
                bash "$repo/scripts/vm/selftest.sh" --guest "$bin/scope-demo"
        exit $?
fi

demo=${2:-}
failures=0
check() { # NAME COMMAND... : runs the command (its output shown as it comes, indented),
        # ok when it exits 0 (a program: within 10 minutes)
        local name=$1 rc
        shift
        printf '..   %s\n' "$name"
        if declare -F "$1" >/dev/null; then
                "$@" 2>&1 | sed -u 's/^/     | /'
        else
                timeout 600 "$@" 2>&1 | sed -u 's/^/     | /'
        fi
        rc=${PIPESTATUS[0]}
        if [[ $rc == 0 ]]; then
                printf 'ok   %s\n' "$name"
        else
                printf 'FAIL %s (exit %s)\n' "$name" "$rc"
                failures=$((failures + 1))
        fi
}

pid1_is_systemd() { [[ $(cat /proc/1/comm) == systemd ]] && echo "PID 1: $(cat /proc/1/comm)"; }
manager_running() {
        local s
        s=$(systemctl --user is-system-running)
        echo "systemctl --user is-system-running: $s"
        [[ $s == running ]] || { systemctl --user --failed --no-legend; return 1; }
}
pure_cgroup2() {
        local fs
        fs=$(stat -f -c %T /sys/fs/cgroup)
        echo "/sys/fs/cgroup: $fs"
        grep -E ' cgroup ' /proc/mounts && { echo "cgroup v1 hierarchies mounted"; return 1; }
        [[ $fs == cgroup2fs ]]
}
in_user_manager() {
        local c
        c=$(cat /proc/self/cgroup)
        echo "uid $(id -u), /proc/self/cgroup: $c"
        [[ $(id -u) == 2000 && $c == "0::/user.slice/user-2000.slice/user@2000.service/"* ]]
}
delegated_controllers() {
        local f=/sys/fs/cgroup/user.slice/user-2000.slice/user@2000.service/cgroup.controllers
        echo "user@2000.service cgroup.controllers: $(cat "$f")"
        local c
        for c in cpu memory pids; do
                grep -qw "$c" "$f" || { echo "missing $c"; return 1; }
        done
}
oom_killed() { # the 200 MiB bytearray must die with SIGKILL (137) under MemoryMax=64M
        systemd-run --user --scope --quiet -p MemoryMax=64M -p MemorySwapMax=0 \
                python3 -c 'bytearray(200*1024*1024)'
        local rc=$?
        echo "exit status $rc (137 = SIGKILL by the OOM killer)"
        [[ $rc == 137 ]]
}
oom_control() { # control: the same program with room enough lives, so the limit is the cause
        systemd-run --user --scope --quiet -p MemoryMax=400M -p MemorySwapMax=0 \
                python3 -c 'bytearray(200*1024*1024)'
        local rc=$?
        echo "exit status $rc with MemoryMax=400M"
        [[ $rc == 0 ]]
}
userns() {
        local out
        out=$(unshare -Ur id) || return 1
        echo "unshare -Ur id: $out"
        [[ $out == uid=0\(root\)* ]]
}
netns_lo_only() {
        local devs
        devs=$(ls /sys/class/net)
        echo "VM network devices: $(echo "$devs" | tr '\n' ' ')"
        [[ $devs == lo ]] || return 1
        devs=$(unshare -Urn ip -o link 2>&1 | cut -d: -f2 | tr -d ' ')
        echo "in a new network namespace: $devs"
        [[ $devs == lo ]]
}

echo "== $(uname -r) $(grep -oP "^PRETTY_NAME=\"?\K[^\"]*" /etc/os-release), $(systemctl --version | head -n1)"
check "systemd is PID 1" pid1_is_systemd
check "the user manager is running" manager_running
check "pure cgroup v2" pure_cgroup2
check "this shell runs inside user@2000.service" in_user_manager
check "cpu, memory and pids are delegated to the user" delegated_controllers
check "MemoryMax=64M scope: 200 MiB bytearray is OOM-killed" oom_killed
check "control: MemoryMax=400M scope: the same program succeeds" oom_control
check "unprivileged user namespace" userns
check "no network device but lo" netns_lo_only
if [[ -n $demo ]]; then
        check "sd-bus StartTransientUnit scope demo (tests/vm/scope-demo.c)" "$demo"
else
        echo "skip sd-bus scope demo: no binary given"
fi
echo "== selftest: $failures failure(s)"
((failures == 0))
