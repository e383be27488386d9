# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/10-lint.sh - the static checks.
# Sourced by scripts/test.sh, which calls stage_lint when the stage runs (scripts/ci/lib.sh: run_stage).

# clang-format, cppcheck and clang-tidy over every tracked C file (scripts/lint.sh, docs/design/style.md),
# on the Release build's compile_commands.json; one count in the totals. --quick: only the C
# files changed since main (committed or not). Bounded at 1500 s: it takes 175 s alone and about
# 400 s beside fuzz, but a dry run on a machine shared with other builds passed 900 s in
# clang-tidy (2026-12-02).
# stage: lint | build-release | clang-format, cppcheck, clang-tidy (scripts/lint.sh)
stage_lint() {
        lint_files=()
        if [ "$quick" -eq 1 ]; then
                base=$(git -C "$repo" merge-base HEAD "${VESTIBULE_CI_LINT_BASE:-main}" 2>/dev/null || echo HEAD)
                mapfile -t lint_files < <({
                        git -C "$repo" diff --name-only --diff-filter=d "$base" -- '*.c' '*.h'
                        git -C "$repo" ls-files --others --exclude-standard -- '*.c' '*.h'
                } | sort -u)
        fi
        if [ "$quick" -eq 1 ] && [ "${#lint_files[@]}" -eq 0 ]; then
                banner "static checks: no C file changed since main"
        elif [ -d "$rel" ]; then
                if step 1500 "static checks (scripts/lint.sh${lint_files:+ on ${#lint_files[@]} changed files})" \
                        bash "$repo/scripts/lint.sh" "$rel" "${lint_files[@]}"; then
                        passed=$((passed + 1))
                else
                        record_fail "static checks (scripts/lint.sh: clang-format, cppcheck, clang-tidy)"
                fi
        fi
}
