#!/usr/bin/env bash
# Run the virtio-hugeroom qtests (they come with the series' patches) in the
# QEMU that scripts/build-qemu.sh built from this series.
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/common.sh"

qemu=$(bash "$HR_SCRIPTS/build-qemu.sh" | tail -n1)
# The whole series has 42; tests/qemu/series-steps.sh checks each step's.
hugeroom_qtests "$qemu" "$(dirname "$qemu")/qos-test" 42 || die "virtio-hugeroom qtests failed"
