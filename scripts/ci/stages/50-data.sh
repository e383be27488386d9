# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/50-data.sh - the python data variant: its setup, then the data and files e2e tests.
# Sourced by scripts/test.sh, which calls stage_e2e_data when the stage runs (scripts/ci/lib.sh: run_stage).

# `vestibule-mcp setup --from-debian --python-data` as root into its own rootfs folder, the
# python image imported into Docker as vestibule/python-data:bookworm (VESTIBULE_IMAGE_PYTHON, as a
# user keeps it apart); doctor names the variant; then tests/e2e/data.test.mjs (numpy, pandas,
# matplotlib, scipy; a plain plt.show() comes back as a PNG) and files.test.mjs on native (as
# the test user) and on rootful Docker (sandboxes as the test user). Issue 15.
# stage: e2e-data | build-release | setup --python-data, then the data and files e2e tests on native and Docker (root)
stage_e2e_data() {
        local builds backend grade extra
        if [ "$is_root" -ne 1 ] || [ ! -x "$rel/vestibule-mcp" ] || [ "$npm_ok" -ne 1 ]; then
                banner "python data variant: needs root, the Release build and the e2e packages, skipped"
                skipped=$((skipped + 1))
        else
                data_root=$images/data-rootfs
                data_img=vestibule/python-data:bookworm
                data_t0=$(date +%s)
                if step 2400 "python data variant: setup --from-debian --python-data -> $data_root, Docker" \
                        env VESTIBULE_IMAGE_PYTHON="$data_img" VESTIBULE_RUNTIME=docker \
                        VESTIBULE_RUN_AS="$(id -u "$user"):$(id -g "$user")" VESTIBULE_ROOTFS_DIR="$data_root" \
                        "$rel/vestibule-mcp" setup --from-debian --python-data; then
                        printf 'python data variant: setup took %s s, %s on disk\n' "$(($(date +%s) - data_t0))" \
                                "$(du -sh "$data_root/python" | cut -f1)"
                        chmod -R a+rX "$data_root"
                        if as_user VESTIBULE_ROOTFS_DIR="$data_root" VESTIBULE_BACKEND=native \
                                "$rel/vestibule-mcp" doctor 2>&1 | grep -q 'variant python-data'; then
                                passed=$((passed + 1))
                        else
                                record_fail "python data variant: doctor does not name the variant of $data_root/python"
                        fi
                        while IFS='|' read -r builds backend grade extra; do
                                case ",$builds,|$backend|$extra" in
                                *,Release,*"|native|"*) data_env="VESTIBULE_ROOTFS_DIR=$data_root" ;;
                                *,Release,*"|container|"*VESTIBULE_RUNTIME=docker*)
                                        data_env="$extra VESTIBULE_IMAGE_PYTHON=$data_img E2E_PASS_ENV=VESTIBULE_IMAGE_PYTHON" ;;
                                *) continue ;;
                                esac
                                resolve_grade "$rel/vestibule-mcp" "$backend" "$grade" "$extra" || continue
                                grade=$resolved
                                res=$(mktemp "$ci/e2e-results.XXXXXX")
                                chmod 0666 "$res"
                                banner "e2e: python data variant, backend $backend"
                                rc=0
                                read -r -a data_vars <<<"$data_env"
                                data_as=user data_pass=()
                                for v in "${data_vars[@]}"; do
                                        if [ "$v" = E2E_AS=root ]; then data_as=root; else data_pass+=("$v"); fi
                                done
                                if [ "$data_as" = root ]; then
                                        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
                                                TMPDIR="$ci" "${data_pass[@]}" E2E_PYTHON_DATA=1 VESTIBULE_BIN="$rel/vestibule-mcp" \
                                                E2E_BACKEND="$backend" E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                                                timeout --kill-after=30 600 node "$e2e/run.mjs" data.test.mjs files.test.mjs || rc=$?
                                else
                                        as_user "${data_pass[@]}" E2E_PYTHON_DATA=1 VESTIBULE_BIN="$rel/vestibule-mcp" \
                                                E2E_BACKEND="$backend" E2E_EXPECT_GRADE="$grade" E2E_RESULTS="$res" \
                                                timeout --kill-after=30 600 node "$e2e/run.mjs" data.test.mjs files.test.mjs || rc=$?
                                fi
                                add_results "python data variant, backend $backend" "$res" "$rc"
                        done <<<"$E2E_RUNS"
                else
                        record_fail "python data variant: setup --from-debian --python-data"
                fi
        fi
}
