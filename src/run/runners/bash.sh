# Vestibule session runner for bash: one persistent shell; each cell is eval'd in it, so the
# current folder, variables and functions persist (docs/design/sessions.md). Cells arrive on
# fd 4 as "<seq> <length>\n" + code; after each, one record "<seq> <kind> <status>\n" goes to
# fd 5. The cell runs with fds 4 and 5 closed, so no command it starts holds them.
__vst_int=0
# An interrupt ends the cell. The trap runs at the level of whatever function is executing, so
# its return leaves only that one (a function the cell, or an earlier cell, defined); it also
# arms a DEBUG trap that, with extdebug (which makes functions inherit it), turns the next
# command at every function level into a return (bash(1), "extdebug": a DEBUG trap returning 2
# simulates a return), until the runner's own level. The main loop disarms both after an
# interrupt (only then: a cell's own DEBUG trap or extdebug persists like the rest of its state).
__vst_trap() {
        trap '__vst_int=1; shopt -s extdebug; trap "[ \"\${FUNCNAME[0]:-main}\" = main ] || return 2" DEBUG; return 130 2>/dev/null' INT
}
__vst_cell() {
        eval "$__vst_code"
}
printf '0 ready 0\n' >&5
while IFS=' ' read -r __vst_seq __vst_len <&4; do
        __vst_code=
        if [ "$__vst_len" -gt 0 ]; then
                LC_ALL=C IFS= read -r -d '' -N "$__vst_len" __vst_code <&4 || [ -n "$__vst_code" ] || exit 0
        fi
        __vst_int=0
        __vst_trap
        __vst_cell 4<&- 5>&-
        __vst_rc=$?
        if [ "$__vst_int" = 1 ]; then
                trap - DEBUG
                shopt -u extdebug
                printf '%s interrupted %d\n' "$__vst_seq" 130 >&5
        else
                printf '%s ok %d\n' "$__vst_seq" "$__vst_rc" >&5
        fi
done
