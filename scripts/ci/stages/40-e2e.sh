# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/40-e2e.sh - the end-to-end suite (tests/e2e: the real binary driven by the official MCP
# SDK clients) once per E2E_RUNS line (scripts/ci/config.sh), the root-only case and the remote
# engine. Sourced by scripts/test.sh: e2e_npm (npm ci) and e2e_grades (the expected grades)
# before the first of them, then e2e_lines STAGE for the stages of E2E_RUNS lines, stage_e2e_root and
# stage_e2e_remote (scripts/ci/lib.sh: run_stage).

# One stage per E2E_RUNS line (e2e_stage names it), each on the builds its line lists:
# stage: e2e-naive | build-release,build-debug | the e2e suite on the naive backend (grade none)
# stage: e2e-native | build-release,build-debug | the e2e suite on the native backend (needs the images)
# stage: e2e-gvisor | build-release | the e2e suite's isolation files on the gvisor backend (runsc rootless, as the test user)
# stage: e2e-container-rootless | build-release | the e2e suite on the test user's rootless Podman (root)
# stage: e2e-container-docker | build-release | the e2e suite on rootful Docker, sandboxes as the test user (root)
# stage: e2e-container-podman | build-release | the e2e suite on rootful Podman, sandboxes as the test user (root)
# stage: e2e-container-other | build-release | a container line of VESTIBULE_CI_E2E_RUNS naming no engine
# stage: e2e-root | build-release | a server started as root without VESTIBULE_RUN_AS (root)
# stage: e2e-remote | build-release | the container backend on Docker behind tcp://127.0.0.1 (plain and mutual TLS) and on rootful Podman's API on tcp://127.0.0.1 (root)
# e2e_stage BACKEND EXTRA: the stage name of one E2E_RUNS line.
e2e_stage() {
        case "$1:$2" in
        container:*DOCKER_HOST=unix:///run/user/*) echo e2e-container-rootless ;;
        container:*VESTIBULE_RUNTIME=docker*) echo e2e-container-docker ;;
        container:*VESTIBULE_RUNTIME=podman*) echo e2e-container-podman ;;
        container:*) echo e2e-container-other ;;
        *) echo "e2e-$1" ;;
        esac
}

# e2e_npm: npm ci in tests/e2e when a stage that drives it runs (npm_ok=1 after; the VM stage
# hands the same tree to its guest).
e2e=$src/tests/e2e
npm_ok=0
e2e_npm() {
        local wanted=0 backend extra s
        while IFS='|' read -r _ backend _ extra; do
                [ -z "$backend" ] || ! want "$(e2e_stage "$backend" "$extra")" || wanted=1
        done <<<"$E2E_RUNS"
        for s in e2e-root e2e-remote agreement clients e2e-data e2e-tmpfs egress-container e2e-docker-group e2e-desktop e2e-rootless-docker oci e2e-runsc vm; do want "$s" && wanted=1; done
        [ "$wanted" -eq 1 ] || return 0
        if { [ "$npm_kept" -eq 1 ] && banner "e2e: npm ci skipped (--quick: the lock is unchanged)"; } ||
                step 600 "e2e: npm ci" vst_npm_ci "$e2e"; then
                npm_ok=1
        else
                record_fail "e2e: npm ci"
        fi
}

# e2e_grades: the expected grade of every E2E_RUNS line with grade "doctor" whose stage runs (or
# that the clients, data and tmpfs stages reuse), derived side by side (grade_start; --quick started
# the native one before the unit suites) and kept (grade_collect) before stages run in
# subshells, which share them.
e2e_grades() {
        local backend grade extra b bin=""
        [ "$npm_ok" -eq 1 ] || return 0
        for b in "${built[@]}"; do [ -n "$bin" ] || bin=${b#*:}/vestibule-mcp; done
        [ -n "$bin" ] && [ -x "$bin" ] || return 0
        while IFS='|' read -r _ backend grade extra; do
                [ "$grade" = doctor ] || continue
                want "$(e2e_stage "$backend" "$extra")" || case $backend in
                naive | native) want clients || want e2e-data || want e2e-tmpfs ;;
                *) false ;;
                esac || continue
                [ -n "${grade_jobs["$backend|$extra"]:-}" ] || grade_start "$bin" "$backend" "$extra"
        done <<<"$E2E_RUNS"
        grade_collect
}

# e2e_images STAGE: the images the container e2e run of STAGE needs in its engine.
# Rootful Docker got its images from the setup stage. The container backend as the test
# user talks to its rootless Podman: `vestibule-mcp setup --from-tar` as that user imports the
# same tarballs there (its native half goes into a scratch folder, removed after).
# Side by side, Docker's run waits for the two Podman imports (each stage marks its own done,
# "$ci/.images-STAGE.$$"; at most 600 s): their disk writes once made a Docker create miss its
# 30 s bound at the group's start, and Docker's is the group's shortest run, so the wait costs
# the group nothing.
e2e_images() {
        local s waited=0
        if [ "$1" = e2e-container-docker ] && [ "$parallel" = 1 ]; then
                for s in e2e-container-rootless e2e-container-podman; do
                        want "$s" && stage_has_work "$s" || continue
                        while [ ! -e "$ci/.images-$s.$$" ] && [ "$waited" -lt 600 ]; do
                                sleep 2
                                waited=$((waited + 2))
                        done
                done
                [ "$waited" -eq 0 ] || banner "e2e Docker: started after the Podman image imports (${waited} s)"
        fi
        e2e_images_import "$1"
        : >"$ci/.images-$1.$$"
}
e2e_images_import() {
        if [ "$1" = e2e-container-rootless ] && [ "$is_root" -eq 1 ] &&
                grep -q '|container|.*DOCKER_HOST=unix:///run/user/' <<<"$E2E_RUNS" && [ -f "$images/python.tar" ]; then
                step 900 "images into the test user's rootless Podman (setup --from-tar)" \
                        vst_setup_rootless "$rel/vestibule-mcp" "$images" "$ci/setup-rootless" "$user" ||
                        record_fail "importing the images into rootless Podman"
        fi
        if [ "$1" = e2e-container-podman ] && [ "$is_root" -eq 1 ] &&
                grep -q '|container|.*E2E_AS=root.*VESTIBULE_RUNTIME=podman' <<<"$E2E_RUNS" && [ -f "$images/python.tar" ]; then
                step 900 "images into rootful Podman" vst_import_images_podman "$images" ||
                        record_fail "importing the images into rootful Podman"
        fi
}

# e2e_lines STAGE: the E2E_RUNS lines of STAGE, on each build they list.
e2e_lines() {
        local stage=$1 b type bin run_builds backend grade extra eng
        [ "$npm_ok" -eq 1 ] || return 0 # e2e_prepare recorded why
        e2e_images "$stage"
        for b in "${built[@]}"; do
                type=${b%%:*}
                bin=${b#*:}/vestibule-mcp
                if [ ! -x "$bin" ]; then
                        record_fail "e2e $type: $bin was not built"
                        continue
                fi
                while IFS='|' read -r run_builds backend grade extra; do
                        [ -n "$backend" ] || continue
                        case ",$run_builds," in *",$type,"*) ;; *) continue ;; esac
                        case ",$builds," in *",$type,"*) ;; *) continue ;; esac
                        [ "$(e2e_stage "$backend" "$extra")" = "$stage" ] || continue
                        need_user "e2e $backend" || continue
                        case "$extra" in
                        *"VESTIBULE_ROOTFS_DIR=$images/rootfs"*) [ "$selected" -eq 0 ] || need_images "e2e $backend" || continue ;;
                        esac
                        case "$extra" in
                        *DOCKER_HOST=unix:///run/user/*) eng=" on rootless Podman" ;;
                        *VESTIBULE_RUNTIME=docker*) eng=" on Docker" ;;
                        *VESTIBULE_RUNTIME=podman*) eng=" on rootful Podman" ;;
                        *) eng="" ;;
                        esac
                        resolve_grade "$bin" "$backend" "$grade" "$extra" || continue
                        run_e2e "$type, backend $backend$eng" "$bin" "$backend" "$resolved" "$extra"
                done <<<"$E2E_RUNS"
        done
}

# The one case that needs root: a server started as root without VESTIBULE_RUN_AS.
stage_e2e_root() {
        if [ "$npm_ok" -eq 1 ] && [ "$is_root" -eq 1 ] && [ -x "$rel/vestibule-mcp" ] && need_user "e2e as root"; then
                res=$(mktemp "$ci/e2e-results.XXXXXX")
                banner "e2e: as root (Release, naive)"
                rc=0
                env E2E_RUN_AS="$(id -u "$user"):$(id -g "$user")" VESTIBULE_BIN="$rel/vestibule-mcp" \
                        E2E_BACKEND=naive E2E_RESULTS="$res" \
                        timeout --kill-after=30 300 node "$e2e/run.mjs" root.test.mjs || rc=$?
                add_results "as root" "$res" "$rc"
        fi
}

# A remote engine: the same Docker behind a loopback-only TCP front
# (tests/tools/engine-forward.mjs), so the server sees tcp://127.0.0.1:PORT and must hand
# code and workspace in through volumes (docs/remote-engines.md). The run and workspace
# files, server as root with VESTIBULE_RUN_AS as in the Docker run above (sessions on the volume
# path run in e2e-desktop, as the user a Desktop user is: 100-135 s that this group's longest
# stage would add again for the same code). Beside it (issue 23
# item 3), the same path on the set-ups a user reaches it by: Docker behind a mutual-TLS
# front (DOCKER_TLS_VERIFY + DOCKER_CERT_PATH, certificates made by
# tests/tools/make-test-certs.sh): run.test.mjs; and rootful Podman's own API served on a
# loopback TCP port (`podman system service tcp:127.0.0.1:PORT`): workspace.test.mjs and
# usage.test.mjs (libpod's stats stream; a symlink in the workspace).
stage_e2e_remote() {
        if [ "$npm_ok" -eq 1 ] && [ "$is_root" -eq 1 ] && [ -x "$rel/vestibule-mcp" ] &&
                { [ "$selected" -eq 0 ] || need_engine /var/run/docker.sock "e2e remote engine"; } &&
                [ -S /var/run/docker.sock ]; then
                banner "e2e: remote engine (Release, container, Docker behind tcp://127.0.0.1)"
                local side_pids=() side
                remote_tls_start && side_pids+=($!)
                remote_podman_start && side_pids+=($!)
                fwd_log=$ci/engine-forward.log fwd_port=$ci/engine-forward.port
                rm -f "$fwd_log" "$fwd_port"
                node "$src/tests/tools/engine-forward.mjs" --socket /var/run/docker.sock \
                        --log "$fwd_log" >"$fwd_port" &
                fwd_pid=$!
                for _ in $(seq 100); do [ -s "$fwd_port" ] && break; sleep 0.1; done
                port=$(awk '/^port /{print $2}' "$fwd_port")
                if [ -z "$port" ]; then
                        record_fail "e2e remote engine: the loopback front did not start"
                else
                        res=$(mktemp "$ci/e2e-results.XXXXXX")
                        rc=0
                        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TMPDIR="$ci" \
                                VESTIBULE_RUN_AS="$(id -u "$user" 2>/dev/null || echo 2000):$(id -g "$user" 2>/dev/null || echo 2000)" \
                                VESTIBULE_RUNTIME=docker VESTIBULE_IMAGE_SOURCE=debian \
                                DOCKER_HOST="tcp://127.0.0.1:$port" VESTIBULE_BIN="$rel/vestibule-mcp" \
                                E2E_BACKEND=container E2E_EXPECT_GRADE=container E2E_RESULTS="$res" \
                                timeout --kill-after=30 900 node "$e2e/run.mjs" run.test.mjs \
                                workspace.test.mjs files.test.mjs usage.test.mjs || rc=$?
                        add_results "remote engine" "$res" "$rc"
                        # the runs went through the front, not a socket found on the side
                        grep -q '^conn$' "$fwd_log" 2>/dev/null ||
                                record_fail "e2e remote engine: nothing connected through tcp://127.0.0.1:$port"
                fi
                kill "$fwd_pid" 2>/dev/null || true
                wait "$fwd_pid" 2>/dev/null || true
                for side in "${side_pids[@]}"; do wait "$side" 2>/dev/null || true; done
                remote_side_results
        fi
}

# The e2e runner as the remote stage's root server, on endpoint $1 with grade $2 and the extra
# variables in $3 (space-separated NAME=VALUE), the files after; results into $ci/remote-$4.*
remote_side_run() {
        local host=$1 grade=$2 extra=$3 tag=$4 vars=()
        shift 4
        read -r -a vars <<<"$extra"
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TMPDIR="$ci" \
                VESTIBULE_RUN_AS="$(id -u "$user" 2>/dev/null || echo 2000):$(id -g "$user" 2>/dev/null || echo 2000)" \
                VESTIBULE_IMAGE_SOURCE=debian DOCKER_HOST="$host" "${vars[@]}" \
                VESTIBULE_BIN="$rel/vestibule-mcp" E2E_BACKEND=container E2E_EXPECT_GRADE="$grade" \
                E2E_RESULTS="$ci/remote-$tag.res" \
                timeout --kill-after=30 600 node "$e2e/run.mjs" "$@" >"$ci/remote-$tag.log" 2>&1
        echo $? >"$ci/remote-$tag.rc"
}

# Docker behind a mutual-TLS front: started in the background ($! is the run's job).
remote_tls_start() {
        local certs=$ci/remote-tls-certs log=$ci/remote-tls-forward.log portf=$ci/remote-tls.port p
        rm -rf "$certs" "$log" "$portf" "$ci"/remote-tls.*
        command -v openssl >/dev/null || { banner "e2e remote TLS: no openssl, not run"; return 1; }
        mkdir -p "$certs"
        sh "$src/tests/tools/make-test-certs.sh" "$certs" >/dev/null 2>&1 ||
                { record_fail "e2e remote TLS: make-test-certs.sh failed"; return 1; }
        (
                node "$src/tests/tools/engine-forward.mjs" --socket /var/run/docker.sock \
                        --tls "$certs" --log "$log" >"$portf" &
                fpid=$!
                for _ in $(seq 100); do [ -s "$portf" ] && break; sleep 0.1; done
                p=$(awk '/^port /{print $2}' "$portf")
                if [ -n "$p" ]; then
                        remote_side_run "tcp://127.0.0.1:$p" container \
                                "VESTIBULE_RUNTIME=docker DOCKER_TLS_VERIFY=1 DOCKER_CERT_PATH=$certs" \
                                tls run.test.mjs
                else
                        echo 1 >"$ci/remote-tls.rc"
                fi
                kill "$fpid" 2>/dev/null
                wait "$fpid" 2>/dev/null
        ) &
}

# Rootful Podman's own API on a loopback TCP port (its service beside the unix one CI uses),
# with the images imported there: started in the background ($! is the run's job).
remote_podman_start() {
        local p
        rm -f "$ci"/remote-podman.*
        command -v podman >/dev/null && [ -f "$images/python.tar" ] ||
                { banner "e2e remote Podman: no podman or no image tarballs, not run"; return 1; }
        (
                vst_import_images_podman "$images" >"$ci/remote-podman-import.log" 2>&1
                p=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
                podman --cgroup-manager=cgroupfs --events-backend=file --runtime runc \
                        system service --time=0 "tcp:127.0.0.1:$p" >"$ci/remote-podman-service.log" 2>&1 </dev/null &
                spid=$!
                for _ in $(seq 100); do curl -fs "http://127.0.0.1:$p/_ping" >/dev/null 2>&1 && break; sleep 0.1; done
                remote_side_run "tcp://127.0.0.1:$p" \
                        "container-degraded (namespaces not blocked: the Podman engine is remote: its seccomp profile files are not on this host)" \
                        "" podman workspace.test.mjs usage.test.mjs
                kill "$spid" 2>/dev/null
                wait "$spid" 2>/dev/null
        ) &
}

# The side runs' reports after the main one's.
remote_side_results() {
        local tag label
        for tag in tls podman; do
                [ -e "$ci/remote-$tag.rc" ] || continue
                case $tag in
                tls) label="remote engine, Docker behind mutual TLS" ;;
                podman) label="remote engine, rootful Podman on tcp://127.0.0.1" ;;
                esac
                banner "e2e: $label"
                cat "$ci/remote-$tag.log" 2>/dev/null || true
                [ -e "$ci/remote-$tag.res" ] || : >"$ci/remote-$tag.res"
                add_results "$label" "$ci/remote-$tag.res" "$(cat "$ci/remote-$tag.rc")"
        done
        # the TLS runs went through the front with a client certificate
        if [ -e "$ci/remote-tls.rc" ] && ! grep -q '^conn$' "$ci/remote-tls-forward.log" 2>/dev/null; then
                record_fail "e2e remote TLS: nothing connected through the TLS front"
        fi
}
