#!/usr/bin/env bash
# Installs, from Debian's packages, what the tests need and the machine
# lacks. Idempotent: a package already installed is not fetched again.
set -euo pipefail
pkgs=(
  libvirt0        # libvirt.so.0, dlopened by backends/libvirt (test:///default driver)
  libvirt-daemon libvirt-daemon-driver-qemu  # hack/libvirtd.sh: a private libvirtd with the QEMU driver (backends/libvirt, app/move)
  qemu-system-x86 qemu-utils  # backends/qemu: real guests under TCG, qemu-img
  busybox-static xz-utils cpio file  # hack/build-guest.sh: the test guest's initramfs and kernel
  chromium        # the browser tests (driven by playwright-core)
  xrdp            # the RDP console tests: started by hand on a loopback port (handlers/console/xrdptest), never as a service
  nodejs npm      # npm ci for the front-end packages and playwright-core
  ansible python3-proxmoxer python3-requests  # handlers/pve/ansible_test.go: proxmox_kvm (community.general), proxmoxer under /usr/bin/python3
  ca-certificates openssl curl  # hack/testenv.sh: the API server's keys and its readiness probe
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node may come from outside Debian on this machine; then npm is there too.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
read -ra missing <<<"${missing[*]}"
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "install-deps: ok"
