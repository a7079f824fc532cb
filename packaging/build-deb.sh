#!/bin/sh
# Build the nodepoold Debian package.
#
# Usage: packaging/build-deb.sh [-s SRCDIR] OUTDIR
#
# The source tree keeps its Debian directory at packaging/debian, not at
# ./debian. This copies SRCDIR (default: the tree this script is in) to a
# scratch directory -- for a git checkout, the tracked and the untracked but
# not ignored files, so build directories stay behind -- puts
# packaging/debian at ./debian there, runs `dpkg-buildpackage -us -uc -b`
# and copies the resulting .deb files (the package and its -dbgsym) to
# OUTDIR. The scratch directory is removed afterwards; NP_KEEP_TMP=1 keeps it.
#
# Needs dpkg-dev, debhelper and the Build-Depends of packaging/debian/control
# (dpkg-buildpackage checks them). The build fetches Debian's zookeeper
# source with apt-get unless mk/zkclient.sh's cache has the result; the
# cache ($NP_CACHE, default ~/.cache/nodepoold) is shared with normal builds.
set -eu

usage() {
	echo "usage: packaging/build-deb.sh [-s SRCDIR] OUTDIR" >&2
	exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
while getopts s: opt; do
	case $opt in
	s) src=$(cd "$OPTARG" && pwd) ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
mkdir -p "$1"
out=$(cd "$1" && pwd)

for tool in dpkg-buildpackage dpkg-parsechangelog dh; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "build-deb: $tool not found (apt-get install dpkg-dev debhelper)" >&2
		exit 1
	fi
done
[ -f "$src/packaging/debian/control" ] || {
	echo "build-deb: $src has no packaging/debian" >&2
	exit 1
}

version=$(dpkg-parsechangelog -l "$src/packaging/debian/changelog" -S Version)
npver=$(sed -n 's/^#define NP_VERSION "\(.*\)"/\1/p' "$src/lib/core/version.h" 2>/dev/null || true)
if [ -n "$npver" ] && [ "${version%%-*}" != "$npver" ]; then
	echo "build-deb: warning: packaging/debian/changelog says $version," \
		"lib/core/version.h says $npver" >&2
fi

t0=$(date +%s)
work=$(mktemp -d /tmp/nodepoold-deb.XXXXXX)
if [ -z "${NP_KEEP_TMP:-}" ]; then
	trap 'rm -rf "$work"' EXIT
fi
trap 'exit 130' INT TERM
tree="$work/nodepoold-$version"
mkdir -p "$tree"

if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -xf - -C "$tree"
else
	(cd "$src" && tar --exclude='./build' --exclude='./build-*' -cf - .) |
		tar -xf - -C "$tree"
fi
rm -rf "$tree/debian"
cp -a "$tree/packaging/debian" "$tree/debian"

export NP_CACHE="${NP_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/nodepoold}"
log="$work/dpkg-buildpackage.log"
echo "build-deb: building nodepoold $version in $tree" >&2
if ! (cd "$tree" && dpkg-buildpackage -us -uc -b) >"$log" 2>&1; then
	tail -60 "$log" >&2
	echo "build-deb: dpkg-buildpackage failed (full log: $log)" >&2
	trap - EXIT
	exit 1
fi

n=0
for deb in "$work"/*.deb; do
	[ -f "$deb" ] || continue
	cp "$deb" "$out/"
	n=$((n + 1))
	echo "build-deb: $out/$(basename "$deb") ($(stat -c %s "$deb") bytes)" >&2
done
if [ "$n" -eq 0 ]; then
	echo "build-deb: no .deb produced (log: $log)" >&2
	trap - EXIT
	exit 1
fi
echo "build-deb: done in $(($(date +%s) - t0)) s" >&2
