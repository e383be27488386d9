/* run_guard.h - `run --agent NAME`: the parts of the agent's own files that carry commands the
 * agent runs on the host when it next starts outside the sandbox (Claude Code's hooks and
 * mcpServers, Codex's [mcp_servers], ...: the preset's "guard" entries, src/config/presets/) are
 * recorded before the start, in a journal under the user's state folder too, and put back at
 * the end; a journal left by a run that was killed is put back by the next `run --`.
 * tests/adversarial/server.md (issue 27 agent presets), docs/run-command.md. */
#pragma once

#include <stddef.h>

#include "common/error.h"
#include "config/presets.h"

/* One run's guard. Owned; end it with run_guard_end(). */
struct run_guard {
        char *journal;      /* this run's journal folder, or NULL when there is nothing to guard */
        size_t n;           /* guarded paths in the journal */
        char **readonly_at; /* the "readonly" paths that exist (bound read-only), NULL-ended */
};

/**
 * run_guard_begin() - record each guard and readonly path of @p (absent, a symlink, or its
 * bytes, up to 64 MiB a file) into a new journal folder under
 * ${XDG_STATE_HOME:-$HOME/.local/state}/vestibule/agent-guard (0700; written whole, then renamed
 * to "PID-STARTTIME", so a half-written one is never read), into @g (zeroed first).
 * A file read by a run still going (another journal of a live process) keeps that run's
 * original as its own: the keys its agent planted are not taken for the user's.
 * @writable: the run's read-write folders (canonical, NULL-ended; borrowed): a journal folder
 * in one of them (or holding one) is refused, the command could rewrite the originals.
 * Return: 0, or a negative errno with @err naming the file and the fix (the caller exits 125
 * before anything starts: a guard that cannot record runs nothing).
 */
int run_guard_begin(const struct config_preset *p, char *const *writable, struct run_guard *g,
                    struct sbx_error *err);

/**
 * run_guard_end() - put back what changed in @g's guarded parts, remove the journal, and free
 * what @g holds. JSON files: each changed KEY set back to its original, or removed when it was
 * absent, the other keys as the agent left them (json-c; a file that no longer parses is put
 * back whole); TOML files put back whole when a KEY table or key changed; a readonly path made
 * during the run moved aside. What the agent changed and was not put back whole is kept
 * beside it as NAME.vestibule-planted-TIME. Each is said on stderr; into @tried (size @size,
 * appended after ", " when not empty): "planted PATH: KEY, ... (restored)" for the audit.
 * A journal that cannot be put back (a failed write) is kept for the next run, said.
 * NULL-safe on a @g never begun.
 */
void run_guard_end(struct run_guard *g, char *tried, size_t size);

/**
 * run_guard_recover() - put back the journals of runs that ended without doing so themselves
 * (SIGKILL, a power cut: their PID-STARTTIME names no live process), as run_guard_end(), and
 * say so on stderr. Called at the start of every `run --`. Never fails (a journal it cannot
 * put back stays, said).
 */
void run_guard_recover(void);

struct sbx_buf;

/**
 * run_guard_toml_guarded() - the lines of the TOML text @text (NUL-terminated: a guarded file as
 * the agent left it, so any bytes sandboxed code wrote) that hold one of @keys (comma-separated
 * table or key names, e.g. "mcp_servers,notify"): a table of that name or below it, a key whose
 * dotted name has one as a part, and the following lines of a value they begin; appended to
 * @out in order (table lines as written, key lines prefixed "@"). A line scanner, not a TOML
 * parser: strings are skipped, brackets and braces counted. Fuzzed: tests/fuzz/fuzz_guard.c.
 * Return: 0, or -1 when it cannot tell (a multi-line string, an escape or an unclosed quote in
 * a key, a string not closed on its line, more closing brackets than opening ones): the caller
 * then counts any change of the file as a change of the guarded parts (TOML v1.0.0,
 * https://toml.io/en/v1.0.0).
 */
int run_guard_toml_guarded(const char *text, const char *keys, struct sbx_buf *out);
