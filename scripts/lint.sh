#!/usr/bin/env bash
# lint.sh - the static checks docs/design/style.md asks CI for, on every tracked C file:
#   the layers (scripts/check-layers.sh: an include points only to a lower layer),
#   function length (scripts/check-fn-length.sh: none grows past 80 lines, no file in src/
#   over 1,500),
#   clang-format --dry-run --Werror (.clang-format), cppcheck over the build's
#   compile_commands.json, clang-tidy -p BUILD_DIR (.clang-tidy: bugprone-*, clang-analyzer-*).
# Prints one line per check and "lint: N passed, N failed"; exits non-zero on any finding.
#
# Usage: scripts/lint.sh BUILD_DIR [FILE...]   (a configured build with compile_commands.json;
#        FILEs: check only these, paths from the repository's root, e.g. the changed ones)
# Environment: VESTIBULE_LINT_JOBS  clang-tidy processes in parallel (default: nproc)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-}
if [ -z "$build" ] || [ ! -f "$build/compile_commands.json" ]; then
        echo "usage: scripts/lint.sh BUILD_DIR (configured with cmake: it needs compile_commands.json)" >&2
        exit 2
fi
build=$(cd "$build" && pwd)
shift
only=("$@")
jobs=${VESTIBULE_LINT_JOBS:-$(nproc)}
cd "$repo" || exit 2
passed=0 failed=0

# check NAME CMD...: one check, its output shown only when it fails.
check() {
        local name=$1 out rc=0
        shift
        out=$("$@" 2>&1) || rc=$?
        if [ "$rc" -eq 0 ]; then
                printf 'lint: %s: ok\n' "$name"
                passed=$((passed + 1))
        else
                printf 'lint: %s: FAILED\n%s\n' "$name" "$out"
                failed=$((failed + 1))
        fi
}

missing=()
for t in clang-format clang-tidy cppcheck; do
        command -v "$t" >/dev/null || missing+=("$t")
done
if [ "${#missing[@]}" -gt 0 ]; then
        echo "lint: missing ${missing[*]}: apt-get install clang-format clang-tidy cppcheck" >&2
        echo "lint: 0 passed, 1 failed"
        exit 1
fi

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        mapfile -t files < <(git ls-files '*.c' '*.h')
else
        mapfile -t files < <(find src tests -name '*.[ch]' -not -path '*/node_modules/*' | sort)
fi
# the translation units the build knows (clang-tidy needs their flags)
mapfile -t units < <(python3 -c 'import json,sys
for e in json.load(open(sys.argv[1])): print(e["file"])' "$build/compile_commands.json" | sort -u)
filters=()
if [ "${#only[@]}" -gt 0 ]; then
        files=("${only[@]}")
        # the units among them (a header alone is checked by clang-format only)
        mapfile -t units < <(printf '%s\n' "${units[@]}" | grep -F -f <(printf '/%s\n' "${only[@]}") || true)
        for u in "${units[@]}"; do filters+=("--file-filter=$u"); done
fi

check "layers (scripts/check-layers.sh)" bash "$repo/scripts/check-layers.sh"
check "function and file length (scripts/check-fn-length.sh)" bash "$repo/scripts/check-fn-length.sh"
check "clang-format (${#files[@]} files)" clang-format --dry-run --Werror "${files[@]}"
if [ "${#only[@]}" -eq 0 ] || [ "${#units[@]}" -gt 0 ]; then
        check "cppcheck (${#units[@]} units)" cppcheck --project="$build/compile_commands.json" \
                --error-exitcode=1 --inline-suppr --quiet -j "$jobs" \
                --suppress=missingIncludeSystem "${filters[@]}"
fi
# tidy UNIT...: clang-tidy over the units; fails on any finding and on a clang-tidy that
# could not run (its status), printing the findings with their context.
tidy() {
        local out rc=0
        out=$(printf '%s\n' "$@" | xargs -P "$jobs" -n 4 clang-tidy -p "$build" --quiet 2>&1) || rc=$?
        out=$(grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Error while processing' <<<"$out")
        if [ "$rc" -ne 0 ] || grep -q -E '(warning|error):' <<<"$out"; then
                printf '%s\n' "$out"
                return 1
        fi
        return 0
}
[ "${#units[@]}" -eq 0 ] || check "clang-tidy (${#units[@]} units)" tidy "${units[@]}"

printf 'lint: %d passed, %d failed\n' "$passed" "$failed"
[ "$failed" -eq 0 ]
