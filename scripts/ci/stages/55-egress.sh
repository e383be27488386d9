# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/55-egress.sh - the egress allowlist on every backend that has one.
# Sourced by scripts/test.sh, which calls stage_egress_container when the stage runs (scripts/ci/lib.sh: run_stage).

# tests/e2e/egress-install.test.mjs (issue 13) on the container backend: pip install from a local
# PyPI index and npm install from verdaccio (tests/egress/package-lock.json, no uplink), both on
# 127.0.0.1 reached only through the proxy (VESTIBULE_EGRESS_PIN), each used by the next call;
# the refusals with their reasons in the result and the audit; the no-route controls. On rootful
# Docker (server as root, sandboxes as the test user) everything, and tests/e2e/egress.test.mjs
# (the proxy killed mid-run, four runs at once); on the test user's rootless Podman all but the
# npm install. verdaccio's `npm ci` (327 packages; 150 s measured on the
# loaded 2-core CI host) runs in the background while the other tests run; the npm test runs
# on Docker once it is done.
# stage: egress-container | build-release | pip/npm installs, refusals and no-route controls through the egress allowlist on native, Docker, rootful and rootless Podman (root)
stage_egress_container() {
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                banner "egress allowlist on containers: needs root, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
        else
                banner "egress: npm ci in tests/egress (verdaccio, pinned), in the background"
                (timeout --kill-after=30 240 bash -euo pipefail -c "$(declare -f vst_npm_ci); vst_npm_ci \"\$1\"" _ \
                        "$src/tests/egress" >"$ci/egress-npm.log" 2>&1) &
                eg_npm_pid=$!
                # eg_run NPM: the file on each container line of E2E_RUNS; NPM: E2E_EGRESS_NPM (0: all but
                # the npm test, only: the npm test alone, on Docker)
                eg_run() {
                        local npm=$1 builds backend grade extra res rc v eg_as eg_pass eg_vars eg_more
                        while IFS='|' read -r builds backend grade extra; do
                                case ",$builds,|$backend|$extra" in
                                *,Release,*"|container|"*E2E_AS=root*VESTIBULE_RUNTIME=docker*) ;;
                                *,Release,*"|container|"*E2E_AS=root*VESTIBULE_RUNTIME=podman*) [ "$npm" = 0 ] || continue ;;
                                *,Release,*"|container|"*DOCKER_HOST=unix:///run/user/*) [ "$npm" = 0 ] || continue ;;
                                *,Release,*"|native|"*) ;;
                                *) continue ;;
                                esac
                                res=$(mktemp "$ci/e2e-results.XXXXXX")
                                chmod 0666 "$res"
                                # on Docker, first pass: also egress.test.mjs (the proxy killed mid-run,
                                # four runs at once, an allowed host, the refusals, pip)
                                eg_more=()
                                case "$npm:$extra" in 0:*VESTIBULE_RUNTIME=docker*) eg_more=(egress.test.mjs) ;; esac
                                eg_as=user eg_pass=()
                                read -r -a eg_vars <<<"$extra"
                                for v in "${eg_vars[@]}"; do
                                        if [ "$v" = E2E_AS=root ]; then eg_as=root; else eg_pass+=("$v"); fi
                                done
                                banner "e2e: egress allowlist, $backend, npm=$npm ($extra)"
                                rc=0
                                if [ "$eg_as" = root ]; then
                                        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TMPDIR="$ci" \
                                                "${eg_pass[@]}" E2E_EGRESS=1 E2E_EGRESS_NPM="$npm" VESTIBULE_BIN="$rel/vestibule-mcp" \
                                                E2E_BACKEND="$backend" E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                                                timeout --kill-after=30 180 node "$e2e/run.mjs" egress-install.test.mjs \
                                                ${eg_more[@]+"${eg_more[@]}"} || rc=$?
                                else
                                        as_user "${eg_pass[@]}" E2E_EGRESS=1 E2E_EGRESS_NPM="$npm" VESTIBULE_BIN="$rel/vestibule-mcp" \
                                                E2E_BACKEND="$backend" E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                                                timeout --kill-after=30 180 node "$e2e/run.mjs" egress-install.test.mjs || rc=$?
                                fi
                                add_results "egress allowlist, $backend, npm=$npm ($extra)" "$res" "$rc"
                        done <<<"$E2E_RUNS"
                }
                eg_run 0
                if wait "$eg_npm_pid"; then
                        eg_run only
                else
                        cat "$ci/egress-npm.log" >&2
                        record_fail "egress: npm ci in tests/egress"
                fi
        fi
}
