#!/bin/bash
# Inside the test VM, at boot, as root (vestibule-vm.service): mount the host's control share
# (9p tag vmctl) and hand over to the harness the host put there (scripts/vm/harness.sh, copied
# by scripts/vm/run.sh for every run, so the image only changes when this bootstrap does).
# Without the share or the harness, say so on the status port and power off.
set -u
ctl=/run/vestibule-vm/ctl

port_dev() { # NAME -> /dev/vportNpM, from sysfs (no dependency on udev's symlinks)
        local f
        for f in /sys/class/virtio-ports/*/name; do
                [[ -r $f && $(<"$f") == "$1" ]] || continue
                f=${f%/name}
                printf '/dev/%s\n' "${f##*/}"
                return 0
        done
        return 1
}
give_up() {
        local dev
        if dev=$(port_dev vestibule.status); then
                printf 'vm: error: %s\nexit 125\n' "$1" >"$dev"
        fi
        echo "vestibule-vm: $1" >&2
        sync
        systemctl poweroff --force --force --no-wall
}

modprobe -a 9p 9pnet_virtio virtio_console 2>/dev/null
mkdir -p "$ctl"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap vmctl "$ctl" ||
        give_up "cannot mount the control share (9p tag vmctl): not started by scripts/vm/run.sh?"
[[ -f $ctl/harness.sh ]] || give_up "no harness.sh on the control share"
exec bash "$ctl/harness.sh"
