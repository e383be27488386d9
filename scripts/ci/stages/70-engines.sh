# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/70-engines.sh - the grade agreement, native inside Docker, and namespaces inside each engine.
# Sourced by scripts/test.sh, which calls stage_agreement, stage_native_in_docker and stage_namespaces when the stage runs (scripts/ci/lib.sh: run_stage).

# In every environment this host has (scripts/agree.sh lists them: the test user natively with
# and without an engine, forced container with no engine, rootless Podman, root with Docker
# (forced and auto), rootful Podman, root without VESTIBULE_RUN_AS), `doctor --json`, `verify
# --json` and one run_code call through the server (tests/e2e/agree.mjs, Release build) must
# agree on the grade, and every probe it claims must hold.
# stage: agreement | build-release | doctor, verify and a run agree on the grade in every environment (scripts/agree.sh; root)
stage_agreement() {
        if [ "$is_root" -eq 1 ] && [ "$npm_ok" -eq 1 ] && [ -x "$rel/vestibule-mcp" ]; then
                if [ -f "$images/python.tar" ]; then
                        step 900 "images into rootful Podman" vst_import_images_podman "$images" ||
                                record_fail "importing the images into rootful Podman"
                        step 900 "images into the test user's rootless Podman" vst_import_images_rootless "$user" "$images" ||
                                record_fail "importing the images into rootless Podman"
                fi
                res=$(mktemp "$ci/agree-results.XXXXXX")
                rc=0
                step 3000 "grade agreement (scripts/agree.sh)" bash "$src/scripts/agree.sh" "$rel/vestibule-mcp" \
                        "$images" "$ci" "$user" "$res" || rc=$?
                add_results "grade agreement" "$res" "$rc"
        elif [ "$is_root" -ne 1 ]; then
                banner "grade agreement: not root (needs the test user and the engines), skipped"
                skipped=$((skipped + 1))
        else
                record_fail "grade agreement: no npm packages or no Release binary"
        fi
}

# A server inside a default `docker run`: doctor and a run both name Docker's seccomp profile
# (not the user-namespace sysctls) as why native is Blocked; with seccomp=unconfined the same
# binary runs code (the control). Issue 12, item 21. ~5 s.
# stage: native-in-docker | build-release | a server in a default docker run names the seccomp filter (root)
stage_native_in_docker() {
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ]; then
                banner "native in docker: needs root and the Release build, skipped"
                skipped=$((skipped + 1))
        else
                rc=0
                step 120 "native in docker: the seccomp filter named (scripts/native-in-docker.sh)" \
                        bash "$src/scripts/native-in-docker.sh" "$rel/vestibule-mcp" "$images/rootfs" || rc=$?
                case $rc in
                0) passed=$((passed + 1)) ;;
                77) skipped=$((skipped + 1)) ;;
                *) record_fail "native in docker: doctor or a run does not name the seccomp filter" ;;
                esac
        fi
}

# `vestibule-mcp verify` through the container backend on rootful Podman, rootful Docker and
# the test user's rootless Podman: the unshare and mount probes must hold on each (Podman through
# the seccomp profile the server derives from the engine's default). ~45 s.
# stage: namespaces | build-release | verify's unshare and mount probes hold on each engine (root)
stage_namespaces() {
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ]; then
                banner "namespaces in containers: needs root and the Release build, skipped"
                skipped=$((skipped + 1))
        else
                rc=0
                step 300 "namespaces in containers: verify on each engine (scripts/verify-namespaces.sh)" \
                        bash "$src/scripts/verify-namespaces.sh" "$rel/vestibule-mcp" "$user" || rc=$?
                case $rc in
                0) passed=$((passed + 1)) ;;
                77) skipped=$((skipped + 1)) ;;
                *) record_fail "namespaces in containers: unshare or mount not held, or verify could not run" ;;
                esac
        fi
}
