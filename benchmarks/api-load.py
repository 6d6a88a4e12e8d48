#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd's API under load: wrk at the read routes, 200 connections.

The daemon serves HTTPS with a bearer token (api_listen, a test CA);
wrk runs from another process on loopback. First a baseline with no
guest reporting, then the same with 100 simulated guests reporting every
second: requests per second and p99 latency of the mixed read routes in
both (and their ratio), each with connections kept alive and again with
Connection: close on every request (a TLS handshake each: the daemon
before keep-alive), with the connections the daemon accepted
(hugeroom_api_connections_total); then each read route alone under the
100 guests.
Also the daemon's RSS before and after (growth), and the delivery latency
of the event stream (GET /v1/events) while the load runs: for each status
event, the time from the daemon's emission (its time_us) to a client's
read, and from a POST /v1/reservations to its first event.

  HUGEROOM_BUILD=build benchmarks/api-load.py [--seconds 10] [--guests 100]
"""

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "sim"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "api"))
from simharness import SimSetup, UnixHTTPConnection  # noqa: E402
from apiharness import READ_TOKEN, free_port, make_tls, tls_config  # noqa: E402

READ_ROUTES = ["/v1/guests", "/v1/guests/sim0", "/v1/guests/sim0/requests",
               "/v1/reservations", "/v1/host", "/metrics"]


def wrk(url, seconds, connections, paths, script_dir, close=False):
    """wrk's figures; @close: each request on a new connection (Connection: close), as
    the daemon answered before it kept connections alive."""
    script = os.path.join(script_dir, "paths.lua")
    with open(script, "w") as f:
        f.write("local paths = {%s}\nlocal i = 0\n"
                "request = function()\n  i = i + 1\n"
                "  return wrk.format(\"GET\", paths[(i %% #paths) + 1])\nend\n"
                % ", ".join('"%s"' % p for p in paths))
    r = subprocess.run(["wrk", "-t", "2", "-c", str(connections), "-d", "%ds" % seconds,
                        "--latency", "--timeout", "10s", "-s", script,
                        "-H", "Authorization: Bearer " + READ_TOKEN]
                       + (["-H", "Connection: close"] if close else []) + [url],
                       capture_output=True, text=True, check=True)
    out = r.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))

    def ms(label):
        m = re.search(r"\s%s\s+([\d.]+)(us|ms|s)\b" % re.escape(label), out)
        v = float(m.group(1))
        return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "p50": ms("50%"), "p99": ms("99%"),
            "requests": int(re.search(r"(\d+) requests in", out).group(1)),
            "non2xx": int(errors.group(1)) if errors else 0,
            "socket_errors": sock.group(1) if sock else "none"}


class EventReader(threading.Thread):
    """A /v1/events client on the Unix socket, timing every event's delivery."""

    def __init__(self, api_sock):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(api_sock)
        self.sock.sendall(b"GET /v1/events?types=status,reservation HTTP/1.1\r\n"
                          b"Host: x\r\n\r\n")
        self.status_lat_ms = []
        self.reservations = {}  # id -> receive time of its first event
        self.lock = threading.Lock()
        self.stop = False

    def run(self):
        buf = b""
        while not self.stop:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            now = time.time()
            buf += chunk
            while b"\n\n" in buf:
                block, buf = buf.split(b"\n\n", 1)
                for line in block.split(b"\n"):
                    if not line.startswith(b"data: "):
                        continue
                    d = json.loads(line[6:])
                    with self.lock:
                        if d["type"] == "status":
                            self.status_lat_ms.append((now * 1e6 - d["time_us"]) / 1000)
                        elif d["type"] == "reservation":
                            self.reservations.setdefault(d["reservation"]["id"], now)

    def close(self):
        self.stop = True
        self.sock.close()


def api_connections(s):
    """hugeroom_api_connections_total from the daemon's /metrics (None: not counted)."""
    conn = UnixHTTPConnection(s.api_sock)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    m = re.search(r"^hugeroom_api_connections_total (\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def counted(s, run):
    """run() (a wrk) with the connections the daemon accepted meanwhile."""
    c0 = api_connections(s)
    r = run()
    c1 = api_connections(s)
    # the read of c1 is one connection too
    r["connections"] = c1 - c0 - 1 if c0 is not None else None
    return r


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--guests", type=int, default=100)
    ap.add_argument("--connections", type=int, default=200)
    args = ap.parse_args()

    tls = tempfile.mkdtemp(prefix="hugeroom-bench-tls-")
    make_tls(tls)
    port = free_port()
    s = SimSetup(status_interval_ms=1000, extra_config="host_backing=thp\n" + tls_config(tls, port))
    url = "https://127.0.0.1:%d" % port
    try:
        # one guest for the routes that name one, reporting only when asked
        s.start_guests(1, 4, extra=["--interval-ms", "0"])
        s.wait_statuses(1)
        time.sleep(0.5)
        rss0 = s.rss_kib()
        base = counted(s, lambda: wrk(url, args.seconds, args.connections, READ_ROUTES, tls))
        rss_base = s.rss_kib()
        base_close = counted(s, lambda: wrk(url, args.seconds, args.connections, READ_ROUTES,
                                            tls, close=True))

        # let the daemon finish with wrk's connections: hr-simguest's 100
        # connects come at once and do not retry a full listen backlog
        time.sleep(3)
        s.api("GET", "/v1/guests")
        s.start_guests(args.guests, 4, prefix="load")
        s.wait_statuses(args.guests + 1, timeout=120)
        reader = EventReader(s.api_sock)
        reader.start()
        rss1 = s.rss_kib()
        result = {"loaded": None, "reserve_ms": []}

        def reserve_while_loaded():
            # reservations as an orchestrator makes them, during the load
            time.sleep(1)
            for _ in range(5):
                t0 = time.time()
                r = s.api("POST", "/v1/reservations", {"size": "2M"}, expect=201)
                while r["id"] not in reader.reservations and time.time() - t0 < 10:
                    time.sleep(0.001)
                with reader.lock:
                    got = reader.reservations.get(r["id"])
                if got is not None:
                    result["reserve_ms"].append((got - t0) * 1000)
                s.api("DELETE", "/v1/reservations/" + r["id"])
                time.sleep(0.5)
        t = threading.Thread(target=reserve_while_loaded)
        t.start()
        loaded = counted(s, lambda: wrk(url, args.seconds, args.connections, READ_ROUTES, tls))
        t.join()
        loaded_close = counted(s, lambda: wrk(url, args.seconds, args.connections, READ_ROUTES,
                                              tls, close=True))
        rss_runs = [s.rss_kib()]
        per_route = {p: wrk(url, max(3, args.seconds // 2), args.connections, [p], tls)
                     for p in READ_ROUTES}
        rss_runs.append(s.rss_kib())
        # the same load twice more: growth that goes on is a leak, a plateau is the heap
        for _ in range(2):
            wrk(url, args.seconds, args.connections, READ_ROUTES, tls)
            rss_runs.append(s.rss_kib())
        time.sleep(1)
        rss2 = s.rss_kib()
        with reader.lock:
            lat = list(reader.status_lat_ms)
        reader.close()

        print("hugeroomd API load: wrk -c %d, %d s per run, HTTPS with a bearer token, "
              "read routes %s" % (args.connections, args.seconds, " ".join(READ_ROUTES)))
        print("%-46s %8s %9s %9s %8s %8s %9s" % ("run", "req/s", "p50 ms", "p99 ms", "non-2xx",
                                                 "conns", "req/conn"))
        for name, r in [("baseline: 1 guest, no reports", base),
                        ("baseline, every request Connection: close", base_close),
                        ("%d guests reporting every 1 s" % args.guests, loaded),
                        ("%d guests, every request Connection: close" % args.guests,
                         loaded_close)]:
            conns = r["connections"]
            print("%-46s %8.0f %9.2f %9.2f %8d %8s %9s"
                  % (name, r["rps"], r["p50"], r["p99"], r["non2xx"],
                     conns if conns is not None else "n/a",
                     "%.1f" % (r["requests"] / conns) if conns else "n/a"))
        print("ratio loaded/baseline: req/s %.2fx, p99 %.2fx"
              % (loaded["rps"] / base["rps"], loaded["p99"] / base["p99"]))
        print("ratio keep-alive/Connection: close: baseline req/s %.2fx, p99 %.2fx; "
              "loaded req/s %.2fx, p99 %.2fx"
              % (base["rps"] / base_close["rps"], base["p99"] / base_close["p99"],
                 loaded["rps"] / loaded_close["rps"], loaded["p99"] / loaded_close["p99"]))
        print("each read route alone, %d guests reporting:" % args.guests)
        for p, r in per_route.items():
            print("  %-32s %10.0f %9.2f %9.2f %8d" % (p, r["rps"], r["p50"], r["p99"],
                                                       r["non2xx"]))
        print("daemon RSS: %d KiB at start, %d KiB after the baseline, %d KiB with %d guests, "
              "%d KiB after all load (growth under load %+d KiB)"
              % (rss0, rss_base, rss1, args.guests, rss2, rss2 - rss1))
        print("daemon RSS after each loaded run (mixed and mixed with close, per route, mixed, "
              "mixed): %s KiB"
              % ", ".join(str(r) for r in rss_runs))
        print("event stream (status events while wrk ran): %d events, delivery p50 %.2f ms, "
              "p99 %.2f ms, max %.2f ms"
              % (len(lat), pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan")))
        if result["reserve_ms"]:
            print("POST /v1/reservations to its first event under load: median %.2f ms, "
                  "max %.2f ms (%d)" % (statistics.median(result["reserve_ms"]),
                                        max(result["reserve_ms"]), len(result["reserve_ms"])))
    finally:
        s.close()
        subprocess.run(["rm", "-rf", tls])


if __name__ == "__main__":
    main()
