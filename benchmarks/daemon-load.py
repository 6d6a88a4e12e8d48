#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd under load: 1000 simulated guests reporting every second plus
200 API clients (wrk) for a while.

Two phases in the same run, on the same daemon: the guests alone (the
baseline), then the guests with the API clients. Prints for each: the
daemon's CPU (% of one core, and per guest), its RSS at start and end,
and for the loaded phase wrk's requests served, requests/s and latency
percentiles (p50, p99), with the ratio of the daemon's CPU to the
baseline's. RSS growth over the loaded phase beyond 16 MiB is flagged.

The API listens on a Unix socket only; wrk speaks TCP, so socat relays
127.0.0.1:PORT to it (the relay's cost is in the latencies, not in the
daemon's CPU). The mix (benchmarks/daemon-load.lua): a guest's detail,
the host, the reservations, the guest list and the metrics.

  HUGEROOM_BUILD=build benchmarks/daemon-load.py [--guests 1000]
      [--clients 200] [--seconds 600] [--baseline-seconds 30]
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
from simharness import SimSetup  # noqa: E402

RSS_GROWTH_BOUND_KIB = 16 << 10


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--guests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--baseline-seconds", type=int, default=30)
    args = ap.parse_args()

    s = SimSetup(status_interval_ms=1000, extra_config="host_backing=thp")
    relay = None
    try:
        s.start_guests(args.guests, 64, extra=["--candidates", "64"])
        s.wait_statuses(args.guests, timeout=300)
        time.sleep(3)
        pid = s.daemon.pid
        rss0 = s.rss_kib()
        base = phase_cpu(pid, args.baseline_seconds)
        rss1 = s.rss_kib()

        port = free_port()
        relay = subprocess.Popen(["socat", "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork,backlog=512"
                                  % port, "UNIX-CONNECT:" + s.api_sock],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        env = dict(os.environ, HR_LOAD_GUESTS=str(args.guests))
        hz = os.sysconf("SC_CLK_TCK")
        t0, c0 = time.monotonic(), cpu_ticks(pid)
        wrk = subprocess.run(["wrk", "-t2", "-c%d" % args.clients, "-d%ds" % args.seconds,
                              "--latency", "--timeout", "10s",
                              "-s", os.path.join(HERE, "daemon-load.lua"),
                              "http://127.0.0.1:%d" % port],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env)
        loaded = (cpu_ticks(pid) - c0) / hz / (time.monotonic() - t0)
        rss2 = s.rss_kib()
        w = parse_wrk(wrk.stdout)
        relay.terminate()
        relay.wait()
        relay = None

        print("hugeroomd load: %d simulated guests (64 GiB, status every 1 s), %d API clients "
              "for %d s (baseline %d s without clients)"
              % (args.guests, args.clients, args.seconds, args.baseline_seconds))
        print("%-28s %12s %12s" % ("", "baseline", "with API"))
        print("%-28s %11.1f%% %11.1f%%" % ("daemon CPU (one core)", base * 100, loaded * 100))
        print("%-28s %10.1f us %9.1f us" % ("CPU per guest per second", base / args.guests * 1e6,
                                            loaded / args.guests * 1e6))
        print("%-28s %9d KiB %9d KiB" % ("RSS at start", rss0, rss1))
        print("%-28s %9d KiB %9d KiB" % ("RSS at end", rss1, rss2))
        print("API: %s requests served, %.0f/s, p50 %.2f ms, p99 %.2f ms, non-2xx %d, "
              "socket errors %s"
              % (w.get("requests"), w.get("rps", 0), w.get("p50_ms", -1), w.get("p99_ms", -1),
                 w.get("non2xx", 0), w.get("socket_errors")))
        print("daemon CPU with the API vs without: %.2fx" % (loaded / base if base else 0))
        growth = rss2 - rss1
        print("RSS growth under load: %+d KiB (bound %d KiB): %s"
              % (growth, RSS_GROWTH_BOUND_KIB, "ok" if growth <= RSS_GROWTH_BOUND_KIB
                 else "OVER"))
        print("wrk:\n" + "\n".join("  " + l for l in wrk.stdout.splitlines()), flush=True)
        # the relay's last connections drain first
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
        if wrk.returncode != 0 or "requests" not in w:
            return 1
        return 0 if alive and connected == args.guests else 1
    finally:
        if relay is not None:
            relay.terminate()
            relay.wait()
        s.close()


if __name__ == "__main__":
    sys.exit(main())
