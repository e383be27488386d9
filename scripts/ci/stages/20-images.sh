# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/20-images.sh - the sandbox images through the product's own setup, and the setup CLI.
# Sourced by scripts/test.sh, which calls stage_images and stage_setup_cli (scripts/ci/lib.sh: run_stage).

# The product's own `vestibule-mcp setup --from-debian`, as root (the administrator of a host
# whose server runs as root with VESTIBULE_RUN_AS=the test user, as the rootful Docker e2e run
# does): images/build.sh builds python.tar and node.tar (kept in $images, where the unit tests
# read them), setup unpacks them into $images/rootfs (which the native e2e run, the unit tests
# and the VM stage use) and imports them into rootful Docker (which the container e2e run
# uses). The recipes run once; everything after uses what setup made. The stage checks the
# ready line, both trees against their tarballs, both images by the ID setup printed, a second
# run touching nothing, and 6*7 through both backends (vst_setup_debian in setup-lib.sh).
# With VESTIBULE_CI_REUSE_IMAGES=1 the tarballs already there are installed with
# `setup --from-tar` instead (no build).
# stage: images | build-release | setup --from-debian: build, unpack and import the sandbox images (root)
stage_images() {
        if [ "$is_root" -ne 1 ]; then
                banner "images: not root, using what is in $images"
        elif [ ! -f "$src/images/build.sh" ] || [ ! -x "$rel/vestibule-mcp" ]; then
                record_fail "images: no images/build.sh or no Release vestibule-mcp to run setup with"
        else
                setup_mode=""
                setup_what="setup --from-debian (images/build.sh) -> $images, Docker"
                if [ "${VESTIBULE_CI_REUSE_IMAGES:-0}" = 1 ] && [ -f "$images/python.tar" ] && [ -f "$images/node.tar" ]; then
                        setup_mode=--reuse
                        setup_what="setup --from-tar $images/*.tar (VESTIBULE_CI_REUSE_IMAGES=1) -> $images/rootfs, Docker"
                fi
                setup_t0=$(date +%s)
                if step 2400 "$setup_what" vst_setup_debian "$rel/vestibule-mcp" "$images" "$user" ${setup_mode:+"$setup_mode"}; then
                        passed=$((passed + 1))
                else
                        record_fail "images: $setup_what"
                fi
                printf 'images stage: %s s\n' "$(($(date +%s) - setup_t0))"
        fi
}

# `vestibule-mcp setup --from-tar` through the real CLI as the test user: both rootfs trees
# installed, the readiness line printed, a second run skipped, print(6*7) on what it installed.
# stage: setup-cli | build-release | setup --from-tar through the CLI as the test user (root)
stage_setup_cli() {
        if [ "$is_root" -eq 1 ] && [ -f "$images/python.tar" ] && [ -f "$images/node.tar" ] &&
                need_user "setup CLI"; then
                if step 300 "setup CLI: --from-tar into a fresh VESTIBULE_ROOTFS_DIR" \
                        vst_check_setup_cli "$rel/vestibule-mcp" "$images" "$ci/setup-cli" "$user"; then
                        passed=$((passed + 1))
                else
                        record_fail "setup CLI (--from-tar, readiness line, skip, run)"
                fi
        fi
}
