#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host side of the driver's cmdq test: a minimal hugeroomd stand-in.

Listens on a Unix socket for the virtio-hugeroom device (QEMU -chardev
socket,server=off), and once the driver is up (DEVICE_STATE driver_ok=1):
  1. sends HOST_CMD REPORT (request id 101) and expects a STATUS carrying 101;
  2. sends SET_INTERVAL 200 ms and expects periodic STATUS (request id 0)
     at roughly that cadence;
  3. sends SET_INTERVAL 0 and expects the periodic reports to stop.
Prints TAP and exits non-zero on failure.

Usage: fake-daemon.py SOCKET_PATH [TIMEOUT_S]
       fake-daemon.py holds SERIES        (6.12 or 6.1)
       fake-daemon.py faults SERIES       (6.12 or 6.1)
       fake-daemon.py pressure SERIES     (6.12 or 6.1)
       fake-daemon.py pcp SERIES          (6.12 or 6.1)
       fake-daemon.py shutdown SERIES     (6.12 or 6.1)
       fake-daemon.py evac-order SERIES   (6.12 or 6.1)
       fake-daemon.py claims SERIES       (6.12 or 6.1)
       fake-daemon.py reporting SERIES    (6.12, 6.1 or sid)

"holds" boots a guest itself (tests/vm/hrvm.py, the patched QEMU, the
guest agent and memfill) with this script as its daemon, and drives
EVACUATE (CHEAPEST and explicit), CAPTURE, RETURN and CANCEL through the
device: RESULT arithmetic, HOLD/RETURNED relays against debugfs "held",
guest MemTotal and QEMU RssAnon against the held amount, a pinned block
failing with R_UNMOVABLE, memory pressure returning blocks without an OOM
kill, memfill checksums, and everything given back on rmmod.
"""
import os
import socket
import struct
import sys
import time

MAGIC = 0x48524348
HELLO, WELCOME, GUEST_MSG, HOST_CMD, DEVICE_STATE, SET_INTERVAL = range(1, 7)
MSG_STATUS, CMD_REPORT = 1, 16


def frame(t, payload):
    return struct.pack('<IHHII', MAGIC, 1, t, len(payload), 0) + payload


class Peer:
    def __init__(self, conn):
        self.c = conn
        self.buf = b''

    def next_frame(self, deadline):
        while True:
            if len(self.buf) >= 16:
                magic, _, t, ln, _ = struct.unpack('<IHHII', self.buf[:16])
                if magic != MAGIC:
                    raise RuntimeError('bad magic %#x' % magic)
                if len(self.buf) >= 16 + ln:
                    p = self.buf[16:16 + ln]
                    self.buf = self.buf[16 + ln:]
                    return t, p
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None
            self.c.settimeout(left)
            try:
                d = self.c.recv(65536)
            except socket.timeout:
                return None, None
            if not d:
                raise EOFError
            self.buf += d


def status_of(t, p):
    """(seq, request_id, time) of a relayed STATUS, else None."""
    if t != GUEST_MSG or len(p) < 208:
        return None
    mtype, _, _, req = struct.unpack('<HHIQ', p[:16])
    if mtype != MSG_STATUS:
        return None
    return struct.unpack('<Q', p[16:24])[0], req, time.monotonic()


def main():
    path = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 240
    end = time.monotonic() + timeout
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    s.settimeout(timeout)
    conn, _ = s.accept()
    peer = Peer(conn)
    results = []

    def check(ok, desc):
        results.append(ok)
        print('%s %d - %s' % ('ok' if ok else 'not ok', len(results), desc),
              flush=True)

    print('TAP version 13\n1..4', flush=True)
    # Wait for the driver: DEVICE_STATE with driver_ok set.
    while True:
        t, p = peer.next_frame(end)
        if t is None:
            check(False, 'driver came up')
            return 1
        if t == HELLO:
            peer.c.sendall(frame(WELCOME, struct.pack('<II', 1, 0)))
        if t == DEVICE_STATE and struct.unpack('<QQQQIIII', p)[5]:
            break
    check(True, 'driver came up')

    peer.c.sendall(frame(HOST_CMD, struct.pack('<HHIQ', CMD_REPORT, 0, 16,
                                                101)))
    got = None
    while got is None:
        t, p = peer.next_frame(min(end, time.monotonic() + 30))
        if t is None:
            break
        st = status_of(t, p)
        if st and st[1] == 101:
            got = st
    check(got is not None, 'REPORT 101 answered by a STATUS carrying 101')

    peer.c.sendall(frame(SET_INTERVAL, struct.pack('<II', 200, 0)))
    periodic = []
    stop = time.monotonic() + 6
    while time.monotonic() < stop:
        t, p = peer.next_frame(stop)
        st = status_of(t, p) if t else None
        if st and st[1] == 0:
            periodic.append(st)
    gaps = [b[2] - a[2] for a, b in zip(periodic, periodic[1:])]
    seqs_ok = all(b[0] == a[0] + 1 for a, b in zip(periodic, periodic[1:]))
    print('# %d periodic reports in 6 s, gaps %s' %
          (len(periodic), ['%.2f' % g for g in gaps[:10]]), flush=True)
    # 200 ms under TCG: expect well over 6 reports and consecutive seqs.
    check(len(periodic) >= 10 and seqs_ok,
          'SET_INTERVAL 200 gives periodic reports with consecutive seq')

    peer.c.sendall(frame(SET_INTERVAL, struct.pack('<II', 0, 0)))
    time.sleep(1)   # let one in-flight report drain
    quiet = []
    stop = time.monotonic() + 3
    while time.monotonic() < stop:
        t, p = peer.next_frame(stop)
        st = status_of(t, p) if t else None
        if st and st[1] == 0:
            quiet.append(st)
    check(not quiet, 'SET_INTERVAL 0 stops periodic reports (%d seen)' %
          len(quiet))
    conn.close()
    return 0 if all(results) else 1


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == 'holds':
        import holds_test  # noqa: E402  (next to this file)
        sys.exit(holds_test.main(sys.argv[2] if len(sys.argv) > 2
                                 else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'shutdown':
        import shutdown_test  # noqa: E402  (next to this file)
        sys.exit(shutdown_test.main(sys.argv[2] if len(sys.argv) > 2
                                    else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'pcp':
        import pcp_test  # noqa: E402  (next to this file)
        sys.exit(pcp_test.main(sys.argv[2] if len(sys.argv) > 2
                               else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'faults':
        import faults_test  # noqa: E402  (next to this file)
        sys.exit(faults_test.main(sys.argv[2] if len(sys.argv) > 2
                                  else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'evac-order':
        import evac_order_test  # noqa: E402  (next to this file)
        sys.exit(evac_order_test.main(sys.argv[2] if len(sys.argv) > 2
                                      else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'claims':
        import claims_test  # noqa: E402  (next to this file)
        sys.exit(claims_test.main(sys.argv[2] if len(sys.argv) > 2
                                  else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'reporting':
        import reporting_test  # noqa: E402  (next to this file)
        sys.exit(reporting_test.main(sys.argv[2] if len(sys.argv) > 2
                                     else '6.12'))
    if len(sys.argv) > 1 and sys.argv[1] == 'pressure':
        import pressure_test  # noqa: E402  (next to this file)
        sys.exit(pressure_test.main(sys.argv[2] if len(sys.argv) > 2
                                    else '6.12'))
    sys.exit(main())
