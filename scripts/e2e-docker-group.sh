#!/usr/bin/env bash
# e2e-docker-group.sh - the e2e files as the usual Ubuntu user runs the server: the test user
# in the `docker` group, rootful Docker at /var/run/docker.sock, no VESTIBULE_RUN_AS, the
# server started by the SDK client as that user with the client's default environment and the
# settings a user writes into the client config (issue 23, item 1). Run as root; the set-up
# step makes that user (SBX_DG_USER, default vestibule-dg: a user of its own, so the test user
# of the other stages keeps no Docker access) and puts it in the docker group (idempotent).
#
# usage: scripts/e2e-docker-group.sh BIN [FILE.test.mjs ...]
#   BIN: a built vestibule-mcp the test user can read and run;
#   FILEs: default egress.test.mjs egress-install.test.mjs.
# env: SBX_DG_USER (vestibule-dg), E2E_EGRESS_NPM (passed on: 0 leaves the npm test out),
#      VESTIBULE_IMAGE_SOURCE (debian: the images imported from /var/tmp/vestibule-images),
#      E2E_RESULTS (passed on: the runner's results file, writable by the user),
#      AGREE_EXPECT_PICK and AGREE_LABEL (passed on, for agree.mjs: doctor, verify and a run
#      must agree, every probe the grade claims held).
# tests/e2e and tests/egress must have their packages (npm ci) and be readable by the user.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: e2e-docker-group.sh BIN [FILE.test.mjs ...]}
shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(egress.test.mjs egress-install.test.mjs)
user=${SBX_DG_USER:-vestibule-dg}
[ "$(id -u)" -eq 0 ] || { echo "run as root (it makes $user, in the docker group)" >&2; exit 2; }
[ -S /var/run/docker.sock ] || { echo "no rootful Docker at /var/run/docker.sock" >&2; exit 2; }
getent group docker >/dev/null || { echo "no docker group" >&2; exit 2; }
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
id -nG "$user" | tr ' ' '\n' | grep -qx docker || usermod -aG docker "$user"
home=$(getent passwd "$user" | cut -d: -f6)
tmp=$(mktemp -d /tmp/vst-e2e-dg.XXXXXX)
chown "$user:" "$tmp"
trap 'rm -rf "$tmp"' EXIT
# the client's (the test runner's) environment: what a desktop session gives a user, no
# XDG_RUNTIME_DIR; the harness hands the server only getDefaultEnvironment() and the settings
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" \
        LOGNAME="$user" SHELL=/bin/bash TERM=xterm LANG=C.UTF-8 TMPDIR="$tmp" \
        E2E_BACKEND=container E2E_EXPECT_GRADE=container E2E_EGRESS=1 \
        E2E_EGRESS_NPM="${E2E_EGRESS_NPM:-1}" VESTIBULE_BIN="$bin" ${E2E_RESULTS:+E2E_RESULTS="$E2E_RESULTS"} \
        VESTIBULE_IMAGE_SOURCE="${VESTIBULE_IMAGE_SOURCE:-debian}" \
        ${AGREE_EXPECT_PICK:+AGREE_EXPECT_PICK="$AGREE_EXPECT_PICK"} ${AGREE_LABEL:+AGREE_LABEL="$AGREE_LABEL"} \
        timeout --kill-after=30 600 node "$src/tests/e2e/run.mjs" "${files[@]}"
