#!/bin/bash
# tests/package/install-client.sh - each config `vestibule-mcp install-client` writes is accepted
# by that client's own CLI: `claude mcp list`, `gemini mcp list` and `opencode mcp list` start
# the server and must say it connected; `codex mcp list` must list it with its env. Each client
# starts from a config that already has another server, which must still be listed after.
#
#   tests/package/install-client.sh VESTIBULE_BIN [CLIENTS_BIN_DIR]
#
# CLIENTS_BIN_DIR holds the claude, codex, gemini and opencode CLIs (npm packages
# @anthropic-ai/claude-code, @openai/codex, @google/gemini-cli, opencode-ai); a client whose
# CLI is missing is reported as skipped. Runs as any user; touches only temporary HOMEs.
# Ends with "install-client clients: N passed, N failed, N skipped".
set -uo pipefail

bin=${1:?usage: install-client.sh VESTIBULE_BIN [CLIENTS_BIN_DIR]}
cdir=${2:-/var/tmp/vst-package/clients/node_modules/.bin}
bin=$(realpath "$bin")
passed=0 failed=0 skipped=0
base=$(mktemp -d /tmp/vst-install-client.XXXXXX)
trap 'rm -rf "$base"' EXIT

# shellcheck source=tests/package/client-lib.sh
. "$(dirname "$0")/client-lib.sh" # ok, bad, skip, fresh (a new HOME in h), check
run() { env -i HOME="$h" PATH="$cdir:/usr/local/bin:/usr/bin:/bin" TERM=dumb "$@"; }

# --- Claude Code: through `claude mcp add`, then by editing ~/.claude.json without the CLI ---
if [ -x "$cdir/claude" ]; then
        fresh claude
        echo '{"mcpServers": {"other": {"type": "stdio", "command": "/bin/false", "args": [], "env": {}}}}' \
                >"$h/.claude.json"
        out=$(run "$bin" install-client claude-code --env VESTIBULE_BACKEND=naive 2>&1)
        check "claude-code: install-client uses claude mcp add" "$out" 'claude mcp add'
        out=$(run timeout 120 claude mcp list 2>&1)
        check "claude-code: claude mcp list connects (via claude mcp add)" "$out" \
                'vestibule: .*Connected' 'other: '
        out=$(run "$bin" install-client claude-code --env VESTIBULE_BACKEND=naive 2>&1)
        check "claude-code: second run changes nothing" "$out" 'nothing changed'
        # without the CLI on PATH: the file is edited directly
        out=$(env -i HOME="$h" PATH=/usr/bin:/bin "$bin" install-client claude-code \
                --env VESTIBULE_BACKEND=naive --env VESTIBULE_MEM_MB=300 2>&1)
        check "claude-code: install-client edits ~/.claude.json without the CLI" "$out" \
                "wrote the 'vestibule' entry"
        out=$(run timeout 120 claude mcp list 2>&1)
        check "claude-code: claude mcp list connects (file written by us)" "$out" \
                'vestibule: .*Connected' 'other: '
        out=$(run timeout 60 claude mcp get vestibule 2>&1)
        check "claude-code: claude mcp get shows our env" "$out" 'VESTIBULE_MEM_MB=300'
        # issue 24 #8: a re-run through `claude mcp add` keeps the env the entry had
        out=$(run "$bin" install-client claude-code --env VESTIBULE_BACKEND=native 2>&1)
        check "claude-code: a re-run through the CLI uses claude mcp add" "$out" 'claude mcp add'
        out=$(run timeout 60 claude mcp get vestibule 2>&1)
        check "claude-code: after a re-run claude mcp get shows the kept env and ours" "$out" \
                'VESTIBULE_MEM_MB=300' 'VESTIBULE_BACKEND=native'
else
        skip "claude-code: no claude CLI in $cdir"
fi

# --- Codex: ~/.codex/config.toml ------------------------------------------------------------
if [ -x "$cdir/codex" ]; then
        fresh codex
        mkdir -p "$h/.codex"
        printf 'model = "o3"\n\n[mcp_servers.other]\ncommand = "/bin/false"\nargs = []\n' \
                >"$h/.codex/config.toml"
        out=$(run "$bin" install-client codex --env VESTIBULE_BACKEND=naive 2>&1)
        out=$(run timeout 60 codex mcp list 2>&1)
        check "codex: codex mcp list lists it with its env, and the other server" "$out" \
                "vestibule +$bin .*VESTIBULE_BACKEND=.*enabled" '^other +/bin/false'
        out=$(run timeout 60 codex mcp get vestibule 2>&1)
        check "codex: codex mcp get reads it" "$out" "command: $bin"
        # issue 24 #8: a re-run keeps the entry's own env and timeouts
        printf 'startup_timeout_sec = 45\n\n[mcp_servers.vestibule.env]\nVESTIBULE_MEM_MB = "300"\n' \
                >>"$h/.codex/config.toml"
        sed -i 's/^\[mcp_servers.vestibule\]$/&\ntool_timeout_sec = 600/' "$h/.codex/config.toml"
        out=$(run "$bin" install-client codex --env VESTIBULE_BACKEND=native 2>&1)
        check "codex: a re-run says what it kept" "$out" 'kept the old entry.s env VESTIBULE_MEM_MB'
        out=$(run timeout 60 codex mcp get vestibule 2>&1)
        check "codex: after a re-run codex mcp get shows the kept env and timeout" "$out" \
                'VESTIBULE_BACKEND=.*VESTIBULE_MEM_MB=' 'tool_timeout_sec: 600'
        # issue 24 #7: an inline-table mcp_servers is refused, the file untouched and still read
        fresh codex-inline
        mkdir -p "$h/.codex"
        printf 'mcp_servers = { other = { command = "/bin/false" } }\n' >"$h/.codex/config.toml"
        before=$(cat "$h/.codex/config.toml")
        if run "$bin" install-client codex >/dev/null 2>&1; then
                bad "codex: an inline-table mcp_servers was not refused"
        elif [ "$(cat "$h/.codex/config.toml")" != "$before" ]; then
                bad "codex: the refused inline-table file was changed"
        else
                out=$(run timeout 60 codex mcp list 2>&1)
                check "codex: an inline-table mcp_servers is refused and still reads" "$out" \
                        '^other +/bin/false'
        fi
else
        skip "codex: no codex CLI in $cdir"
fi

# --- Gemini CLI: ~/.gemini/settings.json (the folder must be trusted for servers to start) ---
if [ -x "$cdir/gemini" ]; then
        fresh gemini
        mkdir -p "$h/.gemini" "$h/work"
        echo '{"mcpServers": {"other": {"command": "/bin/false"}}}' >"$h/.gemini/settings.json"
        echo "{\"$h/work\": \"TRUST_FOLDER\"}" >"$h/.gemini/trustedFolders.json"
        out=$(run "$bin" install-client gemini --env VESTIBULE_BACKEND=naive 2>&1)
        out=$(cd "$h/work" && run timeout 120 gemini mcp list 2>&1)
        check "gemini: gemini mcp list connects" "$out" 'vestibule: .*Connected' 'other: '
else
        skip "gemini: no gemini CLI in $cdir"
fi

# --- opencode: ~/.config/opencode/opencode.json ------------------------------------------------
if [ -x "$cdir/opencode" ]; then
        fresh opencode
        mkdir -p "$h/.config/opencode" "$h/work"
        echo '{"$schema": "https://opencode.ai/config.json", "mcp": {"other": {"type": "local", "command": ["/bin/false"]}}}' \
                >"$h/.config/opencode/opencode.json"
        out=$(run "$bin" install-client opencode --env VESTIBULE_BACKEND=naive 2>&1)
        out=$(cd "$h/work" && run timeout 120 opencode mcp list 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
        check "opencode: opencode mcp list connects" "$out" 'vestibule +connected' 'other'
else
        skip "opencode: no opencode CLI in $cdir"
fi

echo "install-client clients: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
