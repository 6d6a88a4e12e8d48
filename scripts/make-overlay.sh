#!/bin/bash
# Pack SRC_DIR into a gzip'd newc cpio archive meant to be concatenated after
# a base initramfs from scripts/build-initramfs.sh (the kernel unpacks the
# archives in order, later files win). Put a /test.sh in SRC_DIR to have the
# base /init run it.
#
# Usage: scripts/make-overlay.sh OUT.cpio.gz SRC_DIR
# Combine: cat base.cpio.gz OUT.cpio.gz > initrd.cpio.gz   (works with any QEMU)
# Prints OUT.cpio.gz's path on stdout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 2 ] || die "usage: $0 OUT.cpio.gz SRC_DIR"
OUT=$1; SRC=$2
[ -d "$SRC" ] || die "overlay source directory $SRC does not exist"
command -v cpio >/dev/null || die "cpio not found; run scripts/install-deps.sh"
if [ -f "$SRC/test.sh" ] && [ ! -x "$SRC/test.sh" ]; then
    warn "$SRC/test.sh is not executable; /init will run it with sh"
fi
mkdir -p "$(dirname "$OUT")"
(cd "$SRC" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
    gzip -9n >"$OUT.tmp.$$"
mv "$OUT.tmp.$$" "$OUT"
info "overlay $OUT from $SRC ($(find "$SRC" -mindepth 1 | wc -l) entries)"
printf '%s\n' "$OUT"
