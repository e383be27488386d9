# shellcheck shell=bash disable=SC2154,SC2034 # (the variables of scripts/test.sh, which sources this)
# stages/52-tmpfs.sh - the e2e files without wall-clock bounds (QUICK_E2E_SIDE, run.test.mjs and
# workspace.test.mjs) on the native backend as the test user, with /tmp a tmpfs: many hosts mount one there (Fedora, Arch, and
# Debian 13 by default), and the server keeps its code folders, the sandboxes' scratch and its
# owner files in /tmp. The tmpfs is mounted in a mount namespace of the run's own (unshare -m,
# private propagation), so nothing else on the host sees it; the native backend needs nothing
# from outside that namespace, and a container engine would (its bind mounts come from the
# host's /tmp), so the engines' runs keep the host's /tmp. The run first checks that /tmp is a
# tmpfs where the server runs (the control: without the wrapper it is not, on this host).
# Sourced by scripts/test.sh, which calls stage_e2e_tmpfs when the stage runs.

# stage: e2e-tmpfs | build-release | the e2e files without wall-clock bounds on native, with /tmp a tmpfs in a mount namespace of their own (root)
stage_e2e_tmpfs() {
        local builds backend grade extra env=() v res rc fs files=()
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                banner "e2e with /tmp a tmpfs: needs root, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
                return 0
        fi
        local as_user_in=(unshare -m --propagation private -- sh -c \
                'mount -t tmpfs -o mode=1777,size=2g vestibule-e2e-tmpfs /tmp && cd / && exec "$@"' sh)
        fs=$(as_user findmnt -n -o FSTYPE --target /tmp 2>&1)
        if [ "$fs" != tmpfs ]; then
                record_fail "e2e with /tmp a tmpfs: /tmp where the server runs is '$fs', not tmpfs"
                return 0
        fi
        banner "e2e with /tmp a tmpfs: findmnt says '$fs' inside (outside: '$(findmnt -n -o FSTYPE --target /tmp)')"
        read -r -a files <<<"$QUICK_E2E_SIDE run.test.mjs workspace.test.mjs"
        while IFS='|' read -r builds backend grade extra; do
                if [ "$backend" != native ] || [[ ",$builds," != *,Release,* ]]; then continue; fi
                need_images "e2e with /tmp a tmpfs" || return 0
                resolve_grade "$rel/vestibule-mcp" "$backend" "$grade" "$extra" || return 0
                read -r -a env <<<"$extra"
                res=$(mktemp "$ci/e2e-results.XXXXXX")
                chmod 0666 "$res"
                banner "e2e: native, /tmp a tmpfs (${files[*]})"
                rc=0
                as_user "${env[@]}" VESTIBULE_BIN="$rel/vestibule-mcp" E2E_BACKEND=native \
                        E2E_EXPECT_GRADE="$resolved" E2E_RESULTS="$res" \
                        timeout --kill-after=30 900 node "$e2e/run.mjs" "${files[@]}" || rc=$?
                add_results "native, /tmp a tmpfs" "$res" "$rc"
                return 0
        done <<<"$E2E_RUNS"
        record_fail "e2e with /tmp a tmpfs: no native run in E2E_RUNS"
}
