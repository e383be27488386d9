#!/usr/bin/env bash
# demo.sh - set Vestibule up from this clone and make one real sandboxed run through the MCP
# server: python `print(1)`, sent by the official MCP TypeScript client over stdio exactly as
# an agent's client would, printing the result text. Its last line is the isolation that
# actually applied (or, if nothing on this machine can sandbox the code, the Blocked: reply
# naming the fix).
#
# As a normal user (recommended): needs the packages below already installed (it prints the
# apt-get line if not), builds into ./build-demo, builds the sandbox images if there are none
# (images/build.sh: needs mmdebstrap and subordinate ids), and runs the server as you.
# As root: installs the packages, builds under /var/tmp/vestibule-demo, and runs the server as
# the unprivileged user vestibule-test (scripts/ci-user.sh), because a server started as root
# refuses to run code: the code would run as root too.
#
# Usage: scripts/demo.sh ['python code']
# Environment: VESTIBULE_* settings are handed to the server (e.g. VESTIBULE_BACKEND=naive to
# see the plumbing without any isolation); VESTIBULE_DEMO_DIR (build folder).
set -euo pipefail
umask 022

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/setup-lib.sh
. "$repo/scripts/setup-lib.sh"
code=${1:-print(1)}
user=${SBX_TEST_USER:-vestibule-test}
is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1

say() { printf '\n==> %s\n' "$*" >&2; }
die() {
        printf 'demo: %s\n' "$*" >&2
        exit 1
}

# ---------------------------------------------------------------- packages
if [ "$is_root" -eq 1 ]; then
        say "installing the build and sandbox packages (apt-get)"
        timeout 1500 bash -c "$(declare -f vst_install_packages); vst_install_packages \"\$@\"" _ \
                "${VST_BUILD_DEPS[@]}" "${VST_ENGINE_DEPS[@]}" "${VST_OTHER_DEPS[@]}" >&2
else
        mapfile -t missing < <(vst_missing_packages "${VST_BUILD_DEPS[@]}" mmdebstrap uidmap)
        if [ "${#missing[@]}" -gt 0 ]; then
                die "missing packages; install them first:
    sudo apt-get install ${missing[*]}"
        fi
fi
vst_node_ok || die "Node.js 20 or later is needed for the MCP client (found: $(node --version 2>/dev/null || echo none))"

# ---------------------------------------------------------------- build
if [ "$is_root" -eq 1 ]; then
        dir=${VESTIBULE_DEMO_DIR:-/var/tmp/vestibule-demo}
        src=$dir/src
        say "copying the sources to $src (readable by $user)"
        vst_copy_sources "$repo" "$src"
else
        dir=${VESTIBULE_DEMO_DIR:-$repo/build-demo}
        src=$repo
fi
say "building vestibule-mcp (Release) in $dir/build"
timeout 1500 bash -c "$(declare -f vst_build); vst_build \"\$@\"" _ "$src" "$dir/build" Release 2 >&2 ||
        die "the build failed (output above)"
bin=$dir/build/vestibule-mcp
[ -x "$bin" ] || die "no binary at $bin"

# ---------------------------------------------------------------- the user the server runs as
run_as=()
if [ "$is_root" -eq 1 ]; then
        say "running as root: the server will run as the unprivileged user $user instead, because a server started as root refuses to run code (it would run as root)"
        bash "$repo/scripts/ci-user.sh" >/dev/null
        if [ -f "$repo/scripts/start-engines.sh" ]; then
                say "starting the container engines (scripts/start-engines.sh)"
                timeout 300 bash "$repo/scripts/start-engines.sh" >&2 || say "the engines did not start; the container backend will say why"
        fi
        uid=$(id -u "$user")
        home=$(getent passwd "$user" | cut -d: -f6)
        run_as=(runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" USER="$user"
                LANG=C.UTF-8 XDG_RUNTIME_DIR="/run/user/$uid")
fi

# ---------------------------------------------------------------- images / setup
say "vestibule-mcp setup"
setup_ok=1
"${run_as[@]}" "$bin" setup >&2 || setup_ok=0
settings=()
while IFS='=' read -r k v; do
        settings+=("$k=$v")
done < <(env | grep '^VESTIBULE_' || true)
if [ "$setup_ok" -eq 0 ] && [ -z "${VESTIBULE_ROOTFS_DIR:-}" ]; then
        # Until setup can fetch them, build the sandbox's root filesystems from Debian packages.
        if [ "$is_root" -eq 1 ]; then
                images=/var/tmp/vestibule-images
        else
                images=${XDG_CACHE_HOME:-$HOME/.cache}/vestibule/images
        fi
        if [ -d "$images/rootfs/python" ] && [ -d "$images/rootfs/node" ]; then
                say "using the sandbox images in $images"
        else
                say "building the sandbox images with images/build.sh into $images (a few minutes)"
                timeout 1800 bash -c "$(declare -f vst_build_images); vst_build_images \"\$@\"" _ "$src" "$images" >&2 ||
                        die "images/build.sh failed (output above)"
        fi
        settings+=("VESTIBULE_ROOTFS_DIR=$images/rootfs")
fi

# ---------------------------------------------------------------- the client
say "installing the MCP client (npm ci in tests/e2e)"
timeout 600 bash -c "$(declare -f vst_npm_ci); vst_npm_ci \"\$@\"" _ "$src/tests/e2e" >&2 || die "npm ci failed"

say "one run_code call through the MCP server"
rc=0
if [ "$is_root" -eq 1 ]; then
        "${run_as[@]}" "${settings[@]}" VESTIBULE_BIN="$bin" node "$src/tests/e2e/demo.mjs" "$code" || rc=$?
else
        env "${settings[@]}" VESTIBULE_BIN="$bin" node "$src/tests/e2e/demo.mjs" "$code" || rc=$?
fi
if [ "$rc" -ne 0 ]; then
        say "the code did not run; the reply above names the fix"
fi
exit "$rc"
