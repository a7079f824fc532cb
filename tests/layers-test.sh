#!/bin/sh
# The test of the layering check (mk/layers.py): scratch trees, each with one
# include, must pass or fail as the rules say, naming the file and line of a
# forbidden include; and of the include rewriter (mk/qualify-includes.py) on
# a scratch tree. Prints "N passed, N failed"; exit status 1 on a failure.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/nodepoold-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

# scratch NAME: a small tree with the real folders and headers it needs
scratch() {
	d="$tmp/$1"
	mkdir -p "$d/lib/core" "$d/lib/zk" "$d/lib/ops" "$d/protocol" "$d/drivers/aws" \
		"$d/worker" "$d/builder"
	echo '/* log */' >"$d/lib/core/log.h"
	echo '/* zk */' >"$d/lib/zk/zk.h"
	echo '/* zk private */' >"$d/lib/zk/zk_private.h"
	echo '/* status */' >"$d/lib/ops/status.h"
	echo '/* model */' >"$d/protocol/model.h"
	echo '/* driver interface */' >"$d/drivers/driver.h"
	echo '/* aws internals */' >"$d/drivers/aws/aws_api.h"
	echo '/* launcher */' >"$d/worker/launcher.h"
	echo "$d"
}

# expect NAME WANT(0|1) FILE INCLUDE: FILE (in a fresh scratch tree) holds
# one #include "INCLUDE" after a comment line; the check must exit WANT and,
# when it fails, name FILE:2.
expect() {
	name=$1 want=$2 file=$3 inc=$4
	d=$(scratch "$name")
	mkdir -p "$d/$(dirname "$file")"
	printf '/* %s */\n#include "%s"\n' "$name" "$inc" >"$d/$file"
	out=$(python3 "$top/mk/layers.py" --root "$d" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "FAIL $name: exit $rc, want $want"
		echo "$out"
		fail=$((fail + 1))
	elif [ "$want" -eq 1 ] && ! echo "$out" | grep -q "^$file:2: includes "; then
		echo "FAIL $name: the report does not name $file:2"
		echo "$out"
		fail=$((fail + 1))
	else
		echo "ok   $name"
		pass=$((pass + 1))
	fi
}

# allowed
expect lib-uses-core 0 lib/zk/zk.c lib/core/log.h
expect lib-bare-name 0 lib/ops/status.c zk.h
expect ops-uses-zk 0 lib/ops/web.c lib/zk/zk.h
expect protocol-uses-protocol 0 protocol/model.c model.h
expect worker-uses-driver-interface 0 worker/launcher.c drivers/driver.h
expect driver-uses-its-own 0 drivers/aws/aws.c aws_api.h
expect private-in-its-folder 0 lib/zk/zk.c zk_private.h
# forbidden
expect lib-includes-drivers 1 lib/ops/metrics.c drivers/driver.h
expect lib-includes-drivers-bare 1 lib/ops/metrics.c driver.h
expect lib-includes-worker 1 lib/zk/zk.c worker/launcher.h
expect zk-includes-ops 1 lib/zk/imagetree.c status.h
expect core-includes-zk 1 lib/core/chan.c lib/zk/zk.h
expect protocol-includes-zk 1 protocol/model.c lib/zk/zk.h
expect protocol-logs 1 protocol/cachecodec.c log.h
expect driver-includes-worker 1 drivers/aws/aws.c worker/launcher.h
expect worker-includes-driver-internals 1 worker/handler.c drivers/aws/aws_api.h
expect private-from-elsewhere 1 lib/ops/web.c lib/zk/zk_private.h

# the include rewriter (mk/qualify-includes.py): bare names, same-folder
# names and a fuzz target's relative path to a driver source become paths
# from the root, a foreign header stays, and a second run changes nothing
qualify() {
	d=$(scratch qualify)
	mkdir -p "$d/tests/fuzz" "$d/tests/support" "$d/tests/unit"
	echo '/* testzk */' >"$d/tests/support/testzk.h"
	echo '/* aws_api.c */' >"$d/drivers/aws/aws_api.c"
	printf '#include "zk.h"\n#include "zk_private.h"\n#include "log.h"\n#include "zookeeper.h"\n' \
		>"$d/lib/zk/zk.c"
	printf '#include "../../drivers/aws/aws_api.c"\n#include "model.h"\n' \
		>"$d/tests/fuzz/fuzz_aws.c"
	printf '#include "testzk.h"\n#include "launcher.h"\n' >"$d/tests/unit/test_x.c"
	printf '#include "driver.h"\n' >"$d/builder/builder.h"
	python3 "$top/mk/qualify-includes.py" --root "$d" >/dev/null || return 1
	printf '#include "lib/zk/zk.h"\n#include "lib/zk/zk_private.h"\n#include "lib/core/log.h"\n#include "zookeeper.h"\n' |
		cmp -s - "$d/lib/zk/zk.c" || { cat "$d/lib/zk/zk.c"; return 1; }
	printf '#include "drivers/aws/aws_api.c"\n#include "protocol/model.h"\n' |
		cmp -s - "$d/tests/fuzz/fuzz_aws.c" || { cat "$d/tests/fuzz/fuzz_aws.c"; return 1; }
	# "launcher.h" is no header of tests/unit's path: left for the compiler to refuse
	printf '#include "tests/support/testzk.h"\n#include "launcher.h"\n' |
		cmp -s - "$d/tests/unit/test_x.c" || { cat "$d/tests/unit/test_x.c"; return 1; }
	printf '#include "drivers/driver.h"\n' | cmp -s - "$d/builder/builder.h" ||
		{ cat "$d/builder/builder.h"; return 1; }
	python3 "$top/mk/qualify-includes.py" --root "$d" --check
}
if qualify; then
	echo "ok   qualify-includes"
	pass=$((pass + 1))
else
	echo "FAIL qualify-includes"
	fail=$((fail + 1))
fi

# and the tree itself keeps its layers
if python3 "$top/mk/layers.py" --root "$top"; then
	pass=$((pass + 1))
else
	echo "FAIL the tree has forbidden includes"
	fail=$((fail + 1))
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
