# SPDX-License-Identifier: GPL-2.0
"""Pages migrated per block given against the occupancy it was chosen by,
run by `fake-daemon.py evac-order SERIES`.

The headline's donation, scaled down to one small guest: memfill touches
most of the guest's RAM and frees every other 64 KiB chunk, so the blocks
it lands in hold about 256 used pages each.  Those blocks play the host's
THP-backed ones: the test reads their occupancy (debugfs "occupancy", a
test aid), then asks, as hugeroomd does, for about half of them with
EVACUATE CHEAPEST|RANGES.  The minimum is what the snapshot says the
emptiest `count` of them hold; debugfs "evac_log" says what each block
taken cost, and what it held just before it was emptied (pages that moved
in after it was chosen, and so were migrated twice).

Checks, as TAP: the RESULT is S_OK with count blocks; every block taken
lies in the ranges; pages migrated per block given stay within
MAX_RATIO of the snapshot's minimum; memfill's checksums match.

The driver runs with claim_holes=2 (claim the holes of the blocks a pass
empties, always); HR_EVAC_ORDER_CLAIM=0 runs it with claims off, the
behaviour before them, and check 5 fails (1.21x-1.25x measured, on both
kernels; 1.000x with claims); HR_EVAC_ORDER_CLAIM=1 is the driver's
default, claims only where they cost less than the migrations they save.
HR_EVAC_ORDER_SPAN=N sets the driver's span_blocks (1: every block on its
own alloc_contig_range(), as before spans; default the driver's 16).
HR_EVAC_ORDER_BUSY=1 keeps every vCPU busy during the command (a shell
loop each), as the headline's donors are; the log line "claim_holes=..."
says how long the claims and the emptying took.
"""
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'tests', 'vm'))
import hrvm  # noqa: E402
import holds_test as ht  # noqa: E402

RANGES = 2
BLOCK_PAGES = 512
# "host-backed" blocks: those memfill left about half used
BACKED_MIN_FREE, BACKED_MAX_FREE = 128, 384
# share of them the host asks for (the headline needed 48%)
ASK_SHARE = float(os.environ.get('HR_EVAC_ORDER_SHARE', '0.5'))
MAX_RATIO = float(os.environ.get('HR_EVAC_ORDER_MAX_RATIO', '1.1'))
MT_MOVABLE = 1


def occupancy(g):
    """{gpa: (free, mt)} of every online pageblock outside ZONE_DMA."""
    out = {}
    for line in g.debugfs('occupancy'):
        f = line.split()
        if len(f) == 3:
            out[int(f[0], 16)] = (int(f[1]), int(f[2]))
    return out


def ranges_of(gpas):
    """Sorted, merged [start, end) ranges of the blocks at gpas."""
    out = []
    for g in sorted(gpas):
        if out and out[-1][1] == g:
            out[-1][1] = g + ht.BLOCK
        else:
            out.append([g, g + ht.BLOCK])
    return out


def evacuate_ranges(rid, count, ranges):
    ln = 40 + 16 * len(ranges)
    return (ht.hdr(ht.EVACUATE, ht.CHEAPEST | RANGES, ln, rid) +
            struct.pack('<IIIIQ', count, 0, len(ranges), 0, 0) +
            b''.join(struct.pack('<QQ', a, b) for a, b in ranges))


def evac_log(g):
    """(gpa, chosen_free, free_before, migrated, rc) per block tried."""
    out = []
    for line in g.debugfs('evac_log'):
        f = line.split()
        if len(f) == 5:
            out.append((int(f[0], 16), int(f[1]), int(f[2]), int(f[3]),
                        int(f[4])))
    return out


class Run(ht.Run):
    def main(self):
        kver, wd, initrd = self.prepare('evac-order')
        mem = os.environ.get('HR_EVAC_ORDER_MEM', '1G')
        return self.run(hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd,
                                   wd, daemon=self.d, mem=mem))

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        mi = g.meminfo()
        # most of the guest's memory, with room for admission's reserve
        fill = mi['MemAvailable'] // 1024 * 3 // 4
        self.memfill('mf-holes', fill, 16, 33)
        occ0 = occupancy(g)
        backed = {a: f for a, (f, mt) in occ0.items()
                  if mt == MT_MOVABLE and
                  BACKED_MIN_FREE <= f <= BACKED_MAX_FREE}
        count = int(len(backed) * ASK_SHARE)
        frees = sorted(backed.values(), reverse=True)
        minimum = sum(BLOCK_PAGES - f for f in frees[:count])
        hist = {}
        for f in backed.values():
            hist[f // 32 * 32] = hist.get(f // 32 * 32, 0) + 1
        hrvm.log('memfill %d MiB: %d blocks of %d online are "host-backed" '
                 '(free %d-%d; by 32s %s); asking %d, minimum %d pages '
                 '(%.1f per block)' %
                 (fill, len(backed), len(occ0), BACKED_MIN_FREE,
                  BACKED_MAX_FREE, sorted(hist.items()), count, minimum,
                  minimum / max(count, 1)))
        rngs = ranges_of(backed)
        self.ok(0 < count and len(rngs) <= 253,
                'a donation to ask for: %d of %d blocks in %d ranges' %
                (count, len(backed), len(rngs)))
        # claims always (2): the driver's default (1) claims only where a
        # claim costs less than the migrations it saves, which under TCG
        # it never does (see the module's README)
        claim = os.environ.get('HR_EVAC_ORDER_CLAIM', '2')
        g.cmd('sh echo %s >/sys/module/virtio_hugeroom/parameters/claim_holes'
              % claim)
        span = os.environ.get('HR_EVAC_ORDER_SPAN')
        if span:
            g.cmd('sh echo %s >/sys/module/virtio_hugeroom/parameters/span_blocks'
                  % span)
        span = g.cmd('sh cat /sys/module/virtio_hugeroom/parameters/span_blocks')[-1]
        g.cmd("sh echo 'module virtio_hugeroom +p' "
              ">/sys/kernel/debug/dynamic_debug/control || true")
        if os.environ.get('HR_EVAC_ORDER_BUSY'):
            # every vCPU kept busy, as the headline's donors are
            g.cmd('sh for i in $(seq $(nproc)); do '
                  '(while :; do :; done) >/dev/null 2>&1 & done')
        vm0 = g.vmstat()
        t0 = time.monotonic()
        res, holds, _, _ = self.command(evacuate_ranges(5001, count, rngs),
                                        5001, timeout=1500)
        elapsed = time.monotonic() - t0
        vm1 = g.vmstat()
        self.ok(res['status'] == ht.S_OK and res['freed'] == count and
                len(holds) == count,
                'EVACUATE CHEAPEST|RANGES %d: S_OK, all freed' % count,
                str(res))
        self.ok(all(a in backed for a in holds),
                'every block given lies in the ranges')
        log = evac_log(g)
        taken = [e for e in log if e[4] == 0]
        grew = [e for e in taken if e[2] < e[1]]
        extra_in = sum(e[1] - e[2] for e in grew)
        mig_taken = sum(e[3] for e in taken)
        used_chosen = sum(BLOCK_PAGES - e[1] for e in taken)
        failed_mig = sum(e[3] for e in log if e[4] != 0)
        occ1 = occupancy(g)
        # where the moved pages went: the backed blocks not given, others
        rest = [a for a in backed if a not in set(holds)]
        into_rest = sum(backed[a] - occ1[a][0] for a in rest if a in occ1)
        others = [a for a in occ0 if a not in backed]
        into_others = sum(occ0[a][0] - occ1[a][0] for a in others
                          if a in occ1 and occ1[a][0] < occ0[a][0])
        hrvm.log('RESULT migrated %d (vmstat pgmigrate_success +%d) for %d '
                 'blocks: %.1f per block given; minimum %d (%.1f per '
                 'block): %.3fx' %
                 (res['migrated'], vm1['pgmigrate_success'] -
                  vm0['pgmigrate_success'], res['freed'],
                  res['migrated'] / max(res['freed'], 1), minimum,
                  minimum / max(count, 1),
                  res['migrated'] / max(minimum, 1)))
        hrvm.log('evac_log: %d tried, %d taken; taken blocks held %d used '
                 'pages when chosen, %d migrated; %d of them grew after '
                 'being chosen (+%d pages); %d migrated for blocks that '
                 'failed' % (len(log), len(taken), used_chosen, mig_taken,
                             len(grew), extra_in, failed_mig))
        hrvm.log('pages moved in: %d into the %d backed blocks not given '
                 '(%d holes pages), %d into the other %d blocks' %
                 (into_rest, len(rest), sum(backed[a] for a in rest),
                  into_others, len(others)))
        st = g.driver_status()
        hrvm.log('claim_holes=%s span_blocks=%s: the command took %.2f s; '
                 '%s ms claiming, %s alloc_contig_range() calls (%s failed), '
                 '%s ms emptying blocks in %s calls (%s over several blocks, '
                 'taking %s); evac_taken used %s migrated %s' %
                 (claim, span, elapsed, int(st['evac_claim_ns'][0]) // 1000000,
                  st['evac_claim_calls'][0], st['evac_claim_failed'][0],
                  int(st['evac_block_ns'][0]) // 1000000,
                  st['evac_block_calls'][0], st['evac_span_calls'][0],
                  st['evac_span_blocks'][0],
                  st['evac_taken_used'][0], st['evac_taken_migrated'][0]))
        ratio = res['migrated'] / max(minimum, 1)
        claims = [x for x in g.cmd('sh dmesg | grep " claim 0x" | head -5 '
                                   '|| true')]
        for x in claims:
            hrvm.log('failed claim: %s' % x)
        for e in log if ratio > MAX_RATIO else ():
            hrvm.log('block %#x chosen_free %d free %d migrated %d rc %d' % e)
        self.ok(res['freed'] == count and ratio <= MAX_RATIO,
                'pages migrated per block given %.1f, %.3fx the snapshot\'s '
                'minimum (<= %.2fx)' %
                (res['migrated'] / max(res['freed'], 1), ratio, MAX_RATIO))
        out = g.cmd('sh /tools/memfill ctl /tmp/mf-holes verify || true',
                    timeout=900)
        self.ok(any('bad=0 ' in x for x in out),
                'memfill checksums match', str(out))


def main(series):
    return Run(series).main()
