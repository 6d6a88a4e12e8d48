#!/bin/bash
# Build each libFuzzer target with clang (ASan + UBSan) and run it for a
# bounded time from generated seeds; any crash, leak or sanitizer report
# fails the test. A missing clang or fuzzer runtime fails too (scripts/install-deps.sh
# installs both): a fuzz target that cannot run must not look like a pass.
# Usage: run-fuzz.sh SRCDIR BUILDDIR GEN_SEEDS [TARGET...]
# HR_FUZZ_SECONDS sets the time per target (default 10); HR_BUILD_ROOT is the
# meson build dir (the config and API targets need its generated headers).
# HR_FUZZ_MERGE=DIR fuzzes nothing: it minimises DIR/TARGET (inputs that
# hugeroomd recorded, scripts/fuzz-corpus.sh) together with the checked-in
# corpus into tests/fuzz/corpus/TARGET (libFuzzer -merge=1), which it
# replaces.
set -euo pipefail

srcdir=$1
builddir=$2
gen_seeds=$3
shift 3
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(status event cmd chan guest-cmd device config api)
secs=${HR_FUZZ_SECONDS:-10}
CLANG=${CLANG:-clang}

if ! command -v "$CLANG" >/dev/null; then
    echo "FAIL: $CLANG not found (run scripts/install-deps.sh, or apt-get install clang libclang-rt-14-dev)" >&2
    exit 1
fi
mkdir -p "$builddir"
probe="$builddir/probe.c"
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long s) { (void)d; (void)s; return 0; }' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer "$probe" -o "$builddir/probe" 2>/dev/null; then
    echo "FAIL: $CLANG cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev)" >&2
    exit 1
fi

"$gen_seeds" "$builddir/seeds"
read -r -a glib_flags <<<"$(pkg-config --cflags --libs glib-2.0)"
read -r -a daemon_flags <<<"$(pkg-config --cflags --libs gio-2.0 gio-unix-2.0 json-glib-1.0 libsoup-3.0)"
# the daemon's layers' libraries as host/meson.build builds them (without libvirt),
# its source list read from there so that a new file cannot be missed;
# its generated hr-paths.h is in the build tree's host/
daemon_srcs=()
while read -r f; do
    daemon_srcs+=("$srcdir/host/$f")
done < <(awk '/^hr_[a-z]+_lib = static_library\(/ {on = 1; next} /^\)/ {on = 0}
    on && match($0, /^  \x27[a-z]+\/hr-[a-z-]+\.c\x27,$/) {print substr($0, 4, RLENGTH - 5)}' \
    "$srcdir/host/meson.build")
[ ${#daemon_srcs[@]} -gt 20 ] || {
    echo "run-fuzz.sh: read ${#daemon_srcs[@]} sources of the layers' libraries from host/meson.build" >&2
    exit 1
}
# every folder of host/ is an include dir, as host/meson.build has them
host_incs=()
for d in "$srcdir"/host/*/; do
    host_incs+=(-I "${d%/}")
done
generated="${HR_BUILD_ROOT:?set HR_BUILD_ROOT to the meson build dir (its host/hr-paths.h)}/host"
# the API's target runs the daemon over a copy of this host
export HR_FUZZ_HOST_FIXTURE=$srcdir/tests/unit/fixtures/proc/host-6.18.44

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
# The QEMU device's checks come from the patch series, as QEMU gets them:
# hw/virtio/virtio-hugeroom-check.[ch] as the whole series leaves them
# (the patch that adds them, then every later one that changes them, in
# order), the header as patch 0001 has it (tests/qemu/checkpatch.sh keeps
# that equal to scripts/qemu-header.sh), and what they use of QEMU from
# tests/fuzz/qemu-shim.
device_sources() {
    local out=$builddir/device tree=$builddir/device/tree f p
    rm -rf "$tree"
    mkdir -p "$out/standard-headers/linux" "$tree"
    for p in "$srcdir"/qemu-patches/*.patch; do
        grep -q '^+++ b/hw/virtio/virtio-hugeroom-check\.[ch]$' "$p" || continue
        # outside any repository (the build tree may be in one): plain patching
        (cd "$tree" && GIT_CEILING_DIRECTORIES=$out git apply --whitespace=nowarn \
            --include='hw/virtio/virtio-hugeroom-check.[ch]' "$p") ||
            { echo "FAIL: $(basename "$p") does not apply to the device's checks" >&2; return 1; }
    done
    for f in virtio-hugeroom-check.c virtio-hugeroom-check.h; do
        [ -f "$tree/hw/virtio/$f" ] ||
            { echo "FAIL: no patch in qemu-patches/ adds hw/virtio/$f" >&2; return 1; }
        cp "$tree/hw/virtio/$f" "$out/$f"
    done
    bash "$srcdir/scripts/qemu-header.sh" >"$out/standard-headers/linux/virtio_hugeroom.h"
}

sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=undefined)
for t in "${targets[@]}"; do
    bin="$builddir/fuzz-$t"
    case $t in
    device)
        device_sources
        # QEMU does not build with -Wsign-compare (ldl_le_p() is an int)
        "$CLANG" -g -O1 -std=gnu11 -Wall -Wextra -Wno-sign-compare -Werror \
            -fsanitize=fuzzer "${sanitize[@]}" \
            -I "$srcdir/tests/fuzz/qemu-shim" -I "$builddir/device" \
            "$builddir/device/virtio-hugeroom-check.c" "$srcdir/tests/fuzz/fuzz-$t.c" \
            "${glib_flags[@]}" -o "$bin"
        ;;
    guest-cmd)
        # The guest driver's own decoder, built alone against the kernel
        # shims (tests/fuzz/kshim) and instrumented for coverage.
        "$CLANG" -g -O1 -std=gnu11 -Wall -Wextra -Werror \
            -fsanitize=fuzzer-no-link "${sanitize[@]}" \
            -I "$srcdir/tests/fuzz/kshim" -I "$srcdir/protocol" \
            -c "$srcdir/guest-driver/hr_cmd.c" -o "$builddir/hr_cmd.o"
        "$CLANG" -g -O1 -std=gnu11 -Wall -Wextra -Werror \
            -fsanitize=fuzzer "${sanitize[@]}" \
            -I "$srcdir/protocol" -I "$srcdir/guest-driver" "$srcdir/protocol/hr-codec.c" \
            "$srcdir/tests/fuzz/fuzz-$t.c" "$builddir/hr_cmd.o" "${glib_flags[@]}" -o "$bin"
        ;;
    *)
        case $t in
        config) srcs=("$srcdir/host/base/hr-config.c" "$srcdir/host/base/hr-safefile.c" "$srcdir/protocol/hr-codec.c"); flags=(-I "$generated" "${daemon_flags[@]}") ;;
        api) srcs=("$srcdir/protocol/hr-codec.c" "${daemon_srcs[@]}")
             # g_autoptr variables that only own: clang calls them unused
             flags=(-I "$generated" -DPACKAGE_VERSION=\"fuzz\" -Wno-unused-variable "${daemon_flags[@]}") ;;
        *) srcs=("$srcdir/protocol/hr-codec.c"); flags=("${glib_flags[@]}") ;;
        esac
        "$CLANG" -g -O1 -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror \
            -fsanitize=fuzzer "${sanitize[@]}" \
            -I "$srcdir/protocol" "${host_incs[@]}" "${srcs[@]}" "$srcdir/tests/fuzz/fuzz-$t.c" \
            "${flags[@]}" -o "$bin"
        ;;
    esac
    if [ -n "${HR_FUZZ_MERGE:-}" ]; then
        merged="$builddir/merged-$t"
        rm -rf "$merged"
        mkdir -p "$merged" "$srcdir/tests/fuzz/corpus/$t" "$HR_FUZZ_MERGE/$t"
        if ! "$bin" -merge=1 -max_len=70000 "$merged" "$srcdir/tests/fuzz/corpus/$t" \
            "$HR_FUZZ_MERGE/$t" >"$builddir/merge-$t.log" 2>&1; then
            echo "FAIL: merging fuzz-$t's corpus; log $builddir/merge-$t.log"
            tail -20 "$builddir/merge-$t.log"
            status=1
            continue
        fi
        rm -rf "$srcdir/tests/fuzz/corpus/$t"
        mv "$merged" "$srcdir/tests/fuzz/corpus/$t"
        echo "fuzz-$t: $(ls "$HR_FUZZ_MERGE/$t" | wc -l) recorded inputs, corpus now $(ls "$srcdir/tests/fuzz/corpus/$t" | wc -l)"
        grep -E 'MERGE-OUTER: [0-9]+ new files' "$builddir/merge-$t.log" || true
        continue
    fi
    corpus="$builddir/corpus-$t"
    mkdir -p "$corpus"
    # the checked-in corpus (tests/fuzz/corpus) is read, never written
    inputs=("$corpus")
    [ -d "$builddir/seeds/$t" ] && inputs+=("$builddir/seeds/$t")
    # the device's checks read the guest's STATUS/event and the daemon's commands
    [ "$t" = device ] && inputs+=("$builddir/seeds/status" "$builddir/seeds/event" "$builddir/seeds/cmd")
    [ -d "$srcdir/tests/fuzz/corpus/$t" ] && inputs+=("$srcdir/tests/fuzz/corpus/$t")
    echo "fuzz-$t: ${secs}s"
    if ! "$bin" -max_total_time="$secs" -max_len=70000 -print_final_stats=1 \
        -artifact_prefix="$builddir/crash-$t-" "${inputs[@]}" \
        >"$builddir/fuzz-$t.log" 2>&1; then
        echo "FAIL: fuzz-$t crashed; log $builddir/fuzz-$t.log, input $builddir/crash-$t-*"
        tail -40 "$builddir/fuzz-$t.log"
        status=1
    else
        grep -E '^stat::number_of_executed_units' "$builddir/fuzz-$t.log" || true
    fi
done
exit $status
