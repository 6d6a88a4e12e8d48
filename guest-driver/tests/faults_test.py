# SPDX-License-Identifier: GPL-2.0
"""Driver test of faults around holds, run by `fake-daemon.py faults SERIES`.

Plays hugeroomd over the device's chardev (holds_test.FakeDaemon) and
drives a guest that loads the test build of the driver (debugfs
fault_inject).  Checks, printed as TAP:

* eventq stall: a HOLD whose chain the device pops only after the ack
  timeout, when the driver is about to send the next message.  The device
  must read the HOLD that was sent (not whatever the driver wrote next into
  a shared buffer), the late ack must be settled (the block becomes held,
  nothing stays in limbo), the job must stop taking blocks while the chain
  is stuck, and debugfs must count the timeout and the late ack.  Then the
  guest's, the relayed and the device's held sets must agree.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402

D = '/sys/kernel/debug/virtio_hugeroom'


class Faults(ht.Run):
    def main(self):
        kver, _ = hrvm.pick_kernel(self.series)
        wd = hrvm.workdir('hr-faults-%s' % self.series)
        ko = hrvm.build_module(kver, test=True)
        initrd = hrvm.build_initramfs(kver, ko, wd, tools=True)
        self.d = ht.FakeDaemon(wd)
        self.g = hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd, wd,
                            daemon=self.d, mem='1G')
        self.g.start()
        try:
            self.body()
        finally:
            self.g.stop()
        return self.tap.done()

    def counter(self, key):
        f = self.field(key)
        return int(f[0]) if f else None

    def free_blocks(self, n):
        """n MOVABLE candidate blocks with every page free, not held."""
        self.g.cmd('sh echo 1 >%s/report_now' % D)
        out = []
        for line in self.g.debugfs('status'):
            f = line.split()
            if (f and f[0] == 'candidate' and f[3] == '512' and
                    f[5] == '1' and int(f[1], 16) not in self.held):
                out.append(int(f[1], 16))
        return out[:n]

    def eventq_stall(self):
        g = self.g
        a, c = self.free_blocks(2)
        g.cmd('sh echo event_stall >%s/fault_inject' % D)
        t0 = time.monotonic()
        res, holds, _, _ = self.command(ht.evacuate(2001, 1, [a, c]), 2001,
                                        timeout=120)
        hrvm.log('stalled HOLD: RESULT after %.1f s, relayed HOLD gpas %s' %
                 (time.monotonic() - t0, [hex(x) for x in holds]))
        self.ok(res['tried'] == 1 and res['freed'] == 0 and
                res['failed'][ht.R_OTHER] == 1 and
                res['status'] == ht.S_PARTIAL,
                'eventq stuck: the job stops after the block whose HOLD got '
                'no ack (tried %d)' % res['tried'], str(res))
        self.ok(holds == [a],
                'the device read the stalled HOLD as sent (%s, want %#x)' %
                ([hex(x) for x in holds], a))
        self.views_agree('after the stalled HOLD')
        self.ok(self.held == {a},
                'the late ack settled the block as held (%s)' %
                [hex(x) for x in self.held])
        counts = {k: self.counter(k) for k in
                  ('event_timeouts', 'event_late_acks', 'eventq_stuck',
                   'hold_limbo', 'event_errors')}
        self.ok(counts['event_timeouts'] == 1 and
                counts['event_late_acks'] == 1 and
                counts['eventq_stuck'] == 0 and counts['hold_limbo'] == 0 and
                counts['event_errors'] >= 1,
                'debugfs counts the timeout and the late ack, nothing stuck '
                'or in limbo', str(counts))
        res, holds, _, _ = self.command(
            ht.evacuate(2002, 4, flags=ht.CHEAPEST), 2002)
        self.ok(res['status'] == ht.S_OK and len(holds) == 4,
                'after the stall: EVACUATE works again', str(res))
        self.views_agree('after the stall')

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        self.eventq_stall()

        self.views_agree('before rmmod')
        left = self.held
        g.cmd('sh rmmod virtio_hugeroom')
        msgs = d.drain()
        unl = [x for m in msgs if m['type'] == ht.RETURNED and
               m['reason'] == ht.RET_UNLOAD for x in m['gpas']]
        self.ok(set(unl) == left and len(unl) == len(left),
                'rmmod returned every held block (%d of %d)' %
                (len(unl), len(left)))
        self.ok(d.state[4] == 0, 'device holds nothing after rmmod')
        dm = g.cmd('sh dmesg | grep -E "BUG|WARNING|Oops|corruption" '
                   '|| true')
        self.ok(not dm, 'dmesg clean', '\n'.join(dm))


def main(series):
    return Faults(series).main()
