#!/usr/bin/env bash
# run-cmd-container.test.sh - `vestibule-mcp run [options] -- CMD` on the container backend
# (VESTIBULE_BACKEND=container, src/engine/hostrun.c), as the usual Ubuntu user: a user in the
# `docker` group against rootful Docker, no root, no VESTIBULE_RUN_AS (as
# scripts/e2e-docker-group.sh). Each code of the exit-code contract (as run-cmd.test.sh checks
# it on native), planted secrets that a control run outside reads and the run inside does not,
# files written owned by the user, --net none and --net allowlist (with controls), stdin
# passthrough, the audit record, and nothing left after a timeout, a SIGTERM and a SIGKILL of
# the run itself. Then a few of them on rootful Podman as root with VESTIBULE_RUN_AS.
#
# Usage (as root, which runs every command as the docker-group user):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/run-cmd-container.test.sh
# Env: RUN_CMD_DG_USER (default vestibule-dg: made and put in the docker group if missing, as
# scripts/e2e-docker-group.sh does), VESTIBULE_IMAGE_SOURCE (default debian).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no rootful Docker).
set -uo pipefail

user=${RUN_CMD_DG_USER:-vestibule-dg}
bin=$(realpath "${VESTIBULE_BIN:?set VESTIBULE_BIN to the vestibule-mcp binary}")
[ "$(id -u)" = 0 ] || { echo "skip: run as root (each command runs as $user)"; exit 77; }
[ -S /var/run/docker.sock ] || { echo "skip: no rootful Docker at /var/run/docker.sock"; exit 77; }
getent group docker >/dev/null || { echo "skip: no docker group"; exit 77; }
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
id -nG "$user" | tr ' ' '\n' | grep -qx docker || usermod -aG docker "$user"

base=$(mktemp -d /var/tmp/run-cmd-ctr.XXXXXX)
home=$base/home
proj=$base/proj
pass=0
failed=0
trap 'rm -rf "$base"' EXIT

install -m 0755 "$bin" "$base/vestibule-mcp"
vm=$base/vestibule-mcp
mkdir -p "$home/.ssh" "$proj"
echo "PLANTED-SSH-KEY-d41d8cd9" >"$home/.ssh/id_ed25519"
echo "API_KEY=PLANTED-DOTENV-5e3f" >"$proj/.env"
echo "PLANTED-TLS-KEY-9c01" >"$proj/server.key"
printf '#!/bin/sh\necho never\n' >"$proj/noexec.sh"
chmod 0644 "$proj/noexec.sh"
chown -R "$user" "$base"
chmod 0755 "$base"

# as_user CMD...: CMD as the docker-group user in the project, with a clean environment, the
# planted secret variables, and the container backend asked for
as_user() {
        (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 AWS_SECRET_ACCESS_KEY=PLANTED-AWS-ENV-31c4 GITHUB_TOKEN=PLANTED-GH-88 \
                HARMLESS_SETTING=kept VESTIBULE_BACKEND=container \
                VESTIBULE_IMAGE_SOURCE="${VESTIBULE_IMAGE_SOURCE:-debian}" "$@")
}
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
wait_for() {
        local i
        for i in $(seq 150); do "$@" && return 0; sleep 0.1; done
        return 1
}
listening() { python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null; }
# expect_code WANT NAME CMD...: CMD's exit status is WANT (its output in $base/out, $base/err)
expect_code() {
        local want=$1 name=$2 got
        shift 2
        "$@" >"$base/out" 2>"$base/err" </dev/null
        got=$?
        if [ "$got" = "$want" ]; then ok "$name"; else
                bad "$name (exit $got, want $want)"
                sed 's/^/     | /' "$base/err" | head -8
        fi
}
expect_out() { grep -qE "$2" "$base/out" && ok "$1" || { bad "$1"; sed 's/^/     | /' "$base/out" | head -8; }; }
expect_err() { grep -qE "$2" "$base/err" && ok "$1" || { bad "$1"; sed 's/^/     | /' "$base/err" | head -8; }; }
# ours MARKER: the containers of this engine whose command names MARKER (other runs share it)
ours() { docker ps -a --filter label=vestibule.run=1 --no-trunc --format '{{.Command}}' | grep -c -- "$1"; }

echo "# the grade"
expect_code 0 "a run on the container backend" as_user "$vm" run -- true
expect_err "the grade on stderr is the container's" "^vestibule: isolation: container"

echo "# the exit-code contract (container backend)"
expect_code 0 "the command's own 0" as_user "$vm" run -q -- true
expect_code 3 "the command's own 3" as_user "$vm" run -q -- sh -c 'exit 3'
expect_code 143 "128+15 for SIGTERM" as_user "$vm" run -q -- sh -c 'kill -TERM $$'
expect_code 137 "128+9 for SIGKILL" as_user "$vm" run -q -- sh -c 'kill -KILL $$'
marker=run-ctr-timeout-$$
expect_code 124 "124 for the timeout" as_user "$vm" run -q --timeout 1 -- bash -c "exec -a $marker sleep 30"
[ "$(ours "$marker")" = 0 ] && ok "no container left after the timeout" || bad "a container outlived the timeout"
expect_code 127 "127 not found (host PATH)" as_user "$vm" run -q -- no-such-command-x1
expect_code 127 "127 not found (a path)" as_user "$vm" run -q -- ./no-such-file
expect_err "... the reason on stderr" "no-such-file: No such file or directory"
expect_code 126 "126 found but not executable" as_user "$vm" run -q -- ./noexec.sh
expect_code 125 "125 for a usage error" as_user "$vm" run --no-such-option -- true
expect_code 125 "125 for --require native on the container backend" \
        as_user "$vm" run --require native -- true
expect_err "... the reason on stderr" "container, lower than --require native"
expect_code 0 "control: --require any runs" as_user "$vm" run --require any -q -- true
expect_code 125 "125 for --overlay (native only)" as_user "$vm" run --overlay -- true
expect_err "... the reason on stderr" "native backend only"
expect_code 125 "125 when the sandbox cannot be set up (an --allow that does not exist)" \
        as_user "$vm" run --allow "$base/nope" -- true
expect_code 125 "125 when the engine cannot be reached" \
        as_user env DOCKER_HOST=unix:///nonexistent.sock "$vm" run -q -- true
expect_err "... the reason on stderr" "isolation could not be set up"

# SIGTERM to vestibule itself: forwarded, 128+15, nothing of the run left
marker=run-ctr-sleeper-$$
as_user "$vm" run -q -- bash -c "exec -a $marker sleep 30" >/dev/null 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker" >/dev/null
pgrep -u "$user" -f "^$marker" >/dev/null && ok "control: the sandboxed sleeper is seen" || bad "no sleeper seen"
pkill -TERM -u "$user" -f "^$vm run -q -- bash -c exec -a $marker"
wait "$runner"
got=$?
[ "$got" = 143 ] && ok "128+15 when vestibule itself is stopped (exit 143)" || bad "stopped: exit $got, want 143"
sleep 0.5
pgrep -u "$user" -f "^$marker" >/dev/null && bad "the sandboxed sleep outlived the run" || ok "nothing of the run is left (process)"
[ "$(ours "$marker")" = 0 ] && ok "nothing of the run is left (container)" || bad "its container is left"
# SIGINT forwarded to a command that handles it
as_user "$vm" run -q -- bash -c "trap 'echo got-int; exit 5' INT; exec -a $marker-int sleep 30 & wait" \
        >"$base/out" 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker-int" >/dev/null
pkill -INT -u "$user" -f "^$vm run -q -- bash -c trap"
wait "$runner"
got=$?
[ "$got" = 5 ] && ok "SIGINT forwarded: the command's own handler chose exit 5" || bad "SIGINT: exit $got, want 5"
expect_out "the command's handler ran" "^got-int"
# SIGKILL of the run itself: the lifeline ends the container, AutoRemove removes it, and the
# next run sweeps the private folder
as_user "$vm" run -q -- bash -c "exec -a $marker-kill sleep 60" >/dev/null 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker-kill" >/dev/null
[ "$(ours "$marker-kill")" = 1 ] && ok "control: its container is there while it runs" || bad "control: no container seen"
folder=$(find /tmp -maxdepth 1 -name 'vestibule-code-*' -user "$user" -type d -newer "$base/out" | head -1)
pkill -KILL -u "$user" -f "^$vm run -q -- bash -c exec -a $marker-kill"
wait "$runner" 2>/dev/null
gone() { ! pgrep -u "$user" -f "^$marker-kill" >/dev/null && [ "$(ours "$marker-kill")" = 0 ]; }
wait_for gone && ok "SIGKILL of the run: its command and container are gone (lifeline + AutoRemove)" ||
        bad "SIGKILL of the run: its command or container is left"
expect_code 0 "the next run" as_user "$vm" run -q -- true
if [ -n "$folder" ]; then
        [ -e "$folder" ] && bad "the killed run's folder $folder is left after the next run" ||
                ok "the killed run's private folder is swept by the next run"
else bad "control: the killed run's private folder was not seen"; fi

# the command cannot hold the lifeline itself (red team: a held writer kept the container past
# a SIGKILL of the run until the next sweep): the FIFO is read-only to it
hold='import os, sys
try:
    fd = os.open("/sandbox/life", os.O_WRONLY); os.set_inheritable(fd, True); print("holding", flush=True)
except OSError as e:
    print("refused", e.errno, flush=True)
os.execvp("bash", ["bash", "-c", "exec -a '"$marker-hold"' sleep 60"])'
as_user "$vm" run -q -- python3 -c "$hold" >"$base/out" 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker-hold" >/dev/null
expect_out "the lifeline FIFO cannot be opened for writing inside (EACCES)" "^refused 13$"
pkill -KILL -u "$user" -f "^$vm run -q -- python3 -c import os, sys"
wait "$runner" 2>/dev/null
gone_hold() { ! pgrep -u "$user" -f "^$marker-hold" >/dev/null && [ "$(ours "$marker-hold")" = 0 ]; }
wait_for gone_hold && ok "SIGKILL of a run whose command tried to hold the lifeline: nothing left" ||
        bad "a command that tried to hold the lifeline outlived a SIGKILL of the run"

echo "# secrets and files"
expect_code 0 "control: outside, the planted key, .env, server.key and variable are there" \
        as_user sh -c 'cat ~/.ssh/id_ed25519 .env server.key; echo "aws=$AWS_SECRET_ACCESS_KEY"'
expect_out "... the key read outside" "PLANTED-SSH-KEY"
expect_out "... .env read outside" "PLANTED-DOTENV"
expect_out "... the variable outside" "aws=PLANTED-AWS-ENV"
expect_code 0 "inside: the same reads" as_user "$vm" run -q -- sh -c \
        'cat ~/.ssh/id_ed25519 .env server.key /etc/shadow 2>&1; echo "aws=[$AWS_SECRET_ACCESS_KEY] gh=[$GITHUB_TOKEN] keep=[$HARMLESS_SETTING]"; id -u'
if grep -q PLANTED "$base/out"; then bad "a planted secret was read inside"; sed 's/^/     | /' "$base/out"
else ok "no planted secret inside (~/.ssh/id_ed25519, .env, server.key, the variables)"; fi
expect_out "~/.ssh is not there inside" "id_ed25519: No such file or directory"
expect_out "the secret variables are dropped, a harmless one kept" "aws=\[\] gh=\[\] keep=\[kept\]"
expect_out "the command runs as the user's uid" "^$(id -u "$user")$"
grep -q "^root:" "$base/out" && bad "/etc/shadow was read inside" || ok "/etc/shadow reads empty inside"
expect_code 1 "--allow-read ~: the real home, read-only, its ~/.ssh masked" \
        as_user "$vm" run -q --allow-read "$home" -- sh -c 'ls -A ~/.ssh; cat ~/.ssh/id_ed25519; touch ~/x'
if grep -q PLANTED "$base/out"; then bad "... the key was read"; else ok "... no key read"; fi
expect_err "... and the home is read-only" "Read-only file system"
expect_code 0 "a write in the project" as_user "$vm" run -q -- sh -c 'echo w >written.txt'
[ "$(stat -c %U "$proj/written.txt" 2>/dev/null)" = "$user" ] && ok "the file written inside is the user's" ||
        bad "written.txt is not the user's: $(stat -c %U "$proj/written.txt" 2>&1)"
expect_code 2 "no write to /usr (read-only)" as_user "$vm" run -q -- sh -c 'echo x >/usr/run-ctr-x'
expect_code 1 "no docker socket inside" as_user "$vm" run -q -- test -e /var/run/docker.sock
expect_code 0 "control: the docker socket is there outside" as_user test -e /var/run/docker.sock
if echo "piped in" | as_user "$vm" run -q -- cat >"$base/out" 2>"$base/err"; then
        expect_out "stdin passes through" "^piped in$"
else bad "stdin passthrough run failed"; fi

# a reader that goes (`| head`): the command gets SIGPIPE, as outside, and the run ends with
# its 141 and its summary (before: vestibule-mcp itself died of SIGPIPE, exit 141, no summary)
outside=$(as_user bash -c 'yes | head -c 10 >/dev/null; echo "${PIPESTATUS[0]}"')
[ "$outside" = 141 ] && ok "control: outside, yes | head gives yes 141" || bad "control: outside $outside"
inside=$(as_user bash -c "$vm run -- yes 2>$home/pipe.err | head -c 10 >/dev/null; echo \"\${PIPESTATUS[0]}\"")
cp "$home/pipe.err" "$base/err"
[ "$inside" = 141 ] && ok "run -- yes | head: the command's SIGPIPE, 141" || bad "run -- yes | head: $inside, want 141"
expect_err "... and the run's summary is there" "^vestibule: exit 141"

echo "# the limits"
alloc='b = bytearray(200 << 20); print("allocated")'
expect_code 137 "memory: 200 MiB under VESTIBULE_MEM_MB=64 is killed" \
        as_user env VESTIBULE_MEM_MB=64 "$vm" run -q -- python3 -c "$alloc"
expect_code 0 "control: the same under VESTIBULE_MEM_MB=512" \
        as_user env VESTIBULE_MEM_MB=512 "$vm" run -q -- python3 -c "$alloc"
forks='import os, time
n = 0
try:
    for i in range(60):
        if os.fork() == 0:
            time.sleep(2); os._exit(0)
        n += 1
except OSError as e:
    print("refused after", n)
else:
    print("forked", n)'
expect_code 0 "pids: 60 forks under VESTIBULE_PIDS_MAX=20" \
        as_user env VESTIBULE_PIDS_MAX=20 "$vm" run -q -- python3 -c "$forks"
expect_out "... refused before 20" "^refused after 1[0-9]$"
expect_code 0 "control: under VESTIBULE_PIDS_MAX=128" \
        as_user env VESTIBULE_PIDS_MAX=128 "$vm" run -q -- python3 -c "$forks"
expect_out "... all 60 forked" "^forked 60$"

echo "# the network"
echo "served through the proxy" >"$base/index.html"
chmod a+r "$base/index.html"
(cd "$base" && exec python3 -m http.server --bind 127.0.0.1 38519 >/dev/null 2>&1) &
srv=$!
wait_for listening 38519
fetch='import urllib.request,sys; print(urllib.request.urlopen("http://pinned.test/index.html", timeout=5).read().decode())'
pin=(env VESTIBULE_EGRESS_ALLOW=pinned.test VESTIBULE_EGRESS_PIN=pinned.test=127.0.0.1:38519)
expect_code 0 "--net allowlist: a listed host answers through the proxy" \
        as_user "${pin[@]}" "$vm" run -q --net allowlist:pinned.test -- python3 -c "$fetch"
expect_out "the page came through" "served through the proxy"
expect_code 1 "control: the same fetch with --net none fails" \
        as_user "${pin[@]}" "$vm" run -q -- python3 -c "$fetch"
expect_code 1 "control: a host not on the list is refused" \
        as_user "${pin[@]}" "$vm" run --net allowlist:pinned.test -- python3 -c "${fetch/pinned.test/other.test}"
expect_err "... and the summary names it" "^vestibule: tried: proxy refused other\.test:80 "
expect_code 1 "--net none: the host's loopback listener is not reachable" as_user "$vm" run -q -- \
        python3 -c "import socket; socket.create_connection(('127.0.0.1', 38519), 2)"
expect_code 0 "control: it is reachable outside" as_user \
        python3 -c "import socket; socket.create_connection(('127.0.0.1', 38519), 2)"
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null

echo "# a remote engine (the volume path): 125"
# the same engine reached over tcp:// on the loopback (a forwarder of its socket): the daemon is
# then taken as remote, which cannot bind this machine's folders
python3 -c '
import socket, sys, threading
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 38523)); ls.listen(16)
def pipe(a, b):
    try:
        while (d := a.recv(65536)):
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
while True:
    c, _ = ls.accept()
    u = socket.socket(socket.AF_UNIX); u.connect("/var/run/docker.sock")
    for a, b in ((c, u), (u, c)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()' &
fwd=$!
wait_for listening 38523
expect_code 125 "a remote engine: 125" as_user env DOCKER_HOST=tcp://127.0.0.1:38523 "$vm" run -q -- true
expect_err "... the reason on stderr" "does not see them \(a remote engine"
expect_code 0 "control: the same engine through its socket runs" as_user "$vm" run -q -- true
kill "$fwd" 2>/dev/null
wait "$fwd" 2>/dev/null

echo "# auto lands on the container backend where native cannot be set up"
# bwrap --disable-userns: no user namespace can be made below it (bubblewrap 0.8+), so the
# native sandbox cannot be set up (the control) and auto goes on to the container backend
if bwrap --dev-bind / / --unshare-user --disable-userns --assert-userns-disabled true 2>/dev/null; then
        nouserns=(bwrap --dev-bind / / --unshare-user --disable-userns --assert-userns-disabled)
        expect_code 125 "control: native, no user namespaces: 125" \
                as_user env VESTIBULE_BACKEND=native "${nouserns[@]}" "$vm" run -q -- true
        expect_code 6 "auto, no user namespaces: the command runs (its own 6)" \
                as_user env VESTIBULE_BACKEND=auto "${nouserns[@]}" "$vm" run -- sh -c 'exit 6'
        expect_err "... and the grade says container" "^vestibule: isolation: container"
else
        echo "skip auto's landing: this bwrap has no --disable-userns (bubblewrap 0.8+)"
fi

echo "# mcp wrap on the container backend"
# a stand-in stdio server: the wrap relays its answers and announces the grade it really gets
cat >"$proj/srv.py" <<'PY'
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        r = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "t", "version": "1"}}
    else:
        r = {"home": sorted(os.listdir(os.path.expanduser("~")))}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
PY
chown "$user" "$proj/srv.py"
msgs='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ls"}}'
expect_code 0 "mcp wrap -- python3 srv.py runs and ends with the server" \
        as_user sh -c "printf '%s\n' '$msgs' | $vm mcp wrap -- python3 srv.py"
expect_out "... the grade notification says container (not native's)" \
        '"data":"isolation: container \(mcp wrap of python3\)"'
expect_out "... the tool call's answer came back: the private (empty) home" '"id": 2, "result": \{"home": \[\]\}'

echo "# rootful Podman, as root with VESTIBULE_RUN_AS"
if [ -S /run/podman/podman.sock ]; then
        ids=$(id -u "$user"):$(id -g "$user")
        as_root() {
                (cd "$proj" && env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
                        AWS_SECRET_ACCESS_KEY=PLANTED-AWS-ENV-31c4 VESTIBULE_BACKEND=container \
                        VESTIBULE_RUNTIME=podman VESTIBULE_RUN_AS="$ids" \
                        VESTIBULE_IMAGE_SOURCE="${VESTIBULE_IMAGE_SOURCE:-debian}" "$@")
        }
        expect_code 125 "control: as root without VESTIBULE_RUN_AS: 125" \
                as_root env -u VESTIBULE_RUN_AS "$vm" run -q -- true
        expect_err "... naming VESTIBULE_RUN_AS" "VESTIBULE_RUN_AS"
        expect_code 3 "its own 3" as_root "$vm" run -q -- sh -c 'exit 3'
        expect_code 143 "128+15" as_root "$vm" run -q -- sh -c 'kill -TERM $$'
        expect_code 127 "127 not found (a path)" as_root "$vm" run -q -- ./no-such-file
        expect_code 0 "the reads inside" as_root "$vm" run -q -- sh -c \
                'cat .env server.key; echo "aws=[$AWS_SECRET_ACCESS_KEY]"; id -u'
        grep -q PLANTED "$base/out" && bad "a planted secret was read (Podman)" ||
                ok "no planted secret inside (Podman)"
        expect_out "the command runs as VESTIBULE_RUN_AS" "^$(id -u "$user")$"
else
        echo "skip rootful Podman: no /run/podman/podman.sock"
fi

echo "# the audit log"
expect_code 0 "vestibule-mcp audit reads the log" as_user "$vm" audit 500
expect_out "the run's audit line: exit and the container grade" \
        "run --  error \(exit code 3\).*isolation: container.*\| sh -c 'exit 3'$"
expect_out "the audit names the host the proxy refused" "isolation: container  tried: proxy refused other\.test:80 "

# the private folders: each run's gone with it, a killed run's swept by the next; none may be
# stranded without its owner file (no sweep would ever remove it)
stranded=0
for d in $(find /tmp -maxdepth 1 -name 'vestibule-code-*' -user "$user" -type d); do
        [ -e "$d.owner" ] || stranded=$((stranded + 1))
done
[ "$stranded" = 0 ] && ok "no private folder stranded without its owner file" || bad "$stranded folders stranded in /tmp"

echo "# $pass passed, $failed failed"
[ "$failed" = 0 ]
