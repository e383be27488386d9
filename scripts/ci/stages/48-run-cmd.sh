# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/48-run-cmd.sh - `vestibule-mcp run [options] -- CMD` (issue 27) against the real kernel.
# Sourced by scripts/test.sh, which calls stage_run_cmd when the stage runs.

# tests/run-cmd/run-cmd.test.sh, as root (each command runs as the test user): real programs in
# the host view, planted secrets read as nothing (with controls outside), the terminal-injection
# check, the walls, the allowlist, and every code of the exit-code contract. Then
# tests/run-cmd/run-cmd-container.test.sh: the same contract, the planted secrets, the network
# and nothing left (after a timeout, a SIGTERM and a SIGKILL of the run) on the container
# backend, as a docker-group user on rootful Docker (no root, no RUN_AS; ~16 s). Then
# tests/run-cmd/agent-guard.test.sh: `run --agent` puts back the hooks and MCP servers a command
# plants in the agent's own files, and a SIGKILLed run's are put back by the next run (~4 s).
# stage: run-cmd | build-release | run -- CMD: host view, masked secrets, exit codes, TIOCSTI (root)
stage_run_cmd() {
        run_cmd_script run-cmd "run -- CMD" run-cmd.test.sh "the test user"
        run_cmd_script run-cmd "run -- CMD, container backend" run-cmd-container.test.sh \
                "rootful Docker and its docker group"
        run_cmd_script run-cmd "run --agent: planted host commands put back" agent-guard.test.sh \
                "the test user and python3"
}

# tests/run-cmd/mcp-wrap.test.sh, as root (the clients and servers run as the test user): the
# official SDK client against @modelcontextprotocol/server-filesystem and
# @modelcontextprotocol/server-everything (pinned in tests/run-cmd/package-lock.json) wrapped and
# unwrapped, tools/list, calls (text, image, resource), prompts and resources identical, the
# grade notification; a hostile stand-in server that reads a planted key, connects out and leaves
# a daemon, which each work unwrapped (the controls) and fail wrapped; the exit codes and ends.
# Then tests/run-cmd/agent-preset.test.sh: `run --agent NAME` with the real Claude Code, Codex
# and Gemini CLI (pinned in tests/run-cmd/agent-preset/package-lock.json; opencode on request)
# against the stand-in model API in a loopback-only netns: the planted ~/.ssh key (readable in
# each control run outside) is not there inside, the project edit lands, the model's host
# answers and another is refused, a planted token is dropped and the agent's key passed.
# Then tests/run-cmd/install-wrap.test.sh: `install-client --wrap fs CLIENT` on the files of
# claude-code (user and project scope), claude-desktop, cursor, vscode and codex's TOML, read
# back (with `claude mcp get`/`list`, `codex mcp get --json`/`list`), the wrapped
# server-filesystem driven through the SDK client, `--unwrap` giving it back.
# stage: mcp-wrap | build-release | mcp wrap -- SERVER, run --agent claude/codex/gemini, install-client --wrap (JSON, .mcp.json, codex TOML): MCP servers from npm, a hostile stand-in, the agent CLIs (root)
stage_mcp_wrap() {
        run_cmd_script mcp-wrap "mcp wrap -- SERVER" mcp-wrap.test.sh "the test user and node"
        # the agent CLIs' npm tree, once for the two scripts below (kept between runs while its
        # lock is the same; ~900 MB, minutes with an empty npm cache)
        if step 900 "mcp-wrap: the agent CLIs from npm (tests/run-cmd/agent-npm.sh)" bash -c \
                '. "$1/tests/run-cmd/agent-npm.sh" && agent_npm "$2"' sh "$src" "$ci/run-cmd-agents"; then
                passed=$((passed + 1))
        else
                record_fail "mcp-wrap: npm install of tests/run-cmd/agent-preset"
        fi
        run_cmd_script mcp-wrap "run --agent claude, codex, gemini" agent-preset.test.sh \
                "the test user, node and unshare"
        run_cmd_script mcp-wrap "install-client --wrap" install-wrap.test.sh \
                "the test user, node and unshare"
}

# tests/run-cmd/overlay.test.sh, as root (each command runs as the test user): minimist's own tape
# suite (npm, pinned in tests/run-cmd/overlay-npm/) and pyflakes's pytest suite (Debian) pass
# with the project read-only under an overlay that lists what they wrote; --apply against the
# command's tricks (symlinks out, fifos, sockets, a file for a folder, shared hard links, newline
# names, setuid, planted .git/.envrc), each refused or applied safely.
# stage: run-overlay | build-release | run --overlay/--apply: real test suites under an overlay, --apply against the command's tricks (root)
stage_run_overlay() {
        run_cmd_script run-overlay "run --overlay" overlay.test.sh "the test user, npm, python3-pytest and python3-pyflakes"
}

# run_cmd_script STAGE WHAT SCRIPT NEEDS: tests/run-cmd/SCRIPT as root with the Release build
# (each command runs as the test user); its exit 77 (a prerequisite missing) fails the run
# under VESTIBULE_CI_MUST_RUN.
run_cmd_script() {
        local rc=0
        if [ ! -x "$rel/vestibule-mcp" ]; then
                record_fail "$1: no Release build"
                return 0
        fi
        # AGENT_PRESET_NPM: the agent CLIs' npm tree, shared by the mcp-wrap stage's scripts
        # and kept between runs while its lock is the same (tests/run-cmd/agent-npm.sh)
        step 300 "$2 (tests/run-cmd/$3)" env VESTIBULE_BIN="$rel/vestibule-mcp" RUN_CMD_USER="$user" \
                AGENT_PRESET_NPM="$ci/run-cmd-agents" bash "$src/tests/run-cmd/$3" || rc=$?
        case $rc in
        0) passed=$((passed + 1)) ;;
        77) if [ "$must_run" = 1 ]; then record_fail "$1: skipped (needs root, $4)"
            else skipped=$((skipped + 1)); fi ;;
        *) record_fail "$1: tests/run-cmd/$3 exited $rc" ;;
        esac
}
