#!/usr/bin/env bash
# The host unit tests or the simulated-guest tests again, in a second
# build of hugeroom with AddressSanitizer and UndefinedBehaviorSanitizer
# (any error fails the run, leaks included). Registered as suite tests
# (tests/sanitize); by hand:
#   scripts/sanitize.sh BUILD_DIR unit|sim
. "$(dirname "$0")/lib.sh"

[ $# -eq 2 ] || die "usage: $0 BUILD_DIR unit|sim"
outer=$1
what=$2
build=$outer/sanitize

# one setup and build at a time: the unit and sim runs share the dir
setup() {
    if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$HR_REPO" -Db_sanitize=address,undefined -Db_lundef=false \
            -Dc_args=-fno-sanitize-recover=all -Dvm_tests=false -Dsanitize_tests=false \
            >"$outer/sanitize-setup.log" 2>&1 ||
            { cat "$outer/sanitize-setup.log" >&2; die "meson setup of $build failed"; }
    fi
    meson compile -C "$build" >"$outer/sanitize-build.log" 2>&1 ||
        { tail -50 "$outer/sanitize-build.log" >&2; die "the sanitized build failed"; }
}
(
    exec 9>"$outer/.sanitize.lock"
    flock 9
    setup
)

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# GLib keeps its type system and caches for the life of the process
export LSAN_OPTIONS=suppressions=$HR_REPO/tests/sanitize/lsan.supp:print_suppressions=0
case $what in
unit)
    exec meson test -C "$build" --suite unit --print-errorlogs --no-rebuild ;;
sim)
    # a tenth of the guests: the sanitizers make each one about 3x dearer
    HR_SCALE_GUESTS=100 exec meson test -C "$build" --suite scale --print-errorlogs \
        --no-rebuild ;;
*)
    die "unknown suite '$what' (unit or sim)" ;;
esac
