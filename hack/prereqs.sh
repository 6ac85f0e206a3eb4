#!/usr/bin/env bash
# Installs the system packages HyperFleet's toolchain and tests need and Go cannot fetch:
# gcc (SPIRE's sqlite datastore needs cgo), swtpm and swtpm-tools (TPM attestation tests run
# against a software TPM and fail, not skip, without it), chromium (the console's browser test
# drives Debian's Chromium; it fails in CI without it), make/git (the build itself), and what the
# runner template (hack/template.sh) and the real-guest tests need: debootstrap, qemu-utils,
# extlinux with syslinux-common, fdisk, dosfstools and mtools to build the image, qemu-system-x86,
# socat and ovmf (UEFI firmware with Secure Boot, for the Hyper-V generation 2 guest) to boot it;
# what the test node (internal/node) runs on: containerd, runc, the CNI plugins and iptables;
# and the clients nobody here wrote that the simulators' conformance tests drive: Python's WinRM
# client (python3-winrm) and python-gitlab (python3-gitlab).
# As root on a Debian or Ubuntu machine it installs what is missing with apt-get; otherwise it
# stops at once with the one command to run. Idempotent: with everything present it prints nothing.
#
#   hack/prereqs.sh
set -euo pipefail

# command -> Debian packages providing it
declare -A pkgs=(
  [gcc]="gcc libc6-dev"
  [swtpm]="swtpm"
  [swtpm_setup]="swtpm-tools"
  [git]="git"
  [make]="make"
  [chromium]="chromium"
  [debootstrap]="debootstrap"
  [qemu-img]="qemu-utils"
  [qemu-system-x86_64]="qemu-system-x86"
  [extlinux]="extlinux syslinux-common"
  [sfdisk]="fdisk"
  [mkfs.fat]="dosfstools"
  [mcopy]="mtools"
  [/usr/share/OVMF/OVMF_CODE_4M.secboot.fd]="ovmf"
  [socat]="socat"
  [containerd]="containerd"
  [runc]="runc"
  [iptables]="iptables"
  [/usr/lib/cni/bridge]="containernetworking-plugins"
  [/usr/lib/python3/dist-packages/winrm]="python3-winrm"
  [/usr/lib/python3/dist-packages/gitlab]="python3-gitlab"
  [/usr/lib/postgresql/15/bin/initdb]="postgresql-15"
)
missing=()
for cmd in gcc swtpm swtpm_setup git make chromium debootstrap qemu-img qemu-system-x86_64 extlinux sfdisk mkfs.fat mcopy socat \
  /usr/share/OVMF/OVMF_CODE_4M.secboot.fd containerd runc iptables /usr/lib/cni/bridge /usr/lib/python3/dist-packages/winrm /usr/lib/python3/dist-packages/gitlab /usr/lib/postgresql/15/bin/initdb; do
  case $cmd in
  /*) [ -e "$cmd" ] || missing+=(${pkgs[$cmd]}) ;;
  *) command -v "$cmd" >/dev/null 2>&1 || missing+=(${pkgs[$cmd]}) ;;
  esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

install="apt-get update && apt-get install -y ${missing[*]}"
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[prereqs] installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  exit 0
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo "
echo "missing system packages (${missing[*]}); run: ${sudo}sh -c '$install'" >&2
exit 1
