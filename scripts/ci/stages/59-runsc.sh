# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/59-runsc.sh - the container backend on gVisor (issue 26 item 3): a second dockerd with
# Debian's runsc registered (scripts/runsc-engine.sh), VESTIBULE_CONTAINER_RUNTIME=runsc.
# Sourced by scripts/test.sh, which calls stage_e2e_runsc when the stage runs.

# The engine starts (its images loaded from the host's Docker once: the disk is kept between
# runs), `check` shows a kernel in between (under runsc the container's uname is 4.4.0 and its
# dmesg gVisor's Sentry banner; under runc, the control, the host's kernel and no Sentry), the
# server refuses a runtime the engine lacks and runsc registered without --network=none (its
# control), and the e2e files run through the SDK as the test user with only DOCKER_HOST, the
# image source and VESTIBULE_CONTAINER_RUNTIME=runsc from the client config, the grade reaching
# the model asserted exactly: run, sessions (refused under runsc, naming why) and warm (its spare
# tests skip, saying why), and shared-engine (two servers on the engine, one restarting: its
# sweep must not take the other's runtime check container, which carries its owner). Not among
# them: limits.test.mjs (its probes look for the run's processes in the host's /proc, where under
# gVisor there are none: they live in the Sentry) and workspace.test.mjs (two of its cases need
# a spare or a session; `ls /sandbox` answers EINVAL under gVisor). Then the cold print(1) wall (the result's usage line) p50 under runsc and runc.
# stage: e2e-runsc | build-release | run, sessions and warm on Docker with gVisor's runsc runtime (a second dockerd; root)
RUNSC_GRADE="container (runtime runsc: gVisor's kernel in between)"

# runsc_refusals BIN USER SOCK: a runtime the engine does not list, runsc registered without
# --network=none (refused before any container is made: no runsc process of it left on the
# engine's host), and Debian 12's runsc (runsc-old: statx breaks ls) are Blocked naming the
# fix; runsc itself runs (the control).
runsc_refusals() {
        local bin=$1 user=$2 sock=$3 rt out rc=0 before after
        for rt in nosuch runsc-netns runsc-old runsc; do
                # runsc's processes of this runtime on the engine's host (its root folder is
                # the exec root's runtime-NAME): a refused runsc start left its sandbox and gofer
                before=$(pgrep -fc -- "runtime-$rt/" || true)
                out=$(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/tmp/runsc-refusals \
                        DOCKER_HOST="unix://$sock" VESTIBULE_BACKEND=container VESTIBULE_IMAGE_SOURCE=debian \
                        VESTIBULE_CONTAINER_RUNTIME=$rt "$bin" run --language python -c 'print(6*7)' 2>&1 || true)
                case $rt in
                nosuch) grep -q "^Blocked: .*no runtime 'nosuch'.*Runtimes" <<<"$out" || {
                        echo "FAIL: runtime nosuch: $out"
                        rc=1
                } ;;
                runsc-netns) grep -q '^Blocked: .*--network=none.*daemon.json' <<<"$out" || {
                        echo "FAIL: runtime runsc-netns: $out"
                        rc=1
                }
                        after=$(pgrep -fc -- "runtime-$rt/" || true)
                        [ "$after" -le "$before" ] || {
                                echo "FAIL: runtime runsc-netns: the refusal left $((after - before)) runsc processes on the engine's host"
                                pgrep -fa -- "runtime-$rt/" | cut -c1-200
                                rc=1
                        } ;;
                runsc-old) grep -q "^Blocked: .*runtime 'runsc-old' fails coreutils' ls.*statx.*2023 or later" <<<"$out" || {
                        echo "FAIL: runtime runsc-old: $out"
                        rc=1
                } ;;
                runsc) if ! grep -q '^42$' <<<"$out" ||
                        ! grep -qxF "isolation: container (runtime runsc: gVisor's kernel in between)" <<<"$out"; then
                        echo "FAIL: runtime runsc: $out"
                        rc=1
                fi ;;
                esac
                [ "$rc" -ne 0 ] || echo "ok: runtime $rt: $(grep -E '^(Blocked|isolation)' <<<"$out" | cut -c1-160)"
        done
        return "$rc"
}

# runsc_bench BIN USER SOCK N: the cold print(1) wall (ms, the result's usage line; each a new
# server, so no spare) N times under runsc and under the engine's default runc: p50 of each.
runsc_bench() {
        local bin=$1 user=$2 sock=$3 n=$4 rt i w ws out
        for rt in runsc ""; do
                ws=()
                for i in $(seq "$n"); do
                        out=$(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/tmp/runsc-bench \
                                DOCKER_HOST="unix://$sock" VESTIBULE_BACKEND=container VESTIBULE_IMAGE_SOURCE=debian \
                                VESTIBULE_WARM=off ${rt:+VESTIBULE_CONTAINER_RUNTIME=$rt} \
                                "$bin" run --language python -c 'print(1)' 2>&1) || true # (step's bash -e)
                        w=$(sed -n 's/^usage: wall \([0-9]*\) ms.*/\1/p' <<<"$out")
                        # a measurement, not a test: a run without its usage line is shown and
                        # left out (the run, sessions and warm files above are the tests)
                        if [ -z "$w" ]; then
                                echo "note: run $i (runtime ${rt:-runc}) gave no usage line: $(head -c 300 <<<"$out")"
                                continue
                        fi
                        ws+=("$w")
                done
                [ "${#ws[@]}" -gt 0 ] || {
                        echo "FAIL: no run under runtime ${rt:-runc} gave a usage line"
                        return 1
                }
                echo "cold print(1) wall, runtime ${rt:-runc (default)}: p50 $(printf '%s\n' "${ws[@]}" | sort -n |
                        awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ms of ${#ws[@]} (${ws[*]})"
        done
}

# gvisor_old_runsc BIN USER OLD ROOTFS: the gvisor backend with Debian 12's runsc (OLD, bound over
# /usr/bin/runsc in a mount namespace of this check's own) is Blocked naming statx and the
# version to install; the installed runsc (the control) runs `ls -d /` with a gvisor grade.
gvisor_old_runsc() {
        local bin=$1 user=$2 old=$3 rootfs=$4 out rc=0
        local run=(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp
                VESTIBULE_BACKEND=gvisor VESTIBULE_ROOTFS_DIR="$rootfs"
                "$bin" run --language bash -c 'ls -d /')
        out=$(unshare -m sh -c 'mount --bind "$0" /usr/bin/runsc && exec "$@"' "$old" "${run[@]}" 2>&1 || true)
        if grep -q '^Blocked: this runsc (0.0~20221219[^)]*) answers statx(AT_NO_AUTOMOUNT) with EINVAL.*2023 or later' <<<"$out"; then
                echo "ok: Debian 12's runsc: $(grep '^Blocked' <<<"$out" | cut -c1-140)"
        else
                echo "FAIL: the gvisor backend with Debian 12's runsc: $out"
                rc=1
        fi
        out=$("${run[@]}" 2>&1 || true)
        if grep -qx / <<<"$out" && grep -q '^isolation: gvisor' <<<"$out"; then
                echo "ok: the installed runsc ($(runsc --version | head -n 1)): ls -d / runs, $(grep '^isolation' <<<"$out" | cut -c1-60)"
        else
                echo "FAIL: the gvisor backend with the installed runsc: $out"
                rc=1
        fi
        return "$rc"
}

stage_e2e_runsc() {
        local res rc=0 envs sock t0
        t0=$(date +%s)
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                banner "e2e on Docker with runsc: needs root, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        if [ ! -x /usr/bin/runsc ]; then
                record_fail "e2e-runsc: no /usr/bin/runsc: run scripts/test.sh --only packages (apt-get install runsc)"
                return 0
        fi
        local old=""
        old=$(vst_runsc_old /var/tmp/vestibule-runsc-old) ||
                record_fail "e2e-runsc: Debian 12's runsc (0.0~20221219) could not be fetched from the host's apt sources"
        if [ -n "$old" ]; then
                if step 120 "gvisor backend: Debian 12's runsc refused (statx), the installed one runs ls (control)" \
                        gvisor_old_runsc "$rel/vestibule-mcp" "$user" "$old" "$images/rootfs"; then
                        passed=$((passed + 1))
                else
                        record_fail "e2e-runsc: the gvisor backend's refusal of Debian 12's runsc, or its control"
                fi
        fi
        if ! RUNSC_OLD=$old step 600 "runsc engine: start" bash "$src/scripts/runsc-engine.sh" start ||
                ! step 120 "runsc engine: a kernel in between under runsc, the host's under runc (control)" \
                        bash "$src/scripts/runsc-engine.sh" check; then
                record_fail "e2e-runsc: the engine did not start or its check failed"
                bash "$src/scripts/runsc-engine.sh" stop --keep-disk >/dev/null 2>&1 || true
                return 0
        fi
        passed=$((passed + 1))
        envs=$(bash "$src/scripts/runsc-engine.sh" env)
        sock=${envs#DOCKER_HOST=unix://}
        if step 180 "runsc engine: refusals (runtime not listed; runsc without --network=none) and runsc's run" \
                runsc_refusals "$rel/vestibule-mcp" "$user" "$sock"; then
                passed=$((passed + 1))
        else
                record_fail "e2e-runsc: the server's refusals or its runsc run"
        fi
        res=$(mktemp "$ci/e2e-results.XXXXXX")
        chmod 0666 "$res"
        banner "e2e: Docker with runsc, grade '$RUNSC_GRADE'"
        (cd "$e2e" && as_user "$envs" VESTIBULE_IMAGE_SOURCE=debian VESTIBULE_CONTAINER_RUNTIME=runsc \
                VESTIBULE_BIN="$rel/vestibule-mcp" E2E_BACKEND=container E2E_EXPECT_GRADE="$RUNSC_GRADE" \
                E2E_RESULTS="$res" timeout --kill-after=30 900 node run.mjs run.test.mjs \
                sessions.test.mjs warm.test.mjs shared-engine.test.mjs) || rc=$?
        add_results "Docker with runsc" "$res" "$rc"
        if step 300 "runsc engine: cold print(1) p50, runsc and runc" \
                runsc_bench "$rel/vestibule-mcp" "$user" "$sock" 7; then
                passed=$((passed + 1))
        else
                record_fail "e2e-runsc: the cold print(1) measurement"
        fi
        # the disk (its two images) kept for the next run: loading them costs about 2 minutes
        bash "$src/scripts/runsc-engine.sh" stop --keep-disk >/dev/null 2>&1 || record_fail "e2e-runsc: the engine did not stop"
        printf 'e2e-runsc stage: %s s\n' "$(($(date +%s) - t0))"
}
