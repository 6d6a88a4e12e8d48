#!/bin/bash
# Build QEMU 10.0.13 (Debian trixie's source package) with the project's patch
# series qemu-patches/*.patch applied in name order, cached by a key over the
# patches' contents and the configure flags.
#
# Usage: scripts/build-qemu.sh
# Output: the LAST line of stdout is the path of the built qemu-system-x86_64;
#         everything else goes to stderr. The build dir (with
#         tests/qtest/qos-test built as well) is the binary's directory.
# Cache:  $HUGEROOM_CACHE/qemu/dl/             Debian source package files
#         $HUGEROOM_CACHE/qemu/<key>/src/      patched source tree
#         $HUGEROOM_CACHE/qemu/<key>/build/    meson/ninja build dir
#         $HUGEROOM_CACHE/qemu/<key>/build.log full configure + ninja log
#         The 3 most recently used keys are kept, older ones are removed.
# Env:    HUGEROOM_QEMU_PATCHES  patch dir (default: <repo>/qemu-patches)
#         HUGEROOM_QEMU_TARGETS  ninja targets (default: qemu-system-x86_64
#                                tests/qtest/qos-test)
#         HUGEROOM_JOBS          ninja -j (default: nproc)
# Firmware is not built: run the binary with
#   -L /usr/share/qemu -L /usr/share/seabios   (Debian qemu-system-data, seabios)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

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
)
PATCH_DIR=${HUGEROOM_QEMU_PATCHES:-$HR_REPO/qemu-patches}
TARGETS=${HUGEROOM_QEMU_TARGETS:-qemu-system-x86_64 tests/qtest/qos-test}
JOBS=${HUGEROOM_JOBS:-$(nproc)}
QDIR=$HUGEROOM_CACHE/qemu

patches() {
    [ -d "$PATCH_DIR" ] || return 0
    find "$PATCH_DIR" -maxdepth 1 -type f -name '*.patch' | LC_ALL=C sort
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

prepare_source() {
    local dir=$1 tarball p n=0
    tarball=$(orig_tarball)
    info "unpacking $(basename "$tarball")"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    tar -C "$dir.tmp" --strip-components=1 -xf "$tarball"
    [ -f "$dir.tmp/VERSION" ] && [ "$(cat "$dir.tmp/VERSION")" = "$QEMU_UPSTREAM" ] ||
        die "$tarball does not unpack to QEMU $QEMU_UPSTREAM"
    # The dfsg tarball lacks the edk2 firmware blobs that meson lists as inputs;
    # give it valid empty .bz2 files (never installed: --disable-install-blobs).
    local fd
    for fd in $(grep -oE "'edk2-[A-Za-z0-9_.-]+\.fd'" "$dir.tmp/pc-bios/meson.build" | tr -d "'"); do
        [ -e "$dir.tmp/pc-bios/$fd.bz2" ] || bzip2 -c </dev/null >"$dir.tmp/pc-bios/$fd.bz2"
    done
    # A private git repo so `git apply` resolves paths against this tree even
    # if the cache lies inside another git work tree.
    git -C "$dir.tmp" init -q
    while read -r p; do
        [ -n "$p" ] || continue
        n=$((n + 1))
        info "applying $(basename "$p")"
        git -C "$dir.tmp" apply --whitespace=nowarn "$p" ||
            die "patch $p does not apply to QEMU $QEMU_UPSTREAM (Debian orig tarball, earlier patches applied); fix the series and rerun"
    done < <(patches)
    info "$n patch(es) applied from $PATCH_DIR"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
}

# Show ninja progress sparsely on stderr; full output goes to the log.
progress_filter() {
    awk '/^\[[0-9]+\/[0-9]+\]/ { split(substr($1, 2), a, "/"); if (a[1] % 200 == 0 || a[1] == a[2]) { print "  " $1 " " $NF; fflush() } next }
         /error|Error|ERROR|FAILED/ { print; fflush() }' >&2
}

build() {
    local key=$1 kdir=$QDIR/$1 t0 rc
    t0=$(date +%s)
    rm -f "$kdir/.done"
    mkdir -p "$kdir"
    prepare_source "$kdir/src"
    rm -rf "$kdir/build"
    mkdir -p "$kdir/build"
    : >"$kdir/build.log"
    info "configuring (log: $kdir/build.log)"
    (cd "$kdir/build" && ../src/configure "${CONFIGURE_FLAGS[@]}") >>"$kdir/build.log" 2>&1 || {
        tail -30 "$kdir/build.log" >&2
        die "QEMU configure failed; full log $kdir/build.log (run scripts/install-deps.sh if a dependency is missing)"
    }
    info "building $TARGETS with ninja -j$JOBS (several minutes on 2 cores)"
    # shellcheck disable=SC2086
    set +e
    ninja -C "$kdir/build" -j"$JOBS" $TARGETS 2>&1 | tee -a "$kdir/build.log" | progress_filter
    rc=${PIPESTATUS[0]}
    set -e
    if [ "$rc" != 0 ]; then
        grep -A20 -m3 'FAILED' "$kdir/build.log" >&2 || tail -40 "$kdir/build.log" >&2
        die "QEMU build failed (ninja exit $rc); full log $kdir/build.log"
    fi
    [ -x "$kdir/build/qemu-system-x86_64" ] || die "ninja succeeded but $kdir/build/qemu-system-x86_64 is missing"
    printf '%s\n' "$(date -u +%FT%TZ) $(($(date +%s) - t0))s" >"$kdir/.done"
    info "QEMU built in $(($(date +%s) - t0)) s"
}

prune() {
    local keep=$1 d
    # Keep the 3 most recently used builds (including the current one).
    for d in $(ls -1td "$QDIR"/*/.done 2>/dev/null | tail -n +4); do
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
    if [ -f "$kdir/.done" ] && [ -x "$kdir/build/qemu-system-x86_64" ]; then
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
    printf '%s\n' "$kdir/build/qemu-system-x86_64"
}

with_lock qemu main
