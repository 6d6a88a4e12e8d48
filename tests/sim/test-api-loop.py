#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""Reading the host does not stall the daemon's main loop. TAP output.

The daemon reads a host whose /proc/zoneinfo lists the pagesets of 32768
CPUs (the real 2-node Debian 6.12 fixture, its two CPUs copied), so that
one read of /proc and /sys costs a few hundred milliseconds, far above the
scheduling noise of a loaded test machine, while every answer stays as
small as the fixture's. Clients in other processes ask for GET /v1/host and
/metrics, which need a fresh read every 250 ms, while a sampler asks for a
cheap route (GET /v1/guests) every few milliseconds on a fixed schedule,
its latency counted from the scheduled time, so a stall shows in every
sample that fell into it. The run lasts until the daemon has read the
host MIN_READS times (a sanitizer's build on a loaded machine reads for
seconds), and the reads must cover at least half of it: the host was read
again as soon as the last read went stale. Then two checks, each of which
a read on the main loop fails:

* the longest CPU time the main thread spent in one turn of its loop, as
  the daemon measures it (hugeroom_main_loop_stall_cpu_max_seconds), stays
  below half of the CPU time of one host read (at most the daemon's CPU
  time over the run, per read, wherever the read runs); a read on the
  main loop makes that turn the read's own cost. CPU time, not wall-clock time: on a loaded
  machine a sanitizer's build serves the sampler's cheap route (GET
  /v1/guests) slower than it asks, so its latencies, printed with the
  read's wall-clock time (hugeroom_host_read_seconds), grow whatever the
  loop does;
* the main thread's share of the daemon's CPU time over the run stays
  below half: the reads' time belongs to another thread.
"""

import os
import re
import shutil
import statistics
import sys
import multiprocessing
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import SimSetup, http_get as get  # noqa: E402

# a large host has some 2500 pagesets; 50 times that costs a read
# hundreds of milliseconds without making any answer larger
CPUS = 32768
RUN_S = 5.0
MAX_RUN_S = 60.0
# distinct host reads the run waits for, so that a stall would show
MIN_READS = 5
# a read is fresh this long (HR_API_HOST_MAX_AGE_US, host/api/hr-api.c)
FRESH_S = 0.25
SAMPLE_EVERY_S = 0.004
# each hammer asks this often: enough to need a new read as soon as the
# 250 ms old one expires, without making the main loop busy by itself
HAMMER_EVERY_S = 0.02
# the main loop's longest turn against one host read, both in CPU time
MAX_RATIO = 0.5
# the main thread's share of the daemon's CPU time while the host is read
MAX_MAIN_SHARE = 0.5

tap = Tap()
check = tap.ok

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "unit", "fixtures", "proc", "debian-6.12-2node")


def big_host(root):
    """The fixture with the per-CPU pagesets of CPUS CPUs in each zone."""
    shutil.copytree(FIXTURE, root)
    zoneinfo = os.path.join(root, "proc", "zoneinfo")
    with open(zoneinfo) as f:
        lines = f.read().splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        # after a zone's last CPU, before node_unreclaimable: more CPUs
        if line.startswith("  vm stats threshold:") and \
                i + 1 < len(lines) and not lines[i + 1].startswith("    cpu:"):
            for cpu in range(2, CPUS):
                out.append("    cpu: %d\n              count: 568\n              high:  12053\n"
                           "              batch: 31\n%s" % (cpu, line))
    with open(zoneinfo, "w") as f:
        f.writelines(out)


def metric(body, name):
    m = re.search(r"(?m)^%s (\S+)$" % name, body)
    return float(m.group(1)) if m else None


def cpu_ticks(path):
    """utime + stime of a /proc stat file (after the command's parentheses)"""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def hammer(sock, path, stop, results, seen):
    read_s, answers, errors = [], 0, []
    while not stop.is_set():
        status, body = get(sock, path)
        if status != 200:
            errors.append("%s: %d" % (path, status))
            break
        answers += 1
        if path == "/metrics":
            m = re.search(r"(?m)^hugeroom_host_read_seconds (\S+)$", body)
            if m:
                if float(m.group(1)) not in read_s:
                    with seen.get_lock():
                        seen.value += 1
                read_s.append(float(m.group(1)))
        time.sleep(HAMMER_EVERY_S)
    results.put((read_s, answers if path != "/metrics" else 0, errors))


def main():
    s = None
    try:
        tmp_root = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                "hugeroom-loop-%d" % os.getpid())
        big_host(tmp_root)
        s = SimSetup(extra_config="host_root=%s" % tmp_root)
        status, body = get(s.api_sock, "/v1/host")
        check(status == 200 and body.count('"node"') == 2,
              "GET /v1/host reads the host of %d CPUs" % CPUS)
        # long enough for some reads at the pace of this build (a sanitizer's
        # is several times slower)
        _, body = get(s.api_sock, "/metrics")
        m = re.search(r"(?m)^hugeroom_host_read_seconds (\S+)$", body)
        first_read = float(m.group(1)) if m else 0.0
        run_s = min(MAX_RUN_S, max(RUN_S, 8 * (first_read + 0.25)))

        turn_before = metric(body, "hugeroom_main_loop_stall_cpu_max_seconds")
        pid = s.daemon.pid
        main_before = cpu_ticks("/proc/%d/task/%d/stat" % (pid, pid))
        all_before = cpu_ticks("/proc/%d/stat" % pid)
        stop = multiprocessing.Event()
        results = multiprocessing.Queue()
        seen = multiprocessing.Value("i", 0)
        # other processes: the sampler shares no interpreter lock with them
        hammers = [multiprocessing.Process(target=hammer, args=(s.api_sock, p, stop, results, seen))
                   for p in ("/v1/host", "/v1/host", "/metrics")]
        for h in hammers:
            h.start()
        latencies = []
        t0 = time.monotonic()
        k = 0
        while time.monotonic() - t0 < MAX_RUN_S and \
                (time.monotonic() - t0 < run_s or seen.value < MIN_READS):
            due = t0 + k * SAMPLE_EVERY_S
            k += 1
            now = time.monotonic()
            if now < due:
                time.sleep(due - now)
            status, _ = get(s.api_sock, "/v1/guests")
            latencies.append(time.monotonic() - due)
            if status != 200:
                errors.append("/v1/guests: %d" % status)
        run_s = time.monotonic() - t0
        stop.set()
        main_ticks = cpu_ticks("/proc/%d/task/%d/stat" % (pid, pid)) - main_before
        all_ticks = cpu_ticks("/proc/%d/stat" % pid) - all_before
        _, body = get(s.api_sock, "/metrics")
        turn_cpu = metric(body, "hugeroom_main_loop_stall_cpu_max_seconds")
        read_s, host_answers, errors = [], 0, []
        for h in hammers:
            r, n, e = results.get(timeout=60)
            read_s += r
            host_answers += n
            errors += e
        for h in hammers:
            h.join()
        check(not errors, "every request answered 200 (%s)" % ", ".join(errors[:3]))
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)]
        p50 = latencies[len(latencies) // 2]
        p95 = latencies[int(len(latencies) * 0.95)]
        read = statistics.median(read_s) if read_s else 0.0
        reads = host_answers / run_s
        print("# host read %.1f ms (median of %d), GET /v1/host %.0f/s; GET /v1/guests "
              "p50 %.2f ms p95 %.2f ms p99 %.2f ms over %d samples"
              % (read * 1e3, len(read_s), reads, p50 * 1e3, p95 * 1e3, p99 * 1e3,
                 len(latencies)),
              flush=True)
        tck = os.sysconf("SC_CLK_TCK")
        read_cpu = all_ticks / tck / max(1, len(set(read_s)))
        print("# daemon CPU %.2f s, of it the main thread %.2f s; one read's CPU %.1f ms; "
              "the main loop's longest turn %.2f ms CPU (%.2f ms before the run)"
              % (all_ticks / tck, main_ticks / tck, read_cpu * 1e3,
                 (turn_cpu or 0) * 1e3, (turn_before or 0) * 1e3), flush=True)
        # enough reads that a stalled loop would show in the samples (each
        # read's duration differs in its microseconds), one after the other:
        # the time the host was being read or fresh covers half the run
        read_n = len(set(read_s))
        covered = sum(set(read_s)) + FRESH_S * read_n
        check(read > 0 and read_n >= MIN_READS and host_answers >= read_n
              and covered >= 0.5 * run_s,
              "the host was read again and again during the run (%d reads, read or fresh "
              "%.1f s of %.1f s)" % (read_n, covered, run_s))
        check(turn_cpu is not None and read_cpu > 0 and turn_cpu < MAX_RATIO * read_cpu,
              "the main loop's longest turn took %.2f ms CPU, below %.1f of a host read's "
              "%.1f ms" % ((turn_cpu or 0) * 1e3, MAX_RATIO, read_cpu * 1e3))
        check(all_ticks > 0 and main_ticks < MAX_MAIN_SHARE * all_ticks,
              "the main thread used %d of the daemon's %d CPU ticks (below %.1f)"
              % (main_ticks, all_ticks, MAX_MAIN_SHARE))
    finally:
        if s is not None:
            s.close()
        shutil.rmtree(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                   "hugeroom-loop-%d" % os.getpid()), ignore_errors=True)
    return tap.done()


sys.exit(main())
