#!/bin/bash
# Regenerate the fuzz targets' checked-in corpus (tests/fuzz/corpus) from
# the messages of a real VM run: runs the VM test TEST (default
# vm-holds-6.12) with HUGEROOM_RECORD_DIR set, so that hugeroomd writes
# every frame a device sends it and every one it sends (host/hr-record.h),
# then minimises what it recorded together with the corpus already there
# (libFuzzer -merge=1, tests/fuzz/run-fuzz.sh with HR_FUZZ_MERGE).
# Usage: scripts/fuzz-corpus.sh [TEST]   ($HUGEROOM_BUILD: the meson build dir)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

repo=$(cd "$(dirname "$0")/.." && pwd)
build=${HUGEROOM_BUILD:-$repo/build}
test=${1:-vm-holds-6.12}
rec=$(mktemp -d "${TMPDIR:-/tmp}/hr-record.XXXXXX")
trap 'rm -rf "$rec"' EXIT

info "running $test, recording hugeroomd's frames in $rec"
HUGEROOM_RECORD_DIR=$rec meson test -C "$build" --print-errorlogs "$test"
for d in "$rec"/*; do info "recorded $(ls "$d" | wc -l) inputs for fuzz-$(basename "$d")"; done
HR_FUZZ_MERGE=$rec HR_BUILD_ROOT=$build bash "$repo/tests/fuzz/run-fuzz.sh" "$repo" \
    "$build/fuzz-corpus" "$build/tests/fuzz/gen-seeds" status event cmd chan guest-cmd device
