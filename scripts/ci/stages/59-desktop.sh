# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/59-desktop.sh - a Docker Desktop stand-in (issue 23): Debian's dockerd in its own mount,
# pid, network, UTS and IPC namespaces with its own data root (scripts/desktop-standin.sh), so
# the server sees neither its processes nor its files, as with Desktop's VM.
# Sourced by scripts/test.sh, which calls stage_e2e_desktop when the stage runs.

# The stand-in starts (its images loaded from the host's Docker), `check` proves the server's
# machine cannot see its containers' pids or files (with the host's Docker as the control), and
# the e2e files run through the SDK as the test user with only DOCKER_HOST (and the image
# source) from the client config; the grade is doctor's, checked against the facts. The network
# allowlist runs there too (the bridge over the Engine API, docs/design/egress.md "On a remote
# engine"): egress.test.mjs and egress-install.test.mjs with pip, and npm when tests/egress has
# its packages (the egress-container stage installs them). Warm spares are taken there
# (warm.test.mjs, issue 23 #3 on the volume path); sessions run over one attach connection
# each (issue 23 #2, docs/design/sessions.md "Sessions on the volume path"), with the volume
# path's own lifeline and forgery tests in sessions.test.mjs. shared-engine.test.mjs: two
# servers on the stand-in, one restarting (each start's sweep) while the other runs calls, none
# of which may be killed (the exit 137s seen on a shared stand-in), with a SIGKILLed server's
# container swept as the control.
# stage: e2e-desktop | build-release | run, workspace, files, sessions, warm and the egress allowlist against a Docker Desktop stand-in (dockerd in its own namespaces; root)
stage_e2e_desktop() {
        local res rc=0 grade envs npm=0
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                banner "e2e on a Docker Desktop stand-in: needs root, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        if ! step 300 "Desktop stand-in: start" bash "$src/scripts/desktop-standin.sh" start ||
                ! step 120 "Desktop stand-in: its processes and files are not this machine's" \
                        bash "$src/scripts/desktop-standin.sh" check; then
                record_fail "e2e-desktop: the stand-in did not start or its check failed"
                bash "$src/scripts/desktop-standin.sh" stop >/dev/null 2>&1 || true
                return 0
        fi
        passed=$((passed + 1))
        envs=$(bash "$src/scripts/desktop-standin.sh" env)
        if ! grade=$(as_user "$envs" VESTIBULE_IMAGE_SOURCE=debian VESTIBULE_BIN="$rel/vestibule-mcp" \
                node "$e2e/expected-grade.mjs" container); then
                record_fail "e2e-desktop: doctor's grade does not fit the facts"
        else
                res=$(mktemp "$ci/e2e-results.XXXXXX")
                chmod 0666 "$res"
                [ ! -d "$src/tests/egress/node_modules" ] || npm=1
                banner "e2e: Docker Desktop stand-in, grade '$grade' (egress npm=$npm)"
                (cd "$e2e" && as_user "$envs" VESTIBULE_IMAGE_SOURCE=debian VESTIBULE_BIN="$rel/vestibule-mcp" \
                        E2E_BACKEND=container E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                        E2E_EGRESS=1 E2E_EGRESS_NPM="$npm" \
                        timeout --kill-after=30 900 node run.mjs run.test.mjs workspace.test.mjs \
                        sessions.test.mjs warm.test.mjs files.test.mjs egress.test.mjs \
                        egress-install.test.mjs shared-engine.test.mjs) || rc=$?
                add_results "Docker Desktop stand-in" "$res" "$rc"
                # issue 23 item 7: doctor, verify (every probe the grade claims held, the egress
                # ones over the Engine API's exec stream: 0 not tested) and a run agree there
                res=$(mktemp "$ci/e2e-results.XXXXXX")
                chmod 0666 "$res"
                rc=0
                (cd "$e2e" && as_user "$envs" VESTIBULE_IMAGE_SOURCE=debian VESTIBULE_BIN="$rel/vestibule-mcp" \
                        E2E_BACKEND=container E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                        AGREE_EXPECT_PICK=container AGREE_LABEL="Docker Desktop stand-in" \
                        timeout --kill-after=30 600 node run.mjs agree.mjs) || rc=$?
                add_results "Docker Desktop stand-in: doctor, verify and a run agree" "$res" "$rc"
        fi
        bash "$src/scripts/desktop-standin.sh" stop >/dev/null 2>&1 || record_fail "e2e-desktop: the stand-in did not stop"
}
