#!/usr/bin/env bash
# A second Docker Engine with gVisor's runsc registered as a runtime (issue 26 item 3), for
# testing VESTIBULE_CONTAINER_RUNTIME=runsc without touching the host's own dockerd: its own
# socket, data root, exec root, pidfile, managed containerd (its own namespace), no bridge and
# no iptables. Unlike the Desktop stand-in (scripts/desktop-standin.sh) it shares this machine's
# filesystem, so the server bind-mounts the code folder and the workspace as with any local
# engine.
#
#   scripts/runsc-engine.sh start   start it (idempotent) and load the sandbox images from the
#                                   host's Docker (setup-lib.sh vst_private_dockerd: the same image ids)
#   scripts/runsc-engine.sh env     print DOCKER_HOST=unix://… for a client's config
#   scripts/runsc-engine.sh check   prove a kernel is in between: under runsc the container's
#                                   dmesg is gVisor's Sentry and its uname differs from the
#                                   host's; the same probe under runc (the control) shows the
#                                   host's kernel (status 1 if either side is not as expected)
#   scripts/runsc-engine.sh stop    stop it and remove its state and disk
#
# Root only. Environment: RUNSC_ENGINE_DIR (/var/tmp/vestibule-runsc: data root and log),
# RUNSC_ENGINE_RUN (/run/vestibule-runsc: the socket's folder), RUNSC_ENGINE_GROUP (the
# socket's group; default the test user's, vestibule-test), RUNSC_ENGINE_IMAGES (the host
# Docker images to load; default vestibule/python:bookworm vestibule/node:bookworm),
# RUNSC_BIN (/usr/bin/runsc: Debian's `apt-get install runsc`), RUNSC_OLD (optional: a runsc
# whose statx refuses AT_NO_AUTOMOUNT, Debian 12's, registered as runsc-old for the server's
# refusal of it).
# Sources: dockerd(8) (--add-runtime, --containerd-namespace), gvisor.dev/docs/user_guide/quick_start/docker/.
set -euo pipefail
dir=${RUNSC_ENGINE_DIR:-/var/tmp/vestibule-runsc}
run=${RUNSC_ENGINE_RUN:-/run/vestibule-runsc}
group=${RUNSC_ENGINE_GROUP:-${SBX_TEST_USER:-vestibule-test}}
images=${RUNSC_ENGINE_IMAGES:-vestibule/python:bookworm vestibule/node:bookworm}
runsc=${RUNSC_BIN:-/usr/bin/runsc}
sock=$run/docker.sock
pidfile=$run/dockerd.pid
# shellcheck source=scripts/setup-lib.sh
. "$(dirname "$0")/setup-lib.sh" # vst_private_dockerd

die() {
        echo "runsc-engine: $*" >&2
        exit 1
}
dk() { docker -H "unix://$sock" "$@"; }
alive() { [ -S "$sock" ] && dk version --format '{{.Server.Version}}' >/dev/null 2>&1; }

start() {
        [ "$(id -u)" -eq 0 ] || die "start needs root (it runs a second dockerd)"
        [ -x "$runsc" ] || die "no $runsc: apt-get install runsc"
        getent group "$group" >/dev/null || die "no group '$group' (RUNSC_ENGINE_GROUP): run scripts/ci-user.sh"
        if ! alive; then
                stop_daemon
                mkdir -p "$dir" "$run"
                chmod 0755 "$run" "$dir"
                # runsc's own network stack would need a network namespace from the engine, and
                # Docker gives a NetworkMode none container none runsc accepts ("cannot run with
                # network enabled in root network namespace"): --network=none, loopback only
                # runsc-netns, registered without it: the control for the server's refusal
                # runsc-old (RUNSC_OLD): the control for the server's refusal of a runsc that
                # breaks ls (statx), when the stage found one
                local old=""
                [ -z "${RUNSC_OLD:-}" ] || [ ! -x "$RUNSC_OLD" ] ||
                        old=$(printf ', "runsc-old": {"path": "%s", "runtimeArgs": ["--network=none"]}' "$RUNSC_OLD")
                printf '{"runtimes": {"runsc": {"path": "%s", "runtimeArgs": ["--network=none"]}, "runsc-netns": {"path": "%s"}%s}}\n' \
                        "$runsc" "$runsc" "$old" >"$dir/daemon.json"
        fi
        # setsid: the daemon outlives this shell; its own containerd namespace keeps its
        # containers apart from the host daemon's even if they shared a containerd
        vst_private_dockerd runsc-engine "$sock" "$dir/dockerd.log" 30 "" "$images" dk -- \
                setsid /usr/sbin/dockerd --host "unix://$sock" --group "$group" \
                --data-root "$dir/docker" --exec-root "$run/exec" --pidfile "$pidfile" \
                --containerd-namespace vestibule-runsc \
                --containerd-plugins-namespace vestibule-runsc-plugins \
                --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
                --storage-driver overlay2 --userland-proxy=false \
                --config-file "$dir/daemon.json" || exit 1
        # shellcheck disable=SC2016 # a Go template for docker, not a shell expansion
        echo "runsc-engine: up at unix://$sock, runtimes: $(dk info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}')"
}

stop_daemon() {
        local pid
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid"
                for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        fi
        rm -f "$sock" "$pidfile"
}

stop() {
        [ "$(id -u)" -eq 0 ] || die "stop needs root"
        # our containers first (the daemon would leave runsc sandboxes to containerd's shims)
        if alive; then
                dk ps -aq | xargs -r docker -H "unix://$sock" rm -f >/dev/null 2>&1 || true
        fi
        stop_daemon
        # what outlives dockerd: containerd's shims and runsc's sandbox and gofer of this
        # engine's containers (a start runsc refused leaves its sandbox running, seen with
        # runsc-netns), found by this engine's containerd namespace and runsc root, by pid
        local p c
        for p in /proc/[0-9]*; do
                c=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
                case $c in
                *"-namespace vestibule-runsc "* | *"--root=$run/"*) kill -KILL "${p#/proc/}" 2>/dev/null || true ;;
                esac
        done
        # the exec root holds the daemon's netns and overlay mounts: unmount what is left
        if [ -d "$run" ]; then
                grep -o " $run/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
                rm -rf "$run"
        fi
        if [ "${1:-}" != --keep-disk ] && [ -d "$dir" ]; then
                grep -o " $dir/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
                rm -rf "$dir"
        fi
        echo "runsc-engine: stopped"
}

# probe RUNTIME: the container's kernel as it sees it: uname -r, and the first dmesg line
# (gVisor's Sentry prints its own boot banner, "Starting gVisor..."; under runc dmesg of the
# host's kernel needs CAP_SYSLOG and fails).
probe() {
        local img=${images%% *}
        # shellcheck disable=SC2016 # expanded by the container's shell
        dk run --rm --network none --runtime "$1" "$img" \
                sh -c 'echo "uname: $(uname -r)"; echo "dmesg: $(dmesg 2>&1 | head -n1)"'
}

check() {
        alive || die "not running: scripts/runsc-engine.sh start"
        local rc=0 out ctl host
        host=$(uname -r)
        dk info --format '{{json .Runtimes}}' | grep -q '"runsc"' || {
                echo "FAIL: the engine lists no runsc runtime"
                rc=1
        }
        out=$(probe runsc 2>&1) || true
        echo "runsc: $out" | tr '\n' ' '
        echo
        if grep -q "^dmesg: .*gVisor" <<<"$out" && ! grep -qx "uname: $host" <<<"$out"; then
                echo "ok: under runsc the kernel is gVisor's Sentry (dmesg), not the host's $host (uname)"
        else
                echo "FAIL: under runsc no Sentry was seen"
                rc=1
        fi
        ctl=$(probe runc 2>&1) || true
        echo "runc (control): $ctl" | tr '\n' ' '
        echo
        if grep -qx "uname: $host" <<<"$ctl" && ! grep -q "gVisor" <<<"$ctl"; then
                echo "ok: under runc the kernel is the host's ($host), no Sentry"
        else
                echo "FAIL: the control under runc did not show the host's kernel"
                rc=1
        fi
        return "$rc"
}

case ${1:-} in
start) start ;;
stop) stop "${2:-}" ;;
check) check ;;
env) echo "DOCKER_HOST=unix://$sock" ;;
*) die "usage: $0 start|check|env|stop [--keep-disk]" ;;
esac
