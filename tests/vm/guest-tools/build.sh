#!/bin/bash
# Build the static guest tools (memfill, pressure, churn, speed, movepages) for the VM tests into
# $HUGEROOM_CACHE/guest-tools/<hash>/ and print that directory last.
# The busybox guest has no compiler, so hrvm puts these binaries into the
# test overlay.  Cached by the hash of the sources and this script.
#
# Usage: tests/vm/guest-tools/build.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${HUGEROOM_CACHE:-/var/cache/hugeroom}
TOOLS="memfill pressure churn speed movepages"

key=$(cd "$HERE" && cat build.sh $(for t in $TOOLS; do echo "$t.c"; done) | sha256sum | cut -c1-16)
out=$CACHE/guest-tools/$key
missing=
for t in $TOOLS; do [ -x "$out/$t" ] || missing=1; done
if [ -n "$missing" ]; then
    command -v gcc >/dev/null || { echo "build.sh: gcc not found" >&2; exit 1; }
    mkdir -p "$out.tmp.$$"
    for t in $TOOLS; do
        gcc -static -O2 -pthread -Wall -Wextra -Werror -o "$out.tmp.$$/$t" "$HERE/$t.c"
    done
    rm -rf "$out"
    mv "$out.tmp.$$" "$out"
    echo "build.sh: built $TOOLS into $out" >&2
fi
echo "$out"
