#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd at 10, 100 and 1000 simulated guests of 64 GiB (hr-simguest).

Prints, per guest count: the daemon's RSS and RSS growth per guest (target
under 64 KiB), and the planner's decision time over all guests' live
statuses (POST /v1/plan, median of 5; target under 50 ms at 1000 guests),
with the time the daemon spent building the planner's input apart.

  HUGEROOM_BUILD=build benchmarks/daemon-scale.py [--counts 10,100,1000]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "sim"))
from simharness import SimSetup  # noqa: E402


def run(n, mem_gib, candidates):
    s = SimSetup(status_interval_ms=1000, extra_config="host_backing=thp")
    try:
        time.sleep(0.3)
        base = s.rss_kib()
        s.start_guests(n, mem_gib, extra=["--candidates", str(candidates)])
        s.wait_statuses(n, timeout=180)
        time.sleep(2.5)  # a few status rounds so every buffer has been used
        rss = s.rss_kib()
        dec, inp = [], []
        free = s.api("GET", "/v1/host")["nodes"][0]["available_blocks"]
        for _ in range(5):
            # beyond the host's free blocks, so that every guest is weighed
            r = s.api("POST", "/v1/plan", {"bytes": (free + 2 * n) << 21, "node": 0},
                      expect=None)
            if r is None or "decision_us" not in r:
                break
            dec.append(r["decision_us"])
            inp.append(r["input_us"])
        return base, rss, dec, inp
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="10,100,1000")
    ap.add_argument("--mem-gib", type=int, default=64)
    ap.add_argument("--candidates", type=int, default=256)
    a = ap.parse_args()
    print("guests of %d GiB, %d candidates per status report" % (a.mem_gib, a.candidates))
    print("%7s %10s %10s %14s %14s %12s" % ("guests", "base KiB", "RSS KiB", "KiB/guest",
                                             "plan ms (med)", "input ms"))
    for n in [int(x) for x in a.counts.split(",")]:
        base, rss, dec, inp = run(n, a.mem_gib, a.candidates)
        per = (rss - base) / n
        plan = "%.2f" % (statistics.median(dec) / 1000) if dec else "n/a"
        inms = "%.2f" % (statistics.median(inp) / 1000) if inp else "n/a"
        print("%7d %10d %10d %14.1f %14s %12s" % (n, base, rss, per, plan, inms), flush=True)
    print("targets: < 64 KiB daemon memory per guest; < 50 ms for a plan over 1000 x 64 GiB")


if __name__ == "__main__":
    main()
