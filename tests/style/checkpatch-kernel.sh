#!/usr/bin/env bash
# The guest driver keeps the kernel's style: checkpatch.pl --strict from
# Debian's linux-source-6.12 must report no errors and no warnings.
. "$(dirname "$0")/../../scripts/lib.sh"

cp_dir=$HUGEROOM_CACHE/checkpatch-kernel
if [ ! -x "$cp_dir/scripts/checkpatch.pl" ]; then
    need_root
    [ -z "$(pkgs_missing linux-source-6.12)" ] || apt_get install -y linux-source-6.12 >&2
    tarball=$(ls /usr/src/linux-source-6.12*.tar.* | head -n1)
    [ -n "$tarball" ] || die "linux-source-6.12 has no tarball in /usr/src"
    top=$(basename "$tarball"); top=${top%%.tar.*}
    rm -rf "$cp_dir.tmp"; mkdir -p "$cp_dir.tmp"
    tar -C "$cp_dir.tmp" -xf "$tarball" --strip-components=1 \
        "$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
        "$top/scripts/const_structs.checkpatch"
    rm -rf "$cp_dir"; mv "$cp_dir.tmp" "$cp_dir"
fi

cd "$HR_REPO"
files=$(ls guest-driver/*.c guest-driver/*.h 2>/dev/null || true)
[ -n "$files" ] || die "no driver sources in guest-driver/"
# One out-of-tree module serves 6.1 and 6.12, so it needs a few
# LINUX_VERSION_CODE tests; upstream code would not.  checkpatch flags each
# of them twice (LINUX_VERSION_CODE, and CONSTANT_COMPARISON for
# "LINUX_VERSION_CODE >= KERNEL_VERSION()"), so only those lines are let
# through; every other warning fails the test.
out=$(perl "$cp_dir/scripts/checkpatch.pl" --strict --no-tree --terse --show-types -f $files || true)
printf '%s\n' "$out"
bad=$(printf '%s\n' "$out" | grep -E '^[^ ]+:[0-9]+: (ERROR|WARNING|CHECK):' |
      grep -vE 'WARNING:(LINUX_VERSION_CODE|CONSTANT_COMPARISON):' || true)
if [ -n "$bad" ]; then
    printf '\ncheckpatch findings:\n%s\n' "$bad" >&2
    exit 1
fi
# Make sure the allowance stays narrow: each CONSTANT_COMPARISON must be on a
# LINUX_VERSION_CODE line.
cc=$(printf '%s\n' "$out" | grep -c 'CONSTANT_COMPARISON' || true)
lvc=$(printf '%s\n' "$out" | grep -c 'WARNING:LINUX_VERSION_CODE' || true)
[ "$cc" -le "$lvc" ] || die "CONSTANT_COMPARISON outside version checks"
echo "checkpatch --strict: clean (version checks only)"
