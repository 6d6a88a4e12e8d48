#!/bin/bash
# Fetch the Debian 12 guest kernels (6.12 and 6.1) and their exactly matching
# linux-headers packages, and unpack them into the cache (nothing is
# installed on the host: scripts/build-module.sh builds against
# $HUGEROOM_CACHE/kernels/<kver>/headers/usr/src/linux-headers-<kver>).
#
# Usage: scripts/fetch-kernels.sh
# Output (stdout), one line per kernel, 6.12 first:
#   <kver> <vmlinuz> <modules-root>
# where <modules-root> is the directory holding lib/modules/<kver>
# (use as `modprobe -d <modules-root> -S <kver> ...`, `depmod -b ...`).
# The same lines are written to $HUGEROOM_CACHE/kernels/list.
#
# Layout: $HUGEROOM_CACHE/kernels/<kver>/{vmlinuz,boot/,lib/modules/<kver>/,.done}
#         $HUGEROOM_CACHE/kernels/<kver>/headers/{usr/src,usr/lib,.done}
#         $HUGEROOM_CACHE/kernels/debs/*.deb
# Env: HUGEROOM_KERNEL_METAS  metapackages to resolve (default
#      "linux-image-6.12-amd64 linux-image-amd64").
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KDIR=$HUGEROOM_CACHE/kernels
METAS=${HUGEROOM_KERNEL_METAS:-linux-image-6.12-amd64 linux-image-amd64}

# Resolve a metapackage (linux-image-6.12-amd64) to its versioned image
# package's kernel release (6.12.117+deb12-amd64), using the candidate version.
resolve_kver() {
    local meta=$1 dep
    dep=$(apt-cache depends --no-recommends --no-suggests "$meta" 2>/dev/null |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
    if [ -z "$dep" ] && [ "$meta" = linux-image-6.12-amd64 ]; then
        # Fallback: any versioned 6.12 image in the configured archives.
        dep=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9].*-amd64$' 2>/dev/null |
            awk '{print $1}' | grep -v -- '-unsigned$' | grep -v -- '-dbg$' | sort -V | tail -1)
    fi
    [ -n "$dep" ] || return 1
    dep=${dep#linux-image-}
    printf '%s\n' "${dep%-unsigned}"
}

fetch_one() {
    local kver=$1 deb pkg=linux-image-$1
    if hr_kernel_unpacked "$kver"; then
        info "kernel $kver already unpacked in $KDIR/$kver"
    else
        mkdir -p "$KDIR/debs"
        deb=$(ls "$KDIR/debs/${pkg}_"*.deb 2>/dev/null | sort -V | tail -1 || true)
        if [ -z "$deb" ]; then
            info "downloading $pkg"
            # _apt must be able to write the download dir, else apt warns.
            chown _apt:root "$KDIR/debs" 2>/dev/null || true
            (cd "$KDIR/debs" && apt_get download "$pkg" >&2) ||
                die "apt-get download $pkg failed; run 'apt-get update' (scripts/lib.sh ensure_apt_sources) and rerun"
            deb=$(ls "$KDIR/debs/${pkg}_"*.deb | sort -V | tail -1)
        fi
        hr_unpack_kernel "$kver" "$deb"
    fi
    fetch_headers "$kver"
}

# Headers of exactly this release for module builds, unpacked into the
# cache, not installed: installing linux-headers-<kver> on a Debian 12 host
# pulls in that kernel's image and makes it the host's default boot kernel.
# The arch package (linux-headers-<kver>), its -common package and
# linux-kbuild-<version> keep their /usr layout under headers/, whose
# relative symlinks then hold; only the arch Makefile's absolute include of
# the -common tree is pointed into the cache.
fetch_headers() {
    local kver=$1 dest=$KDIR/$1/headers pkgs pkg deb
    local arch=$dest/usr/src/linux-headers-$1
    if [ -f "$dest/.done" ] && [ -f "$arch/Makefile" ]; then
        return 0
    fi
    pkgs="linux-headers-$kver $(apt-cache depends --no-recommends --no-suggests "linux-headers-$kver" 2>/dev/null |
        awk '$1 ~ /Depends:$/ && $2 ~ /^linux-(headers|kbuild)-/ { print $2 }' | sort -u | tr '\n' ' ')"
    mkdir -p "$KDIR/debs"
    chown _apt:root "$KDIR/debs" 2>/dev/null || true
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    for pkg in $pkgs; do
        deb=$(ls "$KDIR/debs/${pkg}_"*.deb 2>/dev/null | sort -V | tail -1 || true)
        if [ -z "$deb" ]; then
            info "downloading $pkg"
            (cd "$KDIR/debs" && apt_get download "$pkg" >&2) ||
                die "apt-get download $pkg failed; run 'apt-get update' and rerun"
            deb=$(ls "$KDIR/debs/${pkg}_"*.deb | sort -V | tail -1)
        fi
        dpkg-deb -x "$deb" "$dest.tmp"
    done
    [ -f "$dest.tmp/usr/src/linux-headers-$kver/Makefile" ] ||
        die "linux-headers-$kver has no usr/src/linux-headers-$kver/Makefile (packages: $pkgs)"
    sed -i "s|^include /usr/src/|include $dest/usr/src/|" \
        "$dest.tmp/usr/src/linux-headers-$kver/Makefile"
    touch "$dest.tmp/.done"
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
    info "headers for $kver unpacked in $dest (${pkgs% })"
}

main() {
    need_root
    command -v depmod >/dev/null || die "depmod not found; run scripts/install-deps.sh first"
    ensure_apt_sources
    local meta kver lines=""
    for meta in $METAS; do
        kver=$(resolve_kver "$meta") ||
            die "cannot resolve $meta to a versioned linux-image package (apt-cache depends $meta); run apt-get update and check the archive has it"
        info "$meta -> linux-image-$kver"
        fetch_one "$kver"
        lines+="$kver $KDIR/$kver/vmlinuz $KDIR/$kver"$'\n'
    done
    printf '%s' "$lines" >"$KDIR/list.tmp"
    mv "$KDIR/list.tmp" "$KDIR/list"
    printf '%s' "$lines"
}

with_lock kernels main
