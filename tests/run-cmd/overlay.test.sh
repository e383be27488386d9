#!/usr/bin/env bash
# overlay.test.sh - `vestibule-mcp run --overlay [--apply] -- CMD` against the real kernel, as the
# unprivileged test user: real test suites no one here wrote pass inside with the project read-only
# under a writable overlayfs layer (minimist's own tape suite from its npm package; pyflakes's
# pytest suite from Debian's python3-pyflakes), the listing names what they wrote, and the real
# folder is untouched without --apply. Then the sandboxed command's tricks against --apply, each
# tried for real: symlinks out of the project, a real symlink replaced by a folder, fifos and
# sockets (and mknod, refused by the kernel), a file replacing a folder and the reverse, a hard
# link shared with a file outside, names with newlines that forge listing lines, setuid bits,
# and .git/.envrc/.vscode planted in the project (tests/adversarial/server.md, "run --overlay").
#
# Usage (as root, which runs every command as the test user; needs node+npm for the npm registry
# `npm ci` of overlay-npm/, python3-pytest and python3-pyflakes):
#   VESTIBULE_BIN=build-rel/vestibule-mcp tests/run-cmd/overlay.test.sh
# Exit 0 all passed, 1 a check failed, 77 skipped (not root, no such user, a tool missing).
set -uo pipefail

user=${RUN_CMD_USER:-vestibule-test}
bin=$(realpath "${VESTIBULE_BIN:?set VESTIBULE_BIN to the vestibule-mcp binary}")
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || { echo "skip: run as root (each command runs as $user)"; exit 77; }
id "$user" >/dev/null 2>&1 || { echo "skip: no user $user"; exit 77; }
command -v npm >/dev/null || { echo "skip: no npm"; exit 77; }
/usr/bin/python3 -c 'import pytest, pyflakes' 2>/dev/null ||
        { echo "skip: apt-get install python3-pytest python3-pyflakes"; exit 77; }

base=$(mktemp -d /var/tmp/run-overlay.XXXXXX)
home=$base/home
proj=$base/proj
pass=0
failed=0
install -m 0755 "$bin" "$base/vestibule-mcp"
vm=$base/vestibule-mcp
mkdir -p "$home" "$proj" "$base/npm" "$base/py"
cp "$here/overlay-npm/package.json" "$here/overlay-npm/package-lock.json" "$base/npm/"
chown -R "$user:$user" "$base"
chmod 0755 "$base"

as_user() {
        (cd "${at:-$proj}" && runuser -u "$user" -- env -i HOME="$home" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 "$@")
}
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; }
expect_code() {
        local want=$1 name=$2 got
        shift 2
        "$@" >"$base/out" 2>"$base/err" </dev/null
        got=$?
        if [ "$got" = "$want" ]; then ok "$name (exit $got)"; else
                bad "$name: exit $got, want $want"; sed 's/^/     | /' "$base/out" "$base/err" | tail -25; fi
}
# check NAME CMD...: CMD succeeds (a shell test on the host, after the run).
not() { ! "$@"; }
check() { local n=$1; shift; if "$@"; then ok "$n"; else bad "$n"; sed 's/^/     | /' "$base/err" | tail -25; fi; }
listed() { grep -qF -- "$1" "$base/err"; }

echo "# real test suites inside the overlay"
at=$base/npm as_user npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1 || { bad "npm ci"; exit 1; }
mm=$base/npm/node_modules/minimist
at=$mm expect_code 0 "control: minimist's own tape suite passes outside" as_user ../.bin/tape 'test/*.js'
grep -qE '^# pass +[0-9]+' "$base/out" && ok "control: tape reports its passes" || bad "no tape summary"
at=$mm expect_code 0 "minimist's suite passes inside, the package folder under an overlay" \
        as_user "$vm" run -q --overlay --allow "$base/npm" -- sh -c "../.bin/tape 'test/*.js' > tap.out"
listed "added    node_modules/minimist/tap.out" && ok "the listing names the TAP file it wrote" || bad "tap.out not listed"
grep -q "not applied; --apply applies them" "$base/err" && ok "the listing says: not applied" || bad "no state"
[ ! -e "$mm/tap.out" ] && ok "the real package folder has no tap.out" || bad "tap.out was written for real"
at=$base/py expect_code 0 "control: pyflakes's pytest suite passes outside" \
        as_user python3 -m pytest -q -p no:cacheprovider --pyargs pyflakes.test -k 'not IntegrationTests'
grep -qE '[0-9]+ passed' "$base/out" && ok "control: pytest counts its passes" || bad "no pytest summary"
at=$base/py expect_code 0 "pyflakes's suite passes inside, the project under an overlay" \
        as_user "$vm" run -q --overlay -- python3 -m pytest -q --pyargs pyflakes.test \
        -k 'not IntegrationTests' --junitxml=report.xml
grep -qE '[0-9]+ passed' "$base/out" && ok "pytest counts its passes inside" || bad "no pytest summary inside"
listed "added    .pytest_cache/" && listed "added    report.xml" &&
        ok "the listing names .pytest_cache/ and report.xml" || bad "pytest's files not listed"
[ -z "$(ls -A "$base/py")" ] && ok "the real project stays empty" || bad "pytest wrote for real"
at=$base/py expect_code 0 "--apply lands pytest's report" \
        as_user "$vm" run -q --overlay --apply -- python3 -m pytest -q --pyargs pyflakes.test \
        -k 'not IntegrationTests and test_imports' --junitxml=report.xml
check "report.xml is in the real project" grep -q "testsuite" "$base/py/report.xml"

echo "# --apply against the command's tricks"
mkdir -p "$base/outside" "$proj/sub" "$proj/dir2" "$proj/.vscode"
echo "OUTSIDE-ORIGINAL" >"$base/outside/target"
echo "OUTSIDE-LINKED" >"$base/outside/linked"
ln "$base/outside/linked" "$proj/shared"
ln -s ../outside "$proj/lnk"
echo old >"$proj/sub/old"
echo keep >"$proj/file2"
echo "{}" >"$proj/.vscode/settings.json"
chown -R -h "$user:$user" "$base/outside" "$proj"
nl=$'evil\nvestibule:   deleted  file2'
cat >"$base/tricks.sh" <<'T'
set -u
ln -s /etc/passwd abs-link
ln -s ../../outside/target climb-link
ln -s sub/old in-link
rm lnk && mkdir lnk && echo INSIDE >lnk/target      # the real lnk -> ../outside, replaced
mkfifo fifo
python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.bind("sock")'
mknod node c 1 3 2>/dev/null && echo MKNOD-WORKED
rm -r sub && echo "now a file" >sub                  # a file replaces a folder
rm file2 && mkdir file2 && echo x >file2/in          # a folder replaces a file
echo WRITTEN-INSIDE >shared                          # a hard link to ../outside/linked
echo new >a && ln a b                                # a hard link made inside
printf '#!/bin/sh\necho pwned\n' >suid && chmod 4755 suid
touch "$1"
mkdir -p .git/hooks sub2/.git && echo 'echo pwned' >.git/hooks/pre-commit && echo x >sub2/.git/config
echo 'echo pwned' >.envrc
echo '{"x":1}' >.vscode/tasks.json 2>/dev/null || echo VSCODE-RO
mkdir -p gd/objects gd/refs/heads && echo 'ref: refs/heads/main' >gd/HEAD &&
        printf '[core]\n\tworktree = .\n\tfsmonitor = "echo pwned; false"\n' >gd/config
T
cp "$base/tricks.sh" "$proj/.tricks.sh"
chown "$user:$user" "$proj/.tricks.sh"
expect_code 0 "the tricks run inside, listed, nothing applied" as_user "$vm" run -q --overlay -- sh .tricks.sh "$nl"
check "mknod of a device is refused inside" not grep -q MKNOD-WORKED "$base/out"
check "the real folder is unchanged without --apply" test -d "$proj/sub" -a -L "$proj/lnk" -a ! -e "$proj/abs-link"
check "a newline in a name is escaped in the listing" listed 'added    evil\x0avestibule:   deleted  file2'
check "no forged listing line" not grep -qx "vestibule:   deleted  file2" "$base/err"
expect_code 125 "--apply without --overlay is a usage error" as_user "$vm" run --apply -- true
expect_code 3 "--apply after a failing command applies nothing" as_user "$vm" run -q --overlay --apply -- sh -c 'echo x >failed-run; exit 3'
check "no failed-run file" test ! -e "$proj/failed-run"
expect_code 0 "the tricks again, with --apply" as_user "$vm" run -q --overlay --apply -- sh .tricks.sh "$nl"
check "absolute symlink refused" test ! -e "$proj/abs-link" -a ! -L "$proj/abs-link"
check "climbing symlink refused" test ! -L "$proj/climb-link"
check "a symlink inside the folder applied" test "$(readlink "$proj/in-link")" = sub/old
check "the real symlink lnk replaced by a folder, the file inside the project" \
        grep -qx INSIDE "$proj/lnk/target"
check "outside, through the old symlink, untouched" grep -qx OUTSIDE-ORIGINAL "$base/outside/target"
check "the fifo refused" test ! -e "$proj/fifo"
check "the socket refused" test ! -e "$proj/sock"
check "refusals listed" listed "refused  fifo: a fifo, socket or device"
check "a file replaced the folder" grep -qx "now a file" "$proj/sub"
check "a folder replaced the file" grep -qx x "$proj/file2/in"
check "the hard-linked name got the new text" grep -qx WRITTEN-INSIDE "$proj/shared"
check "the file outside that shared its inode is untouched" grep -qx OUTSIDE-LINKED "$base/outside/linked"
check "a hard link made inside lands as two separate files" \
        test "$(stat -c %i "$proj/a")" != "$(stat -c %i "$proj/b")" -a "$(cat "$proj/b")" = new
check "the setuid bit is dropped" test "$(stat -c %a "$proj/suid")" = 755
check "the newline name applied as one name" test -f "$proj/$nl"
check "no planted .git" test ! -e "$proj/.git" -a ! -e "$proj/sub2/.git"
check "no planted .envrc" test ! -e "$proj/.envrc"
check "the existing .vscode is read-only inside" grep -q VSCODE-RO "$base/out"
check "no .vscode/tasks.json" test ! -e "$proj/.vscode/tasks.json"
check "the .git refusals are listed" listed "refused  sub2/.git/: a name the host runs"
check "a folder shaped as a git repository under another name gets no HEAD or config" \
        test ! -e "$proj/gd/HEAD" -a ! -e "$proj/gd/config"
check "  ... refused, listed" listed "refused  gd/HEAD: a git repository's HEAD"
left=$(find /var/tmp -maxdepth 1 -name 'vestibule-overlay-*' -user "$user" | wc -l)
[ "$left" = 0 ] && ok "no overlay layers left in /var/tmp" || bad "$left layer folders left"

echo "# $pass passed, $failed failed"
rm -rf "$base"
[ "$failed" = 0 ]
