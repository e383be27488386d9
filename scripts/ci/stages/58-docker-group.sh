# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/58-docker-group.sh - the usual Ubuntu set-up: the server run by a user in the `docker`
# group against rootful Docker, no root, no VESTIBULE_RUN_AS (issue 23).
# Sourced by scripts/test.sh, which calls stage_e2e_docker_group when the stage runs.

# scripts/e2e-docker-group.sh makes the user vestibule-dg (in the docker group: a user of its own,
# so the test user of every other stage keeps no Docker access) and runs the e2e files through
# the SDK as that user, with only the client's default environment and the settings a client
# config gives: one-shot runs, sessions, warm spares, and the egress allowlist (pip, and npm
# when tests/egress has its packages from the egress-container stage), whose listener is a unix
# socket relayed inside the container (no setns into Docker's namespaces).
# stage: e2e-docker-group | build-release | run, sessions, warm and the egress allowlist as a docker-group user on rootful Docker, no RUN_AS (root)
stage_e2e_docker_group() {
        if [ "$is_root" -ne 1 ] || [ ! -S /var/run/docker.sock ] || [ ! -x "$rel/vestibule-mcp" ] ||
                [ "$npm_ok" -ne 1 ]; then
                banner "e2e as a docker-group user: needs root, rootful Docker, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        e2e_user_files "docker-group user, rootful Docker" e2e-docker-group.sh
        # issue 23 item 7: doctor, verify (its whole battery, egress probes included: 0 not
        # tested) and a run agree for that user (tests/e2e/agree.mjs, as scripts/agree.sh runs it)
        local res rc=0
        res=$(mktemp "$ci/e2e-results.XXXXXX")
        chmod 0666 "$res"
        AGREE_EXPECT_PICK=container AGREE_LABEL="docker-group user, rootful Docker" E2E_RESULTS="$res" \
                bash "$src/scripts/e2e-docker-group.sh" "$rel/vestibule-mcp" agree.mjs || rc=$?
        add_results "docker-group user: doctor, verify and a run agree" "$res" "$rc"
}
