#!/bin/sh
# `make install`: copy what the build made into $DESTDIR$PREFIX.
#   sbin/        nodepoold nodepool-launcher nodepool-web nodepool-builder nodepoolctl
#   bin/         nodepool
#   share/man/   man/*.[158]
#   share/doc/nodepoold/examples/   packaging/examples/*
#   share/nodepoold/grafana/        packaging/grafana/*.json, *.yaml (the
#                                   dashboards and a provisioning file)
# A binary not built (yet) is skipped with a note; the Debian package build
# (packaging/debian/rules) runs this with DESTDIR=debian/nodepoold PREFIX=/usr.
# The workers go to sbin/ beside nodepoold: the supervisor execs them, and
# an administrator runs them by hand only to debug.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
BUILD=${BUILD:-build}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
root="$DESTDIR$PREFIX"

put() { # mode src dst
	install -d "$(dirname "$3")"
	install -m "$1" "$2" "$3"
}

for b in nodepoold nodepool-launcher nodepool-web nodepool-builder nodepoolctl nodepool; do
	case $b in
	nodepool) dir=bin ;;
	*) dir=sbin ;;
	esac
	if [ -f "$BUILD/bin/$b" ]; then
		put 0755 "$BUILD/bin/$b" "$root/$dir/$b"
	else
		echo "install: $BUILD/bin/$b not built, skipped" >&2
	fi
done

for page in man/*.[1-9]; do
	[ -f "$page" ] || continue
	sec=${page##*.}
	put 0644 "$page" "$root/share/man/man$sec/$(basename "$page")"
done

for ex in packaging/examples/*; do
	[ -f "$ex" ] || continue
	put 0644 "$ex" "$root/share/doc/nodepoold/examples/$(basename "$ex")"
done

for g in packaging/grafana/*.json packaging/grafana/*.yaml; do
	[ -f "$g" ] || continue
	put 0644 "$g" "$root/share/nodepoold/grafana/$(basename "$g")"
done
