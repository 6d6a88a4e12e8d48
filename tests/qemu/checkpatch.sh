#!/usr/bin/env bash
# Every patch of the series passes QEMU's scripts/checkpatch.pl, and the
# header in patch 0001 is exactly protocol/virtio_hugeroom.h in QEMU's form
# (scripts/qemu-header.sh), so the three parties never drift apart.
. "$(dirname "$0")/../../scripts/lib.sh"

bash "$HR_SCRIPTS/build-qemu.sh" >/dev/null   # makes sure the source is there
cp=$HUGEROOM_CACHE/qemu/work/src/scripts/checkpatch.pl
[ -f "$cp" ] || die "QEMU's checkpatch.pl not found at $cp (run scripts/build-qemu.sh)"

rc=0
for p in "$HR_REPO"/qemu-patches/*.patch; do
    out=$(cd "$(dirname "$cp")/.." && perl "$cp" --no-signoff -q "$p" 2>&1) || true
    errors=$(printf '%s\n' "$out" | grep -c '^ERROR' || true)
    # Patch 0001 imports a standard header: checkpatch asks for
    # update-linux-headers.sh and a MAINTAINERS entry there, nothing else.
    warnings=$(printf '%s\n' "$out" | grep '^WARNING' |
        grep -v -e 'added, moved or deleted file(s), does MAINTAINERS need updating' \
                -e 'update-linux-headers.sh' | grep -c . || true)
    if [ "$errors" != 0 ] || [ "$warnings" != 0 ]; then
        printf '%s:\n%s\n' "$(basename "$p")" "$out"
        rc=1
    else
        echo "ok $(basename "$p")"
    fi
done

hdr=$(ls "$HR_REPO"/qemu-patches/*-linux-headers-add-virtio_hugeroom.h.patch)
diff -u <(bash "$HR_SCRIPTS/qemu-header.sh") \
    <(awk '/^\+\+\+ b\/include\/standard-headers\/linux\/virtio_hugeroom.h/{f=1;next}
           f && /^diff --git/{f=0} f && /^\+/{print substr($0,2)}' "$hdr") ||
    { echo "qemu-patches: the header differs from protocol/virtio_hugeroom.h"; rc=1; }
exit $rc
