# shellcheck shell=bash
# agent-npm.sh - sourced by agent-preset.test.sh and install-wrap.test.sh: agent_npm DIR puts the
# agent CLIs pinned in tests/run-cmd/agent-preset/package-lock.json (Claude Code, Codex, Gemini
# CLI, opencode: the versions tests/clients pins) into DIR/node_modules as the lock pins them
# (`npm install --no-save`, as scripts/setup-lib.sh's vst_npm_install_locked: npm 11's `npm ci`
# refuses this lock, missing opencode's other platforms' packages), unless DIR
# already holds that very lock's tree (the mcp-wrap stage shares one between its scripts through
# AGENT_PRESET_NPM and keeps it between runs: the Codex and opencode binaries are ~600 MB).
# Return: 0, or 1 when npm ci failed (said on stdout).
agent_npm() {
        local dir=$1 lock
        lock="$(dirname "${BASH_SOURCE[0]}")/agent-preset/package-lock.json"
        if [ -d "$dir/node_modules" ] && cmp -s "$lock" "$dir/package-lock.json"; then
                return 0
        fi
        rm -rf "$dir" && mkdir -p "$dir" &&
                cp "$(dirname "$lock")/package.json" "$lock" "$dir/" || return 1
        (cd "$dir" && npm install --no-save --ignore-scripts --no-audit --no-fund --loglevel=error) ||
                { echo "FAIL: npm install of tests/run-cmd/agent-preset into $dir"; rm -f "$dir/package-lock.json"; return 1; }
        # what is kept must be the lock it was installed from, whatever npm did to the copy
        cp "$lock" "$dir/package-lock.json"
        chmod -R a+rX "$dir"
}
