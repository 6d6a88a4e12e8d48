#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd under load: 1000 simulated guests reporting every second plus
200 API clients (wrk) for a while.

Three phases in the same run, on the same daemon: the guests alone (the
baseline), then two loaded phases of equal length with the API clients.
Prints for each: the daemon's CPU (% of one core, and per guest), its RSS
and malloc's heap (in use, and free but kept: hugeroom_heap_*_bytes from
/metrics) at the phase's end, and for the loaded phases wrk's requests
served, requests/s, p50 and p99 and the connections the daemon accepted
(the memory is read 3 s after wrk ends, once its last answers are gone).
Then the clients leave and the figures are read 35 s later (the daemon
trims malloc's free memory every 30 s).
The first loaded phase sets malloc's high-water mark; growth is what the
second adds (its end minus the first's): over 4 MiB of RSS, or any heap in
use that keeps rising, is flagged as growth.

The API listens on a Unix socket only; wrk speaks TCP, so socat relays
127.0.0.1:PORT to it (the relay's cost is in the latencies, not in the
daemon's CPU). The mix (benchmarks/daemon-load.lua): a guest's detail,
the host, the reservations, the guest list and the metrics.

  HUGEROOM_BUILD=build benchmarks/daemon-load.py [--guests 1000]
      [--clients 200] [--seconds 300] [--baseline-seconds 30]
      [--malloc-arena-max N]
  # leaks: the sanitized build (scripts/sanitize.sh), LeakSanitizer at exit
  HUGEROOM_BUILD=build/sanitize HUGEROOM_KEEP=1 benchmarks/daemon-load.py ...
  # the heap's make-up: HUGEROOM_DAEMON_WRAPPER="valgrind --tool=massif ..."
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "sim"))
from simharness import SimSetup, UnixHTTPConnection  # noqa: E402

RSS_GROWTH_BOUND_KIB = 4 << 10  # what the second loaded phase may add


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def phase_cpu(pid, seconds):
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(pid)
    time.sleep(seconds)
    return (cpu_ticks(pid) - c0) / hz / (time.monotonic() - t0)


def parse_wrk(text):
    out = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", text)
    if m:
        out["requests"] = int(m.group(1))
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if m:
        out["rps"] = float(m.group(1))
    for pct in ("50", "99"):
        m = re.search(r"^\s+%s(?:\.000)?%%\s+([\d.]+)(us|ms|s)" % pct, text, re.M)
        if m:
            v = float(m.group(1))
            out["p" + pct + "_ms"] = v / 1000 if m.group(2) == "us" else \
                v * 1000 if m.group(2) == "s" else v
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: (.*)", text)
    out["socket_errors"] = m.group(1).strip() if m else "none"
    return out


def daemon_metrics(s):
    """The daemon's own figures from /metrics: RSS, heap in use and free, connections."""
    conn = UnixHTTPConnection(s.api_sock, timeout=120)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for key, name in (("rss", "process_resident_memory_bytes"),
                      ("heap", "hugeroom_heap_in_use_bytes"),
                      ("heap_free", "hugeroom_heap_free_bytes"),
                      ("mmapped", "hugeroom_heap_mmapped_bytes"),
                      ("conns", "hugeroom_api_connections_total")):
        m = re.search(r"^%s (\d+)$" % name, text, re.M)
        out[key] = int(m.group(1)) if m else None
    return out


def run_wrk(port, args, pid):
    """One loaded phase: wrk's figures, the daemon's CPU meanwhile, its memory after."""
    env = dict(os.environ, HR_LOAD_GUESTS=str(args.guests))
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(pid)
    r = subprocess.run(["wrk", "-t2", "-c%d" % args.clients, "-d%ds" % args.seconds,
                        "--latency", "--timeout", "10s",
                        "-s", os.path.join(HERE, "daemon-load.lua"),
                        "http://127.0.0.1:%d" % port],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    w = parse_wrk(r.stdout)
    w["cpu"] = (cpu_ticks(pid) - c0) / hz / (time.monotonic() - t0)
    w["returncode"] = r.returncode
    w["text"] = r.stdout
    return w


def mib(v):
    return "%.1f" % (v / 1048576) if v is not None else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--guests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=300, help="each loaded phase")
    ap.add_argument("--baseline-seconds", type=int, default=30)
    ap.add_argument("--malloc-arena-max", type=int, default=None)
    args = ap.parse_args()

    if args.malloc_arena_max is not None:
        os.environ["MALLOC_ARENA_MAX"] = str(args.malloc_arena_max)
    s = SimSetup(status_interval_ms=1000, extra_config="host_backing=thp")
    relay = None
    try:
        s.start_guests(args.guests, 64, extra=["--candidates", "64"])
        s.wait_statuses(args.guests, timeout=300)
        time.sleep(3)
        pid = s.daemon.pid
        m_start = daemon_metrics(s)
        base = phase_cpu(pid, args.baseline_seconds)
        m_base = daemon_metrics(s)

        port = free_port()
        relay = subprocess.Popen(["socat", "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork,backlog=512"
                                  % port, "UNIX-CONNECT:" + s.api_sock],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        phases = []
        for _ in range(2):
            w = run_wrk(port, args, pid)
            # the answers to wrk's last requests are let go of first
            time.sleep(3)
            w["mem"] = daemon_metrics(s)
            phases.append(w)
        relay.terminate()
        relay.wait()
        relay = None
        # the daemon gives malloc's free memory back every 30 s (host/api/hr-api.c)
        time.sleep(35)
        m_after = daemon_metrics(s)

        print("hugeroomd load: %d simulated guests (64 GiB, status every 1 s), %d API clients, "
              "two loaded phases of %d s (baseline %d s without clients)%s"
              % (args.guests, args.clients, args.seconds, args.baseline_seconds,
                 ", MALLOC_ARENA_MAX=%d" % args.malloc_arena_max
                 if args.malloc_arena_max is not None else ""))
        print("%-28s %12s %12s %12s" % ("", "baseline", "loaded 1", "loaded 2"))
        cpus = [base] + [w["cpu"] for w in phases]
        print("%-28s" % "daemon CPU (one core)" + "".join("%11.1f%%" % (c * 100) for c in cpus))
        print("%-28s" % "CPU per guest per second"
              + "".join("%9.1f us" % (c / args.guests * 1e6) for c in cpus))
        mems = [m_base] + [w["mem"] for w in phases]
        for key, label in (("rss", "RSS at end, MiB"), ("heap", "heap in use at end, MiB"),
                           ("heap_free", "heap free (kept), MiB"),
                           ("mmapped", "mmapped allocations, MiB")):
            print("%-28s" % label + "".join("%12s" % mib(m[key]) for m in mems))
        print("%-28s %12s" % ("RSS at start, MiB", mib(m_start["rss"])))
        for i, w in enumerate(phases, 1):
            c0 = (m_base if i == 1 else phases[0]["mem"])["conns"]
            c1 = w["mem"]["conns"]
            print("API, loaded %d: %s requests served, %.0f/s, p50 %.2f ms, p99 %.2f ms, "
                  "non-2xx %d, socket errors %s, connections accepted %s"
                  % (i, w.get("requests"), w.get("rps", 0), w.get("p50_ms", -1),
                     w.get("p99_ms", -1), w.get("non2xx", 0), w.get("socket_errors"),
                     c1 - c0 - 1 if c0 is not None and c1 is not None else "n/a"))
        print("daemon CPU loaded/baseline: %.2fx, %.2fx"
              % tuple(w["cpu"] / base if base else 0 for w in phases))
        p1, p2 = phases[0]["mem"], phases[1]["mem"]
        growth = p2["rss"] - p1["rss"]
        heap_growth = p2["heap"] - p1["heap"]
        print("high-water (loaded 1 end - baseline end): RSS %+.1f MiB, heap in use %+.1f MiB"
              % ((p1["rss"] - m_base["rss"]) / 1048576, (p1["heap"] - m_base["heap"]) / 1048576))
        print("growth (loaded 2 end - loaded 1 end): RSS %+.1f MiB (bound %d MiB), heap in use "
              "%+.1f MiB: %s"
              % (growth / 1048576, RSS_GROWTH_BOUND_KIB >> 10, heap_growth / 1048576,
                 "ok" if growth <= RSS_GROWTH_BOUND_KIB << 10 else "OVER"))
        print("35 s after the clients left: RSS %s MiB, heap in use %s MiB, free %s MiB, "
              "mmapped %s MiB" % (mib(m_after["rss"]), mib(m_after["heap"]),
                                  mib(m_after["heap_free"]), mib(m_after["mmapped"])))
        for i, w in enumerate(phases, 1):
            print("wrk, loaded %d:\n" % i + "\n".join("  " + l for l in w["text"].splitlines()),
                  flush=True)
        connected, deadline = None, time.time() + 60
        while connected is None and time.time() < deadline:
            try:
                guests = s.api("GET", "/v1/guests")["guests"]
                connected = sum(1 for g in guests if g["connected"])
            except OSError:
                time.sleep(1)
        alive = s.daemon.poll() is None
        print("after: daemon %s, %s of %d guests connected"
              % ("running" if alive else "DEAD", connected, args.guests))
        if any(w["returncode"] != 0 or "requests" not in w for w in phases):
            return 1
        return 0 if alive and connected == args.guests else 1
    finally:
        if relay is not None:
            relay.terminate()
            relay.wait()
        s.close()
        # a sanitized build's leak check at exit fails the exit status
        print("daemon exit status %s" % s.daemon.returncode)
        if os.environ.get("HUGEROOM_KEEP") is not None:
            print("daemon log (and tool output): %s/daemon.log" % s.dir)


if __name__ == "__main__":
    sys.exit(main())
