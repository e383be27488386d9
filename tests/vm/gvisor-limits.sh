#!/usr/bin/env bash
# gvisor-limits.sh - the gvisor backend on a real systemd + cgroup v2 host (issue 26): runsc,
# its gofer and its Sentry in a systemd scope of the run's own, the grade exactly `gvisor`, the
# usage counted from that scope, and the memory and pids caps biting with the cap named.
# Runs in the test VM as the user, inside the user manager (scripts/vm/test-native.sh step 2g);
# also runs on any host with runsc, a user manager and cgroup v2 (then it is the same proof).
# Three runs through `vestibule-mcp run` (the same result text run_code gives the model:
# src/run/result.c), each with its control:
#   1. print(1) touching 16 MiB under a 160 MiB cap: exit 0, `isolation: gvisor`, mem_peak and
#      pids_peak measured (the control of 2 and 3: the same cap, no OOM note, no pids hit);
#   2. a memory hog (400 MiB touched) under the same cap: the kernel's OOM note naming
#      160 MiB, and not exit 0;
#   3. a fork bomb (100 sleeping children) under pids_max 56: "pids (the cap of 56 was reached)" (runsc's
#      own Go threads count too: 49 tasks at most in run 1, the control).
# The runs get two cores (cpu_pct 200) and 90 s: under the VM's emulation print(1) in gVisor
# took more than 10 s at the default 75 % of a core.
# Usage: tests/vm/gvisor-limits.sh VESTIBULE_MCP ROOTFS_DIR
# Exit status: 0 all held; 1 a check failed (each named on stderr); 77 runsc not installed.
set -uo pipefail

bin=${1:?usage: gvisor-limits.sh VESTIBULE_MCP ROOTFS_DIR}
rootfs=${2:?usage: gvisor-limits.sh VESTIBULE_MCP ROOTFS_DIR}
fails=0
log() { printf 'gvisor-limits: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; fails=$((fails + 1)); }

command -v runsc >/dev/null || { log "runsc is not installed (apt install runsc)"; exit 77; }

# A server as a client starts it: a clean environment, the settings only.
run() { # NAME MEM_MB PIDS_MAX CODE
        local name=$1 mem=$2 pids=$3 code=$4 t0 out
        t0=$(date +%s)
        out=$(cd /tmp && env -i HOME="$HOME" USER="$USER" LOGNAME="$USER" PATH=/usr/bin:/bin \
                VESTIBULE_BACKEND=gvisor VESTIBULE_ROOTFS_DIR="$rootfs" VESTIBULE_MEM_MB="$mem" \
                VESTIBULE_PIDS_MAX="$pids" VESTIBULE_DEFAULT_TIMEOUT_S=90 \
                VESTIBULE_MAX_TIMEOUT_S=90 VESTIBULE_CPU_PCT=200 \
                "$bin" run --language "${LANG_OF:-python}" -c "$code" 2>&1)
        log "$name ($(($(date +%s) - t0)) s):"
        printf '%s\n' "$out" | sed 's/^/    /' >&2
        printf '%s' "$out"
}

# 1. control: fits under the cap
out=$(run "print(1), 16 MiB under 160 MiB" 160 80 \
        'b = bytearray(16 << 20)
for i in range(0, len(b), 4096): b[i] = 1
print(1)')
grep -qx '1' <<<"$out" || fail "1: the program's output '1' is missing"
grep -qx 'exit code: 0' <<<"$out" || fail "1: not exit code 0"
grep -qx 'isolation: gvisor' <<<"$out" || fail "1: the grade is not exactly 'isolation: gvisor'"
grep -q 'mem_peak [0-9.]* [KMG]iB' <<<"$out" || fail "1: mem_peak not measured from the scope"
grep -q 'not measured' <<<"$out" && fail "1: a usage figure is 'not measured'"
grep -q 'killed a process in the sandbox' <<<"$out" && fail "1: an OOM note under the cap"
grep -q 'limits hit:.*pids' <<<"$out" && fail "1: pids named as hit by 1 program"

# 2. the memory hog: stopped by the cap, the cap named
out=$(run "400 MiB touched under 160 MiB" 160 80 \
        'b = bytearray(400 << 20)
for i in range(0, len(b), 4096): b[i] = 1
print("survived")')
grep -qx 'survived' <<<"$out" && fail "2: the hog survived 400 MiB under a 160 MiB cap"
grep -q 'the kernel killed a process in the sandbox at its 160 MiB limit' <<<"$out" ||
        fail "2: no OOM note naming the 160 MiB cap"
grep -qx 'exit code: 0' <<<"$out" && fail "2: the hog 'exited 0'"

# 3. the fork bomb: the pids cap reached and named
# python, not a bash loop: bash retries a refused fork with growing pauses (87 s of wall here
# with runsc 2024), python's os.fork fails at once
# The cap is 56, not 80: the host's pids are runsc's threads plus one stub process per forked
# task (systrap), 35-40 before the program forks; in the CI dry run (2026-12-02, under load and
# emulation) 100 forks reached 73 of 80 in 90 s and the cap was never hit.
out=$(run "100 forks under pids_max 56" 160 56 \
        'import os, time
n = 0
try:
    for i in range(100):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork refused after", n, "children:", e.strerror)')
grep -q 'limits hit:.*pids (the cap of 56 was reached)' <<<"$out" ||
        fail "3: the pids cap of 56 is not named as reached"

left=$(pgrep -u "$(id -u)" -f vestibule-gvisor- | wc -l)
[[ $left -eq 0 ]] || fail "$left processes of gvisor sandboxes left after the runs"
log "$fails failed"
[[ $fails -eq 0 ]]
