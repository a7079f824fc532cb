#!/bin/sh
# A real OpenSSH server on a free loopback port, for the static driver's
# host-key checks in the demo and process tests.
#
#   tests/sshd-fixture.sh start DIR [PORT]
#                                     start it (on PORT, else a free port);
#                                     prints the port; DIR/port,
#                                     DIR/host_keys ("<type> <base64>" lines),
#                                     DIR/client_key (a key it accepts)
#   tests/sshd-fixture.sh stop DIR    stop exactly the sshd started in DIR (by pid)
set -eu
cmd=$1
dir=$2
case $cmd in
start)
	mkdir -p "$dir"
	[ -d /run/sshd ] || mkdir -p /run/sshd
	for t in rsa ecdsa ed25519; do
		[ -f "$dir/ssh_host_${t}_key" ] ||
			ssh-keygen -q -t $t -N '' -f "$dir/ssh_host_${t}_key" </dev/null
	done
	# a client key whose public half the server accepts (validation
	# commands over SSH): DIR/client_key
	[ -f "$dir/client_key" ] ||
		ssh-keygen -q -t ed25519 -N '' -f "$dir/client_key" </dev/null
	cp "$dir/client_key.pub" "$dir/authorized_keys"
	port=${3:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
	cat >"$dir/sshd_config" <<CFG
ListenAddress 127.0.0.1
Port $port
HostKey $dir/ssh_host_rsa_key
HostKey $dir/ssh_host_ecdsa_key
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $dir/authorized_keys
StrictModes no
LogLevel ERROR
CFG
	/usr/sbin/sshd -D -e -f "$dir/sshd_config" >"$dir/sshd.log" 2>&1 &
	echo $! >"$dir/sshd.child"
	i=0
	until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { cat "$dir/sshd.log" >&2; exit 1; }
		sleep 0.05
	done
	echo "$port" >"$dir/port"
	cat "$dir"/ssh_host_*_key.pub | awk '{print $1" "$2}' >"$dir/host_keys"
	echo "$port"
	;;
stop)
	if [ -f "$dir/sshd.child" ]; then
		kill "$(cat "$dir/sshd.child")" 2>/dev/null || true
		rm -f "$dir/sshd.child"
	fi
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
