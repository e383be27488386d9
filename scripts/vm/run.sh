#!/usr/bin/env bash
# Run one command inside the test VM (Debian 12, systemd as PID 1, pure cgroup v2) as the
# unprivileged user vestibule-test (uid 2000) *inside its user manager*, the way a terminal on
# a desktop runs it; print its stdout/stderr and exit with its status.
#
# Usage: scripts/vm/run.sh [OPTIONS] -- COMMAND [ARG...]
#        scripts/vm/run.sh [OPTIONS] --script FILE      (FILE is run with bash)
# Options:
#   --share DIR[:GUEST]     9p share, read-write, at GUEST inside (default: the same path as on
#                           the host, so build trees with absolute paths work); repeatable
#   --ro-share DIR[:GUEST]  the same, read-only
#   --cwd DIR               working directory inside (default: $PWD if it is inside a share)
#   --env NAME=VALUE        add to the command's environment; repeatable
#   --timeout S             the command's time limit, 124 when hit (default 1500)
#   --stall-timeout S       watchdog: a boot whose console and status port stay silent for S
#                           seconds before the command starts is hung (seen: crng init, TSC
#                           calibration); it is killed and retried (default 120)
#   --boot-timeout S        a boot that has not started the command after S seconds is
#                           killed and retried even if it still prints (default 900: a
#                           starved host was seen needing 340 s+ for one boot)
#   --attempts N            boots to try before giving up (default 3)
#   --root-after FILE       after the command, run FILE with bash as *root* in the guest (its
#                           output joins the command's; as_user CMD... runs CMD as the user);
#                           a failure there fails the run (exit 1) when the command passed
#   --keep                  keep the run folder (console log, raw outputs) and print its path
# Environment: VESTIBULE_VM_IMAGE=DIR use this image folder instead of build-image.sh's.
#
# Exit status: the command's; 124 = --timeout hit; 125 = the VM failed (never booted to the
# command after all attempts, or the guest harness reported an error).
#
# Ownership on shares: qemu's 9p runs with security_model=passthrough (when qemu runs as root;
# security_model=none otherwise). The guest sees host owners and modes unchanged, and what the
# guest user creates belongs to uid 2000 on the host, which is the host's vestibule-test too
# (scripts/ci-user.sh). So a share the user must write to has to be writable by uid 2000 on the
# host (chown it, or share a scratch folder that is); read-only shares just need to be readable.
#
# Network: none (-nic none). Console log: the run folder's console.log. Qemu is always killed.
set -euo pipefail
# All of it runs from main(): bash reads the whole file first, so editing the script while
# it runs cannot derail the run.
main() {

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout_s=1500
boot_timeout_s=900
stall_timeout_s=120
attempts=3
keep=0
script=
root_after=
cwd=
shares=()   # "MODE<TAB>HOST<TAB>GUEST"
envs=()

log() { printf 'vm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 125; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

add_share() { # MODE SPEC
        local host=${2%%:*} guest=
        [[ $2 == *:* ]] && guest=${2#*:}
        [[ -d $host ]] || die "share '$host' is not a directory"
        host=$(cd "$host" && pwd -P)
        [[ -n $guest ]] || guest=$host
        [[ $guest == /* ]] || die "guest path '$guest' must be absolute"
        shares+=("$1"$'\t'"$host"$'\t'"$guest")
}

while (($#)); do
        case $1 in
        --share) add_share rw "${2:?--share needs DIR}"; shift 2 ;;
        --ro-share) add_share ro "${2:?--ro-share needs DIR}"; shift 2 ;;
        --cwd) cwd=${2:?--cwd needs DIR}; shift 2 ;;
        --env) [[ ${2:-} == *=* ]] || die "--env needs NAME=VALUE"; envs+=("$2"); shift 2 ;;
        --timeout) timeout_s=${2:?}; shift 2 ;;
        --boot-timeout) boot_timeout_s=${2:?}; shift 2 ;;
        --stall-timeout) stall_timeout_s=${2:?}; shift 2 ;;
        --attempts) attempts=${2:?}; shift 2 ;;
        --keep) keep=1; shift ;;
        --script) script=${2:?--script needs FILE}; shift 2 ;;
        --root-after) root_after=${2:?--root-after needs FILE}; shift 2 ;;
        --) shift; break ;;
        -h|--help) usage ;;
        *) die "unknown option '$1' (see --help)" ;;
        esac
done
[[ -n $script || $# -gt 0 ]] || usage
[[ -z $script || $# -eq 0 ]] || die "give either --script FILE or -- COMMAND, not both"
command -v qemu-system-x86_64 >/dev/null ||
        die "qemu-system-x86_64 missing: apt-get install --no-install-recommends qemu-system-x86"

# Default working directory: where we are, when that is inside a share at the same path.
if [[ -z $cwd ]]; then
        here_pwd=$(pwd -P)
        for s in "${shares[@]}"; do
                IFS=$'\t' read -r _ host guest <<<"$s"
                if [[ $host == "$guest" && ( $here_pwd == "$host" || $here_pwd == "$host"/* ) ]]; then
                        cwd=$here_pwd
                        break
                fi
        done
fi

if [[ -n ${VESTIBULE_VM_IMAGE:-} ]]; then
        image=$VESTIBULE_VM_IMAGE # a prebuilt image folder (vmlinuz, initrd.img, root.img)
else
        image=$("$here/build-image.sh") || die "building the guest image failed"
fi
for f in vmlinuz initrd.img root.img; do
        [[ -f $image/$f ]] || die "no $f in the image folder $image"
done
run=$(mktemp -d "${TMPDIR:-/var/tmp}/vestibule-vm-run.XXXXXX")
qemu_pid=
tail_pids=()
# shellcheck disable=SC2317 # also called from the EXIT trap
stop_qemu() {
        if [[ -n $qemu_pid ]] && kill -0 "$qemu_pid" 2>/dev/null; then
                kill -TERM "$qemu_pid" 2>/dev/null || true
                for _ in 1 2 3 4 5 6 7 8 9 10; do
                        kill -0 "$qemu_pid" 2>/dev/null || break
                        sleep 0.2
                done
                kill -KILL "$qemu_pid" 2>/dev/null || true
                wait "$qemu_pid" 2>/dev/null || true
        fi
        qemu_pid=
        local p
        for p in "${tail_pids[@]}"; do
                kill "$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
        done
        tail_pids=()
}
# shellcheck disable=SC2317 # called from the EXIT trap
finish() {
        stop_qemu
        if [[ $keep == 1 ]]; then
                log "run folder kept: $run"
        else
                rm -rf "$run"
        fi
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The control share: the command and what to mount where.
ctl=$run/ctl
mkdir -p "$ctl"
cp "$here/harness.sh" "$ctl/harness.sh"
if [[ -n $script ]]; then
        cp "$script" "$ctl/cmd.sh"
else
        { echo '# generated by scripts/vm/run.sh'; printf '%q ' "$@"; echo; } >"$ctl/cmd.sh"
fi
[[ -z $root_after ]] || cp "$root_after" "$ctl/root-after.sh"
[[ -z $cwd ]] || printf '%s\n' "$cwd" >"$ctl/cwd"
: >"$ctl/env"
for e in "${envs[@]}"; do printf '%s\n' "$e" >>"$ctl/env"; done

model=passthrough
[[ $(id -u) == 0 ]] || model=none
fsargs=(-fsdev "local,id=fsctl,path=$ctl,security_model=$model"
        -device "virtio-9p-pci,fsdev=fsctl,mount_tag=vmctl")
: >"$ctl/mounts"
i=0
for s in "${shares[@]}"; do
        IFS=$'\t' read -r mode host guest <<<"$s"
        ro=
        [[ $mode == ro ]] && ro=,readonly=on
        [[ $host != *,* ]] || die "share path '$host' contains a comma, which qemu cannot take"
        fsargs+=(-fsdev "local,id=fs$i,path=$host,security_model=$model$ro"
                 -device "virtio-9p-pci,fsdev=fs$i,mount_tag=share$i")
        printf 'share%d\t%s\t%s\n' "$i" "$mode" "$guest" >>"$ctl/mounts"
        i=$((i + 1))
done

# One boot. Sets: result (exit|boot-timeout|guest-error|died|timeout), rc, boot_s.
boot_once() {
        local a=$1 d=$run/boot$1
        mkdir -p "$d"
        : >"$d/stdout"; : >"$d/stderr"; : >"$d/status"
        rm -f "$ctl/exit-status"
        local t0 started=0 t_start=0 now size last_size=-1 t_progress
        t0=$(date +%s.%N)
        t_progress=$t0
        why="it powered off or crashed before the command started"
        TMPDIR=$run qemu-system-x86_64 \
                -machine pc -accel tcg,thread=multi -cpu max -smp 2 -m 1024 \
                -nodefaults -display none -monitor none -no-reboot -nic none \
                -serial "file:$d/console.log" \
                -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
                -append "root=/dev/vda rw console=ttyS0 panic=1 fsck.mode=skip systemd.show_status=1 systemd.unified_cgroup_hierarchy=1 mitigations=off" \
                -drive "file=$image/root.img,format=raw,if=virtio,snapshot=on" \
                -device virtio-rng-pci \
                -device virtio-serial-pci \
                -chardev "file,id=vmout,path=$d/stdout" \
                -device virtserialport,chardev=vmout,name=vestibule.stdout \
                -chardev "file,id=vmerr,path=$d/stderr" \
                -device virtserialport,chardev=vmerr,name=vestibule.stderr \
                -chardev "file,id=vmstatus,path=$d/status" \
                -device virtserialport,chardev=vmstatus,name=vestibule.status \
                "${fsargs[@]}" </dev/null >"$d/qemu.log" 2>&1 &
        qemu_pid=$!
        result=died
        rc=125
        boot_s=
        while kill -0 "$qemu_pid" 2>/dev/null; do
                now=$(date +%s.%N)
                if [[ $started == 0 ]] && grep -qx started "$d/status"; then
                        started=1
                        t_start=$now
                        boot_s=$(awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
                        log "boot $a: command started after ${boot_s} s"
                        # Stream the command's output as it comes.
                        tail -c +1 -f --pid="$qemu_pid" "$d/stdout" &
                        tail_pids+=($!)
                        tail -c +1 -f --pid="$qemu_pid" "$d/stderr" >&2 &
                        tail_pids+=($!)
                fi
                if [[ $started == 0 ]] && grep -q '^vm: error:' "$d/status"; then
                        result="guest-error"
                        break
                fi
                if [[ $started == 0 ]]; then
                        # Progress: the console or the harness's status lines grow.
                        size=$( { cat "$d/console.log" "$d/status" 2>/dev/null || true; } | wc -c)
                        if [[ $size != "$last_size" ]]; then
                                last_size=$size
                                t_progress=$now
                        fi
                        if awk -v a="$t_progress" -v b="$now" -v l="$stall_timeout_s" \
                                'BEGIN { exit !(b - a > l) }'; then
                                why="its console was silent for ${stall_timeout_s} s"
                                result=boot-timeout
                                break
                        fi
                        if awk -v a="$t0" -v b="$now" -v l="$boot_timeout_s" \
                                'BEGIN { exit !(b - a > l) }'; then
                                why="it had not started the command after ${boot_timeout_s} s"
                                result=boot-timeout
                                break
                        fi
                fi
                if [[ $started == 1 ]] && awk -v a="$t_start" -v b="$now" -v l="$timeout_s" \
                        'BEGIN { exit !(b - a > l) }'; then
                        result=timeout
                        break
                fi
                sleep 0.25
        done
        if [[ $result == died ]]; then
                wait "$qemu_pid" 2>/dev/null || true
                qemu_pid=
                # Let the tails print what is left (they end with qemu).
                local p
                for p in "${tail_pids[@]}"; do wait "$p" 2>/dev/null || true; done
                tail_pids=()
                local line
                line=$(grep -E '^exit [0-9]+$' "$d/status" | tail -n1 || true)
                if [[ -n $line ]]; then
                        rc=${line#exit }
                        result="exit"
                        grep -q '^vm: error:' "$d/status" && result="guest-error"
                elif [[ $started == 0 ]]; then
                        result=boot-timeout
                fi
        fi
        stop_qemu
}

show_failure() { # DIR
        grep '^vm: ' "$1/status" >&2 || true
        log "qemu: $(tail -n 3 "$1/qemu.log" | tr '\n' ' ')"
        log "last console lines ($1/console.log):"
        tail -n 25 "$1/console.log" | sed 's/^/    /' >&2 || true
        keep=1
}

t_all=$(date +%s)
for ((a = 1; a <= attempts; a++)); do
        boot_once "$a"
        case $result in
        exit)
                log "exit status $rc; round trip $(( $(date +%s) - t_all )) s (boot to command ${boot_s} s)"
                exit "$rc" ;;
        timeout)
                log "the command ran longer than --timeout ${timeout_s} s; killed the VM"
                exit 124 ;;
        guest-error)
                show_failure "$run/boot$a"
                log "the guest harness failed (above); not retrying"
                exit 125 ;;
        died)
                show_failure "$run/boot$a"
                log "the VM died while the command ran"
                exit 125 ;;
        boot-timeout)
                log "boot $a failed: $why; killed it"
                show_failure "$run/boot$a" ;;
        esac
done
die "no boot reached the command in $attempts attempts"
}
main "$@"
