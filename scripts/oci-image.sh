#!/bin/bash
# scripts/oci-image.sh - the server as an OCI image, for Docker Desktop (macOS, Windows) and any
# Docker Engine, built from our own .deb and Debian's packages, without any container registry:
#
#   scripts/oci-image.sh DEB OUT.tar [IMAGES_DIR]
#   scripts/oci-image.sh --from-build BUILD_DIR OUT.tar [IMAGES_DIR]
#
# DEB: the vestibule-mcp .deb scripts/package.sh built. --from-build: a CMake build folder
# instead (CI's Release build), installed with `cmake --install --prefix /usr --strip`. OUT.tar: an image archive that
# `docker load` (and `podman load`) reads: the OCI image layout (oci-layout, index.json,
# blobs/sha256/) plus Docker's manifest.json, as `docker save` writes since Docker 25.
# IMAGES_DIR (optional): a folder with python.tar and node.tar (images/build.sh); they go into
# a second layer at /usr/share/vestibule/images/tar/, and the image is tagged
# vestibule-mcp:<version>-images instead of vestibule-mcp:<version>.
#
# The root filesystem: mmdebstrap --variant=extract of the libraries the binary links and
# loads on first use (src/lazy: libcurl, libarchive, libyaml, libcrypto; not libsystemd: no
# systemd scope in a container), from the Debian suite and mirror apt uses here, plus the .deb's
# own files (dpkg-deb -x). No shell, no package manager, no docs but copyright files.
#
# The MCP client starts it with (install-client --docker writes it)
#   docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock \
#       -v vestibule-state:/var/lib/vestibule -v <folder>:/workspace IMAGE
# The server finds itself in this image (/usr/share/vestibule/oci-image, written below: a
# /.dockerenv alone is any container, e.g. a privileged CI one where native works), takes the
# volume path (the engine's filesystem is not its own) and never the native or gvisor backend; its workspace is /workspace
# (VESTIBULE_WORKSPACE in the image's environment). It runs as root inside the container (the
# engine's socket is root's there) and runs code as 1000:1000 (VESTIBULE_RUN_AS), never root.
# Without IMAGES_DIR the container backend runs the pinned registry images (images/pins), which
# the engine pulls by digest; with it, VESTIBULE_IMAGE_SOURCE=debian, and
#   docker run --rm -v /var/run/docker.sock:/var/run/docker.sock IMAGE setup \
#       --from-tar /usr/share/vestibule/images/tar/python.tar --language python
# (and node) loads the shipped tarballs into the engine through its API.
# Sources: https://github.com/opencontainers/image-spec (image-layout.md, config.md,
# manifest.md), https://github.com/moby/moby/blob/master/image/spec/v1.2.md (manifest.json).
set -euo pipefail

from_build=
if [ "${1:-}" = --from-build ]; then
        from_build=$(readlink -f "${2:?--from-build needs a build folder}")
        shift
fi
deb=$(readlink -f "${1:?usage: oci-image.sh DEB OUT.tar [IMAGES_DIR]}")
out=$(readlink -f "${2:?usage: oci-image.sh DEB OUT.tar [IMAGES_DIR]}")
images=${3:-}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1794182400}
say() { printf 'oci-image: %s\n' "$*" >&2; }
die() {
        printf 'oci-image: %s\n' "$*" >&2
        exit 1
}
[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap --mode=root; the layer's files owned by root)"
command -v mmdebstrap >/dev/null || die "mmdebstrap not found: apt-get install mmdebstrap"
[ -n "$from_build" ] || [ -f "$deb" ] || die "no such .deb: $deb"
if [ -n "$images" ]; then
        for l in python node; do
                [ -f "$images/$l.tar" ] || die "$images/$l.tar missing (images/build.sh -o $images)"
        done
fi

if [ -n "$from_build" ]; then
        version=$("$from_build/vestibule-mcp" --version | sed -n 's/^vestibule-mcp //p')
        arch=$(dpkg --print-architecture)
else
        version=$(dpkg-deb -f "$deb" Version)
        arch=$(dpkg-deb -f "$deb" Architecture)
fi
case $arch in
amd64 | arm64) ;;
*) die "architecture $arch: only amd64 and arm64 images are made" ;;
esac
. /etc/os-release
suite=${VESTIBULE_DEBIAN_SUITE:-${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}}
# The mirrors apt uses here (images/build.sh's rule), else Debian's.
mirror=$(sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        tr ' ' '\n' | grep -E '/debian/?$' | head -1 || true)
mirror=${VESTIBULE_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}
mirror=${mirror%/}
secmirror=${VESTIBULE_DEBIAN_SECURITY_MIRROR:-${mirror%/debian}/debian-security}

work=$(mktemp -d /var/tmp/vestibule-oci.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
pkgs=libc6,libjson-c5,libseccomp2,libcurl4,libarchive13,libyaml-0-2,libssl3
say "root filesystem: $pkgs from $mirror $suite (mmdebstrap --variant=extract), and ${from_build:-$(basename "$deb")}"
mmdebstrap --quiet --mode=root --variant=extract --format=directory --include="$pkgs" \
        --aptopt='APT::Install-Recommends "false"' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        "$suite" "$root" "deb $mirror $suite main" "deb $mirror $suite-updates main" \
        "deb $secmirror $suite-security main" >&2
if [ -n "$from_build" ]; then
        DESTDIR=$root cmake --install "$from_build" --prefix /usr --strip >/dev/null
else
        dpkg-deb -x "$deb" "$root"
fi
# extract unpacks whole packages: what a server in a container never reads goes.
rm -rf "$root"/usr/share/man "$root"/usr/share/info "$root"/usr/share/locale "$root"/usr/share/lintian \
        "$root"/usr/share/vestibule/apparmor "$root"/usr/share/bash-completion "$root"/usr/lib/*/gconv \
        "$root"/var/lib/apt "$root"/var/cache/* "$root"/var/log/* "$root"/etc/apt \
        "$root"/usr/share/zoneinfo "$root"/usr/sbin "$root"/sbin "$root"/usr/bin/[!v]* \
        "$root"/etc/dpkg "$root"/var/lib/dpkg
find "$root/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$root" -xdev -type d -empty -path "$root/usr/share/doc/*" -delete 2>/dev/null || true
# The folders and accounts the server needs: root's home, /var/lib/vestibule (the audit
# folder, VESTIBULE_AUDIT_DIR below: install-client --docker mounts the named volume
# vestibule-state there, so the log outlives --rm; docs/packaging.md), /tmp and /var/tmp
# (engine_tmpfile()), /workspace (the bind of the user's folder), the sandbox user 1000.
install -d -m 0700 "$root/root" "$root/var/lib/vestibule"
install -d -m 0755 "$root/workspace" "$root/etc"
install -d -m 1777 "$root/tmp" "$root/var/tmp"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nsandbox:x:1000:\n' >"$root/etc/group"
: >"$root/etc/hosts"
# the marker by which the server knows it runs in this image (src/config/config.h,
# SBX_OCI_IMAGE_MARKER)
install -d -m 0755 "$root/usr/share/vestibule"
printf 'vestibule-mcp OCI image (scripts/oci-image.sh)\n' >"$root/usr/share/vestibule/oci-image"
chroot "$root" /usr/bin/vestibule-mcp --version >/dev/null ||
        die "the server does not start in its root filesystem (a library missing?)"

# layer DIR NAME: a reproducible tarball of DIR, gzipped (docker load and podman load read
# compressed layers) as blobs/sha256/<sha of the .gz>; prints "<sha of the tar> <sha of the gz>"
# (the config's diff_id names the uncompressed tar, the manifest the blob).
blobs=$work/img/blobs/sha256
mkdir -p "$blobs"
layer() {
        local dir=$1 t=$work/$2.tar diff sha
        tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" \
                --format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
                -C "$dir" -cf "$t" .
        diff=$(sha256sum "$t" | cut -d' ' -f1)
        gzip -9n "$t"
        sha=$(sha256sum "$t.gz" | cut -d' ' -f1)
        mv "$t.gz" "$blobs/$sha"
        echo "$diff $sha"
}
blob() { # blob FILE: moved into blobs/ under its sha; prints the sha
        local sha
        sha=$(sha256sum "$1" | cut -d' ' -f1)
        mv "$1" "$blobs/$sha"
        echo "$sha"
}

layers=()
diffs=()
read -r d l < <(layer "$root" base)
diffs+=("$d")
layers+=("$l")
tag=vestibule-mcp:$version
env_json='"PATH=/usr/bin:/bin","HOME=/root","VESTIBULE_WORKSPACE=/workspace","VESTIBULE_RUN_AS=1000:1000","VESTIBULE_AUDIT_DIR=/var/lib/vestibule/audit"'
if [ -n "$images" ]; then
        mkdir -p "$work/imgs/usr/share/vestibule/images/tar"
        cp "$images/python.tar" "$images/node.tar" "$work/imgs/usr/share/vestibule/images/tar/"
        chmod 0644 "$work/imgs/usr/share/vestibule/images/tar/"*.tar
        read -r d l < <(layer "$work/imgs" images)
        diffs+=("$d")
        layers+=("$l")
        tag=vestibule-mcp:$version-images
        env_json="$env_json,\"VESTIBULE_IMAGE_SOURCE=debian\""
fi
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
diff_ids=$(printf '"sha256:%s",' "${diffs[@]}")
printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Entrypoint":["/usr/bin/vestibule-mcp"],"Env":[%s],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"vestibule-mcp","org.opencontainers.image.version":"%s"}},"rootfs":{"type":"layers","diff_ids":[%s]},"history":[{"created":"%s","created_by":"scripts/oci-image.sh"}]}' \
        "$arch" "$created" "$env_json" "$version" "${diff_ids%,}" "$created" >"$work/config.json"
csize=$(stat -c %s "$work/config.json")
config=$(blob "$work/config.json")
ldesc=
for l in "${layers[@]}"; do
        ldesc="$ldesc{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$l\",\"size\":$(stat -c %s "$blobs/$l")},"
done
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
        "$config" "$csize" "${ldesc%,}" >"$work/manifest.json"
msize=$(stat -c %s "$work/manifest.json")
manifest=$(blob "$work/manifest.json")
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/img/oci-layout"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"docker.io/library/%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$manifest" "$msize" "$tag" "${tag#*:}" >"$work/img/index.json"
lpaths=$(printf '"blobs/sha256/%s",' "${layers[@]}")
printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":[%s]}]' \
        "$config" "$tag" "${lpaths%,}" >"$work/img/manifest.json"
tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SOURCE_DATE_EPOCH" --format=pax \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -C "$work/img" -cf "$out.part" oci-layout index.json manifest.json blobs
mv "$out.part" "$out"
say "$(basename "$out"): $(stat -c %s "$out") bytes ($tag; base layer $(stat -c %s "$blobs/${layers[0]}") bytes gzipped)"
