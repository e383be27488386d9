#!/bin/bash
# Inside the test VM, at boot, as root (started by the image's guest/vestibule-vm-boot.sh once
# it has mounted the control share; run.sh copies this file there for every run, so changing
# it never rebuilds the image): mount the host's data shares, run
# the host's command as vestibule-test *inside its user manager* (systemd-run --user --pipe
# --wait, as a terminal on a desktop would), send its stdout/stderr out on virtio-serial ports,
# report its exit status, power off. The host side is scripts/vm/run.sh.
#
# Control share (9p tag vmctl), written by the host:
#   cmd.sh   the script to run (bash cmd.sh, as the user)
#   mounts   one line per data share: TAG<TAB>ro|rw<TAB>GUEST_PATH
#   cwd      working directory for the command (optional)
#   env      NAME=VALUE lines added to the command's environment (optional)
#   root-after.sh  run with bash as root after the command (optional; output joins the
#            command's; the function as_user runs a program as the user); its failure fails
#            a run whose command passed (exit 1)
# Status port (virtio-serial vestibule.status), read by the host:
#   "vm: ..." progress and errors, "started" when the command starts, "exit N" at the end.
set -u
uid=2000 # vestibule-test
ctl=/run/vestibule-vm/ctl
private=/run/vestibule-vm/run

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

poweroff_now() {
        sync
        # Only the shares hold anything worth keeping (the root disk is a throwaway snapshot).
        umount -R -l /run/vestibule-vm/ctl 2>/dev/null
        systemctl poweroff --force --force --no-wall
        sleep 30
        echo o >/proc/sysrq-trigger
}

# The status port: without it there is no way to tell the host anything.
for _ in $(seq 1 300); do
        status_dev=$(port_dev vestibule.status) && break
        sleep 0.1
done
if [[ -z ${status_dev:-} ]]; then
        echo "vestibule-vm: no virtio-serial port vestibule.status; not started by run.sh?" >&2
        poweroff_now
fi
exec 3>"$status_dev"
say() { printf '%s\n' "$*" >&3; }
fail() { say "vm: error: $*"; say "exit 125"; poweroff_now; exit 1; }

mount_9p() { # TAG PATH MODE
        local cache=mmap
        [[ $3 == ro ]] && cache=loose
        mount -t 9p -o "trans=virtio,version=9p2000.L,msize=512000,cache=$cache,$3" "$1" "$2"
}

mkdir -p "$private"
[[ -f $ctl/cmd.sh ]] || fail "no cmd.sh on the control share"

# Data shares, at the paths the host asked for (usually the host's own, so absolute paths in
# build trees keep working). Parents first.
if [[ -f $ctl/mounts ]]; then
        while IFS=$'\t' read -r tag mode path; do
                [[ -n $tag ]] || continue
                case $path in
                /|/bin|/boot|/dev|/etc|/lib|/lib64|/proc|/root|/run|/sbin|/sys|/usr|/var|/home|/run/user*|/run/vestibule-vm*)
                        fail "refusing to mount share $tag over $path" ;;
                /*) ;;
                *) fail "share path '$path' is not absolute" ;;
                esac
                mkdir -p "$path" || fail "cannot create mount point $path"
                mount_9p "$tag" "$path" "$mode" || fail "cannot mount share $tag on $path"
                say "vm: share $tag on $path ($mode)"
        done < <(awk -F'\t' '{ print length($3) "\t" $0 }' "$ctl/mounts" | sort -n | cut -f2-)
fi

# The user manager (started by logind because the user lingers) and its bus. Generous: a
# starved TCG guest was seen taking minutes for what takes a second on a desktop, and then
# user@.service's own start timeout fails it: start it again with a longer one.
user_manager_up() { systemctl is-active --quiet "user@$uid.service" && [[ -S /run/user/$uid/bus ]]; }
deadline=$((SECONDS + 600))
beat=0
while ((SECONDS < deadline)) && ! user_manager_up; do
        if systemctl is-failed --quiet "user@$uid.service"; then
                say "vm: user@$uid.service failed to start (a slow boot?); starting it again"
                mkdir -p "/run/systemd/system/user@$uid.service.d"
                printf '[Service]\nTimeoutStartSec=10min\n' \
                        >"/run/systemd/system/user@$uid.service.d/vestibule-vm.conf"
                systemctl daemon-reload
                systemctl reset-failed "user@$uid.service"
                systemctl start --no-block "user@$uid.service"
        fi
        if ((SECONDS >= beat)); then
                say "vm: waiting for user@$uid.service ($(systemctl is-active "user@$uid.service"))"
                beat=$((SECONDS + 10))
        fi
        sleep 0.5
done
user_manager_up || fail "user@$uid.service is not running ($(systemctl is-active "user@$uid.service"))"

as_user() {
        setpriv --reuid="$uid" --regid="$uid" --init-groups --reset-env -- \
                env XDG_RUNTIME_DIR="/run/user/$uid" \
                DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" \
                PATH=/usr/local/bin:/usr/bin:/bin "$@"
}
state=$(as_user timeout 300 systemctl --user is-system-running --wait 2>&1)
say "vm: user manager: $state"

# The command runs from a copy the user can read (/run is noexec: run it through bash).
install -m 0755 -d "$private"
install -m 0644 "$ctl/cmd.sh" "$private/cmd.sh"
args=(--user --pipe --wait --quiet --collect --unit="vestibule-vm-cmd-$$"
      --setenv=VESTIBULE_VM=1 --setenv=PATH=/usr/local/bin:/usr/bin:/bin)
if [[ -s $ctl/cwd ]]; then
        args+=(--working-directory="$(<"$ctl/cwd")")
fi
if [[ -f $ctl/env ]]; then
        while IFS= read -r kv; do
                [[ $kv == *=* ]] && args+=(--setenv="$kv")
        done <"$ctl/env"
fi
out_dev=$(port_dev vestibule.stdout) || fail "no virtio-serial port vestibule.stdout"
err_dev=$(port_dev vestibule.stderr) || fail "no virtio-serial port vestibule.stderr"

say "started"
as_user systemd-run "${args[@]}" bash "$private/cmd.sh" \
        </dev/null >"$out_dev" 2>"$err_dev"
rc=$?
if [[ -f $ctl/root-after.sh ]]; then
        say "vm: command exit $rc; running root-after.sh as root"
        install -m 0644 "$ctl/root-after.sh" "$private/root-after.sh"
        export uid
        export -f as_user
        bash "$private/root-after.sh" </dev/null >"$out_dev" 2>"$err_dev"
        rc_after=$?
        say "vm: root-after.sh exit $rc_after"
        ((rc != 0 || rc_after == 0)) || rc=1
fi
say "exit $rc"
printf '%s\n' "$rc" >"$ctl/exit-status" 2>/dev/null
exec 3>&-
poweroff_now
