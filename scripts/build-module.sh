#!/usr/bin/env bash
# Build the guest driver for one guest kernel version.
#   scripts/build-module.sh [--test] KVER
# --test builds the test build (CONFIG_VIRTIO_HUGEROOM_TEST=y: debugfs aids
# that pin memory and inject malformed messages and faults), which only the
# tests load; without it the module is the one users get.
# Needs the matching linux-headers-KVER unpacked in the cache
# (scripts/fetch-kernels.sh does it), or, for the newest kernel, installed
# in the sid root named by $HUGEROOM_CACHE/kernels/KVER/build-root
# (scripts/fetch-newest-kernel.sh), whose toolchain then builds it.
# Builds out of tree in $HUGEROOM_CACHE/module/KVER/<key>/, keyed by
# the sources, so the two kernels' objects never mix in guest-driver/, an
# unchanged driver is not rebuilt, and builds from different checkouts at
# the same time do not trample each other.  Prints the path of
# virtio_hugeroom.ko as the last line of stdout.
. "$(dirname "$0")/lib.sh"

variant=user
make_args=()
if [ "${1:-}" = --test ]; then
    variant=test
    make_args=(CONFIG_VIRTIO_HUGEROOM_TEST=y)
    shift
fi
kver=${1:?usage: build-module.sh [--test] KVER (see scripts/fetch-kernels.sh)}
kdir=$HUGEROOM_CACHE/kernels/$kver/headers/usr/src/linux-headers-$kver
root=''
if [ -f "$HUGEROOM_CACHE/kernels/$kver/build-root" ]; then
    root=$(cat "$HUGEROOM_CACHE/kernels/$kver/build-root")
    kdir=/usr/src/linux-headers-$kver
    [ -e "$root$kdir/Makefile" ] ||
        die "no headers for $kver in $root$kdir: run scripts/fetch-newest-kernel.sh"
else
    [ -e "$kdir/Makefile" ] ||
        die "no headers for $kver in $kdir: run scripts/fetch-kernels.sh"
fi

key=$(cd "$HR_REPO" && find guest-driver protocol -type f \( -name '*.[ch]' -o -name Kbuild -o -name Makefile \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
out=$HUGEROOM_CACHE/module/$kver/$key-$variant
ko=$out/src/guest-driver/virtio_hugeroom.ko
if [ -f "$out/.done" ] && [ -f "$ko" ]; then
    echo "$ko"
    exit 0
fi

tmp=$(mktemp -d "$HUGEROOM_CACHE/module/.build.XXXXXX" 2>/dev/null ||
      { mkdir -p "$HUGEROOM_CACHE/module"; mktemp -d "$HUGEROOM_CACHE/module/.build.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
# Copy the sources with the layout the Kbuild file expects (../protocol).
mkdir -p "$tmp/src"
cp -r "$HR_REPO/guest-driver" "$HR_REPO/protocol" "$tmp/src/"

info "building virtio_hugeroom.ko ($variant build) for $kver"
if [ -n "$root" ]; then
    # In the root, with the sources on /hr-build (a mount of this build's
    # own directory, private to the command).
    hr_in_root "$root" --bind "$tmp/src" /hr-build \
        make -C "$kdir" M=/hr-build/guest-driver W=1 "${make_args[@]}" modules
else
    make -C "$kdir" M="$tmp/src/guest-driver" W=1 "${make_args[@]}" modules
fi >"$tmp/build.log" 2>&1 ||
    { cat "$tmp/build.log" >&2; die "module build failed for $kver"; }
# W=1: the extra warnings too (the kernel's for new code); none may show.
if grep -q 'warning:' "$tmp/build.log"; then
    grep 'warning:' "$tmp/build.log" >&2
    die "module build for $kver has warnings"
fi
# Kbuild records absolute paths; rebuild in place is not needed, the .ko is
# self-contained, so the finished tree can move into the cache atomically.
touch "$tmp/.done"
mkdir -p "$(dirname "$out")"
if ! mv -T "$tmp" "$out" 2>/dev/null; then
    [ -f "$out/.done" ] || die "could not store the module in $out"
fi
trap - EXIT
rm -rf "$tmp"
# Keep the 10 newest builds per kernel (both variants).
ls -1dt "$HUGEROOM_CACHE/module/$kver"/*/ 2>/dev/null | tail -n +11 | xargs -r rm -rf
echo "$ko"
