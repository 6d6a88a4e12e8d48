#!/usr/bin/env bash
# Every step of the QEMU series builds, passes QEMU's checkpatch and passes
# the qtests it has by then (issue 10: reviewable steps, each of which
# builds and passes its tests).
#
# For each prefix 0001..N of qemu-patches/*.patch: check out the pristine
# QEMU source with exactly those patches applied, build qemu-system-x86_64
# (and, once the qtests exist, tests/qtest/qos-test) incrementally in one
# build dir kept across steps and runs, run checkpatch on patch N, and run
# the virtio-hugeroom qtests that exist at that step, insisting on their
# exact number (QTESTS below) and that none is skipped.
#
# Usage: tests/qemu/series-steps.sh [FIRST]
#   FIRST: number of the first step to check (default 1, every step); the
#   steps before it are neither built nor tested.
# Prints one line per step and exits non-zero if any step fails.
# Cache: $HUGEROOM_CACHE/qemu-steps/src    git clone of the pristine source;
#            each step is a commit on top of tag "base", checked out with
#            git checkout, which rewrites only the files that differ from
#            the step before (so ninja rebuilds only what they touch)
#        $HUGEROOM_CACHE/qemu-steps/build  the build dir (first run: a full
#            QEMU build, about 30 min on 2 busy cores; later runs reuse it)
#        $HUGEROOM_CACHE/qemu-steps/logs/  build and qtest output per step
. "$(dirname "$0")/../../scripts/lib.sh"
. "$(dirname "$0")/common.sh"
. "$HR_SCRIPTS/build-qemu.sh"   # CONFIGURE_FLAGS, flags_hash, patches, link_firmware

# How many virtio-hugeroom qtests run after each patch, counting those of
# the patches before it.  A patch that is not listed fails the step: name
# the tests a new or renamed patch brings here and in qemu-patches/README.md.
declare -A QTESTS=(
    [0001-linux-headers-add-virtio_hugeroom.h.patch]=0
    [0002-virtio-add-the-virtio-hugeroom-device-ID.patch]=0
    [0003-hw-virtio-add-the-virtio-hugeroom-message-checks.patch]=0
    [0004-hw-virtio-add-virtio-hugeroom-device.patch]=2
    [0005-qapi-add-query-hugeroom.patch]=7
    [0006-hw-virtio-virtio-hugeroom-hold-and-return-blocks.patch]=19
    [0007-hw-virtio-virtio-hugeroom-connect-to-the-daemon.patch]=20
    [0008-hw-virtio-virtio-hugeroom-relay-guest-messages-to-th.patch]=24
    [0009-hw-virtio-virtio-hugeroom-relay-the-daemon-s-command.patch]=27
    [0010-hw-virtio-virtio-hugeroom-migrate-the-held-set.patch]=32
    [0011-hw-virtio-virtio-hugeroom-send-the-guest-RAM-layout-.patch]=35
    [0012-hw-virtio-add-a-RAM-discard-blocker-for-the-virtio-h.patch]=36
    [0013-hw-virtio-virtio-hugeroom-look-blocks-up-in-a-map-of.patch]=37
    [0014-hw-virtio-virtio-hugeroom-hold-the-migration-gate-at.patch]=38
    [0015-hw-virtio-virtio-hugeroom-relay-RETURNED-for-held-bl.patch]=39
    [0016-hw-virtio-virtio-hugeroom-back-returned-blocks-of-sh.patch]=40
    [0017-hw-virtio-virtio-hugeroom-let-the-eventq-wait-for-a-.patch]=41
    [0018-hw-virtio-virtio-hugeroom-the-daemon-channel-in-a-fi.patch]=41
    [0019-hw-virtio-virtio-hugeroom-EVACUATE-in-the-background.patch]=42
)

S=$HUGEROOM_CACHE/qemu-steps
QOS=tests/qtest/qos-test

s() { git -C "$S/src" -c user.name=hugeroom -c user.email=hugeroom@localhost "$@"; }

# The private source clone and its configured build dir.
setup() {
    if ! [ -d "$S/src/.git" ]; then
        info "cloning the pristine QEMU source into $S/src"
        rm -rf "$S/src" "$S/build"
        mkdir -p "$S"
        with_lock qemu git clone -q --no-checkout "$WORK/src" "$S/src"
        s checkout -q --detach base
    fi
    if ! [ -f "$S/build/build.ninja" ] || [ "$(cat "$S/.flags" 2>/dev/null)" != "$(flags_hash)" ]; then
        rm -rf "$S/build" "$S/.flags"
        mkdir -p "$S/build" "$S/logs"
        info "configuring $S/build (its first build is all of QEMU)"
        (cd "$S/build" && ../src/configure "${CONFIGURE_FLAGS[@]}") >"$S/logs/configure.log" 2>&1 ||
            { tail -30 "$S/logs/configure.log" >&2; die "QEMU configure failed; log $S/logs/configure.log"; }
        flags_hash >"$S/.flags"
    fi
    link_firmware "$S/build"
    mkdir -p "$S/logs"
}

# One commit per prefix of the series, made without touching the work tree;
# prints their ids in order.
step_commits() {
    local idx=$S/.index parent tree p
    parent=$(s rev-parse base)
    GIT_INDEX_FILE=$idx s read-tree base
    while read -r p; do
        [ -n "$p" ] || continue
        GIT_INDEX_FILE=$idx s apply --cached --whitespace=nowarn "$p" ||
            die "$(basename "$p") does not apply to QEMU $QEMU_UPSTREAM with the patches before it"
        tree=$(GIT_INDEX_FILE=$idx s write-tree)
        parent=$(s commit-tree "$tree" -p "$parent" -m "$(basename "$p")")
        echo "$parent"
    done < <(patches)
    rm -f "$idx"
}

# step PATCH COMMIT: build, checkpatch and qtest one step; prints its line.
step() {
    local patch=$1 commit=$2 name expected targets t0 built cp qt rc=0 ok=0
    name=$(basename "$patch")
    expected=${QTESTS[$name]:-}
    s checkout -q -f --detach "$commit"
    targets=qemu-system-x86_64
    [ "${expected:-0}" = 0 ] || targets="$targets $QOS"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    if nice ninja -C "$S/build" -j"$JOBS" $targets >"$S/logs/$name.build.log" 2>&1; then
        built="built $(($(date +%s) - t0))s"
        ok=1
    else
        built="BUILD FAILED (log $S/logs/$name.build.log)"
        rc=1
    fi
    if qemu_checkpatch "$S/src" "$patch" >"$S/logs/$name.checkpatch.log" 2>&1; then
        cp="checkpatch ok"
    else
        cp="CHECKPATCH FAILED (log $S/logs/$name.checkpatch.log)"
        rc=1
    fi
    if [ -z "$expected" ]; then
        qt="QTESTS UNKNOWN: no count for $name in QTESTS of $0"
        rc=1
    elif [ "$expected" = 0 ]; then
        qt="qtests 0/0"
    elif [ "$ok" = 1 ] && hugeroom_qtests "$S/build/qemu-system-x86_64" "$S/build/$QOS" \
            "$expected" >"$S/logs/$name.qtest.log" 2>&1; then
        qt="qtests $(grep -c '^ok ' "$S/logs/$name.qtest.log")/$expected"
    else
        qt="QTESTS FAILED $(grep -c '^ok ' "$S/logs/$name.qtest.log" 2>/dev/null || echo 0)/$expected (log $S/logs/$name.qtest.log)"
        rc=1
    fi
    printf '%s  %s  %s  %s\n' "$name" "$built" "$cp" "$qt"
    return $rc
}

main() {
    local first=${1:-1} t0 rc=0 i=0 patch
    local -a commits plist
    t0=$(date +%s)
    need_root
    bash "$HR_SCRIPTS/build-qemu.sh" >/dev/null   # deps, source download, $WORK/src
    setup
    mapfile -t plist < <(patches)
    [ "${#plist[@]}" -gt 0 ] || die "no patches in $PATCH_DIR"
    [ "${#plist[@]}" = "${#QTESTS[@]}" ] ||
        die "${#plist[@]} patches in $PATCH_DIR but QTESTS in $0 names ${#QTESTS[@]}"
    mapfile -t commits < <(step_commits)
    for patch in "${plist[@]}"; do
        i=$((i + 1))
        [ "$i" -ge "$first" ] || continue
        step "$patch" "${commits[$((i - 1))]}" || rc=1
    done
    echo "series-steps: steps $first-${#plist[@]} of ${#plist[@]} in $(($(date +%s) - t0)) s"
    [ "$rc" = 0 ] || die "a step of the series failed (logs in $S/logs)"
}

with_lock qemu-steps main "$@"
