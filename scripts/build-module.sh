#!/usr/bin/env bash
# Build the guest driver for one guest kernel version.
#   scripts/build-module.sh KVER
# Needs the matching linux-headers-KVER (scripts/fetch-kernels.sh installs
# them).  Builds out of tree in $HUGEROOM_CACHE/module/KVER/ so the two
# kernels' objects never mix in guest-driver/, and prints the path of
# virtio_hugeroom.ko as the last line of stdout.
. "$(dirname "$0")/lib.sh"

kver=${1:?usage: build-module.sh KVER (see scripts/fetch-kernels.sh)}
kdir=/lib/modules/$kver/build
[ -e "$kdir/Makefile" ] || kdir=/usr/src/linux-headers-$kver
[ -e "$kdir/Makefile" ] ||
    die "no headers for $kver in /usr/src/linux-headers-$kver: run scripts/fetch-kernels.sh"

out=$HUGEROOM_CACHE/module/$kver
mkdir -p "$out"
# Copy the sources with the layout the Kbuild file expects (../protocol).
rm -rf "$out/src.new"
mkdir -p "$out/src.new"
cp -r "$HR_REPO/guest-driver" "$HR_REPO/protocol" "$out/src.new/"
rm -rf "$out/src"
mv "$out/src.new" "$out/src"

info "building virtio_hugeroom.ko for $kver"
make -C "$kdir" M="$out/src/guest-driver" modules >"$out/build.log" 2>&1 ||
    { cat "$out/build.log" >&2; die "module build failed for $kver (log: $out/build.log)"; }
if grep -q 'warning:' "$out/build.log"; then
    grep 'warning:' "$out/build.log" >&2
    die "module build for $kver has warnings (log: $out/build.log)"
fi
echo "$out/src/guest-driver/virtio_hugeroom.ko"
