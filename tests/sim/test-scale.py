#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Scale: 1000 simulated guests of 64 GiB connect to hugeroomd at once.

The daemon must list every one of them with a status (zones, candidates)
and make a plan for free 2 MiB blocks over all of them (POST /v1/plan, the
planner on the live guest statuses, nothing executed). TAP output.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simharness import SimSetup  # noqa: E402

GUESTS = int(os.environ.get("HR_SCALE_GUESTS", "1000"))
MEM_GIB = 64
results = []


def check(ok, what):
    results.append(ok)
    print("%s %d - %s" % ("ok" if ok else "not ok", len(results), what), flush=True)
    return ok


def main():
    print("1..8")
    s = SimSetup(status_interval_ms=2000, extra_config="host_backing=thp")
    try:
        t0 = time.time()
        s.start_guests(GUESTS, MEM_GIB, extra=["--candidates", "256"])
        guests = s.wait_statuses(GUESTS, timeout=120)
        t1 = time.time()
        names = {g["name"] for g in guests if g["connected"]}
        check(len(names) == GUESTS and all("sim%d" % i in names for i in range(GUESTS)),
              "all %d guests connected and listed (%.1f s)" % (GUESTS, t1 - t0))
        total = MEM_GIB << 18
        check(all(g["mem_total_pages"] == total and 0 < g["mem_free_pages"] < total
                  for g in guests),
              "every guest reports %d GiB with some memory free" % MEM_GIB)
        detail = s.api("GET", "/v1/guests/sim%d" % (GUESTS - 1))
        st = detail.get("status") or {}
        check(len(st.get("zones", [])) == 2 and len(st.get("candidates", [])) == 256,
              "the last guest's status has 2 zones and 256 candidates")
        print("# daemon RSS %d KiB with %d guests" % (s.rss_kib(), GUESTS))
        # more than the host has free: the plan must reach into the guests
        host = s.api("GET", "/v1/host")
        free = host["nodes"][0]["available_blocks"]
        want = free + 2 * GUESTS
        print("# host node 0: %d free 2 MiB blocks above the high watermark" % free)
        plan = s.api("POST", "/v1/plan", {"bytes": want << 21, "node": 0})
        donate = [st for st in plan["plan"]["steps"] if st["kind"] == "donate"]
        print("# plan: %s; %d guests considered, decision %d us, input %d us"
              % (plan["plan"]["summary"], plan["plan"]["guests_considered"],
                 plan["decision_us"], plan["input_us"]))
        check(plan["plan"]["guests_considered"] == GUESTS and len(donate) > 0
              and plan["plan"]["complete"],
              "a complete plan over all %d guests, %d donating" % (GUESTS, len(donate)))
        # and run it: the executor asks many guests at once; simulated
        # guests free no host memory, so it must stop asking by itself and
        # end partial, not hang
        t0 = time.time()
        r = s.api("POST", "/v1/reservations",
                  {"bytes": want << 21, "node": 0, "deadline_s": 60, "requester": "scale"},
                  expect=201)
        while time.time() - t0 < 90:
            r = s.api("GET", "/v1/reservations/" + r["id"])
            if r["state"] not in ("created", "in-progress"):
                break
            time.sleep(0.5)
        donors = {st["guest"] for st in r["steps"] if st["kind"] == "donate"}
        held = sum(st["blocks_held"] for st in r["steps"] if st["kind"] == "donate")
        print("# reservation %s: %s in %.1f s, %d donations from %d guests, %d blocks held: %s"
              % (r["id"], r["state"], time.time() - t0, len(r["steps"]) - 1, len(donors), held,
                 r["reason"]))
        check(r["state"] == "ready" and r["partial"] and held >= 2 * GUESTS and len(donors) > 1,
              "the reservation ran donations over several guests and ended partial")
        s.api("POST", "/v1/reservations/%s/release" % r["id"])
        deadline = time.time() + 60
        while time.time() < deadline:
            guests = s.api("GET", "/v1/guests")["guests"]
            if sum(g["held_blocks"] for g in guests) == 0:
                break
            time.sleep(0.5)
        check(sum(g["held_blocks"] for g in guests) == 0,
              "releasing it gave every held block back (%d still held)"
              % sum(g["held_blocks"] for g in guests))
        check(s.daemon.poll() is None and all(p.poll() is None for p in s.sims),
              "daemon and simulated guests still running")
    finally:
        s.close()
    # under ASan (scripts/sanitize.sh) a leak or an error ends it non-zero
    rc = s.daemon.returncode
    check(rc == 0, "hugeroomd exited cleanly on SIGTERM (status %s)%s"
          % (rc, "" if rc == 0 else ": " + s.daemon_log()[-1500:].replace("\n", "\n# ")))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
