#!/usr/bin/env bash
# agent-preset.test.sh - `vestibule-mcp run --agent claude -- claude -p ...` with the real Claude
# Code CLI (the version tests/clients pins, from tests/run-cmd/agent-preset/package-lock.json)
# against the scripted stand-in model API on 127.0.0.1, as the unprivileged test user in a
# loopback-only network namespace (unshare(1), as tests/clients/run.mjs does). The model asks
# Claude Code's Bash tool to cat the planted ~/.ssh/id_ed25519 (a control run outside the
# sandbox shows it is readable), to edit a project file, to reach its provider's host and
# another host, and to echo a planted $GITHUB_TOKEN: agent-preset.mjs checks each.
#
# Usage (as root, which runs every command as the test user; needs node, npm and the npm
# registry for `npm ci`):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/agent-preset.test.sh
# Env: RUN_CMD_USER (default vestibule-test), RUN_CMD_DIR (default a fresh /var/tmp folder).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, no node/npm/unshare).
set -uo pipefail

# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"
rc_prologue agent-preset node npm unshare ip
npmdir=$base/npm
mkdir -p "$home/.ssh" "$home/.claude" "$proj" "$npmdir" "$base/t/run-cmd" "$base/t/clients"
echo "PLANTED-SSH-KEY-7f3c2a91" >"$home/.ssh/id_ed25519"
chmod 0600 "$home/.ssh/id_ed25519"
cp "$here/agent-preset/package.json" "$here/agent-preset/package-lock.json" "$npmdir/"
cp "$here/agent-preset.mjs" "$base/t/run-cmd/"
cp "$here/../clients/model-api.mjs" "$here/../clients/facts.mjs" "$base/t/clients/"
(cd "$npmdir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        { echo "FAIL: npm ci of tests/run-cmd/agent-preset"; exit 1; }
claude=$npmdir/node_modules/@anthropic-ai/claude-code-linux-x64/claude
[ -x "$claude" ] || { echo "FAIL: no Claude Code binary at $claude"; exit 1; }
chown -R "$user" "$base"
chmod 0711 "$base"

# The refusals that name the fix, before anything runs (exit 125).
as_user() { runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" "$@"; }
out=$(cd "$proj" && as_user "$base/vestibule-mcp" run --agent aider -- true 2>&1)
rc=$?
if [ $rc = 125 ] && [[ $out == *"unknown agent 'aider'"*"claude, codex, gemini, opencode"* ]]; then
        echo "ok: an unknown agent is refused (125), the known ones listed"
else
        echo "FAIL: unknown agent: exit $rc: $out"; exit 1
fi
out=$(cd "$proj" && as_user "$base/vestibule-mcp" run --agent claude --net none -- true 2>&1)
rc=$?
if [ $rc = 125 ] && [[ $out == *"--net allowlist:HOST"* ]]; then
        echo "ok: --agent with --net none is refused (125), saying how to add hosts"
else
        echo "FAIL: --agent --net none: exit $rc: $out"; exit 1
fi

uid=$(id -u "$user")
gid=$(id -g "$user")
ipbin=$(command -v ip)
# A user namespace for the netns (lo up), then a nested one mapping the test user back.
runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
        unshare --user --map-root-user --net -- /bin/sh -c \
        "\"$ipbin\" link set lo up && exec unshare --user --map-user=$uid --map-group=$gid -- \"\$@\"" \
        sh node "$base/t/run-cmd/agent-preset.mjs" --vm "$base/vestibule-mcp" --claude "$claude" \
        --home "$home" --proj "$proj"
rc=$?
[ $rc = 0 ] && [ -z "${RUN_CMD_DIR:-}" ] && rm -rf "$base"
[ $rc = 0 ] || echo "agent-preset: logs in $base (control.log, sandboxed.log)"
exit $rc
