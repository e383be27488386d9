# shellcheck shell=bash disable=SC2034 # the package lists are used by the scripts that source this
# setup-lib.sh - the set-up steps scripts/test.sh and scripts/demo.sh share. Sourced, not run.
# Every function takes what it needs as arguments (no globals), so scripts can run one in a
# child bash under `timeout`.

# The Debian packages Vestibule's build, tests, engines and images need.
VST_BUILD_DEPS=(cmake gcc make pkg-config libcurl4-openssl-dev libjson-c-dev libseccomp-dev
        libsystemd-dev libyaml-dev check libarchive-dev libssl-dev)
VST_ENGINE_DEPS=(docker.io podman runc uidmap slirp4netns fuse-overlayfs catatonit)
VST_OTHER_DEPS=(mmdebstrap bubblewrap curl ca-certificates tar procps util-linux iproute2
        docker-registry)
# The systemd VM stage (scripts/vm): software-emulated qemu.
VST_VM_DEPS=(qemu-system-x86 qemu-utils)
# The static checks (scripts/lint.sh, STYLE.md).
VST_LINT_DEPS=(clang-format clang-tidy cppcheck python3)

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
                --exclude=./tests/e2e/node_modules -cf - . | tar -C "$dst.new" -xf -
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

# vst_import_images_docker IMAGES: as root, import IMAGES/{python,node}.tar into the rootful
# Docker Engine (/var/run/docker.sock) as vestibule/<lang>:bookworm through the Engine API, with
# the labels and settings `vestibule-mcp setup` uses; skipped when the image there already holds
# that tarball.
vst_import_images_docker() {
        local images=$1 lang tar sha have sock=/var/run/docker.sock q
        for lang in python node; do
                tar=$images/$lang.tar
                sha=$(sha256sum "$tar" | cut -d' ' -f1)
                have=$(curl -sf --unix-socket "$sock" "http://d/images/vestibule/$lang:bookworm/json" |
                        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{try{console.log((JSON.parse(s).Config.Labels||{})["vestibule.tar-sha256"]||"")}catch{console.log("")}})' || true)
                if [ "$have" = "$sha" ]; then
                        echo "vestibule/$lang:bookworm is already $tar (Docker)"
                        continue
                fi
                q="fromSrc=-&repo=vestibule/$lang&tag=bookworm"
                q+="&changes=$(vst_urlencode "LABEL vestibule.tar-sha256=$sha")"
                q+="&changes=$(vst_urlencode "LABEL vestibule.image=1")"
                q+="&changes=$(vst_urlencode "WORKDIR /workspace")"
                q+="&changes=$(vst_urlencode "USER 1000:1000")"
                q+="&changes=$(vst_urlencode "ENV PATH=/usr/local/bin:/usr/bin:/bin")"
                curl -sSf --unix-socket "$sock" -X POST -H 'Content-Type: application/x-tar' \
                        --data-binary "@$tar" "http://d/images/create?$q" >/dev/null
                echo "imported $tar into Docker as vestibule/$lang:bookworm"
        done
}

# vst_urlencode TEXT: TEXT percent-encoded for a URL query.
vst_urlencode() {
        node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$1"
}

# vst_check_setup_cli BIN IMAGES DIR USER: `vestibule-mcp setup --from-tar` through the real
# CLI as USER (no engine reachable, so only the native half is set up): python then node into
# DIR/rootfs; the node run must end with the readiness line and exit 0 (the python run alone
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
        grep -q "^ready in this terminal's environment: isolation native" <<<"$out" ||
                { echo "FAIL: no readiness line"; return 1; }
        out=$(vcli setup --from-tar "$images/python.tar" --language python 2>&1) || true
        grep -q "already installed" <<<"$out" ||
                { printf '%s\nFAIL: a second setup did not skip\n' "$out"; return 1; }
        out=$(vcli run --language python -c 'print(6*7)' 2>&1) ||
                { printf '%s\nFAIL: run on the installed rootfs\n' "$out"; return 1; }
        printf '%s\n' "$out"
        if ! grep -qx "42" <<<"$out" || ! grep -q "^isolation: native" <<<"$out"; then
                echo "FAIL: print(6*7) on the installed rootfs"
                return 1
        fi
        rm -rf "$dir"
}
