#!/bin/sh
# `make man-lint` (and `make check`): every page in man/ must be clean under
# mandoc's lint at warning level (Debian package mandoc). Prints the
# messages and exits 1 on any warning or error.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
if ! command -v mandoc >/dev/null 2>&1; then
	echo "man-lint: mandoc not found (apt-get install mandoc)" >&2
	exit 1
fi
rc=0
n=0
for page in man/*.[1-9]; do
	[ -f "$page" ] || continue
	n=$((n + 1))
	if ! out=$(mandoc -T lint -W warning "$page" 2>&1) || [ -n "$out" ]; then
		printf '%s\n' "$out"
		rc=1
	fi
done
if [ "$n" -eq 0 ]; then
	echo "man-lint: no pages in man/" >&2
	exit 1
fi
[ "$rc" -eq 0 ] && echo "man-lint: $n pages clean"
exit "$rc"
