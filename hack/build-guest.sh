#!/bin/sh
# build-guest.sh OUT_DIR: builds Corral's tiny test guest from Debian packages.
#
# The guest is a Debian kernel booted directly by QEMU (-kernel/-initrd) with
# a busybox initramfs: no disk image, no network, no download but the kernel
# package. It is what backends/qemu and the console tests boot under TCG.
#
# Output, in OUT_DIR (default: <repo>/.cache/guest):
#   vmlinux            the kernel as an uncompressed ELF: PVH direct boot of
#                      it is 2-3x faster under TCG than the bzImage
#   initramfs.cpio.gz  busybox-static, the virtio and ACPI button modules and
#                      an /init that prints GUEST_READY on ttyS0, runs a shell
#                      on ttyS0 and powers off on the ACPI power button
#   stamp              the kernel package version the two were built from; a
#                      second run with the same version does nothing
#
# Needs: apt-get, dpkg-deb, xz, cpio or busybox, gzip, and /bin/busybox from
# busybox-static (a dynamic busybox would need a libc in the initramfs).
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/.cache/guest}
mkdir -p "$out"
out=$(cd "$out" && pwd)

busybox=/bin/busybox
if ! [ -x "$busybox" ] || ! "$busybox" --list >/dev/null 2>&1; then
	echo "build-guest: $busybox missing: apt-get install busybox-static" >&2
	exit 2
fi
if file "$busybox" 2>/dev/null | grep -q 'dynamically linked'; then
	echo "build-guest: $busybox is dynamically linked: apt-get install busybox-static" >&2
	exit 2
fi

# The kernel package linux-image-amd64 depends on, e.g. linux-image-6.1.0-57-amd64.
kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
KPKG=$(kpkg)
if [ -z "$KPKG" ] || [ -z "$(apt-cache policy "$KPKG" 2>/dev/null | awk '/Candidate:/{print $2}' | grep -v none)" ]; then
	# Only when apt knows no candidate: an update is slow and needs the mirror.
	apt-get update -qq >&2
	KPKG=$(kpkg)
fi
if [ -z "$KPKG" ]; then
	echo "build-guest: apt-cache knows no kernel package for linux-image-amd64" >&2
	exit 2
fi
KVER=$(apt-cache policy "$KPKG" | awk '/Candidate:/{print $2}')
want="$KPKG $KVER $(sha256sum "$0" | cut -c1-16)" # a changed recipe rebuilds
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ] && [ -s "$out/vmlinux" ] && [ -s "$out/initramfs.cpio.gz" ]; then
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/corral-guest.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

# apt-get download writes into the current folder and, as root, falls back
# to the _apt sandbox user, which cannot write here: run it unsandboxed.
apt-get download -qq -o APT::Sandbox::User=root "$KPKG" >&2
dpkg-deb -x "$KPKG"_*.deb kx

# Decompress the bzImage payload into the ELF it wraps: find the xz magic
# and unpack from there (xz ignores the trailing bytes but complains).
vmlinuz=$(ls kx/boot/vmlinuz-* | head -1)
off=$(grep -abo "$(printf '\3757zXZ')" "$vmlinuz" | head -1 | cut -d: -f1)
if [ -z "$off" ]; then
	echo "build-guest: no xz payload in $vmlinuz" >&2
	exit 1
fi
tail -c +$((off + 1)) "$vmlinuz" | xz -dc >vmlinux 2>/dev/null || true
if ! head -c 4 vmlinux | grep -q 'ELF'; then
	echo "build-guest: $vmlinuz did not decompress to an ELF kernel" >&2
	exit 1
fi

# The initramfs.
root=$work/root
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/tmp" "$root/lib/modules"
cp "$busybox" "$root/bin/busybox"
# Debian ships these modules uncompressed, so busybox insmod loads them
# without a module loader that understands compression. The order is their
# dependency order. virtio_net and its failover deps are for a guest
# network; button and evdev make system_powerdown reach /init; isofs lets
# /init read a cloud-init seed (NoCloud, label cidata) to prove its shape.
mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk failover net_failover virtio_net button evdev cdrom isofs"
for m in $mods; do
	f=$(find kx/lib/modules -name "$m.ko" -o -name "$m.ko.xz" | head -1)
	case $f in
	"") ;; # built into this kernel
	*.xz) xz -dc "$f" >"$root/lib/modules/$m.ko" ;;
	*) cp "$f" "$root/lib/modules/$m.ko" ;;
	esac
done
echo "$mods" >"$root/lib/modules/order"

cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/modules/order); do
	[ -f /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko 2>/dev/null
done
hostname corral-guest

# Power off when the ACPI power button fires (system_powerdown). evdev
# refuses reads shorter than one event (24 bytes), hence dd bs=4096.
for n in /sys/class/input/input*/name; do
	[ "$(cat "$n")" = "Power Button" ] || continue
	for e in "${n%/name}"/event*; do
		[ -e "$e" ] || continue
		ev=/dev/input/${e##*/}
		i=0
		while [ ! -e "$ev" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		(dd if="$ev" of=/dev/null bs=4096 count=1 2>/dev/null && echo "GUEST_POWEROFF" >/dev/ttyS0 && poweroff -f) &
	done
done

# Something on the VGA text console, so a VNC screenshot is not blank.
for t in /dev/tty1 /dev/tty0; do
	[ -e $t ] && printf '\n  corral test guest\n  %s\n\n' "$(uname -r)" >$t 2>/dev/null
done

# A NoCloud seed, if attached, is reported the way cloud-init would find
# it: a volume labelled cidata holding meta-data and user-data.
for d in /dev/vd[b-z]; do
	[ -e "$d" ] || continue
	# The ISO 9660 volume label: 32 bytes at 32808 (busybox has no blkid).
	dd if="$d" bs=1 skip=32808 count=32 2>/dev/null | grep -qi '^cidata' || continue
	mkdir -p /seed && mount -t iso9660 -o ro "$d" /seed || continue
	echo "SEED_FOUND $(grep instance-id /seed/meta-data) $(head -1 /seed/user-data)" >/dev/ttyS0
done

echo "GUEST_READY" >/dev/ttyS0
# A shell on the serial port for console tests; setsid gives it a session
# so ^C reaches it and not init.
setsid sh -c 'exec sh </dev/ttyS0 >/dev/ttyS0 2>&1' &
while :; do sleep 3600; done
INIT
chmod 755 "$root/init"

(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -9n) >initramfs.cpio.gz

mv vmlinux "$out/vmlinux.tmp" && mv "$out/vmlinux.tmp" "$out/vmlinux"
mv initramfs.cpio.gz "$out/initramfs.cpio.gz.tmp" && mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
echo "$want" >"$out/stamp"
echo "build-guest: $want -> $out" >&2
