#!/usr/bin/env bash
# Build (or reuse) the test VM's guest: a Debian 12 root file system made with mmdebstrap from
# Debian packages, with systemd as PID 1 (pure cgroup v2, bookworm's default), an unprivileged
# user vestibule-test (uid 2000) that lingers so its user manager and user bus run at boot, and
# a boot service (guest/vestibule-vm-boot.sh) that hands over to the harness the host puts on
# a 9p share (harness.sh, not part of the image).
#
# Output, in a cache folder keyed by a hash of the recipe (this file and scripts/vm/guest/*):
#   $VESTIBULE_VM_CACHE/<hash>/{vmlinuz,initrd.img,root.img}     (default /var/tmp/vestibule-vm)
# The folder's path is the only thing printed on stdout; progress goes to stderr.
# Rebuilt only when the recipe changes; everything in there can be rebuilt from the Debian
# mirror, so deleting the cache is always safe. Needs root (mmdebstrap's root mode, chroot).
#
# Usage: scripts/vm/build-image.sh [--force]
set -euo pipefail

# Everything runs from main(), so bash has read the whole file before running any of it:
# editing this script while a (long) build runs cannot derail that build.
main() {
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache_root=${VESTIBULE_VM_CACHE:-/var/tmp/vestibule-vm}
mirror=${VESTIBULE_VM_MIRROR:-http://deb.debian.org/debian}
security_mirror=${VESTIBULE_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
force=0
if [[ ${1:-} == --force ]]; then force=1; fi

log() { printf 'build-image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Packages: boot + systemd user sessions, the tools the self test uses, and the runtime
# libraries our binaries link (ldd of a Debug build: the libraries below plus ASan/UBSan's).
packages=(
        systemd systemd-sysv udev dbus dbus-user-session libpam-systemd
        linux-image-amd64 kmod
        bash coreutils procps util-linux iproute2 python3
        libcurl4 libjson-c5 libseccomp2 libsystemd0 libyaml-0-2 libarchive13 libssl3
        libsubunit0 libasan8 libubsan1 libstdc++6
)

recipe_hash() {
        # The recipe is this script, the customize hook and the guest files; any change gives a
        # new folder.
        {
                sha256sum "$here/build-image.sh" "$here/customize-guest.sh" | sed "s|$here/||"
                find "$here/guest" -type f -print0 | sort -z | xargs -0 sha256sum |
                        sed "s|$here/||"
        } | sha256sum | cut -c1-16
}

hash=$(recipe_hash)
out=$cache_root/$hash
if [[ $force == 0 && -f $out/ok ]]; then
        touch "$out"
        printf '%s\n' "$out"
        exit 0
fi

[[ $(id -u) == 0 ]] || die "needs root (mmdebstrap root mode and chroot); run it as root"
command -v mmdebstrap >/dev/null || die "mmdebstrap missing: apt-get install mmdebstrap"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 missing: apt-get install e2fsprogs"

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
# Another build may have finished while we waited for the lock.
if [[ $force == 0 && -f $out/ok ]]; then
        touch "$out"
        printf '%s\n' "$out"
        exit 0
fi

work=$(mktemp -d "$cache_root/.build.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
tree=$work/tree
start=$(date +%s)
log "building guest image $hash in $work (Debian bookworm from $mirror)"

# Hooks run on the host with the tree as $1.
#  - essential-hook (before the kernel is installed): an initramfs with just what this VM
#    needs (virtio disk, ext4), small so TCG unpacks it fast.
#  - customize-hook (customize-guest.sh): the user, lingering, the boot service.
# shellcheck disable=SC2016 # $1 is for the hook's shell, not ours
initramfs_hook='mkdir -p "$1/etc/initramfs-tools/conf.d"
printf "MODULES=list\nCOMPRESS=gzip\n" >"$1/etc/initramfs-tools/conf.d/vestibule-vm.conf"
printf "virtio_pci\nvirtio_blk\next4\n" >>"$1/etc/initramfs-tools/modules"'

# The downloaded .debs are kept next to the images (rebuildable, and the next recipe mostly
# needs the same ones), so a rebuild does not download again.
mkdir -p "$cache_root/debs" "$work/debs"
# shellcheck disable=SC2016 # the hooks' $1 is for their shell, not ours
mmdebstrap --variant=minbase --mode=root \
        --skip=download/empty --skip=essential/unlink \
        --setup-hook='mkdir -p "$1/var/cache/apt/archives/"' \
        --setup-hook="sync-in '$cache_root/debs' /var/cache/apt/archives/" \
        --include="$(IFS=,; echo "${packages[*]}")" \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --essential-hook="$initramfs_hook" \
        --customize-hook="sync-out /var/cache/apt/archives '$work/debs'" \
        --customize-hook="'$here/customize-guest.sh' \"\$1\"" \
        bookworm "$tree" \
        "deb $mirror bookworm main" \
        "deb $mirror bookworm-updates main" \
        "deb $security_mirror bookworm-security main" >&2

log "mmdebstrap done after $(( $(date +%s) - start )) s"
mkdir -p "$work/out"
cp "$(find "$tree/boot" -name 'vmlinuz-*' | head -n1)" "$work/out/vmlinuz"
cp "$(find "$tree/boot" -name 'initrd.img-*' | head -n1)" "$work/out/initrd.img"
size_mb=$(( $(du -sm "$tree" | cut -f1) + 768 ))
mkfs.ext4 -q -L vmroot -E root_owner=0:0 -d "$tree" "$work/out/root.img" "${size_mb}M" >&2
{
        echo "recipe $hash"
        echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s"
        echo "kernel $(basename "$(find "$tree/boot" -name 'vmlinuz-*' | head -n1)")"
} >"$work/out/ok"

rm -rf "$out" "$cache_root/debs"
mv -T "$work/out" "$out"
rm -f "$work/debs/lock"
rm -rf "$work/debs/partial"
mv -T "$work/debs" "$cache_root/debs"
# Older recipes nobody used for a week go; they can always be rebuilt.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -mtime +7 \
        ! -path "$out" -exec rm -rf {} + 2>/dev/null || true
log "done in $(( $(date +%s) - start )) s: $out ($(du -sh --apparent-size "$out/root.img" | cut -f1) image, $(du -sh "$out/root.img" | cut -f1) used)"
printf '%s\n' "$out"
}
main "$@"
