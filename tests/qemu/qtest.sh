#!/usr/bin/env bash
# Run the virtio-hugeroom qtests (the series' last patch) in the QEMU that
# scripts/build-qemu.sh built from this series.
. "$(dirname "$0")/../../scripts/lib.sh"

qemu=$(bash "$HR_SCRIPTS/build-qemu.sh" | tail -n1)
dir=$(dirname "$qemu")
[ -x "$dir/qos-test" ] || die "$dir/qos-test missing: build-qemu.sh did not build the qtests"
P=/x86_64/pc/i440FX-pcihost/pci-bus-pc/pci-bus/virtio-hugeroom-pci
# Debian firmware (incl. ipxe-qemu ROMs for the e1000 the qos pc machine
# has) is on the binary's --firmwarepath, so QTEST_QEMU_BINARY is the plain
# binary: qtest reads the target from its name.
out=$(QTEST_QEMU_BINARY=$qemu "$dir/qos-test" --tap \
    -p "$P/virtio-hugeroom/virtio-hugeroom-tests" -p "$P/virtio-hugeroom-pci-tests" 2>&1) || {
    printf '%s\n' "$out"; die "qos-test failed"; }
printf '%s\n' "$out"
# qos-test passes vacuously when a path matches nothing, and a skipped test
# prints "ok ... # SKIP": insist on every test, each one run.
expected=36
n=$(printf '%s\n' "$out" | grep -c '^ok ' || true)
[ "$n" -eq "$expected" ] || die "$n virtio-hugeroom qtests ran, expected exactly $expected"
! printf '%s\n' "$out" | grep -q '^not ok' || die "a qtest failed"
! printf '%s\n' "$out" | grep -qi '^ok .*# *skip' || die "a qtest was skipped, which is no pass"
