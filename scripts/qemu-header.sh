#!/usr/bin/env bash
# Print protocol/virtio_hugeroom.h in the form QEMU keeps it in
# include/standard-headers/linux/: the kernel's __le/__u types become
# uint*_t, as QEMU's scripts/update-linux-headers.sh does for every
# standard header (QEMU's standard-headers/linux/types.h defines none).
set -euo pipefail
sed -e 's/\b__le\([0-9][0-9]*\)\b/uint\1_t/g' \
    -e 's/\b__u\([0-9][0-9]*\)\b/uint\1_t/g' \
    "$(dirname "$0")/../protocol/virtio_hugeroom.h"
