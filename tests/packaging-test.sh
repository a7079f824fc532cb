#!/bin/sh
# Packaging test: build the Debian package with packaging/build-deb.sh,
# unpack it into a scratch root (dpkg -x) and check it as an administrator
# would find it:
#   - control fields, conffiles, maintainer scripts (syntax, user creation);
#   - the init script, units, defaults and logrotate snippet in place and
#     identical to packaging/; the units pass `systemd-analyze verify`;
#   - every man page, compressed, clean under mandoc lint;
#   - every program whose <dir>/main.c exists in the tree, executable, in
#     /usr/sbin (daemons, nodepoolctl) or /usr/bin (nodepool), with all its
#     shared libraries found; programs not written yet are reported, not
#     failed;
#   - once nodepoold exists: `nodepoold -n` accepts the shipped example and
#     rejects a broken file with file:line:col errors; and, as root, the
#     packaged init script starts, reports, reloads, restarts and stops it
#     against a private TLS ZooKeeper (tests/zkfixture.sh, or the one
#     `make check` exports), with /etc/default/nodepoold replaced only
#     inside a private mount namespace (unshare -m).
# It prints "N passed, N failed" and exits 1 on any failure. Everything it
# starts is stopped by pid; the scratch directory is removed unless
# NP_KEEP_TMP=1.
#
# Usage: tests/packaging-test.sh [-s SRCDIR]   (default: this tree)
# Needs: dpkg-dev, debhelper, the package's Build-Depends, mandoc.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top
while getopts s: opt; do
	case $opt in
	s) src=$(cd "$OPTARG" && pwd) ;;
	*)
		echo "usage: tests/packaging-test.sh [-s SRCDIR]" >&2
		exit 2
		;;
	esac
done

tmp=$(mktemp -d /tmp/nodepoold-pkgtest.XXXXXX)
root="$tmp/root"
run="$tmp/run"
zkdir=""
pass=0
fail=0

ok() {
	pass=$((pass + 1))
	echo "ok: $*"
}
bad() {
	fail=$((fail + 1))
	echo "FAIL: $*"
}
note() {
	echo "note: $*"
}

cleanup() {
	# A nodepoold the init-script steps left running: stop it by its pid.
	if [ -f "$run/nodepoold.pid" ]; then
		p=$(cat "$run/nodepoold.pid" 2>/dev/null || true)
		case $p in
		'' | *[!0-9]*) ;;
		*)
			if kill -0 "$p" 2>/dev/null; then
				kill "$p" 2>/dev/null
				sleep 2
				kill -9 "$p" 2>/dev/null || true
			fi
			;;
		esac
	fi
	[ -n "$zkdir" ] && sh "$top/tests/zkfixture.sh" stop "$zkdir"
	if [ -z "${NP_KEEP_TMP:-}" ]; then rm -rf "$tmp"; else echo "kept $tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build ------------------------------------------------------------------
t0=$(date +%s)
if ! sh "$src/packaging/build-deb.sh" -s "$src" "$tmp/out"; then
	bad "packaging/build-deb.sh failed"
	echo "$pass passed, $fail failed"
	exit 1
fi
t1=$(date +%s)
arch=$(dpkg --print-architecture)
deb=$(ls "$tmp/out"/nodepoold_*_"$arch".deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then
	bad "no nodepoold_*_$arch.deb in $tmp/out"
	echo "$pass passed, $fail failed"
	exit 1
fi
ok "built $(basename "$deb"): $(stat -c %s "$deb") bytes in $((t1 - t0)) s"
for d in "$tmp/out"/*.deb; do
	[ "$d" = "$deb" ] || note "also built $(basename "$d"): $(stat -c %s "$d") bytes"
done

dpkg -x "$deb" "$root"
dpkg-deb -e "$deb" "$tmp/control"

# --- control data -----------------------------------------------------------
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = nodepoold ] && ok "Package: nodepoold" || bad "Package is '$(field Package)'"
case ", $(field Depends)," in
*", adduser,"* | *", adduser "*) ok "Depends has adduser" ;;
*) bad "Depends lacks adduser: $(field Depends)" ;;
esac
for f in /etc/default/nodepoold /etc/init.d/nodepoold /etc/logrotate.d/nodepoold; do
	if grep -qx "$f" "$tmp/control/conffiles" 2>/dev/null; then
		ok "conffile $f"
	else
		bad "$f is not a conffile"
	fi
done
for s in preinst postinst prerm postrm; do
	[ -f "$tmp/control/$s" ] || continue
	if sh -n "$tmp/control/$s"; then ok "$s parses"; else bad "$s: syntax error"; fi
done
if grep -q 'adduser --system' "$tmp/control/postinst" 2>/dev/null &&
	grep -q 'update-rc.d nodepoold defaults' "$tmp/control/postinst" &&
	grep -q "deb-systemd-helper enable 'nodepoold.service'" "$tmp/control/postinst"; then
	ok "postinst creates the user, registers the init script, enables nodepoold.service"
else
	bad "postinst lacks the user creation or the service registration"
fi
# dh_installsystemd --no-enable: the unit is only re-enabled if it was.
if grep -q "deb-systemd-helper debian-installed 'nodepool-builder.service'" "$tmp/control/postinst"; then
	ok "nodepool-builder.service is installed, not enabled"
else
	bad "postinst enables nodepool-builder.service (it is for builder-only hosts)"
fi

# --- files ------------------------------------------------------------------
same() { # packaged file, source file
	if [ ! -f "$root$1" ]; then
		bad "missing $1"
	elif cmp -s "$root$1" "$src/$2"; then
		ok "$1 (= $2)"
	else
		bad "$1 differs from $2"
	fi
}
same /etc/init.d/nodepoold packaging/nodepoold.init
same /etc/default/nodepoold packaging/nodepoold.default
same /etc/logrotate.d/nodepoold packaging/nodepoold.logrotate
same /lib/systemd/system/nodepoold.service packaging/nodepoold.service
same /lib/systemd/system/nodepool-builder.service packaging/nodepool-builder.service
same /usr/share/doc/nodepoold/examples/nodepool.yaml packaging/examples/nodepool.yaml
same /usr/share/doc/nodepoold/examples/secure.conf packaging/examples/secure.conf
[ -x "$root/etc/init.d/nodepoold" ] && ok "init script is executable" ||
	bad "init script is not executable"
[ -f "$root/usr/share/doc/nodepoold/copyright" ] && ok "copyright" || bad "no copyright file"

if command -v systemd-analyze >/dev/null 2>&1; then
	# The programs are not installed on this host, only in the scratch root:
	# "not executable" for them is expected; anything else is a unit error.
	out=$(cd "$root/lib/systemd/system" &&
		systemd-analyze verify --man=no ./nodepoold.service ./nodepool-builder.service 2>&1 |
		grep -v -E 'Command /usr/sbin/nodepool(d|-builder) is not executable' || true)
	if [ -z "$out" ]; then ok "systemd-analyze verify: units clean"; else bad "systemd-analyze: $out"; fi
	# The exposure each unit leaves (issue 23): nodepoold, which runs the
	# web API, 2.5 or less; the builder, whose diskimage-builder needs
	# sudo, 5 or less.
	for spec in nodepoold:2.5 nodepool-builder:5.0; do
		u=${spec%%:*}
		max=${spec#*:}
		score=$(cd "$root/lib/systemd/system" &&
			systemd-analyze security --offline=yes --no-pager "./$u.service" 2>&1 |
			sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
		if [ -z "$score" ]; then
			bad "systemd-analyze security --offline=yes $u.service gave no score"
		elif awk "BEGIN{exit !($score <= $max)}"; then
			ok "systemd-analyze security $u.service: $score (at most $max)"
		else
			bad "systemd-analyze security $u.service: $score, more than $max"
		fi
	done
else
	note "systemd-analyze not found: units not verified"
fi

command -v mandoc >/dev/null 2>&1 || bad "mandoc not found"
for page in man1/nodepool.1 man5/nodepool.yaml.5 man8/nodepoold.8 man8/nodepoolctl.8 \
	man8/nodepool-launcher.8 man8/nodepool-web.8 man8/nodepool-builder.8; do
	f="$root/usr/share/man/$page.gz"
	if [ ! -f "$f" ]; then
		bad "missing /usr/share/man/$page.gz"
	elif out=$(mandoc -T lint -W warning "$f" 2>&1) && [ -z "$out" ]; then
		ok "/usr/share/man/$page.gz lints clean"
	else
		bad "/usr/share/man/$page.gz: $out"
	fi
done

# --- programs ---------------------------------------------------------------
version=$(field Version)
built=""
for spec in supervisor:nodepoold:sbin worker:nodepool-launcher:sbin web:nodepool-web:sbin \
	builder:nodepool-builder:sbin cli/nodepoolctl:nodepoolctl:sbin cli/nodepool:nodepool:bin; do
	dir=${spec%%:*}
	rest=${spec#*:}
	name=${rest%%:*}
	where=/usr/${rest#*:}/$name
	if [ ! -f "$src/$dir/main.c" ]; then
		if [ -e "$root$where" ]; then
			bad "$where packaged but $dir/main.c does not exist"
		else
			note "$name not written yet ($dir/main.c): not checked"
		fi
		continue
	fi
	if [ ! -x "$root$where" ]; then
		bad "$where missing or not executable"
		continue
	fi
	built="$built $name"
	if missing=$(ldd "$root$where" 2>&1 | grep 'not found'); then
		bad "$where: shared libraries not found: $missing"
	else
		ok "$where, all shared libraries found"
	fi
done
# hardening (issue 23): dpkg-buildflags' stack protector and FORTIFY made it
# into every program (the Makefile honours CPPFLAGS)
if command -v readelf >/dev/null 2>&1; then
	for name in $built; do
		f=$(ls "$root"/usr/sbin/"$name" "$root"/usr/bin/"$name" 2>/dev/null | head -1)
		syms=$(readelf -W --dyn-syms "$f" 2>/dev/null)
		fortified=$(echo "$syms" | grep -o -E '__[a-z_]+_chk' | grep -v -c __stack_chk)
		if echo "$syms" | grep -q __stack_chk_fail && [ "$fortified" -gt 0 ]; then
			ok "$name: stack protector and fortified calls"
		else
			bad "$name: no stack protector or no fortified call (readelf)"
		fi
	done
else
	note "readelf not found: hardening not checked"
fi
case " $(field Depends)" in
*libc6*) ok "Depends from \${shlibs:Depends}: $(field Depends)" ;;
*) [ -n "$built" ] && bad "no shared library Depends: $(field Depends)" ;;
esac
# Libraries loaded at run time (dlopen, lib/core/dynlib.h) are in no
# binary's links, so \${shlibs:Depends} misses them: each DYNLIB_INIT's
# package must be declared, and must be the one that ships the soname.
dyn=$(grep -ho 'DYNLIB_INIT("[^"]*", "[^"]*", "[^"]*"' "$src"/lib/*/*.c "$src"/drivers/*/*.c \
	"$src"/drivers/*.c 2>/dev/null | sed 's/DYNLIB_INIT("\([^"]*\)", "[^"]*", "\([^"]*\)"/\1:\2/')
[ -n "$dyn" ] || note "no library loaded at run time found in the sources"
for sp in $dyn; do
	so=${sp%%:*}
	pkg=${sp#*:}
	case ", $(field Depends)," in
	*", $pkg,"* | *", $pkg "*) ok "Depends has $pkg ($so, loaded at run time)" ;;
	*) bad "Depends lacks $pkg, which ships $so (loaded at run time): $(field Depends)" ;;
	esac
	owner=$(dpkg -S "*/$so" 2>/dev/null | sed -n 's/^\([^:]*\):.*/\1/p' | sort -u | tr '\n' ' ')
	case " $owner" in
	*" $pkg "*) ok "$so is shipped by $pkg" ;;
	*) bad "$so is shipped by '${owner% }', not $pkg" ;;
	esac
done
if [ -x "$root/usr/sbin/nodepool-launcher" ]; then
	v=$("$root/usr/sbin/nodepool-launcher" --version 2>&1)
	if [ "$v" = "nodepool-launcher ${version%%-*}" ]; then
		ok "nodepool-launcher --version: $v"
	else
		bad "nodepool-launcher --version says '$v', the package is $version"
	fi
fi

# --- nodepoold -n -------------------------------------------------------------
npd="$root/usr/sbin/nodepoold"
if [ ! -x "$npd" ]; then
	note "no nodepoold yet: -n and the init script are not exercised"
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
fi

ex="$root/usr/share/doc/nodepoold/examples"
if out=$("$npd" -n -c "$ex/nodepool.yaml" -s "$ex/secure.conf" 2>&1); then
	ok "nodepoold -n accepts the shipped example"
else
	bad "nodepoold -n rejects the shipped example: $out"
fi
cat >"$tmp/broken.yaml" <<'EOF'
labels:
  - name: small
    min-ready: many
providers:
  - name: p1
    driver: static
    pools:
      - name: main
        nodes:
          - name: host1.example.org
            labels: [missing]
EOF
out=$("$npd" -n -c "$tmp/broken.yaml" 2>&1)
rc=$?
if [ $rc -eq 1 ] && echo "$out" | grep -q "broken.yaml:3:[0-9]*: labels\[0\].min-ready: " &&
	echo "$out" | grep -q "broken.yaml:11:[0-9]*: .*missing"; then
	ok "nodepoold -n rejects a broken file with every error positioned"
else
	bad "nodepoold -n on a broken file: exit $rc, output: $out"
fi

# --- the init script against a private ZooKeeper -------------------------------
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1; then
	note "not root (or no unshare): init script not exercised"
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
fi
if [ -z "${NP_TEST_ZK_TLS:-}" ]; then
	zkdir="$tmp/zk"
	sh "$top/tests/zkfixture.sh" start "$zkdir" || {
		bad "could not start ZooKeeper"
		zkdir=""
		echo "$pass passed, $fail failed"
		exit 1
	}
	. "$zkdir/env"
fi
mkdir -p "$run" "$tmp/log"
# the deployment's chroot exists, as an operator's does (nothing below it)
/usr/bin/python3 -c "from kazoo.client import KazooClient
z = KazooClient('$NP_TEST_ZK'); z.start(); z.ensure_path('/packaging-test-$$'); z.stop()" ||
	bad "could not create the ZooKeeper chroot"
webport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/nodepool.yaml" <<EOF
webapp:
  listen_address: 127.0.0.1
  port: $webport
zookeeper-servers:
  - host: ${NP_TEST_ZK_TLS%:*}
    port: ${NP_TEST_ZK_TLS##*:}
    chroot: /packaging-test-$$
zookeeper-tls:
  ca: $NP_TEST_CERTS/ca.pem
  cert: $NP_TEST_CERTS/client.pem
  key: $NP_TEST_CERTS/client.key
labels:
  - name: small
providers:
  - name: lab
    driver: static
    pools:
      - name: main
        nodes: []
nodepoold:
  control-socket: $run/nodepoold.sock
  pid-file: $run/nodepoold.pid
EOF
# /etc/default/nodepoold for the packaged init script, seen only inside
# the mount namespace below: a copy of /etc/default with ours added.
cp -a /etc/default "$tmp/etc-default"
cat >"$tmp/etc-default/nodepoold" <<EOF
DAEMON=$npd
DAEMON_OPTS="-c $tmp/nodepool.yaml --allow-root"
CONFIG=$tmp/nodepool.yaml
DAEMON_USER=root
RUNDIR=$run
LOGFILE=$tmp/log/nodepoold.log
PIDFILE=$run/nodepoold.pid
EOF
ctl="$root/usr/sbin/nodepoolctl"
cat >"$tmp/steps.sh" <<EOF
# Run inside unshare -m: each line of output is "ok: ..." or "FAIL: ...".
init="$root/etc/init.d/nodepoold"
pidfile="$run/nodepoold.pid"
expect() { # want-rc what command...
	want=\$1 what=\$2
	shift 2
	"\$@" >"$tmp/step.out" 2>&1
	rc=\$?
	if [ \$rc -eq \$want ]; then echo "ok: \$what (exit \$rc)"
	else echo "FAIL: \$what: exit \$rc, want \$want: \$(cat "$tmp/step.out")"; fi
}
alive() { [ -f "\$pidfile" ] && kill -0 "\$(cat "\$pidfile")" 2>/dev/null; }
mount --bind "$tmp/etc-default" /etc/default || { echo "FAIL: mount --bind"; exit 1; }
expect 3 "status before start" "\$init" status
expect 0 "start" "\$init" start
alive && echo "ok: running, pid \$(cat "\$pidfile")" || echo "FAIL: no live pid after start"
expect 0 "status while running" "\$init" status
pid1=\$(cat "\$pidfile" 2>/dev/null)
expect 0 "start while running" "\$init" start
[ "\$(cat "\$pidfile" 2>/dev/null)" = "\$pid1" ] && echo "ok: still pid \$pid1" ||
	echo "FAIL: a second start replaced pid \$pid1"
if [ -x "$ctl" ]; then
	# The control socket appears once nodepoold is up: wait for it, bounded.
	i=0
	while [ ! -S "$run/nodepoold.sock" ] && [ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
	expect 0 "nodepoolctl status" "$ctl" -s "$run/nodepoold.sock" status
	grep -q lab "$tmp/step.out" && echo "ok: nodepoolctl status lists provider lab" ||
		echo "FAIL: nodepoolctl status does not list lab: \$(cat "$tmp/step.out")"
	grep -q '^web ' "$tmp/step.out" && echo "ok: nodepoolctl status lists web" ||
		echo "FAIL: nodepoolctl status does not list web: \$(cat "$tmp/step.out")"
fi
# the packaged nodepool-web serves /ready over its own TLS session, bounded
i=0
while ! python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(
	"http://127.0.0.1:$webport/ready", timeout=2).status != 200)' 2>/dev/null &&
	[ \$i -lt 100 ]; do sleep 0.1; i=\$((i + 1)); done
[ \$i -lt 100 ] && echo "ok: nodepool-web answers /ready on port $webport" ||
	echo "FAIL: nodepool-web does not answer /ready on port $webport"
expect 0 "reload" "\$init" reload
alive && [ "\$(cat "\$pidfile")" = "\$pid1" ] && echo "ok: same pid after reload" ||
	echo "FAIL: pid changed or died on reload"
expect 0 "restart" "\$init" restart
alive && [ "\$(cat "\$pidfile")" != "\$pid1" ] && echo "ok: new pid after restart" ||
	echo "FAIL: no new live pid after restart"
pid2=\$(cat "\$pidfile" 2>/dev/null)
expect 0 "stop" "\$init" stop
# gone = no such process, or a zombie nobody has reaped yet (the daemon
# double-forked, so its parent is this sandbox's init), as nodepoold decides
running() { kill -0 "\$1" 2>/dev/null && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/\$1/stat" 2>/dev/null; }
running "\$pid2" && echo "FAIL: pid \$pid2 alive after stop" ||
	echo "ok: pid \$pid2 gone after stop"
expect 3 "status after stop" "\$init" status
expect 0 "stop when not running" "\$init" stop
EOF
unshare -m sh "$tmp/steps.sh" >"$tmp/steps.out" 2>&1
while IFS= read -r line; do
	case $line in
	ok:*) ok "init: ${line#ok: }" ;;
	FAIL:*) bad "init: ${line#FAIL: }" ;;
	*) echo "   $line" ;;
	esac
done <"$tmp/steps.out"
if [ "$fail" -ne 0 ] && [ -f "$tmp/log/nodepoold.log" ]; then
	echo "--- nodepoold.log (last 40 lines)"
	tail -40 "$tmp/log/nodepoold.log"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
