# SPDX-License-Identifier: GPL-2.0
"""Hole claims against the rest of the guest, run by
`fake-daemon.py claims SERIES` (6.12, 6.1 or sid: 6.17 to 6.19 have no
claims; on 7.x they are balloon pages, README "Claiming holes").

A running EVACUATE claims the free pages of the blocks it empties later
(guest-driver/README.md, "Claiming holes"): up to 2048 blocks' worth,
for as long as the pass runs.  The guest is booted with panic_on_warn=1;
memfill touches most of it and frees every other 64 KiB chunk, and the
blocks it left half used are asked for with EVACUATE CHEAPEST|RANGES and
claim_holes=2, each block of the pass delayed (debugfs fault_inject
block_delay_ms, a test aid), so that the claims sit.  Checks, as TAP:

* Isolation: a contiguous allocation over a claimed block (debugfs
  "contig", a test aid that calls alloc_contig_range() as virtio-mem's
  unplug does) succeeds while the claims sit: the claim is given up to
  the isolation (evac_claims_isolated), the block leaves the claims.
  Before, claimed pages refused isolation: every such allocation failed
  -EBUSY (virtio-mem unplug and gigantic pages over claimed ranges), and
  the isolator's reference racing free_contig_range() warned "pages are
  still in use", a panic with panic_on_warn.
* Pressure: an allocation burst of more than the free memory and the
  held blocks, by a third of what the claims hold, while the claims sit,
  completes without an OOM kill, and the claims went back under pressure
  (evac_claims_pressure).  Before, the pressure trigger, the shrinker
  and the OOM notifier gave back held blocks only, and the burst was
  OOM-killed (or killed memfill) while the claims stayed.
* 7.x (sid): the claims are balloon pages, so /proc/meminfo's Balloon
  shows exactly the claimed pages while they sit (also after some were
  given up to an isolation, which the balloon core does not count off),
  and what it showed before the pass once the pass ended.
* No WARNING, BUG or panic in the guest's log, memfill's checksums
  match, the views of the held set agree, rmmod gives everything back.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402
import evac_order_test as eo  # noqa: E402

D = '/sys/kernel/debug/virtio_hugeroom'
PAGE_KB = 4


class Claims(ht.Run):
    def main(self):
        kver, wd, initrd = self.prepare('claims')
        return self.run(hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd,
                                   wd, daemon=self.d, mem='1G',
                                   append='panic_on_warn=1'))

    def claims(self):
        """{gpa: claimed pages} of the running pass (debugfs claimed_blocks)."""
        out = {}
        for line in self.g.debugfs('claimed_blocks'):
            f = line.split()
            if len(f) == 2:
                out[int(f[0], 16)] = int(f[1])
        return out

    def counter(self, key):
        return int(self.field(key)[0])

    def balloon_kb(self):
        """/proc/meminfo's Balloon (kB), None where it has none (6.x);
        the per-cpu vmstat deltas folded first (vm.stat_refresh)."""
        self.g.cmd('sh echo 1 >/proc/sys/vm/stat_refresh')
        return self.g.meminfo().get('Balloon')

    def balloon_matches(self, base, what):
        """On 7.x: does Balloon say base + the claimed pages?  (A few
        tries: the pass gives a block's claim back between the reads.)"""
        if base is None:
            return
        for _ in range(5):
            out = self.g.cmd('sh echo 1 >/proc/sys/vm/stat_refresh; '
                             'grep ^Balloon: /proc/meminfo; '
                             'grep ^evac_claimed %s/status' % D)
            kb = int(out[0].split()[1])
            claimed = int(out[1].split()[1])
            if kb == base + claimed * PAGE_KB:
                break
            time.sleep(0.5)
        self.ok(kb == base + claimed * PAGE_KB and claimed > 0,
                '%s: Balloon %d kB is what it was before the pass (%d kB) '
                'and the %d claimed pages' % (what, kb, base, claimed))

    def balloon_back(self, base, what):
        """On 7.x: is Balloon what it was before the pass?"""
        if base is None:
            return
        kb = self.balloon_kb()
        self.ok(kb == base, '%s: Balloon %d kB, as before the pass (%d kB)' %
                (what, kb, base))

    def backed(self):
        occ = eo.occupancy(self.g)
        return {a: f for a, (f, mt) in occ.items()
                if mt == eo.MT_MOVABLE and
                eo.BACKED_MIN_FREE <= f <= eo.BACKED_MAX_FREE}

    def start_pass(self, rid, count, delay_ms):
        backed = self.backed()
        count = min(count, len(backed) // 2)
        self.g.fault_inject("block_delay_ms", delay_ms)
        self.d.send(eo.evacuate_ranges(rid, count, eo.ranges_of(backed)))
        hrvm.log('request %d: %d of %d half-used blocks asked for, %d ms '
                 'a block' % (rid, count, len(backed), delay_ms))
        # until the pass has made its claims: the sum stops growing
        cl, last = {}, -1
        end = time.monotonic() + 300
        while time.monotonic() < end:
            cl = self.claims()
            if len(cl) >= 10 and sum(cl.values()) <= last:
                break
            last = sum(cl.values())
            time.sleep(3)
        return count, cl

    def end_pass(self, rid):
        self.g.fault_inject("block_delay_ms", 0)
        self.d.send(ht.cancel(rid))
        res, _, _, _ = self.command(None, rid, timeout=600)
        return res

    def isolation(self):
        g = self.g
        base = self.balloon_kb()
        count, cl = self.start_pass(9001, 60, 2000)
        self.ok(len(cl) >= 10, 'the pass claims the holes of %d blocks '
                '(%d pages)' % (len(cl), sum(cl.values())))
        self.balloon_matches(base, 'claims sit')
        iso0 = self.counter('evac_claims_isolated')
        # the blocks the pass empties last: it does not reach them soon
        tried = sorted(cl)[-16:]
        ok = []
        for gpa in tried:
            out = g.cmd('sh echo %#x >%s/contig 2>/dev/null; echo rc=$?' %
                        (gpa, D))
            if out and out[-1] == 'rc=0':
                ok.append(gpa)
        left = self.claims()
        iso1 = self.counter('evac_claims_isolated')
        hrvm.log('contig over %d claimed blocks: %d taken; %d claimed pages '
                 'given up to isolation' % (len(tried), len(ok), iso1 - iso0))
        self.ok(tried and len(ok) == len(tried) and iso1 > iso0 and
                not any(a in left for a in ok),
                'contiguous allocations over claimed blocks succeed while '
                'the claims sit (%d of %d; %d pages given up)' %
                (len(ok), len(tried), iso1 - iso0))
        self.balloon_matches(base, 'claims given up to isolation')
        res = self.end_pass(9001)
        self.ok(res['status'] in (ht.S_OK, ht.S_CANCELLED, ht.S_PARTIAL) and
                not self.claims(),
                'the pass ends with its claims given back (status %d)' %
                res['status'], str(res))
        self.balloon_back(base, 'the isolation pass ended')
        self.views_agree('after the isolation pass')
        self.command(ht.ret(9100, len(self.held)), 9100)
        self.views_agree('isolation pass returned')

    def pressure(self, rid=9201):
        g, d = self.g, self.d
        base = self.balloon_kb()
        count, cl = self.start_pass(rid, 400, 10000)
        claimed = self.counter('evac_claimed')
        self.balloon_matches(base, 'claims sit before the burst')
        mi = g.meminfo()
        held = len(self.guest_held())
        claimed_mib = claimed * PAGE_KB // 1024
        # More than free memory and the held blocks by a third of the
        # claims, less than all of them by two thirds of the claims: met
        # only if the claims go back.
        need = mi['MemFree'] // 1024 + 2 * held + claimed_mib // 3
        hrvm.log('burst: MemFree %d kB, %d held, %d claimed pages (%d MiB) '
                 'in %d blocks: %d MiB' % (mi['MemFree'], held, claimed,
                                           claimed_mib, len(cl), need))
        self.ok(claimed_mib >= 64, 'the pass claims %d MiB before the burst' %
                claimed_mib)
        keys = ('evac_claims_pressure', 'evac_claims_isolated',
                'evac_claimed', 'pressure_polls', 'pressure_returns')
        c0 = {k: self.counter(k) for k in keys}
        p0 = c0['evac_claims_pressure']
        # the driver's pressure messages (dev_dbg) into the log
        g.cmd("sh echo 'file hr_hold.c +p' "
              ">/sys/kernel/debug/dynamic_debug/control || true")
        out = g.cmd('sh /tools/pressure %d; echo rc=$?' % need, timeout=900)
        c1 = {k: self.counter(k) for k in keys}
        p1 = c1['evac_claims_pressure']
        hrvm.log('burst: %s' % ', '.join('%s %d -> %d' % (k, c0[k], c1[k])
                                         for k in keys))
        dml = g.cmd('sh dmesg')
        dm = '\n'.join(dml)
        oom = [i for i, x in enumerate(dml) if 'invoked oom-killer' in x]
        for x in dml[oom[0]:oom[0] + 80] if oom else ():
            hrvm.log('oom: %s' % x)
        for x in dml:
            if 'virtio_hugeroom' in x and 'pressure' in x:
                hrvm.log('dmesg: %s' % x)
        hrvm.log('pressure %d MiB: %s; claims given back under pressure: '
                 '%d pages' % (need, out[-2:], p1 - p0))
        self.ok(any('rc=0' in x for x in out) and
                'Killed process' not in dm and 'Out of memory' not in dm,
                'a burst of %d MiB while %d MiB sit in claims completes '
                'without an OOM kill' % (need, claimed_mib))
        res = self.end_pass(rid)
        # Under pressure, or the pass itself met the burst at its next
        # block (admission refused it, R_NOMEM) and gave them all back:
        # either way none were left when the burst was done.
        nomem = res['failed'][ht.R_NOMEM] > 0 and not c1['evac_claimed']
        self.ok(p1 - p0 >= claimed // 2 or nomem,
                'the claims went back under pressure (%d of %d pages%s)' %
                (p1 - p0, claimed, '; the pass stopped for memory first'
                 if nomem else ''))
        self.ok(not self.claims(), 'no claims left once the pass ended '
                '(status %d)' % res['status'])
        self.balloon_back(base, 'the burst\'s pass ended')
        d.drain(1)
        self.views_agree('after the burst')

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        g.cmd('sh echo 2 >/sys/module/virtio_hugeroom/parameters/claim_holes')
        mi = g.meminfo()
        fill = mi['MemAvailable'] // 1024 * 3 // 4
        self.memfill('mf-holes', fill, 16, 33)
        self.isolation()
        self.pressure()
        out = g.cmd('sh /tools/memfill ctl /tmp/mf-holes verify || true',
                    timeout=900)
        self.ok(any('bad=0 ' in x for x in out), 'memfill checksums match',
                str(out))
        self.views_agree('before rmmod')
        g.cmd('sh rmmod virtio_hugeroom')
        dm = g.cmd('sh dmesg | grep -E "WARNING|BUG|Oops|Kernel panic|'
                   'still in use" || true')
        self.ok(not dm and 'Kernel panic' not in g.console(),
                'no warning (panic_on_warn) in the guest log',
                '\n'.join(dm))


def main(series):
    return Claims(series).main()
