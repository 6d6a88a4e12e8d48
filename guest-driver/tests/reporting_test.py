# SPDX-License-Identifier: GPL-2.0
"""Free page reporting beside hugeroom, run by
`fake-daemon.py reporting SERIES`.

Users turn on virtio-balloon's free page reporting in the same guests:
the guest hands its free buddies of 2 MiB and more to the balloon,
whose QEMU discards them, and marks them PageReported.  The guest (1
GiB, a virtio-balloon-pci with free-page-reporting=on) runs memfill
(dense data, and data with every other 64 KiB chunk freed), then
touches and frees most of its memory and waits for the reports to
settle.  QEMU traces every discard (ram_block_discard_range, and the
device's virtio_hugeroom_discarded for a HOLD's).  Checks, as TAP:

* No block discarded twice: EVACUATE CHEAPEST takes blocks that are
  backed on the host, so QEMU's RssAnon falls by at least 90% of the
  held amount (the pages it migrates land in the holes of memfill's
  blocks, resident already).  Before, CHEAPEST took the wholly free blocks first, which the balloon
  had discarded already: the HOLDs freed next to nothing on the host
  and the guest gave up the memory for nothing.
* No block reported while held: no balloon discard touches a block
  between its HOLD and its RETURN.
* A returned block is reported again once free: after RETURN most
  returned blocks are discarded by the balloon again, after the RETURN
  (never before), and RssAnon falls back.
* memfill's checksums match, the views of the held set agree, dmesg is
  clean.
"""
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402

BLOCK = ht.BLOCK
RX_DISCARD = re.compile(r'ram_block_discard_range (\S+)@(0x[0-9a-f]+) \+ '
                        r'(0x[0-9a-f]+): .* ret: (-?\d+)')
RX_HOLD = re.compile(r'virtio_hugeroom_discarded gpa=(0x[0-9a-f]+)')


class Reporting(ht.Run):
    def main(self):
        kver, wd, initrd = self.prepare('reporting',
                                        modules='virtio_pci virtio_balloon')
        self.trace = os.path.join(wd, 'qemu-trace.log')
        return self.run(hrvm.Guest(
            hrvm.qemu_binary(), kver, None, initrd, wd, daemon=self.d,
            mem='1G',
            extra=['-device', 'virtio-balloon-pci,free-page-reporting=on',
                   '-trace', 'enable=ram_block_discard_range',
                   '-trace', 'enable=virtio_hugeroom_discarded',
                   '-D', self.trace]))

    def ram_base(self):
        """The host address of guest RAM (pc.ram at gpa 0 in a 1 GiB
        q35 guest), from HMP info ramblock."""
        out = self.g.qmp('human-monitor-command',
                         **{'command-line': 'info ramblock'})
        for line in out.splitlines():
            f = line.split()
            if f and f[0] == 'pc.ram':
                return int(f[-2] if f[-1] in ('ro', 'rw') else f[-1], 16)
        raise hrvm.Failure('no pc.ram in info ramblock:\n%s' % out)

    def events(self):
        """The trace so far: ('report' | 'hold', first block gpa, blocks),
        a discard followed at once by the device's trace of the same
        block being the HOLD's own."""
        with open(self.trace, errors='replace') as f:
            lines = f.read().splitlines()
        out = []
        for i, line in enumerate(lines):
            m = RX_HOLD.search(line)
            if m:
                out.append(('hold', int(m.group(1), 16), 1))
                continue
            m = RX_DISCARD.search(line)
            if not m or m.group(1) != 'pc.ram' or int(m.group(4)):
                continue
            gpa = int(m.group(2), 16) - self.base
            n = int(m.group(3), 16)
            nxt = lines[i + 1] if i + 1 < len(lines) else ''
            h = RX_HOLD.search(nxt)
            if h and int(h.group(1), 16) == gpa and n == BLOCK:
                continue
            if gpa % BLOCK or n % BLOCK:
                continue
            out.append(('report', gpa, n // BLOCK))
        return out

    def reported(self, events):
        """Blocks reported (discarded by the balloon), in event order."""
        return [(i, e[1] + k * BLOCK) for i, e in enumerate(events)
                if e[0] == 'report' for k in range(e[2])]

    def settle(self, what, timeout=180):
        """Until RssAnon stops falling (the reports are done)."""
        last = None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            time.sleep(5)
            rss = hrvm.rss_anon_kb(self.g.pid)
            if last is not None and abs(last - rss) < 4096:
                break
            last = rss
        hrvm.log('%s: RssAnon %d kB' % (what, rss))
        return rss

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        self.base = self.ram_base()
        hrvm.log('pc.ram at %#x' % self.base)
        out = g.cmd('sh ls /sys/bus/virtio/drivers/virtio_balloon/ | '
                    'grep -c virtio || true')
        self.ok(out and int(out[0]) >= 1, 'the balloon driver is bound')
        self.memfill('mf-dense', 64, 0, 11)
        self.memfill('mf-holes', 256, 16, 22)
        # every page resident in QEMU, then free: the balloon reports
        # the wholly free blocks
        mi = g.meminfo()
        g.cmd('sh /tools/pressure %d' % (mi['MemAvailable'] // 1024 - 96),
              timeout=900)
        rss0 = self.settle('reports settled')
        ev0 = self.events()
        rep0 = self.reported(ev0)
        self.ok(len(rep0) >= 64, 'free page reporting discarded %d blocks'
                % len(rep0))

        want = 32
        res, holds, _, _ = self.command(
            ht.evacuate(7001, want, flags=ht.CHEAPEST), 7001, timeout=900)
        self.ok(res['status'] == ht.S_OK and len(holds) == want,
                'EVACUATE CHEAPEST %d: S_OK' % want, str(res))
        self.views_agree('held')
        rss1 = hrvm.rss_anon_kb(g.pid)
        drop = rss0 - rss1
        hrvm.log('held %d: RssAnon %d -> %d kB (%d kB, %d expected)' %
                 (len(holds), rss0, rss1, drop, len(holds) * 2048))
        self.ok(drop >= len(holds) * 2048 * 9 // 10,
                'no block discarded twice: the holds free host memory, '
                'RssAnon fell by %d kB for %d blocks' % (drop, len(holds)))

        # reports while held (page reporting runs every 2 s)
        time.sleep(15)
        ev2 = self.events()
        held_since = {}
        for i, e in enumerate(ev2):
            if e[0] == 'hold':
                held_since[e[1]] = i
        during = [b for i, b in self.reported(ev2)
                  if b in held_since and i > held_since[b]]
        self.ok(not during, 'no block reported while held (%d)' %
                len(during), str([hex(b) for b in during]))

        mark = len(ev2)
        self.command(ht.ret(7002, len(self.held)), 7002)
        self.views_agree('returned')
        rss2 = self.settle('after RETURN')
        ev3 = self.events()
        again = {b for i, b in self.reported(ev3) if i >= mark} & set(holds)
        hrvm.log('after RETURN: %d of %d returned blocks reported again; '
                 'RssAnon %d kB' % (len(again), len(holds), rss2))
        self.ok(len(again) >= len(holds) // 2,
                'returned blocks are reported again once free (%d of %d)' %
                (len(again), len(holds)))
        self.verify('after the holds')
        dm = g.cmd('sh dmesg | grep -E "WARNING|BUG|Oops|corruption" '
                   '|| true')
        self.ok(not dm, 'dmesg clean', '\n'.join(dm))


def main(series):
    return Reporting(series).main()
