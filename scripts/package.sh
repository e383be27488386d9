#!/bin/bash
# scripts/package.sh - build the release packages from clean builds, into dist/:
#
#   dist/vestibule-mcp_<version>_<arch>.deb       Debian/Ubuntu package (dpkg-deb), with the
#                                                 AppArmor profile (packaging/apparmor/) its
#                                                 postinst installs and loads with AppArmor 4
#   dist/vestibule-mcp-<version>.tgz              npm launcher package `vestibule-mcp`
#   dist/vestibule-mcp-linux-x64-<version>.tgz    npm @vestibule-mcp/linux-x64 (the binary)
#   dist/vestibule-mcp-linux-arm64-<version>.tgz  npm @vestibule-mcp/linux-arm64 (cross-built;
#                                                 skipped with a note when the toolchain is absent)
#   dist/vestibule-mcp-oci-<version>-<arch>.tar   the server as an OCI image (`docker load`), for
#                                                 Docker Desktop: scripts/oci-image.sh from the .deb
#   dist/vestibule-mcp-oci-images-<version>-<arch>.tar  the same with the sandbox images' tarballs
#                                                 (only with --oci-images DIR: python.tar, node.tar)
#
# Usage: scripts/package.sh [--no-arm64] [--no-lintian] [--no-oci] [--oci-images DIR]
#
# The .deb links json-c and libseccomp dynamically and depends on their packages (dpkg-shlibdeps);
# the npm binaries link both statically (VESTIBULE_STATIC_DEPS) so they run with neither
# installed. Both load libcurl, libarchive, libyaml, libsystemd and libcrypto on first use
# (src/lazy). Every binary is checked to need no glibc symbol newer than GLIBC_FLOOR_MAX
# (Ubuntu 22.04's 2.35), and the man page to name every subcommand and setting.
#
# Needs: cmake gcc pkg-config the -dev packages of README, dpkg-dev (dpkg-shlibdeps,
# dpkg-buildflags), npm; lintian (optional); gcc-aarch64-linux-gnu and the :arm64 -dev packages
# for the arm64 binary.
set -euo pipefail

readonly GLIBC_FLOOR_MAX=2.35
src=$(cd "$(dirname "$0")/.." && pwd)
dist=$src/dist
work=$src/build-pkg
arm64=1
lintian=1
oci=1
oci_images=
while [ $# -gt 0 ]; do
        a=$1
        shift
        case $a in
        --no-oci) oci=0 ;;
        --oci-images)
                oci_images=$(readlink -f "${1:?--oci-images needs a folder}")
                shift
                ;;
        --no-arm64) arm64=0 ;;
        --no-lintian) lintian=0 ;;
        -h | --help)
                sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
                exit 0
                ;;
        *)
                echo "package.sh: unknown argument '$a' (try --help)" >&2
                exit 2
                ;;
        esac
done

version=$(sed -n 's/^project(vestibule VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || { echo "package.sh: no version in CMakeLists.txt" >&2; exit 1; }
jobs=${PACKAGE_JOBS:-2}
say() { printf 'package: %s\n' "$*" >&2; }

# --- checks that need no build ------------------------------------------------------------
# The man page names every subcommand (src/cli/cli.c's table) and every setting (config.c's).
man=$src/packaging/vestibule-mcp.1
man_text=$(sed 's/\\-/-/g' "$man")
missing=
for c in $(sed -n '/cmds\[\] = {/,/};/p' "$src/src/cli/cli.c" | grep -o '{"[a-z-]*"' | tr -d '{"'); do
        grep -Eq "^\.B[IR]? \"?$c( |\"|\$)" <<<"$man_text" ||
                missing="$missing command:$c"
done
for k in $(sed -n '/^static const struct setting settings\[\]/,/^};/p' "$src/src/config/config.c" |
        grep -o '{"[a-z_]*"' | tr -d '{"'); do
        v=VESTIBULE_$(echo "$k" | tr a-z A-Z)
        grep -q "^\.B $v$" "$man" || missing="$missing setting:$v"
done
if [ -n "$missing" ]; then
        echo "package.sh: packaging/vestibule-mcp.1 does not describe:$missing" >&2
        exit 1
fi

rm -rf "$work" "$dist"
mkdir -p "$work" "$dist"

# glibc_floor BIN: the newest GLIBC_x.y symbol version BIN needs; fails above GLIBC_FLOOR_MAX.
glibc_floor() {
        local bin=$1 objdump=${2:-objdump} max
        max=$($objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V |
                tail -1)
        if [ "$(printf '%s\n%s\n' "$max" "$GLIBC_FLOOR_MAX" | sort -V | tail -1)" != \
                "$GLIBC_FLOOR_MAX" ]; then
                echo "package.sh: $bin needs GLIBC_$max, newer than $GLIBC_FLOOR_MAX" \
                        "(Ubuntu 22.04): it would not start there" >&2
                exit 1
        fi
        echo "$max"
}

# build DIR [cmake args...]: a clean Release build of vestibule-mcp, without tests.
build() {
        local dir=$1
        shift
        cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
                -DVESTIBULE_SOURCE_LOOKUP=OFF "$@" >"$dir.log" 2>&1 ||
                { cat "$dir.log" >&2; exit 1; }
        cmake --build "$dir" -j"$jobs" --target vestibule-mcp >>"$dir.log" 2>&1 ||
                { cat "$dir.log" >&2; exit 1; }
}

# Debian's hardening flags (PIE, stack protector, fortify, relro + now), as a package build gets.
eval "$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
# _FORTIFY_SOURCE marks calls such as fchownat warn_unused_result, and gcc ignores a (void) cast
# there: engine/volume.c's deliberate best-effort chowns stay warnings, not build failures.
export CFLAGS="$CFLAGS $CPPFLAGS -Wno-error=unused-result"

# --- the .deb --------------------------------------------------------------------------------
arch=$(dpkg --print-architecture)
say "building the .deb binary ($arch)"
build "$work/deb" -DCMAKE_INSTALL_PREFIX=/usr
# dpkg-shlibdeps wants the tree where a package build puts it: debian/<package>.
stage=$work/shlibs/debian/vestibule-mcp
DESTDIR=$stage cmake --install "$work/deb" --strip >/dev/null
# The installed binary must find the recipe in /usr/share/vestibule/images (src/setup/pins.h).
test -f "$stage/usr/share/vestibule/images/pins" -a -x "$stage/usr/share/vestibule/images/build.sh"
gzip -9n "$stage/usr/share/man/man1/vestibule-mcp.1"
doc=$stage/usr/share/doc/vestibule-mcp
install -d "$doc"
install -m 0644 "$src/packaging/deb/copyright" "$doc/copyright"
printf 'vestibule-mcp (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' \
        "$version" "$version" \
        "$(sed -n 's/^Maintainer: //p' "$src/packaging/deb/control.in")" \
        "$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s)}")" |
        gzip -9n >"$doc/changelog.gz"
install -d "$stage/usr/share/lintian/overrides"
install -m 0644 "$src/packaging/deb/lintian-overrides" \
        "$stage/usr/share/lintian/overrides/vestibule-mcp"
# The AppArmor profile that grants /usr/bin/vestibule-mcp user namespaces on Ubuntu 23.10+
# (packaging/apparmor/vestibule-mcp.in, the same template the binary writes with `setup
# --apparmor`). Shipped in /usr/share: the postinst copies it into /etc/apparmor.d and loads it
# only where AppArmor 4's userspace is (AppArmor 3 cannot read it, and would fail
# apparmor.service at boot on Debian 12).
install -d "$stage/usr/share/vestibule/apparmor"
sed -e 's/@NAME@/vestibule-mcp/g' -e 's|@PATH@|/usr/bin/vestibule-mcp|g' \
        "$src/packaging/apparmor/vestibule-mcp.in" >"$stage/usr/share/vestibule/apparmor/vestibule-mcp"
chmod 0644 "$stage/usr/share/vestibule/apparmor/vestibule-mcp"
# Depends: exactly the libraries the binary links (DT_NEEDED), with the versions its symbols
# need, as dpkg-shlibdeps computes them for any Debian package.
# (it finds the package's root by its DEBIAN folder)
install -d -m 0755 "$stage/DEBIAN"
printf 'Source: vestibule-mcp\n\nPackage: vestibule-mcp\nArchitecture: any\n' \
        >"$work/shlibs/debian/control"
depends=$(cd "$work/shlibs" && dpkg-shlibdeps -O debian/vestibule-mcp/usr/bin/vestibule-mcp |
        sed -n 's/^shlibs:Depends=//p')
size=$(du -sk --apparent-size "$stage/usr" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
        -e "s/@DEPENDS@/$depends/" "$src/packaging/deb/control.in" >"$stage/DEBIAN/control"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
install -m 0755 "$src/packaging/deb/postinst" "$src/packaging/deb/prerm" \
        "$src/packaging/deb/postrm" "$stage/DEBIAN/"
chmod -R u+rwX,go+rX,go-w "$stage"
deb=$dist/vestibule-mcp_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
say "$(basename "$deb"): $(stat -c %s "$deb") bytes; Depends: $depends;" \
        "glibc floor $(glibc_floor "$stage/usr/bin/vestibule-mcp")"
if [ "$lintian" = 1 ] && command -v lintian >/dev/null; then
        # Errors and warnings fail the build; each override is explained in the overrides file.
        if ! out=$(lintian --fail-on error,warning "$deb" 2>&1); then
                echo "$out" >&2
                exit 1
        fi
        say "lintian: no errors or warnings"
elif [ "$lintian" = 1 ]; then
        say "lintian not installed (apt-get install lintian): the .deb was not linted"
fi

# --- npm -------------------------------------------------------------------------------------
# platform ARCH DIR: stage and pack @vestibule-mcp/linux-ARCH from the build in DIR.
platform() {
        local npmarch=$1 dir=$2 strip=$3 objdump=$4 p floor
        p=$work/npm-$npmarch
        mkdir -p "$p/bin"
        install -m 0755 "$dir/vestibule-mcp" "$p/bin/vestibule-mcp"
        $strip "$p/bin/vestibule-mcp"
        # <bin>/../share/vestibule/images: where the binary looks for the recipe (pins.h).
        mkdir -p "$p/share/vestibule"
        cp -r "$src/images" "$p/share/vestibule/images"
        cp "$src/LICENSE" "$p/LICENSE"
        sed -e "s/@VERSION@/$version/g" -e "s/@NPMARCH@/$npmarch/g" \
                "$src/packaging/npm/platform-package.json.in" >"$p/package.json"
        floor=$(glibc_floor "$p/bin/vestibule-mcp" "$objdump")
        printf '# @vestibule-mcp/linux-%s\n\nThe prebuilt `vestibule-mcp` binary for Linux %s (glibc %s or later; json-c and libseccomp linked in). Install `vestibule-mcp`, not this package.\n' \
                "$npmarch" "$npmarch" "$floor" >"$p/README.md"
        # Only libc may be left to the system: the rest is linked in or loaded on first use.
        if $objdump -p "$p/bin/vestibule-mcp" | grep NEEDED | grep -Ev 'libc\.so\.6|ld-linux'; then
                echo "package.sh: the npm binary needs more than libc (above)" >&2
                exit 1
        fi
        (cd "$p" && npm pack --silent --pack-destination "$dist" >/dev/null)
        say "vestibule-mcp-linux-$npmarch-$version.tgz:" \
                "$(stat -c %s "$dist/vestibule-mcp-linux-$npmarch-$version.tgz") bytes;" \
                "glibc floor $floor"
}

say "building the npm binary (linux-x64, json-c and libseccomp static)"
build "$work/npm-x64-build" -DVESTIBULE_STATIC_DEPS=ON
platform x64 "$work/npm-x64-build" strip objdump

if [ "$arm64" = 1 ] && command -v aarch64-linux-gnu-gcc >/dev/null &&
        [ -f /usr/lib/aarch64-linux-gnu/libjson-c.a ]; then
        say "cross-building the npm binary (linux-arm64)"
        # dpkg-buildflags gave the host's flags; they suit the cross compiler too.
        build "$work/npm-arm64-build" -DVESTIBULE_STATIC_DEPS=ON \
                -DCMAKE_TOOLCHAIN_FILE="$src/packaging/npm/aarch64-linux-gnu.cmake"
        platform arm64 "$work/npm-arm64-build" aarch64-linux-gnu-strip aarch64-linux-gnu-objdump
elif [ "$arm64" = 1 ]; then
        say "no arm64 toolchain: linux-arm64 not built (dpkg --add-architecture arm64;" \
                "apt-get install gcc-aarch64-linux-gnu libjson-c-dev:arm64 libseccomp-dev:arm64" \
                "libcurl4-openssl-dev:arm64 libsystemd-dev:arm64 libyaml-dev:arm64" \
                "libarchive-dev:arm64 libssl-dev:arm64)"
fi

l=$work/npm-launcher
mkdir -p "$l/bin"
install -m 0755 "$src/packaging/npm/vestibule-mcp/bin/vestibule-mcp.js" "$l/bin/"
sed "s/@VERSION@/$version/g" "$src/packaging/npm/vestibule-mcp/package.json.in" >"$l/package.json"
cp "$src/packaging/npm/vestibule-mcp/README.md" "$src/LICENSE" "$l/"
(cd "$l" && npm pack --silent --pack-destination "$dist" >/dev/null)
say "vestibule-mcp-$version.tgz: $(stat -c %s "$dist/vestibule-mcp-$version.tgz") bytes"
# --- the OCI image (as root: mmdebstrap --mode=root) ------------------------------------------
if [ "$oci" = 1 ] && [ "$(id -u)" -eq 0 ]; then
        "$src/scripts/oci-image.sh" "$deb" "$dist/vestibule-mcp-oci-$version-$arch.tar"
        [ -z "$oci_images" ] || "$src/scripts/oci-image.sh" "$deb" \
                "$dist/vestibule-mcp-oci-images-$version-$arch.tar" "$oci_images"
elif [ "$oci" = 1 ]; then
        say "not root: the OCI image was not built (scripts/oci-image.sh needs mmdebstrap --mode=root)"
fi
ls -l "$dist" >&2
