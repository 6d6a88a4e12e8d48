#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd's side of Type=notify, the watchdog and socket activation.

This machine's PID 1 is not systemd, so the test plays the service manager:
systemd-socket-activate (from the systemd package) listens on the API socket
and starts the real hugeroomd with it on the first connection (LISTEN_FDS,
LISTEN_PID), and the test listens on $NOTIFY_SOCKET for what the daemon
sends: READY=1 once it serves, WATCHDOG=1 at half of WATCHDOG_USEC from its
main loop, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 at SIGTERM.
The API works on the passed socket, and the daemon leaves that socket's
file to its owner. A WATCHDOG_PID of another process means no pings. TAP.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import UnixHTTPConnection, build_dir  # noqa: E402

tap = Tap()
check = tap.ok

WATCHDOG_USEC = 400000



class Notify:
    """The service manager's end of $NOTIFY_SOCKET."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.got = []

    def collect(self, seconds):
        """Every datagram for @seconds, each with its arrival time."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                return
            self.got.append((time.monotonic(), data.decode()))

    def wait_for(self, prefix, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, msg in self.got:
                if msg.startswith(prefix):
                    return msg
            self.collect(0.1)
        return None

    def log(self):
        return "\n".join(repr(m) for _, m in self.got)


def daemon_args(d, api):
    conf = os.path.join(d, "hugeroomd.conf")
    with open(conf, "w") as f:
        f.write("[hugeroomd]\nstate_dir=%s\nhold_in_pool=false\n" % d)
    return [os.path.join(build_dir(), "host", "hugeroomd"), "-f", "-v", "-c", conf,
            "--vm-socket", os.path.join(d, "vm.sock"), "--api-socket", api]


def get_host(api):
    conn = UnixHTTPConnection(api, timeout=20)
    conn.request("GET", "/v1/host")
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def test_activated(d):
    api = os.path.join(d, "api.sock")
    notify = Notify(os.path.join(d, "notify.sock"))
    log = open(os.path.join(d, "daemon.log"), "w")
    # the service manager's environment: only what it sets
    env = ["-E", "NOTIFY_SOCKET=" + notify.path, "-E", "WATCHDOG_USEC=%d" % WATCHDOG_USEC]
    proc = subprocess.Popen(["systemd-socket-activate", "-l", api] + env + daemon_args(d, api),
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        # the first connection starts hugeroomd, which answers it on the
        # passed socket; the file exists once systemd-socket-activate has
        # bound it, but connections are refused until it listens
        deadline = time.time() + 10
        while True:
            try:
                status, body = get_host(api)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        check(status == 200 and b'"nodes"' in body,
              "the API answers on the socket systemd-socket-activate passed", body[:300])
        ready = notify.wait_for("READY=1")
        check(ready is not None and "STATUS=listening for devices" in ready,
              "READY=1 with a STATUS once it serves", notify.log())
        with open(os.path.join(d, "daemon.log")) as f:
            text = f.read()
        check("%s: using the socket the service manager passed (fd 3)" % api in text,
              "hugeroomd took the passed socket (fd 3), not a new one", text)
        notify.got = []
        notify.collect(1.2)
        pings = [t for t, m in notify.got if m == "WATCHDOG=1"]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        check(len(pings) >= 4 and all(g < WATCHDOG_USEC / 1e6 for g in gaps),
              "WATCHDOG=1 every %.0f ms from the main loop (%d pings in 1.2 s)"
              % (1000 * sum(gaps) / max(len(gaps), 1), len(pings)), notify.log())
        notify.got = []
        proc.send_signal(signal.SIGHUP)
        reloading = notify.wait_for("RELOADING=1")
        check(reloading is not None and "MONOTONIC_USEC=" in reloading and
              notify.wait_for("READY=1") is not None,
              "SIGHUP: RELOADING=1 then READY=1", notify.log())
        notify.got = []
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15)
        notify.collect(0.2)
        check(rc == 0 and any(m == "STOPPING=1" for _, m in notify.got),
              "SIGTERM: STOPPING=1 and exit 0 (exit %s)" % rc, notify.log())
        check(os.path.exists(api), "the passed socket's file is left to the service manager")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def test_other_pid(d):
    api = os.path.join(d, "api2.sock")
    notify = Notify(os.path.join(d, "notify2.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=notify.path, WATCHDOG_USEC=str(WATCHDOG_USEC),
               WATCHDOG_PID="1")
    proc = subprocess.Popen(daemon_args(d, api), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        ready = notify.wait_for("READY=1")
        notify.collect(0.8)
        check(ready is not None and not any(m == "WATCHDOG=1" for _, m in notify.got),
              "a watchdog meant for another pid (WATCHDOG_PID=1): no pings", notify.log())
    finally:
        proc.terminate()
        proc.wait(15)


def main():
    d = tempfile.mkdtemp(prefix="hugeroom-systemd-")
    try:
        test_activated(d)
        test_other_pid(d)
    except Exception as e:  # a crash is a failure
        check(False, "unexpected %s: %s" % (type(e).__name__, e))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
