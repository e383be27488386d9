#!/usr/bin/env bash
# install-wrap.test.sh - `vestibule-mcp install-client --wrap NAME CLIENT` and `--unwrap NAME`
# on the files of claude-code, claude-desktop, cursor and vscode holding the official
# @modelcontextprotocol/server-filesystem (pinned in tests/run-cmd/package-lock.json): the
# rewritten JSON read back, Claude Code's own `claude mcp get`/`list` (the CLI pinned in
# tests/run-cmd/agent-preset/package-lock.json), the wrapped entry driven through the SDK
# client, wrapping twice a no-op, --unwrap the original; codex's TOML refused (install-wrap.mjs).
# As the test user, in a loopback-only network namespace.
#
# Usage (as root; needs node, npm and the npm registry for `npm ci`):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/install-wrap.test.sh
# Env: RUN_CMD_USER (default vestibule-test), RUN_CMD_DIR (default a fresh /var/tmp folder),
#      AGENT_PRESET_NPM (as agent-preset.test.sh).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, no node/npm/unshare).
set -uo pipefail

# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"
rc_prologue install-wrap node npm unshare ip
mkdir -p "$base/npm"
echo "install-wrap-notes-41c7" >"$proj/notes.txt"
cp "$here/package.json" "$here/package-lock.json" "$here/install-wrap.mjs" "$base/npm/"
(cd "$base/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        { echo "FAIL: npm ci in npm"; exit 1; }
agents=${AGENT_PRESET_NPM:-$base/claude}
# shellcheck source=tests/run-cmd/agent-npm.sh
. "$here/agent-npm.sh"
agent_npm "$agents" || exit 1
claude=$agents/node_modules/@anthropic-ai/claude-code-linux-x64/claude
codex=$agents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
chown -R "$user" "$base"
chmod 0711 "$base"

uid=$(id -u "$user")
gid=$(id -g "$user")
ipbin=$(command -v ip)
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
        unshare --user --map-root-user --net -- /bin/sh -c \
        "\"$ipbin\" link set lo up && exec unshare --user --map-user=$uid --map-group=$gid -- \"\$@\"" \
        sh node "$base/npm/install-wrap.mjs" "$base/vestibule-mcp" "$base/npm" "$claude" "$home" "$proj" \
        "$codex"
rc=$?
[ $rc = 0 ] && [ -z "${RUN_CMD_DIR:-}" ] && rm -rf "$base"
[ $rc = 0 ] || echo "install-wrap: files in $base"
exit $rc
