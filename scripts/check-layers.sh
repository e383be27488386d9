#!/usr/bin/env bash
# check-layers.sh - every #include "folder/..." under src/ points to the same folder or to a
# folder on a lower layer (docs/ARCHITECTURE.md draws them). Prints each include that points
# up or sideways, with its file and line; exits 1 when there is one, 0 otherwise.
#
# Usage: scripts/check-layers.sh
# A new folder under src/ gets a rank below; one that has none is reported too.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# The layers, top (high) to bottom (low). Same rank: the folders may not include each other.
declare -A rank=(
        [cli]=9
        [mcp]=8 [doctor]=8 [verify]=8
        [tools]=7
        [service]=6 [setup]=6
        [naive]=5 [native]=5 [engine]=5 [gvisor]=5
        [audit]=4 [egress]=4
        [run]=3 [cgroup]=4
        [config]=2 [workspace]=2 [rootfs]=2 [clients]=2
        [lazy]=1
        [common]=0
)

bad=0
while IFS= read -r f; do
        from=${f#src/}
        from=${from%%/*}
        [ "$from" != "main.c" ] || continue # the entry point may include anything
        if [ -z "${rank[$from]+x}" ]; then
                printf '%s: folder src/%s/ has no layer in scripts/check-layers.sh\n' "$f" "$from"
                bad=1
                continue
        fi
        while IFS=: read -r line to; do
                [ "$to" != "$from" ] || continue
                if [ -z "${rank[$to]+x}" ]; then
                        printf '%s:%s: includes src/%s/, which has no layer\n' "$f" "$line" "$to"
                        bad=1
                elif [ "${rank[$to]}" -ge "${rank[$from]}" ]; then
                        printf '%s:%s: %s (layer %s) includes %s (layer %s): only lower layers\n' \
                                "$f" "$line" "$from" "${rank[$from]}" "$to" "${rank[$to]}"
                        bad=1
                fi
        done < <(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]+/' "$f" |
                sed -E 's/^([0-9]+):[^"]*"([a-z_]+)\/.*/\1:\2/' || true)
done < <(find src -name '*.[ch]' | sort)
exit "$bad"
