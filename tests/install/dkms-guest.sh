#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# In the guest (busybox sh, /test.sh of scripts/build-initramfs.sh, which
# loaded the module DKMS built): the module is the one DKMS built (its GNU
# build ID, from readelf on the host, is hr.buildid= on the kernel command
# line; the kernel shows the loaded one's in /sys/module/*/notes) and
# it bound the virtio-hugeroom device (virtio device ID 57).  TAP.
n=0
failed=0
check() {
	desc=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $desc"
	else
		echo "not ok $n - $desc"
		failed=$((failed + 1))
	fi
}

want=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^hr\.buildid=//p')
# the note: namesz, descsz, type (4 bytes each), "GNU\0", then the ID
have=$(od -An -tx1 -v /sys/module/virtio_hugeroom/notes/.note.gnu.build-id 2>/dev/null |
	tr -d ' \n' | cut -c33-)
echo "# build ID: loaded $have, DKMS built $want"
check "the loaded virtio_hugeroom is the module DKMS built" test -n "$want" -a "$have" = "$want"

DRV=/sys/bus/virtio/drivers/virtio_hugeroom
bound=''
for d in "$DRV"/virtio*; do
	[ -e "$d" ] && bound="$bound $(basename "$d")"
done
echo "# bound:$bound"
check "virtio_hugeroom bound a device" test -n "$bound"
ids=''
for b in $bound; do
	ids="$ids $(cat /sys/bus/virtio/devices/$b/device)"
done
check "the bound device is virtio-hugeroom (ID 57):$ids" test "$(echo $ids)" = 0x0039
echo "1..$n"
[ "$failed" = 0 ]
