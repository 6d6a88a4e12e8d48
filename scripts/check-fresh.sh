#!/usr/bin/env bash
# Does a fresh Debian 12 machine have everything the project's scripts use?
#
# Debootstraps a minimal bookworm root (minbase: less than any real Debian 12
# machine has), clones this repository's HEAD into it and runs there, with a
# cache of its own, everything the README's two commands set up that can run
# in a root: install-deps, the kernel fetches (Debian 12's 6.12 and 6.1, and
# the newest kernel in its sid root), the module build (user and test
# builds) for every kernel the suite uses, the meson build, and the unit and
# fuzz tests.  A program, header or library that a step needed and the root
# did not have is named: the step fails, or its log says so
# ("command not found"), and this script fails.  Nothing of the host's
# packages or cache is used; the root's apt has the host's own sources and
# apt settings (a machine of this kind), nothing more.
#
# Run it whenever the setup scripts, the build or the dependencies change.
# It takes 15-30 minutes (mostly downloads and the sid root).
#
# Usage: scripts/check-fresh.sh [--rev REV] [--with-qemu] [--keep]
#   --rev REV    check that commit instead of HEAD (uncommitted changes are
#                never checked: the root gets a clone)
#   --with-qemu  also build the patched QEMU in the root (adds 5-9 minutes)
#   --keep       leave the root in place afterwards (default: removed when
#                the check passes, kept for inspection when it fails)
# The pristine base root is cached in $HUGEROOM_CACHE/fresh-base (made once,
# about 2 minutes); each run works in $HUGEROOM_CACHE/fresh-run.
. "$(dirname "$0")/lib.sh"
need_root

rev=HEAD
with_qemu=0
keep=0
while [ $# -gt 0 ]; do
    case $1 in
    --rev) rev=${2:?--rev needs a commit}; shift 2 ;;
    --with-qemu) with_qemu=1; shift ;;
    --keep) keep=1; shift ;;
    *) die "unknown option $1 (see the usage at the top of $0)" ;;
    esac
done

BASE=$HUGEROOM_CACHE/fresh-base
RUN=$HUGEROOM_CACHE/fresh-run
LOGS=$HUGEROOM_CACHE/fresh-logs
SRC=/etc/apt/sources.list.d/debian.sources

# The base root: bookworm minbase from the host's own mirror, with the
# host's debian.sources and apt settings copied in, as a new machine of this
# kind has them.  Keyed by the sources, so another mirror makes it again.
make_base() {
    local stanza key
    [ -f "$SRC" ] || die "$SRC not found: expected a Debian 12 machine with deb822 sources"
    stanza=$(_hr_derive_stanza "$SRC" deb bookworm) ||
        die "no stanza with 'Suites: bookworm' in $SRC"
    key=$( (echo v1; cat "$SRC"; cat /etc/apt/apt.conf.d/* 2>/dev/null) | sha256sum | cut -c1-16)
    if [ -f "$BASE/.done" ] && [ "$(cat "$BASE/.done")" = "$key" ]; then
        return 0
    fi
    local t0=$SECONDS
    info "debootstrapping a minimal bookworm root into $BASE (once)"
    hr_debootstrap "$BASE.tmp" bookworm "$stanza"
    cp "$SRC" "$BASE.tmp/etc/apt/sources.list.d/debian.sources"
    cp -a /etc/apt/apt.conf.d/. "$BASE.tmp/etc/apt/apt.conf.d/"
    # A machine that was just made has no package lists yet.
    rm -rf "$BASE.tmp/var/lib/apt/lists/"*
    printf '%s\n' "$key" >"$BASE.tmp/.done"
    rm -rf "$BASE"
    mv "$BASE.tmp" "$BASE"
    info "base root made in $((SECONDS - t0)) s"
}

# run_in ROOT CMD...: CMD in ROOT as a login of root would run it, with
# /proc, /sys, /dev and a fresh /tmp, in a mount namespace of its own.
run_in() {
    local root=$1
    shift
    unshare --mount --propagation private -- /bin/sh -ec '
        root=$1; shift
        # a mount point, so that the scripts'"'"' own unshare --propagation
        # (the sid root'"'"'s chroot) can change it inside
        mount --bind "$root" "$root"
        mount -t proc proc "$root/proc"
        mount --rbind /sys "$root/sys"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
        exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LC_ALL=C.UTF-8 TERM=dumb "$@"
    ' check-fresh "$root" "$@"
}

# What a log says was missing: commands, headers, libraries, pkg-config
# modules, Python modules, files that a test tried to execute.
missing_in() {
    grep -ohE \
        -e '[0-9]+: [^ :]+: not found$' \
        -e ': [^ :]+: command not found$' \
        -e "fatal error: [^ :]+: No such file or directory" \
        -e 'cannot find -l[^ ]+' \
        -e "Dependency \"?[^ \"]+\"? not found" \
        -e "Program '?[^ ']+'? not found" \
        -e "No module named '?[^ ']+'?" \
        -e "FileNotFoundError: .*No such file or directory: '[^']+'" \
        "$@" 2>/dev/null | sort -u || true
}

STEPS=()
step() { STEPS+=("$1|$2"); }

main() {
    local t0=$SECONDS
    make_base
    rm -rf "$RUN" "$LOGS"
    mkdir -p "$LOGS"
    info "copying the base root to $RUN"
    cp -a "$BASE" "$RUN"
    rm -f "$RUN/.done"
    local commit
    commit=$(git -C "$HR_REPO" rev-parse --verify "$rev^{commit}") ||
        die "$rev is not a commit of $HR_REPO"
    git -C "$HR_REPO" diff --quiet HEAD 2>/dev/null ||
        warn "the work tree has uncommitted changes: they are not checked (the root gets a clone of $commit)"
    git clone -q --no-hardlinks "$HR_REPO" "$RUN/root/hugeroom"
    git -C "$RUN/root/hugeroom" checkout -q "$commit"
    info "checking $(git -C "$HR_REPO" log --oneline -1 "$commit")"

    step install-deps 'scripts/install-deps.sh'
    step fetch-kernels 'scripts/fetch-kernels.sh'
    step fetch-newest-kernel 'scripts/fetch-newest-kernel.sh'
    step build-modules 'for k in $(awk "{print \$1}" /var/cache/hugeroom/kernels/list) $(awk "{print \$1}" /var/cache/hugeroom/kernels/newest); do
            scripts/build-module.sh "$k" && scripts/build-module.sh --test "$k" || exit 1; done'
    [ "$with_qemu" = 0 ] || step build-qemu 'scripts/build-qemu.sh'
    step meson-build 'meson setup build && meson compile -C build'
    step unit-fuzz-tests 'meson test -C build --print-errorlogs --num-processes 1 --suite unit --suite fuzz'

    local s name cmd rc=0 failed='' t missing
    for s in "${STEPS[@]}"; do
        name=${s%%|*} cmd=${s#*|}
        t=$SECONDS
        info "step $name"
        if ! run_in "$RUN" /bin/bash -c "cd /root/hugeroom && $cmd" >"$LOGS/$name.log" 2>&1; then
            failed=$name
            rc=1
        fi
        missing=$(missing_in "$LOGS/$name.log")
        if [ -n "$missing" ]; then
            printf '[check-fresh] step %s: the fresh root lacked:\n%s\n' "$name" "$(sed 's/^/    /' <<<"$missing")" >&2
            rc=1
            failed=${failed:-$name}
        fi
        info "step $name: $([ "$failed" = "$name" ] && echo FAILED || echo ok) in $((SECONDS - t)) s (log $LOGS/$name.log)"
        if [ "$failed" = "$name" ]; then
            tail -n 30 "$LOGS/$name.log" >&2
            break
        fi
    done
    if [ "$rc" = 0 ]; then
        info "fresh root OK: every step ran with what the scripts installed, in $((SECONDS - t0)) s"
        [ "$keep" = 1 ] || rm -rf "$RUN"
    else
        info "fresh root FAILED at step $failed after $((SECONDS - t0)) s; the root is kept in $RUN, logs in $LOGS"
    fi
    return "$rc"
}

with_lock check-fresh main
