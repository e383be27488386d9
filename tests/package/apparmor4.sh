#!/bin/bash
# tests/package/apparmor4.sh - AppArmor 4's userspace for hosts that have an older one (Debian 12
# ships AppArmor 3, which cannot read our profile's `abi <abi/4.0>` and `userns`): Debian 13's
# apparmor and libc6 packages, fetched with apt-get download into a private apt state (the
# host's apt sources are not changed) and unpacked under DIR/root, once. Its apparmor_parser
# runs with that root's own dynamic loader, since the host's glibc is older:
#   DIR/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \
#       --library-path DIR/root/usr/lib/x86_64-linux-gnu DIR/root/usr/sbin/apparmor_parser ...
# with -I DIR/root/etc/apparmor.d for abi/4.0, tunables/ and abstractions/.
# Used by tests/package/apparmor.sh (the packaging stage) and scripts/ci/stages/90-vm.sh (the
# profile loaded into the VM's kernel), which may run side by side: a lock makes the second
# wait for the first's fetch. See apt-get(8) (download) and dpkg-deb(1) (-x).
#
#   tests/package/apparmor4.sh [DIR]     (default DIR: $APPARMOR4_DIR or /var/tmp/vestibule-apparmor4)
#
# Prints DIR/root on success; exit 1 (apt-get's message on stderr) when trixie's packages
# cannot be reached.
set -uo pipefail

aa4=${1:-${APPARMOR4_DIR:-/var/tmp/vestibule-apparmor4}}
mkdir -p "$aa4" || exit 1
exec 9>"$aa4/.lock"
flock 9
if [ ! -x "$aa4/root/usr/sbin/apparmor_parser" ]; then
        rm -rf "$aa4/root"
        # shellcheck source=scripts/setup-lib.sh
        . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/setup-lib.sh"
        vst_fetch_trixie "$aa4" apparmor libc6 || exit 1
        # unpacked beside, then renamed: a half-unpacked root is never taken for a whole one
        rm -rf "$aa4/root.new"
        for d in "$aa4"/debs/*.deb; do dpkg-deb -x "$d" "$aa4/root.new" || exit 1; done
        mv "$aa4/root.new" "$aa4/root" || exit 1
fi
echo "$aa4/root"
