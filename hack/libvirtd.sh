#!/bin/sh
# libvirtd.sh start DIR | stop DIR: a private libvirtd with the QEMU driver
# for tests, everything under DIR, nothing of the host's libvirt touched.
#
#   start  writes DIR/etc/libvirt/{libvirtd,qemu}.conf, starts libvirtd in a
#          private mount namespace where /etc/libvirt, /run/libvirt,
#          /var/lib/libvirt, /var/cache/libvirt and /var/log/libvirt are
#          DIR's own folders, waits for its socket and prints the URI:
#            qemu:///system?socket=DIR/run/libvirt-sock
#   stop   kills that daemon (by its pid file) and the guests it started.
#
# Why each setting (see docs/testing.md):
#   - the QEMU driver looks up the user libvirt-qemu before it reads
#     qemu.conf: the user and group are created when missing (what the
#     Debian package libvirt-daemon-system would do);
#   - no virtlogd socket activation without systemd: stdio_handler "file";
#   - no polkit: auth_unix_rw "none" (the socket is mode 0700 under DIR);
#   - guests run as root with no security driver: the test owns the host.
# The five mount points are created empty when missing (the libvirt
# packages own them); the bind mounts exist only inside the namespace.
#
# Needs: root, libvirtd (libvirt-daemon, libvirt-daemon-driver-qemu),
# unshare and mount (util-linux), useradd/groupadd (passwd).
set -eu

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
	echo "usage: $0 start|stop DIR" >&2
	exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pidfile=$dir/run/libvirtd.pid

case $cmd in
stop)
	if [ -f "$pidfile" ]; then
		pid=$(cat "$pidfile")
		kill "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$pid" 2>/dev/null || true
	fi
	# Guests outlive libvirtd: kill the qemu processes whose pid files it
	# wrote under DIR.
	for p in "$dir"/run/qemu/*.pid; do
		[ -f "$p" ] || continue
		kill -9 "$(cat "$p")" 2>/dev/null || true
	done
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac

if ! command -v libvirtd >/dev/null 2>&1 && ! [ -x /usr/sbin/libvirtd ]; then
	echo "libvirtd.sh: libvirtd not found (Debian: libvirt-daemon libvirt-daemon-driver-qemu)" >&2
	exit 3
fi
if [ "$(id -u)" != 0 ]; then
	echo "libvirtd.sh: a qemu:///system daemon needs root" >&2
	exit 3
fi
getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
getent passwd libvirt-qemu >/dev/null || useradd --system --no-create-home --home-dir /nonexistent \
	--shell /usr/sbin/nologin --gid libvirt-qemu libvirt-qemu

mkdir -p "$dir/etc" "$dir/run" "$dir/lib" "$dir/cache" "$dir/log"
chmod 700 "$dir/run"
cat >"$dir/etc/libvirtd.conf" <<CONF
unix_sock_dir = "/run/libvirt"
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
CONF
cat >"$dir/etc/qemu.conf" <<CONF
user = "root"
group = "root"
dynamic_ownership = 0
stdio_handler = "file"
security_driver = "none"
CONF
for m in /etc/libvirt /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt; do
	[ -d "$m" ] || mkdir -p "$m"
done
rm -f "$dir/run/libvirt-sock"
unshare -m --propagation private sh -c '
	d=$1
	mount --bind "$d/etc" /etc/libvirt
	mount --bind "$d/run" /run/libvirt
	mount --bind "$d/lib" /var/lib/libvirt
	mount --bind "$d/cache" /var/cache/libvirt
	mount --bind "$d/log" /var/log/libvirt
	exec libvirtd -d -f /etc/libvirt/libvirtd.conf -p /run/libvirt/libvirtd.pid
' sh "$dir"
i=0
while [ ! -S "$dir/run/libvirt-sock" ]; do
	i=$((i + 1))
	if [ $i -gt 300 ]; then
		echo "libvirtd.sh: no socket after 30 s; log:" >&2
		tail -20 "$dir/log/libvirtd.log" >&2 2>/dev/null || true
		exit 1
	fi
	sleep 0.1
done
echo "qemu:///system?socket=$dir/run/libvirt-sock"
