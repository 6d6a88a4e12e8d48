#!/bin/bash
# Build QEMU 10.0.13 (Debian trixie's source package) with the project's patch
# series qemu-patches/*.patch applied in name order, cached by a key over the
# patches' contents and the configure flags.
#
# Usage: scripts/build-qemu.sh
# Output: the LAST line of stdout is the path of the built qemu-system-x86_64;
#         everything else goes to stderr.
# Cache:  $HUGEROOM_CACHE/qemu/dl/               Debian source package files
#         $HUGEROOM_CACHE/qemu/<key>/qemu-system-x86_64   the result for a series
#         $HUGEROOM_CACHE/qemu/<key>/qos-test    tests/qtest/qos-test of that build
#         $HUGEROOM_CACHE/qemu/<key>/build.log   configure + ninja log
#         $HUGEROOM_CACHE/qemu/work/{src,build}  one shared, incrementally
#             rebuilt tree: src is a git repo whose tag "base" is the pristine
#             tarball; a new series is applied after `git reset --hard base`,
#             so ninja recompiles only what the patches touch (a patch change
#             costs about a minute, not a full build). Do not edit it by hand.
#         The 5 most recently used keys are kept, older ones are removed.
# Run qtests with: QTEST_QEMU_BINARY=<key>/qemu-system-x86_64 <key>/qos-test
#   (the binary finds Debian's firmware by itself, see --firmwarepath below;
#   -L /usr/share/qemu -L /usr/share/seabios also works for direct runs).
# Env:    HUGEROOM_QEMU_PATCHES  patch dir (default: <repo>/qemu-patches)
#         HUGEROOM_QEMU_TARGETS  ninja targets (default: qemu-system-x86_64
#                                tests/qtest/qos-test)
#         HUGEROOM_JOBS          ninja -j (default: nproc)
# Sourced, it only defines (CONFIGURE_FLAGS, fetch_source, link_firmware...).
# Firmware is not built: Debian's seabios + qemu-system-data are used.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

QEMU_UPSTREAM=10.0.13
QEMU_DEB_PATTERN='^1:10\.0\.13[+-]'
CONFIGURE_FLAGS=(
    --python=/usr/bin/python3
    --target-list=x86_64-softmmu
    --without-default-features
    --enable-kvm --enable-tcg
    --disable-docs --disable-install-blobs
    # Never try to git-clone subprojects (no network but Debian's archive);
    # libfdt is then simply not used (x86 does not need it).
    --disable-download
    # Debian's firmware (seabios, qemu-system-data, ipxe-qemu NIC ROMs that the
    # default NIC of -M pc in qtests needs) is found without -L, which
    # qtest needs: QTEST_QEMU_BINARY must be a plain binary path.
    --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
)
PATCH_DIR=${HUGEROOM_QEMU_PATCHES:-$HR_REPO/qemu-patches}
TARGETS=${HUGEROOM_QEMU_TARGETS:-qemu-system-x86_64 tests/qtest/qos-test}
JOBS=${HUGEROOM_JOBS:-$(nproc)}
QDIR=$HUGEROOM_CACHE/qemu
WORK=$QDIR/work

patches() {
    [ -d "$PATCH_DIR" ] || return 0
    find "$PATCH_DIR" -maxdepth 1 -type f -name '*.patch' | LC_ALL=C sort
}

flags_hash() {
    printf 'flag %s\n' "${CONFIGURE_FLAGS[@]}" | sha256sum | cut -c1-16
}

cache_key() {
    {
        printf 'hugeroom-qemu recipe 1\nqemu %s\n' "$QEMU_UPSTREAM"
        printf 'flag %s\n' "${CONFIGURE_FLAGS[@]}"
        local p
        while read -r p; do
            [ -n "$p" ] || continue
            printf 'patch %s\n' "$(basename "$p")"
            sha256sum <"$p"
        done < <(patches)
    } | sha256sum | cut -c1-16
}

orig_tarball() {
    ls "$QDIR/dl/qemu_${QEMU_UPSTREAM}"*.orig.tar.* 2>/dev/null | head -1
}

fetch_source() {
    [ -n "$(orig_tarball)" ] && return 0
    ensure_apt_sources
    local ver
    ver=$(apt-cache showsrc qemu 2>/dev/null | awk '/^Version:/ {print $2}' |
        grep -E "$QEMU_DEB_PATTERN" | sort -V | tail -1 || true)
    [ -n "$ver" ] || die "no qemu source version 1:$QEMU_UPSTREAM* in apt (apt-cache showsrc qemu); is the trixie deb-src entry (/etc/apt/sources.list.d/hugeroom-trixie-src.sources) there and 'apt-get update' done?"
    info "downloading Debian source package qemu=$ver"
    mkdir -p "$QDIR/dl"
    chown _apt:root "$QDIR/dl" 2>/dev/null || true
    (cd "$QDIR/dl" && apt_get source --download-only "qemu=$ver" >&2) ||
        die "apt-get source --download-only qemu=$ver failed (see above)"
    [ -n "$(orig_tarball)" ] || die "no qemu_${QEMU_UPSTREAM}*.orig.tar.* in $QDIR/dl after download"
}

g() { git -C "$WORK/src" -c user.name=hugeroom -c user.email=hugeroom@localhost -c core.excludesFile=/dev/null "$@"; }

# Pristine source tree as a git repo tagged "base" (once).
init_source() {
    if [ -d "$WORK/src/.git" ] && g rev-parse -q --verify refs/tags/base >/dev/null; then
        return 0
    fi
    local tarball fd
    tarball=$(orig_tarball)
    info "unpacking $(basename "$tarball") into $WORK/src"
    rm -rf "$WORK"
    mkdir -p "$WORK/src"
    tar -C "$WORK/src" --strip-components=1 -xf "$tarball"
    [ -f "$WORK/src/VERSION" ] && [ "$(cat "$WORK/src/VERSION")" = "$QEMU_UPSTREAM" ] ||
        die "$tarball does not unpack to QEMU $QEMU_UPSTREAM"
    # The dfsg tarball lacks the edk2 firmware blobs that meson lists as inputs;
    # give it valid empty .bz2 files (never installed: --disable-install-blobs).
    for fd in $(grep -oE "'edk2-[A-Za-z0-9_.-]+\.fd'" "$WORK/src/pc-bios/meson.build" | tr -d "'"); do
        [ -e "$WORK/src/pc-bios/$fd.bz2" ] || bzip2 -c </dev/null >"$WORK/src/pc-bios/$fd.bz2"
    done
    info "recording the pristine tree (git, once)"
    g init -q
    g add -A -f .
    g commit -q -m "QEMU $QEMU_UPSTREAM (Debian orig tarball) + edk2 placeholders"
    g tag base
}

# Reset the tree to base and apply the series.
apply_series() {
    local p n=0
    rm -f "$WORK/.key"
    g reset -q --hard base
    g clean -q -f -d -x
    while read -r p; do
        [ -n "$p" ] || continue
        n=$((n + 1))
        info "applying $(basename "$p")"
        g apply --whitespace=nowarn "$p" ||
            die "patch $p does not apply to QEMU $QEMU_UPSTREAM (Debian orig tarball, earlier patches applied); fix the series and rerun"
    done < <(patches)
    info "$n patch(es) applied from $PATCH_DIR"
}

# Let a build dir's binary find Debian's firmware too (it looks under
# qemu-bundle/ when that exists): link_firmware BUILD_DIR
link_firmware() {
    mkdir -p "$1/qemu-bundle/usr/share" "$1/qemu-bundle/usr/lib/ipxe"
    ln -sfn /usr/share/qemu "$1/qemu-bundle/usr/share/qemu"
    ln -sfn /usr/share/seabios "$1/qemu-bundle/usr/share/seabios"
    ln -sfn /usr/lib/ipxe/qemu "$1/qemu-bundle/usr/lib/ipxe/qemu"
}

# Show ninja progress sparsely on stderr; full output goes to the log.
progress_filter() {
    awk '/^\[[0-9]+\/[0-9]+\]/ { split(substr($1, 2), a, "/"); if (a[1] % 200 == 0 || a[1] == a[2]) { print "  " $1 " " $NF; fflush() } next }
         /error|Error|ERROR|FAILED/ { print; fflush() }' >&2
}

build() {
    local key=$1 kdir=$QDIR/$1 t0 rc log
    t0=$(date +%s)
    mkdir -p "$kdir"
    log=$kdir/build.log
    : >"$log"
    init_source
    apply_series
    if [ ! -f "$WORK/build/build.ninja" ] || [ "$(cat "$WORK/.flags" 2>/dev/null)" != "$(flags_hash)" ]; then
        rm -rf "$WORK/build" "$WORK/.flags"
        mkdir -p "$WORK/build"
        info "configuring (log: $log)"
        (cd "$WORK/build" && ../src/configure "${CONFIGURE_FLAGS[@]}") >>"$log" 2>&1 || {
            tail -30 "$log" >&2
            die "QEMU configure failed; full log $log (run scripts/install-deps.sh if a dependency is missing)"
        }
        flags_hash >"$WORK/.flags"
    else
        info "reusing configured build dir $WORK/build (incremental)"
    fi
    info "building $TARGETS with ninja -j$JOBS (first build: several minutes on 2 cores)"
    set +e
    # shellcheck disable=SC2086
    ninja -C "$WORK/build" -j"$JOBS" $TARGETS 2>&1 | tee -a "$log" | progress_filter
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" != 0 ]; then
        grep -A20 -m3 'FAILED' "$log" >&2 || tail -40 "$log" >&2
        die "QEMU build failed (ninja exit $rc); full log $log"
    fi
    [ -x "$WORK/build/qemu-system-x86_64" ] || die "ninja succeeded but $WORK/build/qemu-system-x86_64 is missing"
    link_firmware "$WORK/build"
    rm -f "$kdir/.done"
    cp "$WORK/build/qemu-system-x86_64" "$kdir/qemu-system-x86_64.tmp"
    mv "$kdir/qemu-system-x86_64.tmp" "$kdir/qemu-system-x86_64"
    if [ -x "$WORK/build/tests/qtest/qos-test" ]; then
        cp "$WORK/build/tests/qtest/qos-test" "$kdir/qos-test.tmp"
        mv "$kdir/qos-test.tmp" "$kdir/qos-test"
    fi
    echo "$key" >"$WORK/.key"
    printf '%s\n' "$(date -u +%FT%TZ) $(($(date +%s) - t0))s" >"$kdir/.done"
    info "QEMU built in $(($(date +%s) - t0)) s"
}

prune() {
    local keep=$1 d
    for d in $(ls -1td "$QDIR"/*/.done 2>/dev/null | tail -n +6); do
        d=$(dirname "$d")
        [ "$d" = "$QDIR/$keep" ] && continue
        info "removing old QEMU build $d"
        rm -rf "$d"
    done
}

main() {
    local key kdir
    key=$(cache_key)
    kdir=$QDIR/$key
    if [ -f "$kdir/.done" ] && [ -x "$kdir/qemu-system-x86_64" ]; then
        info "QEMU for this patch series is cached ($kdir)"
        touch "$kdir/.done"
    else
        need_root
        "$HR_SCRIPTS/install-deps.sh"
        fetch_source
        info "building QEMU $QEMU_UPSTREAM, key $key, $(patches | grep -c . || true) patch(es)"
        build "$key"
        prune "$key"
    fi
    printf '%s\n' "$kdir/qemu-system-x86_64"
}

# Sourced (tests/qemu/series-steps.sh): the definitions above, no build.
(return 0 2>/dev/null) && return 0
with_lock qemu main
