#!/usr/bin/env bash
# Rootless Docker as a user runs it (issue 23 item 7c): Debian's dockerd-rootless.sh (docker.io
# contrib, with rootlesskit and slirp4netns) started by hand as an unprivileged user of its own,
# with its own XDG_RUNTIME_DIR and subordinate ids, as `dockerd-rootless-setuptool.sh install`
# would start it under a systemd user manager (this host has none).
#
#   scripts/rootless-docker.sh start   make the user, start its dockerd (idempotent), load the
#                                      sandbox images (imported by the images stage from
#                                      /var/tmp/vestibule-images/*.tar into the host's Docker)
#   scripts/rootless-docker.sh env     print DOCKER_HOST=unix://… for a client's config
#   scripts/rootless-docker.sh check   prove the engine is rootless: `docker info` says
#                                      rootless, and its dockerd runs as the user (status 1 if not)
#   scripts/rootless-docker.sh user    print the user's name
#   scripts/rootless-docker.sh stop    stop it (its data root is kept: ~/.local/share/docker)
#
# Root only (it makes the user and its runtime folder, as logind would). Environment:
# ROOTLESS_DOCKER_USER (vestibule-rl), ROOTLESS_DOCKER_IMAGES (the host Docker images to load;
# default vestibule/python:bookworm vestibule/node:bookworm).
# Sources: https://docs.docker.com/engine/security/rootless/, dockerd(8), subuid(5),
# /usr/share/docker.io/contrib/dockerd-rootless.sh.
set -euo pipefail
user=${ROOTLESS_DOCKER_USER:-vestibule-rl}
images=${ROOTLESS_DOCKER_IMAGES:-vestibule/python:bookworm vestibule/node:bookworm}
script=/usr/share/docker.io/contrib/dockerd-rootless.sh
# shellcheck source=scripts/setup-lib.sh
. "$(dirname "$0")/setup-lib.sh" # vst_private_dockerd

die() {
        echo "rootless-docker: $*" >&2
        exit 1
}
uid() { id -u "$user"; }
rundir() { echo "/run/user/$(uid)"; }
sock() { echo "$(rundir)/docker.sock"; }
home() { getent passwd "$user" | cut -d: -f6; }
# as_rl CMD...: CMD as the user with the environment a login session gives it
as_rl() {
        runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME="$(home)" \
                USER="$user" LOGNAME="$user" XDG_RUNTIME_DIR="$(rundir)" \
                DOCKER_HOST="unix://$(sock)" "$@"
}
alive() { id "$user" >/dev/null 2>&1 && [ -S "$(sock)" ] && as_rl docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# make_user: the user, its subordinate id range (the next free 65536 after every other
# user's), its runtime folder (0700, its own, as pam_systemd makes it)
make_user() {
        id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
        local f next
        for f in /etc/subuid /etc/subgid; do
                grep -q "^$user:" "$f" 2>/dev/null && continue
                next=$(awk -F: 'BEGIN { m = 100000 } { if ($2 + $3 > m) m = $2 + $3 } END { print m }' "$f" 2>/dev/null || echo 100000)
                echo "$user:$next:65536" >>"$f"
        done
        install -d -m 0700 -o "$user" -g "$(id -g "$user")" "$(rundir)"
}

start() {
        [ "$(id -u)" -eq 0 ] || die "start needs root (it makes the user and its runtime folder)"
        local t
        for t in "$script" /usr/bin/rootlesskit /usr/bin/slirp4netns /usr/bin/newuidmap; do
                [ -e "$t" ] || die "$t is missing: apt-get install docker.io rootlesskit slirp4netns uidmap"
        done
        make_user
        # slirp4netns opens /dev/net/tun inside the user's namespaces, where only the "other"
        # bits apply: 0666 is the mode systemd-udev gives it on every Debian host (its rule
        # KERNEL=="tun", MODE="0666" in 50-udev-default.rules); this host has no udev and
        # leaves it 0600, which fails with "open: Permission denied" (ip tuntap add)
        if [ -c /dev/net/tun ] && [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
                echo "rootless-docker: /dev/net/tun is $(stat -c %a /dev/net/tun), making it 0666 as udev does"
                chmod 0666 /dev/net/tun
        fi
        # setsid: the daemon outlives this shell; the script execs rootlesskit, which makes the
        # user namespace (newuidmap) and runs dockerd inside it. The images are those the images
        # stage imported into rootful Docker from $imgdir/*.tar (setup --from-tar: the tarball's
        # sha256 label, USER, WORKDIR), saved and loaded as they are, so this engine holds the
        # same image IDs as the other stages.
        vst_private_dockerd rootless-docker "$(sock)" "$(home)/dockerd-rootless.log" 60 "" "$images" \
                as_rl docker -- as_rl setsid "$script" --storage-driver overlay2 || exit 1
        echo "rootless-docker: up at unix://$(sock) as $user"
}

check() {
        alive || die "not running: scripts/rootless-docker.sh start"
        local rc=0 opts pid owner
        opts=$(as_rl docker info --format '{{json .SecurityOptions}}')
        if grep -q rootless <<<"$opts"; then echo "ok: docker info: $opts"; else
                echo "FAIL: docker info does not say rootless: $opts"
                rc=1
        fi
        pid=$(pgrep -u "$user" -x dockerd | head -1 || true)
        owner=$(stat -c %U "/proc/$pid" 2>/dev/null || echo none)
        if [ "$owner" = "$user" ]; then echo "ok: dockerd (pid $pid) runs as $owner"; else
                echo "FAIL: dockerd runs as '$owner', not $user"
                rc=1
        fi
        return "$rc"
}

stop() {
        [ "$(id -u)" -eq 0 ] || die "stop needs root"
        id "$user" >/dev/null 2>&1 || return 0
        local pid
        pid=$(pgrep -u "$user" -x rootlesskit | head -1 || true)
        if [ -n "$pid" ]; then
                kill -TERM "$pid" 2>/dev/null || true
                for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$(sock)"
        echo "rootless-docker: stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) echo "DOCKER_HOST=unix://$(sock)" ;;
user) echo "$user" ;;
check) check ;;
*) die "usage: $0 start|stop|env|check|user" ;;
esac
