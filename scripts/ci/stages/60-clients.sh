# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/60-clients.sh - real MCP clients from npm against a stand-in model.
# Sourced by scripts/test.sh, which calls stage_clients when the stage runs (scripts/ci/lib.sh: run_stage).

# tests/clients: Claude Code, Codex CLI, Gemini CLI, opencode, the AI SDK, LangChain, Mastra and
# MCP Inspector --cli --strict (pinned in tests/clients/package-lock.json) each start the Release
# server from the MCP config its user writes, driven by a scripted stand-in model API on
# 127.0.0.1, all inside a loopback-only network namespace; each model must have seen the grade
# and the facts of five calls (tests/clients/facts.mjs). As the test user, backends naive and
# native with the grades of E2E_RUNS, each client bounded at 90 s. Measured on this 2-core
# host: npm install 190 s with an empty npm cache, each run 70-80 s.
clients_dir=$src/tests/clients
clients_npm_rc=""
# clients_npm: npm install in tests/clients once a run (the clients stage and the VM stage's
# Claude Code use it; scripts/test.sh runs it before the VM stage goes to the background, so two
# installs never write the same tree at once); its status.
clients_npm() {
        [ -n "$clients_npm_rc" ] || {
                clients_npm_rc=0
                step 900 "clients: npm install (the pinned lock)" vst_npm_install_locked "$clients_dir" ||
                        clients_npm_rc=$?
        }
        return "$clients_npm_rc"
}

# stage: clients | build-release | real MCP clients from npm against a stand-in model; what each model saw
stage_clients() {
        local builds backend grade extra
        if [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                record_fail "clients: needs the Release build and the e2e stage's npm packages"
        elif clients_npm; then
                while IFS='|' read -r builds backend grade extra; do
                        case ",$builds,|$backend" in *,Release,*"|naive" | *,Release,*"|native") ;; *) continue ;; esac
                        resolve_grade "$rel/vestibule-mcp" "$backend" "$grade" "$extra" || continue
                        grade=$resolved
                        rootfs=$(sed -n 's/.*VESTIBULE_ROOTFS_DIR=\([^ ]*\).*/\1/p' <<<"$extra")
                        # the controls (a client without its user's approval refuses) once, on naive
                        ctl=()
                        [ "$backend" = naive ] || ctl=(--no-controls)
                        res=$(mktemp "$ci/clients-results.XXXXXX")
                        chmod 0666 "$res"
                        banner "clients: Release, backend $backend"
                        rc=0
                        as_user VESTIBULE_BIN="$rel/vestibule-mcp" timeout --kill-after=30 420 \
                                node "$clients_dir/run.mjs" --backend "$backend" --expect-grade "$grade" \
                                ${rootfs:+--rootfs "$rootfs"} "${ctl[@]}" --results "$res" || rc=$?
                        add_results "clients, backend $backend" "$res" "$rc"
                done <<<"$E2E_RUNS"
        else
                record_fail "clients: npm install in $clients_dir"
        fi
}
