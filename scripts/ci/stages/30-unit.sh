# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/30-unit.sh - the Check suites of each build (ctest; run_ctest in scripts/ci/lib.sh).
# Sourced by scripts/test.sh, which calls stage_unit_release and stage_unit_debug.

# stage: unit-release | build-release | the Check suites of the Release build (ctest)
# stage: unit-debug | build-debug | the Check suites of the Debug (ASan+UBSan) build (ctest)
stage_unit_release() { unit_of Release; }
stage_unit_debug() { unit_of Debug; }

# unit_of TYPE: ctest in the TYPE build, when it was built and is among VESTIBULE_CI_BUILDS.
unit_of() {
        local b
        for b in "${built[@]}"; do
                [ "${b%%:*}" = "$1" ] || continue
                case ",$builds," in *",${b%%:*},"*) ;; *) continue ;; esac
                need_user "unit tests" || continue
                banner "unit tests: ctest, ${b%%:*} build$([ "$quick" -eq 0 ] || echo ', the fast suites')"
                run_ctest "${b#*:}"
        done
}
