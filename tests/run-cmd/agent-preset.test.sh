#!/usr/bin/env bash
# agent-preset.test.sh - `vestibule-mcp run --agent NAME -- AGENT ...` with the real Claude Code,
# Codex and Gemini CLIs and opencode (the versions tests/clients pins, from
# tests/run-cmd/agent-preset/package-lock.json) against the scripted stand-in model API on
# 127.0.0.1, as the unprivileged test user in a loopback-only network namespace (unshare(1), as
# tests/clients/run.mjs does). For each, the model asks the agent's own shell tool to cat the
# planted ~/.ssh/id_ed25519 (a control run outside the sandbox shows it is readable), to edit a
# project file, to reach its provider's host and another host, and to echo a planted
# $GITHUB_TOKEN and the agent's key variable: agent-preset.mjs checks each.
#
# Usage (as root, which runs every command as the test user; needs node, npm and the npm
# registry for `npm ci`):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/agent-preset.test.sh
# Env: RUN_CMD_USER (default vestibule-test), RUN_CMD_DIR (default a fresh /var/tmp folder),
#      AGENT_PRESET_AGENTS (default "claude codex gemini"; "opencode" too takes 40-150 s more:
#      see docs/run-command.md), AGENT_PRESET_NPM (a folder
#      for the agents' npm tree, kept and reused while the lock is the same; default: in the
#      run's folder).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, no node/npm/unshare).
set -uo pipefail

# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"
rc_prologue agent-preset node npm unshare ip
npmdir=${AGENT_PRESET_NPM:-$base/npm}
mkdir -p "$home/.ssh" "$base/t/run-cmd" "$base/t/clients"
echo "PLANTED-SSH-KEY-7f3c2a91" >"$home/.ssh/id_ed25519"
chmod 0600 "$home/.ssh/id_ed25519"
cp "$here/agent-preset.mjs" "$base/t/run-cmd/"
cp "$here/../clients/model-api.mjs" "$here/../clients/facts.mjs" "$base/t/clients/"
# shellcheck source=tests/run-cmd/agent-npm.sh
. "$here/agent-npm.sh"
agent_npm "$npmdir" || exit 1
modules=$npmdir/node_modules
# the programs tests/clients/drivers.mjs runs (npm's install scripts are off, so .bin/claude
# and .bin/codex are placeholders); the Gemini CLI's bin is its bundle, run by node
declare -A agent_bin=(
        [claude]=$modules/@anthropic-ai/claude-code-linux-x64/claude
        [codex]=$modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
        [gemini]=$modules/.bin/gemini
        [opencode]=$modules/opencode-linux-x64$(grep -qw avx2 /proc/cpuinfo || echo -baseline)/bin/opencode
)
agents=${AGENT_PRESET_AGENTS:-claude codex gemini}
for a in $agents; do
        [ -x "${agent_bin[$a]:-/nonexistent}" ] || { echo "FAIL: no $a binary at ${agent_bin[$a]:-?}"; exit 1; }
done
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
rc=0
for a in $agents; do
        t0=$(date +%s)
        # A user namespace for the netns (lo up), then a nested one mapping the test user back.
        runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
                unshare --user --map-root-user --net -- /bin/sh -c \
                "\"$ipbin\" link set lo up && exec unshare --user --map-user=$uid --map-group=$gid -- \"\$@\"" \
                sh node "$base/t/run-cmd/agent-preset.mjs" --agent "$a" --vm "$base/vestibule-mcp" \
                --bin "${agent_bin[$a]}" --modules "$modules" --home "$home" --proj "$proj" || rc=1
        echo "agent-preset: $a took $(($(date +%s) - t0)) s"
done
[ $rc = 0 ] && [ -z "${RUN_CMD_DIR:-}" ] && rm -rf "$base"
[ $rc = 0 ] || echo "agent-preset: logs in $base (AGENT-control.log, AGENT-sandboxed.log)"
exit $rc
