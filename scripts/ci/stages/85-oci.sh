# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/85-oci.sh - the server as an OCI image (issue 25, items 1-3): tests/package/oci.sh
# builds the image from the Release build (scripts/oci-image.sh --from-build: Debian's libraries
# by mmdebstrap from the mirror apt uses, about 25 s of download), loads it into this host's
# Docker, runs tests/e2e/oci.test.mjs through `docker run -i` of it as the docker-group user,
# `setup --from-tar` inside it (a sandbox image into the engine through its API), the same e2e
# file on the Docker Desktop stand-in as the test user, and install-client --docker/--wsl read
# back by `claude mcp list` (tests/clients' pinned CLI, when its node_modules are there).
# Sourced by scripts/test.sh, which calls stage_oci when the stage runs.
# stage: oci | build-release | the server image: < 40 MB, e2e through docker run -i (docker group, Desktop stand-in; the audit volume, a docker-killed server swept, the allowlist with and without the server's network), setup in it (no rootfs), install-client --docker/--wsl (root)
stage_oci() {
        local claude=
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ] ||
                [ ! -S /var/run/docker.sock ] || [ ! -f "$images/python.tar" ]; then
                banner "oci: needs root, Docker, the Release build, the e2e packages and $images/python.tar, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        if [ -d "$src/tests/clients/node_modules" ]; then
                rm -rf "$ci/oci-client-bins"
                node "$src/tests/clients/cli-bins.mjs" "$ci/oci-client-bins" >/dev/null 2>&1 &&
                        chmod -R a+rX "$ci/oci-client-bins" && claude=$ci/oci-client-bins/claude
        fi
        if step 900 "oci (tests/package/oci.sh)" bash "$src/tests/package/oci.sh" "$rel" "$e2e" \
                "$images" ${claude:+"$claude"}; then
                passed=$((passed + 1))
        else
                record_fail "oci (tests/package/oci.sh)"
        fi
}
