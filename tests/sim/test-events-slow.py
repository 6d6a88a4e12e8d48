#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""An event-stream client that falls more than 4 MiB behind is dropped; the
daemon and its other clients go on. TAP output.

64 simulated guests report every 20 ms, a status event each. One client of
GET /v1/events reads everything; another reads the answer's head and then
nothing, with a small receive buffer. The daemon queues the slow client's
events until the next would take it past HR_EVENTS_MAX_QUEUED (4 MiB),
then closes it, logs how far behind it was and counts it in
hugeroom_api_event_clients_dropped_total; the reading client keeps getting
events and the API keeps answering, also once the reading client has
said nothing for longer than an idle API connection may (the daemon
closed every event stream after 15 s of it).
"""

import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import SimSetup, UnixHTTPConnection  # noqa: E402

MAX_QUEUED = 4 << 20  # host/hr-events.h
IDLE_TIMEOUT_S = 15  # HR_API_IDLE_TIMEOUT_S, host/api/hr-api-http.c
GUESTS = 64
INTERVAL_MS = 20

tap = Tap()
check = tap.ok


def events_client(sock_path, rcvbuf=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(sock_path)
    s.sendall(b"GET /v1/events?types=status HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.settimeout(30)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            raise AssertionError("the event stream closed before its head: %r" % head)
        head += chunk
    return s, head


def metric(s, name):
    conn = UnixHTTPConnection(s.api_sock)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    m = re.search(r"(?m)^%s (\S+)$" % name, text)
    return float(m.group(1)) if m else None


def main():
    s = SimSetup()
    fast = slow = None
    try:
        s.start_guests(GUESTS, 1, extra=["--interval-ms", str(INTERVAL_MS)])
        s.wait_statuses(GUESTS)
        fast, head = events_client(s.api_sock)
        fast_since = time.monotonic()
        check(head.startswith(b"HTTP/1.1 200"), "the reading client gets the stream",
              head.decode(errors="replace"))
        received = [0]
        stop = threading.Event()

        def read_fast():
            while not stop.is_set():
                try:
                    chunk = fast.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    return
                received[0] += len(chunk)
        fast.settimeout(1)
        reader = threading.Thread(target=read_fast)
        reader.start()
        slow, head = events_client(s.api_sock, rcvbuf=4096)
        check(head.startswith(b"HTTP/1.1 200"), "the slow client gets the stream's head")

        pattern = re.compile(r"an event client fell (\d+) bytes behind: dropped")
        deadline = time.time() + 60
        m = None
        while time.time() < deadline and m is None:
            m = pattern.search(s.daemon_log())
            time.sleep(0.2)
        check(m is not None, "the daemon drops the client that does not read", s.daemon_log())
        behind = int(m.group(1)) if m else 0
        # it is dropped when the next event would pass 4 MiB, not before
        check(MAX_QUEUED - 64 * 1024 < behind <= MAX_QUEUED,
              "it was %d bytes behind when dropped (the limit is %d)" % (behind, MAX_QUEUED))
        check(metric(s, "hugeroom_api_event_clients_dropped_total") == 1
              and metric(s, "hugeroom_api_event_clients") == 1,
              "/metrics counts one client dropped, one still connected")

        # the slow client finds its connection closed once it reads what got through
        slow.settimeout(30)
        got = 0
        try:
            while True:
                chunk = slow.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
            closed = True
        except socket.timeout:
            closed = False
        check(closed and got <= MAX_QUEUED + (1 << 20),
              "the slow client's stream ends after %d bytes" % got)

        before = received[0]
        time.sleep(1)
        check(received[0] > before, "the reading client still gets events (%d bytes in 1 s)"
              % (received[0] - before))
        check(s.daemon.poll() is None and len(s.api("GET", "/v1/guests")["guests"]) == GUESTS,
              "the daemon goes on answering", s.daemon_log())
        time.sleep(max(0.0, fast_since + IDLE_TIMEOUT_S + 2 - time.monotonic()))
        before = received[0]
        time.sleep(1)
        check(reader.is_alive() and received[0] > before,
              "the reading client still gets events after %.0f s without a word to the "
              "daemon (%d bytes in 1 s)" % (time.monotonic() - fast_since, received[0] - before))
        stop.set()
        reader.join()
    except Exception as e:  # a crash is a failure, with the daemon's log
        check(False, "unexpected %s: %s" % (type(e).__name__, e), s.daemon_log())
    finally:
        for c in (fast, slow):
            if c is not None:
                c.close()
        s.close()
    return tap.done()


sys.exit(main())
