#!/bin/bash
# tests/package/clean-root.sh - the Quick start in a fresh Debian 12 root, from the packages in
# dist/ (scripts/package.sh). As root:
#
#   tests/package/clean-root.sh deb|npm [WORKDIR] [IMAGES]
#
#   deb: a fresh `mmdebstrap --variant=minbase bookworm` root; `apt-get install ./vestibule-mcp_*.deb`
#        must pull only what the package declares (checked: with --no-install-recommends
#        nothing but its Depends; then its Recommends); then as an unprivileged user
#        `vestibule-mcp setup --from-tar IMAGES/python.tar`, one run_code call over MCP's stdio
#        (a bash coprocess speaking JSON-RPC), doctor finding the pins in /usr/share/vestibule,
#        and `man vestibule-mcp`.
#   npm: a fresh root with Debian's nodejs and npm and no compiler; the launcher and the
#        linux-x64 tarballs installed into a clean prefix; as the user `npx vestibule-mcp
#        --version`, `npx vestibule-mcp setup --from-tar ...` and one MCP call (mcp-call.mjs).
#
# The root is entered in a private mount namespace with pivot_root (not chroot: the kernel
# refuses unprivileged user namespaces to a chrooted process, and the native backend needs
# them), with /proc, /sys and /dev from the host and IMAGES read-only at /images. Prints the
# timings (root, install) and "clean-root <mode>: ok" or fails.
set -euo pipefail

mode=${1:?usage: clean-root.sh deb|npm [WORKDIR] [IMAGES]}
work=${2:-/var/tmp/vst-package/clean-root}
images=${3:-/var/tmp/vestibule-images}
src=$(cd "$(dirname "$0")/../.." && pwd)
dist=$src/dist
version=$(sed -n 's/^project(vestibule VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
root=$work/$mode-root

[ "$(id -u)" = 0 ] || { echo "clean-root.sh: run as root (mmdebstrap, pivot_root)" >&2; exit 77; }
[ -f "$images/python.tar" ] || { echo "clean-root.sh: no $images/python.tar" >&2; exit 77; }
command -v mmdebstrap >/dev/null || { echo "clean-root.sh: apt-get install mmdebstrap" >&2; exit 77; }

# in_root CMD...: run CMD as root inside $root (own mount namespace; pivot_root).
in_root() {
        unshare --mount --propagation private -- /bin/bash -euo pipefail -c '
                root=$1 images=$2
                shift 2
                mount --rbind "$root" "$root"
                mount -t proc proc "$root/proc"
                mount --rbind /sys "$root/sys"
                mount --rbind /dev "$root/dev"
                mkdir -p "$root/images" "$root/.oldroot"
                mount --bind -o ro "$images" "$root/images"
                mount -o remount,bind,ro "$root/images"
                cd "$root"
                pivot_root . .oldroot
                umount -l /.oldroot
                cd /
                exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb "$@"
        ' in_root "$root" "$images" "$@"
}

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

rm -rf "$work/dist"
mkdir -p "$work/dist"
# the packages as they are now: a package.sh started meanwhile cleans dist/
cp "$dist"/vestibule-mcp* "$work/dist/"
dist=$work/dist
# CLEAN_ROOT_REUSE=1 keeps a root made by an earlier run (to iterate on the checks; the deb
# mode's "pulls only what it declares" needs a fresh one).
if [ "${CLEAN_ROOT_REUSE:-0}" = 1 ] && [ -x "$root/usr/bin/apt-get" ]; then
        echo "clean-root $mode: reusing $root (CLEAN_ROOT_REUSE=1)"
else
        rm -rf "$root"
        t0=$(date +%s.%N)
        include=
        [ "$mode" = npm ] && include=--include=nodejs,npm
        mmdebstrap --quiet --variant=minbase $include bookworm "$root" \
                "deb http://deb.debian.org/debian bookworm main" \
                "deb http://deb.debian.org/debian bookworm-updates main" \
                "deb http://deb.debian.org/debian-security bookworm-security main" >&2
        t1=$(date +%s.%N)
        echo "clean-root $mode: fresh bookworm root in $(secs "$t0" "$t1") s ($(du -sm "$root" | cut -f1) MiB)"
fi
in_root id tester >/dev/null 2>&1 || in_root useradd -m -u 1500 -s /bin/bash tester

if [ "$mode" = deb ]; then
        deb=$(ls "$dist"/vestibule-mcp_"$version"_*.deb)
        cp "$deb" "$root/tmp/"
        in_root apt-get update -q >/dev/null
        in_root dpkg-query -W -f '${Package}\n' | sed 's/:.*//' | sort >"$work/before"
        t0=$(date +%s.%N)
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                "/tmp/$(basename "$deb")" >"$work/install.log"
        t1=$(date +%s.%N)
        in_root dpkg-query -W -f '${Package}\n' | sed 's/:.*//' | sort >"$work/after"
        new=$(comm -13 "$work/before" "$work/after" | tr '\n' ' ')
        echo "clean-root deb: apt-get install --no-install-recommends ./$(basename "$deb"):" \
                "$(secs "$t0" "$t1") s, new packages: $new"
        for p in $new; do
                case $p in
                vestibule-mcp | libjson-c5 | libseccomp2 | libc6) ;;
                *)
                        echo "clean-root deb: FAIL: '$p' was installed but is not in Depends" >&2
                        exit 1
                        ;;
                esac
        done
        # Recommends: the first alternative of each (Debian 12's names).
        recs=$(dpkg-deb -f "$deb" Recommends | tr ',' '\n' | sed 's/|.*//; s/ //g' | tr '\n' ' ')
        t0=$(date +%s.%N)
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                $recs >>"$work/install.log"
        t1=$(date +%s.%N)
        echo "clean-root deb: the Recommends ($recs): $(secs "$t0" "$t1") s"
        in_root test -x /usr/bin/vestibule-mcp -a -f /usr/share/vestibule/images/pins \
                -a -x /usr/share/vestibule/images/build.sh \
                -a -f /usr/share/bash-completion/completions/vestibule-mcp

        user() { in_root runuser -u tester -- env -i PATH=/usr/bin:/bin HOME=/home/tester \
                USER=tester LOGNAME=tester SHELL=/bin/bash "$@"; }
        user vestibule-mcp --version
        t0=$(date +%s.%N)
        user vestibule-mcp setup --from-tar /images/python.tar --language python >"$work/setup.log" 2>&1 ||
                true # exit 1 until node is there too: the readiness check wants both
        user vestibule-mcp setup --from-tar /images/node.tar --language node >>"$work/setup.log" 2>&1 ||
                { cat "$work/setup.log" >&2; echo "clean-root deb: FAIL: setup" >&2; exit 1; }
        t1=$(date +%s.%N)
        echo "clean-root deb: setup --from-tar python.tar, node.tar: $(secs "$t0" "$t1") s"
        grep -i 'ready\|isolation' "$work/setup.log" | tail -2 | sed 's/^/clean-root deb: /' || true
        # The installed binary finds its recipe: doctor checks the rootfs against the pins.
        user vestibule-mcp doctor >"$work/doctor.txt" 2>&1 || true
        if grep -q 'cannot find images/pins' "$work/doctor.txt" ||
                ! grep -q "rootfs python.*vestibule-mcp setup\|rootfs python.*pinned\|rootfs python" \
                        "$work/doctor.txt"; then
                cat "$work/doctor.txt" >&2
                echo "clean-root deb: FAIL: doctor did not check the rootfs against the pins" >&2
                exit 1
        fi
        grep 'rootfs python' "$work/doctor.txt" | sed 's/^ */clean-root deb: doctor: /'
        # One run_code call over stdio, as a client makes it.
        cat >"$root/tmp/mcp-call.sh" <<'EOF'
#!/bin/bash
set -euo pipefail
coproc SRV { exec vestibule-mcp 2>/tmp/server.log; }
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"clean-root","version":"1"}}}' >&"${SRV[1]}"
read -r -t 30 line <&"${SRV[0]}"
printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"python","code":"print(6*7)"}}}' >&"${SRV[1]}"
while read -r -t 60 line <&"${SRV[0]}"; do
        case $line in *'"id":2'*) echo "$line"; break ;; esac
done
exec {SRV[1]}>&-
wait
EOF
        chmod 755 "$root/tmp/mcp-call.sh"
        out=$(user /tmp/mcp-call.sh)
        grep -q '42' <<<"$out" || { echo "clean-root deb: FAIL: $out" >&2; exit 1; }
        iso=$(grep -o 'isolation: [^"]*' <<<"$out" | tail -1)
        echo "clean-root deb: run_code over MCP: 42, $iso"
        case $iso in "isolation: native"*) ;; *)
                echo "clean-root deb: FAIL: expected a native grade" >&2; exit 1 ;;
        esac
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                man-db >/dev/null
        user bash -c 'MANWIDTH=80 man vestibule-mcp 2>/dev/null' >"$work/man.txt"
        grep -q 'install-client' "$work/man.txt" && grep -q 'VESTIBULE_ROOTFS_DIR' "$work/man.txt"
        echo "clean-root deb: man vestibule-mcp: $(wc -l <"$work/man.txt") lines"
        # bash completion, as bash-completion loads it on demand
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                bash-completion >/dev/null
        cat >"$root/tmp/complete.sh" <<'EOF'
source /usr/share/bash-completion/bash_completion
_completion_loader vestibule-mcp
t() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
      COMPREPLY=(); _vestibule_mcp 2>/dev/null; echo "${COMPREPLY[*]}"; }
t vestibule-mcp ins
t vestibule-mcp install-client cod
t vestibule-mcp run -l no
EOF
        out=$(user bash /tmp/complete.sh)
        [ "$out" = $'install-client\ncodex\nnode' ] ||
                { echo "clean-root deb: FAIL: completion gave: $out" >&2; exit 1; }
        echo "clean-root deb: bash completion: install-client, codex, node"
        # The AppArmor profile (README, "Ubuntu 24.04"): shipped in /usr/share; Debian 12 has
        # AppArmor 3, which cannot read it, so the postinst leaves /etc/apparmor.d alone, and
        # doctor (the installed /usr/bin binary) says it is not needed here. With Debian 12's
        # apparmor package installed and the postinst run again, its parser still reads all of
        # /etc/apparmor.d, as apparmor.service does at boot; control: that parser refuses our
        # profile. Purge (prerm, postrm) removes it.
        cr_fail() { echo "clean-root deb: FAIL: $*" >&2; exit 1; }
        in_root test -f /usr/share/vestibule/apparmor/vestibule-mcp -a \
                ! -e /etc/apparmor.d/vestibule-mcp || cr_fail "the AppArmor profile's places"
        grep -q 'apparmor profile.*not needed here.*/etc/apparmor.d/vestibule-mcp is not installed' \
                "$work/doctor.txt" || { grep apparmor "$work/doctor.txt" >&2; cr_fail "doctor's apparmor line"; }
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                apparmor >>"$work/install.log" 2>&1 || cr_fail "apt-get install apparmor"
        in_root /var/lib/dpkg/info/vestibule-mcp.postinst configure || cr_fail "postinst configure"
        in_root test ! -e /etc/apparmor.d/vestibule-mcp || cr_fail "the postinst put the profile in AppArmor 3's /etc/apparmor.d"
        in_root apparmor_parser -Q -K /etc/apparmor.d/ >"$work/aa3.log" 2>&1 ||
                { cat "$work/aa3.log" >&2; cr_fail "AppArmor 3 cannot read /etc/apparmor.d"; }
        ! in_root apparmor_parser -Q -K /usr/share/vestibule/apparmor/vestibule-mcp >"$work/aa3.log" 2>&1 ||
                cr_fail "control: AppArmor 3 read the profile"
        aa3=$(in_root apparmor_parser --version | head -1)
        in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q vestibule-mcp >>"$work/install.log" ||
                cr_fail "apt-get purge vestibule-mcp"
        ! in_root test -e /usr/share/vestibule/apparmor/vestibule-mcp || cr_fail "the profile outlived the purge"
        echo "clean-root deb: the AppArmor profile: not put in /etc/apparmor.d where $aa3 is" \
                "(which reads the rest, and refuses it: $(grep -o "Could not open 'abi/4.0'" "$work/aa3.log")); gone after purge"
else
        if in_root bash -c 'command -v cc gcc clang tcc' >/dev/null; then
                echo "clean-root npm: FAIL: a compiler is installed" >&2
                exit 1
        fi
        echo "clean-root npm: node $(in_root node --version), npm $(in_root npm --version), no compiler"
        cp "$dist/vestibule-mcp-$version.tgz" "$dist/vestibule-mcp-linux-x64-$version.tgz" \
                "$src/tests/package/mcp-call.mjs" "$root/tmp/"
        chmod 644 "$root"/tmp/*.tgz "$root/tmp/mcp-call.mjs"
        user() { in_root runuser -u tester -- env -i PATH=/usr/bin:/bin HOME=/home/tester \
                USER=tester LOGNAME=tester SHELL=/bin/bash "$@"; }
        t0=$(date +%s.%N)
        user bash -c "mkdir -p ~/p && cd ~/p && npm install --offline --no-audit --no-fund --loglevel=error \
                /tmp/vestibule-mcp-$version.tgz /tmp/vestibule-mcp-linux-x64-$version.tgz"
        t1=$(date +%s.%N)
        echo "clean-root npm: npm install (launcher + linux-x64) into a clean prefix: $(secs "$t0" "$t1") s"
        user bash -c 'cd ~/p && npx vestibule-mcp --version'
        # setup loads libarchive (unpacking) and libcurl (registry pulls) on first use; a minimal
        # Debian has neither, and setup names the package (checked first), so the npm Quick
        # start has one apt line the .deb's Recommends otherwise bring.
        msg=$(user bash -c 'cd ~/p && npx vestibule-mcp setup --from-tar /images/python.tar --language python' 2>&1 || true)
        if ! in_root dpkg-query -W libarchive13 >/dev/null 2>&1; then
                grep -q 'apt-get install libarchive13' <<<"$msg" ||
                        { echo "clean-root npm: FAIL: no clear line without libarchive13: $msg" >&2; exit 1; }
                echo "clean-root npm: without libarchive13, setup says: $(grep -o 'setup: libarchive13 is not installed.*' <<<"$msg" | head -1)"
        fi
        t0=$(date +%s.%N)
        in_root apt-get update -q >/dev/null
        in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                libarchive13 libcurl4 >/dev/null
        echo "clean-root npm: apt-get install libarchive13 libcurl4: $(secs "$t0" "$(date +%s.%N)") s"
        user bash -c 'cd ~/p && { npx vestibule-mcp setup --from-tar /images/python.tar --language python || true; } &&
                npx vestibule-mcp setup --from-tar /images/node.tar --language node' >"$work/setup.log" 2>&1 ||
                { cat "$work/setup.log" >&2; echo "clean-root npm: FAIL: setup" >&2; exit 1; }
        grep -i 'ready\|isolation' "$work/setup.log" | tail -2 | sed 's/^/clean-root npm: /' || true
        out=$(user bash -c 'cd ~/p && node /tmp/mcp-call.mjs native npx vestibule-mcp' 2>/dev/null)
        echo "$out" | sed 's/^/clean-root npm: /'
        # Another platform gets one line saying what exists and what to do.
        msg=$(user node -e "Object.defineProperty(process, 'platform', {value: 'darwin'});
                require('/home/tester/p/node_modules/vestibule-mcp/bin/vestibule-mcp.js')" 2>&1 || true)
        echo "clean-root npm: as darwin: $msg"
        grep -q 'no prebuilt binary for darwin' <<<"$msg"
fi
echo "clean-root $mode: ok"
