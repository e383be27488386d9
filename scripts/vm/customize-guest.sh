#!/usr/bin/env bash
# mmdebstrap customize hook for the test VM (called by build-image.sh with the tree as $1):
# the unprivileged user with lingering, the boot service that runs the host's command,
# and a quiet, fast boot. Part of the image recipe: changing it rebuilds the image.
set -euo pipefail
t=${1:?usage: customize-guest.sh TREE}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The test user, with the same name and ids as on the host (scripts/ci-user.sh), so what it
# creates on a 9p share belongs to the same user on both sides.
user=vestibule-test
uid=2000

chroot "$t" groupadd -g "$uid" "$user"
chroot "$t" useradd -m -u "$uid" -g "$uid" -s /bin/bash "$user"
for f in subuid subgid; do
        grep -q "^$user:" "$t/etc/$f" 2>/dev/null || echo "$user:200000:65536" >>"$t/etc/$f"
done
# Lingering: at boot logind starts user@2000.service, the user manager with its bus at
# /run/user/2000/bus, without anybody logging in.
mkdir -p "$t/var/lib/systemd/linger"
: >"$t/var/lib/systemd/linger/$user"

echo vestibule-vm >"$t/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tvestibule-vm\n' >"$t/etc/hosts"
printf '/dev/vda\t/\text4\trw,noatime\t0\t0\n' >"$t/etc/fstab"

install -m 0755 "$here/guest/vestibule-vm-boot.sh" "$t/usr/local/sbin/vestibule-vm-boot"
install -m 0644 "$here/guest/vestibule-vm.service" "$t/etc/systemd/system/vestibule-vm.service"
printf '9p\n9pnet_virtio\nvirtio_console\n' >"$t/etc/modules-load.d/vestibule-vm.conf"
# -cpu max shows vmx/svm, so udev would load kvm (seconds under TCG, and useless here).
printf 'blacklist kvm\nblacklist kvm_amd\nblacklist kvm_intel\n' >"$t/etc/modprobe.d/vestibule-vm.conf"
chroot "$t" systemctl enable vestibule-vm.service
# Nothing periodic or interactive: a run is one boot, one command, power off.
chroot "$t" systemctl mask apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
        e2scrub_all.timer e2scrub_reap.service fstrim.timer serial-getty@ttyS0.service getty@tty1.service \
        systemd-timesyncd.service

chroot "$t" systemctl set-default multi-user.target
# The journal stays in memory: nothing of a run's boot is kept, and disk writes cost under TCG.
mkdir -p "$t/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"$t/etc/systemd/journald.conf.d/vestibule-vm.conf"

# Module trees no test guest loads (hardware it does not have); then refresh the index.
kver=$(basename "$(find "$t/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -n1)")
for m in sound drivers/gpu drivers/media drivers/net/wireless drivers/infiniband \
        drivers/staging drivers/bluetooth drivers/iio drivers/hid net/bluetooth net/wireless \
        net/mac80211 drivers/net/ethernet drivers/usb drivers/scsi drivers/isdn drivers/mtd; do
        rm -rf "${t:?}/lib/modules/$kver/kernel/$m"
done
chroot "$t" depmod -a "$kver"
rm -rf "${t:?}/var/cache/apt/"*.bin "${t:?}/var/lib/apt/lists/"*
