#!/bin/bash
# Install the host packages hugeroom's builds and tests need (Debian 12, root).
# Idempotent: when everything is installed it returns in about a second.
# Usage: scripts/install-deps.sh
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BASE_PKGS=(
    build-essential pkg-config ninja-build
    libglib2.0-dev libjson-glib-dev libsoup-3.0-dev libvirt-dev libxml2-dev libsmartcols-dev
    clang libclang-rt-14-dev
    busybox-static cpio kmod dpkg-dev
    seabios qemu-system-data ipxe-qemu
    libpixman-1-dev zlib1g-dev flex bison bc libelf-dev
    python3-venv socat jq
    curl openssl glib-networking wrk systemd groff-base man-db
    xz-utils zstd gzip ca-certificates util-linux
    debootstrap dwarves valgrind clang-format
    debhelper dh-dkms lintian fakeroot
)
# From bookworm-backports (meson >= 1.5 is needed by QEMU 10).
BPO_PKGS=(meson python3-pycotap)
MESON_MIN=1.5
# libvirtd for the hook's test (tests/libvirt), from bookworm-backports: the
# daemon, the QEMU driver and virsh, no network or storage drivers.  Named
# one by one as PKG/bookworm-backports: "-t bookworm-backports" would also
# take their dependencies (systemd, udev, QEMU) from backports.  libvirt-dev
# and libvirt0 must have the daemon's version.
LIBVIRT_PKGS=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-common
    libvirt-daemon-common libvirt-daemon-log libvirt0 libvirt-dev)
LIBVIRT_MIN=11.3

meson_ok() {
    local v
    v=$(dpkg-query -W -f='${Version}' meson 2>/dev/null) || return 1
    dpkg --compare-versions "$v" ge "$MESON_MIN"
}

libvirt_ok() {
    local p v
    for p in "${LIBVIRT_PKGS[@]}"; do
        v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) || return 1
        dpkg --compare-versions "$v" ge "$LIBVIRT_MIN" || return 1
    done
}

main() {
    need_root
    local missing bpo_missing libvirt_missing=''
    missing=$(pkgs_missing "${BASE_PKGS[@]}")
    bpo_missing=$(pkgs_missing "${BPO_PKGS[@]}")
    meson_ok || bpo_missing=$(printf '%s\n%s\n' "$bpo_missing" meson | sort -u | sed '/^$/d')
    libvirt_ok || libvirt_missing=1
    if [ -z "$missing" ] && [ -z "$bpo_missing" ] && [ -z "$libvirt_missing" ]; then
        info "all host dependencies already installed"
        return 0
    fi
    ensure_apt_sources
    if [ -n "$missing" ]; then
        info "installing: $(echo $missing)"
        # shellcheck disable=SC2086
        apt_get install -y --no-install-recommends $missing >&2 ||
            die "apt-get install of base packages failed (see above). Try 'apt-get update' and rerun $0."
    fi
    if [ -n "$bpo_missing" ]; then
        info "installing from bookworm-backports: $(echo $bpo_missing)"
        # shellcheck disable=SC2086
        apt_get install -y --no-install-recommends -t bookworm-backports $bpo_missing >&2 ||
            die "apt-get install -t bookworm-backports failed (see above). Check /etc/apt/sources.list.d/hugeroom-backports.sources and rerun $0."
    fi
    if [ -n "$libvirt_missing" ]; then
        info "installing libvirt from bookworm-backports: ${LIBVIRT_PKGS[*]}"
        # shellcheck disable=SC2046
        apt_get install -y --no-install-recommends \
            $(printf '%s/bookworm-backports ' "${LIBVIRT_PKGS[@]}") >&2 ||
            die "apt-get install of libvirt from bookworm-backports failed (see above). Check /etc/apt/sources.list.d/hugeroom-backports.sources and rerun $0."
        libvirt_ok || die "libvirt $(dpkg-query -W -f='${Version}' libvirt-daemon 2>/dev/null || echo none) installed, need >= $LIBVIRT_MIN from bookworm-backports"
    fi
    meson_ok || die "meson $(dpkg-query -W -f='${Version}' meson 2>/dev/null || echo none) installed, need >= $MESON_MIN from bookworm-backports"
    [ -z "$(pkgs_missing "${BASE_PKGS[@]}" "${BPO_PKGS[@]}")" ] ||
        die "still missing after install: $(echo $(pkgs_missing "${BASE_PKGS[@]}" "${BPO_PKGS[@]}"))"
    info "host dependencies installed (meson $(dpkg-query -W -f='${Version}' meson))"
}

with_lock install-deps main
