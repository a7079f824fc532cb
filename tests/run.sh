#!/bin/sh
# The test runner behind `make check`: starts one private ZooKeeper (plain and
# TLS) for the whole run, runs every criterion binary, the layering check
# (mk/layers.py, with its own test), the process tests
# (pytest, playing Zuul with kazoo) and a fuzz smoke run of every decoder,
# then stops the server it started and prints "N passed, N failed".
set -u
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export NP_BUILD="$top/$BUILD"
# run as root: our daemons refuse that unless told (lib/core/privsep.h)
[ "$(id -u)" = 0 ] && export NODEPOOL_ALLOW_ROOT=${NODEPOOL_ALLOW_ROOT:-1}
tmp=$(mktemp -d /tmp/nodepoold-test.XXXXXX)
export NP_TEST_TMP="$tmp"
sh tests/zkfixture.sh start "$tmp/zk" || exit 1
cleanup() {
	sh tests/zkfixture.sh stop "$tmp/zk"
	if [ "${NP_KEEP_TMP:-}" = "" ]; then rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
. "$tmp/zk/env"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$top/tests/lsan.supp:print_suppressions=0}

pass=0
fail=0
failed=""

for t in "$NP_BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	out="$tmp/$name.out"
	"$t" --jobs=2 --timeout=120 >"$out" 2>&1
	rc=$?
	syn=$(grep -a 'Synthesis:' "$out" | tail -1)
	p=$(echo "$syn" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
	f=$(echo "$syn" | sed -n 's/.*Failing: \([0-9]*\).*/\1/p')
	c=$(echo "$syn" | sed -n 's/.*Crashing: \([0-9]*\).*/\1/p')
	p=${p:-0} f=${f:-0} c=${c:-0}
	if [ -z "$syn" ] || { [ $rc -ne 0 ] && [ $((f + c)) -eq 0 ]; }; then
		f=$((f + 1))
	fi
	# Sanitizer reports from criterion's test workers (LeakSanitizer runs
	# as a worker exits, after its result is in) do not change the
	# synthesis or the exit status: count them here.
	if grep -a -q -E 'ERROR: (Leak|Address)Sanitizer|runtime error:' "$out"; then
		f=$((f + 1))
		syn="$syn (sanitizer report)"
		grep -a -E -A 12 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$out" | head -60
	fi
	pass=$((pass + p))
	fail=$((fail + f + c))
	echo "$name: $syn"
	if [ $((f + c)) -ne 0 ]; then
		failed="$failed $name"
		grep -a -v '^\[----\] *$' "$out" | head -80
	fi
done

# add_counts WHAT OUT RC: adds the "N passed, N failed" line a sub-suite
# wrote to OUT (exit status RC) to the totals and says it; a non-zero RC
# with no failure counted is one failure. Returns 1 when anything failed.
add_counts() {
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$2" | tail -1)
	p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
	f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	p=${p:-0} f=${f:-0}
	if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	pass=$((pass + p))
	fail=$((fail + f))
	echo "$1: ${line:-no result (rc $3)}"
	[ "$f" -eq 0 ]
}

# The layering check (mk/layers.py) on this tree, and the test of the check
# itself on scratch trees (tests/layers-test.sh counts both).
out="$tmp/layers.out"
sh tests/layers-test.sh >"$out" 2>&1
if ! add_counts "layering check" "$out" $?; then
	failed="$failed layers"
	grep -E 'FAIL|includes' "$out" | head -40
fi

if [ -d tests/process ] && ls tests/process/test_*.py >/dev/null 2>&1; then
	out="$tmp/pytest.out"
	/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/process >"$out" 2>&1
	rc=$?
	line=$(grep -E '^[=]* ?[0-9]+ (passed|failed)' "$out" | tail -1)
	p=$(echo "$line" | grep -oE '[0-9]+ passed' | cut -d' ' -f1)
	f=$(echo "$line" | grep -oE '[0-9]+ failed' | cut -d' ' -f1)
	e=$(echo "$line" | grep -oE '[0-9]+ error' | cut -d' ' -f1)
	p=${p:-0} f=${f:-0} e=${e:-0}
	if [ $rc -ne 0 ] && [ $((f + e)) -eq 0 ]; then f=1; fi
	pass=$((pass + p))
	fail=$((fail + f + e))
	echo "process tests: $line"
	if [ $((f + e)) -ne 0 ]; then
		failed="$failed process-tests"
		tail -150 "$out"
	fi
fi

# The Debian package: built, unpacked into a scratch root, its init script
# driving nodepoold against this run's ZooKeeper (needs root, as CI is).
if [ "$(id -u)" = 0 ] && [ -z "${NP_SKIP_PACKAGING:-}" ] && command -v dpkg-buildpackage >/dev/null; then
	out="$tmp/packaging.out"
	sh tests/packaging-test.sh >"$out" 2>&1
	if ! add_counts "packaging test" "$out" $?; then
		failed="$failed packaging-test"
		grep -E 'FAIL|error' "$out" | head -20
		tail -20 "$out"
	fi
fi

for fz in build-fuzz/fuzz_*; do
	[ -x "$fz" ] || continue
	name=$(basename "$fz")
	corpus="tests/fuzz/corpus/${name#fuzz_}"
	work="$tmp/$name.corpus"
	mkdir -p "$work"
	if "$fz" -runs=${NP_FUZZ_RUNS:-20000} -max_total_time=30 "$work" "$corpus" \
		>"$tmp/$name.out" 2>&1; then
		pass=$((pass + 1))
		echo "$name: $(grep -a -E '^Done [0-9]+ runs' "$tmp/$name.out" | tail -1)"
	else
		fail=$((fail + 1))
		failed="$failed $name"
		tail -40 "$tmp/$name.out"
	fi
done

[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
