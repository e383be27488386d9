#!/usr/bin/env bash
# start-engines.sh - start (idempotently, as root) the container engines the test suites and
# the container backend talk to, on a host without systemd:
#   * Docker Engine (Debian docker.io's dockerd) at /var/run/docker.sock, overlay2 (vfs only
#     when an overlay mount fails), no iptables, no default bridge (docs/design/engine-api.md §10);
#   * Podman's rootful API service at /run/podman/podman.sock (runc: crun refuses this
#     cgroup v1/v2 hybrid host, docs/design/engine-api.md §7);
#   * Podman's rootless API service for the test user at /run/user/<uid>/podman/podman.sock.
# An engine whose socket already answers /_ping is left alone. Each start is waited for
# (bounded); on failure the log tail is printed and the script fails.
#
# Usage: scripts/start-engines.sh [--stop] [--no-docker] [--no-podman] [--no-rootless]
# Environment: SBX_TEST_USER (vestibule-test), VESTIBULE_ENGINE_LOG_DIR (/var/log/vestibule),
#              VESTIBULE_ENGINE_WAIT_S (60).
set -euo pipefail

user=${SBX_TEST_USER:-vestibule-test}
logdir=${VESTIBULE_ENGINE_LOG_DIR:-/var/log/vestibule}
wait_s=${VESTIBULE_ENGINE_WAIT_S:-60}
piddir=/run/vestibule-engines
docker_sock=/var/run/docker.sock
podman_sock=/run/podman/podman.sock

mode=start
want_docker=1 want_podman=1 want_rootless=1
for a in "$@"; do
        case "$a" in
        --stop) mode=stop ;;
        --no-docker) want_docker=0 ;;
        --no-podman) want_podman=0 ;;
        --no-rootless) want_rootless=0 ;;
        -h | --help)
                sed -n '2,15p' "$0"
                exit 0
                ;;
        *)
                echo "start-engines: unknown option '$a'" >&2
                exit 2
                ;;
        esac
done

if [ "$(id -u)" -ne 0 ]; then
        echo "start-engines: must run as root" >&2
        exit 1
fi

uid=$(id -u "$user" 2>/dev/null || true)
rt_dir=${uid:+/run/user/$uid}
rootless_sock=${rt_dir:+$rt_dir/podman/podman.sock}

mkdir -p "$logdir" "$piddir"
# The engines start in a folder of their own, not the caller's: conmon (Podman's monitor, which
# inherits the service's working folder) creates a file named `oom` in its working folder when
# a container is OOM-killed. Started from a checkout, an empty `oom` kept appearing there.
cd "$piddir"

# ping SOCK [AS_USER]: true when the socket answers /_ping with OK.
ping() {
        local sock=$1 as=${2:-}
        [ -S "$sock" ] || return 1
        if [ -n "$as" ]; then
                runuser -u "$as" -- curl -sf --max-time 3 --unix-socket "$sock" http://d/_ping \
                        >/dev/null 2>&1
        else
                curl -sf --max-time 3 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1
        fi
}

# wait_ping NAME SOCK LOG PID [AS_USER]: wait until SOCK answers, the process dies, or time's up.
wait_ping() {
        local name=$1 sock=$2 log=$3 pid=$4 as=${5:-} i
        for ((i = 0; i < wait_s * 4; i++)); do
                if ping "$sock" "$as"; then
                        echo "start-engines: $name answers at $sock (pid $pid)"
                        return 0
                fi
                if ! kill -0 "$pid" 2>/dev/null; then
                        echo "start-engines: $name (pid $pid) exited; log tail ($log):" >&2
                        tail -n 30 "$log" >&2 || true
                        return 1
                fi
                sleep 0.25
        done
        echo "start-engines: $name did not answer at $sock within ${wait_s}s; log tail ($log):" >&2
        tail -n 30 "$log" >&2 || true
        return 1
}

# stop_pidfile NAME FILE: TERM the process we started (recorded in FILE), then KILL after 10 s.
stop_pidfile() {
        local name=$1 f=$2 pid i
        [ -f "$f" ] || return 0
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
                for ((i = 0; i < 40; i++)); do
                        kill -0 "$pid" 2>/dev/null || break
                        sleep 0.25
                done
                kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
                echo "start-engines: stopped $name (pid $pid)"
        fi
        rm -f "$f"
}

start_dockerd() {
        local driver=$1 log=$logdir/dockerd.log pid
        echo "start-engines: starting dockerd (storage driver $driver), log $log"
        # setsid: the daemon must not die with this shell's session.
        setsid dockerd --iptables=false --ip6tables=false --bridge=none \
                --storage-driver "$driver" --host "unix://$docker_sock" \
                >>"$log" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$piddir/dockerd.pid"
        wait_ping "dockerd ($driver)" "$docker_sock" "$log" "$pid"
}

start_docker() {
        if ping "$docker_sock"; then
                echo "start-engines: Docker already answers at $docker_sock"
                return 0
        fi
        command -v dockerd >/dev/null || {
                echo "start-engines: dockerd not installed (apt-get install docker.io)" >&2
                return 1
        }
        # containerd is started by dockerd itself when none runs.
        if start_dockerd overlay2; then
                return 0
        fi
        if grep -qiE 'overlay|driver not supported' "$logdir/dockerd.log"; then
                echo "start-engines: overlay2 failed; falling back to vfs (slow: copies the image per container)" >&2
                stop_pidfile dockerd "$piddir/dockerd.pid"
                start_dockerd vfs
                return $?
        fi
        return 1
}

start_podman_rootful() {
        local log=$logdir/podman-rootful.log pid
        if ping "$podman_sock"; then
                echo "start-engines: rootful Podman already answers at $podman_sock"
                return 0
        fi
        mkdir -p "$(dirname "$podman_sock")"
        rm -f "$podman_sock"
        echo "start-engines: starting rootful podman service, log $log"
        setsid podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc \
                system service --time=0 "unix://$podman_sock" >>"$log" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$piddir/podman-rootful.pid"
        wait_ping "rootful podman" "$podman_sock" "$log" "$pid"
}

# rootless_storage_conf HOME: give the test user's rootless Podman overlay storage. Without a
# storage.conf, Debian's Podman 4.3 picks vfs for rootless here, which copies the whole image
# per container: create 11-13 s and remove 10-15 s under CI load, against ~1 s and ~0.5 s with
# the kernel's native overlay in the user namespace (measured); that slowness was what made the
# rootless e2e run flaky. An existing storage.conf is the user's choice and is left alone. The
# overlay store gets its own graphroot: an existing vfs store's database pins its driver.
rootless_storage_conf() {
        local home=$1 conf=$1/.config/containers/storage.conf
        [ -e "$conf" ] && return 0
        if ! runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$rt_dir" \
                podman unshare bash -c 'd=$(mktemp -d) && mkdir $d/l $d/u $d/w $d/m &&
                mount -t overlay overlay -o lowerdir=$d/l,upperdir=$d/u,workdir=$d/w $d/m &&
                umount $d/m; rc=$?; rm -rf "$d"; exit $rc' >/dev/null 2>&1; then
                echo "start-engines: no native overlay in $user's user namespace; rootless Podman keeps its default storage (vfs: slow)" >&2
                return 0
        fi
        runuser -u "$user" -- mkdir -p "$home/.config/containers"
        runuser -u "$user" -- tee "$conf" >/dev/null <<EOC
# written by vestibule's scripts/start-engines.sh: native overlay (vfs copies every image per container)
[storage]
driver = "overlay"
graphroot = "$home/.local/share/containers/storage-overlay"
EOC
        echo "start-engines: rootless Podman storage for $user: overlay ($conf)"
}

start_podman_rootless() {
        local log=$logdir/podman-rootless-$user.log pid home
        if [ -z "$uid" ]; then
                echo "start-engines: user '$user' missing (run scripts/ci-user.sh); no rootless Podman" >&2
                return 1
        fi
        home=$(getent passwd "$user" | cut -d: -f6)
        if ping "$rootless_sock" "$user"; then
                # One we started before overlay storage was configured: restart it on overlay
                # (its containers are one-shot sandboxes; images are re-imported by test.sh).
                if [ ! -e "$home/.config/containers/storage.conf" ] && [ -f "$piddir/podman-rootless.pid" ] &&
                        runuser -u "$user" -- curl -sf --max-time 60 --unix-socket "$rootless_sock" \
                                http://d/v4.0.0/libpod/info 2>/dev/null | grep -q '"graphDriverName": *"vfs"'; then
                        rootless_storage_conf "$home"
                        if [ -e "$home/.config/containers/storage.conf" ]; then
                                echo "start-engines: restarting rootless Podman on overlay storage"
                                stop_pidfile "rootless podman" "$piddir/podman-rootless.pid"
                        fi
                fi
                if ping "$rootless_sock" "$user"; then
                        echo "start-engines: rootless Podman already answers at $rootless_sock"
                        return 0
                fi
        fi
        mkdir -p "$rt_dir"
        chown "$user:$user" "$rt_dir"
        chmod 0700 "$rt_dir"
        runuser -u "$user" -- mkdir -p "$rt_dir/podman"
        rm -f "$rootless_sock"
        rootless_storage_conf "$home"
        touch "$log" && chown "$user" "$log"
        echo "start-engines: starting rootless podman service for $user, log $log"
        # setpriv execs (no child left behind, so --stop's TERM reaches podman itself); the
        # user gets its own environment, not root's.
        setsid setpriv --reuid="$uid" --regid="$(id -g "$user")" --init-groups -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
                USER="$user" LOGNAME="$user" XDG_RUNTIME_DIR="$rt_dir" \
                podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc \
                system service --time=0 "unix://$rootless_sock" >>"$log" 2>&1 </dev/null &
        pid=$!
        echo "$pid" >"$piddir/podman-rootless.pid"
        wait_ping "rootless podman ($user)" "$rootless_sock" "$log" "$pid" "$user"
}

if [ "$mode" = stop ]; then
        # Only what this script started (pid files); an engine started otherwise is left alone.
        # --no-docker, --no-podman and --no-rootless leave that engine running here too
        [ "$want_rootless" -eq 0 ] || stop_pidfile "rootless podman" "$piddir/podman-rootless.pid"
        [ "$want_podman" -eq 0 ] || stop_pidfile "rootful podman" "$piddir/podman-rootful.pid"
        [ "$want_docker" -eq 0 ] || stop_pidfile dockerd "$piddir/dockerd.pid"
        exit 0
fi

rc=0
[ "$want_docker" = 1 ] && { start_docker || rc=1; }
[ "$want_podman" = 1 ] && { start_podman_rootful || rc=1; }
[ "$want_rootless" = 1 ] && { start_podman_rootless || rc=1; }
exit $rc
