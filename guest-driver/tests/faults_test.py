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
* HOLDs the device acks ACK_OK without taking every block: a second DIMM,
  hot-added as a private mapping of a file (share=off), which the device
  must never discard, so it ends a HOLD at the first of its blocks with
  nr_done short of nr_blocks.  The RESULT and the held sets follow the ack
  (only the blocks before it held, the rest R_OTHER), and an EVACUATE
  CHEAPEST confined to that DIMM offers each block at most once and ends
  S_PARTIAL, instead of taking the refused blocks again until its budget
  runs out; afterwards they are free guest memory again.
"""
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402

D = '/sys/kernel/debug/virtio_hugeroom'
RANGES = 2


class Faults(ht.Run):
    def main(self):
        kver, wd, initrd = self.prepare('faults')
        # A 256 MiB DIMM at 4 GiB, for the hot-unplug check.
        return self.run(hrvm.Guest(
            hrvm.qemu_binary(), kver, None, initrd, wd, daemon=self.d,
            mem='1G,slots=2,maxmem=2G',
            extra=['-object', 'memory-backend-ram,id=dm0,size=256M',
                   '-device', 'pc-dimm,id=dimm0,memdev=dm0'],
            append='memhp_default_state=online_movable'))

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
        blocks = self.free_blocks(3)
        g.cmd('sh echo event_stall >%s/fault_inject' % D)
        t0 = time.monotonic()
        res, holds, _, _ = self.command(ht.evacuate(2001, 1, blocks), 2001,
                                        timeout=120)
        hrvm.log('stalled HOLD: RESULT after %.1f s, asked %s, relayed HOLD '
                 'gpas %s, %s' % (time.monotonic() - t0,
                                  [hex(x) for x in blocks],
                                  [hex(x) for x in holds], res))
        # One block wanted of three candidates.  The stall holds back the
        # first HOLD the job sends.  A candidate the guest allocated from
        # after the report fails before any HOLD, and the job rightly tries
        # the next: the stalled block is then a later one.  Either way the
        # job must not try another candidate after the HOLD that got no ack.
        stalled = holds[0] if len(holds) == 1 and holds[0] in blocks else None
        k = blocks.index(stalled) if stalled is not None else -1
        self.ok(stalled is not None and res['tried'] == k + 1 and
                res['freed'] == 0 and res['failed'][ht.R_OTHER] == 1 and
                sum(res['failed']) == k + 1 and
                res['status'] == ht.S_PARTIAL,
                'eventq stuck: the job stops after the block whose HOLD got '
                'no ack (block %d of %d, tried %d)' %
                (k + 1, len(blocks), res['tried']), str(res))
        self.ok(len(holds) == 1 and stalled is not None,
                'the device read the stalled HOLD as sent (%s, one of %s)' %
                ([hex(x) for x in holds], [hex(x) for x in blocks]))
        self.views_agree('after the stalled HOLD')
        self.ok(stalled is not None and self.held == {stalled},
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
        self.g.fault_inject("sweep_delay_ms", ms)

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

    def refused_hold(self):
        """The private-file DIMM: ACK_OK with nr_done short of the list."""
        g, d = self.g, self.d
        sysm = '/sys/devices/system/memory'
        g.qmp('object-add', **{'qom-type': 'memory-backend-file',
                               'id': 'dm1', 'size': 256 << 20,
                               'mem-path': self.wd, 'share': False})
        g.qmp('device_add', driver='pc-dimm', id='dimm1', memdev='dm1')
        dev = [m['data'] for m in g.qmp('query-memory-devices')
               if m['data'].get('id') == 'dimm1'][0]
        base, size = dev['addr'], dev['size']
        bs = int(g.cmd('sh cat %s/block_size_bytes' % sysm)[0], 16)

        def online():
            n = 0
            for line in g.cmd('sh cd %s; for m in memory*; do echo $m '
                              '$(cat $m/phys_index) $(cat $m/state); done'
                              % sysm):
                name, idx, state = line.split()
                if base <= int(idx, 16) * bs < base + size:
                    if state != 'online':
                        g.cmd('sh echo online_movable >%s/%s/state || true'
                              % (sysm, name))
                    n += 1
            return n == size // bs
        hrvm.wait_for(online, 60, 'the hot-added DIMM to come online')
        blocks = size // ht.BLOCK
        # Free MOVABLE blocks of machine RAM, from a sweep made now.
        a, c = [int(f[1], 16) for f in (x.split() for x in g.fresh_status())
                if f and f[0] == 'candidate' and f[3] == '512' and
                f[5] == '1' and int(f[1], 16) < base and
                int(f[1], 16) not in self.held][:2]
        b = base + 4 * ht.BLOCK
        d.drain(1)
        res, holds, _, _ = self.command(ht.evacuate(7001, 3, [a, b, c]),
                                        7001)
        self.ok(res['tried'] == 3 and res['freed'] == 1 and
                res['failed'][ht.R_OTHER] == 2 and
                res['status'] == ht.S_PARTIAL and holds == [a],
                'a HOLD acked OK up to the private-file block: only the '
                'block before it is held, the rest fail R_OTHER',
                '%s holds %s' % (res, [hex(x) for x in holds]))
        self.views_agree('after the HOLD that stopped early')
        self.ok(a in self.held and not {b, c} & self.held,
                'held: exactly the block the device took')
        free0 = g.meminfo()['MemFree']
        t0 = time.monotonic()
        rng = struct.pack('<QQ', base, base + size)
        cmd = (ht.hdr(ht.EVACUATE, ht.CHEAPEST | RANGES, 56, 7002) +
               struct.pack('<IIIIQ', 4, 0, 1, 60000, 0) + rng)
        res, holds, _, _ = self.command(cmd, 7002, timeout=300)
        took = time.monotonic() - t0
        self.ok(res['status'] == ht.S_PARTIAL and res['freed'] == 0 and
                0 < res['tried'] <= blocks and
                res['failed'][ht.R_OTHER] >= 1 and not holds,
                'EVACUATE CHEAPEST in the refused DIMM offers each of its '
                '%d blocks at most once and ends S_PARTIAL (tried %d, '
                '%.1f s)' % (blocks, res['tried'], took), str(res))
        self.views_agree('after the refused DIMM')
        self.ok(not any(base <= x < base + size for x in self.guest_held()),
                'no block of the refused DIMM is held')
        free1 = g.meminfo()['MemFree']
        self.ok(free1 >= free0 - 32768,
                'the refused blocks are free guest memory again (MemFree '
                '%d -> %d kB)' % (free0, free1))

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
        self.refused_hold()

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
