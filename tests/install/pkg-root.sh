#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# The clean Debian 12 root the package tests install hugeroom's .debs into:
# $HUGEROOM_CACHE/pkg-root, made once (scripts/lib.sh hr_bookworm_root)
# with what the packages depend on already there (so that a test run needs
# no download) and the suite's cached 6.1 and 6.12 guest kernels
# (scripts/fetch-kernels.sh) installed, image and headers, as on a guest:
# DKMS builds against the headers, and depmod's indexes of each kernel's
# modules are there before the packages come (a headers-only kernel gets
# them from DKMS's depmod, and they stay).  The tests never change it: they work in an overlay of it
# (tests/install/pkgroot.py).
#
# Usage: tests/install/pkg-root.sh        prints the root's path
. "$(dirname "$0")/../../scripts/lib.sh"

ROOT=$HUGEROOM_CACHE/pkg-root
# hugeroom's and hugeroom-dkms's dependencies (dkms pulls gcc and make),
# systemd for the units, what the 6.1 and 6.12 headers need
PKGS="adduser systemd dkms libglib2.0-0 libjson-glib-1.0-0 libsoup-3.0-0 libxml2 libvirt0
      linux-compiler-gcc-12-x86 bash-completion"

main() {
    need_root
    hr_bookworm_root "$ROOT" "$(echo $PKGS)"
    local kvers kver debs=() want
    kvers=$(bash "$HR_SCRIPTS/fetch-kernels.sh" | awk '{ print $1 }')
    want="images+headers $(printf '%s\n' $kvers | sort | tr '\n' ' ')"
    if [ "$(cat "$ROOT/.headers" 2>/dev/null)" = "$want" ]; then
        printf '%s\n' "$ROOT"
        return 0
    fi
    for kver in $kvers; do
        local pkg
        for pkg in "linux-image-$kver" "linux-headers-$kver" \
            $(dpkg-deb -f "$(ls "$HUGEROOM_CACHE"/kernels/debs/linux-headers-"${kver}"_*.deb | tail -1)" Depends |
                tr ',' '\n' | awk '$1 ~ /^linux-(headers|kbuild)-/ { print $1 }'); do
            debs+=("$(ls "$HUGEROOM_CACHE/kernels/debs/${pkg}_"*.deb | sort -V | tail -1)")
        done
    done
    info "installing the headers of $want in $ROOT"
    rm -rf "$ROOT/tmp/hr-headers"
    mkdir -p "$ROOT/tmp/hr-headers"
    cp "${debs[@]}" "$ROOT/tmp/hr-headers/"
    hr_in_root "$ROOT" sh -c 'apt-get install -y /tmp/hr-headers/*.deb' >&2 ||
        die "installing ${debs[*]##*/} in $ROOT failed (see above)"
    rm -rf "$ROOT/tmp/hr-headers"
    printf '%s\n' "$want" >"$ROOT/.headers"
    printf '%s\n' "$ROOT"
}

with_lock pkg-root main
