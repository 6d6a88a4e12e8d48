#!/usr/bin/env bash
# Every patch of the series passes QEMU's scripts/checkpatch.pl, and the
# header in patch 0001 is exactly protocol/virtio_hugeroom.h in QEMU's form
# (scripts/qemu-header.sh), so the three parties never drift apart.
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/common.sh"

bash "$HR_SCRIPTS/build-qemu.sh" >/dev/null   # makes sure the source is there

rc=0
for p in "$HR_REPO"/qemu-patches/*.patch; do
    if qemu_checkpatch "$HUGEROOM_CACHE/qemu/work/src" "$p"; then
        echo "ok $(basename "$p")"
    else
        rc=1
    fi
done

hdr=$(ls "$HR_REPO"/qemu-patches/*-linux-headers-add-virtio_hugeroom.h.patch)
diff -u <(bash "$HR_SCRIPTS/qemu-header.sh") \
    <(awk '/^\+\+\+ b\/include\/standard-headers\/linux\/virtio_hugeroom.h/{f=1;next}
           f && /^diff --git/{f=0} f && /^\+/{print substr($0,2)}' "$hdr") ||
    { echo "qemu-patches: the header differs from protocol/virtio_hugeroom.h"; rc=1; }
exit $rc
