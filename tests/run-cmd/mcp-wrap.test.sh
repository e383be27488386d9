#!/usr/bin/env bash
# mcp-wrap.test.sh - `vestibule-mcp mcp wrap -- SERVER` against the real kernel, as the
# unprivileged test user, driven by the official MCP SDK client (mcp-wrap-client.mjs):
# the reference server @modelcontextprotocol/server-filesystem from npm answers tools/list and
# read_file the same wrapped as plain, and the wrap sends one grade notification; the reference
# server @modelcontextprotocol/server-everything (`node dist/index.js stdio`) answers tools/list
# (names, input schemas), echo, get-sum, get-tiny-image (an image), get-structured-content,
# get-resource-reference (an embedded resource), prompts/list + get and resources/list + read the
# same wrapped as plain (its generated resources' timestamps aside); a hostile
# stand-in server (hostile-server.mjs) that reads a planted ~/.ssh/id_ed25519, connects to a
# listener on the loopback and forks a daemon gets the key, the connection and the daemon plain
# (the control) and none of them wrapped; the wrap logs its tools/call on stderr.
#
# Usage (as root, which runs every command as the test user; needs node and npm, and the npm
# registry for `npm ci` of package.json / package-lock.json here):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/mcp-wrap.test.sh
# Env: RUN_CMD_USER (default vestibule-test), MCP_WRAP_DIR (default a fresh /var/tmp folder).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, no node/npm).
set -uo pipefail
# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"

user=${RUN_CMD_USER:-vestibule-test}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${VESTIBULE_BIN:?set VESTIBULE_BIN to the vestibule-mcp binary}")
[ "$(id -u)" = 0 ] || { echo "skip: run as root (each command runs as $user)"; exit 77; }
id "$user" >/dev/null 2>&1 || { echo "skip: no user $user"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "skip: no node/npm"; exit 77; }

base=${MCP_WRAP_DIR:-$(mktemp -d /var/tmp/mcp-wrap.XXXXXX)}
home=$base/home
proj=$base/proj
npmdir=$base/npm
pass=0
failed=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }

install -m 0755 "$bin" "$base/vestibule-mcp"
vm=$base/vestibule-mcp
mkdir -p "$home/.ssh" "$proj" "$npmdir"
echo "PLANTED-SSH-KEY-d41d8cd9" >"$home/.ssh/id_ed25519"
echo "project-notes-7f3a" >"$proj/notes.txt"
cp "$here/package.json" "$here/package-lock.json" "$here/hostile-server.mjs" \
        "$here/mcp-wrap-client.mjs" "$npmdir/"
(cd "$npmdir" && npm ci --no-audit --no-fund --loglevel=error) || { bad "npm ci"; exit 1; }
chown -R "$user" "$base"
chmod 0755 "$base"

# The listener the hostile server phones home to: one line per connection into $base/calls.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$port" "$base/calls" <<'PY' &
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("connection\n")
    c.close()
PY
listener=$!
trap 'kill $listener 2>/dev/null' EXIT
: >"$base/calls"
chown "$user" "$base/calls"

as_user() {
        (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 HOSTILE_PORT="$port" "$@")
}
daemons() { pgrep -u "$user" -f '^sleep 3007$' || true; }

find /tmp -maxdepth 1 -name 'vestibule-hostroot-*' -user "$user" >"$base/roots.before"

# 1. The reference server, plain and wrapped.
out=$(as_user node "$npmdir/mcp-wrap-client.mjs" fs "$vm" "$npmdir" "$proj" notes.txt 2>"$base/fs.err")
rc=$?
echo "$out"
pass=$((pass + $(grep -c '^ok' <<<"$out")))
[ $rc = 0 ] || bad "server-filesystem through the wrap (stderr: $(tail -5 "$base/fs.err"))"

out=$(as_user node "$npmdir/mcp-wrap-client.mjs" everything "$vm" "$npmdir" "$proj" 2>"$base/everything.err")
rc=$?
echo "$out"
pass=$((pass + $(grep -c '^ok' <<<"$out")))
[ $rc = 0 ] || bad "server-everything through the wrap (stderr: $(tail -5 "$base/everything.err"))"

# 2. The hostile server, plain (the control: each probe works) then wrapped.
kill_daemons() { for p in $(daemons); do kill "$p"; done; }
kill_daemons
res=$(as_user node "$npmdir/mcp-wrap-client.mjs" hostile "$vm" "$npmdir" "$proj" plain 2>/dev/null | sed -n 's/^RESULT //p')
echo "plain:   $res"
sleep 1
grep -q '"key":"PLANTED-SSH-KEY-d41d8cd9"' <<<"$res" && ok "control: plain server reads ~/.ssh/id_ed25519" || bad "control: plain key read ($res)"
[ "$(wc -l <"$base/calls")" -ge 1 ] && ok "control: plain server connects to 127.0.0.1:$port" || bad "control: plain connect"
[ -n "$(daemons)" ] && ok "control: plain server leaves a daemon ($(daemons | wc -l))" || bad "control: plain daemon"
kill_daemons
: >"$base/calls"

res=$(as_user node "$npmdir/mcp-wrap-client.mjs" hostile "$vm" "$npmdir" "$proj" wrapped 2>"$base/hostile.err" | sed -n 's/^RESULT //p')
echo "wrapped: $res"
sleep 3
[ -n "$res" ] && ok "wrapped hostile server answered its tools/call" || bad "wrapped call (stderr: $(tail -5 "$base/hostile.err"))"
if [ -n "$res" ] && ! grep -q PLANTED <<<"$res"; then ok "wrapped: the key is not there ($(grep -o '"key":"[^"]*"' <<<"$res"))"; else bad "wrapped key read ($res)"; fi
[ "$(wc -l <"$base/calls")" = 0 ] && ok "wrapped: no connection reached the listener ($(grep -o '"connect":"[^"]*"' <<<"$res"))" || bad "wrapped connect"
[ -z "$(daemons)" ] && ok "wrapped: no daemon left after the wrap ended" || { bad "wrapped daemon left: $(daemons)"; kill_daemons; }
grep -q 'vestibule: mcp wrap: hostile-server.mjs tools/call exfil' "$base/hostile.err" &&
        ok "wrapped: the tools/call is logged with the server's name" || bad "tools/call log line"
[ -z "$(pgrep -u "$user" -f 'vestibule-mcp mcp wrap' || true)" ] && ok "no wrap process left" || bad "wrap process left"
# The audit log (the same as run_code's, read by `vestibule-mcp audit`) has the tools/call with
# the wrapped server's name, and the server's own run -- with its command line.
as_user "$vm" audit 100 >"$base/audit.out" 2>&1
grep -qE "mcp wrap hostile-server.mjs  ok  .*isolation: native.*\| exfil " "$base/audit.out" &&
        ok "the audit log has the tools/call (mcp wrap hostile-server.mjs, exfil, answered)" ||
        { bad "no tools/call in the audit log"; sed 's/^/     | /' "$base/audit.out" | tail -8; }
grep -qE "run --  ok \(exit code 0\)  wall .*isolation: native.*\| [^ ]*node [^ ]*hostile-server" "$base/audit.out" &&
        ok "the audit log has the wrapped server's run, its grade and usage" ||
        { bad "no run of the wrapped server in the audit log"; sed 's/^/     | /' "$base/audit.out" | tail -8; }

# The audit names what the hostile server tried (the seccomp supervisor watches open and
# connect, init names what was left): the secret's path, the address it phoned, the daemon
# killed. The control: the same line of server-filesystem's run has no "tried:" at all.
hostile_line=$(grep -E "run --  ok .*\| [^ ]*node [^ ]*hostile-server" "$base/audit.out" | tail -1)
for want in "open $home/.ssh/id_ed25519" "connect 127.0.0.1:$port" "left 1 task, killed: sleep"; do
        grep -qF "$want" <<<"$hostile_line" && ok "the audit names what the wrapped server tried: $want" ||
                bad "the audit line does not name '$want': $hostile_line"
done
# (the listing cuts the command line: the reference servers are the node_modules/@modelcontextprotocol ones)
ref_lines=$(grep -E "run --  ok .*\| [^ ]*node [^ ]*/node_modules/@mo" "$base/audit.out")
[ "$(grep -c . <<<"$ref_lines")" -ge 2 ] && ! grep -q "tried:" <<<"$ref_lines" &&
        ok "control: the reference servers' run lines name nothing tried ($(grep -c . <<<"$ref_lines") runs)" ||
        bad "control: the reference servers' audit lines: $ref_lines"

# 2b. Fail closed: a tools/call whose audit record cannot be written is answered with a JSON-RPC
# error, never relayed (before: relayed, said on stderr only). The control call before it is
# relayed; the server's own stderr line counts the calls that reached it.
out=$(as_user node "$npmdir/mcp-wrap-client.mjs" auditfail "$vm" "$npmdir" "$proj" "$home/.vestibule/audit" 2>"$base/auditfail.err")
rc=$?
echo "$out"
pass=$((pass + $(grep -c '^ok' <<<"$out")))
[ $rc = 0 ] || bad "audit failure through the wrap (stderr: $(tail -5 "$base/auditfail.err"))"
reached=$(grep -c 'hostile-server: exfil called' "$base/auditfail.err")
[ "$reached" = 1 ] && ok "  ... the refused call never reached the server (1 call there: the control)" ||
        bad "calls that reached the server: $reached, want 1"
grep -q 'refused, not relayed' "$base/auditfail.err" && ok "  ... and the wrap says so on stderr" || bad "no stderr line for the refused call"

# 2c. Every tools/call is read the way the server reads it (tests/adversarial/server.md): a
# method written "tools\/call" (as json-c, PHP and others write '/') or "\u0074ools/call",
# arguments nested past json-c's default depth, and a second key "method\u0000" (json-c cut the
# key at the NUL and read "ping") each went past the audit unrecorded (before: relayed even
# with the log failing). The control call, with the log writable, is relayed and logged.
out=$(as_user node "$npmdir/mcp-wrap-client.mjs" rawcalls "$vm" "$npmdir" "$proj" "$home/.vestibule/audit" 2>"$base/rawcalls.err")
rc=$?
echo "$out"
pass=$((pass + $(grep -c '^ok' <<<"$out")))
[ $rc = 0 ] || bad "raw tools/call forms through the wrap (stderr: $(tail -5 "$base/rawcalls.err"))"
reached=$(grep -c 'hostile-server: exfil called' "$base/rawcalls.err")
[ "$reached" = 1 ] && ok "  ... none of the four reached the server (1 call there: the control)" ||
        bad "raw forms: calls that reached the server: $reached, want 1"

# 2d. A CR inside a line: JSON takes it as a blank, Python's text reader (universal newlines,
# as the MCP Python SDK reads stdin) as a line's end, and ran the tools/call after it with no
# record. A real python3 server that reads stdin as the SDK's stdio_server does (a fresh
# io.TextIOWrapper over sys.stdin.buffer: universal newlines, where sys.stdin itself splits on
# LF only) and runs each tools/call it reads; control: a plain call.
cat >"$npmdir/pysrv.py" <<'PY'
import io, json, sys
for line in io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("method") == "tools/call":
        print("PY-EXECUTED " + m["params"]["name"], file=sys.stderr, flush=True)
PY
chown "$user" "$npmdir/pysrv.py"
call7='{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exfil","arguments":{}}}'
as_user sh -c "printf '%s\r%s\r}\n' '{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"x\":' '$call7' | $vm mcp wrap --allow-read $npmdir --allow $proj -- python3 $npmdir/pysrv.py >/dev/null 2>$base/cr.err"
as_user sh -c "printf '%s\n' '$call7' | $vm mcp wrap --allow-read $npmdir --allow $proj -- python3 $npmdir/pysrv.py >/dev/null 2>$base/cr-control.err"
grep -q 'PY-EXECUTED exfil' "$base/cr-control.err" && ok "control: the python3 server runs a plain tools/call through the wrap" ||
        bad "control: python3 server: $(tail -3 "$base/cr-control.err")"
! grep -q 'PY-EXECUTED' "$base/cr.err" && grep -q 'carriage return' "$base/cr.err" &&
        ok "a tools/call behind a CR inside a line does not reach a python3 server, and stderr says why" ||
        bad "CR inside a line: $(tail -3 "$base/cr.err")"

# 3. The exit-code contract and the ends of the relay, with sh as the server.
expect_code() {
        local want=$1 name=$2 got
        shift 2
        "$@"
        got=$?
        [ "$got" = "$want" ] && ok "$name (exit $got)" || bad "$name: exit $got, want $want"
}
expect_code 7 "the server's own exit code" \
        as_user sh -c "printf x | $vm mcp wrap --allow $proj -- sh -c 'cat >/dev/null; exit 7' >/dev/null 2>&1"
start=$(date +%s)
expect_code 3 "a server that exits while the client stays" \
        as_user bash -c "exec $vm mcp wrap --allow $proj -- sh -c 'exit 3' < <(sleep 20) 2>/dev/null"
[ $(($(date +%s) - start)) -lt 15 ] && ok "  ... without waiting for the client" || bad "waited for the client"
start=$(date +%s)
as_user sh -c "$vm mcp wrap --allow $proj -- sh -c 'trap \"\" TERM HUP; exec 0<&-; sleep 3008' </dev/null 2>/dev/null"
took=$(($(date +%s) - start))
[ $took -ge 4 ] && [ $took -lt 20 ] && ok "client gone: a server that ignores stdin's end and SIGTERM is killed after the grace (${took} s)" ||
        bad "client gone: took $took s"
[ -z "$(pgrep -u "$user" -f '^sleep 3008$' || true)" ] && ok "  ... and nothing of it is left" || bad "sleep 3008 left"
# A server that reads nothing, and a client that wrote more than a pipe holds and closed: the
# wrap's client-to-server thread stays blocked in its write and never sees the EOF (the
# run-command helper's review: still there after 36 s). The wrap watches its stdin's hangup
# (a pipe whose writer exited; a file at once) and, once the server has taken nothing for 20 s,
# stops it. 150 kB: more than the server's pipe holds, less than the client's writes can park
# (so the writer exits). Bounded by timeout(1) at 60 s; a file as stdin too.
head -c 150000 /dev/zero | tr '\0' '\n' >"$base/blank150k"
chmod 0644 "$base/blank150k"
for how in pipe file; do
        start=$(date +%s)
        if [ $how = pipe ]; then
                as_user sh -c "cat $base/blank150k | timeout 60 $vm mcp wrap --allow $proj -- sleep 3010 >/dev/null 2>&1"
        else
                as_user sh -c "timeout 60 $vm mcp wrap --allow $proj -- sleep 3010 <$base/blank150k >/dev/null 2>&1"
        fi
        rc=$?
        took=$(($(date +%s) - start))
        [ "$rc" != 124 ] && [ $took -lt 50 ] && ok "client gone ($how), server reading nothing: the wrap ends (exit $rc, ${took} s)" ||
                bad "client gone ($how), server reading nothing: exit $rc after ${took} s (124: still there at 60 s)"
done
[ -z "$(pgrep -u "$user" -f '^sleep 3010$' || true)" ] && ok "  ... and nothing of it is left" ||
        { bad "sleep 3010 left"; pkill -u "$user" -f '^sleep 3010$' || true; }
# The client kills the wrap (as a client that quits does): the run gets PDEATHSIG SIGTERM.
as_user bash -c "exec $vm mcp wrap --allow $proj -- sleep 3009 < <(sleep 30) 2>/dev/null" &
wrap_pid=$!
for _ in $(seq 100); do [ -n "$(pgrep -u "$user" -f '^sleep 3009$' || true)" ] && break; sleep 0.1; done
[ -n "$(pgrep -u "$user" -f '^sleep 3009$' || true)" ] && ok "control: the wrapped sleep 3009 runs" || bad "sleep 3009 never started"
kill -TERM "$(pgrep -u "$user" -f "^$vm mcp wrap --allow $proj -- sleep 3009$" | sort -n | head -1)"
wait "$wrap_pid"
sleep 4
[ -z "$(pgrep -u "$user" -f '^sleep 3009$' || true)" ] && ok "the wrap killed by its client: nothing of the server is left" ||
        bad "sleep 3009 left after the wrap was killed"
{ printf '{"jsonrpc":"2.0","method":"notifications/big","params":{"d":"'; head -c 15000000 /dev/zero | tr '\0' b; printf '"}}\n'; } >"$base/big15"
expect_code 0 "a 15 MB message echoed by a server that writes while it reads" \
        as_user sh -c "timeout 60 $vm mcp wrap --allow $proj -- cat <$base/big15 >$base/out15 2>/dev/null"
cmp -s "$base/big15" "$base/out15" && ok "  ... arrives whole" || bad "15 MB line: $(wc -c <"$base/out15") bytes came back"
head -c 17000000 /dev/zero | tr '\0' a >"$base/big"
expect_code 1 "a message over 16 MiB" as_user sh -c "$vm mcp wrap --allow $proj -- cat <$base/big >/dev/null 2>$base/big.err"
grep -q 'longer than 16 MiB' "$base/big.err" && ok "  ... said on stderr" || bad "16 MiB message: $(cat "$base/big.err")"

# New folders since the start whose server has ended (each is named after its server's pid:
# lib.sh; the live runs of the scripts beside this one, as the same user, are not counted).
new_roots=$(rc_roots_left "$user" "$base/roots.before")
[ -z "$new_roots" ] && ok "no mount-point folders left in /tmp" || bad "left in /tmp: $(echo $new_roots)"

echo "mcp-wrap: $pass passed, $failed failed"
[ $failed = 0 ] && rm -rf "$base"
[ $failed = 0 ]
