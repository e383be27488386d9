#!/bin/bash
# native-in-docker.sh BIN ROOTFS_DIR: a server started inside a default `docker run` (Docker's default
# seccomp profile refuses creating namespaces) must name that filter as the cause, in doctor
# and in a run's Blocked: text alike, and not send the user after sysctls. The control: the
# same binary in the same container with `--security-opt seccomp=unconfined` runs code, so the
# filter was the cause. The binary runs from the host's tree (bound read-only at /host) through
# the host's loader and libraries, in the sandbox image vestibule/python:bookworm as its user
# (uid 1000). Prints one line per check; exits 0 when all hold, 77 when Docker or the image is
# missing, 1 otherwise. Issue 12, item 21. ~5 s.
set -uo pipefail

bin=$(readlink -f "${1:?usage: native-in-docker.sh BIN ROOTFS_DIR}")
rootfs=$(readlink -f "${2:?usage: native-in-docker.sh BIN ROOTFS_DIR}")
img=vestibule/python:bookworm
fail=0

if ! docker version >/dev/null 2>&1 || ! docker image inspect "$img" >/dev/null 2>&1; then
        echo "native-in-docker: SKIP: no Docker Engine or no image $img"
        exit 77
fi
loader=$(readlink -f /lib64/ld-linux-x86-64.so.2 2>/dev/null || true)
libdirs=/host/usr/lib/x86_64-linux-gnu:/host/lib/x86_64-linux-gnu
if [ ! -e "$loader" ]; then
        echo "native-in-docker: SKIP: not an x86-64 glibc host (no /lib64/ld-linux-x86-64.so.2)"
        exit 77
fi

# in_docker [DOCKER_OPTS...] -- ARGS...: BIN ARGS inside the container; output on stdout.
in_docker() {
        local opts=()
        while [ "$1" != "--" ]; do
                opts+=("$1")
                shift
        done
        shift
        timeout 120 docker run --rm --network none "${opts[@]}" -v /:/host:ro \
                -e VESTIBULE_BACKEND=native \
                -e VESTIBULE_ROOTFS_DIR="/host$rootfs" \
                --entrypoint "/host$loader" "$img" --library-path "$libdirs" "/host$bin" "$@" 2>&1
}

# expect LABEL TEXT WORDS...: each of WORDS in TEXT; NOT:WORD must be absent.
expect() {
        local label=$1 text=$2 w ok=1
        shift 2
        for w in "$@"; do
                if [[ $w == NOT:* ]]; then
                        [[ $text != *"${w#NOT:}"* ]] || { echo "native-in-docker: $label: names '${w#NOT:}'  <- FAIL"; ok=0; }
                else
                        [[ $text == *"$w"* ]] || { echo "native-in-docker: $label: lacks '$w'  <- FAIL"; ok=0; }
                fi
        done
        if [ "$ok" -eq 1 ]; then
                echo "native-in-docker: $label: ok"
        else
                printf '%s\n' "$text" | sed 's/^/    /' | head -40
                fail=1
        fi
}

doctor=$(in_docker -- doctor)
line=$(printf '%s\n' "$doctor" | grep -F 'user namespaces' | head -1)
expect "doctor's user namespaces check" "$line" "[FAIL]" "seccomp filter" "Seccomp: 2" \
        "--security-opt seccomp=unconfined"
run=$(in_docker -- run -l bash -c 'echo hi')
expect "a run's Blocked: text" "$run" "Blocked: a seccomp filter on the server itself" \
        "NOT:unprivileged_userns_clone"
blocked_doctor=$(printf '%s\n' "$doctor" | sed -n 's/^.*picks: nothing\. Blocked: //p' | sed 's/ (VESTIBULE_BACKEND=native)$//')
blocked_run=$(printf '%s\n' "$run" | sed -n 's/^Blocked: //p' | sed 's/ (VESTIBULE_BACKEND=native)$//')
if [ -n "$blocked_run" ] && [ "$blocked_doctor" = "$blocked_run" ]; then
        echo "native-in-docker: doctor and the run give the same Blocked: text: ok"
else
        echo "native-in-docker: doctor and the run disagree  <- FAIL"
        echo "    doctor: $blocked_doctor"
        echo "    run:    $blocked_run"
        fail=1
fi
ctl=$(in_docker --security-opt seccomp=unconfined -- run -l bash -c 'echo hi')
expect "control: seccomp=unconfined runs code" "$ctl" "hi" "exit code: 0" "isolation: native"
exit "$fail"
