# shellcheck shell=bash disable=SC2154,SC2034,SC2030,SC2031 # (the variables of scripts/test.sh, which sources this)
# stages/15-fuzz.sh - libFuzzer over the parsers.
# Sourced by scripts/test.sh, which calls stage_fuzz when the stage runs (scripts/ci/lib.sh: run_stage).

# libFuzzer with ASan+UBSan and leak checks (scripts/fuzz.sh, tests/fuzz): the JSON-RPC serve
# loop, the settings parser (env + YAML), setup's tar unpack (an escape aborts) and
# read_workspace's path jail (reading the planted secret aborts), 45 s each; the egress proxy's
# request parser (its head rewrite, the record folding), the session status records and the
# engine stats stream, 30 s each; the egress bridge's stream parser (src/engine/egress_frames.c:
# the Engine API's stream format and our frames), a session's attach stream on the volume path
# (src/engine/cellstream.c), the Engine API layer's escaping of ids and paths (src/engine/api.c)
# and install-client's editor of Codex's config.toml (src/clients/toml.c), 20 s each; the agent
# preset parser, the audit's path naming and mcp wrap's reader in front of its audit
# (src/cli/wrap_audit.c), 10 s each; from the seed corpus in the repository; one count per
# target, passed when nothing crashed, leaked or hung. 395 s of fuzzing in all (the toml
# target's 20 s came out of the four 50 s ones, 5 s each).
# Measured with 60 s each on a 2-core host at load average ~20: 521 s, of which ~250 s the
# clang ASan build; on an idle host the build takes a fraction of that.
# stage: fuzz | - | libFuzzer over the JSON-RPC loop, settings, tar unpack, the path jail (45 s each), the egress request parser, the session status records and the engine stats stream (30 s each), the egress bridge's frames, the Engine API escaping, a volume-path session's attach stream and Codex's config.toml editor (20 s each), the agent preset parser, the audit's path naming and run --agent's scan of a guarded config.toml (10 s each), the owner-label judge (5 s), mcp wrap's reader in front of its audit (10 s)
stage_fuzz() {
        if command -v clang >/dev/null; then
                for t in mcp config unpack workspace egress engine_path runner stats preset egress_stream path_lexical cellstream toml guard owner wrap; do
                        secs=45
                        case $t in
                        egress) secs=30 ;;      # one request head per input
                        engine_path) secs=20 ;; # the Engine API escaping: a small input space
                        egress_stream) secs=20 ;; # the bridge's frames: a small state machine
                        cellstream) secs=20 ;; # a session's attach stream on the volume path
                        toml) secs=20 ;; # install-client's config.toml editor: a line scanner
                        guard) secs=10 ;; # run --agent's scan of a guarded config.toml: one line walk
                        owner) secs=5 ;; # the owner-label judge: one short string
                        wrap) secs=10 ;; # mcp wrap's reader of each message before the audit
                        runner | stats) secs=30 ;; # the status records, the engine's stats stream
                        preset) secs=10 ;; # the agent presets' line parser: a small input space
                        path_lexical) secs=10 ;; # sbx_path_lexical(): one string walk
                        esac
                        if step 600 "fuzz $t ($secs s, scripts/fuzz.sh)" env VESTIBULE_FUZZ_BUILD="$ci/build-fuzz" \
                                VESTIBULE_FUZZ_WORK="$ci/fuzz" VESTIBULE_FUZZ_JOBS="$jobs" \
                                bash "$src/scripts/fuzz.sh" "$t" "$secs"; then
                                passed=$((passed + 1))
                        else
                                record_fail "fuzz $t (scripts/fuzz.sh; the input is in $ci/fuzz/$t/artifacts)"
                        fi
                done
        else
                record_fail "fuzz: clang is missing (VST_FUZZ_DEPS in scripts/setup-lib.sh)"
        fi
}
