# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# scripts/ci/lib.sh - what every stage of scripts/test.sh uses: the registry of stages (the
# "# stage:" lines of scripts/ci/stages/*.sh), the counters and the summary line, step (a
# bounded, bannered command), as_user, the prerequisite checks, and the stage runner that runs
# independent stages side by side (run_group: each in a subshell with its output kept in
# $ci/logs/STAGE.log and replayed when the group ends, its counts added to the totals).
# Sourced by scripts/test.sh; not a program of its own.

# stage_lines: the registry, "NAME|NEEDS|WHAT" one a line, read from the stage files' "# stage:"
# comments in file order.
stage_lines() {
        sed -n 's/^# stage: *\([^ |]*\) *| *\([^|]*[^ |]\) *| *\(.*\)$/\1|\2|\3/p' "$stages_dir"/*.sh
}

# is_stage PATTERN: some stage's name matches PATTERN.
is_stage() {
        local name _
        while IFS='|' read -r name _; do
                # shellcheck disable=SC2053 # $1 is a pattern on purpose
                [[ $name == $1 ]] && return 0
        done < <(stage_lines)
        return 1
}

# want NAME: whether stage NAME runs (every stage when no --only/--skip/--quick was given).
want() {
        local p
        if [ "${#only[@]}" -gt 0 ]; then
                for p in "${only[@]}"; do
                        # shellcheck disable=SC2053 # $p is a pattern on purpose
                        [[ $1 == $p ]] && return 0
                done
                return 1
        fi
        for p in "${skip[@]}"; do
                # shellcheck disable=SC2053
                [[ $1 == $p ]] && return 1
        done
        return 0
}

# needed BUILD: whether a stage that runs needs build-BUILD (release, debug) by its NEEDS.
needed() {
        local name needs _
        while IFS='|' read -r name needs _; do
                case ",$needs," in *",build-$1,"*) want "$name" && return 0 ;; esac
        done < <(stage_lines)
        return 1
}

passed=0 failed=0 skipped=0
failures=()
started=$(date +%s)

banner() {
        printf '\n========== %s  [%s, +%ss]\n' "$*" "$(date -u +%H:%M:%S)" "$(($(date +%s) - started))"
}

# record_fail WHAT: one failure that is not a test count (a build, a crashed runner).
record_fail() {
        failed=$((failed + 1))
        failures+=("$1")
        printf 'FAILED: %s\n' "$1" >&2
}

finish() {
        local total=$(($(date +%s) - started))
        banner "summary (${total}s)"
        if [ "${#stage_times[@]}" -gt 0 ]; then
                printf 'stage times (s, wall clock; * ran beside other stages):'
                printf ' %s' "${stage_times[@]}"
                printf '\n'
        fi
        if [ "${#failures[@]}" -gt 0 ]; then
                printf 'failures:\n'
                printf '  %s\n' "${failures[@]}"
        fi
        printf 'total: %d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
        # a selection of set-up stages (--only packages) counts nothing and can pass
        if [ "$failed" -gt 0 ] || { [ "$passed" -eq 0 ] && [ "$selected" -eq 0 ]; }; then
                exit 1
        fi
        exit 0
}

# step SECONDS NAME CMD...: run CMD (a command, or a function of this script, which then runs
# in a child bash: timeout cannot run a function) with a banner and a hard timeout; returns
# its status.
step() {
        local secs=$1 name=$2 rc=0
        shift 2
        banner "$name"
        if declare -F "$1" >/dev/null; then
                timeout --kill-after=30 "$secs" bash -euo pipefail -c "$(declare -f "$1"); $1 \"\$@\"" "$1" "${@:2}" || rc=$?
        else
                timeout --kill-after=30 "$secs" "$@" || rc=$?
        fi
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
                printf '%s: timed out after %ss\n' "$name" "$secs" >&2
        fi
        return "$rc"
}

# as_user CMD...: run CMD as the unprivileged test user (as root) or as yourself, with a clean
# environment plus the variables the suite needs.
# (as_user_in: a command that runs the rest, e.g. in a namespace of its own; empty by default)
as_user_in=()
as_user() {
        if [ "$is_root" -eq 1 ]; then
                local uid home
                uid=$(id -u "$user")
                home=$(getent passwd "$user" | cut -d: -f6)
                "${as_user_in[@]}" runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" \
                        USER="$user" LOGNAME="$user" LANG=C.UTF-8 XDG_RUNTIME_DIR="/run/user/$uid" \
                        TMPDIR=/tmp "$@"
        else
                env "$@"
        fi
}

# need_user / need_images WHAT / need_engine SOCKET WHAT: the prerequisites an earlier stage
# makes, checked before a stage that was run alone relies on them; on a miss: record_fail with
# the stage (or command) that makes it, and status 1.
need_user() {
        [ "$is_root" -eq 0 ] || id "$user" >/dev/null 2>&1 && return 0
        record_fail "$1: the test user '$user' does not exist: run scripts/test.sh --only user"
        return 1
}
need_images() {
        [ -d "$images/rootfs/python" ] && return 0
        record_fail "$1: no sandbox images in $images/rootfs: run scripts/test.sh --only images (as root), or vestibule-mcp setup with VESTIBULE_ROOTFS_DIR=$images/rootfs"
        return 1
}
need_engine() {
        [ -S "$1" ] && return 0
        record_fail "$2: no container engine at $1: run scripts/test.sh --only engines (as root)"
        return 1
}

# build_incremental SRC DIR TYPE JOBS: configure DIR when it is not yet, then build what
# changed (the builds a stage run alone needs; the build stages start from scratch).
# shellcheck disable=SC2317 # run by step in a child bash
build_incremental() {
        local src=$1 dir=$2 type=$3 jobs=$4
        [ -f "$dir/CMakeCache.txt" ] || cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE="$type"
        cmake --build "$dir" -j"$jobs"
        chmod -R a+rX "$dir"
}


# run_ctest DIR: ctest with its counts added to the totals.
run_ctest() {
        local dir=$1 log rc=0 line total nfail sel=(-j1)
        # --quick: the fast suites four at a time (mostly waiting on sandboxes' start-up)
        [ "$quick" -eq 0 ] || sel=(-j4 -R "$QUICK_UNITS")
        # The Debug build leaves out test_setup_engine: image imports into every engine, which
        # the Release run covers and which take the sanitizers nowhere new (286 s at load 5).
        [ "$quick" -eq 1 ] || [ "$dir" != "$dbg" ] || sel+=(-E '^test_setup_engine$')
        log=$(mktemp)
        # The suites' scratch folders (sbx_test_tmpdir: $TMPDIR) on a tmpfs, apart from the images
        # in /var/tmp, as /tmp is on Debian 13, Fedora and Arch: a test that links or renames
        # between them fails here as it would there (issue 24). /dev/shm, not a tmpfs mounted
        # now: rootless Podman keeps the mount namespace it started in and would not see a new
        # mount (seen: "mkdir ...: permission denied" from its volume set-up).
        local tmp=${TMPDIR:-/tmp} tmpfs=""
        if [ "$unit_tmpfs" = 1 ] && [ "$is_root" -eq 1 ] && [ "$(findmnt -no FSTYPE /dev/shm 2>/dev/null)" = tmpfs ] &&
                ! findmnt -no OPTIONS /dev/shm | grep -qw noexec; then
                tmpfs=$(mktemp -d /dev/shm/vestibule-ci-units.XXXXXX) && chmod 1777 "$tmpfs" && tmp=$tmpfs
        fi
        (
                cd "$dir"
                TMPDIR=$tmp SBX_TEST_MUST_RUN=$must_run SBX_TEST_USER=$user \
                        timeout --kill-after=30 2400 ctest --output-on-failure --timeout 900 "${sel[@]}"
        ) 2>&1 | tee "$log" || rc=$?
        [ -z "$tmpfs" ] || rm -rf "$tmpfs" || true
        # "100% tests passed, 0 tests failed out of 9"
        line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
        if [ -n "$line" ]; then
                total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
                nfail=$(sed -E 's/.* ([0-9]+) tests? failed.*/\1/' <<<"$line")
                local nskip
                nskip=$(grep -c -- '\*\*\*Skipped\|Not Run (Disabled)' "$log" || true)
                passed=$((passed + total - nfail - nskip))
                skipped=$((skipped + nskip))
                failed=$((failed + nfail))
                [ "$nfail" -eq 0 ] || failures+=("ctest in $dir: $nfail failed")
        elif grep -q 'No tests were found' "$log"; then
                record_fail "ctest in $dir found no tests"
        else
                record_fail "ctest in $dir ended without a summary (status $rc)"
        fi
        rm -f "$log"
}
# grade_derive BIN BACKEND EXTRA_ENV: print the grade tests/e2e/expected-grade.mjs takes from
# BIN's doctor --json in an E2E_RUNS line's own environment (as the test user, or as root for
# E2E_AS=root) and checks against the kernel facts; status 1 when doctor does not fit them.
# grade_start runs it in the background (resolve_grade, in the e2e section, collects it):
# --quick starts the e2e run's before the unit suites, so doctor's engine probes (20-25 s at
# load 30, mostly waiting) overlap them.
declare -A grade_cache=() grade_jobs=() grade_files=()
grade_derive() {
        local extra=() env=() as=user v
        read -r -a extra <<<"$3"
        for v in "${extra[@]}"; do
                if [ "$v" = E2E_AS=root ]; then as=root; else env+=("$v"); fi
        done
        if [ "$as" = root ]; then
                env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TMPDIR="$ci" \
                        "${env[@]}" VESTIBULE_BIN="$1" timeout 600 node "$src/tests/e2e/expected-grade.mjs" "$2"
        else
                as_user "${env[@]}" VESTIBULE_BIN="$1" timeout 600 node "$src/tests/e2e/expected-grade.mjs" "$2"
        fi
}
grade_start() { # BIN BACKEND EXTRA_ENV
        local key="$2|$3" f
        f=$(mktemp "$ci/grade.XXXXXX")
        grade_files[$key]=$f
        grade_derive "$@" >"$f.out" 2>"$f.err" &
        grade_jobs[$key]=$!
}
# run_e2e LABEL BIN BACKEND GRADE EXTRA_ENV (as the test user)
run_e2e() {
        local label=$1 bin=$2 backend=$3 grade=$4 extra=() env=() as=user v res rc=0 files=()
        local side=() res2 log2 pid2="" rc2=0
        read -r -a extra <<<"$5"
        [ "$quick" -eq 0 ] || read -r -a files <<<"$QUICK_E2E"
        # the gvisor run: its isolation files only (config.sh, E2E_GVISOR_FILES)
        [ "$backend" != gvisor ] || read -r -a files <<<"$E2E_GVISOR_FILES"
        for v in "${extra[@]}"; do
                if [ "$v" = E2E_AS=root ]; then as=root; else env+=("$v"); fi
        done
        res=$(mktemp "$ci/e2e-results.XXXXXX")
        chmod 0666 "$res"
        banner "e2e: $label"
        if [ "$quick" -eq 1 ] && [ "$as" = user ]; then
                # --quick: the files without wall-clock bounds in a second runner at the
                # same time (its report follows the first's)
                read -r -a side <<<"$QUICK_E2E_SIDE"
                res2=$(mktemp "$ci/e2e-results.XXXXXX")
                log2=$(mktemp "$ci/e2e-log.XXXXXX")
                chmod 0666 "$res2"
                as_user "${env[@]}" VESTIBULE_BIN="$bin" E2E_BACKEND="$backend" \
                        E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res2" \
                        timeout --kill-after=30 1500 node "$e2e/run.mjs" "${side[@]}" >"$log2" 2>&1 &
                pid2=$!
        fi
        if [ "$as" = root ]; then
                # a server started as root (its sandboxes run as VESTIBULE_RUN_AS)
                env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
                        TMPDIR="$ci" "${env[@]}" VESTIBULE_BIN="$bin" E2E_BACKEND="$backend" \
                        E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                        timeout --kill-after=30 1500 node "$e2e/run.mjs" "${files[@]}" ||
                        rc=$?
        else
                as_user "${env[@]}" VESTIBULE_BIN="$bin" E2E_BACKEND="$backend" \
                        E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                        timeout --kill-after=30 1500 node "$e2e/run.mjs" "${files[@]}" ||
                        rc=$?
        fi
        add_results "$label" "$res" "$rc"
        if [ -n "$pid2" ]; then
                wait "$pid2" || rc2=$?
                cat "$log2"
                rm -f "$log2"
                add_results "$label (${side[*]})" "$res2" "$rc2"
        fi
}
# resolve_grade BIN BACKEND GRADE EXTRA_ENV: sets $resolved to GRADE, or for "doctor" to
# what grade_derive printed (started early by --quick, else now); once per backend and
# environment. Status 1 (a failure recorded) when doctor does not fit the facts.
resolve_grade() {
        local key="$2|$4" rc=0
        resolved=$3
        [ "$resolved" = doctor ] || return 0
        if [ -z "${grade_cache[$key]+set}" ]; then
                [ -n "${grade_jobs[$key]:-}" ] || grade_start "$1" "$2" "$4"
                wait "${grade_jobs[$key]}" || rc=$?
                grade_cache[$key]=$(cat "${grade_files[$key]}.out")
                cat "${grade_files[$key]}.err" >&2
                rm -f "${grade_files[$key]}" "${grade_files[$key]}.out" "${grade_files[$key]}.err"
                [ "$rc" -eq 0 ] || grade_cache[$key]=""
        fi
        resolved=${grade_cache[$key]}
        [ -n "$resolved" ] && return 0
        record_fail "the expected grade of backend $2 ($4): doctor --json does not fit the kernel facts (tests/e2e/expected-grade.mjs, above)"
        return 1
}
# add_results LABEL FILE STATUS: add a run.mjs counts file to the totals.
add_results() {
        local label=$1 res=$2 rc=$3 p f s
        if [ -s "$res" ]; then
                read -r p f s < <(node -e 'const c=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"));console.log(c.passed,c.failed,c.skipped)' "$res")
                passed=$((passed + p))
                failed=$((failed + f))
                skipped=$((skipped + s))
                # the failed tests by name (run.mjs's counts file lists them)
                [ "$f" -eq 0 ] || failures+=("e2e $label: $f failed: $(node -e 'console.log((JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).failures||[]).join("; "))' "$res")")
                [ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || record_fail "e2e $label: runner exited $rc"
        else
                record_fail "e2e $label: no results (status $rc)"
        fi
        rm -f "$res"
}
# e2e_user_files LABEL SCRIPT: the e2e files of the stages whose e2e runs as a user of its own
# on an engine of its own kind (e2e-rootless-docker, e2e-docker-group): scripts/SCRIPT with the
# Release build, run, sessions, warm, files, usage and the egress allowlist (pip; npm when
# tests/egress has its packages from the egress-container stage), counted under LABEL.
e2e_user_files() {
        local label=$1 script=$2 res rc=0 npm=0
        [ ! -d "$src/tests/egress/node_modules" ] || npm=1
        res=$(mktemp "$ci/e2e-results.XXXXXX")
        chmod 0666 "$res"
        banner "e2e: $label, no RUN_AS (npm=$npm)"
        E2E_RESULTS="$res" E2E_EGRESS_NPM="$npm" bash "$src/scripts/$script" "$rel/vestibule-mcp" \
                run.test.mjs sessions.test.mjs warm.test.mjs files.test.mjs usage.test.mjs egress.test.mjs \
                egress-install.test.mjs || rc=$?
        add_results "$label" "$res" "$rc"
}
# grade_collect: wait for the grade_derive jobs grade_start began and keep what each printed
# (grade_cache; "" when doctor did not fit the facts: resolve_grade records that failure when a
# stage asks). Run before stages go side by side: a subshell cannot wait for its parent's jobs.
grade_collect() {
        local key rc
        for key in "${!grade_jobs[@]}"; do
                [ -z "${grade_cache[$key]+set}" ] || continue
                rc=0
                wait "${grade_jobs[$key]}" || rc=$?
                grade_cache[$key]=$(cat "${grade_files[$key]}.out")
                cat "${grade_files[$key]}.err" >&2
                rm -f "${grade_files[$key]}" "${grade_files[$key]}.out" "${grade_files[$key]}.err"
                [ "$rc" -eq 0 ] || grade_cache[$key]=""
        done
}

# ---------------------------------------------------------------------------- the stage runner
# run_stage NAME: run one stage in this shell (stage_NAME of its file, the e2e runs of
# E2E_RUNS by e2e_lines) and keep its wall-clock time for the summary.
declare -A stage_pid=()
stage_times=()
run_stage() {
        local name=$1 t0 fn
        t0=$(date +%s)
        fn=stage_${name//-/_}
        case $name in
        e2e-naive | e2e-native | e2e-gvisor | e2e-container-*) e2e_lines "$name" ;;
        *) "$fn" ;;
        esac
        stage_times+=("$name=$(($(date +%s) - t0))")
}

# stage_spawn NAME: run_stage NAME in a subshell, its output in $ci/logs/NAME.log and its
# counts, failures and time in $ci/logs/NAME.counts (stage_join reads them).
stage_spawn() {
        local name=$1 log=$ci/logs/$1.log counts=$ci/logs/$1.counts
        mkdir -p "$ci/logs"
        rm -f "$log" "$counts"
        banner "$name: started beside other stages (output: $log, shown when it ends)"
        (
                passed=0 failed=0 skipped=0 failures=() stage_times=()
                run_stage "$name"
                {
                        printf '%s %s %s %s\n' "$passed" "$failed" "$skipped" "${stage_times[0]#*=}"
                        [ "${#failures[@]}" -eq 0 ] || printf '%s\n' "${failures[@]}"
                } >"$counts"
        ) >"$log" 2>&1 </dev/null &
        stage_pid[$name]=$!
}

# stage_join NAME: wait for a spawned stage, replay its output, add its counts to the totals.
stage_join() {
        local name=$1 log=$ci/logs/$1.log counts=$ci/logs/$1.counts rc=0 p f s t more=()
        wait "${stage_pid[$name]}" || rc=$?
        unset "stage_pid[$name]"
        banner "$name: its output (it ran beside other stages)"
        cat "$log"
        if [ -s "$counts" ]; then
                read -r p f s t <"$counts"
                passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
                mapfile -t -s 1 more <"$counts"
                [ "${#more[@]}" -eq 0 ] || failures+=("${more[@]}")
                stage_times+=("$name=${t}*")
        else
                record_fail "$name: the stage ended without its counts (status $rc; $log)"
        fi
}

# stage_has_work NAME: false for an e2e stage of no E2E_RUNS line (e2e-container-other, usually).
stage_has_work() {
        local backend extra
        case $1 in e2e-naive | e2e-native | e2e-container-*) ;; *) return 0 ;; esac
        while IFS='|' read -r _ backend _ extra; do
                [ -z "$backend" ] || [ "$(e2e_stage "$backend" "$extra")" != "$1" ] || return 0
        done <<<"$E2E_RUNS"
        return 1
}

# run_group NAME...: the wanted stages among NAME..., side by side when there are several and
# VESTIBULE_CI_PARALLEL is not 0 (each then in its own subshell: stage_spawn), else one after
# the other in this shell. Only stages that need nothing from each other share a group.
run_group() {
        local n todo=()
        for n in "$@"; do want "$n" && stage_has_work "$n" && todo+=("$n"); done
        if [ "${#todo[@]}" -lt 2 ] || [ "$parallel" = 0 ]; then
                for n in ${todo[@]+"${todo[@]}"}; do run_stage "$n"; done
                return 0
        fi
        for n in "${todo[@]}"; do stage_spawn "$n"; done
        for n in "${todo[@]}"; do stage_join "$n"; done
}
