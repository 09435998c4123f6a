#!/usr/bin/env bash
# Installs what the NUMA guest check (scripts/vm/check.sh) needs. Idempotent: what is
# already there is skipped.
#
# - From Debian, installed: a 6.1 kernel for the guest, numactl, ndctl and daxctl (run
#   inside the guest, over the host's root filesystem), and QEMU's firmware.
# - From Debian, unpacked into $PLACER_VM_DIR (not installed): QEMU 7.2 and a static
#   busybox. Installing qemu-system-x86 7.2 would make apt remove a newer qemu-utils
#   that some machines of this kind carry, and busybox-static conflicts with busybox.
# - From PyPI, into a venv in $PLACER_VM_DIR: virtme-ng, which boots the kernel over the
#   host's own root filesystem so the same placer binary runs inside.
set -euo pipefail

vm_dir=${PLACER_VM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/placer/vm}
mkdir -p "$vm_dir"

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

packages=(
  linux-image-amd64 # the guest's kernel (6.1: memory tiers, kmem, HMAT in sysfs)
  numactl           # numactl -H in the guest's record
  ndctl             # NVDIMM regions and namespaces
  daxctl            # devdax to system-ram (kmem)
  seabios           # QEMU's BIOS
  ipxe-qemu         # QEMU's option ROMs
  # QEMU 7.2's own libraries (its binary is unpacked below, not installed)
  libaio1 libbpf1 libcapstone4 libfdt1 libfuse3-3 libglib2.0-0 libgnutls30 libibverbs1
  libjpeg62-turbo libpixman-1-0 libpmem1 libpng16-16 librdmacm1 libsasl2-2 libseccomp2
  libslirp0 liburing2 libvdeplug2 libnuma1
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "vm-install: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# QEMU 7.2 and a static busybox, unpacked. The version is pinned by what apt offers;
# a stamp file records what was unpacked.
unpack=(qemu-system-x86 qemu-system-common qemu-system-data busybox-static)
stamp="$vm_dir/unpacked.txt"
want=$(for p in "${unpack[@]}"; do apt-cache policy "$p" | awk -v p="$p" '/Candidate:/ {print p "=" $2}'; done)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -x "$vm_dir/root/usr/bin/qemu-system-x86_64" ]; then
  echo "vm-install: unpacking ${unpack[*]} into $vm_dir/root"
  debs=$(mktemp -d)
  (cd "$debs" && apt-get download -q "${unpack[@]}")
  rm -rf "$vm_dir/root"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$vm_dir/root"; done
  rm -rf "$debs"
  echo "$want" >"$stamp"
fi

if [ ! -x "$vm_dir/venv/bin/vng" ]; then
  echo "vm-install: installing virtme-ng into $vm_dir/venv"
  python3 -m venv "$vm_dir/venv"
  "$vm_dir/venv/bin/pip" install -q virtme-ng
fi

echo "vm-install: ready in $vm_dir ($("$vm_dir/root/usr/bin/qemu-system-x86_64" --version | head -1); $(ls /boot/vmlinuz-* | tail -1))"
