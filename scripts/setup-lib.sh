# shellcheck shell=bash disable=SC2034 # the package lists are used by the scripts that source this
# setup-lib.sh - the set-up steps scripts/test.sh and scripts/demo.sh share. Sourced, not run.
# Every function takes what it needs as arguments (no globals), so scripts can run one in a
# child bash under `timeout`.

# The Debian packages Vestibule's build, tests, engines and images need.
VST_BUILD_DEPS=(cmake gcc make pkg-config libcurl4-openssl-dev libjson-c-dev libseccomp-dev
        libsystemd-dev libyaml-dev check libarchive-dev libssl-dev)
VST_ENGINE_DEPS=(docker.io podman runc uidmap slirp4netns fuse-overlayfs catatonit rootlesskit runsc)
VST_OTHER_DEPS=(mmdebstrap bubblewrap curl ca-certificates tar procps util-linux iproute2
        docker-registry python3-pytest python3-pyflakes)
# The systemd VM stage (scripts/vm): software-emulated qemu.
VST_VM_DEPS=(qemu-system-x86 qemu-utils)
# Packaging (scripts/package.sh, tests/package/ci.sh): dpkg-shlibdeps and lintian for the .deb;
# the linux-arm64 npm binary cross-built with Debian's toolchain and the multiarch :arm64 -dev
# packages (needs `dpkg --add-architecture arm64` first: vst_add_arm64), run under qemu-user.
VST_PACKAGE_DEPS=(dpkg-dev lintian gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
        libjson-c-dev:arm64 libseccomp-dev:arm64 libcurl4-openssl-dev:arm64 libsystemd-dev:arm64
        libyaml-dev:arm64 libarchive-dev:arm64 libssl-dev:arm64)
# The static checks (scripts/lint.sh, docs/design/style.md).
VST_LINT_DEPS=(clang-format clang-tidy cppcheck python3)
# The libFuzzer targets (scripts/fuzz.sh): clang and its fuzzer/sanitizer runtimes.
VST_FUZZ_DEPS=(clang libclang-rt-14-dev)

# vst_add_arm64: as root, let apt install :arm64 packages (for VST_PACKAGE_DEPS).
vst_add_arm64() {
        dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
}

# vst_missing_packages PKG...: print the ones not installed (and nodejs npm when there is no
# node or npm at all).
vst_missing_packages() {
        local p
        for p in "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
                        printf '%s\n' "$p"
        done
        if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
                printf '%s\n' nodejs npm
        fi
}

# vst_install_packages PKG...: as root, apt-get install those of PKG that are missing.
vst_install_packages() {
        local missing=() p
        for p in "$@"; do
                dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
                        missing+=("$p")
        done
        if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
                missing+=(nodejs npm)
        fi
        if [ "${#missing[@]}" -eq 0 ]; then
                echo "all packages present"
                return 0
        fi
        echo "installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# vst_fetch_trixie DIR PKG...: download Debian 13 (trixie)'s PKG .debs into DIR/debs with a
# private apt state under DIR (the host's apt sources are not changed), for hosts whose own
# release ships a version too old (AppArmor 3, runsc 20221219). apt-get(8): download.
# Returns apt-get's status; its messages go to stderr.
vst_fetch_trixie() {
        local dir=$1
        shift
        mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/debs" || return 1
        echo "deb http://deb.debian.org/debian trixie main" >"$dir/sources.list"
        local apt=(-o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
                -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache"
                -o APT::Sandbox::User=root)
        apt-get "${apt[@]}" -qq update >&2 &&
                (cd "$dir/debs" && apt-get "${apt[@]}" -qq download "$@" >&2)
}

# vst_runsc_date: the date part of the installed runsc's version (0.0~20221219.0 -> 20221219),
# or 0 when runsc is not installed.
vst_runsc_date() {
        local v
        v=$(runsc --version 2>/dev/null | sed -n 's/^runsc version [0-9.]*~\{0,1\}\([0-9]\{8\}\).*/\1/p')
        echo "${v:-0}"
}

# vst_install_runsc_newer: as root, where the installed runsc is older than 2023 (Debian 12's
# 0.0~20221219 answers statx with AT_NO_AUTOMOUNT with EINVAL, so coreutils' ls, stat and cp
# fail in its sandboxes: src/gvisor/backend.c's probe refuses it), install Debian 13's runsc
# package over it (one static binary, no dependencies). Prints what it did.
vst_install_runsc_newer() {
        local dir=${VST_RUNSC_DIR:-/var/tmp/vestibule-runsc-trixie}
        if [ "$(vst_runsc_date)" -ge 20230101 ]; then
                echo "runsc $(vst_runsc_date): new enough"
                return 0
        fi
        rm -rf "$dir/debs"
        vst_fetch_trixie "$dir" runsc || return 1
        dpkg -i "$dir"/debs/runsc_*.deb >/dev/null || return 1
        echo "runsc $(vst_runsc_date) installed from Debian 13 (the host's was older than 2023)"
}

# vst_runsc_old DIR: Debian 12's runsc (0.0~20221219, the one whose statx refuses
# AT_NO_AUTOMOUNT), downloaded from the host's own apt sources and unpacked under DIR once, for
# the tests that show such a runsc is refused (scripts/ci/stages/59-runsc.sh). Prints the
# binary's path; status 1 when that version is not in the host's sources.
vst_runsc_old() {
        local dir=$1 v
        if [ ! -x "$dir/root/usr/bin/runsc" ]; then
                v=$(apt-cache madison runsc 2>/dev/null | awk -F' *[|] *' '$2 ~ /20221219/ {print $2; exit}')
                [ -n "$v" ] || return 1
                rm -rf "$dir" && mkdir -p "$dir" &&
                        (cd "$dir" && apt-get -o APT::Sandbox::User=root -qq download "runsc=$v" >&2) &&
                        dpkg-deb -x "$dir"/runsc_*.deb "$dir/root" || return 1
        fi
        echo "$dir/root/usr/bin/runsc"
}

# vst_node_ok: Node.js 20 or later is there (the MCP client SDK needs it).
vst_node_ok() {
        local major
        major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
        [ "$major" -ge 20 ]
}

# vst_copy_sources REPO DEST: copy the working tree (no .git, builds or node_modules) to DEST,
# readable by everyone (the clone may sit under a 0700 home; the test user must read it).
vst_copy_sources() {
        local repo=$1 dst=$2
        mkdir -p "$(dirname "$dst")"
        rm -rf "$dst.new"
        mkdir -p "$dst.new"
        tar -C "$repo" --exclude=./.git --exclude='./build*' --exclude=./node_modules \
                --exclude=./tests/e2e/node_modules --exclude=./tests/clients/node_modules \
                --exclude=./tests/egress/node_modules \
                -cf - . | tar -C "$dst.new" -xf -
        rm -rf "$dst"
        mv "$dst.new" "$dst"
        chmod -R a+rX "$dst"
}

# vst_build SRC DIR TYPE JOBS: a fresh out-of-tree CMake build (Release or Debug), readable by all.
vst_build() {
        local src=$1 dir=$2 type=$3 jobs=$4
        rm -rf "$dir"
        cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE="$type"
        cmake --build "$dir" -j"$jobs"
        chmod -R a+rX "$dir"
}

# vst_build_images SRC OUT: images/build.sh into OUT (python.tar, node.tar), each unpacked
# to OUT/rootfs/<lang>/ (the native backend's layout), swapped in whole.
vst_build_images() {
        local src=$1 out=$2 lang
        mkdir -p "$out/rootfs"
        bash "$src/images/build.sh" -o "$out" all
        for lang in python node; do
                rm -rf "$out/rootfs/$lang.new"
                mkdir -p "$out/rootfs/$lang.new"
                tar -C "$out/rootfs/$lang.new" --numeric-owner -xf "$out/$lang.tar"
                rm -rf "$out/rootfs/$lang"
                mv "$out/rootfs/$lang.new" "$out/rootfs/$lang"
        done
        chmod 0755 "$out" "$out/rootfs"
}

# vst_npm_ci DIR: install the e2e/demo client's pinned packages, readable by all.
vst_npm_ci() {
        local dir=$1
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
        chmod -R a+rX "$dir"
}

# vst_npm_install_locked DIR: install DIR's packages as its package-lock.json pins them, readable
# by all. Not `npm ci`: the registry this project's machines reach lacks some other platforms'
# optional packages (opencode-darwin-*, ...), which npm then leaves out of the lock, and `npm ci`
# refuses such a lock; `npm install --no-save` installs the same pinned tree and writes nothing.
vst_npm_install_locked() {
        local dir=$1
        (cd "$dir" && npm install --no-save --no-audit --no-fund --loglevel=error)
        chmod -R a+rX "$dir"
}

# vst_import_images_rootless USER IMAGES: as root, import IMAGES/{python,node}.tar into USER's
# rootless Podman as vestibule/<lang>:bookworm, the way `vestibule-mcp setup` imports them
# (same labels and settings); skipped when the image there already holds that tarball.
vst_import_images_rootless() {
        local user=$1 images=$2 lang tar sha have uid
        uid=$(id -u "$user")
        for lang in python node; do
                tar=$images/$lang.tar
                sha=$(sha256sum "$tar" | cut -d' ' -f1)
                have=$(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$(getent passwd "$user" | cut -d: -f6)" \
                        XDG_RUNTIME_DIR="/run/user/$uid" podman image inspect "vestibule/$lang:bookworm" \
                        --format '{{index .Labels "vestibule.tar-sha256"}}' 2>/dev/null || true)
                if [ "$have" = "$sha" ]; then
                        echo "vestibule/$lang:bookworm is already $tar"
                        continue
                fi
                runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$(getent passwd "$user" | cut -d: -f6)" \
                        XDG_RUNTIME_DIR="/run/user/$uid" podman import \
                        --change "LABEL vestibule.tar-sha256=$sha" --change "LABEL vestibule.image=1" \
                        --change "WORKDIR /workspace" --change "USER 1000:1000" \
                        --change "ENV PATH=/usr/local/bin:/usr/bin:/bin" "$tar" "vestibule/$lang:bookworm"
        done
}

# vst_import_images_podman IMAGES: as root, import IMAGES/{python,node}.tar into the rootful
# Podman (/run/podman/podman.sock, the same storage as root's podman CLI) as
# vestibule/<lang>:bookworm, with the labels and settings `vestibule-mcp setup` uses; skipped
# when the image there already holds that tarball.
vst_import_images_podman() {
        local images=$1 lang tar sha have
        for lang in python node; do
                tar=$images/$lang.tar
                sha=$(sha256sum "$tar" | cut -d' ' -f1)
                have=$(podman image inspect "vestibule/$lang:bookworm" \
                        --format '{{index .Labels "vestibule.tar-sha256"}}' 2>/dev/null || true)
                if [ "$have" = "$sha" ]; then
                        echo "vestibule/$lang:bookworm is already $tar (rootful Podman)"
                        continue
                fi
                podman import \
                        --change "LABEL vestibule.tar-sha256=$sha" --change "LABEL vestibule.image=1" \
                        --change "WORKDIR /workspace" --change "USER 1000:1000" \
                        --change "ENV PATH=/usr/local/bin:/usr/bin:/bin" "$tar" "vestibule/$lang:bookworm"
        done
}

# vst_check_setup_cli BIN IMAGES DIR USER: `vestibule-mcp setup --from-tar` through the real
# CLI as USER (no engine reachable, so only the native half is set up): python then node into
# DIR/rootfs; the node run must end with the readiness line (native, or gvisor where runsc is
# installed) and exit 0 (the python run alone
# must not claim ready: node is still missing), a second python run must say "already
# installed", and a print(1) must run on the installed trees.
vst_check_setup_cli() {
        local bin=$1 images=$2 dir=$3 user=$4 home out
        home=$(getent passwd "$user" | cut -d: -f6)
        rm -rf "$dir" && mkdir -p "$dir" && cp "$bin" "$dir/vestibule-mcp" && chown -R "$user:" "$dir"
        vcli() {
                runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" \
                        XDG_RUNTIME_DIR="/run/user/$(id -u "$user")" \
                        DOCKER_HOST="unix://$dir/no-engine.sock" VESTIBULE_ROOTFS_DIR="$dir/rootfs" \
                        VESTIBULE_WORKSPACE="$dir/ws" VESTIBULE_AUDIT_DIR="$dir/audit" \
                        "$dir/vestibule-mcp" "$@"
        }
        out=$(vcli setup --from-tar "$images/python.tar" --language python 2>&1) && {
                printf '%s\nFAIL: setup claimed success with the node rootfs missing\n' "$out"
                return 1
        }
        grep -q "rootfs not set up: '$dir/rootfs/node' is missing" <<<"$out" ||
                { printf '%s\nFAIL: no Blocked: naming the missing node rootfs\n' "$out"; return 1; }
        out=$(vcli setup --from-tar "$images/node.tar" --language node 2>&1) ||
                { printf '%s\nFAIL: setup of node failed\n' "$out"; return 1; }
        printf '%s\n' "$out" | tail -n 8
        # native, or gvisor where runsc is installed (auto's first rung: src/service/ladder.c);
        # both run from these trees
        grep -Eq "^ready in this terminal's environment: isolation (native|gvisor)" <<<"$out" ||
                { echo "FAIL: no readiness line"; return 1; }
        out=$(vcli setup --from-tar "$images/python.tar" --language python 2>&1) || true
        grep -q "already installed" <<<"$out" ||
                { printf '%s\nFAIL: a second setup did not skip\n' "$out"; return 1; }
        out=$(vcli run --language python -c 'print(6*7)' 2>&1) ||
                { printf '%s\nFAIL: run on the installed rootfs\n' "$out"; return 1; }
        printf '%s\n' "$out"
        if ! grep -qx "42" <<<"$out" || ! grep -Eq "^isolation: (native|gvisor)" <<<"$out"; then
                echo "FAIL: print(6*7) on the installed rootfs"
                return 1
        fi
        rm -rf "$dir"
}

# vst_setup_debian BIN IMAGES USER [--reuse]: the product's own install of both backends, as
# root, the way an administrator prepares a host whose server runs as root with
# VESTIBULE_RUN_AS=USER: `vestibule-mcp setup --from-debian --save-tars IMAGES` builds
# python.tar and node.tar with images/build.sh (kept in IMAGES for the unit tests, which read
# them there), unpacks them into IMAGES/rootfs (root-owned, numeric ids kept, readable by USER's
# sandboxes through the "other" bits) and imports them into rootful Docker as
# vestibule/{python,node}:bookworm. With --reuse, the tarballs already in IMAGES are installed
# with `setup --from-tar` instead (no build). Then it checks what setup claims:
#   - the ready line, exit 0;
#   - each rootfs record names the sha256 of the saved tarball, the tree holds the tarball's
#     entries (count) and the same bytes for sample files, /etc/shadow is 0640 root:shadow;
#   - each image in Docker has the image ID setup printed and the tarball's sha256 label;
#   - a second run builds, unpacks and imports nothing (tree inodes, records, tarballs and image
#     IDs unchanged, no build started);
#   - print(6*7) / console.log(6*7) through the native backend (as USER) and the container
#     backend (root server, VESTIBULE_RUN_AS) on exactly what setup installed; the sandbox user
#     cannot read the rootfs's /etc/shadow (control: it reads /etc/passwd).
# Env: VST_SETUP_EXTRA="VAR=value ..." added to every setup and run (e.g. other image names).
vst_setup_debian() {
        local bin=$1 images=$2 user=$3 reuse=${4:-} log out out2 t0 t1 lang sha id rec env=() extra=()
        local before after home uid
        read -r -a extra <<<"${VST_SETUP_EXTRA:-}"
        # the settings of the root-run setup and server: rootful Docker, sandboxes as USER
        env=(PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8
                "VESTIBULE_ROOTFS_DIR=$images/rootfs" "VESTIBULE_RUN_AS=$(id -u "$user"):$(id -g "$user")"
                DOCKER_HOST=unix:///var/run/docker.sock VESTIBULE_RUNTIME=docker "${extra[@]}")
        home=$(getent passwd "$user" | cut -d: -f6)
        uid=$(id -u "$user")
        mkdir -p "$images" && chmod 0755 "$images"
        log=$(mktemp)
        # the state of what setup made: tree inodes, records, tarballs, image IDs
        snapshot() {
                local l
                for l in python node; do
                        stat -c "%n %i %Y" "$images/rootfs/$l" "$images/rootfs/$l.json" "$images/$l.tar" 2>&1
                        img_field "$l" Id
                done
        }
        # img_field LANG FIELD: a top-level field of the Docker image setup imports for LANG
        img_field() {
                local name
                name=$(img_name "$1")
                curl -sf --unix-socket /var/run/docker.sock "http://d/images/$name/json" |
                        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);const f=process.argv[1];console.log(f==="Label"?(j.Config.Labels||{})["vestibule.tar-sha256"]||"":j[f])})' "$2"
        }
        img_name() {
                local v
                for v in "${env[@]}"; do
                        case "$v" in VESTIBULE_IMAGE_"${1^^}"=*) echo "${v#*=}"; return ;; esac
                done
                echo "vestibule/$1:bookworm"
        }
        vsetup() { env -i "${env[@]}" "$bin" setup "$@"; }

        t0=$(date +%s)
        if [ -n "${VST_SETUP_LOG:-}" ]; then
                cp "$VST_SETUP_LOG" "$log" # (developing this check: the output of an earlier run)
        elif [ "$reuse" = --reuse ]; then
                # python alone ends Blocked while node is missing: its status is not the verdict
                vsetup --from-tar "$images/python.tar" --language python >>"$log" 2>&1 || true
                grep -q "^setup: python rootfs \(already \)\{0,1\}installed" "$log" ||
                        { cat "$log"; echo "FAIL: setup --from-tar python"; return 1; }
                vsetup --from-tar "$images/node.tar" --language node >>"$log" 2>&1 ||
                        { cat "$log"; echo "FAIL: setup --from-tar node"; return 1; }
        else
                # --force: the recipes run in every CI run (their output is not reused between runs)
                vsetup --from-debian --force --save-tars "$images" >"$log" 2>&1 ||
                        { tail -n 60 "$log"; echo "FAIL: setup --from-debian"; return 1; }
        fi
        t1=$(date +%s)
        out=$(cat "$log")
        printf '%s\n' "$out" | grep -v '^build.sh\|^I: \|^W: ' | tail -n 20
        echo "setup ${reuse:---from-debian}: $((t1 - t0)) s"
        grep -q "^ready in this terminal's environment: isolation " <<<"$out" ||
                { echo "FAIL: no ready line"; return 1; }
        for lang in python node; do
                sha=$(sha256sum "$images/$lang.tar" | cut -d' ' -f1)
                rec=$images/rootfs/$lang.json
                [ -d "$images/rootfs/$lang" ] || { echo "FAIL: no $lang tree"; return 1; }
                grep -q "\"identity\": *\"sha256:$sha\"" "$rec" ||
                        { cat "$rec"; echo "FAIL: $rec does not name $images/$lang.tar (sha256:$sha)"; return 1; }
                local n_tar n_rec
                n_tar=$(tar -tf "$images/$lang.tar" | grep -vc '^\./$' || true)
                n_rec=$(sed -n 's/.*"entries": *\([0-9]*\).*/\1/p' "$rec")
                # the record counts the root entry too
                [ "$n_rec" -eq "$((n_tar + 1))" ] || [ "$n_rec" -eq "$n_tar" ] ||
                        { echo "FAIL: $lang: $n_rec entries unpacked, the tarball has $n_tar"; return 1; }
                local f
                for f in etc/passwd usr/lib/os-release usr/bin/bash usr/bin/timeout \
                        "$([ "$lang" = python ] && echo usr/bin/python3.11 || echo usr/bin/node)"; do
                        [ "$(tar -xOf "$images/$lang.tar" "./$f" | sha256sum)" = "$(sha256sum <"$images/rootfs/$lang/$f")" ] ||
                                { echo "FAIL: $lang: /$f differs from the tarball"; return 1; }
                done
                [ "$(stat -c '%a %u %g' "$images/rootfs/$lang/etc/shadow")" = "640 0 42" ] ||
                        { stat "$images/rootfs/$lang/etc/shadow"; echo "FAIL: $lang /etc/shadow is not 0640 root:shadow"; return 1; }
                if [ -S /var/run/docker.sock ]; then
                        id=$(sed -n "s/^setup: $lang image .* in the container engine as '.*' (image ID \(sha256:[0-9a-f]*\))$/\1/p" <<<"$out" | tail -1)
                        [ -n "$id" ] || { echo "FAIL: setup printed no image ID for $lang"; return 1; }
                        [ "$(img_field "$lang" Id)" = "$id" ] ||
                                { echo "FAIL: $(img_name "$lang") in Docker is not $id"; return 1; }
                        [ "$(img_field "$lang" Label)" = "$sha" ] ||
                                { echo "FAIL: $(img_name "$lang") in Docker does not hold $images/$lang.tar"; return 1; }
                        echo "$lang: rootfs = tarball sha256:$sha ($n_tar entries), image $id"
                fi
        done

        # a second run: nothing built, unpacked or imported
        before=$(snapshot)
        t0=$(date +%s)
        if [ "$reuse" = --reuse ]; then
                out2=$(vsetup --from-tar "$images/python.tar" --language python 2>&1) ||
                        { printf '%s\n' "$out2"; echo "FAIL: second setup"; return 1; }
                grep -q "python rootfs already installed" <<<"$out2" ||
                        { printf '%s\n' "$out2"; echo "FAIL: the second setup did not skip"; return 1; }
        else
                out2=$(vsetup --from-debian --save-tars "$images" 2>&1) ||
                        { printf '%s\n' "$out2"; echo "FAIL: second setup"; return 1; }
                if ! grep -q "nothing to do" <<<"$out2" || grep -q "building python and node" <<<"$out2"; then
                        printf '%s\n' "$out2"; echo "FAIL: the second setup did not skip"; return 1
                fi
        fi
        t1=$(date +%s)
        after=$(snapshot)
        [ "$before" = "$after" ] ||
                { diff <(echo "$before") <(echo "$after"); echo "FAIL: the second setup changed something"; return 1; }
        echo "second setup: nothing touched ($((t1 - t0)) s)"

        # runs on exactly what setup installed
        # shellcheck disable=SC2317 # called as "vrun_$backend"
        vrun_native() {
                runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 \
                        XDG_RUNTIME_DIR="/run/user/$uid" VESTIBULE_BACKEND=native \
                        VESTIBULE_ROOTFS_DIR="$images/rootfs" "$bin" run "$@"
        }
        # shellcheck disable=SC2317
        vrun_container() {
                env -i "${env[@]}" VESTIBULE_BACKEND=container VESTIBULE_IMAGE_SOURCE=debian \
                        VESTIBULE_WORKSPACE="$images/.ws" "$bin" run "$@"
        }
        local backend code
        for backend in native container; do
                [ "$backend" = native ] || [ -S /var/run/docker.sock ] || continue
                for lang in python node; do
                        code='print(6*7)'
                        [ "$lang" = node ] && code='console.log(6*7)'
                        out=$("vrun_$backend" --language "$lang" -c "$code" 2>&1) ||
                                { printf '%s\n' "$out"; echo "FAIL: $lang on $backend"; return 1; }
                        if ! grep -qx 42 <<<"$out" || ! grep -q "^isolation: $backend" <<<"$out"; then
                                printf '%s\n' "$out"; echo "FAIL: $lang on $backend did not print 42 with isolation $backend"; return 1
                        fi
                        echo "$backend $lang: 42, $(grep '^isolation:' <<<"$out")"
                done
                out=$("vrun_$backend" --language bash -c 'id -u; cat /etc/passwd >/dev/null && echo passwd-read; cat /etc/shadow && echo SHADOW-READ; true' 2>&1) || true
                if ! grep -q passwd-read <<<"$out" || grep -q SHADOW-READ <<<"$out"; then
                        printf '%s\n' "$out"; echo "FAIL: $backend: the sandbox reads /etc/shadow (or not even /etc/passwd)"; return 1
                fi
                echo "$backend: the sandbox user reads /etc/passwd, not /etc/shadow"
        done
        rm -rf "$images/.ws"
        rm -f "$log"
}

# vst_setup_rootless BIN IMAGES DIR USER: as root, `vestibule-mcp setup --from-tar` of
# IMAGES/{python,node}.tar as USER with USER's rootless Podman as the engine: imports both as
# vestibule/<lang>:bookworm there (skipped when the same tarball is already there); the native
# half goes into DIR/rootfs, removed after.
vst_setup_rootless() {
        local bin=$1 images=$2 dir=$3 user=$4 uid home out lang extra=()
        read -r -a extra <<<"${VST_SETUP_EXTRA:-}" # (developing this: other image names)
        uid=$(id -u "$user")
        home=$(getent passwd "$user" | cut -d: -f6)
        rm -rf "$dir" && mkdir -p "$dir" && chown "$user:" "$dir"
        for lang in python node; do
                out=$(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 \
                        XDG_RUNTIME_DIR="/run/user/$uid" DOCKER_HOST="unix:///run/user/$uid/podman/podman.sock" \
                        VESTIBULE_ROOTFS_DIR="$dir/rootfs" "${extra[@]}" "$bin" setup --from-tar "$images/$lang.tar" \
                        --language "$lang" 2>&1) || true # python alone ends Blocked (node missing)
                printf '%s\n' "$out" | grep '^setup: '
                grep -q "^setup: $lang image \(imported\|already present\) in the container engine" <<<"$out" ||
                        { printf '%s\n' "$out"; echo "FAIL: $lang not imported into rootless Podman"; return 1; }
        done
        rm -rf "$dir"
}

# vst_private_dockerd NAME SOCK LOG WAIT_S PIDFILE IMAGES CLIENT... -- LAUNCH...: as root, a
# Docker daemon of a test's own (scripts/runsc-engine.sh, desktop-standin.sh, rootless-docker.sh)
# up and holding the host Docker's sandbox images. When CLIENT (a command prefix, e.g.
# `docker -H unix://SOCK`, or a function) already gets an answer on SOCK it is left as it is;
# otherwise LAUNCH (the daemon's command with the caller's own options: namespaces, runtimes,
# user; a function works too) runs in the background with LOG as its stdout and stderr, its pid
# written to PIDFILE ("" for none), until CLIENT answers within WAIT_S seconds (status 1, the
# log's tail on stderr, if it does not or LAUNCH exits first). Then each of IMAGES (space
# separated) not already there with the host's image id is copied with `docker save | CLIENT
# load`, so every engine holds the same image ids. Messages are prefixed with "NAME: ".
# Sources: dockerd(8), docker-save(1), docker-load(1).
vst_private_dockerd() {
        local name=$1 sock=$2 log=$3 wait_s=$4 pidfile=$5 images=$6 client=() pid i img have
        shift 6
        while [ $# -gt 0 ] && [ "$1" != -- ]; do
                client+=("$1")
                shift
        done
        if [ "${1:-}" != -- ] || [ $# -lt 2 ] || [ "${#client[@]}" -eq 0 ]; then
                echo "$name: vst_private_dockerd: usage: NAME SOCK LOG WAIT_S PIDFILE IMAGES CLIENT... -- LAUNCH..." >&2
                return 2
        fi
        shift
        if [ -S "$sock" ] && "${client[@]}" version --format '{{.Server.Version}}' >/dev/null 2>&1; then
                echo "$name: already running at unix://$sock"
        else
                rm -f "$sock"
                "$@" >"$log" 2>&1 </dev/null &
                pid=$!
                [ -z "$pidfile" ] || echo "$pid" >"$pidfile"
                for ((i = 0; i < wait_s * 10; i++)); do
                        [ -S "$sock" ] && "${client[@]}" version --format '{{.Server.Version}}' >/dev/null 2>&1 &&
                                break
                        if ! kill -0 "$pid" 2>/dev/null; then
                                echo "$name: the daemon exited: $(tail -5 "$log")" >&2
                                return 1
                        fi
                        sleep 0.1
                done
                if [ "$i" -ge $((wait_s * 10)) ]; then
                        echo "$name: no answer on $sock in $wait_s s: see $log" >&2
                        return 1
                fi
        fi
        for img in $images; do
                have=$("${client[@]}" image inspect --format '{{.Id}}' "$img" 2>/dev/null || true)
                [ -n "$have" ] && [ "$have" = "$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null)" ] &&
                        continue
                echo "$name: loading $img from the host's Docker"
                if ! docker save "$img" | "${client[@]}" load -q >/dev/null; then
                        echo "$name: could not load $img" >&2
                        return 1
                fi
        done
}
