#!/usr/bin/env bash
# bench-engine.sh - p50/p95 of N print(1) runs through the container backend (the whole
# backend run: create, verify, attach+wait, start, exit, remove) next to `docker run --rm` of
# the same image with the same flags, measured in the same session. The docker CLI is used
# here only as the yardstick; Vestibule's own code never runs it.
# Usage: scripts/bench-engine.sh [N] [BUILD_DIR]   (DOCKER_HOST selects the engine; root runs
# code as 2000:2000)
set -euo pipefail
n=${1:-40}
build=${2:-build-release}
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# A Release build of the library (no sanitizers): cmake -B build-release -DCMAKE_BUILD_TYPE=Release
cc -std=gnu11 -O2 -D_GNU_SOURCE -I"$src/src" "$src/tests/bench/bench_engine.c" \
        "$build/libvestibule_core.a" -o "$out/bench" \
        $(pkg-config --libs libcurl json-c libcrypto libseccomp libsystemd yaml-0.1 libarchive) \
        -lpthread

ws=$(mktemp -d) && chmod 0777 "$ws"
code=$(mktemp -d) && chmod 0755 "$code" && echo 'print(1)' >"$code/main.py" && chmod 0644 "$code/main.py"

"$out/bench" "$n" "$ws" >"$out/api.txt"

docker_run() {
        docker run --rm --network none --cap-drop ALL --security-opt no-new-privileges \
                --read-only --tmpfs /tmp:rw,noexec,nosuid,nodev,size=64m,mode=1777 \
                --tmpfs /var/tmp:ro,size=16k --tmpfs /run:ro,size=16k --ipc none \
                --pids-limit 64 --memory 256m --memory-swap 256m --cpus 0.75 \
                --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --ulimit core=0:0 \
                --user 2000:2000 -w /workspace -e PATH=/usr/local/bin:/usr/bin:/bin -e HOME=/tmp \
                -e LANG=C.UTF-8 -e PYTHONDONTWRITEBYTECODE=1 --init \
                --log-opt max-size=1m --log-opt max-file=1 \
                --mount "type=bind,src=$ws,dst=/workspace" \
                --mount "type=bind,src=$code,dst=/sandbox,readonly" \
                vestibule/python:bookworm timeout --kill-after=1 10 python3 /sandbox/main.py
}
docker_run >/dev/null && docker_run >/dev/null # warm-up
for ((i = 0; i < n; i++)); do
        t0=$(date +%s%N)
        [ "$(docker_run)" = 1 ]
        t1=$(date +%s%N)
        echo "scale=1; ($t1 - $t0) / 1000000" | bc >>"$out/cli.txt"
done
rm -rf "$ws" "$code"

python3 - "$out/api.txt" "$out/cli.txt" <<'PY'
import statistics, sys
def q(xs, p):
    xs = sorted(xs); k = (len(xs) - 1) * p; f = int(k); c = min(f + 1, len(xs) - 1)
    return xs[f] + (xs[c] - xs[f]) * (k - f)
rows = []
for name, path in (("backend (API)", sys.argv[1]), ("docker run --rm", sys.argv[2])):
    xs = [float(l) for l in open(path) if l.strip()]
    rows.append((name, len(xs), q(xs, .5), q(xs, .95), min(xs), max(xs)))
for r in rows:
    print("%-16s N=%d  p50 %.0f ms  p95 %.0f ms  (min %.0f, max %.0f)" % r)
print("ratio p50 %.2f, p95 %.2f" % (rows[0][2] / rows[1][2], rows[0][3] / rows[1][3]))
PY
