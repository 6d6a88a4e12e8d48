# SPDX-License-Identifier: GPL-2.0
"""Driver test of holds against the guest's own memory, run by
`fake-daemon.py pressure SERIES`.

Plays hugeroomd over the device's chardev (holds_test.FakeDaemon) and
drives a 1 GiB guest with a virtio-blk disk backed by a temporary file.
Checks, printed as TAP:

* Admission by the reserve: with the page cache dropped, an EVACUATE
  CHEAPEST of more blocks than the guest can give ends with R_NOMEM while
  MemAvailable is still at least the sum of the high watermarks plus
  MemTotal/32, and within a few blocks of that floor: the reserve, not a
  zone's watermark, ended it.  Under the old rule (MemAvailable down to
  the watermarks) the job would have gone on to about 32 MiB below the
  floor, so this fails there.
* Holds go back before page cache: with a page cache of most of the
  guest (the disk read through) and blocks held, an anonymous allocation
  of more than is free must get the holds back (RETURNED reason
  pressure) while the page cache is still nearly whole.  A sampler in the
  guest reads Cached and the held count every 100 ms during the
  allocation; at the first sample with the holds back, Cached must not
  have fallen by more than half the held amount.  No OOM kill.  On both
  kernels: 6.12 runs the multi-gen LRU, whose kswapd asks the shrinker
  only once page cache has restored the watermarks, so this needs the
  driver's pressure trigger (guest-driver/README.md, "Pressure").
* The trigger and admission do not flap: blocks held at the admission
  limit, or on top of the page cache, stay held while the guest idles
  (no RETURNED for two seconds); the trigger polls while blocks are held
  and not at all once none are.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402

D = '/sys/kernel/debug/virtio_hugeroom'
DISK_MIB = 640


def file_kb(mi):
    """The page cache as reclaim sees it: the file LRUs (the disk's pages
    count as Buffers, not Cached)."""
    return mi['Active(file)'] + mi['Inactive(file)']


class Pressure(ht.Run):
    def main(self):
        kver, wd, initrd = self.prepare('pressure',
                                        modules='virtio_pci virtio_blk')
        disk = os.path.join(wd, 'disk.img')
        # Sparse: the host reads zeros, the guest caches every page.
        with open(disk, 'wb') as f:
            f.truncate(DISK_MIB << 20)
        return self.run(hrvm.Guest(
            hrvm.qemu_binary(), kver, None, initrd, wd, daemon=self.d,
            mem='1G',
            extra=['-drive', 'file=%s,if=none,id=disk0,format=raw,'
                   'cache=unsafe' % disk,
                   '-device', 'virtio-blk-pci,drive=disk0']))

    def high_wmarks_kb(self):
        return 4 * sum(int(f[1]) for f in
                       (line.split() for line in
                        self.g.cmd('sh cat /proc/zoneinfo'))
                       if len(f) == 2 and f[0] == 'high')

    def admission(self):
        g = self.g
        g.cmd('sh sync; echo 3 >/proc/sys/vm/drop_caches')
        res, holds, _, _ = self.command(
            ht.evacuate(8001, 1000, flags=ht.CHEAPEST, budget_ms=300000),
            8001, timeout=900)
        mi = g.meminfo()
        pcp = g.pcp_kb()
        floor = self.high_wmarks_kb() + mi['MemTotal'] // 32
        st = g.driver_status()
        hrvm.log('admission: MemAvailable %d kB, MemFree %d kB, floor %d kB, '
                 '%d held, Cached %d kB, %s spans took %s blocks, failed %s, '
                 'pressure ahead %s pages, per-cpu lists %d kB, %s calls met '
                 '-ENOMEM' %
                 (mi['MemAvailable'], mi['MemFree'], floor, len(holds),
                  mi['Cached'], st.get('evac_span_calls', ['-'])[0],
                  st.get('evac_span_blocks', ['-'])[0], res['failed'],
                  st.get('pressure_ahead_pages', ['-'])[0],
                  pcp, st.get('evac_call_enomem', ['-'])[0]))
        # MemAvailable leaves out the free pages on the per-cpu lists,
        # which the migrations refill and which 6.12's auto-tuning lets
        # grow to tens of MiB and shrink back over seconds (1-2 MiB after
        # this job block by block, 9-46 MiB with span_blocks=64): the
        # guest's reserve is both
        self.ok(res['failed'][ht.R_NOMEM] >= 1 and
                mi['MemAvailable'] + pcp >= floor - 2048,
                'admission stops at MemAvailable %d kB + %d kB on per-cpu '
                'lists, above the floor %d kB (%d held)'
                % (mi['MemAvailable'], pcp, floor, len(holds)), str(res))
        # The reserve stopped it, not a zone: MemAvailable at the floor,
        # give or take a few blocks and the racy counters.
        self.ok(mi['MemAvailable'] <= floor + 16384,
                'the reserve, not a zone watermark, ended the job '
                '(MemAvailable %d kB, floor %d kB)' % (mi['MemAvailable'],
                                                       floor))
        self.views_agree('at the admission limit')
        self.idle_holds('at the admission limit')
        self.command(ht.ret(8002, len(self.held)), 8002)
        self.views_agree('after giving them back')
        # a poll queued before the last block went back (every 100 ms while
        # blocks are held) may still run once
        time.sleep(0.5)
        p0 = self.pressure()
        time.sleep(2)
        p1 = self.pressure()
        self.ok(p1['pressure_polls'] == p0['pressure_polls'],
                'nothing held: the pressure trigger does not poll (%d, then '
                '%d polls)' % (p0['pressure_polls'], p1['pressure_polls']))

    def pressure(self):
        """The driver's pressure trigger counters (debugfs status)."""
        return {k: int(self.field(k)[0]) for k in
                ('pressure_polls', 'pressure_idle_ns', 'pressure_returns',
                 'pressure_blocks', 'blocks_returned_pressure')}

    def idle_holds(self, what):
        """Held blocks stay held while the guest idles, and the trigger
        polls meanwhile: the poll gives nothing back that admission took."""
        self.d.drain(1)
        p0 = self.pressure()
        time.sleep(2)
        p1 = self.pressure()
        rets = [m for m in self.d.drain(1) if m['type'] == ht.RETURNED]
        polls = p1['pressure_polls'] - p0['pressure_polls']
        ns = p1['pressure_idle_ns'] - p0['pressure_idle_ns']
        hrvm.log('%s: %d polls in 2 s (+ drain), %d ns each, %d RETURNED'
                 % (what, polls, ns // max(polls, 1), len(rets)))
        self.ok(not rets and polls >= 5,
                '%s: the holds stay while the guest idles (%d RETURNED, '
                'the trigger polled %d times)' % (what, len(rets), polls))

    def page_cache(self):
        g, d = self.g, self.d
        out = g.cmd('sh ls /sys/block/')
        self.ok('vda' in ' '.join(out), 'the guest sees the disk (%s)' %
                ' '.join(out))
        # The last close of a block device drops its page cache: keep it
        # open while the test runs.
        g.cmd('sh (sleep 100000 </dev/vda &); sleep 1')
        out = g.cmd('sh dd if=/dev/vda of=/dev/null bs=1M 2>&1', timeout=600)
        mi = g.meminfo()
        hrvm.log('dd: %s; after reading the disk: file pages %d kB '
                 '(Buffers %d, Cached %d), MemFree %d kB, MemAvailable %d kB'
                 % (out[-1:], file_kb(mi), mi['Buffers'], mi['Cached'],
                    mi['MemFree'], mi['MemAvailable']))
        self.ok(file_kb(mi) >= (DISK_MIB - 160) * 1024,
                'the disk is in the page cache (%d kB of file pages)' %
                file_kb(mi))
        want = 48
        res, holds, _, _ = self.command(
            ht.evacuate(8003, want, flags=ht.CHEAPEST), 8003)
        self.views_agree('holds on top of the page cache')
        held = len(self.held)
        self.ok(res['status'] == ht.S_OK and held == want,
                '%d blocks held with the page cache in place' % held,
                str(res))
        self.idle_holds('on top of the page cache')

        mi = g.meminfo()
        cached0 = file_kb(mi)
        held_kb = held * 2048
        # More than is free: the difference must come from somewhere,
        # and the holds are to come first.
        need = mi['MemFree'] // 1024 + held * 2 * 3 // 4
        d.drain(1)
        vm0 = g.vmstat()
        p0 = self.pressure()
        g.cmd('sh touch /tmp/sample.on; (i=0; while [ -e /tmp/sample.on ]; '
              'do echo "$i $(awk \'/^(Active|Inactive)\\(file\\):/ '
              '{ s += $2 } END { print s }\' /proc/meminfo) '
              '$(wc -l <%s/held)"; i=$((i+1)); '
              'usleep 100000; done >/tmp/samples) &' % D)
        out = g.cmd('sh /tools/pressure %d; echo rc=$?' % need, timeout=900)
        g.cmd('sh rm -f /tmp/sample.on; sleep 1')
        vm1 = g.vmstat()
        p1 = self.pressure()
        hrvm.log('vmstat during the allocation: %s' % ', '.join(
            '%s %d' % (k, vm1[k] - vm0.get(k, 0)) for k in sorted(vm1)
            if vm1[k] != vm0.get(k, 0) and
            k.split('_')[0] in ('pgscan', 'pgsteal', 'slabs', 'allocstall',
                                'kswapd', 'pageoutrun', 'compact')))
        samples = [tuple(int(x) for x in line.split())
                   for line in g.cmd('sh cat /tmp/samples')
                   if len(line.split()) == 3]
        msgs = d.drain()
        press = [x for m in msgs if m['type'] == ht.RETURNED and
                 m['reason'] == ht.RET_PRESSURE for x in m['gpas']]
        dm = '\n'.join(g.cmd('sh dmesg'))
        hrvm.log('pressure %d MiB: %s; %d samples, first %s, last %s' %
                 (need, out[-2:], len(samples), samples[:1], samples[-1:]))
        self.ok(any('rc=0' in x for x in out) and 'Killed process' not in dm
                and 'Out of memory' not in dm,
                'an allocation of %d MiB completes without an OOM kill' %
                need)
        self.views_agree('after the allocation')
        hrvm.log('multi-gen LRU %s; pressure trigger: %d blocks in %d '
                 'polls, %d blocks by reason pressure in all' %
                 (self.lru_gen(),
                  p1['pressure_blocks'] - p0['pressure_blocks'],
                  p1['pressure_returns'] - p0['pressure_returns'],
                  p1['blocks_returned_pressure'] -
                  p0['blocks_returned_pressure']))
        self.ok(len(press) >= held // 2 and
                len(self.held) == held - len(press),
                'the allocation got %d of %d held blocks back (reason '
                'pressure)' % (len(press), held))
        # The first sample where at least half the holds are back.
        back = [s for s in samples if s[2] <= held // 2]
        first = back[0] if back else None
        lost = cached0 - first[1] if first else None
        for s in samples:
            hrvm.log('sample %d: file pages %d kB, held %d' % s)
        self.ok(first is not None and lost <= held_kb // 2,
                'the holds went back before the page cache: it fell by %s kB '
                '(of %d) by the time %s held were left, at most %d kB '
                'allowed' % (lost, cached0, first and first[2], held_kb // 2))
        mi = g.meminfo()
        hrvm.log('after: file pages %d kB (were %d kB)' % (file_kb(mi),
                                                           cached0))

    def lru_gen(self):
        """/sys/kernel/mm/lru_gen/enabled, for the log: 6.12's multi-gen
        LRU asks the shrinker late, the trigger must not care."""
        out = self.g.cmd('sh cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null '
                         '|| echo none')
        return out[0] if out else 'none'

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        self.admission()
        self.page_cache()
        self.views_agree('before rmmod')
        g.cmd('sh rmmod virtio_hugeroom')
        dm = g.cmd('sh dmesg | grep -E "BUG|WARNING|Oops|corruption" '
                   '|| true')
        self.ok(not dm, 'dmesg clean', '\n'.join(dm))


def main(series):
    return Pressure(series).main()
