#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# virtio_hugeroom.ko as DKMS builds it from the hugeroom-dkms package: the
# package (tests/install/build-debs.sh) installed with apt into an overlay
# of the clean bookworm root (tests/install/pkg-root.sh, with the suite's
# 6.1 and 6.12 kernels, images and headers), where its postinst has DKMS
# build and install the module for every kernel there; each kernel's
# module is copied out (decompressed) to
# $HUGEROOM_CACHE/dkms/<key>/<kver>/virtio_hugeroom.ko, keyed by the
# package and the root, with DKMS's status and log beside it.
#
# The newest kernel (sid's, scripts/fetch-newest-kernel.sh) has its headers
# and toolchain only in the sid root: there the package goes into an
# overlay of that root instead, apt takes dkms from sid's archive, and
# `dkms autoinstall -k KVER` builds for it (a root's running kernel is the
# host's, which has no headers there), as an admin of a sid guest would.
#
# Usage: tests/install/dkms-module.sh KVER    prints the .ko's path last
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../../scripts/lib.sh"

kver=${1:?usage: dkms-module.sh KVER}

build() {
    local debs=$1 root=$2 out=$3 kver=$4 m k
    # global: the EXIT trap runs after this function returned
    work=$(mktemp -d "${TMPDIR:-/tmp}/hr-dkms.XXXXXX")
    trap 'umount -l "$work/merged" 2>/dev/null; rm -rf "$work"' EXIT
    mkdir "$work/upper" "$work/ovl" "$work/merged" "$out.tmp"
    m=$work/merged
    mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/ovl" "$m"
    mkdir -p "$m/tmp/hr-debs"
    cp "$debs"/hugeroom-dkms_*.deb "$m/tmp/hr-debs/"
    info "apt-get install hugeroom-dkms in an overlay of $root (DKMS builds the module)"
    hr_in_root "$m" sh -c 'apt-get install -y /tmp/hr-debs/hugeroom-dkms_*.deb' \
        >"$out.tmp/install.log" 2>&1 ||
        { tail -40 "$out.tmp/install.log" >&2; die "installing hugeroom-dkms failed (log above)"; }
    if [ ! -e "$m/lib/modules/$kver/updates/dkms" ]; then
        hr_in_root "$m" dkms autoinstall -k "$kver" >>"$out.tmp/install.log" 2>&1 ||
            { tail -40 "$out.tmp/install.log" >&2; die "dkms autoinstall -k $kver failed (log above)"; }
    fi
    hr_in_root "$m" dkms status >"$out.tmp/dkms-status.txt" 2>&1
    for k in $(ls "$m/usr/src" | sed -n 's/^linux-headers-\(.*-amd64\)$/\1/p'); do
        local ko
        ko=$(ls "$m/lib/modules/$k/updates/dkms/virtio_hugeroom.ko"* 2>/dev/null | head -1)
        if [ -z "$ko" ]; then
            # another kernel of the root's may be one DKMS does not build for
            [ "$k" != "$kver" ] && continue
            cat "$out.tmp/dkms-status.txt" >&2
            die "DKMS installed no module for $k"
        fi
        mkdir -p "$out.tmp/$k"
        case $ko in
        *.xz) xz -dc "$ko" >"$out.tmp/$k/virtio_hugeroom.ko" ;;
        *.zst) zstd -qdc "$ko" >"$out.tmp/$k/virtio_hugeroom.ko" ;;
        *.gz) gzip -dc "$ko" >"$out.tmp/$k/virtio_hugeroom.ko" ;;
        *) cp "$ko" "$out.tmp/$k/virtio_hugeroom.ko" ;;
        esac
        printf '%s\n' "${ko#"$m"}" >"$out.tmp/$k/installed-as"
    done
    rm -rf "$out"
    mv "$out.tmp" "$out"
}

main() {
    need_root
    local debs root key out
    debs=$(bash "$HERE/build-debs.sh" | tail -n1)
    if [ -f "$HUGEROOM_CACHE/kernels/$kver/build-root" ]; then
        root=$(cat "$HUGEROOM_CACHE/kernels/$kver/build-root")
        [ -e "$root/usr/src/linux-headers-$kver/Makefile" ] ||
            die "no headers for $kver in $root: run scripts/fetch-newest-kernel.sh"
    else
        root=$(bash "$HERE/pkg-root.sh" | tail -n1)
    fi
    key=$( { sha256sum "$debs"/hugeroom-dkms_*.deb | cut -d' ' -f1; echo "$root";
             cat "$root/.done"; cat "$root/.headers" 2>/dev/null || true; } |
           sha256sum | cut -c1-16)
    out=$HUGEROOM_CACHE/dkms/$key
    if [ ! -f "$out/$kver/virtio_hugeroom.ko" ]; then
        mkdir -p "$HUGEROOM_CACHE/dkms"
        rm -rf "$out.tmp"
        # the overlay in a mount namespace of its own: nothing stays mounted
        unshare --mount --propagation private -- bash -c \
            '. "$1/../../scripts/lib.sh"; '"$(declare -f build)"'; build "$2" "$3" "$4" "$5"' \
            dkms-module "$HERE" "$debs" "$root" "$out" "$kver" ||
            die "the DKMS build failed"
        [ -f "$out/$kver/virtio_hugeroom.ko" ] ||
            die "DKMS built no module for $kver (dkms status: $(cat "$out/dkms-status.txt"))"
        # keep the 3 newest
        ls -1dt "$HUGEROOM_CACHE"/dkms/*/ | tail -n +4 | xargs -r rm -rf
    fi
    printf '%s\n' "$out/$kver/virtio_hugeroom.ko"
}

with_lock dkms main
