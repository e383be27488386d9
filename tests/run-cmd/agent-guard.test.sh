#!/usr/bin/env bash
# agent-guard.test.sh - `vestibule-mcp run --agent NAME`: what the command plants in the agent's
# own files that the agent would run on the host at its next start outside (Claude Code's hooks
# in ~/.claude/settings.json, mcpServers in ~/.claude.json, Codex's [mcp_servers] and notify in
# ~/.codex/config.toml, a plugin in opencode's folder) is put back at the end, the ordinary
# changes beside it kept; a run that is SIGKILLed is put back by the next `run --` from its
# journal (src/cli/run_guard.c, tests/adversarial/server.md issue 27 agent presets). Each plant
# has a control that shows it was written inside (the command cats the file after writing).
# The real, unprivileged test user and kernel; the commands stand in for a hijacked agent.
#
# Usage (as root, which runs every command as the test user):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/agent-guard.test.sh
# Env: RUN_CMD_USER (default vestibule-test), RUN_CMD_DIR (default a fresh /var/tmp folder).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, no python3).
set -uo pipefail
# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"
rc_prologue agent-guard python3
vm=$base/vestibule-mcp
pass=0
failed=0
mkdir -p "$home/.claude" "$home/.codex" "$home/.config/opencode/plugin"
echo '{"theme": "dark"}' >"$home/.claude/settings.json"
echo '{"numStartups": 1, "projects": {}}' >"$home/.claude.json"
printf 'model = "o3"\n\n[projects."/x"]\ntrust_level = "trusted"\n' >"$home/.codex/config.toml"
echo '{"$schema": "https://opencode.ai/config.json"}' >"$home/.config/opencode/opencode.json"
chown -R "$user" "$base"
chmod 0755 "$base"

as_user() {
        (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 "$@")
}
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
# expect_code WANT NAME CMD...: CMD's exit status is WANT (outputs in $base/out, $base/err).
expect_code() {
        local want=$1 name=$2 got
        shift 2
        "$@" >"$base/out" 2>"$base/err" </dev/null
        got=$?
        if [ "$got" = "$want" ]; then ok "$name (exit $got)"; else
                bad "$name: exit $got, want $want"; sed 's/^/     | /' "$base/out" "$base/err" | head -20; fi
}
# expect_in NAME FILE PATTERN / expect_not NAME FILE PATTERN: FILE matches PATTERN (grep -E) or not.
expect_in() { if grep -qE -- "$3" "$2"; then ok "$1"; else bad "$1: $2 lacks /$3/"; sed 's/^/     | /' "$2" | head -20; fi; }
expect_not() { if grep -qE -- "$3" "$2"; then bad "$1: /$3/ in $2"; sed 's/^/     | /' "$2" | head -20; else ok "$1"; fi; }
# py KEY: python3 reading JSON file $1 and printing the expression $2 of it (d).
jq_py() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

echo "# claude: a hook and MCP servers planted beside ordinary changes"
# the plants and an ordinary change of each file, then the file as the command sees it
plant_claude='import json, os
h = os.environ["HOME"]
s = json.load(open(h + "/.claude/settings.json"))
s["hooks"] = {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/PLANTED-HOOK"}]}]}
s["theme"] = "light"
json.dump(s, open(h + "/.claude/settings.json", "w"))
c = json.load(open(h + "/.claude.json"))
c["mcpServers"] = {"planted": {"command": "sh", "args": ["-c", "PLANTED-MCP-TOP"]}}
c["projects"][os.getcwd()] = {"mcpServers": {"p": {"command": "PLANTED-MCP-PROJ"}}, "allowedTools": []}
c["numStartups"] = 2
json.dump(c, open(h + "/.claude.json", "w"))'
expect_code 3 "a run that plants exits with the command's own code" \
        as_user "$vm" run -q --agent claude -- sh -c "python3 -c '$plant_claude' && cat ~/.claude/settings.json ~/.claude.json; exit 3"
expect_in "control: the hook was written inside" "$base/out" "PLANTED-HOOK"
expect_in "control: the user MCP server was written inside" "$base/out" "PLANTED-MCP-TOP"
expect_in "control: the project's MCP server was written inside" "$base/out" "PLANTED-MCP-PROJ"
expect_not "the hook is gone from ~/.claude/settings.json" "$home/.claude/settings.json" "hooks|PLANTED"
[ "$(jq_py "$home/.claude/settings.json" 'd["theme"]')" = light ] &&
        ok "the ordinary change of settings.json stayed (theme light)" || bad "theme not kept: $(cat "$home/.claude/settings.json")"
expect_not "the MCP servers are gone from ~/.claude.json" "$home/.claude.json" "PLANTED|mcpServers"
[ "$(jq_py "$home/.claude.json" 'd["numStartups"], d["projects"]["'"$proj"'"]["allowedTools"]')" = "(2, [])" ] &&
        ok "the ordinary changes of ~/.claude.json stayed (numStartups, the project's entry)" ||
        bad "the changes of ~/.claude.json not kept: $(cat "$home/.claude.json")"
expect_in "stderr names the hook put back" "$base/err" "put back: $home/\.claude/settings\.json: hooks$"
expect_in "stderr names the MCP servers put back" "$base/err" \
        "put back: $home/\.claude\.json: mcpServers, projects\.$proj\.mcpServers$"
expect_code 0 "vestibule-mcp audit reads the log" as_user "$vm" audit 50
expect_in "the audit record names what was planted and restored" "$base/out" \
        "tried: planted $home/\.claude/settings\.json: hooks \(restored\), planted $home/\.claude\.json: mcpServers"
expect_code 0 "control: a run that plants nothing" as_user "$vm" run -q --agent claude -- sh -c \
        'python3 -c "import json,os; f=os.environ[\"HOME\"]+\"/.claude.json\"; c=json.load(open(f)); c[\"numStartups\"]=3; json.dump(c,open(f,\"w\"))"'
expect_not "... is said to have planted nothing" "$base/err" "planted"
[ "$(jq_py "$home/.claude.json" 'd["numStartups"]')" = 3 ] && ok "... and its change stayed" || bad "numStartups not 3"

echo "# claude: a hook hidden behind a second key \"hooks\\u0000\" (json-c cuts a key at its NUL)"
# JavaScript's JSON.parse reads "hooks" and "hooks\u0000" as two keys; json-c read the second
# as "hooks" too, and as the later one it hid the plant: the guard saw {} and left it (test_run_guard
# json_nul_key_cannot_hide_a_plant failed first). The control: node, as Claude Code reads it.
cp "$home/.claude/settings.json" "$base/settings.before"
expect_code 0 "a run that plants a hook behind a NUL key" as_user "$vm" run -q --agent claude -- sh -c \
        'printf "%s" "{\"theme\": \"light\", \"hooks\": {\"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"touch /tmp/PLANTED-NUL\"}]}]}, \"hooks\\u0000\": {}}" >~/.claude/settings.json && cat ~/.claude/settings.json'
expect_in "control: the hook and the NUL key were written inside" "$base/out" 'PLANTED-NUL.*hooks\\u0000'
if command -v node >/dev/null; then
        node -e 'const s = JSON.parse(process.argv[1]); process.exit(JSON.stringify(s.hooks).includes("PLANTED-NUL") ? 0 : 1)' "$(cat "$base/out")" &&
                ok "control: JavaScript reads the planted hook in what was written" || bad "control: node does not see the hook"
fi
expect_not "the hook behind the NUL key is gone from settings.json" "$home/.claude/settings.json" "PLANTED"
cmp -s "$base/settings.before" "$home/.claude/settings.json" && ok "... settings.json is put back whole, as it was" ||
        bad "settings.json: $(cat "$home/.claude/settings.json")"
expect_in "stderr says why" "$base/err" 'settings\.json holds a \\u0000 escape.*put back whole'

echo "# codex: config.toml put back whole when a guarded table changed"
cp "$home/.codex/config.toml" "$base/toml.before"
expect_code 0 "an ordinary change of config.toml (a trusted project)" as_user "$vm" run -q --agent codex -- \
        sh -c 'printf "\n[projects.\"/y\"]\ntrust_level = \"trusted\"\n" >>~/.codex/config.toml'
expect_in "... stayed" "$home/.codex/config.toml" '^\[projects\."/y"\]$'
expect_not "... is not said to be a plant" "$base/err" "planted"
cp "$home/.codex/config.toml" "$base/toml.before"
expect_code 0 "a run that plants an MCP server and notify in config.toml" as_user "$vm" run -q --agent codex -- \
        sh -c 'printf "notify = [\"sh\", \"-c\", \"PLANTED-NOTIFY\"]\n[mcp_servers.planted]\ncommand = \"PLANTED-TOML-MCP\"\n" >>~/.codex/config.toml && cat ~/.codex/config.toml'
expect_in "control: the TOML plants were written inside" "$base/out" "PLANTED-TOML-MCP"
cmp -s "$base/toml.before" "$home/.codex/config.toml" && ok "config.toml is as it was before the run" ||
        bad "config.toml differs: $(cat "$home/.codex/config.toml")"
kept=$(find "$home/.codex" -maxdepth 1 -regextype posix-extended \
        -regex '.*/config\.toml\.vestibule-planted-[0-9]{8}T[0-9]{6}Z' -printf '%f\n')
[ -n "$kept" ] && grep -q PLANTED-TOML-MCP "$home/.codex/$kept" && ok "the agent's version is kept beside it ($kept)" ||
        bad "no config.toml.vestibule-planted-* with the plant: $(ls "$home/.codex")"
expect_in "stderr says it was put back whole" "$base/err" "config\.toml had its guarded tables or keys changed: put back whole"

echo "# opencode: the plugin folder is read-only, a new tools folder is moved aside"
expect_code 0 "a run that tries to plant a plugin and a tool" as_user "$vm" run -q --agent opencode -- \
        sh -c 'echo x >~/.config/opencode/plugin/planted.js; echo "rc=$?"; mkdir ~/.config/opencode/tool && echo y >~/.config/opencode/tool/planted.ts && echo made'
expect_in "the plugin write was refused" "$base/out" "^rc=[1-9]"
expect_in "control: the tool folder was made inside" "$base/out" "^made$"
[ ! -e "$home/.config/opencode/plugin/planted.js" ] && ok "no plugin planted" || bad "plugin planted"
aside=("$home"/.config/opencode/tool.vestibule-planted-*)
[ ! -e "$home/.config/opencode/tool" ] && [ -d "${aside[0]}" ] &&
        ok "the tool folder the run made is moved aside" || bad "tool folder: $(ls "$home/.config/opencode")"

echo "# a SIGKILLed run: the next run -- puts its plants back from the journal"
rm -f "$proj/planted"
(as_user "$vm" run -q --agent claude -- sh -c \
        'python3 -c "import json,os; f=os.environ[\"HOME\"]+\"/.claude/settings.json\"; s=json.load(open(f)); s[\"apiKeyHelper\"]=\"PLANTED-HELPER\"; json.dump(s,open(f,\"w\"))" && touch planted && exec sleep 60' \
        >/dev/null 2>&1 &)
for _ in $(seq 150); do [ -e "$proj/planted" ] && break; sleep 0.1; done
journal=$(find "$home/.local/state/vestibule/agent-guard" -mindepth 1 -maxdepth 1 -regextype posix-extended \
        -regex '.*/[0-9]+-[0-9]+' -printf '%f\n' 2>/dev/null | head -1)
if [ -e "$proj/planted" ] && [ -n "$journal" ]; then
        kill -KILL "${journal%%-*}"
        for _ in $(seq 50); do [ -d "/proc/${journal%%-*}" ] || break; sleep 0.1; done
        # a SIGKILLed run leaves its empty mount-point folder (no sweep of those yet), which
        # run-cmd.test.sh counts as left behind when it runs after this: removed here
        rmdir /tmp/vestibule-hostroot-"${journal%%-*}"-* 2>/dev/null || true
        expect_in "control: after the SIGKILL the plant is in settings.json" "$home/.claude/settings.json" "PLANTED-HELPER"
        expect_code 0 "the next run -- (no --agent) runs" as_user "$vm" run -q -- true
        expect_not "... and has put the plant back" "$home/.claude/settings.json" "PLANTED-HELPER|apiKeyHelper"
        expect_in "... said on stderr" "$base/err" "a run that was killed planted .* put back: $home/\.claude/settings\.json: apiKeyHelper"
        [ -z "$(ls -A "$home/.local/state/vestibule/agent-guard/")" ] && ok "... and removed the journal" ||
                bad "journal left: $(ls -A "$home/.local/state/vestibule/agent-guard/")"
else
        bad "the killed run never planted (planted: $(ls "$proj"), journal: '$journal')"
fi

echo "# a guard that cannot record its file refuses the run (125)"
chmod 000 "$home/.claude/settings.json"
expect_code 125 "an unreadable ~/.claude/settings.json: 125" as_user "$vm" run -q --agent claude -- touch ran
expect_in "... naming the file and the fix" "$base/err" "cannot record $home/\.claude/settings\.json before the start"
[ ! -e "$proj/ran" ] && ok "... and the command never ran" || bad "the command ran"
chmod 600 "$home/.claude/settings.json"
expect_code 125 "a writable folder that holds the journal: 125" \
        as_user "$vm" run -q --allow "$home/.local" --agent claude -- touch "$proj/ran"
expect_in "... naming it and the fix" "$base/err" "guard journal folder .* is in the writable $home/\.local.*XDG_STATE_HOME"
[ ! -e "$proj/ran" ] && ok "... and the command never ran" || bad "the command ran"

echo "# $pass passed, $failed failed"
[ -n "${RUN_CMD_DIR:-}" ] || rm -rf "$base"
[ "$failed" = 0 ]
