#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# A guest of the given kernel series boots with the virtio_hugeroom module
# that DKMS built from the hugeroom-dkms package in the clean bookworm root
# (tests/install/dkms-module.sh), and a virtio-hugeroom-pci device of the
# patched QEMU: the module loads and binds the device
# (tests/install/dkms-guest.sh in the guest).
#   tests/install/test-dkms-vm.sh 6.12|6.1
# Passes only if the guest printed a TAP plan, every line is "ok" and the
# test script exited 0.
. "$(dirname "$0")/../../scripts/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

series=${1:?series (6.12 or 6.1)}
kver=$(hr_series_kver "$series")
ko=$(bash "$HERE/dkms-module.sh" "$kver" | tail -n1)
qemu=$(bash "$HR_SCRIPTS/build-qemu.sh" | tail -n1)
# bookworm's readelf prints every note of a module built by sid's
# binutils but exits 1 on one it does not know: its status does not count
buildid=$( { readelf -n "$ko" 2>/dev/null || true; } | awk '/Build ID:/ && !id { id = $3 } END { print id }')
[ -n "$buildid" ] || die "no GNU build ID in $ko"
echo "# $ko (DKMS, installed in the root as $(cat "$(dirname "$ko")/installed-as"))"

work=$(mktemp -d "${TMPDIR:-/tmp}/hr-dkmsvm.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash "$HR_SCRIPTS/build-initramfs.sh" "$kver" "$work/base.cpio.gz" "$ko" >/dev/null
mkdir -p "$work/overlay"
install -m 755 "$HERE/dkms-guest.sh" "$work/overlay/test.sh"
bash "$HR_SCRIPTS/make-overlay.sh" "$work/overlay.cpio.gz" "$work/overlay" >/dev/null
bash "$HR_SCRIPTS/boot-guest.sh" -q "$qemu" -k "$kver" -m 1G -w \
    -i "$work/base.cpio.gz" -i "$work/overlay.cpio.gz" -l "$work/serial.log" \
    -a "hr.buildid=$buildid" -- -device virtio-hugeroom-pci >/dev/null || true

log=$(tr -d '\r' <"$work/serial.log")
printf '%s\n' "$log" | grep -E '^(ok|not ok|1\.\.|#)' || true
plan=$(printf '%s\n' "$log" | grep -oE '1\.\.[1-9][0-9]*$' | tail -n1 | cut -d. -f3)
[ -n "$plan" ] || { printf '%s\n' "$log" | tail -30; die "no TAP plan from the guest"; }
oks=$(printf '%s\n' "$log" | grep -cE '(^|[^t] )ok [0-9]+ - ' || true)
[ "$oks" -ge "$plan" ] || die "the guest planned $plan tests but only $oks passed"
! printf '%s\n' "$log" | grep -q '^not ok' || die "the in-guest check failed"
printf '%s\n' "$log" | grep -q 'HUGEROOM-TEST-EXIT=0' || die "the in-guest check did not exit 0"
