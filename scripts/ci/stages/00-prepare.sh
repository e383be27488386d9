# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/00-prepare.sh - sourced by scripts/test.sh, top to bottom: the packages, the test user,
# the engines, the copy of the sources the test user can read, and the builds. A failure here
# ends the run (finish): nothing after can run without them.
# ---------------------------------------------------------------------------- packages
# stage: packages | - | apt-get install what the build, engines, images, VM, lint and packaging need (root)
if ! want packages; then
        missing_pkgs=$(vst_missing_packages "${VST_BUILD_DEPS[@]}" | tr '\n' ' ')
        if [ -n "$missing_pkgs" ]; then
                record_fail "packages missing: ${missing_pkgs}: run scripts/test.sh --only packages (as root)"
                finish
        fi
elif [ "$is_root" -eq 1 ]; then
        vst_add_arm64
        step 1500 "packages (apt-get)" vst_install_packages "${VST_BUILD_DEPS[@]}" "${VST_ENGINE_DEPS[@]}" \
                "${VST_OTHER_DEPS[@]}" "${VST_VM_DEPS[@]}" "${VST_LINT_DEPS[@]}" "${VST_PACKAGE_DEPS[@]}" \
                "${VST_FUZZ_DEPS[@]}" || {
                record_fail "package installation"
                finish
        }
        # Debian 12's runsc breaks ls/stat/cp in its sandboxes (statx: setup-lib.sh); the gvisor
        # stages need Debian 13's. Not fatal: without it those stages fail with the probe's reason.
        # (step runs a function alone in a child bash: the ones it calls come with the file)
        step 300 "runsc from Debian 13 where the host's is older" \
                bash -c '. "$1/scripts/setup-lib.sh" && vst_install_runsc_newer' vst "$repo" ||
                record_fail "runsc: Debian 13's package could not be installed"
else
        banner "packages: not root, using what is installed"
fi

if ! vst_node_ok; then
        record_fail "Node.js 20 or later is needed by the MCP client SDK (found: $(node --version 2>/dev/null || echo none))"
        finish
fi

# ---------------------------------------------------------------------------- test user, engines
# stage: user | - | create the unprivileged test user (scripts/ci-user.sh; root)
if [ "$is_root" -eq 1 ] && want user; then
        step 60 "test user ($user)" bash "$repo/scripts/ci-user.sh" || {
                record_fail "creating the test user"
                finish
        }
fi
# stage: engines | - | start Docker, rootful and rootless Podman (scripts/start-engines.sh; root)
if [ "$is_root" -eq 1 ] && want engines; then
        if [ -x "$repo/scripts/start-engines.sh" ] || [ -f "$repo/scripts/start-engines.sh" ]; then
                step 300 "container engines" bash "$repo/scripts/start-engines.sh" ||
                        record_fail "starting the container engines (scripts/start-engines.sh)"
        else
                banner "container engines: scripts/start-engines.sh not there yet, skipped"
        fi
fi

# ---------------------------------------------------------------------------- sources
# The clone may sit under /root (0700): work on a copy the test user can read.
src=$ci/src
# --quick keeps the e2e client's packages from its last run (npm ci only when the lock changed).
npm_kept=0
if [ "$quick" -eq 1 ] && [ -d "$src/tests/e2e/node_modules" ]; then
        rm -rf "$ci/e2e-node_modules" && mv "$src/tests/e2e/node_modules" "$ci/e2e-node_modules" &&
                cp "$src/tests/e2e/package-lock.json" "$ci/e2e-node_modules.lock"
fi
step 120 "copy sources to $src" vst_copy_sources "$repo" "$src" || {
        record_fail "copying the sources"
        finish
}
if [ "$quick" -eq 1 ] && [ -d "$ci/e2e-node_modules" ] &&
        cmp -s "$ci/e2e-node_modules.lock" "$src/tests/e2e/package-lock.json"; then
        mv "$ci/e2e-node_modules" "$src/tests/e2e/node_modules" && npm_kept=1
fi

# ---------------------------------------------------------------------------- builds
# stage: build-release | - | the Release build from scratch, -Werror
# stage: build-debug | - | the Debug (ASan+UBSan) build from scratch, -Werror
# A stage run alone (--only) that needs a build gets it incrementally (build_incremental).
rel=$ci/build-release
dbg=$ci/build-debug
built=()
for b in "Release:$rel" "Debug:$dbg"; do
        type=${b%%:*}
        lower=$(tr '[:upper:]' '[:lower:]' <<<"$type")
        if want "build-$lower"; then
                how=vst_build what="build $type in ${b#*:}"
        elif needed "$lower" && case ",$builds," in *",$type,"*) true ;; *) false ;; esac; then
                how=build_incremental what="build $type in ${b#*:} (incremental: a stage needs it)"
        else
                continue
        fi
        if step 1500 "$what" "$how" "$src" "${b#*:}" "$type" "$jobs"; then
                built+=("$b")
        else
                record_fail "build $type"
        fi
done
[ "${#built[@]}" -gt 0 ] || [ "$selected" -eq 1 ] || finish

