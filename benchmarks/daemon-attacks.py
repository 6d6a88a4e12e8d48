#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd against the attacks of issue 18: what a hostile local process
or guest peer does to the API's latency, the daemon's fds and RSS, and the
reservations it keeps.

One daemon (simulated guests, tests/sim/hr-simguest), one phase per attack,
in the same run; before each phase and during it a probe asks for
GET /v1/host on the Unix socket, one connection per request, as an
orchestrator would, and the phase reports its p50 and p99 against the
idle figures measured first.  After each phase: the daemon's open fds, its
RSS, and whether the reservations made at the start are all still there.

The attacks:
  hello-churn   peers that each send HELLO under a new name and leave
                (--churn guests, 50 per peer process)
  status-flood  guests reporting every millisecond (--flood guests)
  idle-unix     idle connections to the API socket from a uid other than
                root (nobody), which the socket's mode or the daemon refuses
                (--idle connections)
  idle-tls      TCP connections to the TLS listener that never send a
                ClientHello (--tls-idle connections)
  resync-1m     a guest that connects holding --resync blocks (1 M: 2 TiB
                of guest RAM), listed in its resync, none of them any
                reservation's: the daemon takes the set, reconciles it
                and gives the blocks back as orphans; reported with the
                longest turn of the main loop (CPU) it caused

Targets (issue 18 item 11): API p99 < 50 ms under each, fds and RSS
bounded, no reservation lost.  Prints a table; exits 1 when the daemon died
or a reservation was lost, and with --check when an attack left fds open
(the latencies are not judged: the machines here are shared and noisy).
The suite runs it as `daemon-attacks` with --quick --check.

  HUGEROOM_BUILD=build benchmarks/daemon-attacks.py [--quick] [--check]
"""

import argparse
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "sim"))
from simharness import SimSetup, UnixHTTPConnection  # noqa: E402

P99_TARGET_MS = 50.0
# fds an attack may leave open after it ended (the guests it connected
# that stay: none of the attacks leaves any)
FD_GROWTH_BOUND = 32


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Probe(threading.Thread):
    """GET /v1/host in a loop, a new connection each time, until stopped."""

    def __init__(self, sock, pause=0.02):
        super().__init__(daemon=True)
        self.sock, self.pause = sock, pause
        self.times, self.errors = [], 0
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            t0 = time.monotonic()
            try:
                conn = UnixHTTPConnection(self.sock, timeout=30)
                conn.request("GET", "/v1/host")
                r = conn.getresponse()
                r.read()
                conn.close()
                if r.status != 200:
                    self.errors += 1
            except OSError:
                self.errors += 1
            self.times.append((time.monotonic() - t0) * 1000)
            self.halt.wait(self.pause)

    def stop(self):
        self.halt.set()
        self.join()
        t = sorted(self.times)
        if not t:
            return {"n": 0, "p50": None, "p99": None, "max": None, "errors": self.errors}
        return {"n": len(t), "p50": t[len(t) // 2], "p99": t[min(len(t) - 1, len(t) * 99 // 100)],
                "max": t[-1], "errors": self.errors}


def reservations(s):
    return {r["id"]: r["state"] for r in s.api("GET", "/v1/reservations")["reservations"]}


def hello_churn(s, args):
    """--churn distinct guest names, 50 per peer process, each process gone after 2 s."""
    per = 50
    for k in range(max(1, args.churn // per)):
        p = subprocess.Popen([s.sim_bin, "--guests", str(per), "--mem-gib", "1",
                              "--socket", s.vm_sock, "--prefix", "churn%d-" % k,
                              "--seed", str(k + 2), "--duration", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p.wait(60)
    return "%d HELLOs under new names" % (max(1, args.churn // per) * per)


def status_flood(s, args):
    p = subprocess.Popen([s.sim_bin, "--guests", str(args.flood), "--mem-gib", "1",
                          "--socket", s.vm_sock, "--prefix", "flood", "--seed", "7",
                          "--interval-ms", "1", "--duration", str(args.seconds)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p.wait(args.seconds + 60)
    return "%d guests reporting every 1 ms for %d s" % (args.flood, args.seconds)


def stall_cpu_max_ms(s):
    """hugeroom_main_loop_stall_cpu_max_seconds: the longest turn since the start, in ms"""
    conn = UnixHTTPConnection(s.api_sock, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith("hugeroom_main_loop_stall_cpu_max_seconds "):
            return float(line.split()[1]) * 1000
    return None


def resync_1m(s, args):
    """A guest whose resync lists --resync held blocks; until the daemon has them all."""
    gib = args.resync * 2 // 1024 + 4
    before = stall_cpu_max_ms(s)
    t0 = time.time()
    p = subprocess.Popen([s.sim_bin, "--guests", "1", "--mem-gib", str(gib),
                          "--socket", s.vm_sock, "--prefix", "big", "--seed", "9",
                          "--resync-blocks", str(args.resync),
                          "--duration", str(args.seconds + 120)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    took, listed = None, None
    try:
        while time.time() - t0 < 120 and p.poll() is None:
            guests = s.api("GET", "/v1/guests", expect=None)
            big = [g for g in (guests or {}).get("guests", []) if g.get("name") == "big0"]
            if big and big[0].get("held_blocks", 0) >= args.resync * 9 // 10:
                took = time.time() - t0
                break
            # a small set can be taken and given back between two looks
            listed = listed or (time.time() if big else None)
            if listed is not None and time.time() - listed > 5:
                break
            time.sleep(0.2)
        # the reconcile, and the orphans' RETURNs it sends, while the probe runs
        time.sleep(args.seconds)
    finally:
        p.terminate()
        p.wait(60)
    after = stall_cpu_max_ms(s)
    return "%d blocks resynced%s; longest main-loop turn %s ms CPU (%s before)" % (
        args.resync, " in %.1f s" % took if took is not None else
        " (its blocks given back before a look saw them)" if listed is not None else
        ", NOT seen in 120 s",
        "%.0f" % after if after is not None else "n/a",
        "%.0f" % before if before is not None else "n/a")


def idle_unix(s, args):
    """Idle connections from uid nobody, held for --seconds."""
    code = r"""
import os, socket, sys, time
os.setgroups([]); os.setgid(65534); os.setuid(65534)
held, refused = [], 0
for _ in range(int(sys.argv[2])):
    c = socket.socket(socket.AF_UNIX)
    try:
        c.connect(sys.argv[1]); held.append(c)
    except OSError:
        refused += 1; c.close()
print(len(held), refused, flush=True)
time.sleep(float(sys.argv[3]))
"""
    p = subprocess.Popen([sys.executable, "-c", code, s.api_sock, str(args.idle),
                          str(args.seconds)], stdout=subprocess.PIPE, text=True)
    held, refused = p.stdout.readline().split()
    p.wait(args.seconds + 60)
    return "uid nobody: %s connected and held idle, %s refused at connect" % (held, refused)


def idle_tls(s, args):
    conns = []
    for _ in range(args.tls_idle):
        c = socket.create_connection(("127.0.0.1", s.tls_port), timeout=5)
        conns.append(c)
    time.sleep(args.seconds)
    # was the listener itself still serving a real client meanwhile?
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t0 = time.monotonic()
    ok = "no"
    try:
        with socket.create_connection(("127.0.0.1", s.tls_port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"GET /v1/host HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                            b"Connection: close\r\n\r\n" % s.token.encode())
                ok = tls.recv(64).split(b"\r\n")[0].decode(errors="replace")
    except OSError as e:
        ok = "failed: %s" % e
    dt = (time.monotonic() - t0) * 1000
    for c in conns:
        c.close()
    return "%d idle TCP connections, no ClientHello; a TLS client meanwhile: %s in %.0f ms" % (
        args.tls_idle, ok, dt)


def tls_config(d):
    """A self-signed certificate, its key and a tokens file in @d; config lines."""
    cert, key, tokens = (os.path.join(d, n) for n in ("cert.pem", "key.pem", "tokens"))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-keyout", key, "-out", cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    token = "bench-" + os.urandom(12).hex()
    with open(tokens, "w") as f:
        f.write("admin %s\n" % token)
    for p in (cert, key, tokens):
        os.chmod(p, 0o600)
    port = free_port()
    return port, token, ("api_listen=127.0.0.1:%d\napi_tls_cert=%s\napi_tls_key=%s\n"
                         "api_tokens=%s\n" % (port, cert, key, tokens))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, for the suite")
    ap.add_argument("--check", action="store_true",
                    help="also exit 1 when an attack left fds open (the suite's test; "
                    "latencies are never judged)")
    ap.add_argument("--churn", type=int, default=1000)
    ap.add_argument("--flood", type=int, default=100)
    ap.add_argument("--idle", type=int, default=1250)
    ap.add_argument("--tls-idle", type=int, default=100)
    ap.add_argument("--resync", type=int, default=1 << 20, help="blocks of resync-1m")
    ap.add_argument("--only", help="the attacks to run, comma-separated (default all)")
    ap.add_argument("--seconds", type=int, default=10, help="each timed attack")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.quick:
        args.churn, args.flood, args.idle, args.tls_idle, args.seconds = 200, 20, 200, 20, 3
        args.resync = 20000

    tmp = tempfile.mkdtemp(prefix="hr-attacks-")
    port, token, tls = tls_config(tmp)
    s = SimSetup(status_interval_ms=1000, extra_config="host_backing=thp\n" + tls)
    s.tls_port, s.token = port, token
    rows, lost, died = [], False, False
    try:
        s.start_guests(20, 4)
        s.wait_statuses(20)
        for size in ("2M", "4M", "6M"):
            s.api("POST", "/v1/reservations", {"size": size, "requester": "bench"},
                  expect=None)
        time.sleep(1)
        kept = reservations(s)
        pid = s.daemon.pid
        probe = Probe(s.api_sock)
        probe.start()
        time.sleep(args.seconds)
        idle = probe.stop()
        rows.append(("idle", "20 guests, no attack", idle, fds(pid), rss_kib(pid), True))
        for name, fn in (("hello-churn", hello_churn), ("status-flood", status_flood),
                         ("idle-unix", idle_unix), ("idle-tls", idle_tls),
                         ("resync-1m", resync_1m)):
            if args.only and name not in args.only.split(","):
                continue
            probe = Probe(s.api_sock)
            probe.start()
            what = fn(s, args)
            lat = probe.stop()
            # what is left once the attack ended: the daemon's sweep (1 s)
            # lets go of what its gone peers held
            time.sleep(2.5)
            if s.daemon.poll() is not None:
                rows.append((name, what + "; hugeroomd DIED", lat, 0, 0, False))
                died = True
                break
            now = reservations(s)
            intact = all(now.get(r) is not None for r in kept)
            lost |= not intact
            rows.append((name, what, lat, fds(pid), rss_kib(pid), intact))
    finally:
        log = s.daemon_log()
        s.close()

    def ms(v):
        return "%.1f" % v if v is not None else "n/a"
    print("%-13s %7s %7s %8s %6s %5s %8s %5s  %s" % (
        "ATTACK", "P50_MS", "P99_MS", "VS_IDLE", "ERRORS", "FDS", "RSS_MIB", "KEPT", "WHAT"))
    base = rows[0][2]["p99"] or 1
    for name, what, lat, nfd, rss, intact in rows:
        print("%-13s %7s %7s %8s %6d %5d %8.1f %5s  %s" % (
            name, ms(lat["p50"]), ms(lat["p99"]),
            "%.1fx" % (lat["p99"] / base) if lat["p99"] else "n/a", lat["errors"], nfd,
            rss / 1024, "yes" if intact else "LOST", what))
    print("target: p99 < %.0f ms under each attack, fds and RSS bounded, nothing lost" %
          P99_TARGET_MS)
    unbounded = False
    for i, (name, what, lat, nfd, rss, intact) in enumerate(rows[1:], 1):
        verdict = []
        if lat["p99"] is None or lat["p99"] >= P99_TARGET_MS:
            verdict.append("p99 %s ms" % ms(lat["p99"]))
        # what the attack left open once it ended, against the phase before
        if nfd > rows[i - 1][3] + FD_GROWTH_BOUND:
            verdict.append("fds %d (%d before it)" % (nfd, rows[i - 1][3]))
            unbounded = True
        if not intact:
            verdict.append("a reservation lost")
        print("  %-13s %s" % (name, "MISS: " + ", ".join(verdict) if verdict else "met"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(attack=r[0], what=r[1], latency=r[2], fds=r[3], rss_kib=r[4],
                            kept=r[5]) for r in rows], f, indent=1)
    if died:
        print("hugeroomd died; its log ends:\n" + log[-2000:])
    return 1 if died or lost or (args.check and unbounded) else 0


if __name__ == "__main__":
    sys.exit(main())
