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
* A slow candidate sweep (fault_inject sweep_delay_ms, as on a guest of
  many TiB): EVACUATE CHEAPEST ends at its time budget and at a CANCEL
  during the sweep, not after it.
* Suspend (pm_test devices) while an EVACUATE is still sweeping succeeds:
  the job ends S_CANCELLED before the freezer runs, and EVACUATE works
  after resume.
* Reports and held blocks: a report right after an EVACUATE lists no held
  block as a candidate (the sweep it carries may predate the holds), and
  held blocks leave the movable histogram (no longer counted as fully used
  movable blocks).
* Admission: an EVACUATE CHEAPEST of more blocks than the guest can give
  ends with R_NOMEM while MemAvailable is still 1/32 of MemTotal above the
  sum of the high watermarks.
* Memory hot-unplug: blocks held in a 256 MiB pc-dimm (onlined movable)
  go back (RETURNED reason unload) when its memory blocks go offline, and
  the offlining succeeds instead of retrying until it is killed.
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
        # A 256 MiB DIMM at 4 GiB, for the hot-unplug check.
        return self.in_guest('hr-faults', True, mem='1G,slots=2,maxmem=2G',
                             extra=['-object', 'memory-backend-ram,id=dm0,'
                                    'size=256M',
                                    '-device', 'pc-dimm,id=dimm0,memdev=dm0'],
                             append='memhp_default_state=online_movable')

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

    def sweep_delay(self, ms):
        self.g.cmd('sh echo "sweep_delay_ms %d" >%s/fault_inject' % (ms, D))

    def slow_sweep(self):
        # 1 s per 64 blocks: a sweep of this 1 GiB guest takes >= 7 s.
        self.sweep_delay(1000)
        res, _, _, _ = self.command(
            ht.evacuate(3001, 4, flags=ht.CHEAPEST, budget_ms=500), 3001,
            timeout=120)
        ms = res['elapsed_us'] // 1000
        self.ok(res['status'] == ht.S_BUDGET and res['tried'] == 0 and
                ms < 3000,
                'a slow sweep ends at the 500 ms budget (%d ms)' % ms,
                str(res))
        self.d.send(ht.evacuate(3002, 4, flags=ht.CHEAPEST))
        time.sleep(1)
        self.d.send(ht.cancel(3002))
        res, _, _, _ = self.command(None, 3002, timeout=120)
        ms = res['elapsed_us'] // 1000
        self.ok(res['status'] == ht.S_CANCELLED and res['tried'] == 0 and
                ms < 4000,
                'a CANCEL ends a slow sweep (%d ms)' % ms, str(res))
        self.sweep_delay(0)

    def suspend_during_job(self):
        g, d = self.g, self.d
        d.drain(1)
        self.views_agree('before suspend')
        left = self.held
        # 3 s per 64 blocks: this job runs longer than the freezer's 20 s.
        self.sweep_delay(3000)
        d.send(ht.evacuate(3003, 8, flags=ht.CHEAPEST))
        time.sleep(2)
        t0 = time.monotonic()
        out = g.cmd('sh echo devices >/sys/power/pm_test; '
                    '(echo freeze >/sys/power/state && echo SUSPEND-OK) || '
                    'echo SUSPEND-FAILED; echo none >/sys/power/pm_test',
                    timeout=300)
        took = time.monotonic() - t0
        self.sweep_delay(0)
        res, _, _, _ = self.command(None, 3003, timeout=120)
        dm = g.cmd('sh dmesg | grep -iE "freezing|PM: suspend" || true')
        hrvm.log('suspend: %s' % dm)
        self.ok(any('SUSPEND-OK' in x for x in out),
                'suspend during a long EVACUATE succeeds (%.1f s)' % took,
                '\n'.join(out + dm))
        self.ok(res['status'] == ht.S_CANCELLED,
                'the EVACUATE ended S_CANCELLED before the freeze',
                str(res))
        msgs = d.drain()
        unl = {x for m in msgs if m['type'] == ht.RETURNED and
               m['reason'] == ht.RET_UNLOAD for x in m['gpas']}
        self.ok(unl == left, 'freeze returned every held block (%d of %d)' %
                (len(unl), len(left)))
        self.views_agree('after resume')
        res, holds, _, _ = self.command(
            ht.evacuate(3004, 4, flags=ht.CHEAPEST), 3004)
        self.ok(res['status'] == ht.S_OK and len(holds) == 4,
                'after resume: EVACUATE works again', str(res))

    def hot_unplug(self):
        g, d = self.g, self.d
        sysm = '/sys/devices/system/memory'
        bs = int(g.cmd('sh cat %s/block_size_bytes' % sysm)[0], 16)
        dimm = []
        for line in g.cmd('sh cd %s; for m in memory*; do echo $m '
                          '$(cat $m/phys_index); done' % sysm):
            name, idx = line.split()
            if int(idx, 16) * bs >= 4 << 30:
                dimm.append((name, int(idx, 16) * bs))
        dimm.sort(key=lambda x: x[1])
        # memhp_default_state onlines it movable where the kernel onlines
        # hotplugged memory by itself; elsewhere it is still offline.
        for name, _ in dimm:
            g.cmd('sh m=%s/%s; [ "$(cat $m/state)" = online ] || '
                  'echo online_movable >$m/state' % (sysm, name))
        self.ok(len(dimm) == 256 * 2**20 // bs,
                'the DIMM is online movable (%d memory blocks)' % len(dimm))
        gpas = [base + i * ht.BLOCK for _, base in dimm
                for i in range(bs // ht.BLOCK)][:8]
        d.drain(1)
        res, holds, _, _ = self.command(ht.evacuate(4001, 8, gpas), 4001)
        self.ok(res['status'] == ht.S_OK and sorted(holds) == gpas,
                'EVACUATE held 8 blocks of the DIMM', str(res))
        self.views_agree('DIMM blocks held')
        name = dimm[0][0]
        out = g.cmd('sh timeout 60 sh -c "echo offline >%s/%s/state" && '
                    'echo OFFLINE-OK || echo OFFLINE-FAILED' % (sysm, name),
                    timeout=120)
        msgs = d.drain()
        unl = {x for m in msgs if m['type'] == ht.RETURNED and
               m['reason'] == ht.RET_UNLOAD for x in m['gpas']}
        self.ok(any('OFFLINE-OK' in x for x in out),
                'the DIMM memory block with held blocks goes offline', out)
        self.ok(unl == set(gpas) and not (self.guest_held() & set(gpas)),
                'its held blocks went back with RETURNED reason unload (%d)'
                % len(unl))
        self.views_agree('after offlining')

    def hist_sum(self, lines):
        return sum(sum(int(x) for x in f[5:]) for f in
                   (line.split() for line in lines)
                   if len(f) > 5 and f[0] == 'zone' and f[4] == 'hist')

    def report_held(self):
        g = self.g
        before = self.hist_sum(g.fresh_status())
        res, holds, _, _ = self.command(
            ht.evacuate(5001, 16, flags=ht.CHEAPEST), 5001)
        self.views_agree('16 more held')
        g.cmd('sh echo 1 >%s/report_now' % D)
        cands = {int(f[1], 16) for f in (line.split() for line in
                                          g.debugfs('status'))
                 if f and f[0] == 'candidate'}
        self.ok(res['status'] == ht.S_OK and not (cands & self.held),
                'the next report lists no held block as a candidate (%d of '
                '%d)' % (len(cands & self.held), len(cands)))
        after = self.hist_sum(g.fresh_status())
        self.ok(before - after >= 12,
                'held blocks leave the movable histogram (%d -> %d blocks)' %
                (before, after))

    def admission(self):
        g = self.g
        res, holds, _, _ = self.command(
            ht.evacuate(6001, 1000, flags=ht.CHEAPEST, budget_ms=300000),
            6001, timeout=900)
        mi = g.meminfo()
        high = sum(int(f[1]) for f in (line.split() for line in
                                        g.cmd('sh cat /proc/zoneinfo'))
                   if len(f) == 2 and f[0] == 'high')
        floor = high * 4 + mi['MemTotal'] // 32
        self.ok(res['failed'][ht.R_NOMEM] >= 1 and
                mi['MemAvailable'] >= floor - 2048,
                'admission stops at MemAvailable %d kB, floor %d kB (%d '
                'held)' % (mi['MemAvailable'], floor, len(holds)), str(res))
        self.views_agree('at the admission limit')
        res, _, _, _ = self.command(ht.ret(6002, len(self.held)), 6002)
        self.views_agree('after giving them back')

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        self.hot_unplug()
        self.eventq_stall()
        self.report_held()
        self.admission()
        self.slow_sweep()
        self.suspend_during_job()

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
