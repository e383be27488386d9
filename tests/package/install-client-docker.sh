#!/bin/bash
# tests/package/install-client-docker.sh - `install-client --docker` and `install-client --wsl`
# (issue 25, items 2 and 3): what they write is read back by Claude Code's own CLI (`claude mcp
# list`, which starts the server through `docker run -i` of the OCI image and must say it
# connected) and parses as JSON with exactly the entry the GUI clients (Claude Desktop,
# Cursor, VS Code) start; --wsl writes into a fake Windows tree (/mnt/c/Users/<name> made
# here, given with --windows-home) and prints the entry where that folder is missing. Each
# file starts with another server, which must stay.
#
#   tests/package/install-client-docker.sh VESTIBULE_BIN IMAGE [CLAUDE_BIN]
#
# IMAGE: the server image loaded into the Docker this user reaches (vestibule-mcp:<version>);
# CLAUDE_BIN: the claude CLI (tests/clients' pinned @anthropic-ai/claude-code; its checks are
# skipped without it). Runs as any user with Docker access. Ends with
# "install-client docker/wsl: N passed, N failed, N skipped".
set -uo pipefail

bin=$(realpath "${1:?usage: install-client-docker.sh VESTIBULE_BIN IMAGE [CLAUDE_BIN]}")
image=${2:?usage: install-client-docker.sh VESTIBULE_BIN IMAGE [CLAUDE_BIN]}
claude=${3:-}
passed=0 failed=0 skipped=0
base=$(mktemp -d /tmp/vst-ic-docker.XXXXXX)
trap 'rm -rf "$base"' EXIT
# shellcheck source=tests/package/client-lib.sh
. "$(dirname "$0")/client-lib.sh" # ok, bad, skip, fresh (a new HOME in h), check
# run CMD...: as a client's user would, with this HOME and only a plain PATH (+ claude's dir)
cdir=$(dirname "${claude:-/nonexistent/claude}")
run() { env -i HOME="$h" USER=tester PATH="$cdir:/usr/local/bin:/usr/bin:/bin" TERM=dumb "$@"; }
# entry FILE KEY NAME: the server entry KEY.NAME of the JSON file, as one JSON line (node
# parses it strictly; a parse error fails the check).
entry() {
        node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
                 const e = (j[process.argv[2]] || {})[process.argv[3]];
                 if (!e) { console.error("no entry"); process.exit(1); }
                 console.log(JSON.stringify({command: e.command, args: e.args, env: e.env || {},
                                             others: Object.keys(j[process.argv[2]]).sort()}));' "$@"
}
# expect NAME GOT WANT: exact string equality
expect() {
        if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got $2, want $3"; fi
}
docker_args="[\"run\",\"-i\",\"--rm\",\"-v\",\"/var/run/docker.sock:/var/run/docker.sock\",\"-v\",\"vestibule-state:/var/lib/vestibule\""

# --- claude-code --docker: `claude mcp add`, then the file edited directly; `claude mcp list` -
if [ -x "$claude" ] && docker image inspect "$image" >/dev/null 2>&1; then
        fresh claude
        echo '{"mcpServers": {"other": {"type": "stdio", "command": "/bin/false", "args": [], "env": {}}}}' >"$h/.claude.json"
        out=$(run "$bin" install-client --docker --image "$image" --env VESTIBULE_IMAGE_SOURCE=debian claude-code 2>&1)
        check "claude-code --docker: through claude mcp add" "$out" 'claude mcp add'
        out=$(run timeout 120 claude mcp list 2>&1)
        check "claude-code --docker: claude mcp list starts docker run -i of the image and connects" \
                "$out" "vestibule: docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock -v vestibule-state:/var/lib/vestibule -v $h/.vestibule/workspace:/workspace -e VESTIBULE_IMAGE_SOURCE=debian $image - .*Connected" 'other: '
        fresh claude-file
        echo '{"mcpServers": {"other": {"type": "stdio", "command": "/bin/false", "args": [], "env": {}}}}' >"$h/.claude.json"
        out=$(env -i HOME="$h" PATH=/usr/bin:/bin "$bin" install-client --docker --image "$image" \
                --env VESTIBULE_IMAGE_SOURCE=debian claude-code 2>&1)
        check "claude-code --docker without the CLI: the file is written" "$out" 'wrote the'
        out=$(run timeout 120 claude mcp list 2>&1)
        check "claude-code --docker (file): claude mcp list connects" "$out" \
                "vestibule: docker run -i .* $image - .*Connected" 'other: '
        # control: an image that is not there does not connect, so "Connected" above is real
        fresh claude-control
        run "$bin" install-client --docker --image vestibule-mcp:no-such-tag claude-code >/dev/null 2>&1
        out=$(run timeout 120 claude mcp list 2>&1)
        if grep -q 'vestibule: .*Connected' <<<"$out"; then
                bad "claude-code --docker control: a missing image connected"
        else
                ok "claude-code --docker control: a missing image does not connect"
        fi
else
        skip "claude-code --docker: no claude CLI ('$claude') or no image $image"
fi

# --- the GUI clients on Linux: JSON as written, another server kept, a re-run a no-op ---------
for c in claude-desktop:.config/Claude/claude_desktop_config.json:mcpServers \
        cursor:.cursor/mcp.json:mcpServers vscode:.config/Code/User/mcp.json:servers; do
        IFS=: read -r id file key <<<"$c"
        fresh "gui-$id"
        mkdir -p "$(dirname "$h/$file")"
        echo "{\"$key\": {\"other\": {\"command\": \"/bin/false\"}}, \"theme\": \"dark\"}" >"$h/$file"
        run "$bin" install-client --docker --image "$image" --env VESTIBULE_MEM_MB=300 "$id" >/dev/null 2>&1 ||
                bad "$id --docker: install-client failed"
        got=$(entry "$h/$file" "$key" vestibule 2>&1)
        expect "$id --docker: the JSON entry" "$got" \
                "{\"command\":\"docker\",\"args\":$docker_args,\"-v\",\"$h/.vestibule/workspace:/workspace\",\"-e\",\"VESTIBULE_MEM_MB=300\",\"$image\"],\"env\":{\"PATH\":\"$cdir:/usr/local/bin:/usr/bin:/bin\"},\"others\":[\"other\",\"vestibule\"]}"
        [ -d "$h/.vestibule/workspace" ] && [ "$(stat -c %a "$h/.vestibule/workspace")" = 700 ] &&
                ok "$id --docker: the workspace folder exists, 0700" ||
                bad "$id --docker: no 0700 workspace folder"
        out=$(run "$bin" install-client --docker --image "$image" --env VESTIBULE_MEM_MB=300 "$id" 2>&1)
        check "$id --docker: a second run changes nothing" "$out" 'nothing changed'
done

# --- macOS and Windows: the entry and that system's file, printed ------------------------------
fresh print
out=$(run "$bin" install-client --docker --os macos --workspace /Users/al/work --image "$image" claude-desktop 2>&1)
check "claude-desktop --docker --os macos: the macOS file" "$out" \
        "^# Claude Desktop: add to '~/Library/Application Support/Claude/claude_desktop_config.json'"
got=$(sed 1d <<<"$out" | node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
        console.log(JSON.stringify(j.mcpServers.vestibule));')
expect "claude-desktop --docker --os macos: the printed JSON" "$got" \
        "{\"command\":\"docker\",\"args\":$docker_args,\"-v\",\"/Users/al/work:/workspace\",\"$image\"]}"
out=$(run "$bin" install-client --docker --os windows --workspace 'C:\Users\al\work' --image "$image" claude-desktop 2>&1)
check "claude-desktop --docker --os windows: the Windows file" "$out" \
        "^# Claude Desktop: add to '%APPDATA%\\\\Claude\\\\claude_desktop_config.json'"
got=$(sed 1d <<<"$out" | node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
        console.log(j.mcpServers.vestibule.args[8]);')
expect "claude-desktop --docker --os windows: the folder as Windows writes it" "$got" 'C:\Users\al\work:/workspace'
# --server-network none: the server's container without a network (the allowlist then reaches
# nothing, said in each refusal: tests/e2e/oci.test.mjs); anything else is refused
out=$(run "$bin" install-client --docker --os macos --workspace /w --server-network none --image "$image" cursor 2>&1)
got=$(sed 1d <<<"$out" | node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
        console.log(JSON.stringify(j.mcpServers.vestibule.args));')
expect "cursor --docker --server-network none: --network none before the image" "$got" \
        "$docker_args,\"--network\",\"none\",\"-v\",\"/w:/workspace\",\"$image\"]"
if run "$bin" install-client --docker --server-network host cursor >/dev/null 2>&1; then
        bad "--server-network host was not refused"
else
        ok "--server-network host: refused (only none)"
fi
for id in cursor vscode claude-code; do
        out=$(run "$bin" install-client --docker --os windows --workspace 'C:\w' "$id" 2>&1)
        check "$id --docker --os windows: its Windows file" "$out" \
                "$(case $id in cursor) echo '%USERPROFILE%.\.cursor.mcp\.json' ;; vscode) echo '%APPDATA%.Code.User.mcp\.json' ;; *) echo '%USERPROFILE%.\.claude\.json' ;; esac)"
done
[ ! -e "$h/Library" ] && ok "--os macos|windows: nothing written here" || bad "--os macos wrote a file"
if run "$bin" install-client --docker codex >/dev/null 2>&1; then
        bad "--docker codex was not refused"
else
        ok "--docker codex: refused (no docker entry for it)"
fi

# --- --wsl: the Windows side's files in a fake /mnt/c tree -------------------------------------
fresh wsl
win=$h/mnt/c/Users/al
mkdir -p "$win/AppData/Roaming/Claude" "$win/.cursor"
echo '{"mcpServers": {"other": {"command": "C:\\other.exe"}}, "globalShortcut": "Ctrl+Space"}' \
        >"$win/AppData/Roaming/Claude/claude_desktop_config.json"
out=$(run env WSL_DISTRO_NAME=Ubuntu-24.04 "$bin" install-client --wsl --windows-home "$win" \
        --env VESTIBULE_MEM_MB=300 claude-desktop 2>&1)
check "claude-desktop --wsl: written into the Windows profile" "$out" \
        "wrote the 'vestibule' entry for Claude Desktop into '$win/AppData/Roaming/Claude/claude_desktop_config.json'"
got=$(entry "$win/AppData/Roaming/Claude/claude_desktop_config.json" mcpServers vestibule 2>&1)
expect "claude-desktop --wsl: the JSON entry (wsl.exe -d DISTRO -e env SETTINGS vestibule-mcp)" "$got" \
        "{\"command\":\"wsl.exe\",\"args\":[\"-d\",\"Ubuntu-24.04\",\"-e\",\"/usr/bin/env\",\"VESTIBULE_MEM_MB=300\",\"$bin\"],\"env\":{},\"others\":[\"other\",\"vestibule\"]}"
got=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).globalShortcut)' \
        "$win/AppData/Roaming/Claude/claude_desktop_config.json")
expect "claude-desktop --wsl: the app's own settings stay" "$got" "Ctrl+Space"
run "$bin" install-client --wsl --windows-home "$win" cursor >/dev/null 2>&1
got=$(entry "$win/.cursor/mcp.json" mcpServers vestibule 2>&1)
expect "cursor --wsl: the JSON entry (no distro known: wsl.exe -e vestibule-mcp)" "$got" \
        "{\"command\":\"wsl.exe\",\"args\":[\"-e\",\"$bin\"],\"env\":{},\"others\":[\"vestibule\"]}"
# unreachable: no AppData/Roaming under the profile: printed, nothing created
fresh wsl-none
mkdir -p "$h/mnt/c/Users/bo"
out=$(run "$bin" install-client --wsl --windows-home "$h/mnt/c/Users/bo" claude-desktop 2>&1)
check "claude-desktop --wsl, no Roaming folder: the entry is printed" "$out" \
        "the Windows folder '$h/mnt/c/Users/bo/AppData/Roaming' is not reachable" '"command": "wsl.exe"'
[ ! -e "$h/mnt/c/Users/bo/AppData" ] && ok "--wsl unreachable: nothing created" || bad "--wsl unreachable: created files"
# the install-client safety stays: a read-only Windows file is refused and left as it was
fresh wsl-ro
win=$h/mnt/c/Users/al
mkdir -p "$win/.cursor"
echo '{"mcpServers": {}}' >"$win/.cursor/mcp.json"
chmod 0400 "$win/.cursor/mcp.json"
if run "$bin" install-client --wsl --windows-home "$win" cursor >/dev/null 2>&1; then
        bad "cursor --wsl: a read-only file was not refused"
else
        expect "cursor --wsl: a read-only file is refused, untouched" "$(cat "$win/.cursor/mcp.json")" '{"mcpServers": {}}'
fi
# no --windows-home: Windows is asked (cmd.exe /c echo %USERPROFILE%, then wslpath -u), here
# a fake of each on PATH; cmd.exe also writes the UNC warning it prints when started from a
# Linux folder, on stderr
fresh wsl-ask
fake=$h/fakebin
win="$h/mnt/c/Users/Al Win"
mkdir -p "$fake" "$win/AppData/Roaming/Claude"
cat >"$fake/cmd.exe" <<'FAKE'
#!/bin/sh
echo "'\\wsl.localhost\Ubuntu\tmp' CMD.EXE was started with the above path as the current directory." >&2
[ "$*" = "/c echo %USERPROFILE%" ] || exit 3
printf 'C:\\Users\\Al Win\r\n'
FAKE
cat >"$fake/wslpath" <<FAKE
#!/bin/sh
[ "\$1" = -u ] && [ "\$2" = 'C:\\Users\\Al Win' ] || exit 1
echo "$win"
FAKE
chmod 0755 "$fake/cmd.exe" "$fake/wslpath"
out=$(env -i HOME="$h" USER=al PATH="$fake:/usr/bin:/bin" "$bin" install-client --wsl claude-desktop 2>&1)
check "claude-desktop --wsl: the profile folder Windows names (cmd.exe, wslpath), not \$USER's" "$out" \
        "wrote the 'vestibule' entry for Claude Desktop into '$win/AppData/Roaming/Claude/claude_desktop_config.json'"
# control: without them, the guess from $USER, said
out=$(env -i HOME="$h" USER=al PATH=/usr/bin:/bin "$bin" install-client --wsl claude-desktop 2>&1)
check "claude-desktop --wsl without interop: guessed from \$USER, said" "$out" \
        "Windows did not say its user folder \(no cmd.exe on PATH" "guessed '/mnt/c/Users/al'"
# control: a cmd.exe that echoes the variable unexpanded (it is not set) is not taken for a folder
printf '#!/bin/sh\necho %%USERPROFILE%%\n' >"$fake/cmd.exe"
out=$(env -i HOME="$h" USER=al PATH="$fake:/usr/bin:/bin" "$bin" install-client --wsl claude-desktop 2>&1)
check "claude-desktop --wsl, %USERPROFILE% unset: guessed, said" "$out" "gave no folder" "guessed '/mnt/c/Users/al'"
if run "$bin" install-client --wsl vscode >/dev/null 2>&1; then
        bad "--wsl vscode was not refused"
else
        ok "--wsl vscode: refused (Claude Desktop and Cursor only)"
fi

echo "install-client docker/wsl: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
