# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/57-rootless-docker.sh - rootless Docker as a user runs it (issue 23 item 7c): Debian's
# dockerd-rootless.sh (docker.io contrib + rootlesskit + slirp4netns) started by hand as the user
# vestibule-rl (scripts/rootless-docker.sh: its own XDG_RUNTIME_DIR and subordinate ids; no
# systemd here), the sandbox images loaded from the host's Docker, and the e2e files run through
# the SDK as that user with only DOCKER_HOST from the client config (scripts/e2e-rootless-docker.sh).
# Sourced by scripts/test.sh, which calls stage_e2e_rootless_docker when the stage runs.
# On this cgroup v1 host rootless Docker applies no limits (Docker's rootless mode needs cgroup
# v2 for them); the grade says so and the limit tests skip with that reason.
# stage: e2e-rootless-docker | build-release | run, sessions, warm, files, usage and the egress allowlist on rootless Docker as its own user, no root, no RUN_AS (root)
stage_e2e_rootless_docker() {
        local rl=$src/scripts/rootless-docker.sh
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ] ||
                [ ! -e /usr/share/docker.io/contrib/dockerd-rootless.sh ]; then
                banner "e2e on rootless Docker: needs root, docker.io's dockerd-rootless.sh, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        if ! step 400 "rootless Docker: start (and load the images)" bash "$rl" start ||
                ! step 60 "rootless Docker: docker info says rootless, dockerd runs as its user" bash "$rl" check; then
                record_fail "e2e-rootless-docker: rootless Docker did not start or its check failed"
                bash "$rl" stop >/dev/null 2>&1 || true
                return 0
        fi
        passed=$((passed + 1))
        e2e_user_files "rootless Docker" e2e-rootless-docker.sh
        bash "$rl" stop >/dev/null 2>&1 || record_fail "e2e-rootless-docker: rootless Docker did not stop"
}
