#!/usr/bin/env bash
# e2e-rootless-docker.sh - the e2e files as a rootless Docker user runs the server (issue 23,
# item 7c): the user of scripts/rootless-docker.sh (vestibule-rl), its own dockerd from
# Debian's dockerd-rootless.sh, no root, no VESTIBULE_RUN_AS, the server started by the SDK
# client as that user with the client's default environment and the settings a user writes
# into the client config (DOCKER_HOST=unix://$XDG_RUNTIME_DIR/docker.sock, as Docker's rootless
# docs tell them). The grade is doctor's, checked against the kernel facts (expected-grade.mjs).
# Run as root, after `scripts/rootless-docker.sh start`.
#
# usage: scripts/e2e-rootless-docker.sh BIN [FILE.test.mjs ...]
#   BIN: a built vestibule-mcp the user can read and run;
#   FILEs: default run, sessions, warm, files, usage, egress, egress-install.
# env: E2E_EGRESS_NPM (passed on: 0 leaves the npm test out), E2E_RESULTS (passed on: the
#      runner's results file, writable by the user).
# tests/e2e and tests/egress must have their packages (npm ci) and be readable by the user.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:?usage: e2e-rootless-docker.sh BIN [FILE.test.mjs ...]}
shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(run.test.mjs sessions.test.mjs warm.test.mjs files.test.mjs usage.test.mjs
        egress.test.mjs egress-install.test.mjs)
[ "$(id -u)" -eq 0 ] || { echo "run as root (it runs the suite as the rootless Docker user)" >&2; exit 2; }
rl=$src/scripts/rootless-docker.sh
user=$(bash "$rl" user)
bash "$rl" check >/dev/null || { echo "rootless Docker is not running: $rl start" >&2; exit 2; }
dockerhost=$(bash "$rl" env)
home=$(getent passwd "$user" | cut -d: -f6)
tmp=$(mktemp -d /tmp/vst-e2e-rl.XXXXXX)
chown "$user:" "$tmp"
trap 'rm -rf "$tmp"' EXIT
base=(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user" LOGNAME="$user" SHELL=/bin/bash
        TERM=xterm LANG=C.UTF-8 TMPDIR="$tmp" "$dockerhost" VESTIBULE_IMAGE_SOURCE=debian VESTIBULE_BIN="$bin")
grade=$(cd "$src/tests/e2e" && runuser -u "$user" -- "${base[@]}" node expected-grade.mjs container) ||
        { echo "doctor's grade does not fit the facts" >&2; exit 1; }
echo "e2e-rootless-docker: $user, $dockerhost, grade '$grade'"
cd "$src/tests/e2e"
runuser -u "$user" -- "${base[@]}" E2E_BACKEND=container E2E_EXPECT_GRADE="$grade" E2E_EGRESS=1 \
        E2E_EGRESS_NPM="${E2E_EGRESS_NPM:-1}" ${E2E_RESULTS:+E2E_RESULTS="$E2E_RESULTS"} \
        timeout --kill-after=30 900 node run.mjs "${files[@]}"
