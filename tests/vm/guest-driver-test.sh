#!/usr/bin/env bash
# Run the driver's in-guest TAP test (guest-driver/tests/guest-test.sh) in a
# real guest of the given kernel series, with or without the device:
#   tests/vm/guest-driver-test.sh 6.12|6.1|sid device|nodevice
# Passes only if the guest printed a TAP plan, every line is "ok" and the
# test script exited 0.
. "$(dirname "$0")/../../scripts/lib.sh"

series=${1:?series (6.12, 6.1 or sid)}
mode=${2:?device or nodevice}
kver=$(hr_series_kver "$series")
ko=$(bash "$HR_SCRIPTS/build-module.sh" --test "$kver" | tail -n1)
qemu=$(bash "$HR_SCRIPTS/build-qemu.sh" | tail -n1)

work=$(mktemp -d "${TMPDIR:-/tmp}/hr-drvtest.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash "$HR_SCRIPTS/build-initramfs.sh" "$kver" "$work/base.cpio.gz" "$ko" >/dev/null
mkdir -p "$work/overlay"
install -m 755 "$HR_REPO/guest-driver/tests/guest-test.sh" "$work/overlay/test.sh"
bash "$HR_SCRIPTS/make-overlay.sh" "$work/overlay.cpio.gz" "$work/overlay" >/dev/null

args=()
append=
if [ "$mode" = device ]; then
    args=(-device virtio-hugeroom-pci)
    append=hr.device=1
fi
bash "$HR_SCRIPTS/boot-guest.sh" -q "$qemu" -k "$kver" -m 1G -w \
    -i "$work/base.cpio.gz" -i "$work/overlay.cpio.gz" -l "$work/serial.log" \
    ${append:+-a "$append"} -- "${args[@]}" >/dev/null || true

log=$(tr -d '\r' <"$work/serial.log")
printf '%s\n' "$log" | grep -E '^(ok|not ok|1\.\.|#)' || true
# Kernel messages share the console, so a line may start with one of them.
plan=$(printf '%s\n' "$log" | grep -oE '1\.\.[1-9][0-9]*$' | tail -n1 | cut -d. -f3)
[ -n "$plan" ] || { printf '%s\n' "$log" | tail -30; die "no TAP plan from the guest"; }
oks=$(printf '%s\n' "$log" | grep -cE '(^|[^t] )ok [0-9]+ - ' || true)
[ "$oks" -ge "$plan" ] || die "the guest planned $plan tests but only $oks passed"
! printf '%s\n' "$log" | grep -q '^not ok' || die "the in-guest driver test failed"
printf '%s\n' "$log" | grep -q 'HUGEROOM-TEST-EXIT=0' || die "the in-guest test did not exit 0"
