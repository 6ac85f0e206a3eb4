#!/usr/bin/env bash
# Builds HyperFleet's runner template: a Debian 12 (bookworm) guest made with debootstrap from
# Debian's packages alone (kernel, systemd, udev, cloud-init, the QEMU guest agent, Hyper-V's KVP
# daemon, ifupdown with a DHCP client), the HyperFleet agent built static from this checkout at
# /usr/local/bin/hyperfleet-agent, and two bootloaders, so it boots from its own disk whichever
# firmware starts it: extlinux in the root partition for a BIOS (Proxmox VE's SeaBIOS, Hyper-V
# generation 1), and on an EFI system partition Debian's signed shim and GRUB for UEFI with Secure
# Boot (Hyper-V generation 2 with the MicrosoftUEFICertificateAuthority template, Proxmox's OVMF,
# vSphere's EFI). Debian's kernel is signed, so Secure Boot stays on. Cloud-init reads NoCloud only
# (the seed ISO HyperFleet attaches); nothing in the image holds a credential. The agent's systemd
# unit is not in the image: the bootstrap data HyperFleet renders writes it and starts it.
#
# The result is a compressed qcow2, cached under ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/guest/
# by a hash of this script and of the agent binary (so of the agent's sources and Go version): a
# second run with nothing changed prints the cached image's path at once.
#
#   hack/template.sh            build (or reuse) the image and print its path
#   hack/template.sh --force    build it again
#   hack/template.sh --check    print the path if the current image is cached, else exit 1
#
# Exit status 3 means this machine cannot build the image (not root, a tool or loop devices
# missing), 1 any other failure.
# Needs root (debootstrap, a loop device and a mount) and Debian's debootstrap, qemu-utils,
# extlinux, syslinux-common, fdisk, dosfstools and mtools (hack/prereqs.sh installs them). The Debian mirror is the
# one this machine's apt uses; DEBIAN_MIRROR overrides it. GUEST_DISK_SIZE (default 4G) is the
# image's virtual disk size: clones can be grown, and cloud-init grows the root partition to fit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${HYPERFLEET_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/guest}
SUITE=bookworm
DISK_SIZE=${GUEST_DISK_SIZE:-4G}
NAME=hyperfleet-runner-debian12
# Packages beyond minbase. python3-cffi-backend: debootstrap does not resolve the virtual package
# python3-cryptography depends on, and without it cloud-init stays unconfigured. udev: the guest
# agent's service waits for the virtio port udev announces. cloud-guest-utils: growpart, so the
# root partition grows with a resized disk.
# dbus: systemd-logind, which turns the ACPI power button (a shutdown without the guest agent)
# into a power-off. hyperv-daemons: the KVP daemon, through which Hyper-V learns the guest's
# addresses (its services start only on Hyper-V's VMBus).
PACKAGES=linux-image-amd64,systemd-sysv,udev,kmod,dbus,cloud-init,python3-cffi-backend,qemu-guest-agent,hyperv-daemons,ifupdown,isc-dhcp-client,ca-certificates,cloud-guest-utils,fdisk

force=0 check=0
for arg in "$@"; do
  case $arg in
    --force) force=1 ;;
    --check) check=1 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "template.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

log() { echo "[template] $*" >&2; }
die() { echo "template.sh: $*" >&2; exit 1; }
# Exit status 3: this machine cannot build the image (tests that need it skip and say why).
cannot() { echo "template.sh: $*" >&2; exit 3; }

command -v go >/dev/null || die "go is needed to build the agent"
mkdir -p "$CACHE"

# The agent, static, built the way a release builds it; its hash keys the cache. Without the VCS
# stamp: the binary (and so the image) changes when the agent's sources do, not with every commit.
agent_tmp=$(mktemp "$CACHE/.agent.XXXXXX")
trap 'rm -f "$agent_tmp"' EXIT
(cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$agent_tmp" ./cmd/hyperfleet-agent)
key=$( { sha256sum < "$0"; sha256sum < "$agent_tmp"; echo "$SUITE $DISK_SIZE"; } | sha256sum | cut -c1-16)
image=$CACHE/$NAME-$key.qcow2

if [ -f "$image" ] && [ "$force" -eq 0 ]; then
  echo "$image"
  exit 0
fi
[ "$check" -eq 1 ] && exit 1

[ "$(id -u)" -eq 0 ] || cannot "building the image needs root (debootstrap, a loop device, a mount); run it as root or with sudo"
for cmd in debootstrap qemu-img extlinux sfdisk mkfs.ext4 losetup mkfs.fat mcopy; do
  command -v "$cmd" >/dev/null || cannot "$cmd is missing; run hack/prereqs.sh (or: apt-get install debootstrap qemu-utils extlinux syslinux-common fdisk dosfstools mtools)"
done
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -f "$mbr" ] || cannot "$mbr is missing; apt-get install syslinux-common"
[ -e /dev/loop-control ] || [ -e /dev/loop0 ] || cannot "no loop devices on this machine (/dev/loop-control, /dev/loop0): the image's file system is made on one; load the loop module or run where loop devices exist"

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # The first Debian archive this machine's apt is configured with (deb822 or one-line format).
  mirror=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$mirror" ] || mirror=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' | grep -v security | head -1 || true)
fi
[ -n "$mirror" ] || cannot "no Debian mirror found in this machine's apt sources; set DEBIAN_MIRROR"

work=$(mktemp -d "$CACHE/.build.XXXXXX")
rootfs=$work/root
loop=""
cleanup() {
  set +e
  if mountpoint -q "$rootfs"; then umount "$rootfs"; fi
  if [ -n "$loop" ]; then losetup -d "$loop"; fi
  rm -rf "$work" "$agent_tmp"
}
trap cleanup EXIT
start=$(date +%s)

# Two MBR partitions: the EFI system partition (1-64 MiB, FAT32), which UEFI firmware boots, and
# the root file system after it, marked bootable, whose extlinux the MBR's code starts on a BIOS.
# The root partition is last, so cloud-init's growpart can grow it into a resized disk.
raw=$work/disk.raw
truncate -s "$DISK_SIZE" "$raw"
printf 'label: dos\nstart=2048, size=129024, type=ef\nstart=131072, type=83, bootable\n' | sfdisk -q "$raw"
dd if="$mbr" of="$raw" bs=440 count=1 conv=notrunc status=none
part_bytes=$(( $(stat -c %s "$raw") - 67108864 ))
# The partition alone on a loop device: partition device nodes need udev, an offset does not.
loop=$(losetup --find --show --offset 67108864 --sizelimit "$part_bytes" "$raw") \
  || die "no free loop device (losetup --find failed)"
# extlinux cannot read ext4's 64bit layout.
mkfs.ext4 -q -L hyperfleet-root -O ^64bit "$loop"
uuid=$(blkid -s UUID -o value "$loop")
mkdir -p "$rootfs"
mount "$loop" "$rootfs"

log "debootstrap $SUITE (minbase) from $mirror: several minutes"
debootstrap --foreign --variant=minbase --components=main --include="$PACKAGES" "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
# Before the packages are configured: an initramfs with the storage drivers of the hypervisors a
# runner meets (Proxmox/QEMU, Hyper-V, VMware) instead of most of the kernel's, so it is built in
# seconds rather than minutes, twice, and the guest boots faster.
mkdir -p "$rootfs/etc/initramfs-tools/conf.d"
echo 'MODULES=list' > "$rootfs/etc/initramfs-tools/conf.d/hyperfleet.conf"
printf '%s\n' virtio_pci virtio_scsi virtio_blk virtio_net sd_mod sr_mod ata_piix ata_generic ahci nvme \
  hv_vmbus hv_storvsc hv_netvsc vmw_pvscsi mptspi ext4 > "$rootfs/etc/initramfs-tools/modules"
chroot "$rootfs" /debootstrap/debootstrap --second-stage >>"$work/debootstrap.log" 2>&1 \
  || { tail -30 "$work/debootstrap.log" >&2; die "debootstrap (second stage) failed"; }

log "configuring the guest"
echo "UUID=$uuid / ext4 errors=remount-ro 0 1" > "$rootfs/etc/fstab"
echo localhost > "$rootfs/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' > "$rootfs/etc/hosts"
# Minbase has no locales but C.UTF-8; cloud-init's locale module fails on its default en_US.UTF-8.
echo 'LANG=C.UTF-8' > "$rootfs/etc/default/locale"
printf 'auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n' > "$rootfs/etc/network/interfaces"
mkdir -p "$rootfs/etc/network/interfaces.d"
cat > "$rootfs/etc/cloud/cloud.cfg.d/90_hyperfleet.cfg" <<'EOF'
# HyperFleet runner template: the seed ISO HyperFleet attaches (NoCloud) is the only data
# source, so a guest without one never probes metadata addresses.
datasource_list: [ NoCloud, None ]
locale: C.UTF-8
# No default user and no SSH server: a runner is reached by nobody.
users: {}
disable_root: true
no_ssh_fingerprints: true
EOF
# Each clone makes its own machine ID on first boot.
: > "$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
install -m 0755 "$agent_tmp" "$rootfs/usr/local/bin/hyperfleet-agent"

kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -1)
initrd=initrd.img-${kernel#vmlinuz-}
[ -f "$rootfs/boot/$initrd" ] || die "no $initrd in the image"
mkdir -p "$rootfs/boot/extlinux"
cat > "$rootfs/boot/extlinux/extlinux.conf" <<EOF
DEFAULT debian
PROMPT 0
TIMEOUT 1
LABEL debian
  LINUX /boot/$kernel
  INITRD /boot/$initrd
  APPEND root=UUID=$uuid ro console=tty0 console=ttyS0,115200n8
EOF
extlinux --install "$rootfs/boot/extlinux" >/dev/null 2>&1 || die "extlinux --install failed"

# UEFI: Debian's signed shim and GRUB, from the suite's own archive (fetched inside the guest's
# root, so their versions are the suite's, then dropped with apt's lists), at the removable-media
# path every firmware tries on a disk it has no boot entry for (a fresh clone has none). The
# signed GRUB reads its configuration from /EFI/debian on the partition it was loaded from.
log "adding the UEFI bootloader (shim and GRUB, signed)"
had_resolv=0; [ -e "$rootfs/etc/resolv.conf" ] && had_resolv=1
[ "$had_resolv" -eq 1 ] || cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
chroot "$rootfs" sh -ec 'apt-get -qq update && mkdir -p /tmp/efi && cd /tmp/efi && apt-get -qq download shim-signed grub-efi-amd64-signed shim-helpers-amd64-signed && for d in *.deb; do dpkg-deb -x "$d" x; done' \
  >>"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; die "fetching Debian's signed shim and GRUB failed"; }
[ "$had_resolv" -eq 1 ] || rm -f "$rootfs/etc/resolv.conf"
efi=$rootfs/tmp/efi/x
cat > "$work/grub.cfg" <<EOF
set default=0
set timeout=0
search --no-floppy --fs-uuid --set=root $uuid
menuentry debian {
  linux /boot/$kernel root=UUID=$uuid ro console=tty0 console=ttyS0,115200n8
  initrd /boot/$initrd
}
EOF
esp=$work/esp.img
truncate -s 63M "$esp"
mkfs.fat -F 32 -n EFI "$esp" >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/EFI/debian
mcopy -i "$esp" "$efi/usr/lib/shim/shimx64.efi.signed" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$esp" "$efi/usr/lib/shim/mmx64.efi.signed" ::/EFI/BOOT/mmx64.efi
mcopy -i "$esp" "$efi/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" ::/EFI/BOOT/grubx64.efi
mcopy -i "$esp" "$work/grub.cfg" ::/EFI/debian/grub.cfg
dd if="$esp" of="$raw" bs=1M seek=1 conv=notrunc status=none

# Nothing the guest does not need: package caches and lists, logs of the build.
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old \
  "$rootfs"/var/lib/cloud/* "$rootfs"/tmp/*
used=$(du -sm --exclude=proc --exclude=sys "$rootfs" | cut -f1)
# Zeros over the free blocks (the package downloads were there), so the qcow2 holds only what the
# files use: qemu-img leaves zeros out, and a loop device's discard does not reliably punch holes.
dd if=/dev/zero of="$rootfs/zero.fill" bs=4M status=none 2>/dev/null || true
rm -f "$rootfs/zero.fill"
umount "$rootfs"
losetup -d "$loop"; loop=""

log "writing the compressed qcow2"
qemu-img convert -c -O qcow2 "$raw" "$work/image.qcow2"
mv "$work/image.qcow2" "$image"
# Older builds of the template are superseded.
find "$CACHE" -maxdepth 1 -name "$NAME-*.qcow2" ! -name "$(basename "$image")" -delete
ln -sfn "$(basename "$image")" "$CACHE/$NAME.qcow2"
size=$(( $(stat -c %s "$image") / 1048576 ))
log "built $image in $(( $(date +%s) - start )) s: root file system ${used} MiB, qcow2 ${size} MiB"
echo "$image"
