# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd plus hr-simguest on temporary sockets, and an API client."""

import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def http_get(sock, path):
    """GET on the API socket: (status, body text), whatever the status"""
    conn = UnixHTTPConnection(sock, timeout=30)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


def build_dir():
    d = os.environ.get("HUGEROOM_BUILD")
    if d:
        return d
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "build")


def sanitized_build():
    """whether build_dir() was set up with -Db_sanitize (scripts/sanitize.sh)"""
    import json
    info = os.path.join(build_dir(), "meson-info", "intro-buildoptions.json")
    with open(info) as f:
        opts = json.load(f)
    return any(o["name"] == "b_sanitize" and o["value"] not in ("none", [], "")
               for o in opts)


class SimSetup:
    """A daemon in a temporary directory; guests added with start_guests()."""

    def __init__(self, status_interval_ms=1000, extra_config="", libvirt_uri="", verbose=False):
        self.verbose = verbose
        b = build_dir()
        self.daemon_bin = os.path.join(b, "host", "hugeroomd")
        self.ctl_bin = os.path.join(b, "host", "hugeroomctl")
        self.sim_bin = os.path.join(b, "tests", "sim", "hr-simguest")
        self.dir = tempfile.mkdtemp(prefix="hugeroom-sim-")
        self.vm_sock = os.path.join(self.dir, "vm.sock")
        self.api_sock = os.path.join(self.dir, "api.sock")
        self.conf = os.path.join(self.dir, "hugeroomd.conf")
        with open(self.conf, "w") as f:
            # simulated guests free nothing on this host: a reservation
            # must not hold the real host's memory in its hugetlb pool
            # hr-simguest is not QEMU: let it in by its path; simulated
            # guests are nobody's libvirt domains, unless a test says where they are
            f.write("[hugeroomd]\nstatus_interval_ms=%d\nstate_dir=%s\nhold_in_pool=false\n"
                    "qemu_executables=%s\nlibvirt_uri=%s\n%s\n"
                    % (status_interval_ms, self.dir, os.path.realpath(self.sim_bin),
                       libvirt_uri, extra_config))
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.sims = []
        self._start_daemon()

    def _start_daemon(self):
        # benchmarks run the daemon under a tool: HUGEROOM_DAEMON_WRAPPER="valgrind ..."
        wrapper = shlex.split(os.environ.get("HUGEROOM_DAEMON_WRAPPER", ""))
        self.daemon = subprocess.Popen(
            wrapper + [self.daemon_bin, "-c", self.conf, "--vm-socket", self.vm_sock,
                       "--api-socket", self.api_sock, "-f"] + (["-v"] if self.verbose else []),
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + (120 if wrapper else 10)
        while not os.path.exists(self.api_sock):
            if self.daemon.poll() is not None or time.time() > deadline:
                raise RuntimeError("hugeroomd did not start: " + self.daemon_log())
            time.sleep(0.05)

    def restart_daemon(self):
        """Stop the daemon (SIGTERM) and start it again on the same state and sockets."""
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait(20)
        if os.path.exists(self.api_sock):
            os.unlink(self.api_sock)
        self._start_daemon()

    def daemon_log(self):
        with open(os.path.join(self.dir, "daemon.log")) as f:
            return f.read()[-4000:]

    def start_guests(self, n, mem_gib, prefix="sim", seed=1, extra=()):
        p = subprocess.Popen(
            [self.sim_bin, "--guests", str(n), "--mem-gib", str(mem_gib),
             "--socket", self.vm_sock, "--prefix", prefix, "--seed", str(seed)]
            + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.sims.append(p)
        line = p.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError("hr-simguest: %r %s" % (line, p.stderr.read()[-2000:]))
        return p

    def api(self, method, path, body=None, expect=200):
        conn = UnixHTTPConnection(self.api_sock)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json"} if data else {})
        r = conn.getresponse()
        text = r.read().decode()
        conn.close()
        if expect is not None and r.status != expect:
            raise AssertionError("%s %s: HTTP %d (expected %d): %s"
                                 % (method, path, r.status, expect, text[:500]))
        return json.loads(text) if text else None

    def rss_kib(self):
        with open("/proc/%d/status" % self.daemon.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def wait_statuses(self, n, timeout=60):
        """Every one of n guests connected with a status; returns the list."""
        deadline = time.time() + timeout
        while True:
            guests = self.api("GET", "/v1/guests")["guests"]
            ok = [g for g in guests if g["connected"] and g["seq"] is not None]
            if len(ok) >= n:
                return guests
            if time.time() > deadline:
                raise AssertionError("%d of %d guests have a status after %ds"
                                     % (len(ok), n, timeout))
            time.sleep(0.2)

    def close(self):
        for p in self.sims:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.log.close()
        if os.environ.get("HUGEROOM_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)
