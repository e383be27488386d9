#!/bin/bash
# tests/package/apparmor.sh - the AppArmor profile that grants vestibule-mcp user namespaces on
# Ubuntu 23.10+ (packaging/apparmor/vestibule-mcp.in), checked as the packages ship it:
#   1. AppArmor 4's apparmor_parser (Debian 13's; the profile says abi <abi/4.0> and `userns`,
#      which AppArmor 3 does not know) compiles the .deb's profile and the one
#      `vestibule-mcp setup --apparmor` writes for an npm binary's path; control: a profile with
#      an unknown rule is refused, so the parser really checks;
#   2. the .deb ships it in /usr/share/vestibule/apparmor/ and nothing in /etc: its postinst
#      copies it into /etc/apparmor.d only with AppArmor 4's userspace (/etc/apparmor.d/abi/4.0),
#      since AppArmor 3 (Debian 12) cannot read it and would fail apparmor.service at boot;
#      control (APPARMOR3_PARSER set): AppArmor 3's parser refuses it;
#   3. the postinst and postrm in a private mount namespace (tmpfs over /etc, /usr/share and
#      /sys/kernel/security): without abi/4.0 nothing is copied or loaded; with it the profile
#      is copied (0644, the shipped bytes) and, where AppArmor's securityfs is,
#      `apparmor_parser -r -T -W /etc/apparmor.d/vestibule-mcp` runs; a parser that fails or is
#      missing never fails the install, and the message says how to load it; `postrm remove`
#      removes the profile.
# Nothing is loaded into this kernel (its AppArmor, if any, is left alone).
#
#   tests/package/apparmor.sh [DEB]     (as root; DEB default dist/vestibule-mcp_*.deb)
#
# AppArmor 4: APPARMOR_PARSER (a command) if set; else apparmor_parser on PATH when it is 4.x;
# else Debian 13's apparmor and libc6 packages, fetched by tests/package/apparmor4.sh into
# APPARMOR4_DIR (default /var/tmp/vestibule-apparmor4; the host's apt sources are not changed)
# and run with their own dynamic loader, as this host's glibc is older.
# APPARMOR3_PARSER / APPARMOR3_ROOT: AppArmor 3's parser and the root of its /etc/apparmor.d,
# for the control of check 2. The binary for check 1: VESTIBULE_BIN, else
# build-rel/vestibule-mcp.
# Prints one line per check and "apparmor checks: N passed, N failed, N skipped"; exit 1 on any
# failure.
set -uo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:-$(find "$src/dist" -maxdepth 1 -name 'vestibule-mcp_*.deb' 2>/dev/null | head -1)}
bin=${VESTIBULE_BIN:-$src/build-rel/vestibule-mcp}
aa4=${APPARMOR4_DIR:-/var/tmp/vestibule-apparmor4}
passed=0 failed=0 skipped=0
ok() { echo "ok      $*"; passed=$((passed + 1)); }
bad() { echo "FAILED  $*"; failed=$((failed + 1)); }
skip() { echo "skipped $*"; skipped=$((skipped + 1)); }
tmp=$(mktemp -d /tmp/vst-apparmor.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# --- AppArmor 4's parser -------------------------------------------------------------------------
parser=()
aa_root=
if [ -n "${APPARMOR_PARSER:-}" ]; then
        read -r -a parser <<<"$APPARMOR_PARSER"
        aa_root=${APPARMOR_ROOT:-/}
elif command -v apparmor_parser >/dev/null &&
        apparmor_parser --version 2>/dev/null | grep -q 'version [4-9]'; then
        parser=(apparmor_parser)
        aa_root=/
elif aa_root=$("$src/tests/package/apparmor4.sh" "$aa4"); then
        lib=$aa_root/usr/lib/x86_64-linux-gnu
        parser=("$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$aa_root/usr/sbin/apparmor_parser")
fi
v=$("${parser[@]}" --version 2>/dev/null | head -1)
if [ ${#parser[@]} = 0 ] || ! grep -q 'version [4-9]' <<<"$v"; then
        bad "AppArmor 4's apparmor_parser: none (got '${v:-nothing}'); set APPARMOR_PARSER, or" \
                "let apt-get reach Debian 13 (trixie)"
        echo "apparmor checks: $passed passed, $failed failed, $skipped skipped"
        exit 1
fi
ok "parser: $v (${parser[*]: -1})"
# compile only (-Q: no kernel load, -K: no cache), against AppArmor 4.0's features, with the
# abi/, tunables/ and abstractions of that apparmor package
features=$aa_root/etc/apparmor.d/abi/4.0
compile() {
        "${parser[@]}" --config-file /dev/null -I "$aa_root/etc/apparmor.d" -M "$features" \
                -Q -K -S "$1" 2>"$tmp/parser.err" >"$tmp/parser.out" &&
                [ -s "$tmp/parser.out" ]
}


# --- 1. the profiles compile ---------------------------------------------------------------------
deb_profile=$tmp/deb-profile
if [ -n "$deb" ] && [ -f "$deb" ]; then
        dpkg-deb -x "$deb" "$tmp/deb-root"
        cp "$tmp/deb-root/usr/share/vestibule/apparmor/vestibule-mcp" "$deb_profile" 2>/dev/null
        dpkg-deb -e "$deb" "$tmp/deb-control"
        from="the .deb's /usr/share/vestibule/apparmor/vestibule-mcp ($(basename "$deb"))"
else
        sed -e 's/@NAME@/vestibule-mcp/g' -e 's|@PATH@|/usr/bin/vestibule-mcp|g' \
                "$src/packaging/apparmor/vestibule-mcp.in" >"$deb_profile"
        from="packaging/apparmor/vestibule-mcp.in for /usr/bin/vestibule-mcp (no .deb built)"
fi
if compile "$deb_profile"; then
        ok "$from compiles ($(stat -c %s "$tmp/parser.out") bytes of policy)"
else
        bad "$from does not compile: $(cat "$tmp/parser.err")"
fi
# six lines that are not comments: abi, include, profile, userns, the local include, '}'
if grep -q '^profile vestibule-mcp "/usr/bin/vestibule-mcp" flags=(unconfined) {$' "$deb_profile" &&
        grep -q '^  userns,$' "$deb_profile" &&
        [ "$(grep -cvE '^\s*(#|$)' "$deb_profile")" = 6 ]; then
        ok "it attaches to /usr/bin/vestibule-mcp, unconfined, and grants userns only"
else
        bad "the .deb's profile is not 'unconfined + userns' for /usr/bin/vestibule-mcp"
fi

# control: the same profile with a rule AppArmor does not have is refused
sed 's/^  userns,$/  userns_no_such_rule,/' "$deb_profile" >"$tmp/bad-profile"
if compile "$tmp/bad-profile"; then
        bad "control: a profile with an unknown rule compiled: the parser checks nothing"
else
        ok "control: a profile with an unknown rule is refused ($(grep -o 'syntax error' \
                "$tmp/parser.err" | head -1))"
fi

# the npm install's profile, as the binary writes it (a private mount namespace with a tmpfs
# /etc holding AppArmor 4's abi/4.0; with no AppArmor running nothing is loaded)
if [ -d /sys/kernel/security/apparmor ]; then
        skip "setup --apparmor's profile: AppArmor runs here, and this check loads nothing"
elif [ ! -x "$bin" ]; then
        skip "setup --apparmor's profile: no binary at $bin (set VESTIBULE_BIN)"
elif unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs tmpfs /etc &&
                mkdir -p /etc/apparmor.d/abi && : >/etc/apparmor.d/abi/4.0 &&
                "$1" setup --apparmor >"$2/setup.out" 2>&1 &&
                cp /etc/apparmor.d/vestibule-mcp-npm "$2/npm-profile"' sh "$bin" "$tmp"; then
        if compile "$tmp/npm-profile" &&
                grep -qF "profile vestibule-mcp-npm \"$(readlink -f "$bin")\" flags=(unconfined)" \
                        "$tmp/npm-profile"; then
                ok "setup --apparmor's profile for $(readlink -f "$bin") compiles"
        else
                bad "setup --apparmor's profile: $(cat "$tmp/parser.err")"
        fi
else
        bad "setup --apparmor: $(cat "$tmp/setup.out" 2>/dev/null)"
fi

# --- 2. the .deb ---------------------------------------------------------------------------------
if [ -d "$tmp/deb-control" ]; then
        if [ ! -e "$tmp/deb-root/etc" ] && [ ! -e "$tmp/deb-control/conffiles" ]; then
                ok ".deb: the profile is in /usr/share/vestibule/apparmor; nothing under /etc"
        else
                bad ".deb: ships files under /etc (AppArmor 3 would read a profile there at boot)"
        fi
        for s in postinst prerm postrm; do
                [ -x "$tmp/deb-control/$s" ] || bad ".deb: no executable $s"
        done
else
        skip ".deb contents: no .deb (scripts/package.sh makes it)"
fi
if [ -n "${APPARMOR3_PARSER:-}" ]; then
        read -r -a p3 <<<"$APPARMOR3_PARSER"
        if "${p3[@]}" --config-file /dev/null -I "${APPARMOR3_ROOT:-}/etc/apparmor.d" -Q -K \
                "$deb_profile" >/dev/null 2>"$tmp/p3.err"; then
                bad "control: AppArmor 3 reads the profile: the postinst's abi/4.0 test is moot"
        else
                ok "control: $("${p3[@]}" --version 2>/dev/null | head -1) refuses it:" \
                        "$(grep -v 'Cache read' "$tmp/p3.err" | head -1)"
        fi
fi

# --- 3. the postinst and postrm ------------------------------------------------------------------
scripts=$src/packaging/deb
[ -d "$tmp/deb-control" ] && scripts=$tmp/deb-control
mkdir -p "$tmp/fake-ok" "$tmp/fake-fail" "$tmp/nobin"
printf '#!/bin/sh\necho "$*" >>%s/called\n' "$tmp" >"$tmp/fake-ok/apparmor_parser"
printf '#!/bin/sh\necho "$*" >>%s/called\necho "parser: refused" >&2\nexit 1\n' "$tmp" \
        >"$tmp/fake-fail/apparmor_parser"
chmod 755 "$tmp/fake-ok/apparmor_parser" "$tmp/fake-fail/apparmor_parser"
# run_postinst ABI4 AA PATHDIR: `postinst configure` on a made-up /etc and /usr/share (tmpfs in
# a private mount namespace) with abi/4.0 (ABI4=1) or without, with AppArmor's securityfs
# folder (AA=1) or without, PATH=PATHDIR:/bin:/usr/bin; then `postrm remove`. Leaves
# $tmp/called (the parser's arguments), $tmp/installed (the profile the postinst left) and
# $tmp/after-postrm (/etc/apparmor.d's names after the postrm).
run_postinst() {
        rm -f "$tmp/called" "$tmp/installed" "$tmp/after-postrm"
        unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs tmpfs /etc &&
                mkdir -p /etc/apparmor.d/abi && { [ "$1" = 0 ] || : >/etc/apparmor.d/abi/4.0; } &&
                mount -t tmpfs tmpfs /usr/share && mkdir -p /usr/share/vestibule/apparmor &&
                cp "$5" /usr/share/vestibule/apparmor/vestibule-mcp &&
                mount -t tmpfs tmpfs /sys/kernel/security &&
                { [ "$2" = 0 ] || mkdir /sys/kernel/security/apparmor; } &&
                PATH=$3:/bin:/usr/bin "$4/postinst" configure 2>"$6/postinst.err" || exit 1
                if [ -f /etc/apparmor.d/vestibule-mcp ]; then
                        cp -p /etc/apparmor.d/vestibule-mcp "$6/installed"
                fi
                PATH=/bin:/usr/bin "$4/postrm" remove && ls /etc/apparmor.d >"$6/after-postrm"' \
                sh "$1" "$2" "$3" "$scripts" "$deb_profile" "$tmp"
}
if run_postinst 0 1 "$tmp/fake-ok" && [ ! -e "$tmp/called" ] && [ ! -e "$tmp/installed" ]; then
        ok "postinst with AppArmor 3's userspace (no abi/4.0): nothing copied, nothing loaded"
else
        bad "postinst without abi/4.0: $(cat "$tmp/postinst.err" "$tmp/called" 2>/dev/null)"
fi
if run_postinst 1 0 "$tmp/fake-ok" && [ ! -e "$tmp/called" ] &&
        cmp -s "$tmp/installed" "$deb_profile" && [ "$(stat -c %a "$tmp/installed")" = 644 ]; then
        ok "postinst with AppArmor 4 not running: the profile copied (0644, same bytes), not loaded"
else
        bad "postinst with abi/4.0 and no securityfs: $(cat "$tmp/postinst.err" "$tmp/called" 2>/dev/null)"
fi
if run_postinst 1 1 "$tmp/fake-ok" && cmp -s "$tmp/installed" "$deb_profile" &&
        [ "$(cat "$tmp/called" 2>/dev/null)" = "-r -T -W /etc/apparmor.d/vestibule-mcp" ]; then
        ok "postinst with AppArmor 4 running: apparmor_parser -r -T -W /etc/apparmor.d/vestibule-mcp"
else
        bad "postinst with AppArmor 4 running did not load it: $(cat "$tmp/called" 2>/dev/null)"
fi
if [ -f "$tmp/after-postrm" ] && ! grep -qx vestibule-mcp "$tmp/after-postrm"; then
        ok "postrm remove: the profile is gone from /etc/apparmor.d"
else
        bad "postrm remove left: $(cat "$tmp/after-postrm" 2>/dev/null)"
fi
if run_postinst 1 1 "$tmp/fake-fail" && [ -e "$tmp/called" ] &&
        grep -q 'sudo apparmor_parser -r /etc/apparmor.d/vestibule-mcp' "$tmp/postinst.err"; then
        ok "postinst with the parser failing: exit 0, and it says how to load the profile"
else
        bad "postinst with the parser failing: rc or message wrong: $(cat "$tmp/postinst.err")"
fi
if run_postinst 1 1 "$tmp/nobin" && [ ! -e "$tmp/called" ] && [ -e "$tmp/installed" ]; then
        ok "postinst without apparmor_parser installed: exit 0, the profile copied"
else
        bad "postinst without apparmor_parser: $(cat "$tmp/postinst.err")"
fi

echo "apparmor checks: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
