#!/usr/bin/env bash
# Everything the demo and the test suite need, built or fetched once and
# cached: host packages, the patched QEMU, the Debian guest kernels with
# their headers, and hugeroom itself (meson build dir $HUGEROOM_BUILD).
. "$(dirname "$0")/lib.sh"
need_root

build=${HUGEROOM_BUILD:-$HR_REPO/build}
bash "$HR_SCRIPTS/install-deps.sh"
bash "$HR_SCRIPTS/fetch-kernels.sh" >/dev/null
bash "$HR_SCRIPTS/fetch-promtool.sh" >/dev/null
bash "$HR_SCRIPTS/build-qemu.sh" >/dev/null

if [ -f "$build/build.ninja" ]; then
    meson setup --reconfigure "$build" "$HR_REPO" >/dev/null
else
    meson setup "$build" "$HR_REPO" >/dev/null
fi
meson compile -C "$build" >/dev/null || meson compile -C "$build"
info "ready: build dir $build, cache $HUGEROOM_CACHE"
