#!/usr/bin/env bash
# run-cmd.test.sh - `vestibule-mcp run [options] -- CMD` against the real kernel, as the
# unprivileged test user: real programs (python3's doctest over its own stdlib modules, GNU make
# driving cc, python3 -m unittest, node --test) pass inside the host view; planted secrets
# (~/.ssh/id_ed25519, a project .env and server.key, $AWS_SECRET_ACCESS_KEY) that a control run
# outside shows exist read as nothing inside; each code of the exit-code contract; writes
# outside the project, the loopback of the host and stdin passthrough.
#
# Usage (as root, which runs every command as the test user):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/run-cmd.test.sh
# Env: RUN_CMD_USER (default vestibule-test), RUN_CMD_DIR (default a fresh /var/tmp folder).
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, or no such user).
set -uo pipefail
# shellcheck source=tests/run-cmd/lib.sh
. "$(dirname "$0")/lib.sh"

user=${RUN_CMD_USER:-vestibule-test}
bin=$(realpath "${VESTIBULE_BIN:?set VESTIBULE_BIN to the vestibule-mcp binary}")
[ "$(id -u)" = 0 ] || { echo "skip: run as root (each command runs as $user)"; exit 77; }
id "$user" >/dev/null 2>&1 || { echo "skip: no user $user"; exit 77; }

base=${RUN_CMD_DIR:-$(mktemp -d /var/tmp/run-cmd.XXXXXX)}
home=$base/home
proj=$base/proj
pass=0
failed=0

# The test user's own copy of the binary (the build tree may be unreadable for it).
install -m 0755 "$bin" "$base/vestibule-mcp"
vm=$base/vestibule-mcp
mkdir -p "$home/.ssh" "$home/.aws" "$proj/tests"
echo "PLANTED-SSH-KEY-d41d8cd9" >"$home/.ssh/id_ed25519"
echo "[default]
aws_secret_access_key = PLANTED-AWS-FILE-77aa" >"$home/.aws/credentials"
echo "API_KEY=PLANTED-DOTENV-5e3f" >"$proj/.env"
echo "PLANTED-TLS-KEY-9c01" >"$proj/server.key"
cat >"$proj/hello.c" <<'C'
#include <stdio.h>
int main(void) { puts("built and ran inside"); return 0; }
C
printf 'all: hello\n\t./hello\nhello: hello.c\n\tcc -O2 -o hello hello.c\n' >"$proj/Makefile"
cat >"$proj/tests/test_calc.py" <<'PY'
import unittest
class Calc(unittest.TestCase):
    def test_add(self):
        self.assertEqual(sum([1, 2, 3]), 6)
    def test_tmp_is_writable(self):
        import tempfile
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"x")
PY
touch "$proj/tests/__init__.py"
cat >"$proj/calc.test.mjs" <<'JS'
import test from 'node:test';
import assert from 'node:assert';
test('adds', () => assert.strictEqual(1 + 2, 3));
JS
printf '#!/bin/sh\necho never\n' >"$proj/noexec.sh"
mkdir -p "$proj/.git/hooks"
echo "[core]" >"$proj/.git/config"
chmod 0644 "$proj/noexec.sh"
chown -R "$user" "$base"
chmod 0755 "$base"

# as_user CMD...: CMD as the test user in the project, with a clean environment plus the
# planted secret variables.
as_user() {
        (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 AWS_SECRET_ACCESS_KEY=PLANTED-AWS-ENV-31c4 GITHUB_TOKEN=PLANTED-GH-88 \
                ANTHROPIC_API_KEY=PLANTED-ANT-12 HARMLESS_SETTING=kept "$@")
}
ok() { pass=$((pass + 1)); echo "ok   $1"; }
# wait_for CMD...: until CMD succeeds, at most 15 s (this host may be loaded).
wait_for() {
        local i
        for i in $(seq 150); do "$@" && return 0; sleep 0.1; done
        return 1
}
listening() { python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
# expect_code WANT NAME CMD...: CMD's exit status is WANT.
expect_code() {
        local want=$1 name=$2 got
        shift 2
        "$@" >"$base/out" 2>"$base/err" </dev/null
        got=$?
        if [ "$got" = "$want" ]; then ok "$name (exit $got)"; else
                bad "$name: exit $got, want $want"; sed 's/^/     | /' "$base/out" "$base/err" | head -20; fi
}
# expect_out NAME PATTERN: the last run's stdout matches PATTERN (grep -E).
expect_out() { if grep -qE -- "$2" "$base/out"; then ok "$1"; else bad "$1: stdout lacks /$2/"; sed 's/^/     | /' "$base/out" "$base/err" | head -20; fi; }
# expect_no NAME PATTERN: neither output of the last run matches PATTERN.
expect_no() { if grep -qE -- "$2" "$base/out" "$base/err"; then bad "$1: /$2/ is there"; sed 's/^/     | /' "$base/out" | head; else ok "$1"; fi; }

echo "# controls: outside the sandbox the planted secrets are there"
expect_code 0 "control: reads ~/.ssh/id_ed25519" as_user cat "$home/.ssh/id_ed25519"
expect_out "control: the key's text" "PLANTED-SSH-KEY"
expect_code 0 "control: reads .env and server.key" as_user cat .env server.key
expect_out "control: the .env's text" "PLANTED-DOTENV"
expect_code 0 "control: the environment has the key" as_user sh -c 'echo "$AWS_SECRET_ACCESS_KEY $GITHUB_TOKEN"'
expect_out "control: the variable's value" "PLANTED-AWS-ENV"

echo "# inside: the same reads get nothing"
expect_code 1 "~/.ssh/id_ed25519 is not there" as_user "$vm" run -- cat "$home/.ssh/id_ed25519"
expect_no "no key text" "PLANTED-SSH-KEY"
expect_code 0 ".env and server.key read empty" as_user "$vm" run -- cat .env server.key
expect_no "no .env or key text" "PLANTED-(DOTENV|TLS)"
expect_code 0 "the secret variables are gone" as_user "$vm" run -- sh -c 'env; echo "[$AWS_SECRET_ACCESS_KEY]"'
expect_no "no secret variable" "PLANTED-(AWS|GH|ANT)"
expect_out "other variables pass" "^HARMLESS_SETTING=kept$"
expect_code 0 "password-manager and Kerberos variables are gone (red team #8)" \
        as_user env OP_SESSION_abc=PLANTED-OP-1 BW_SESSION=PLANTED-BW-2 KRB5CCNAME=FILE:/tmp/PLANTED-KRB-3 \
        TF_VAR_db_password=PLANTED-TF-4 "$vm" run -q -- env
expect_no "no password-manager or Kerberos value" "PLANTED-(OP|BW|KRB|TF)"
expect_code 0 "control: outside, those variables are there" \
        as_user env OP_SESSION_abc=PLANTED-OP-1 BW_SESSION=PLANTED-BW-2 KRB5CCNAME=FILE:/tmp/PLANTED-KRB-3 \
        TF_VAR_db_password=PLANTED-TF-4 env
expect_out "control: the 1Password value" "PLANTED-OP-1"
expect_code 0 "--env NAME passes one dropped variable on" \
        as_user "$vm" run -q --env GITHUB_TOKEN -- sh -c 'echo "[$GITHUB_TOKEN] [$AWS_SECRET_ACCESS_KEY]"'
expect_out "only that one" "^\[PLANTED-GH-88\] \[\]$"
expect_code 0 "with the home readable, its secrets are masked" \
        as_user "$vm" run --allow-read "$home" -- sh -c 'ls -a ~/.ssh ~/.aws; cat ~/.ssh/id_ed25519 ~/.aws/credentials 2>&1; true'
expect_no "no key text under --allow-read ~" "PLANTED-(SSH|AWS)"
# what the run-command helper's review found readable there (added to secrets.list); the
# control is the file beside them that is no secret
mkdir -p "$home/.config/git" "$home/.config/containers"
echo "PLANTED-GITCRED-4a" >"$home/.config/git/credentials"
echo "PLANTED-AUTHJSON-4b" >"$home/.config/containers/auth.json"
echo "PLANTED-PGPASS-4c" >"$home/.pgpass"
echo "export TOKEN=PLANTED-HISTORY-4d" >"$home/.bash_history"
echo "PLAIN-NOTES-4e" >"$home/notes.txt"
chown -R "$user" "$home"
expect_code 0 "with the home readable, git's XDG credentials, registry logins, .pgpass and the shell history are masked" \
        as_user "$vm" run -q --allow-read "$home" -- sh -c 'cat ~/.config/git/credentials ~/.config/containers/auth.json ~/.pgpass ~/.bash_history ~/notes.txt 2>&1; true'
expect_no "... none of their text" "PLANTED-(GITCRED|AUTHJSON|PGPASS|HISTORY)"
expect_out "control: the plain file beside them reads" "PLAIN-NOTES-4e"
expect_code 0 "--allow-read of the exact path un-masks it" \
        as_user "$vm" run --allow-read "$home/.ssh" -- cat "$home/.ssh/id_ed25519"
expect_out "the un-masked key reads" "PLANTED-SSH-KEY"
# a link an earlier run planted (docs -> ~/.ssh) is not the user naming ~/.ssh (red team #6)
ln -sfn "$home/.ssh" "$proj/docs"
chown -h "$user" "$proj/docs"
expect_code 0 "control: through the planted link the key reads outside" as_user cat docs/id_ed25519
expect_out "control: the key's text through docs" "PLANTED-SSH-KEY"
expect_code 0 "--allow-read of a link to ~/.ssh keeps ~/.ssh masked" \
        as_user "$vm" run -q --allow-read docs -- sh -c "cat docs/id_ed25519 '$home/.ssh/id_ed25519' 2>&1; true"
expect_no "no key text through the planted link" "PLANTED-SSH-KEY"
rm -f "$proj/docs"
# a secret-named link to a file of an innocent name (red team #7)
mkdir -p "$proj/config"
echo "DB_PASSWORD=PLANTED-VARS-6b2" >"$proj/config/dev.vars"
ln -sfn config/dev.vars "$proj/.env.local"
chown -R -h "$user" "$proj/config" "$proj/.env.local"
expect_code 0 "control: the link reads outside" as_user cat .env.local
expect_out "control: the linked file's text" "PLANTED-VARS"
expect_code 0 "a secret-named link's target is masked" as_user "$vm" run -q -- sh -c 'cat .env.local config/dev.vars; true'
expect_no "no text through the secret-named link" "PLANTED-VARS"
rm -rf "$proj/config" "$proj/.env.local"
expect_code 0 "--deny masks a chosen file" as_user "$vm" run --deny "$proj/hello.c" -- cat hello.c
expect_no "the denied file reads empty" "built and ran"

echo "# real programs no one here wrote pass inside"
expect_code 0 "python3 -m doctest over the stdlib's statistics.py" \
        as_user "$vm" run -- python3 -m doctest /usr/lib/python3.11/statistics.py
expect_code 0 "GNU make drives cc in the project" as_user "$vm" run -- make
expect_out "the program make built ran" "built and ran inside"
[ -x "$proj/hello" ] && ok "the build landed in the project" || bad "no ./hello in the project"
expect_code 0 "python3 -m unittest discovers and passes" as_user "$vm" run -- python3 -m unittest -v
if command -v node >/dev/null; then
        expect_code 0 "node --test passes" as_user "$vm" run -- node --test calc.test.mjs
fi

echo "# the walls"
expect_code 1 "no write outside the project" as_user "$vm" run -q -- touch "$base/outside"
[ ! -e "$base/outside" ] && ok "nothing written outside" || bad "$base/outside exists"
expect_code 1 "no write to /usr" as_user "$vm" run -q -- touch /usr/local/planted
expect_code 0 "home is empty and private" as_user "$vm" run -q -- sh -c 'ls -A ~ | wc -l; touch ~/x'
expect_out "home has nothing" "^0$"
[ ! -e "$home/x" ] && ok "the private home wrote nothing to the real one" || bad "$home/x exists"
expect_code 2 ".git is kept read-only (a hook would run on the host; sh: 2)" \
        as_user "$vm" run -q -- sh -c 'echo evil >.git/hooks/pre-commit'
[ ! -e "$proj/.git/hooks/pre-commit" ] && ok "no hook planted" || bad "a hook was planted"
expect_code 0 "control: --allow of .git itself makes it writable" \
        as_user "$vm" run -q --allow . --allow "$proj/.git" -- sh -c 'echo ok >.git/hooks/x'
[ -e "$proj/.git/hooks/x" ] && ok "the explicit write landed" || bad "no .git/hooks/x"
# red team #4: keep names the command creates during the run (none there at the start)
expect_code 0 "control: outside, .envrc, .vscode/ and sub/.git/ can be made" \
        as_user sh -c 'mkdir -p kn-ctl/.git kn-ctl/.vscode && echo x >kn-ctl/.envrc'
[ -e "$proj/kn-ctl/.envrc" ] && ok "control: the .envrc is there" || bad "control: no .envrc"
rm -rf "$proj/kn-ctl"
expect_code 0 "the command makes .envrc, .vscode/tasks.json, sub/.git/hooks/pre-commit (red team #4)" \
        as_user "$vm" run -q -- sh -c 'echo "echo pwned" >.envrc; mkdir -p .vscode sub/.git/hooks &&
                echo "{}" >.vscode/tasks.json && echo evil >sub/.git/hooks/pre-commit &&
                ln -s ../.envrc sub/.envrc'
[ ! -e "$proj/.envrc" ] && [ ! -e "$proj/.vscode" ] && [ ! -e "$proj/sub/.git" ] && [ ! -L "$proj/sub/.envrc" ] &&
        ok "after the run, none of them is under its name" || bad "a keep name made during the run stayed"
grep -q "moved aside: .*sub/.git" "$base/err" && ok "stderr names what was moved aside" ||
        { bad "no note on stderr"; sed 's/^/     | /' "$base/err"; }
compgen -G "$proj/.envrc.vestibule-moved*" >/dev/null && ok "the .envrc is kept, renamed, for the user to look at" ||
        bad "no renamed .envrc"
rm -rf "$proj/.envrc"* "$proj/.vscode"* "$proj/sub"
# A folder git takes as a repository whatever its name (HEAD, objects/, refs/, a config with
# core.worktree and core.fsmonitor): `git status` there on the host ran the fsmonitor command
# (the run-command helper's review; before: the marker was made). The control makes the same
# files outside the sandbox and shows that git runs the command from them.
gitdir_plant='mkdir -p "$1/objects" "$1/refs/heads" && echo "ref: refs/heads/main" >"$1/HEAD" &&
printf "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = \"touch $2; false\"\n" >"$1/config"'
if command -v git >/dev/null; then
        expect_code 0 "control: outside, a folder shaped as a git repository" \
                as_user sh -c "$gitdir_plant" sh "$proj/gd-ctl" "$base/gd-ctl-ran"
        as_user git -C "$proj/gd-ctl" status >/dev/null 2>&1
        [ -e "$base/gd-ctl-ran" ] && ok "control: git status there runs its core.fsmonitor on the host" ||
                bad "control: git status did not run the fsmonitor command"
        rm -rf "$proj/gd-ctl" "$base/gd-ctl-ran"
        expect_code 0 "the command makes a folder shaped as a git repository, named docs" \
                as_user "$vm" run -q -- sh -c "$gitdir_plant" sh "$proj/docs2" "$base/gd-ran"
        as_user git -C "$proj/docs2" status >/dev/null 2>&1
        [ ! -e "$base/gd-ran" ] && ok "after the run, git status there runs nothing on the host" ||
                bad "git status ran the planted fsmonitor command"
        grep -q "moved aside: .*docs2/HEAD" "$base/err" && ok "  ... its HEAD was moved aside, said on stderr" ||
                { bad "no note of docs2/HEAD on stderr"; sed 's/^/     | /' "$base/err"; }
        rm -rf "$proj/docs2" "$base/gd-ran"
fi
expect_code 0 "started outside the view, the command starts in the first --allow folder" \
        as_user sh -c "cd $base && $vm run -q --allow $proj -- pwd"
expect_out "pwd is the project" "^$proj\$"
expect_code 125 "--allow / is refused" as_user "$vm" run -q --allow / -- true

echo "# host sockets (tmux, ssh-agent, X11) and the home's start-up files stay out of reach"
# A listening socket in the project, as an agent's or tmux's would be: a pathname unix socket
# connects across net namespaces and through a read-only bind.
as_user python3 -c 'import socket,os
s=socket.socket(socket.AF_UNIX); s.bind("agent.sock"); s.listen(8)
while True:
    c,_=s.accept(); c.sendall(b"HOST-SOCKET-REACHED\n"); c.close()' &
sock_srv=$!
sock_probe='import socket; s=socket.socket(socket.AF_UNIX); s.connect("agent.sock"); print(s.recv(64).decode())'
wait_for test -S "$proj/agent.sock"
expect_code 0 "control: the project's socket answers outside" as_user python3 -c "$sock_probe"
expect_out "control: the socket's reply" "HOST-SOCKET-REACHED"
expect_code 1 "a socket in the project is masked inside" as_user "$vm" run -q -- python3 -c "$sock_probe"
expect_no "no reply through the socket" "HOST-SOCKET-REACHED"
expect_code 1 "a socket under --allow-read is masked too" \
        as_user "$vm" run -q --allow "$proj/tests" --allow-read "$proj" -- python3 -c "$sock_probe"
expect_no "no reply through the read-only socket" "HOST-SOCKET-REACHED"
rc_kill_tree "$sock_srv" # (lib.sh: the listener under as_user's subshell and runuser too)
wait "$sock_srv" 2>/dev/null
rm -f "$proj/agent.sock"
expect_code 125 "started in /tmp (the default --allow) is refused" as_user sh -c "cd /tmp && $vm run -q -- true"
grep -q "make a project folder" "$base/err" && ok "the refusal names the fix" || bad "no fix named: $(cat "$base/err")"
expect_code 125 "--allow /var/tmp is refused" as_user "$vm" run -q --allow /var/tmp -- true
expect_code 125 "--allow-read /run/user/UID is refused" \
        as_user "$vm" run -q --allow-read "/run/user/$(id -u "$user")" -- true
expect_code 125 "--allow-read /dev is refused" as_user "$vm" run -q --allow-read /dev -- true
mkdir -p "$home/code"
chown "$user" "$home/code"
expect_code 125 "--allow of the home is refused" as_user "$vm" run -q --allow "$home" -- touch "$home/.bashrc"
[ ! -e "$home/.bashrc" ] && ok "no ~/.bashrc written" || { bad "~/.bashrc written"; rm -f "$home/.bashrc"; }
grep -q "name a project folder inside your home" "$base/err" && ok "the refusal names the fix" || bad "no fix named: $(cat "$base/err")"
expect_code 125 "started in the home (the default --allow) is refused" as_user sh -c "cd $home && $vm run -q -- true"
expect_code 125 "--allow of a folder holding the home is refused" as_user "$vm" run -q --allow "$base" -- true
expect_code 0 "control: --allow of a project inside the home runs" \
        as_user "$vm" run -q --allow "$home/code" -- touch "$home/code/made"
[ -e "$home/code/made" ] && ok "control: the write in the home's project landed" || bad "no $home/code/made"
# $HOME through a symlink (Fedora Silverblue: /home -> var/home): the masks follow the real path
ln -sfn "$home" "$base/homelink"
expect_code 0 "control: the key reads through the symlinked home outside" \
        as_user env HOME="$base/homelink" cat "$base/homelink/.ssh/id_ed25519"
expect_out "control: the key's text through the link" "PLANTED-SSH-KEY"
expect_code 0 "with a symlinked \$HOME, --allow-read ~ still masks its secrets" \
        as_user env HOME="$base/homelink" "$vm" run -q --allow-read "$base/homelink" -- \
        sh -c "cat '$home/.ssh/id_ed25519' '$home/.aws/credentials' 2>&1; true"
expect_no "no key text through the symlinked home" "PLANTED-(SSH|AWS)"
expect_code 125 "--allow of a symlinked home is refused (its real path)" \
        as_user env HOME="$base/homelink" "$vm" run -q --allow "$home" -- true
python3 -m http.server --bind 127.0.0.1 38517 >/dev/null 2>&1 &
srv=$!
wait_for listening 38517
expect_code 0 "control: the host's loopback listener answers outside" \
        as_user python3 -c 'import socket; socket.create_connection(("127.0.0.1", 38517), 2)'
expect_code 1 "--net none: the host's loopback is not reachable" \
        as_user "$vm" run -q -- python3 -c 'import socket; socket.create_connection(("127.0.0.1", 38517), 2)'
expect_code 0 "--net none: a UDP datagram out (a DNS query phoning home) finds no route" \
        as_user "$vm" run -q -- python3 -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"q", ("192.0.2.53", 53)); print("sent")
except OSError as e:
    print("refused", e.errno)'
expect_out "  ... ENETUNREACH" "^refused 101$"
echo "served through the proxy" >"$base/index.html"
chmod a+r "$base/index.html"
fetch='import urllib.request,sys; print(urllib.request.urlopen("http://pinned.test/index.html", timeout=5).read().decode())'
kill "$srv"
wait "$srv" 2>/dev/null
(cd "$base" && exec python3 -m http.server --bind 127.0.0.1 38517 >/dev/null 2>&1) &
srv=$!
wait_for listening 38517
expect_code 0 "--net allowlist: a listed host answers through the proxy" \
        as_user env VESTIBULE_EGRESS_ALLOW=pinned.test VESTIBULE_EGRESS_PIN=pinned.test=127.0.0.1:38517 "$vm" run -q \
        --net allowlist:pinned.test -- python3 -c "$fetch"
expect_out "the page came through" "served through the proxy"
expect_code 1 "control: the same fetch with --net none fails" \
        as_user env VESTIBULE_EGRESS_ALLOW=pinned.test VESTIBULE_EGRESS_PIN=pinned.test=127.0.0.1:38517 "$vm" run -q -- python3 -c "$fetch"
expect_code 1 "control: a host not on the list is refused" \
        as_user env VESTIBULE_EGRESS_ALLOW=pinned.test VESTIBULE_EGRESS_PIN=pinned.test=127.0.0.1:38517 "$vm" run -q \
        --net allowlist:pinned.test -- python3 -c "${fetch/pinned.test/other.test}"
kill "$srv" 2>/dev/null
wait "$srv" 2>/dev/null
if echo "piped in" | as_user "$vm" run -q -- cat >"$base/out" 2>"$base/err"; then
        expect_out "stdin passes through" "^piped in$"
else bad "stdin passthrough run failed"; fi

# The terminal: a command started from this terminal cannot push keystrokes into it (TIOCSTI;
# they would run in the user's shell after the sandbox ends): it holds a pty of its own
# (src/cli/run_pty.c), so an injection lands in its own input at most. A shell on a fresh pty
# runs the probe, then reads what its terminal holds.
probe='import fcntl, termios
try:
    for c in b"echo pwned\n":
        fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
    print("ioctl ok")
except OSError as e:
    print("refused errno", e.errno)'
tiocsti=$(dirname "$(realpath "$0")")/tiocsti.py
install -m 0644 "$tiocsti" "$base/tiocsti.py"
if [ "$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo 1)" = 1 ]; then
        expect_code 0 "control: outside, TIOCSTI on the controlling terminal works" \
                as_user env PROBE="$probe" python3 "$base/tiocsti.py" sh -c \
                'python3 -c "$PROBE"; read -r l; echo "SHELL-READ:[$l]"'
        expect_out "control: the shell read the injected line" "SHELL-READ:\[echo pwned"
        expect_code 0 "inside, TIOCSTI on the same terminal" \
                as_user env PROBE="$probe" VM="$vm" python3 "$base/tiocsti.py" sh -c \
                '"$VM" run -q -- python3 -c "$PROBE"; read -t 2 -r l; echo "SHELL-READ:[$l]"'
        expect_out "the shell read nothing" "SHELL-READ:\[\]"
        expect_no "no keystroke went in" "SHELL-READ:\[echo pwned"
else
        echo "     (dev.tty.legacy_tiocsti=0: the kernel refuses TIOCSTI to everyone; not probed)"
fi
# A backgrounded run cannot read what is typed for the shell (red team #5): under script(1), a
# job-control shell starts RUNNER sh -c 'read x' in the background, then reads the line typed at
# the terminal. bg_try RUNNER: the transcript (GOT: the job read it; SHELL: the shell did).
bg_try() {
        (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/bin:/bin RUNNER="$1" \
                script -qec "bash -c 'set -m; \$RUNNER sh -c \"read x; echo GOT:[\\\$x]\" & sleep 2
                        read -t 3 y; echo SHELL:[\$y]; kill %1 2>/dev/null; fg >/dev/null 2>&1'" \
                /dev/null <<<"typed-for-the-shell" 2>&1 | tr -d '\r')
}
if command -v script >/dev/null; then
        got=$(bg_try "setsid -w")
        echo "$got" | grep -q "GOT:\[typed-for-the-shell\]" &&
                ok "control: a background command in a session of its own (setsid) reads the line" ||
                { bad "control: setsid did not read the line"; echo "$got" | sed 's/^/     | /'; }
        got=$(bg_try "$vm run -q --")
        echo "$got" | grep -q "SHELL:\[typed-for-the-shell\]" &&
                ok "a backgrounded run: the shell got the typed line" ||
                { bad "the shell did not get the typed line"; echo "$got" | sed 's/^/     | /'; }
        echo "$got" | grep -q "GOT:\[typed" && bad "the backgrounded command read the terminal" ||
                ok "the backgrounded command did not read the terminal"
        # A backgrounded run that a job-control shell stops and then sends SIGTERM (kill %1)
        # must end (before: it stopped itself on SIGTTOU setting the terminal's modes from the
        # background, again after each SIGCONT, with its SIGTERM waiting in the signalfd, and
        # stayed stopped after the shell was gone). Twice: the stop depends on timing.
        for try in 1 2; do
                (cd "$proj" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/bin:/bin RUNNER="$vm run -q --" \
                        script -qec "bash -c 'set -m; \$RUNNER sh -c \"read x; echo GOT:[\\\$x]\" & sleep 2
                                read -t 3 y; jobs -l; kill %1 2>/dev/null; jobs -l; fg >/dev/null 2>&1; echo fg=\$?'" \
                        /dev/null <<<"typed-for-the-shell" 2>&1 | tr -d '\r' >"$base/bgkill.$try")
        done
        for _ in 1 2 3 4 5 6 7 8 9 10; do pgrep -f "^$vm run -q -- sh -c read x" >/dev/null || break; sleep 0.3; done
        if pgrep -f "^$vm run -q -- sh -c read x" >/dev/null; then
                bad "a backgrounded run outlived its SIGTERM: $(ps -o pid=,stat= -p "$(pgrep -d, -f "^$vm run -q -- sh -c read x")" | tr '\n' ' ')"
                sed 's/^/     | /' "$base/bgkill.1" "$base/bgkill.2"
                pkill -KILL -f "^$vm run -q -- sh -c read x" || true
        else
                ok "a backgrounded run stopped and sent SIGTERM ends (nothing left)"
        fi
fi
expect_code 1 "the real terminal cannot be opened inside (/dev/tty)" \
        as_user "$vm" run -q -- sh -c 'cat /dev/tty'

# the terminal's settings the command changed are put back after it (red team #9)
tty_probe='import os, pty, subprocess, sys, termios
m, s = pty.openpty()
subprocess.run(sys.argv[1:], stdin=s, stdout=s, stderr=subprocess.DEVNULL)
print("echo", "on" if termios.tcgetattr(s)[3] & termios.ECHO else "off")'
expect_code 0 "control: outside, stty -echo leaves echo off" as_user python3 -c "$tty_probe" stty -echo
expect_out "control: echo is off after it" "^echo off$"
expect_code 0 "inside, stty -echo on the same kind of terminal" \
        as_user python3 -c "$tty_probe" "$vm" run -q -- stty -echo
expect_out "the terminal's echo is back on after the run" "^echo on$"

# stdin not a terminal, stdout and stderr one (a run started with </dev/null, or in a pipe):
# the command held the real terminal on fds 1 and 2, open for reading too, so it read what was
# typed there and could set its modes (the run-command helper's review). Now it gets a pty of
# its own for them, with its output relayed. The control runs the same command outside.
tty_out_probe='import os, pty, subprocess, sys, termios, time
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=s, stderr=s)
time.sleep(1.0)
os.write(m, b"typed-for-the-shell\n")
p.wait(timeout=30)
time.sleep(0.2)
out = b""
os.set_blocking(m, False)
try:
    while True:
        out += os.read(m, 4096)
except OSError:
    pass
print(out.decode(errors="replace").replace("\r", ""))
print("echo", "on" if termios.tcgetattr(s)[3] & termios.ECHO else "off")'
read_fd1='exec 0<&1; read -t 3 x; echo "GOT:[$x]"; stty -echo <&1'
expect_code 0 "control: outside, a command whose stdin is not the terminal reads it through fd 1" \
        as_user python3 -c "$tty_out_probe" bash -c "$read_fd1"
expect_out "control: it got the typed line" "GOT:\[typed-for-the-shell\]"
expect_out "control: and turned the terminal's echo off" "^echo off$"
expect_code 0 "inside, stdin /dev/null and the terminal on fds 1 and 2" \
        as_user python3 -c "$tty_out_probe" "$vm" run -q -- bash -c "$read_fd1"
expect_out "its output still reaches the terminal" "GOT:\["
expect_no "it did not get the typed line" "GOT:\[typed"
expect_out "the terminal's echo is as it was" "^echo on$"

echo "# the exit-code contract"
expect_code 0 "the command's own 0" as_user "$vm" run -q -- true
expect_code 3 "the command's own 3" as_user "$vm" run -q -- sh -c 'exit 3'
expect_code 143 "128+15 for SIGTERM" as_user "$vm" run -q -- sh -c 'kill -TERM $$'
expect_code 137 "128+9 for SIGKILL" as_user "$vm" run -q -- sh -c 'kill -KILL $$'
expect_code 124 "124 for the timeout" as_user "$vm" run -q --timeout 1 -- sleep 30
# SIGTERM to vestibule itself (not the command): the sandbox goes after the grace, 128+15
marker=run-cmd-sleeper-$$
as_user "$vm" run -q -- bash -c "exec -a $marker sleep 30" >/dev/null 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker" >/dev/null
pgrep -u "$user" -f "^$marker" >/dev/null && ok "control: the sandboxed sleeper is seen" || bad "no sleeper seen"
pkill -TERM -u "$user" -f "^$vm run -q -- bash -c exec -a $marker"
wait "$runner"
got=$?
[ "$got" = 143 ] && ok "128+15 when vestibule itself is stopped (exit 143)" || bad "stopped: exit $got, want 143"
sleep 0.5
pgrep -u "$user" -f "^$marker" >/dev/null && bad "the sandboxed sleep outlived the run" || ok "nothing of the run is left"
# SIGINT to vestibule (a Ctrl-C at the terminal reaches only it: the command has a session of
# its own) is forwarded to the command, which may handle it and choose its own exit code
as_user "$vm" run -q -- bash -c "trap 'echo got-int; exit 5' INT; exec -a $marker-int sleep 30 & wait" \
        >"$base/out" 2>&1 &
runner=$!
wait_for pgrep -u "$user" -f "^$marker-int" >/dev/null
pkill -INT -u "$user" -f "^$vm run -q -- bash -c trap"
wait "$runner"
got=$?
[ "$got" = 5 ] && ok "SIGINT forwarded: the command's own handler chose exit 5" ||
        bad "SIGINT: exit $got, want 5"
expect_out "the command's handler ran" "^got-int"
expect_code 127 "127 not found (host PATH)" as_user "$vm" run -q -- no-such-command-x1
expect_code 127 "127 not found (a path)" as_user "$vm" run -q -- ./no-such-file
# each run -- leaves an audit record pair, read back by `vestibule-mcp audit` (as run_code's)
expect_code 0 "vestibule-mcp audit reads the log" as_user "$vm" audit 500
expect_out "the run's audit line: command, exit, usage, grade" \
        "run --  error \(exit code 3\)  wall [0-9]+ ms.*isolation: native.*\| sh -c 'exit 3'$"
expect_out "a 127 is recorded too" "run --  failed \(exit code 127\).*\| no-such-command-x1$"
# what each run tried that the sandbox watches (the seccomp supervisor's view of open and
# connect, the proxy's refusals) is named in its end record; the control: a run that tried
# nothing of it has no "tried:"
expect_out "the audit names the secret's path a run opened" \
        "run --  error \(exit code 1\).*  tried: open $home/\.ssh/id_ed25519.*\| cat $home/\.ssh/id_ed25519$"
expect_out "the audit names the .env and server.key a run opened (masked)" \
        "tried: open $proj/\.env, open $proj/server\.key.*\| cat \.env server\.key$"
expect_out "the audit names the address a --net none run tried" \
        "tried: connect 127\.0\.0\.1:38517.*\| python3 -c 'import socket; "
expect_out "the audit names the host the proxy refused" "tried: proxy refused other\.test:80 "
expect_out "the audit names the UDP address a run sent a datagram to" "tried: sendto 192\.0\.2\.53:53"
if grep -E "\| sh -c 'exit 3'$" "$base/out" | grep -q "tried:"; then bad "control: sh -c 'exit 3' has a tried: field"
elif grep -qE "\| sh -c 'exit 3'$" "$base/out"; then ok "control: a run that tried nothing watched has no tried: field"
else bad "control: no sh -c 'exit 3' line"; fi
expect_code 126 "126 found but not executable" as_user "$vm" run -q -- ./noexec.sh
expect_code 125 "125 for a usage error" as_user "$vm" run --no-such-option -- true
grade=$(as_user "$vm" run -- true 2>&1 >/dev/null | sed -n 's/^vestibule: isolation: //p')
echo "     grade here: $grade"
case $grade in
native-degraded*)
        expect_code 125 "125 for --require native on a degraded host" \
                as_user "$vm" run --require native -- true
        grep -q "lower than --require native" "$base/err" && ok "the reason is on stderr" ||
                bad "no reason on stderr"
        ;;
native)
        expect_code 0 "--require native on a native host runs" as_user "$vm" run --require native -- true
        ;;
*) bad "no grade line on stderr" ;;
esac
expect_code 0 "control: --require any runs on the same host" as_user "$vm" run --require any -q -- true
expect_code 125 "125 when the sandbox cannot be set up (an --allow that does not exist)" \
        as_user "$vm" run --allow "$base/nope" -- true

# A run killed before its end (SIGKILL) leaves its empty mount-point folder; the next run
# removes those of ended pids once they are a minute old (src/native/hostrun.c, hostroot_sweep).
# The control: a fresh one of an ended pid is kept (it may be another script's control).
sleep 0 &
gone=$!
wait "$gone"
old_root=$(runuser -u "$user" -- mktemp -d "/tmp/vestibule-hostroot-$gone-XXXXXX")
fresh_root=$(runuser -u "$user" -- mktemp -d "/tmp/vestibule-hostroot-$gone-XXXXXX")
touch -d '2 minutes ago' "$old_root"
expect_code 0 "a run after a killed one" as_user "$vm" run -q -- true
[ ! -e "$old_root" ] && ok "the killed run's old mount-point folder is removed by the next run" ||
        bad "left: $old_root"
[ -d "$fresh_root" ] && ok "control: a fresh folder of an ended pid is kept" ||
        bad "control: the fresh folder $fresh_root went too"
rmdir "$fresh_root" "$old_root" 2>/dev/null || true

# The mount-point folders of the runs above: each is named after its server's pid, so one
# whose server has ended was left behind (lib.sh; the live runs of the scripts beside this one
# are not counted). The control: a folder of an ended pid is counted.
rc_roots_control "$user" && ok "control: a mount-point folder of an ended run is counted" ||
        bad "control: a planted folder of an ended pid was not counted"
leftovers=$(rc_roots_left "$user")
[ -z "$leftovers" ] && ok "no mount-point folders left in /tmp" || bad "left in /tmp: $(echo $leftovers)"

echo "# $pass passed, $failed failed"
[ -n "${RUN_CMD_DIR:-}" ] || rm -rf "$base"
[ "$failed" = 0 ]
