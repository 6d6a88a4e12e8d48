#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
# Build hugeroom's Debian packages from this tree (dpkg-buildpackage -us -uc
# -b, in a copy of the tree: the checkout stays clean) and check them with
# lintian.  Keyed by the tree's files: an unchanged tree's packages are
# reused from $HUGEROOM_CACHE/debs/<key>/.
#
# Usage: tests/install/build-debs.sh [--check]   prints the directory of the
#        .debs, .changes and lintian.txt (lintian's output) as its last line
# Env: HR_DEB_BUILD_OPTIONS  DEB_BUILD_OPTIONS for the build (default
#      nocheck: the suite runs the unit tests itself)
. "$(dirname "$0")/../../scripts/lib.sh"

need() {
    local tool=$1 pkg=$2
    command -v "$tool" >/dev/null ||
        die "$tool not found: apt-get install $pkg (scripts/install-deps.sh installs it)"
}

main() {
    need dpkg-buildpackage dpkg-dev
    need dh debhelper
    need dh_dkms dh-dkms
    need lintian lintian
    cd "$HR_REPO"
    local key out tmp t0=$SECONDS
    # what is in the tree (tracked and new files), by content; with nocheck
    # the tests' scripts are not run and are in no package (only their
    # meson.build files count), so adding or editing a test does not build
    # the packages again
    local opts=${HR_DEB_BUILD_OPTIONS-nocheck}
    key=$( { git ls-files -co --exclude-standard -z | LC_ALL=C sort -z |
             if [[ " $opts " == *" nocheck "* ]]; then
                 tr '\0' '\n' | while IFS= read -r f; do
                     case $f in
                     tests/*/meson.build | tests/meson.build | tests/*/*/meson.build) sha256sum "$f" ;;
                     tests/*) ;;
                     *) sha256sum "$f" ;;
                     esac
                 done
             else
                 xargs -0 sha256sum
             fi 2>/dev/null; echo "$opts"; } |
           sha256sum | cut -c1-16)
    out=$HUGEROOM_CACHE/debs/$key
    if [ -f "$out/.done" ]; then
        printf '%s\n' "$out"
        return 0
    fi
    mkdir -p "$HUGEROOM_CACHE/debs"
    tmp=$(mktemp -d "$HUGEROOM_CACHE/debs/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/src"
    git ls-files -co --exclude-standard -z | xargs -0 cp --parents -a -t "$tmp/src"
    info "dpkg-buildpackage -us -uc -b in $tmp/src (log $tmp/build.log)"
    (cd "$tmp/src" && DEB_BUILD_OPTIONS=$opts \
        dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1 ||
        { tail -60 "$tmp/build.log" >&2; die "dpkg-buildpackage failed (log above)"; }
    info "built in $((SECONDS - t0)) s"
    # lintian over the binary packages and the .buildinfo, every tag it
    # would show (errors, warnings, info, pedantic) listed
    lintian --info --display-level '>=pedantic' --tag-display-limit 0 \
        "$tmp"/hugeroom_*.changes >"$tmp/lintian.txt" 2>&1
    echo "lintian exit $?" >>"$tmp/lintian.txt"
    mkdir "$tmp/out"
    mv "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$tmp/lintian.txt" "$tmp/build.log" "$tmp/out/"
    touch "$tmp/out/.done"
    rm -rf "$out"
    mv "$tmp/out" "$out"
    # keep the 5 newest builds
    ls -1dt "$HUGEROOM_CACHE"/debs/*/ | tail -n +6 | xargs -r rm -rf
    trap - EXIT
    rm -rf "$tmp"
    printf '%s\n' "$out"
}

with_lock debs main
