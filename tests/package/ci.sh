#!/bin/bash
# tests/package/ci.sh - the packaging stage of scripts/test.sh:
#   1. scripts/package.sh from clean builds (.deb checked by lintian, npm launcher, linux-x64,
#      linux-arm64 when the cross toolchain is there);
#   2. the npm tarballs installed into a clean prefix as USER, with no compiler on PATH:
#      `npx vestibule-mcp --version` and one run_code call over stdio (mcp-call.mjs) with the
#      native backend on ROOTFS;
#   3. the linux-arm64 binary under qemu-user: --version, and `run -l bash -c 'echo hi'`
#      through the container backend on rootful Docker when it answers (qemu-user 7.2 refuses
#      prctl(PR_SET_CHILD_SUBREAPER) and clone(CLONE_NEWUSER), which the naive and native
#      backends need; see docs/packaging.md);
#   4. tests/package/install-client.sh when CLIENTS_BIN (the client CLIs) is given.
#
#   tests/package/ci.sh USER ROOTFS [CLIENTS_BIN]     (as root; USER unprivileged)
#
# Prints one line per check and "package stage: N passed, N failed, N skipped"; exit 1 on any
# failure.
set -uo pipefail

user=${1:?usage: ci.sh USER ROOTFS [CLIENTS_BIN]}
rootfs=${2:?usage: ci.sh USER ROOTFS [CLIENTS_BIN]}
clients=${3:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^project(vestibule VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
passed=0 failed=0 skipped=0
ok() { echo "ok      $*"; passed=$((passed + 1)); }
bad() { echo "FAILED  $*"; failed=$((failed + 1)); }
skip() { echo "skipped $*"; skipped=$((skipped + 1)); }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
as_user() {
        runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
                USER="$user" LOGNAME="$user" TMPDIR=/tmp "$@"
}
home=$(getent passwd "$user" | cut -d: -f6)

t0=$(date +%s.%N)
# the OCI image is the oci stage's (tests/package/oci.sh), beside another group
if bash "$src/scripts/package.sh" --no-oci; then
        ok "scripts/package.sh in $(secs "$t0" "$(date +%s.%N)") s"
else
        bad "scripts/package.sh"
        echo "package stage: $passed passed, $failed failed, $skipped skipped"
        exit 1
fi
ls -l "$src/dist"

# The AppArmor profile (issue 25): AppArmor 4's parser (Debian 13's, fetched with apt-get download
# into a private apt state) compiles the .deb's and setup --apparmor's profiles; the postinst's
# guards in a private mount namespace.
if VESTIBULE_BIN="$src/build-pkg/npm-x64-build/vestibule-mcp" \
        APPARMOR4_DIR="${VESTIBULE_CI_DIR:-/var/tmp}/apparmor4" bash "$src/tests/package/apparmor.sh"; then
        ok "apparmor profile checks"
else
        bad "apparmor profile checks"
fi

# --- npm: a clean prefix, as the user -----------------------------------------------------------
prefix=$(mktemp -d /tmp/vst-npm-prefix.XXXXXX)
chown "$user" "$prefix"
cp "$src/dist/vestibule-mcp-$version.tgz" "$src/dist/vestibule-mcp-linux-x64-$version.tgz" \
        "$src/tests/package/mcp-call.mjs" "$prefix/"
chmod 644 "$prefix"/*
t0=$(date +%s.%N)
if (cd "$prefix" && as_user npm install --offline --no-audit --no-fund --loglevel=error \
        "./vestibule-mcp-$version.tgz" "./vestibule-mcp-linux-x64-$version.tgz"); then
        ok "npm install of the launcher and linux-x64 into a clean prefix in $(secs "$t0" "$(date +%s.%N)") s"
else
        bad "npm install into a clean prefix"
fi
v=$(cd "$prefix" && as_user npx vestibule-mcp --version 2>&1)
[ "$v" = "vestibule-mcp $version" ] && ok "npx vestibule-mcp --version: $v" ||
        bad "npx vestibule-mcp --version said '$v'"
out=$(cd "$prefix" && as_user VESTIBULE_BACKEND=native VESTIBULE_ROOTFS_DIR="$rootfs" \
        node mcp-call.mjs native npx vestibule-mcp 2>/dev/null)
grep -q '^isolation: native' <<<"$out" && ok "run_code through npx vestibule-mcp: $(tail -1 <<<"$out")" ||
        bad "run_code through npx vestibule-mcp: $out"
msg=$(cd "$prefix" && as_user node -e "Object.defineProperty(process, 'platform', {value: 'win32'});
        require('./node_modules/vestibule-mcp/bin/vestibule-mcp.js')" 2>&1)
grep -q '^vestibule-mcp: no prebuilt binary for win32 x64' <<<"$msg" &&
        ok "another platform gets one line: $msg" || bad "another platform: '$msg'"
rm -rf "$prefix"

# --- linux-arm64 under qemu-user ---------------------------------------------------------------
arm=$src/build-pkg/npm-arm64/bin/vestibule-mcp
if [ ! -x "$arm" ]; then
        skip "linux-arm64: not built (no cross toolchain)"
elif ! command -v qemu-aarch64 >/dev/null; then
        skip "linux-arm64: no qemu-aarch64 (apt-get install qemu-user)"
else
        v=$(qemu-aarch64 "$arm" --version 2>&1)
        [ "$v" = "vestibule-mcp $version" ] && ok "linux-arm64 under qemu-user: $v" ||
                bad "linux-arm64 --version under qemu-user said '$v'"
        ws=$(mktemp -d /tmp/vst-arm64-ws.XXXXXX)
        chown "$user" "$ws"
        out=$(cd /tmp && env -i PATH=/usr/bin:/bin HOME=/root VESTIBULE_RUN_AS="$(id -u "$user"):$(id -g "$user")" \
                VESTIBULE_BACKEND=container VESTIBULE_RUNTIME=docker VESTIBULE_IMAGE_SOURCE=debian \
                VESTIBULE_WORKSPACE="$ws" timeout 300 qemu-aarch64 "$arm" run -l bash -c 'echo hi' 2>/dev/null)
        if grep -q '^hi$' <<<"$out" && grep -q '^isolation: container' <<<"$out"; then
                ok "linux-arm64 under qemu-user: run -l bash -c 'echo hi' -> hi, $(tail -1 <<<"$out")"
        elif grep -q 'Blocked: cannot reach Docker\|cannot open the Docker' <<<"$out"; then
                skip "linux-arm64 run: no Docker Engine answering"
        else
                bad "linux-arm64 run under qemu-user: $out"
        fi
        rm -rf "$ws"
fi

# --- install-client through the clients' own CLIs ---------------------------------------------
if [ -n "$clients" ] && [ -d "$clients" ]; then
        if as_user bash "$src/tests/package/install-client.sh" "$src/build-pkg/deb/vestibule-mcp" "$clients"; then
                ok "install-client: every client CLI accepted its config"
        else
                bad "install-client: a client CLI refused its config (above)"
        fi
else
        skip "install-client through the client CLIs: no CLIENTS_BIN given"
fi

echo "package stage: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
