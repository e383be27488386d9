# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/48-run-cmd.sh - `vestibule-mcp run [options] -- CMD` (issue 27) against the real kernel.
# Sourced by scripts/test.sh, which calls stage_run_cmd when the stage runs.

# tests/run-cmd/run-cmd.test.sh, as root (each command runs as the test user): real programs in
# the host view, planted secrets read as nothing (with controls outside), the terminal-injection
# check, the walls, the allowlist, and every code of the exit-code contract.
# stage: run-cmd | build-release | run -- CMD: host view, masked secrets, exit codes, TIOCSTI (root)
stage_run_cmd() {
        local rc=0
        if [ ! -x "$rel/vestibule-mcp" ]; then
                record_fail "run-cmd: no Release build"
                return 0
        fi
        step 300 "run -- CMD (tests/run-cmd/run-cmd.test.sh)" env VESTIBULE_BIN="$rel/vestibule-mcp" \
                RUN_CMD_USER="$user" bash "$src/tests/run-cmd/run-cmd.test.sh" || rc=$?
        case $rc in
        0) passed=$((passed + 1)) ;;
        77) if [ "$must_run" = 1 ]; then record_fail "run-cmd: skipped (needs root and the test user)"
            else skipped=$((skipped + 1)); fi ;;
        *) record_fail "run-cmd: tests/run-cmd/run-cmd.test.sh exited $rc" ;;
        esac
}
