#!/usr/bin/env bash
# fuzz.sh - build the libFuzzer targets (tests/fuzz) and run one for a bounded time.
#
# Usage: scripts/fuzz.sh TARGET SECONDS [LIBFUZZER OPTION...]
#   TARGET   mcp | config | unpack | workspace | egress | engine_path | runner | stats | preset | egress_stream | path_lexical | cellstream | toml | guard | owner | wrap (tests/fuzz/fuzz_TARGET.c)
#   SECONDS  wall-clock budget of the run (-max_total_time)
# The target is built with clang (-fsanitize=fuzzer,address,undefined) into
# $VESTIBULE_FUZZ_BUILD (default build-fuzz in the repository). The run starts from the seed
# corpus in tests/fuzz/corpus/TARGET, copied into a working corpus ($VESTIBULE_FUZZ_WORK,
# default /var/tmp/vestibule-fuzz/TARGET) that keeps what the run found, so the repository's
# seeds stay small. Crash, leak and timeout inputs land in the working folder's artifacts/.
# Ends with one line: "fuzz TARGET: N execs in S s, no crash" (exit 0), or "... CRASH" (exit 1).
# Environment: VESTIBULE_FUZZ_JOBS (build parallelism, default 2), VESTIBULE_FUZZ_SKIP_BUILD=1.
set -euo pipefail

if [ $# -lt 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
        sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
        [ $# -ge 2 ] && exit 0 || exit 2
fi
target=$1 secs=$2
shift 2
case $target in
mcp | config | unpack | workspace | egress | engine_path | runner | stats | preset | egress_stream | path_lexical | cellstream | toml | guard | owner | wrap) ;;
*)
        echo "fuzz.sh: unknown target '$target': use mcp, config, unpack, workspace, egress, engine_path, runner, stats, preset, egress_stream, path_lexical, cellstream, toml, guard, owner or wrap" >&2
        exit 2
        ;;
esac
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${VESTIBULE_FUZZ_BUILD:-$repo/build-fuzz}
work=${VESTIBULE_FUZZ_WORK:-/var/tmp/vestibule-fuzz}/$target
command -v clang >/dev/null || {
        echo "fuzz.sh: clang is missing: apt-get install clang libclang-rt-14-dev" >&2
        exit 2
}
mkdir -p "$work/corpus" "$work/artifacts"
if [ "${VESTIBULE_FUZZ_SKIP_BUILD:-0}" != 1 ]; then
        if ! { CC=clang cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                -DVESTIBULE_FUZZ=ON -DBUILD_TESTING=OFF &&
                cmake --build "$build" -j "${VESTIBULE_FUZZ_JOBS:-2}" --target "fuzz_$target"; } \
                >"$work/build.log" 2>&1; then
                tail -40 "$work/build.log" >&2
                echo "fuzz $target: the clang build failed (log: $work/build.log)"
                exit 1
        fi
fi
cp -n "$repo/tests/fuzz/corpus/$target/"* "$work/corpus/" 2>/dev/null || true
log="$work/last.log"
rc=0
# detect_leaks: LeakSanitizer runs at the end of every input that leaked (-detect_leaks=1).
# The unpack target writes files; -timeout catches a hang (a fifo, a loop) as a finding.
tmp=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && tmp=/dev/shm
TMPDIR=$tmp ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$build/fuzz_$target" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$@" \
        "$work/corpus" >"$log" 2>&1 || rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
elapsed=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
if [ "$rc" -ne 0 ]; then
        tail -60 "$log" >&2
        echo "fuzz $target: ${execs:-?} execs, CRASH (exit $rc; inputs in $work/artifacts)"
        exit 1
fi
echo "fuzz $target: ${execs:-?} execs in ${elapsed:-$secs} s, no crash"
