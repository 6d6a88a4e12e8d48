#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd's API with a real HTTP client (curl) against the daemon binary.

Simulated guests (hr-simguest) report to it. Covered: every route of
host/openapi.json, each answer's status checked against the document; the
access matrix (Unix socket: root, api_group, api_read_group, others, also
by supplementary group; TCP: TLS with a CA this test makes with openssl,
no token, bad token, read token, admin token); bad input (sizes with units,
limits, unknown fields, bodies that are not JSON or too large, slow
clients); the event stream; /metrics through promtool. TAP output.
"""

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import simharness  # noqa: E402
from apiharness import ADMIN_TOKEN, READ_TOKEN, free_port, make_tls, tls_config  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OPENAPI = os.path.join(HERE, "..", "..", "host", "openapi.json")
# groups every Debian system has
ADMIN_GROUP, ADMIN_GID = "users", 100
READ_GROUP, READ_GID = "nogroup", 65534
OTHER_UID, OTHER_GID = 65534, 1  # nobody, in group daemon
# 100 us per page migrated: a large evacuation runs long enough to cancel
SIM_ARGS = ("--migrate-ns", "100000")

with open(OPENAPI) as f:
    DOC = json.load(f)
SEEN = {}  # (method, template) -> statuses seen


def template_of(path):
    """The openapi path template a concrete path falls under."""
    path = path.split("?")[0]
    segs = path.split("/")
    for t in DOC["paths"]:
        tsegs = t.split("/")
        if len(tsegs) == len(segs) and all(
                a == b or (a.startswith("{") and b) for a, b in zip(tsegs, segs)):
            return t
    return None


class Curl:
    def __init__(self, base, args, as_user=None):
        self.base = base
        self.args = args
        self.as_user = as_user

    def __call__(self, method, path, body=None, headers=(), raw=None, check_doc=True,
                 timeout=20):
        cmd = []
        if self.as_user is not None:
            uid, gid, groups = self.as_user
            cmd += ["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid]
            cmd += ["--groups=" + ",".join(map(str, groups))] if groups else ["--clear-groups"]
        cmd += ["curl", "-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}",
                "--max-time", str(timeout)] + self.args
        for h in headers:
            cmd += ["-H", h]
        if body is not None:
            cmd += ["-H", "Content-Type: application/json", "--data-binary",
                    body if isinstance(body, str) else json.dumps(body)]
        if raw is not None:
            cmd += ["--data-binary", "@" + raw]
        cmd.append(self.base + path)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 10)
        if r.returncode != 0:
            return r.returncode, None, r.stderr.strip()
        text, _, code = r.stdout.rpartition("\n")
        status = int(code)
        data = None
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = text
        if status >= 400:
            # every error body says what and which code
            assert isinstance(data, dict) and "error" in data and "code" in data, \
                "%s %s: HTTP %d without error and code: %r" % (method, path, status, text[:300])
        t = template_of(path)
        if check_doc and t is not None and method.lower() in DOC["paths"][t]:
            documented = DOC["paths"][t][method.lower()]["responses"]
            assert str(status) in documented, "%s %s answered %d, openapi.json documents %s" % (
                method, path, status, sorted(documented))
            SEEN.setdefault((method, t), set()).add(status)
        return status, data, text


def expect(result, status, code=None):
    got, data, text = result
    assert got == status, "HTTP %r (expected %d): %s" % (got, status, str(text)[:400])
    if code is not None:
        assert data.get("code") == code, "code %r (expected %r): %s" % (
            data.get("code"), code, text[:300])
    return data


class Env:
    def __init__(self):
        self.tls_dir = tempfile.mkdtemp(prefix="hugeroom-api-tls-")
        make_tls(self.tls_dir)
        self.port = free_port()
        t = self.tls_dir
        self.sim = simharness.SimSetup(extra_config=(
            "api_group=%s\napi_read_group=%s\n%s"
            % (ADMIN_GROUP, READ_GROUP, tls_config(t, self.port))))
        # the other users must reach the socket in the test's directory
        os.chmod(self.sim.dir, 0o755)
        self.sim.start_guests(2, 1, extra=SIM_ARGS)
        self.sim.wait_statuses(2)
        self.unix = Curl("http://localhost", ["--unix-socket", self.sim.api_sock])
        self.https = "https://127.0.0.1:%d" % self.port
        self.ca = os.path.join(t, "ca.pem")

    def tcp(self, token=None, ca=True):
        args = ["--cacert", self.ca] if ca else []
        if token is not None:
            args += ["-H", "Authorization: Bearer " + token]
        return Curl(self.https, args)

    def as_user(self, uid, gid, groups=()):
        return Curl("http://localhost", ["--unix-socket", self.sim.api_sock],
                    as_user=(uid, gid, list(groups)))

    def close(self):
        self.sim.close()
        subprocess.run(["rm", "-rf", self.tls_dir])


# ---------------------------------------------------------------------------

def test_every_route(env):
    c = env.unix
    expect(c("GET", "/v1/guests"), 200)
    expect(c("GET", "/v1/capacity"), 200)
    expect(c("GET", "/v1/guests/sim0"), 200)
    expect(c("GET", "/v1/guests/nosuch"), 404, "unknown_guest")
    expect(c("POST", "/v1/guests/sim0/report"), 202)
    expect(c("POST", "/v1/guests/nosuch/report"), 404, "unknown_guest")
    ev = expect(c("POST", "/v1/guests/sim0/evacuate", {"blocks": 2}), 202)
    expect(c("POST", "/v1/guests/sim0/evacuate", {"blocks": 0}), 400, "invalid_argument")
    expect(c("POST", "/v1/guests/nosuch/evacuate", {"blocks": 1}), 404, "unknown_guest")
    expect(c("POST", "/v1/guests/sim1/capture", {"blocks": 1, "budget_ms": 100}), 202)
    expect(c("POST", "/v1/guests/sim1/capture", {"budget_ms": 100}), 400, "invalid_argument")
    req = "/v1/guests/sim0/requests/%d" % ev["request_id"]
    deadline = time.time() + 30
    while expect(c("GET", req), 200)["state"] in ("queued", "sent", "running"):
        assert time.time() < deadline, "evacuate did not end"
        time.sleep(0.1)
    expect(c("GET", "/v1/guests/sim0/requests/12345"), 404, "unknown_request")
    expect(c("GET", "/v1/guests/sim0/requests"), 200)
    expect(c("POST", "/v1/guests/sim0/return", {"all": True}), 202)
    expect(c("POST", "/v1/guests/sim0/return", {"all": True, "blocks": 1}), 400)
    expect(c("POST", "/v1/guests/sim0/cancel", {"request_id": ev["request_id"]}), 409)
    expect(c("POST", "/v1/guests/sim0/cancel", {"request_id": 7}), 404)
    expect(c("POST", "/v1/guests/sim0/cancel", {}), 400, "invalid_argument")
    # slow guests (--migrate-ns): this one runs for seconds
    long_ev = expect(c("POST", "/v1/guests/sim1/evacuate", {"blocks": 400}), 202)
    expect(c("POST", "/v1/guests/sim1/cancel", {"request_id": long_ev["request_id"]}),
           202)
    r = expect(c("POST", "/v1/reservations", {"size": "4M", "requester": "test"}), 201)
    expect(c("GET", "/v1/reservations"), 200)
    expect(c("GET", "/v1/reservations/" + r["id"]), 200)
    expect(c("GET", "/v1/reservations/r999"), 404, "unknown_reservation")
    deadline = time.time() + 30
    while expect(c("GET", "/v1/reservations/" + r["id"]), 200)["state"] != "ready":
        assert time.time() < deadline, "the reservation did not become ready"
        time.sleep(0.1)
    expect(c("POST", "/v1/reservations/%s/consume" % r["id"]), 200)
    expect(c("POST", "/v1/reservations/%s/consume" % r["id"]), 409, "wrong_state")
    expect(c("POST", "/v1/reservations/r999/consume"), 404)
    expect(c("POST", "/v1/reservations/%s/release" % r["id"]), 200)
    expect(c("POST", "/v1/reservations/r999/release"), 404)
    r2 = expect(c("POST", "/v1/reservations", {"bytes": 2 << 20}), 201)
    expect(c("DELETE", "/v1/reservations/" + r2["id"]), 200)
    expect(c("DELETE", "/v1/reservations/" + r2["id"]), 409, "wrong_state")
    expect(c("DELETE", "/v1/reservations/r999"), 404)
    expect(c("POST", "/v1/reservations/%s/release" % r2["id"]), 409)
    expect(c("POST", "/v1/plan", {"size": "8M"}), 200)
    expect(c("POST", "/v1/plan", {"size": "8Q"}), 400)
    expect(c("GET", "/v1/reserve"), 200)
    expect(c("PUT", "/v1/reserve", {"size": "0"}), 200)
    expect(c("PUT", "/v1/reserve", {"size": 7}), 400, "invalid_argument")
    expect(c("GET", "/v1/host"), 200)
    expect(c("GET", "/healthz"), 200)
    expect(c("GET", "/v1/version"), 200)
    expect(c("GET", "/openapi.json"), 200)
    # a guest not seen yet keeps its PCP policy for when it comes (hr-simguest has no PCP)
    expect(c("PUT", "/v1/guests/not-seen-yet/pcp", {"policy": "latency"}), 202)
    expect(c("PUT", "/v1/guests/sim0/pcp", {"policy": "no-such-policy"}), 400,
           "invalid_argument")
    expect(c("GET", "/v1/events?types=nosuch"), 400, "invalid_argument")
    status, _, text = c("GET", "/metrics")
    assert status == 200 and "hugeroom_node_free_blocks" in text, text[:300]
    expect(c("GET", "/v1/nothing"), 404, "not_found")
    status, data, _ = c("PUT", "/v1/guests", check_doc=False)
    assert status == 405 and data["code"] == "method_not_allowed", data
    # /v1/events answers 200 with a stream: test_events
    missing = []
    for t, item in DOC["paths"].items():
        for m in item:
            if m.upper() == "GET" and t == "/v1/events":
                continue
            if not any(s < 300 for s in SEEN.get((m.upper(), t), ())):
                missing.append("%s %s" % (m.upper(), t))
    assert not missing, "routes never answered with success: %s" % missing


def test_bad_input(env):
    c = env.unix
    for body, what in [({"size": "4G", "foo": 1}, "foo: unknown field"),
                       ({"size": "4X"}, "size"), ({"size": "0"}, "size"),
                       ({"size": "-4M"}, "size"), ({"bytes": 0}, "bytes"),
                       ({"size": "4M", "bytes": 4194304}, "not both"),
                       ({"size": "4M", "deadline_s": 86401}, "deadline_s"),
                       ({"size": "4M", "node": 5000}, "node"),
                       ({"size": "4M", "strict": "yes"}, "strict"),
                       ({"size": "4M", "requester": "x" * 300}, "requester"),
                       ([1, 2], "JSON object"), ("{not json", "not JSON"), ("", "body")]:
        data = expect(c("POST", "/v1/reservations", body), 400, "invalid_argument")
        assert what in data["error"], (body, data)
    # sizes with units are accepted in every unit
    for size in ("2048K", "2M", "1G"):
        expect(c("POST", "/v1/plan", {"size": size}), 200)
    for body in ({"blocks": 1, "timeout_s": 0}, {"blocks": 1, "timeout_s": 86401},
                 {"gpas": ["0x1234"]}, {"gpas": ["zz"]}, {"blocks": 1, "bogus": True},
                 {"ranges": [{"start": 0, "end": 1}], "blocks": 1}):
        expect(c("POST", "/v1/guests/sim0/evacuate", body), 400, "invalid_argument")
    big = os.path.join(env.sim.dir, "big.json")
    with open(big, "w") as f:
        f.write('{"gpas": [' + ",".join(["1"] * 50000) + "]}")
    expect(c("POST", "/v1/guests/sim0/evacuate", raw=big,
             headers=["Content-Type: application/json"]), 413, "body_too_large")
    expect(c("POST", "/v1/guests/sim0/report", raw=big), 413, "body_too_large")


def test_slow_clients(env):
    """A client that stops halfway holds nothing up and gets a 408 with a JSON body."""
    slow = []
    partials = (b"", b"GET /v1/gue", b"POST /v1/plan HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 100\r\n\r\n{\"si")
    for partial in partials:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(env.sim.api_sock)
        s.sendall(partial)
        slow.append(s)
    # over TLS, after the handshake
    ctx = ssl.create_default_context(cafile=env.ca)
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", env.port)),
                        server_hostname="127.0.0.1")
    s.sendall(partials[1])
    slow.append(s)
    t0 = time.time()
    for _ in range(20):
        expect(env.unix("GET", "/v1/guests"), 200)
    assert time.time() - t0 < 10, "requests waited for the slow clients"
    for s in slow:
        s.settimeout(30)
        t0 = time.time()
        rest = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        head, _, body = rest.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), rest[:300]
        data = json.loads(body)
        assert data["code"] == "request_timeout" and "10 s" in data["error"], data
        assert time.time() - t0 < 25
        s.close()
    expect(env.unix("GET", "/v1/guests"), 200)


def curl_transfers(argsets):
    """One curl for several transfers (--next between them): each one's status and how
    many connections it opened (0: it reused the one before)."""
    cmd = ["curl", "-sS", "--max-time", "20"]
    for i, args in enumerate(argsets):
        if i > 0:
            cmd.append("--next")
        cmd += ["-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n"] + args
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=40)
    assert r.returncode == 0, r.stderr
    return [tuple(map(int, line.split())) for line in r.stdout.splitlines()]


def metrics(env, *names):
    """The values of @names from one read of /metrics."""
    _, _, text = env.unix("GET", "/metrics")
    values = []
    for name in names:
        m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
        assert m, "no %s in /metrics" % name
        values.append(float(m.group(1)))
    return values


def daemon_fds(env):
    return len(os.listdir("/proc/%d/fd" % env.sim.daemon.pid))


def raw_get(s, path):
    """GET @path on the connected socket @s, its answer read whole (Content-Length)."""
    s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path.encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "the daemon closed the connection instead of answering"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
    while len(body) < length:
        chunk = s.recv(65536)
        assert chunk, "the answer was cut short"
        body += chunk
    assert re.search(rb"(?im)^connection: *close", head) is None, head
    return int(head.split()[1])


def test_keepalive(env):
    """Connections persist on both sockets, each request keeps its own auth, a refused
    peer's connection closes, and connections that clients leave or let idle end."""
    unix = ["--unix-socket", env.sim.api_sock]
    base = "http://localhost"
    # the Unix socket: three requests, one connection
    got = curl_transfers([unix + [base + p] for p in ("/v1/guests", "/v1/host", "/metrics")])
    assert got == [(200, 1), (200, 0), (200, 0)], got
    # a peer refused by its credentials gets its 403 and the connection closes
    cmd = ["setpriv", "--reuid=%d" % OTHER_UID, "--regid=%d" % OTHER_GID, "--clear-groups"]
    r = subprocess.run(cmd + ["curl", "-sS", "-o", "/dev/null", "-o", "/dev/null", "-w",
                              "%{http_code} %{num_connects}\\n"] + unix
                       + [base + "/v1/guests", base + "/v1/host"],
                       capture_output=True, text=True, timeout=40)
    assert r.stdout.split("\n")[:2] == ["403 1", "403 1"], (r.stdout, r.stderr)
    # TLS: one handshake for all; the bearer token is checked on every request
    tls = ["--cacert", env.ca]
    read = ["-H", "Authorization: Bearer " + READ_TOKEN]
    counters = ("hugeroom_api_connections_total", "hugeroom_api_connection_reuses_total")
    c0, r0 = metrics(env, *counters)
    got = curl_transfers([tls + read + [env.https + "/v1/guests"],
                          tls + [env.https + "/v1/guests"],
                          tls + read + ["-X", "POST", "-H", "Content-Type: application/json",
                                        "--data-binary", '{"size": "2M"}',
                                        env.https + "/v1/reservations"],
                          tls + read + [env.https + "/v1/host"]])
    assert got == [(200, 1), (401, 0), (403, 0), (200, 0)], got
    # the metrics count it: that curl's connection and the second /metrics read's
    c1, r1 = metrics(env, *counters)
    assert (c1 - c0, r1 - r0) == (2, 3), (c1 - c0, r1 - r0)
    # one connection left idle: the daemon closes it after 10 s
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(env.sim.api_sock)
    assert raw_get(idle, "/v1/guests") == 200
    t_idle = time.time()
    # twenty kept open hold one fd each; once their clients leave, none is left
    fds0 = daemon_fds(env)
    socks = []
    for _ in range(20):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(env.sim.api_sock)
        for _ in range(3):
            assert raw_get(s, "/v1/host") == 200
        socks.append(s)
    assert daemon_fds(env) >= fds0 + 20, (daemon_fds(env), fds0)
    assert metrics(env, "hugeroom_api_idle_connections")[0] >= 21
    for s in socks:
        s.close()
    deadline = time.time() + 5
    while daemon_fds(env) > fds0 and time.time() < deadline:
        time.sleep(0.1)
    assert daemon_fds(env) <= fds0, "the daemon kept %d fds of closed connections" % (
        daemon_fds(env) - fds0)
    idle.settimeout(20)
    assert idle.recv(1) == b"", "the idle connection got data"
    waited = time.time() - t_idle
    assert 9 <= waited <= 14, "the idle connection closed after %.1f s" % waited
    idle.close()


def test_unix_access(env):
    # root: admin
    expect(env.unix("POST", "/v1/plan", {"size": "2M"}), 200)
    reader = env.as_user(OTHER_UID, READ_GID)
    expect(reader("GET", "/v1/guests"), 200)
    expect(reader("GET", "/metrics"), 200)
    expect(reader("POST", "/v1/plan", {"size": "2M"}), 200)
    data = expect(reader("POST", "/v1/reservations", {"size": "2M"}), 403, "read_only")
    assert "admin" in data["error"], data
    admin = env.as_user(OTHER_UID, ADMIN_GID)
    r = expect(admin("POST", "/v1/reservations", {"size": "2M"}), 201)
    expect(admin("DELETE", "/v1/reservations/" + r["id"]), 200)
    # a supplementary group counts as well
    admin2 = env.as_user(OTHER_UID, OTHER_GID, [ADMIN_GID])
    r = expect(admin2("POST", "/v1/reservations", {"size": "2M"}), 201)
    expect(admin2("DELETE", "/v1/reservations/" + r["id"]), 200)
    other = env.as_user(OTHER_UID, OTHER_GID)
    data = expect(other("GET", "/v1/guests", check_doc=False), 403, "forbidden")
    assert "api_group" in data["error"], data


def test_tls_access(env):
    expect(env.tcp()("GET", "/v1/guests"), 401, "unauthenticated")
    expect(env.tcp("wrong-token-0123456789")("GET", "/v1/guests"), 401, "bad_token")
    expect(env.tcp(ADMIN_TOKEN[:-1])("GET", "/v1/guests"), 401, "bad_token")
    expect(env.tcp(READ_TOKEN)("GET", "/v1/guests"), 200)
    expect(env.tcp(READ_TOKEN)("GET", "/v1/reservations"), 200)
    expect(env.tcp(READ_TOKEN)("POST", "/v1/reservations", {"size": "2M"}), 403, "read_only")
    r = expect(env.tcp(ADMIN_TOKEN)("POST", "/v1/reservations", {"size": "2M"}), 201)
    expect(env.tcp(ADMIN_TOKEN)("DELETE", "/v1/reservations/" + r["id"]), 200)
    # the server's certificate is checked against the test CA, and is refused without it
    rc, _, err = env.tcp(ADMIN_TOKEN, ca=False)("GET", "/v1/guests")
    assert rc == 60, (rc, err)
    # no plain HTTP on the TLS port
    rc, _, err = Curl("http://127.0.0.1:%d" % env.port, [])("GET", "/v1/guests", timeout=5)
    assert rc != 0 or rc == 400, (rc, err)
    # the event stream over TLS
    p = subprocess.Popen(["curl", "-sSN", "--cacert", env.ca, "-H",
                          "Authorization: Bearer " + READ_TOKEN,
                          env.https + "/v1/events?types=reservation"],
                         stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        r = expect(env.tcp(ADMIN_TOKEN)("POST", "/v1/reservations", {"size": "2M"}), 201)
        ev = read_event(p, lambda t, d: t == "reservation" and d["reservation"]["id"] == r["id"])
        assert ev["reservation"]["bytes"] == 2 << 20
        expect(env.tcp(ADMIN_TOKEN)("DELETE", "/v1/reservations/" + r["id"]), 200)
    finally:
        p.kill()
        p.wait()


def read_event(p, want, timeout=20):
    """The first event for which want(type, data) holds."""
    deadline = time.time() + timeout
    etype = None
    while time.time() < deadline:
        line = p.stdout.readline()
        if line == "":
            raise AssertionError("the event stream ended")
        line = line.rstrip("\n")
        if line.startswith("event: "):
            etype = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
            assert data["type"] == etype, (data, etype)
            if want(etype, data):
                return data
    raise AssertionError("no such event within %ds" % timeout)


def test_events(env):
    p = subprocess.Popen(["curl", "-sSN", "--unix-socket", env.sim.api_sock,
                          "http://localhost/v1/events"], stdout=subprocess.PIPE, text=True)
    g = subprocess.Popen(["curl", "-sSN", "--unix-socket", env.sim.api_sock,
                          "http://localhost/v1/events?guest=sim1&types=status,request"],
                         stdout=subprocess.PIPE, text=True)
    try:
        head = p.stdout.readline()
        assert head.startswith("retry:"), head
        ev = expect(env.unix("POST", "/v1/guests/sim0/evacuate", {"blocks": 1}), 202)
        rid = ev["request_id"]
        states = []

        def final(t, d):
            if t != "request" or d["request"]["request_id"] != rid:
                return False
            states.append(d["request"]["state"])
            return d["request"]["state"] not in ("queued", "sent", "running")
        done = read_event(p, final)
        assert done["guest"] == "sim0" and done["request"]["state"] == "done", done
        assert states[0] in ("queued", "sent"), states
        now_us = time.time() * 1e6
        assert 0 <= now_us - done["time_us"] < 5e6, (now_us, done["time_us"])
        status = read_event(p, lambda t, d: t == "status")
        assert status["mem_free_pages"] > 0
        # the filtered stream has only sim1's status and requests
        for _ in range(3):
            d = read_event(g, lambda t, d: True)
            assert d["guest"] == "sim1" and d["type"] in ("status", "request"), d
        # a reconnection shows as disconnected, then connected
        env.sim.sims[0].terminate()
        env.sim.sims[0].wait()
        read_event(p, lambda t, d: t == "guest-disconnected" and d["guest"] == "sim0")
        env.sim.sims.pop(0)
        env.sim.start_guests(2, 1, extra=SIM_ARGS)
        read_event(p, lambda t, d: t == "guest-connected" and d["guest"] == "sim0")
        env.sim.wait_statuses(2)
    finally:
        for q in (p, g):
            q.kill()
            q.wait()
    # the daemon saw the clients go
    deadline = time.time() + 10
    while "hugeroom_api_event_clients 0" not in env.unix("GET", "/metrics")[2]:
        assert time.time() < deadline, "the event clients were not dropped"
        time.sleep(0.2)


def test_metrics_promtool(env):
    # something in every histogram first
    expect(env.unix("POST", "/v1/guests/sim0/evacuate", {"blocks": 1}), 202)
    expect(env.unix("POST", "/v1/reservations", {"size": "2M"}), 201)
    time.sleep(1.5)
    status, _, text = env.unix("GET", "/metrics")
    assert status == 200
    for name in ("hugeroom_node_free_blocks{node=", "hugeroom_node_unusable_index{",
                 "hugeroom_node_promised_blocks{", "hugeroom_guest_free_pages{",
                 "hugeroom_guest_held_blocks{", "hugeroom_guest_requests_finished_total{",
                 'hugeroom_reservations{state="ready"}',
                 "hugeroom_reservation_time_to_ready_seconds_bucket",
                 "hugeroom_plan_duration_seconds_bucket",
                 "hugeroom_main_loop_stall_seconds_bucket", "hugeroom_main_loop_stall_cpu_max_seconds ",
                 'hugeroom_guest_request_duration_seconds_count{kind="evacuate"}',
                 'hugeroom_api_request_duration_seconds_bucket{route="GET /v1/guests",le='):
        assert name in text, "no %s in /metrics" % name
    m = re.search(r'hugeroom_reservation_time_to_ready_seconds_count (\d+)', text)
    assert m and int(m.group(1)) >= 1, "no reservation counted in time to ready"
    # unpacked into the cache by scripts/fetch-promtool.sh (prepare.sh runs it)
    promtool = os.path.join(os.environ.get("HUGEROOM_CACHE", "/var/cache/hugeroom"),
                            "tools/prometheus/root/usr/bin/promtool")
    assert os.access(promtool, os.X_OK), \
        "%s is missing: run scripts/fetch-promtool.sh (scripts/prepare.sh does)" % promtool
    r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                       text=True)
    # promtool prints lint hints on stdout; a parse error fails it
    assert r.returncode == 0, "promtool: %s %s" % (r.stdout[-2000:], r.stderr[-2000:])


def req(env, method, path, body=None, headers=None):
    """A request on the Unix socket: (status, headers with lower-case names, JSON or text)."""
    conn = simharness.UnixHTTPConnection(env.sim.api_sock, timeout=30)
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
    hdrs = dict(headers or {})
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=hdrs)
    r = conn.getresponse()
    text = r.read().decode()
    got = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    try:
        return r.status, got, json.loads(text)
    except ValueError:
        return r.status, got, text


UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_request_ids(env):
    """X-Request-Id is echoed, made when absent or unfit, and names the log lines of a change."""
    status, h, _ = req(env, "GET", "/v1/guests", headers={"X-Request-Id": "orch-read-1"})
    assert status == 200 and h.get("x-request-id") == "orch-read-1", h
    status, h, _ = req(env, "GET", "/v1/host")
    assert status == 200 and UUID.match(h.get("x-request-id", "")), h
    for bad in ("has spaces in it", "x" * 129, "semi;colon"):
        _, h, _ = req(env, "GET", "/v1/guests", headers={"X-Request-Id": bad})
        assert UUID.match(h.get("x-request-id", "")), (bad, h)
    # errors carry it too, also the dispatcher's own
    status, h, _ = req(env, "GET", "/v1/nothing", headers={"X-Request-Id": "orch-404"})
    assert status == 404 and h.get("x-request-id") == "orch-404", h
    status, h, r = req(env, "POST", "/v1/reservations", {"size": "2M"},
                       headers={"X-Request-Id": "orch-create-42"})
    assert status == 201 and h.get("x-request-id") == "orch-create-42", (status, h)
    expect(env.unix("DELETE", "/v1/reservations/" + r["id"]), 200)
    deadline = time.time() + 5
    while "request orch-create-42: reservation %s created" % r["id"] not in env.sim.daemon_log():
        assert time.time() < deadline, "the log does not name the request: %s" % (
            env.sim.daemon_log()[-1500:])
        time.sleep(0.1)
    assert "request orch-create-42: POST /v1/reservations: 201" in env.sim.daemon_log()


def test_idempotency(env):
    """The same Idempotency-Key and body is the same reservation; another body is a 422."""
    key = {"Idempotency-Key": "7d2c1b0e-idem-%d" % os.getpid()}
    body = {"size": "2M", "requester": "idem"}
    status, h, first = req(env, "POST", "/v1/reservations", body, headers=key)
    assert status == 201, (status, first)
    assert h.get("location") == "/v1/reservations/" + first["id"], h
    assert "idempotent-replayed" not in h, h
    status, h, again = req(env, "POST", "/v1/reservations", body, headers=key)
    assert status == 201 and again["id"] == first["id"], (status, again)
    assert h.get("idempotent-replayed") == "true" and h.get("location") == \
        "/v1/reservations/" + first["id"], h
    status, _, err = req(env, "POST", "/v1/reservations", {"size": "4M", "requester": "idem"},
                         headers=key)
    assert status == 422 and err["code"] == "idempotency_key_reused", (status, err)
    assert first["id"] in err["error"], err
    mine = [r for r in expect(env.unix("GET", "/v1/reservations"), 200)["reservations"]
            if r["requester"] == "idem"]
    assert [r["id"] for r in mine] == [first["id"]], mine
    # without a key two requests are two reservations
    a = expect(env.unix("POST", "/v1/reservations", body), 201)
    b = expect(env.unix("POST", "/v1/reservations", body), 201)
    assert a["id"] != b["id"]
    status, _, err = req(env, "POST", "/v1/reservations", body,
                         headers={"Idempotency-Key": "k" * 256})
    assert status == 400 and "Idempotency-Key" in err["error"], err
    for r in (first, a, b):
        expect(env.unix("DELETE", "/v1/reservations/" + r["id"]), 200)


def test_list_filters(env):
    c = env.unix
    made = [expect(c("POST", "/v1/reservations", {"size": "2M", "requester": "filt"}), 201)
            for _ in range(3)]
    expect(c("DELETE", "/v1/reservations/" + made[1]["id"]), 200)
    page = expect(c("GET", "/v1/reservations?requester=filt&limit=2"), 200)
    assert [r["id"] for r in page["reservations"]] == [m["id"] for m in made[:2]], page
    assert page["next_cursor"] is not None, page
    rest = expect(c("GET", "/v1/reservations?requester=filt&limit=2&cursor=" +
                    page["next_cursor"]), 200)
    assert [r["id"] for r in rest["reservations"]] == [made[2]["id"]], rest
    assert rest["next_cursor"] is None, rest
    cancelled = expect(c("GET", "/v1/reservations?requester=filt&state=cancelled"), 200)
    assert [r["id"] for r in cancelled["reservations"]] == [made[1]["id"]], cancelled
    both = expect(c("GET", "/v1/reservations?requester=filt&state=cancelled,created,"
                    "in-progress,ready"), 200)
    assert len(both["reservations"]) == 3, both
    assert expect(c("GET", "/v1/reservations?requester=nobody-at-all"), 200)[
        "reservations"] == []
    for q, what in (("state=bogus", "bogus"), ("limit=0", "limit"), ("limit=x", "limit"),
                    ("limit=1001", "limit"), ("color=red", "color"),
                    ("cursor=r-no-such", "cursor")):
        err = expect(c("GET", "/v1/reservations?" + q), 400, "invalid_argument")
        assert what in err["error"], (q, err)
    for m in (made[0], made[2]):
        expect(c("DELETE", "/v1/reservations/" + m["id"]), 200)


def test_meta_routes(env):
    health = expect(env.unix("GET", "/healthz"), 200)
    assert health["status"] == "ok" and health["state_file"] == "ok", health
    assert health["event_epoch"] >= 1 and health["guests"] == 2, health
    version = expect(env.unix("GET", "/v1/version"), 200)
    assert version["api"] == "v1" and re.match(r"^\d+\.\d+", version["version"]), version
    # the document the daemon serves is the one in the tree, also over TLS
    assert expect(env.unix("GET", "/openapi.json"), 200) == DOC
    assert expect(env.tcp(READ_TOKEN)("GET", "/openapi.json"), 200) == DOC
    expect(env.tcp()("GET", "/healthz"), 401, "unauthenticated")


def events_proc(env, query="", last=None):
    cmd = ["curl", "-sSN", "--unix-socket", env.sim.api_sock]
    if last is not None:
        cmd += ["-H", "Last-Event-ID: " + last]
    p = subprocess.Popen(cmd + ["http://localhost/v1/events" + query], stdout=subprocess.PIPE,
                         text=True)
    head = p.stdout.readline()
    assert head.startswith("retry:"), head
    return p


def stop(p):
    p.kill()
    p.wait()


def test_event_replay(env):
    """A client back with Last-Event-ID gets what it missed; one from too long ago a reset."""
    p = events_proc(env, "?types=reservation")
    try:
        r1 = expect(env.unix("POST", "/v1/reservations", {"size": "2M"}), 201)
        ev = read_event(p, lambda t, d: d["reservation"]["id"] == r1["id"])
    finally:
        stop(p)
    last = "%d:%d" % (ev["epoch"], ev["seq"])
    # while nobody listens
    r2 = expect(env.unix("POST", "/v1/reservations", {"size": "2M"}), 201)
    expect(env.unix("DELETE", "/v1/reservations/" + r2["id"]), 200)
    p = events_proc(env, "?types=reservation", last)
    try:
        first = read_event(p, lambda t, d: True)
        assert first["type"] == "reservation" and first["seq"] > ev["seq"], first
        seen = [first]
        while not any(d["reservation"]["id"] == r2["id"] and
                      d["reservation"]["state"] == "cancelled" for d in seen):
            seen.append(read_event(p, lambda t, d: True, timeout=5))
        assert all(d["type"] == "reservation" and d["epoch"] == ev["epoch"] for d in seen), seen
        assert [d["seq"] for d in seen] == sorted(d["seq"] for d in seen), seen
    finally:
        stop(p)
    # another epoch (0 is none's), an id that is no id: a reset first, whatever the filter
    for bad in ("0:5", "junk", "%d:%d" % (ev["epoch"], 10 ** 12)):
        p = events_proc(env, "?types=status", bad)
        try:
            d = read_event(p, lambda t, d: True, timeout=5)
            assert d["type"] == "reset" and d["epoch"] == ev["epoch"], (bad, d)
        finally:
            stop(p)
    expect(env.unix("DELETE", "/v1/reservations/" + r1["id"]), 200)
    _, _, text = env.unix("GET", "/metrics")
    assert re.search(r"^hugeroom_api_event_resets_total [3-9]", text, re.M), text[-2000:]
    assert re.search(r"^hugeroom_api_events_replayed_total [1-9]", text, re.M)


def test_owner(env):
    """Only the client that made a reservation, for its requester, ends it, unless forced."""
    c = env.unix
    other_admin = env.as_user(OTHER_UID, ADMIN_GID)
    r = expect(c("POST", "/v1/reservations", {"size": "2M", "requester": "libvirt:vm-a"}), 201)
    assert r["owner"] == "uid:0", r
    path = "/v1/reservations/%s" % r["id"]
    # another uid, even an admin
    err = expect(other_admin("POST", path + "/release"), 403, "not_owner")
    assert "uid:0" in err["error"] and "force" in err["error"], err
    expect(other_admin("DELETE", path), 403, "not_owner")
    # the owner acting for another requester: a VM's start taking another's memory
    err = expect(c("POST", path + "/consume", {"requester": "libvirt:vm-b"}), 403, "not_owner")
    assert "libvirt:vm-a" in err["error"], err
    expect(c("DELETE", path + "?requester=libvirt:vm-b"), 403, "not_owner")
    expect(c("POST", path + "/release", {"requester": 5}), 400, "invalid_argument")
    expect(c("POST", path + "/release", {"force": "yes"}), 400, "invalid_argument")
    expect(c("DELETE", path + "?force=maybe"), 400, "invalid_argument")
    assert expect(c("GET", path), 200)["state"] not in ("cancelled", "consumed")
    # an admin that says so may, and the log says who did
    expect(other_admin("POST", path + "/release", {"force": True}), 200)
    assert "forced by uid:%d" % OTHER_UID in env.sim.daemon_log(), env.sim.daemon_log()[-800:]
    # the owner for its own requester may, as may one that names none
    r = expect(c("POST", "/v1/reservations", {"size": "2M", "requester": "libvirt:vm-a"}), 201)
    expect(c("POST", "/v1/reservations/%s/release" % r["id"],
             {"requester": "libvirt:vm-a"}), 200)
    # a token is its own owner: root on the socket is another client
    r = expect(env.tcp(ADMIN_TOKEN)("POST", "/v1/reservations", {"size": "2M"}), 201)
    assert r["owner"].startswith("token:") and ADMIN_TOKEN not in r["owner"], r
    expect(c("DELETE", "/v1/reservations/" + r["id"]), 403, "not_owner")
    expect(env.tcp(ADMIN_TOKEN)("DELETE", "/v1/reservations/" + r["id"]), 200)


def test_restart(env):
    """The event stream's epoch grows across restarts and an old id gets a reset;
    reservation ids are never made again."""
    sim = simharness.SimSetup()
    try:
        before = sim.api("POST", "/v1/reservations", {"size": "2M"}, expect=201)["id"]
        e1 = sim.api("GET", "/healthz")["event_epoch"]
        with open(os.path.join(sim.dir, "events-epoch")) as f:
            assert int(f.read()) == e1
        sim.restart_daemon()
        e2 = sim.api("GET", "/healthz")["event_epoch"]
        assert e2 == e1 + 1, (e1, e2)
        after = sim.api("POST", "/v1/reservations", {"size": "2M"}, expect=201)["id"]
        assert re.match(r"^r-[0-9a-z]{26}$", after) and before < after, (before, after)
        assert [r["id"] for r in sim.api("GET", "/v1/reservations")["reservations"]] == [
            before, after]
        p = subprocess.Popen(["curl", "-sSN", "--unix-socket", sim.api_sock, "-H",
                              "Last-Event-ID: %d:1" % e1, "http://localhost/v1/events"],
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().startswith("retry:")
            d = read_event(p, lambda t, d: True, timeout=5)
            assert d["type"] == "reset" and "restarted" in d["reason"], d
        finally:
            stop(p)
    finally:
        sim.close()


def test_state_file_skipped(env):
    """A bad entry of the state file is skipped and reported, the others are kept."""
    sim = simharness.SimSetup()
    try:
        ids = [sim.api("POST", "/v1/reservations", {"size": "2M", "requester": "keep%d" % i},
                       expect=201)["id"] for i in range(2)]
        sim.daemon.send_signal(signal.SIGTERM)
        sim.daemon.wait(20)
        path = os.path.join(sim.dir, "reservations.json")
        with open(path) as f:
            state = json.load(f)
        state["reservations"][0]["state"] = "no-such-state"
        with open(path, "w") as f:
            json.dump(state, f)
        if os.path.exists(sim.api_sock):
            os.unlink(sim.api_sock)
        sim._start_daemon()
        got = [r["id"] for r in sim.api("GET", "/v1/reservations")["reservations"]]
        assert got == ids[1:], (got, ids)
        host = sim.api("GET", "/v1/host")
        sf = host["state_file"]
        assert sf["skipped"] == 1 and "no-such-state" in sf["skipped_entries"][0], sf
        _, text = simharness.http_get(sim.api_sock, "/metrics")
        assert re.search(r"^hugeroom_state_file_skipped_entries 1$", text, re.M)
        assert "entry 0 skipped" in sim.daemon_log()
        assert any(n.startswith("reservations.json.skipped-") for n in os.listdir(sim.dir))
    finally:
        sim.close()


def test_log_escaped(env):
    """A guest name with a newline and ESC reaches the log as one line, escaped."""
    sim = simharness.SimSetup(verbose=True)
    try:
        evil = "evil\x1b[31m\nhugeroomd: forged line "
        sim.start_guests(1, 1, prefix=evil)
        deadline = time.time() + 20
        while "connected from pid" not in sim.daemon_log():
            assert time.time() < deadline, sim.daemon_log()[-1000:]
            time.sleep(0.1)
        log = sim.daemon_log()
        assert "\x1b" not in log, repr(log[-1000:])
        assert "\nhugeroomd: forged" not in log, repr(log[-1000:])
        # (hr-simguest cuts the name at 31 bytes)
        assert "evil\\x1b[31m\\x0ahugeroomd: forged" in log, repr(log[-1000:])
    finally:
        sim.close()


def test_tls_idle_handshakes(env):
    """100 TCP clients that never send a ClientHello hold up neither /v1/host nor TLS."""
    idle = [socket.create_connection(("127.0.0.1", env.port)) for _ in range(100)]
    try:
        time.sleep(1)
        worst = 0
        # each a little later than the last host read is fresh (250 ms): a new read each
        for _ in range(8):
            t0 = time.time()
            expect(env.unix("GET", "/v1/host"), 200)
            worst = max(worst, time.time() - t0)
            time.sleep(0.3)
        assert worst < 2, "GET /v1/host took %.1f s with 100 idle TLS clients" % worst
        t0 = time.time()
        expect(env.tcp(READ_TOKEN)("GET", "/v1/host"), 200)
        assert time.time() - t0 < 3, time.time() - t0
        assert metrics(env, "hugeroom_api_tls_handshakes")[0] >= 100
    finally:
        for s in idle:
            s.close()


def tls_request(env, version):
    """GET /v1/guests over TLS @version only: the answer's first line, or why there is none."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(env.ca)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    ctx.minimum_version = ctx.maximum_version = version
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", env.port), timeout=15),
                             server_hostname="127.0.0.1") as s:
            s.sendall(b"GET /v1/guests HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                      + READ_TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
            return s.recv(100).split(b"\r\n")[0].decode()
    except (ssl.SSLError, OSError) as e:
        return "refused: %s" % e


def test_tls_versions(env):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1):
            got = tls_request(env, old)
            assert not got.startswith("HTTP/"), (old, got)
    for new in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        got = tls_request(env, new)
        assert got == "HTTP/1.1 200 OK", (new, got)


def test_config_refused(env):
    """A network API without TLS and tokens, or with tokens others can read, never starts."""
    d = tempfile.mkdtemp(prefix="hugeroom-api-conf-")
    try:
        tokens = os.path.join(d, "tokens")
        with open(tokens, "w") as f:
            f.write("admin %s\n" % ADMIN_TOKEN)
        os.chmod(tokens, 0o644)
        t = env.tls_dir
        for extra, want in [
                ("api_listen=127.0.0.1:%d\n" % free_port(), "needs api_tls_cert"),
                ("api_listen=127.0.0.1:%d\napi_tls_cert=%s/server.pem\napi_tls_key=%s/server.key\n"
                 "api_tokens=%s\n" % (free_port(), t, t, tokens), "readable by everyone"),
                ("api_group=no-such-group-hr\n", "no-such-group-hr")]:
            conf = os.path.join(d, "c.conf")
            with open(conf, "w") as f:
                f.write("[hugeroomd]\nstate_dir=%s\n%s" % (d, extra))
            r = subprocess.run([env.sim.daemon_bin, "-c", conf, "-f",
                                "--vm-socket", os.path.join(d, "vm.sock"),
                                "--api-socket", os.path.join(d, "api.sock")],
                               capture_output=True, text=True, timeout=20)
            assert r.returncode == 1 and want in r.stderr, (extra, r.returncode, r.stderr[-500:])
    finally:
        subprocess.run(["rm", "-rf", d])


def test_capacity(env):
    """GET /v1/capacity: per node, what a prepare could make ready in 10, 30, 60 s; cached;
    the same as gauges; in openapi.json with its operationId"""
    c = env.unix
    cap = expect(c("GET", "/v1/capacity"), 200)
    assert cap["within_s"] == [10, 30, 60], cap
    host = expect(c("GET", "/v1/host"), 200)
    assert [n["node"] for n in cap["nodes"]] == [n["node"] for n in host["nodes"]], (cap, host)
    for n in cap["nodes"]:
        r = n["ready_bytes"]
        assert sorted(r) == ["10", "30", "60"], n
        # more time never makes less ready, and the free blocks are ready at once
        assert 0 <= r["10"] <= r["30"] <= r["60"], n
        assert r["60"] % (2 << 20) == 0, n
    assert any(n["ready_bytes"]["10"] > 0 for n in cap["nodes"]), cap
    assert 0 <= cap["age_ms"] <= cap["max_age_s"] * 1000 and cap["max_age_s"] == 5, cap
    # cached: a second ask within max_age_s is the same answer, older
    again = expect(c("GET", "/v1/capacity"), 200)
    # (or made anew, when the first was near max_age_s: /metrics makes it too)
    assert (again["decision_us"] == cap["decision_us"] and again["age_ms"] >= cap["age_ms"]) \
        or again["age_ms"] < cap["age_ms"], (cap, again)
    _, _, text = c("GET", "/metrics")
    for n in cap["nodes"]:
        for w in ("10", "30", "60"):
            assert re.search(r'^hugeroom_capacity_ready_bytes\{node="%d",within_s="%s"\} \d+$'
                             % (n["node"], w), text, re.M), text[-3000:]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "host",
                           "openapi.json")) as f:
        doc = json.load(f)
    assert doc["paths"]["/v1/capacity"]["get"]["operationId"] == "getCapacity"


def main():
    tests = [test_config_refused, test_every_route, test_bad_input, test_unix_access, test_tls_access, test_events,
             test_metrics_promtool, test_slow_clients, test_keepalive, test_request_ids,
             test_idempotency, test_list_filters, test_meta_routes, test_event_replay,
             test_owner, test_restart, test_state_file_skipped, test_log_escaped,
             test_tls_idle_handshakes, test_tls_versions, test_capacity]
    if os.geteuid() != 0:
        print("1..0 # the access matrix runs curl as other users: needs root")
        return 1
    env = Env()
    failed = 0
    print("1..%d" % len(tests))
    try:
        for i, t in enumerate(tests, 1):
            try:
                t(env)
                print("ok %d - %s" % (i, t.__name__))
            except Exception:
                failed += 1
                print("not ok %d - %s" % (i, t.__name__))
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
                for line in env.sim.daemon_log().splitlines()[-15:]:
                    print("# daemon: " + line)
            sys.stdout.flush()
    finally:
        env.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
