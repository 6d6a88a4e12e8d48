#!/usr/bin/env bash
# The main job on built-in defaults: a small version of the headline
# benchmark (benchmarks/vm-start.py --demo).  Two small donor guests and a
# dense helper own the host's memory; a new preallocated, THP-advised VM
# larger than what is free starts after each of: nothing, host
# compact_memory, a 4 KiB balloon inflate, free page reporting, and
# hugeroomctl prepare (with hugeroomd and the driver).  Prints the
# side-by-side table and the issue's targets; everything it started is
# stopped at the end, also on errors or Ctrl-C.  Extra arguments go to
# vm-start.py (--cases nothing,hugeroom, --help).
. "$(dirname "$0")/lib.sh"
need_root
bash "$HR_SCRIPTS/prepare.sh"
export HUGEROOM_BUILD=${HUGEROOM_BUILD:-$HR_REPO/build}
out=${TMPDIR:-/tmp}/hugeroom-demo
mkdir -p "$out"
exec /usr/bin/python3 "$HR_REPO/benchmarks/vm-start.py" --demo \
    --json "$out/vm-start.json" --png "$out/vm-start.png" "$@"
