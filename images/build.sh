#!/bin/bash
# images/build.sh - build the sandbox root filesystems from Debian packages.
#
# Builds the two rootfs tarballs Vestibule runs code in, without any container
# registry: python.tar (python3, also used for bash runs) and node.tar (nodejs).
# Both are Debian bookworm, made by mmdebstrap from the mirror apt on this machine
# already uses, with:
#   - bash, coreutils (timeout: every run is wrapped in it), ca-certificates;
#   - a `sandbox` user and group, uid/gid 1000, home /tmp; /etc/shadow and
#     /etc/gshadow root:shadow 0640, as on Debian;
#   - /workspace owned by sandbox, an empty /sandbox (the run's script goes there),
#     /tmp mode 1777;
#   - no docs (copyright files kept), man/info pages, locales; no apt lists or caches;
#   - no device nodes (the sandbox mounts its own /dev), no setuid/setgid bits.
# With SOURCE_DATE_EPOCH fixed (default below) the output is byte-for-byte
# reproducible for the same mirror content.
#
# Usage: images/build.sh [-o OUTDIR] [python|node|python-data|all]...   (default: all, OUTDIR .)
#   python-data (not in "all"): python plus numpy, pandas, matplotlib and scipy, as
#   python-data.tar; matplotlib draws with Agg and plt.show() saves into /workspace.
# Prints one line per image:  sha256:<hex>  <OUTDIR>/<lang>.tar
# and the recipe hash (sha256 of this file), which labels the result.
#
# Environment:
#   VESTIBULE_DEBIAN_MIRROR           Debian mirror (default: the one apt uses here,
#                                     else http://deb.debian.org/debian)
#   VESTIBULE_DEBIAN_SECURITY_MIRROR  security mirror (default: likewise)
#   VESTIBULE_DEBIAN_SUITE            default bookworm
#   SOURCE_DATE_EPOCH                 default 2026-11-09T00:00:00Z (the pin date)
#
# Runs as root (mmdebstrap --mode=root) or as a user with subuids (--mode=unshare).
set -euo pipefail

readonly SUITE="${VESTIBULE_DEBIAN_SUITE:-bookworm}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1794182400}"
# Package sets. bash and coreutils are Essential, named anyway for clarity.
readonly PKGS_PYTHON="python3,python-is-python3,python3-pip,bash,coreutils,ca-certificates"
readonly PKGS_NODE="nodejs,npm,bash,coreutils,ca-certificates"
# The python variant for data work: the standard python set plus Debian's numpy, pandas,
# matplotlib and scipy (no recommends). matplotlib gets a non-GUI backend whose show() saves
# each open figure into /workspace (see MPL_SHOW below), so that it comes back as an image.
readonly PKGS_PYTHON_DATA="$PKGS_PYTHON,python3-numpy,python3-pandas,python3-matplotlib,python3-scipy"

die() {
	printf 'build.sh: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# The first URI apt uses on this machine whose path ends in $1 (debian or
# debian-security), from deb822 .sources files or one-line .list files.
apt_mirror() {
	local want="$1" f uri
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		while read -r uri; do
			case "$uri" in
			*/"$want" | */"$want"/)
				printf '%s\n' "${uri%/}"
				return 0
				;;
			esac
		done < <(sed -n -e 's/^URIs:[[:space:]]*//p' -e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' "$f" | tr ' ' '\n')
	done
	return 1
}

outdir=.
while getopts ':o:h' opt; do
	case "$opt" in
	o) outdir="$OPTARG" ;;
	h)
		usage
		exit 0
		;;
	*) die "unknown option -$OPTARG (try -h)" ;;
	esac
done
shift $((OPTIND - 1))
[ "$#" -gt 0 ] || set -- all
langs=()
for what in "$@"; do
	case "$what" in
	python | node | python-data) langs+=("$what") ;;
	all) langs+=(python node) ;;
	*) die "unknown image '$what': use python, node, python-data or all" ;;
	esac
done

command -v mmdebstrap >/dev/null || die "mmdebstrap not found: apt-get install mmdebstrap"
mirror="${VESTIBULE_DEBIAN_MIRROR:-$(apt_mirror debian || echo http://deb.debian.org/debian)}"
secmirror="${VESTIBULE_DEBIAN_SECURITY_MIRROR:-$(apt_mirror debian-security || echo http://deb.debian.org/debian-security)}"
mode=unshare
[ "$(id -u)" -eq 0 ] && mode=root
recipe_hash="$(sha256sum "$0" | cut -d' ' -f1)"

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"

# The user, the folders and the reproducibility fix-ups, run by mmdebstrap with
# the chroot's path as $1 (outside the chroot: nothing from the packages runs).
# shellcheck disable=SC2016  # expanded by mmdebstrap's shell, not here
readonly CUSTOMIZE='set -e
r="$1"
grep -q "^sandbox:" "$r/etc/passwd" || {
	echo "sandbox:x:1000:1000:sandbox:/tmp:/bin/bash" >>"$r/etc/passwd"
	echo "sandbox:!::0:99999:7:::" >>"$r/etc/shadow"
	echo "sandbox:x:1000:" >>"$r/etc/group"
	echo "sandbox:!::" >>"$r/etc/gshadow"
}
mkdir -p "$r/workspace" "$r/sandbox" "$r/tmp"
chown 1000:1000 "$r/workspace"
chmod 0755 "$r/workspace" "$r/sandbox"
chmod 1777 "$r/tmp"
# As Debian has them: /etc/shadow and /etc/gshadow root:shadow 0640 (the hook above
# creates them 0644). Nothing in a sandbox reads them; the sandbox user must not.
g=$(sed -n "s/^shadow:[^:]*:\([0-9]*\):.*/\1/p" "$r/etc/group")
[ -n "$g" ] || { echo "no shadow group in the rootfs" >&2; exit 1; }
for f in shadow gshadow; do
	[ -f "$r/etc/$f" ] || continue
	chown "0:$g" "$r/etc/$f"
	chmod 0640 "$r/etc/$f"
done
printf "sandbox\n" >"$r/etc/hostname"
: >"$r/etc/resolv.conf"
rm -f "$r"/etc/passwd- "$r"/etc/shadow- "$r"/etc/group- "$r"/etc/gshadow-
rm -f "$r"/var/lib/dpkg/*-old "$r"/var/cache/debconf/*-old
rm -rf "$r"/var/cache/apt/* "$r"/var/lib/apt/lists/*
find "$r/var/log" -type f -delete
# Nothing in a sandbox may gain privilege (no_new_privs is set anyway).
find "$r" -xdev ! -type l -perm /6000 -exec chmod ug-s {} +'

# python-data only: matplotlib's backend. Debian's matplotlib reads /etc/matplotlibrc; the
# backend module draws with Agg, and show() writes every open figure to
# /workspace/figure-<N>.png (the first free N), then closes it, so that a plain plt.show()
# leaves a PNG the server hands back as image content. MPLCONFIGDIR points at /tmp (the home
# of the sandbox user, writable; the rootfs is read-only).
# shellcheck disable=SC2016  # expanded by mmdebstrap's shell, not here
readonly MPL_SHOW='set -e
r="$1"
d=$(ls -d "$r"/usr/lib/python3/dist-packages 2>/dev/null)
[ -n "$d" ] || { echo "no dist-packages in the rootfs" >&2; exit 1; }
cat >"$d/vestibule_mpl.py" <<"PY"
"""The Vestibule matplotlib backend: Agg, and show() saves figures into /workspace."""
import os

from matplotlib.backend_bases import _Backend
from matplotlib.backends.backend_agg import FigureCanvasAgg, _BackendAgg
from matplotlib._pylab_helpers import Gcf

OUT_DIR = os.environ.get("VESTIBULE_FIGURE_DIR", "/workspace")


def _free_name():
    n = 1
    while os.path.lexists(os.path.join(OUT_DIR, "figure-%d.png" % n)):
        n += 1
    return os.path.join(OUT_DIR, "figure-%d.png" % n)


@_Backend.export
class _BackendVestibule(_BackendAgg):
    FigureCanvas = FigureCanvasAgg

    @classmethod
    def show(cls, block=None):
        for manager in Gcf.get_all_fig_managers():
            path = _free_name()
            manager.canvas.figure.savefig(path, format="png")
            print("figure saved: %s" % path)
        Gcf.destroy_all()
PY
rc="$r/etc/matplotlibrc"
if [ -f "$rc" ]; then
	sed -i -e "s/^#* *backend *:.*/backend: module:\/\/vestibule_mpl/" "$rc"
	grep -q "^backend: module://vestibule_mpl" "$rc" || echo "backend: module://vestibule_mpl" >>"$rc"
else
	echo "backend: module://vestibule_mpl" >"$rc"
fi
mkdir -p "$r/etc/vestibule"'

# python-data only, after every package is installed and configured: scipy Depends on
# pythran, which pulls a C++ toolchain and boost headers that nothing in a sandbox runs, and
# numpy, scipy, pandas and matplotlib ship their own test suites. Their files are removed (the
# packages stay registered, as with the docs left out above). Removing them after the
# maintainer scripts ran, not with dpkg path-exclude, keeps those scripts working.
# shellcheck disable=SC2016  # expanded by mmdebstrap's shell, not here
readonly PRUNE_DATA='set -e
r="$1"
rm -rf "$r"/usr/include "$r"/usr/lib/gcc "$r"/usr/libexec/gcc
rm -f "$r"/usr/bin/x86_64-linux-gnu-lto-dump-*
find "$r/usr/lib/x86_64-linux-gnu" -name "*.a" -type f -delete
find "$r/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name "lib*san.so*" -delete
rm -rf "$r"/usr/lib/python3/dist-packages/pythran
find "$r/usr/lib/python3/dist-packages" -type d -name tests -prune -exec rm -rf {} +'

build_one() {
	local lang="$1" pkgs tmp out hooks=()
	case "$lang" in
	python) pkgs="$PKGS_PYTHON" ;;
	node) pkgs="$PKGS_NODE" ;;
	python-data)
		pkgs="$PKGS_PYTHON_DATA"
		hooks=(--customize-hook="$MPL_SHOW" --customize-hook="$PRUNE_DATA")
		;;
	esac
	out="$outdir/$lang.tar"
	tmp="$(mktemp "$outdir/.$lang.tar.XXXXXX")"
	# shellcheck disable=SC2064  # expand $tmp now
	trap "rm -f '$tmp'" EXIT INT TERM
	printf 'build.sh: building %s (%s) from %s\n' "$lang" "$pkgs" "$mirror" >&2
	mmdebstrap --quiet --mode="$mode" --variant=essential --format=tar \
		--include="$pkgs" \
		--aptopt='APT::Install-Recommends "false"' \
		--aptopt='APT::Install-Suggests "false"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-include=/usr/share/locale/locale.alias' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--customize-hook="$CUSTOMIZE" \
		"${hooks[@]}" --skip=output/dev \
		--customize-hook="mkdir -p \"\$1/etc/vestibule\" && echo $lang >\"\$1/etc/vestibule/variant\"" \
		"$SUITE" "$tmp" \
		"deb $mirror $SUITE main" \
		"deb $mirror $SUITE-updates main" \
		"deb $secmirror $SUITE-security main" >&2
	# No device nodes: the sandbox brings its own /dev, and an unprivileged unpack could
	# not create them anyway. mmdebstrap leaves /dev out (--skip=output/dev above) and the
	# empty ./dev/ directory is appended here. (Deleting the nodes afterwards with GNU tar's
	# --delete lost the data block of a member in the middle of the archive: images/README.md.)
	local empty
	empty="$(mktemp -d)"
	mkdir -m 0755 "$empty/dev"
	tar --append -f "$tmp" -C "$empty" --format=pax --numeric-owner --owner=0 \
		--group=0 --mtime="@$SOURCE_DATE_EPOCH" --no-recursion ./dev
	rm -rf "$empty"
	# Every member must read back whole before the tarball is published.
	tar -tf "$tmp" >/dev/null || die "$lang: the built tarball does not read back whole"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$out"
	trap - EXIT INT TERM
	printf 'sha256:%s  %s\n' "$(sha256sum "$out" | cut -d' ' -f1)" "$out"
}

for lang in "${langs[@]}"; do
	build_one "$lang"
done
printf 'recipe:sha256:%s\n' "$recipe_hash"
