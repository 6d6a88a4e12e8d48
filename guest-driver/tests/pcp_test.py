# SPDX-License-Identifier: GPL-2.0
"""Driver test of SET_PCP, run by `fake-daemon.py pcp SERIES`.

Plays hugeroomd over the device's chardev (holds_test.FakeDaemon) and
drives a 2-vCPU guest.  Every policy is read back from the guest's own
/proc/zoneinfo: for each populated zone and online CPU, `batch` is the
kernel's and `high` is what the kernel computes for the fraction in force,
H(f) = max(managed / f / cpus, 4 * batch) (f = 0: the kernel's own sizing,
from the low watermark; on 6.7+ auto-tuned up to H(8)).  Checks, as TAP:

* F_PCP is negotiated; latency, density, balanced and explicit:HIGH answer
  S_OK, set vm.percpu_pagelist_high_fraction to 8, INT_MAX, 0 and the
  computed fraction, and /proc/zoneinfo shows the high of that fraction;
  explicit gives the largest zone the high asked for (+2%);
* the STATUS relayed to the host carries pcp_policy and pcp_fraction in
  every zone entry;
* bad input (explicit high below 4 * batch, above H(8), explicit without a
  high) answers S_INVALID and changes nothing;
* a CPU offlined and onlined, and min_free_kbytes changes, leave the policy
  in force (the kernel recomputed: balanced's high follows the watermark,
  latency's does not), and explicit keeps its high with one CPU;
* an admin's own write to the sysctl wins: the policy is dropped, reported
  default, and not written over on unload;
* after a short fault-and-free churn (guest-tools/churn, both vCPUs) far
  more pages sit idle on the per-CPU lists with latency than with density,
  which keeps at most high + batch per CPU and zone;
* suspend (pm_test devices) restores the guest's own value, rmmod too.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import holds_test as ht  # noqa: E402
from holds_test import hrvm  # noqa: E402

SET_PCP = 20
DEFAULT, LATENCY, BALANCED, DENSITY, EXPLICIT = range(5)
F_PCP = 1 << 3
INT_MAX = 2 ** 31 - 1
SYSCTL = '/proc/sys/vm/percpu_pagelist_high_fraction'
D = '/sys/kernel/debug/virtio_hugeroom'


def set_pcp(rid, policy, high=0):
    return ht.hdr(SET_PCP, 0, 24, rid) + struct.pack('<II', policy, high)


def parse_zoneinfo(lines):
    """{zone: {'managed', 'low', 'cpus': {cpu: (count, high, batch)}}} for
    the populated zones."""
    zones, z, cpu = {}, None, None
    for line in lines:
        f = line.split()
        if line.startswith('Node'):
            z = {'cpus': {}}
            zones[f[3]] = z
        elif z is None or not f:
            continue
        elif f[0] in ('low', 'managed') and len(f) == 2:
            z[f[0]] = int(f[1])
        elif f[0] == 'cpu:':
            cpu = int(f[1])
        elif f[0] in ('count:', 'high:', 'batch:') and cpu is not None:
            z['cpus'].setdefault(cpu, {})[f[0][:-1]] = int(f[1])
    return {k: v for k, v in zones.items() if v.get('managed') and v['cpus']}


def h_of(z, f, ncpu, batch):
    return max(z['managed'] // f // ncpu, 4 * batch)


class Pcp(ht.Run):
    rid = 2000

    def main(self):
        self.auto = self.series != '6.1'    # high_min/high_max (6.7+)
        kver, wd, initrd = self.prepare('pcp')
        return self.run(hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd,
                                   wd, daemon=self.d, mem='1G'))

    def fraction(self):
        return int(self.g.cmd('sh cat %s' % SYSCTL)[0])

    def zoneinfo(self):
        # The driver clamps pcp->high of 6.7+ at each report (see hr_pcp.c).
        self.g.cmd('sh echo 1 >%s/report_now' % D)
        return parse_zoneinfo(self.g.cmd('sh cat /proc/zoneinfo'))

    def send(self, policy, high=0):
        self.rid += 1
        self.d.send(set_pcp(self.rid, policy, high))
        return self.d.of(self.rid, 60)[-1]['status']

    def matches(self, zones, f):
        """Every zone and CPU has the kernel's batch and the high of f."""
        bad = []
        for name, z in zones.items():
            ncpu = len(z['cpus'])
            for cpu, p in sorted(z['cpus'].items()):
                b = p['batch']
                if f:
                    ok = p['high'] == h_of(z, f, ncpu, b)
                    want = h_of(z, f, ncpu, b)
                else:
                    lo = max(z['low'] // ncpu, 4 * b)
                    hi = h_of(z, 8, ncpu, b) if self.auto else lo
                    ok = lo <= p['high'] <= hi
                    want = '%d..%d' % (lo, hi)
                if not ok:
                    bad.append('%s cpu%d high %d batch %d, want %s' %
                               (name, cpu, p['high'], b, want))
        return bad

    def check_policy(self, name, policy, high, want_f):
        st = self.send(policy, high)
        f = self.fraction()
        zones = self.zoneinfo()
        bad = self.matches(zones, f)
        ok = st == ht.S_OK and (want_f is None or f == want_f) and not bad
        self.ok(ok, '%s: S_OK, fraction %d, /proc/zoneinfo high/batch per CPU '
                'as the kernel computes for it' % (name, f),
                'status %d, want fraction %s\n%s' % (st, want_f,
                                                     '\n'.join(bad)))
        return zones, f

    def body(self):
        g, d = self.g, self.d
        hrvm.wait_for(lambda: d.state and d.state[5], 120, 'DRIVER_OK')
        self.ok(d.state[0] & F_PCP, 'driver negotiated F_PCP (%#x)' %
                d.state[0])
        # STATUS payloads, raw, for the relayed zone entries
        statuses = []
        orig_put = d.q.put

        def keep(p):
            if struct.unpack('<H', p[:2])[0] == ht.STATUS:
                statuses.append(p)
            orig_put(p)
        d.q.put = keep

        f0 = self.fraction()
        base = self.zoneinfo()
        self.ok(f0 == 0 and not self.matches(base, 0),
                'before any policy: fraction 0, the kernel\'s own sizing (%s)' %
                ', '.join('%s high %d' % (n, z['cpus'][0]['high'])
                          for n, z in base.items()),
                '\n'.join(self.matches(base, 0)))

        self.check_policy('latency', LATENCY, 0, 8)
        del statuses[:]
        g.cmd('sh echo 1 >%s/report_now' % D)
        hrvm.wait_for(lambda: statuses, 10, 'a STATUS')
        p = statuses[-1]
        nz = struct.unpack('<H', p[76:78])[0]
        ents = [(p[208 + 256 * i + 3],
                 struct.unpack('<I', p[208 + 256 * i + 252:
                                       208 + 256 * i + 256])[0])
                for i in range(nz)]
        self.ok(nz and all(e == (LATENCY, 8) for e in ents),
                'STATUS zone entries carry pcp_policy 1, pcp_fraction 8 (%s)'
                % ents)
        self.check_policy('density', DENSITY, 0, INT_MAX)
        self.check_policy('balanced', BALANCED, 0, 0)

        big_name, big = max(base.items(), key=lambda kv: kv[1]['managed'])
        b = big['cpus'][0]['batch']
        ncpu = len(big['cpus'])
        want = 4 * (4 * b)
        zones, f = self.check_policy('explicit:%d' % want, EXPLICIT, want,
                                     None)
        got = zones[big_name]['cpus'][0]['high']
        self.ok(want <= got <= want * 1.02,
                'explicit: %s gets high %d for %d asked (fraction %d)' %
                (big_name, got, want, f))

        # ---- bad input: S_INVALID, nothing changes ----
        h8 = big['managed'] // 8 // ncpu
        for what, pol, high in (('high below 4 * batch', EXPLICIT, 4 * b - 1),
                                ('high above H(8) = %d' % h8, EXPLICIT,
                                 h8 * 2),
                                ('explicit without high', EXPLICIT, 0),
                                ('a high with latency', LATENCY, 100)):
            before = self.zoneinfo()
            st = self.send(pol, high)
            after = self.zoneinfo()
            same = all(before[n]['cpus'][c]['high'] ==
                       after[n]['cpus'][c]['high']
                       for n in before for c in before[n]['cpus'])
            self.ok(st == ht.S_INVALID and self.fraction() == f and same,
                    '%s: S_INVALID, fraction and zoneinfo unchanged' % what,
                    'status %d fraction %d' % (st, self.fraction()))

        # ---- recomputes: CPU offline/online, min_free_kbytes ----
        self.send(EXPLICIT, want)
        g.cmd('sh echo 0 >/sys/devices/system/cpu/cpu1/online')
        zones = self.zoneinfo()
        f1 = self.fraction()
        got = zones[big_name]['cpus'][0]['high']
        self.ok(sorted(zones[big_name]['cpus']) == [0] and
                want <= got <= want * 1.02 and not self.matches(zones, f1),
                'cpu1 offline: explicit re-applied for one CPU (fraction %d '
                '-> %d, %s high %d)' % (f, f1, big_name, got))
        g.cmd('sh echo 1 >/sys/devices/system/cpu/cpu1/online')
        zones = self.zoneinfo()
        f2 = self.fraction()
        self.ok(sorted(zones[big_name]['cpus']) == [0, 1] and f2 == f and
                not self.matches(zones, f2),
                'cpu1 online again: fraction %d, every CPU as computed' % f2)

        self.send(LATENCY)
        g.cmd('sh echo 0 >/sys/devices/system/cpu/cpu1/online')
        z1 = self.zoneinfo()
        g.cmd('sh echo 1 >/sys/devices/system/cpu/cpu1/online')
        z2 = self.zoneinfo()
        self.ok(not self.matches(z1, 8) and not self.matches(z2, 8) and
                self.fraction() == 8 and len(z1[big_name]['cpus']) == 1,
                'latency survives cpu1 offline and online (%s high %d, '
                'then %d)' % (big_name, z1[big_name]['cpus'][0]['high'],
                              z2[big_name]['cpus'][1]['high']),
                '\n'.join(self.matches(z1, 8) + self.matches(z2, 8)))

        mfk = int(g.cmd('sh cat /proc/sys/vm/min_free_kbytes')[0])
        self.send(BALANCED)
        low0 = self.zoneinfo()[big_name]
        g.cmd('sh echo %d >/proc/sys/vm/min_free_kbytes' % (mfk * 4))
        low1 = self.zoneinfo()[big_name]
        self.send(LATENCY)
        z0 = self.zoneinfo()
        g.cmd('sh echo %d >/proc/sys/vm/min_free_kbytes' % (mfk * 8))
        z1 = self.zoneinfo()
        g.cmd('sh echo %d >/proc/sys/vm/min_free_kbytes' % mfk)
        z2 = self.zoneinfo()
        self.ok(low1['low'] > low0['low'] and
                not self.matches(z0, 8) and not self.matches(z1, 8) and
                not self.matches(z2, 8),
                'min_free_kbytes x4, x8, back: the kernel recomputed (low '
                '%d -> %d) and latency stayed in force' %
                (low0['low'], low1['low']),
                '\n'.join(self.matches(z1, 8)))

        # ---- the admin wins ----
        g.cmd('sh echo 100 >%s' % SYSCTL)
        g.cmd('sh echo 1 >%s/report_now' % D)
        pol = self.field('pcp_policy')
        self.ok(pol == ['default'] and self.fraction() == 100,
                'an admin\'s fraction 100 wins: policy %s, fraction %d' %
                (pol, self.fraction()))
        self.check_policy('density over the admin\'s 100', DENSITY, 0,
                          INT_MAX)
        self.send(DEFAULT)
        self.ok(self.fraction() == 100 and self.field('pcp_saved') == ['100'],
                'default gives the admin\'s 100 back (%d)' % self.fraction())
        g.cmd('sh echo 0 >%s' % SYSCTL)

        # ---- what the policies do to idle pages (benchmarks/pcp.py, small) --
        idle = {}

        def pcp_idle():
            zones = parse_zoneinfo(g.cmd('sh cat /proc/zoneinfo'))
            return (sum(p['count'] for z in zones.values()
                        for p in z['cpus'].values()),
                    sum(p['high'] + p['batch'] for z in zones.values()
                        for p in z['cpus'].values()))
        for what, pol in (('latency', LATENCY), ('density', DENSITY)):
            self.send(pol)
            g.cmd('sh /tools/churn 2 2 4096 0 >/tmp/churn.log 2>&1 &'
                  ' pid=$!; i=0; while ! grep -q READY /tmp/churn.log &&'
                  ' [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done;'
                  ' kill $pid; cat /tmp/churn.log', timeout=300)
            idle[what], cap = pcp_idle()
            if pol == LATENCY:
                self.send(DENSITY)
                idle['switched'], _ = pcp_idle()
        self.ok(idle['density'] <= cap and idle['latency'] > 2 * cap and
                idle['latency'] > 4 * idle['density'],
                'after a fault-and-free churn: %d pages idle on PCP lists '
                'with latency, %d with density (at most high + batch = %d)' %
                (idle['latency'], idle['density'], cap))
        self.ok(idle['switched'] <= cap,
                'switching to density drains the lists at once (%d -> %d '
                'idle pages)' % (idle['latency'], idle['switched']))
        self.send(DEFAULT)

        # ---- suspend and rmmod restore ----
        self.send(LATENCY)
        out = g.cmd('sh echo devices >/sys/power/pm_test; '
                    '(echo freeze >/sys/power/state && echo SUSPEND-OK) || '
                    'echo SUSPEND-FAILED; echo none >/sys/power/pm_test',
                    timeout=120)
        zones = self.zoneinfo()
        self.ok('SUSPEND-OK' in out and self.fraction() == 0 and
                self.field('pcp_policy') == ['default'] and
                not self.matches(zones, 0),
                'suspend and resume: the guest\'s own sizing is back '
                '(fraction %d)' % self.fraction(), str(out))
        self.check_policy('latency after resume', LATENCY, 0, 8)
        self.send(DENSITY)
        g.cmd('sh rmmod virtio_hugeroom')
        zones = parse_zoneinfo(g.cmd('sh cat /proc/zoneinfo'))
        self.ok(self.fraction() == 0 and not self.matches(zones, 0),
                'rmmod: fraction back to 0, zoneinfo the kernel\'s own '
                'sizing', '\n'.join(self.matches(zones, 0)))
        dm = g.cmd('sh dmesg')
        self.ok(not any(k in line for line in dm
                        for k in ('BUG:', 'WARNING:', 'Oops')),
                'dmesg clean')


def main(series):
    return Pcp(series).main()
