#!/usr/bin/env bash
# test.sh - Vestibule's whole test suite, the README's test command and what .ci/run runs.
#
# On a fresh Debian/Ubuntu, as root: installs what it needs with apt-get, creates the
# unprivileged test user (scripts/ci-user.sh), starts the container engines
# (scripts/start-engines.sh), builds Release and Debug (ASan+UBSan) out of tree under
# $VESTIBULE_CI_DIR, prepares both backends with `vestibule-mcp setup --from-debian` (the
# sandbox images built by images/build.sh, unpacked, imported into Docker), runs the Check suites of
# both builds with ctest, then the end-to-end suite (tests/e2e: the real binary driven by the
# official MCP SDK clients) as the unprivileged test user on every backend and engine, plus the
# root-only case as root, the grade agreement stage (scripts/agree.sh: doctor, verify and a run
# agree in every environment of this host) and the systemd VM stage.
# Ends with one line "total: N passed, N failed, N skipped" and exits non-zero on any failure.
# What each stage costs, measured: README, "Tests".
#
# As a normal user it skips what needs root (packages, test user, engines, images) and runs
# everything else as you.
#
# Usage: scripts/test.sh [--help] [--list] [--only STAGE,...] [--skip STAGE,...] [--quick]
#   (no option)     the whole CI run, every stage (what .ci/run runs)
#   --list          the stages, one a line: name, what it needs, what it checks
#   --only A,B      only these stages (shell patterns: e2e-container-*), in the usual order.
#                   What they build on is either implied (the source copy; the builds a stage
#                   needs, made incrementally in $VESTIBULE_CI_DIR; npm ci for the e2e suite)
#                   or checked first with a message naming the stage to run (packages, the
#                   test user, the engines, the images): e.g. --only unit-release,e2e-native
#   --skip A,B      every stage but these
#   --quick         the developer loop: the Release build (incremental), lint of the C files
#                   changed since main, the fast unit suites four at a time (QUICK_UNITS in
#                   scripts/ci/config.sh), the e2e suite on one backend, native (Release;
#                   QUICK_E2E and QUICK_E2E_SIDE, two runners). Needs the images in
#                   $VESTIBULE_CI_IMAGES/rootfs from a full run, `--only images` or
#                   `vestibule-mcp setup`.
#
# The parts: scripts/ci/lib.sh (the registry, counters, step, as_user, the stage runner),
# scripts/ci/config.sh (settings, E2E_RUNS), and one file per stage or group of stages in
# scripts/ci/stages/, sourced in name order: 00-prepare.sh runs as it is sourced (packages,
# test user, engines, the source copy, the builds); every other file defines stage_NAME
# functions, which SCHEDULE below runs.
#
# Order and side by side: SCHEDULE lists the stages in the order they run; the stages of one
# entry ("a b c") need nothing from each other and use different engines, and run side by side
# (scripts/ci/lib.sh: run_group; each stage's output is kept in $VESTIBULE_CI_DIR/logs/NAME.log
# and replayed when its group ends, its counts added to the totals). The VM stage (qemu, the
# largest single cost) runs in the background from after the unit suites (it needs the Debug
# build, the images and the npm trees, all made by then) and is joined at the end. With
# VESTIBULE_CI_PARALLEL=0 every stage runs alone, in the same order.
#
# Adding a stage: a file scripts/ci/stages/NN-name.sh (or a function in an existing one), and
# its name in SCHEDULE:
#   # stage: NAME | NEEDS | what it checks
#   stage_NAME() {     # '-' in NAME is '_' here
#           if step SECONDS "NAME: what" CMD ARGS...; then passed=$((passed + 1))
#           else record_fail "NAME: what failed"; fi
#   }
# The "# stage:" comment lines are the registry: --list prints them and --only/--skip accept
# their names. NEEDS: the builds the stage uses (build-release, build-debug; comma-separated,
# "-" for none); they are made when the stage runs without them. Anything slow or root-only
# the stage relies on (images, engines, the test user) it checks itself with need_* (lib.sh).
# Environment:
#   VESTIBULE_CI_DIR        build and scratch folder, readable by the test user
#                           (default /var/tmp/vestibule-ci)
#   VESTIBULE_CI_IMAGES     where setup builds and unpacks the images (default
#                           /var/tmp/vestibule-images: python.tar, node.tar, rootfs/)
#   VESTIBULE_CI_REUSE_IMAGES=1  install the tarballs already there (setup --from-tar) instead
#                           of building them (setup --from-debian)
#   VESTIBULE_CI_E2E_RUNS   the end-to-end runs, one per line:
#                           BUILDS|BACKEND|EXPECTED ISOLATION GRADE|EXTRA ENV (VAR=value ...)
#                           (default: E2E_RUNS in scripts/ci/config.sh; a grade "doctor" is derived from
#                           doctor --json and checked against the kernel facts)
#   VESTIBULE_CI_CONTAINER  1 (default as root): run the e2e suite against the container
#                           backend on the test user's rootless Podman (images imported from
#                           `setup --from-tar`); 0: skip that run. The container runs on rootful
#                           Docker and rootful Podman (server as root, VESTIBULE_RUN_AS) are on
#                           as root when the engine is installed
#   VESTIBULE_CI_MUST_RUN   1 (default): a unit test whose prerequisite is missing fails
#                           instead of skipping (SBX_TEST_MUST_RUN)
#   VESTIBULE_CI_JOBS       build parallelism (default 2)
#   VESTIBULE_CI_BUILDS     the builds the unit and e2e stages use (default Release,Debug;
#                           --quick: Release)
#   VESTIBULE_CI_LINT_BASE  --quick lints the C files changed since this (default main)
#   SBX_TEST_USER           the unprivileged test user (default vestibule-test)
#   VESTIBULE_CI_UNIT_TMPFS 1 (default, as root): the unit suites' TMPDIR on a tmpfs (a folder in
#                           /dev/shm), as /tmp is on Debian 13, Fedora, Arch; 0: TMPDIR as it is
#   VESTIBULE_CI_PARALLEL   1 (default): the stages of one SCHEDULE entry side by side and the
#                           VM stage in the background; 0: one stage at a time
set -euo pipefail
umask 022
# The whole driver is one block, read before any of it runs: editing this file during a run
# (bash reads a script as it goes) cannot change what the run does.
{
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stages_dir=$repo/scripts/ci/stages
# shellcheck source=scripts/ci/lib.sh
. "$repo/scripts/ci/lib.sh"

only=() skip=() quick=0 selected=0
while [ $# -gt 0 ]; do
        case $1 in
        --help | -h)
                sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
                exit 0
                ;;
        --list)
                stage_lines | awk -F'|' '{ printf "%-24s needs: %-24s %s\n", $1, $2, $3 }'
                exit 0
                ;;
        --only | --skip)
                [ $# -ge 2 ] || { echo "test.sh: $1 needs a list of stages (see --list)" >&2; exit 2; }
                IFS=, read -r -a names <<<"$2"
                for n in "${names[@]}"; do
                        is_stage "$n" || {
                                echo "test.sh: no stage matches '$n' (scripts/test.sh --list)" >&2
                                exit 2
                        }
                done
                if [ "$1" = --only ]; then only+=("${names[@]}"); else skip+=("${names[@]}"); fi
                selected=1
                shift
                ;;
        --quick)
                quick=1 selected=1
                only+=(lint unit-release e2e-native)
                ;;
        *)
                echo "test.sh: unknown option '$1' (scripts/test.sh --help)" >&2
                exit 2
                ;;
        esac
        shift
done

# shellcheck source=scripts/setup-lib.sh
. "$repo/scripts/setup-lib.sh"
# shellcheck source=scripts/ci/config.sh
. "$repo/scripts/ci/config.sh"

# The set-up stages and the builds, run as sourced; then every stage's functions.
# shellcheck source=scripts/ci/stages/00-prepare.sh
. "$stages_dir/00-prepare.sh"
for f in "$stages_dir"/*.sh; do
        # shellcheck disable=SC1090 # the stage files, one by one
        [ "$f" = "$stages_dir/00-prepare.sh" ] || . "$f"
done

# The order of a run: one entry a line, the stages of an entry side by side (see above). The
# images first (everything after uses them), then the CPU-bound stages (lint beside fuzz:
# fuzz's targets are bounded by time, so lint's share of the CPU costs fuzz nothing; then the
# unit suites one at a time), then the VM stage goes to the background ("&vm": not before the unit
# suites, whose tightest wall-clock bounds, e.g. test_engine's 4.5 s for a 3 s run, already
# failed once at load 15-18 without qemu's two emulated CPUs beside them), the naive and
# native e2e runs alone (their wall-clock bounds), then the engine-bound stages in groups of
# different engines.
SCHEDULE=(
        images
        setup-cli
        "lint fuzz"
        unit-release
        unit-debug
        "&vm"
        "!e2e_grades"
        e2e-naive
        e2e-native
        "e2e-container-rootless e2e-container-docker e2e-container-podman e2e-container-other"
        "e2e-root e2e-remote e2e-data clients run-cmd mcp-wrap run-overlay"
        "egress-container agreement native-in-docker namespaces oci e2e-gvisor e2e-runsc"
        "packaging e2e-docker-group e2e-desktop e2e-rootless-docker e2e-tmpfs"
        vm
)

# --quick: the native e2e run's expected grade derived while the unit suites run (doctor's
# engine probes, 20-25 s at load 30, mostly waiting).
if [ "$quick" -eq 1 ] && [ "$npm_kept" -eq 1 ] && want e2e-native && [ -x "$rel/vestibule-mcp" ]; then
        while IFS='|' read -r _ backend grade extra; do
                [ "$backend|$grade" != "native|doctor" ] || grade_start "$rel/vestibule-mcp" native "$extra"
        done <<<"$E2E_RUNS"
fi

vm_bg=0
for entry in "${SCHEDULE[@]}"; do
        case $entry in
        "!"*) "${entry#!}" ;;
        "&vm")
                # npm ci for the e2e suite and the clients' tree first: the VM stage reads both
                e2e_npm
                # the VM in the background when other stages follow it
                if [ "$parallel" != 0 ] && want vm && [ "$(stage_lines | cut -d'|' -f1 | while read -r s; do
                        case $s in packages | user | engines | build-* | images | setup-cli | vm) ;;
                        *) want "$s" && echo "$s" ;; esac
                done)" ]; then
                        # shellcheck disable=SC2154 # npm_ok: stages/40-e2e.sh
                        [ "$npm_ok" -ne 1 ] || clients_npm || true
                        stage_spawn vm
                        vm_bg=1
                fi
                ;;
        vm) if [ "$vm_bg" -eq 1 ]; then stage_join vm; else run_group vm; fi ;;
        *)
                # shellcheck disable=SC2086 # an entry is a list of stage names
                run_group $entry
                ;;
        esac
done
finish
}
