#!/usr/bin/env bash
# The whole test suite: unit tests, fuzzers (bounded), the QEMU qtest,
# style checks and the VM tests that boot real guests under the patched
# QEMU with the real daemon.  Prints "N passed, N failed, N skipped" last
# and exits non-zero on any failure.
. "$(dirname "$0")/lib.sh"
need_root

build=${HUGEROOM_BUILD:-$HR_REPO/build}
export HUGEROOM_BUILD=$build
bash "$HR_SCRIPTS/prepare.sh"

rc=0
meson test -C "$build" --print-errorlogs --num-processes 1 "$@" || rc=$?

/usr/bin/python3 - "$build/meson-logs/testlog.json" <<'PY' || rc=1
import json, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"):
        counts["passed"] += 1
    elif r == "SKIP":
        counts["skipped"] += 1
    else:
        counts["failed"] += 1
print("%(passed)d passed, %(failed)d failed, %(skipped)d skipped" % counts)
sys.exit(1 if counts["failed"] or not counts["passed"] else 0)
PY
exit $rc
