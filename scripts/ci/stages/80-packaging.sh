# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/80-packaging.sh - the packages (.deb, npm, arm64).
# Sourced by scripts/test.sh, which calls stage_packaging when the stage runs (scripts/ci/lib.sh: run_stage).

# scripts/package.sh from clean builds (the .deb linted, the npm launcher, linux-x64 and the
# cross-built linux-arm64), the npm tarballs installed into a clean prefix and run by the test
# user (npx --version, one run_code call), the arm64 binary under qemu-user, and install-client's
# configs through the client CLIs when tests/clients has them (tests/package/ci.sh). Budget
# 5 min: measured 8 min on this 2-core host at load 25 (package.sh's three clean builds 395 s,
# 63 s of CPU), so the step is cut at 10. The clean Debian 12 root test
# (tests/package/clean-root.sh deb|npm, 5-10 min) runs by hand.
# stage: packaging | - | package.sh: the .deb, the npm packages, arm64 under qemu, install-client (root)
stage_packaging() {
        if [ "$is_root" -ne 1 ]; then
                banner "packaging: not root, skipped"
                skipped=$((skipped + 1))
        else
                # the client CLIs as the drivers run them (node_modules/.bin/claude is a placeholder
                # while install scripts are off: tests/clients/cli-bins.mjs)
                pkg_clients=""
                if [ -d "$src/tests/clients/node_modules" ]; then
                        rm -rf "$ci/client-bins"
                        if node "$src/tests/clients/cli-bins.mjs" "$ci/client-bins"; then
                                pkg_clients=$ci/client-bins
                        else
                                record_fail "packaging: the client CLIs in tests/clients/node_modules"
                        fi
                fi
                if step 840 "packaging (tests/package/ci.sh)" bash "$src/tests/package/ci.sh" "$user" \
                        "$images/rootfs" ${pkg_clients:+"$pkg_clients"}; then
                        passed=$((passed + 1))
                else
                        record_fail "packaging (tests/package/ci.sh)"
                fi
        fi
}
