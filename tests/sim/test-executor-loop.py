#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The executor's work does not stall the daemon's main loop. TAP output.

Six simulated guests of 8 GiB each (hr-simguest, one real process whose
/proc/PID/pagemap the daemon reads) are donors whose host backing the
executor scans (host_backing=scan) before it plans a reservation: 4096
pagemap reads per guest, milliseconds each, as many as there are guests
in one decision. The host's memory state is a copy of a real 2-node
Debian 6.12 /proc and /sys (host_root), so that the planner's host
compaction writes to no real file.

While the reservation runs, a sampler in another process asks for a cheap
route (GET /v1/guests) every few milliseconds on a fixed schedule, its
latency counted from the scheduled time. Two checks: the daemon
never scans a host THP map on its main loop (hr_thpmap_scan_files()
logs a critical when its thread owns the main context), and
hugeroom_main_loop_stall_cpu_max_seconds, the longest CPU time the main
thread spent in one turn of its loop, stays below MAX_TURN_CPU_S. With
the scans on the main loop (hr_thpmap_scan_async() calling its thread
function in place) the longest turn took 141-144 ms of CPU, 24 ms a
guest; without, 1.7-2.2 ms alone and 5.2 ms under the suite's load
(where a 5 ms bound failed in CI). CPU time, not wall-clock time: a
2-core machine shared with running VMs preempts the daemon for tens of
milliseconds whatever it does (hugeroom_main_loop_stall_seconds, the
wall-clock histogram, and the sampler's latencies are printed).
"""

import multiprocessing
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import SimSetup, http_get as get, sanitized_build  # noqa: E402

GUESTS = 6
GUEST_GIB = 8
SAMPLE_EVERY_S = 0.004
# one turn's CPU time: below one guest's scan (24 ms) and three times the
# longest ordinary turn under load; AddressSanitizer makes every turn, the
# scans included, about 3x dearer (5.14 ms for the longest ordinary one)
MAX_TURN_CPU_S = 0.015 * (3 if sanitized_build() else 1)

tap = Tap()
check = tap.ok

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "unit", "fixtures", "proc", "debian-6.12-2node")


def metric(body, name):
    m = re.search(r"(?m)^%s (\S+)$" % re.escape(name), body)
    return float(m.group(1)) if m else None


def stall_over(body, bound):
    """turns of the main loop longer than bound (wall clock), from the histogram"""
    total = metric(body, "hugeroom_main_loop_stall_seconds_count")
    m = re.search(r'(?m)^hugeroom_main_loop_stall_seconds_bucket\{le="%s"\} (\S+)$' % bound, body)
    return total - float(m.group(1)) if total is not None and m else None


def sampler(sock, stop, results):
    latencies, errors = [], []
    t0 = time.monotonic()
    k = 0
    while not stop.is_set():
        due = t0 + k * SAMPLE_EVERY_S
        k += 1
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        status, _ = get(sock, "/v1/guests")
        latencies.append(time.monotonic() - due)
        if status != 200:
            errors.append(status)
    results.put((latencies, errors))


def main():
    s = None
    root = os.path.join(os.environ.get("TMPDIR", "/tmp"), "hugeroom-exec-loop-%d" % os.getpid())
    try:
        shutil.copytree(FIXTURE, root)
        s = SimSetup(extra_config="host_root=%s\nhost_backing=scan" % root)
        s.start_guests(GUESTS, GUEST_GIB)
        s.wait_statuses(GUESTS)
        _, before = get(s.api_sock, "/metrics")
        cpu_before = metric(before, "hugeroom_main_loop_stall_cpu_max_seconds")
        check(cpu_before is not None,
              "/metrics has hugeroom_main_loop_stall_cpu_max_seconds (%s)" % cpu_before)

        stop = multiprocessing.Event()
        results = multiprocessing.Queue()
        sp = multiprocessing.Process(target=sampler, args=(s.api_sock, stop, results))
        sp.start()
        time.sleep(0.3)
        # far more than the fixture has free: every donor is considered
        r = s.api("POST", "/v1/reservations",
                  {"size": "64G", "node": 0, "deadline_s": 20, "requester": "loop"}, expect=201)
        deadline = time.monotonic() + 60
        while True:
            r = s.api("GET", "/v1/reservations/%s" % r["id"])
            if r["state"] not in ("created", "in_progress") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        time.sleep(0.3)
        stop.set()
        latencies, errors = results.get(timeout=60)
        sp.join()
        _, after = get(s.api_sock, "/metrics")

        reason = r.get("reason") or ""
        scanned = reason.count("no free memory inside host THP-backed blocks")
        check(r["state"] != "in_progress" and scanned == GUESTS,
              "the reservation ended (%s) after the executor read the host backing of all %d "
              "guests (%d named): %s" % (r["state"], GUESTS, scanned, reason[:300]))
        check(not errors, "every GET /v1/guests answered 200 (%s)" % errors[:3])
        latencies.sort()
        n = len(latencies)
        cpu_after = metric(after, "hugeroom_main_loop_stall_cpu_max_seconds")
        print("# GET /v1/guests during the executor's work: p50 %.2f ms p95 %.2f ms "
              "max %.2f ms over %d samples"
              % (latencies[n // 2] * 1e3, latencies[int(n * 0.95)] * 1e3,
                 latencies[-1] * 1e3, n), flush=True)
        print("# main loop: turns over 5 ms wall %s, over 25 ms %s of %s; longest turn's CPU "
              "%.2f ms before the reservation, %.2f ms after"
              % (stall_over(after, "0.005"), stall_over(after, "0.025"),
                 metric(after, "hugeroom_main_loop_stall_seconds_count"),
                 cpu_before * 1e3, cpu_after * 1e3), flush=True)
        check(cpu_after is not None and cpu_after < MAX_TURN_CPU_S,
              "no turn of the main loop took %.0f ms of CPU or more (longest %.2f ms)"
              % (MAX_TURN_CPU_S * 1e3, cpu_after * 1e3))
        with open(os.path.join(s.dir, "daemon.log")) as f:
            log = f.read()
        on_loop = [l for l in log.splitlines() if "scanned on the main loop" in l]
        check(not on_loop, "no host THP map was scanned on the main loop", "\n".join(on_loop[:3]))
    finally:
        if s is not None:
            s.close()
        shutil.rmtree(root, ignore_errors=True)
    return tap.done()


sys.exit(main())
