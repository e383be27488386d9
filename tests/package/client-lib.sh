# shellcheck shell=bash
# client-lib.sh - the counting and checking of tests/package/install-client.sh and
# install-client-docker.sh. Sourced, not run. They keep passed, failed and skipped (start them at
# 0) and set base (the folder fresh makes HOMEs in) before using fresh.

ok() { echo "ok      $*"; passed=$((passed + 1)); }
bad() { echo "FAILED  $*"; failed=$((failed + 1)); }
skip() { echo "skipped $*"; skipped=$((skipped + 1)); }

# fresh NAME: a new empty HOME, $base/NAME, in h; the client CLIs run with it and nothing else
# of ours.
fresh() {
        h=${base:?}/$1
        mkdir -p "$h"
}

# check NAME OUTPUT PATTERN...: every pattern (grep -E) is in OUTPUT; else the output is shown.
check() {
        local name=$1 out=$2 p
        shift 2
        for p in "$@"; do
                if ! grep -Eq -- "$p" <<<"$out"; then
                        bad "$name: '$p' not in:"
                        sed 's/^/        /' <<<"$out"
                        return
                fi
        done
        ok "$name"
}
