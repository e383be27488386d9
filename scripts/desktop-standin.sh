#!/usr/bin/env bash
# A Docker Desktop stand-in (issue 23 item 7): Debian's dockerd as a second daemon in its own
# mount, pid, network and UTS namespaces, reached only through a unix socket the host can see.
# The server then sees neither the engine's processes (its pid namespace) nor its files (its
# data root is mounted only inside its mount namespace), and the engine reports its own host
# name, so the server takes the volume path (docs/remote-engines.md), as with Desktop's VM.
#
#   scripts/desktop-standin.sh start   start it (idempotent) and load the sandbox images
#   scripts/desktop-standin.sh env     print DOCKER_HOST=unix://… for a client's config
#   scripts/desktop-standin.sh check   prove from the host that a container's pid and rootfs
#                                      are invisible here (status 1 if either is visible)
#   scripts/desktop-standin.sh stop    stop it and remove its runtime state and disk
#                                      (--keep-disk: keep the data root, images and all)
#
# Root only. Coexists with the host's dockerd: its own socket, data root, exec root, pidfile,
# managed containerd (the host's /run/containerd is hidden in its namespace), no bridge and no
# iptables (its network namespace holds only lo), its own cgroup parent.
# Environment: DESKTOP_STANDIN_DIR (/var/tmp/vestibule-desktop: the "VM disk"),
# DESKTOP_STANDIN_RUN (/run/vestibule-desktop: the socket's folder), DESKTOP_STANDIN_GROUP
# (the socket's group; default the test user's group, vestibule-test), DESKTOP_STANDIN_IMAGES
# (the host Docker images to load; default vestibule/python:bookworm vestibule/node:bookworm).
# Sources: dockerd(8), unshare(1), namespaces(7), mount_namespaces(7).
set -euo pipefail
dir=${DESKTOP_STANDIN_DIR:-/var/tmp/vestibule-desktop}
run=${DESKTOP_STANDIN_RUN:-/run/vestibule-desktop}
group=${DESKTOP_STANDIN_GROUP:-${SBX_TEST_USER:-vestibule-test}}
images=${DESKTOP_STANDIN_IMAGES:-vestibule/python:bookworm vestibule/node:bookworm}
host_name=vestibule-desktop
sock=$run/docker.sock
# disk: the data on this machine's filesystem (as Desktop's VM disk is a file on the host);
# root: an empty folder here, the disk bind-mounted on it only inside the namespace, so every
# path the engine reports (GraphDriver, the data root) names nothing on the host.
disk=$dir/disk root=$dir/root
# shellcheck source=scripts/setup-lib.sh
. "$(dirname "$0")/setup-lib.sh" # vst_private_dockerd

die() {
        echo "desktop-standin: $*" >&2
        exit 1
}
dk() { docker -H "unix://$sock" "$@"; }
alive() { [ -S "$sock" ] && dk version --format '{{.Server.Version}}' >/dev/null 2>&1; }
nspid() { cat "$run/unshare.pid" 2>/dev/null || true; }

# inner: runs as pid 1 of the new namespaces (see start).
inner() {
        mount --make-rprivate /
        hostname "$host_name"
        mount -t proc proc /proc
        mount --bind "$disk" "$root"
        # runtime state private to the namespace; the host's containerd socket hidden so dockerd
        # starts its own managed containerd (under the exec root) instead of using the host's
        for d in /run/containerd /run/docker /var/lib/docker; do
                mkdir -p "$d" && mount -t tmpfs -o mode=0700 tmpfs "$d"
        done
        mkdir -p /run/vestibule-desktop-exec
        mount -t tmpfs -o mode=0700 tmpfs /run/vestibule-desktop-exec
        ip link set lo up 2>/dev/null || true
        exec /usr/sbin/dockerd --host "unix://$sock" --group "$group" \
                --data-root "$root/docker" --exec-root /run/vestibule-desktop-exec/docker \
                --pidfile /run/vestibule-desktop-exec/dockerd.pid \
                --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
                --storage-driver overlay2 --cgroup-parent /vestibule-desktop \
                --userland-proxy=false
}

start() {
        [ "$(id -u)" -eq 0 ] || die "start needs root (it runs a daemon in new namespaces)"
        getent group "$group" >/dev/null || die "no group '$group' (DESKTOP_STANDIN_GROUP): run scripts/ci-user.sh"
        if ! alive; then
                stop_ns
                mkdir -p "$disk" "$root" "$run"
                chmod 0755 "$run"
        fi
        # setsid: the daemon outlives this shell and its terminal; the unshare's pid is kept
        # (stop_ns ends the namespace through it)
        vst_private_dockerd desktop-standin "$sock" "$dir/dockerd.log" 30 "$run/unshare.pid" "$images" dk -- \
                setsid unshare --mount --pid --net --uts --ipc --fork --propagation private \
                "$0" __inner || exit 1
        echo "desktop-standin: up at unix://$sock (host name $(dk info --format '{{.Name}}'))"
}

# stop_ns: end the namespace's processes (dockerd first, politely) and the runtime files.
stop_ns() {
        local pid
        pid=$(nspid)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
                # the unshare's child is pid 1 of the namespace (dockerd, by exec): SIGTERM it,
                # then SIGKILL ends every process in the namespace (pid_namespaces(7))
                local child
                child=$(cat "/proc/$pid/task/$pid/children" 2>/dev/null | awk '{print $1}')
                [ -z "$child" ] || kill -TERM "$child" 2>/dev/null || true
                for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                [ -z "$child" ] || kill -KILL "$child" 2>/dev/null || true
                kill -KILL "$pid" 2>/dev/null || true
                for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
        rm -f "$sock" "$run/unshare.pid"
}

stop() {
        [ "$(id -u)" -eq 0 ] || die "stop needs root"
        stop_ns
        rmdir "$run" 2>/dev/null || true
        if [ "${1:-}" != --keep-disk ] && [ -d "$dir" ]; then
                # overlay2 leaves root-owned dirs with odd modes; nothing is mounted here on the host
                rm -rf "$dir"
        fi
        echo "desktop-standin: stopped"
}

# check: a container on the stand-in, seen from the host: its pid is not in our /proc (or
# is some other process), and the rootfs path the engine reports does not exist here.
check() {
        alive || die "not running: scripts/desktop-standin.sh start"
        local img=${images%% *} id pid merged rc=0
        id=$(dk run -d --rm --network none "$img" sleep 30)
        pid=$(dk inspect --format '{{.State.Pid}}' "$id")
        merged=$(dk inspect --format '{{.GraphDriver.Data.MergedDir}}' "$id")
        echo "container ${id:0:12}: engine pid $pid, rootfs $merged, engine host name $(dk info --format '{{.Name}}')"
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q '^sleep 30'; then
                echo "FAIL: pid $pid is the container's sleep, visible from the host"
                rc=1
        else
                echo "ok: pid $pid here is not the container's process ($( { tr "\0" " " <"/proc/$pid/cmdline"; } 2>/dev/null || echo "no such pid"))"
        fi
        if [ -e "$merged" ]; then
                echo "FAIL: $merged exists on the host"
                rc=1
        else
                echo "ok: $merged does not exist on the host"
        fi
        # control: the same probes against the host's Docker must see its container
        local hid hpid hmerged
        hid=$(docker run -d --rm --network none "$img" sleep 30)
        hpid=$(docker inspect --format '{{.State.Pid}}' "$hid")
        hmerged=$(docker inspect --format '{{.GraphDriver.Data.MergedDir}}' "$hid")
        if { tr "\0" " " <"/proc/$hpid/cmdline"; } 2>/dev/null | grep -q '^sleep 30' && [ -d "$hmerged" ]; then
                echo "control ok: the host Docker's container (pid $hpid, $hmerged) is visible"
        else
                echo "FAIL: control: the host Docker's container is not visible, the probe cannot tell"
                rc=1
        fi
        docker rm -f "$hid" >/dev/null
        dk rm -f "$id" >/dev/null
        return "$rc"
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-}" ;;
env) echo "DOCKER_HOST=unix://$sock" ;;
check) check ;;
__inner) inner ;;
*) die "usage: $0 start|stop [--keep-disk]|env|check" ;;
esac
