#!/usr/bin/python3
"""The headline benchmark: start a THP-backed VM on a host whose memory the
running guests own, against what users do instead.

In one run, on the same kind of donors (fresh donors per case):
  nothing   the new VM just starts;
  compact   host compaction (echo 1 > /proc/sys/vm/compact_memory), then start;
  balloon   virtio-balloon inflate (4 KiB pages) of the shortfall across the
            donors (QMP balloon; virtio_balloon loaded in the guest), until the
            balloons reached their targets, then start;
  balloon-compact
            the same inflate, then host compact_memory, then start;
  fpr       virtio-balloon free page reporting on from boot, some time to
            report, then start;
  fpr-whole free page reporting on a layout where some guest blocks are wholly
            free: --whole-free of each donor's touched memory is freed in
            whole blocks (a process that touched it exits), the rest keeps
            holes so that the donors use as much memory as in the other cases;
  virtio-mem
            donors whose RAM above --vmem-base MiB is a virtio-mem device
            (onlined movable), which unplugs the shortfall across them (QMP
            qom-set requested-size) until it reached its size, then start;
  hugeroom  hugeroomd, donors with virtio-hugeroom and the driver:
            `hugeroomctl prepare SIZE --deadline D --wait --json`, `consume`
            just before the start, then start; `release` afterwards, and the
            donors' memfill checksums must be intact.

The hosts here are themselves guests of an outer hypervisor that takes every
free 2 MiB block back (free page reporting), and touching it again costs an
outer fault per page: a 2 GiB start takes 0.3 s on memory that stayed backed
and 3.7-5.4 s on memory the outer host took back.  A real host has no such
layer, so by default the run holds those reports (--outer-reporting) and
touches the host's memory again before each case; each row shows what the
outer hypervisor took during prepare and start when it took anything.

Donors: first all host memory is touched once (the Normal zone grows on first
touch here), then each donor (own -uuid, host THP-backed guest RAM) touches
most of its RAM with memfill and frees part of every 2 MiB block inside the
guest.  The new VM is the built QEMU (TCG) with
memory-backend-ram,prealloc=on (THP-advised by QEMU), paused: its start is
the time until its RAM is allocated (QMP answers, RSS holds it all), its THP
coverage AnonHugePages/Rss of its guest RAM mapping (smaps), the donors' THP
share likewise of their guest RAM (QEMU's own heap and TCG buffers aside).

Default: the issue's case, two 9 GiB donors touching 8000 MiB each, half of
every block freed, a 10 GiB new VM, on a 24 GiB host (scaled from MemTotal
elsewhere).  Takes the machine's big-memory lock (/tmp/hr-bigmem.lock)
exclusively.  Output: a table, a JSON file and a PNG plot (gnuplot; installed
with apt-get if missing).  Timing figures are from one run on a shared
machine.

  HUGEROOM_BUILD=build benchmarks/vm-start.py [--cases nothing,hugeroom] ...
"""

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vm"))
import hrvm  # noqa: E402

import hrhost  # noqa: E402

CASES = ("nothing", "compact", "balloon", "balloon-compact", "fpr", "fpr-whole",
         "virtio-mem", "hugeroom", "roomy", "reserve")
LABELS = {"nothing": "nothing", "compact": "host compact_memory",
          "balloon": "balloon inflate 4K", "balloon-compact": "balloon 4K + compact",
          "fpr": "free page reporting", "fpr-whole": "FPR, whole free blocks",
          "virtio-mem": "virtio-mem unplug", "hugeroom": "hugeroom prepare",
          "roomy": "roomy host", "reserve": "hugeroom reserve"}
# hugeroomd runs in these; "reserve" with reserve= the new VM's size,
# filled before the VM is asked for
HUGEROOM_CASES = ("hugeroom", "reserve")
BALLOON_CASES = ("balloon", "balloon-compact")
FPR_CASES = ("fpr", "fpr-whole")
# the wire's migratetype of a movable pageblock (debugfs occupancy)
MT_MOVABLE = 1
SCAN_KEYS = ("compact_migrate_scanned", "compact_free_scanned",
             "compact_daemon_migrate_scanned", "compact_daemon_free_scanned")
KEYS = SCAN_KEYS + ("compact_stall", "compact_success", "compact_fail", "pgmigrate_success",
                    "oom_kill", "thp_fault_alloc", "thp_fault_fallback", "thp_split_pmd",
                    "thp_split_page")
GIB = 1024


def vdelta(a, b):
    d = {k: b.get(k, 0) - a.get(k, 0) for k in KEYS}
    d["scanned"] = sum(d[k] for k in SCAN_KEYS)
    return d


def say(msg):
    print(msg, flush=True)


def defaults(total_mib):
    """The issue's case on a 24 GiB host; scaled by MemTotal elsewhere."""
    scale = total_mib / (24 * GIB)
    if 0.9 <= scale <= 1.1:
        scale = 1.0

    def r(x, unit):
        return max(unit, int(round(x * scale / unit)) * unit)
    return {"donor_mem": r(9 * GIB, 256), "touch": r(8000, 8), "vm_mem": r(10 * GIB, 256),
            "floor": 256, "balloon_timeout": 300}


def shipped_setting(key):
    """A key's value in the shipped host/hugeroomd.conf (the daemon's
    defaults, which the hugeroom cases run with), or None."""
    with open(os.path.join(HERE, "..", "host", "hugeroomd.conf")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if k.strip() == key:
                return v.strip()
    return None


def host_takes_blocks(node):
    """The 2 MiB blocks a reservation gets from a node of GET /v1/host
    without donors: its free blocks above the high watermark and, with the
    shipped hold_in_pool, above the pool's margin too (the pool leaves
    pool_margin_mb free for the host)."""
    keep = node["wmark_high"]
    if shipped_setting("hold_in_pool") == "true":
        keep += int(shipped_setting("pool_margin_mb") or 0) * 256
    headroom = max(0, node["free_pages"] - keep) // 512
    return min(node["free_blocks"], headroom)


def demo_defaults():
    """scripts/demo.sh: small donors, the rest of the host taken by a dense
    helper, so a few minutes and still memory has to come from the guests:
    the host's free memory above its high watermark and the pool's margin
    makes about 650 of the VM's 1024 blocks, the donors give the other
    ~370 of the ~540 their free memory above a 128 MiB floor can empty
    (each block given costs a donor 512 pages of free memory: its holes and
    the holes its pages move to). With 1400 MiB left, as until session 10,
    the host made 485 and the donors would have had to give 539: the
    prepare ran to its deadline 11 blocks short, the layout asked more of
    the donors than they had."""
    return {"donor_mem": 1536, "touch": 1200, "vm_mem": 2048, "hog_leave": 1650, "floor": 128,
            "balloon_timeout": 60}


class DonorSpeed:
    """The donors' own speed: in each donor two workloads of the guest tool
    speed, one writing to random pages of --speed-mib MiB of anonymous
    memory, one reading random 4 KiB blocks of --speed-mib MiB of a disk's
    page cache, each printing its operations and their p99 latency every
    100 ms, stamped with the guest's CLOCK_BOOTTIME.  The host marks phases
    (idle, prepare, inflate, compaction, start, release, after) on its
    own clock; the offset between the clocks comes from `speed now` read
    before and after (linear between them, the serial round trip halved).

    Each phase also records the host CPU time each donor's QEMU got in it,
    so that a workload's speed is also given per CPU-second of its donor
    ("ops/CPU s"): under TCG on a shared host a donor's raw speed follows
    how much of the host's CPU its vCPU threads get, which the other
    guests, the new VM and anything else running decide (on a quiet
    2-core host the raw figure of a phase in which nothing was done to the
    donors read 14% to 292% of idle), while the cost of a donation to the
    donor itself (its own CPU taken by the guest's evacuation, its pages
    migrated under it, QEMU's discards) shows per CPU-second too."""

    WORKLOADS = ("anon", "cache")

    def __init__(self, guests, mib):
        self.guests = list(guests)
        self.mib = mib
        self.phases = []
        self.current = None
        self.sync = {g.name: [] for g in self.guests}
        self.cpu = {}   # mark time -> {donor: its QEMU's CPU seconds}
        self.vcpu = {}  # mark time -> {donor: its vCPU threads' CPU seconds}
        self.disk = {}  # donor -> its hrspeed disk (vdX)
        self.reads = {}  # mark time -> {donor: KiB read from that disk}

    def start(self):
        for g in self.guests:
            dev = None
            for line in g.cmd("sh for d in /sys/block/vd*; do echo ${d##*/} $(cat $d/serial); "
                              "done"):
                f = line.split()
                if len(f) == 2 and f[1] == "hrspeed":
                    dev = "/dev/" + f[0]
            if not dev:
                raise hrvm.Failure("%s: no virtio-blk disk with serial hrspeed" % g.name)
            self.disk[g.name] = dev[len("/dev/"):]
            g.cmd("sh /tools/speed anon %d >/tmp/speed-anon.log 2>&1 & "
                  "/tools/speed cache %s %d >/tmp/speed-cache.log 2>&1 &"
                  % (self.mib, dev, self.mib))
        for g in self.guests:
            for w in self.WORKLOADS:
                hrvm.wait_for(lambda: any(l.startswith("READY") for l in
                                          g.cmd("sh head -1 /tmp/speed-%s.log" % w)),
                              300, "%s's %s workload READY" % (g.name, w), interval=1)
        self.clock()

    def clock(self):
        """One (host, guest) pair of each donor's clocks, in seconds."""
        for g in self.guests:
            if not g.alive():
                continue
            t0 = time.monotonic()
            out = g.cmd("sh /tools/speed now")
            t1 = time.monotonic()
            self.sync[g.name].append(((t0 + t1) / 2, int(out[-1]) / 1e6))

    def cpu_now(self):
        """{donor: CPU seconds its QEMU has used, all threads}."""
        cpu = {g.name: hrvm.proc_cpu_s(g.pid) for g in self.guests}
        return {name: s for name, s in cpu.items() if s is not None}

    def vcpu_now(self):
        """{donor: CPU seconds its vCPU threads have used}."""
        cpu = {g.name: hrvm.proc_vcpu_cpu_s(g.pid) for g in self.guests}
        return {name: s for name, s in cpu.items() if s is not None}

    def reads_now(self):
        """{donor: KiB read from its hrspeed disk so far}: once the cache
        workload is READY, a read is a page it had cached and lost
        (alloc_contig_range() drops clean page cache in the blocks it
        empties; reclaim does too)."""
        out = {}
        for g in self.guests:
            if g.name not in self.disk or not g.alive():
                continue
            try:
                f = g.cmd("sh cat /sys/block/%s/stat" % self.disk[g.name])[-1].split()
                out[g.name] = int(f[2]) // 2    # sectors of 512 bytes
            except (hrvm.Failure, OSError, IndexError, ValueError):
                pass
        return out

    def mark(self, name):
        """End the current phase (if any) and begin @name (None: none)."""
        reads = self.reads_now()
        cpu, vcpu = self.cpu_now(), self.vcpu_now()
        now = time.monotonic()
        self.cpu[now] = cpu
        self.vcpu[now] = vcpu
        self.reads[now] = reads
        if self.current:
            self.phases.append((self.current[0], self.current[1], now))
        self.current = (name, now) if name else None

    def window(self, name, seconds):
        self.mark(name)
        time.sleep(seconds)
        self.mark(None)

    def _to_host(self, name):
        pts = self.sync[name]
        if len(pts) == 1 or pts[-1][0] - pts[0][0] < 1:
            off = pts[0][1] - pts[0][0]
            return lambda t: t - off
        (h0, g0), (h1, g1) = pts[0], pts[-1]
        rate = (g1 - g0) / (h1 - h0)
        return lambda t: h0 + (t - g0) / rate

    def collect(self):
        """{donor: {workload: {phase: {"ops_s", "p99_us", "worst_p99_us",
        "max_us", "windows"}}}}; a sample belongs to the phase that covers
        most of its window."""
        self.mark(None)
        self.clock()
        out = {}
        for g in self.guests:
            if not g.alive():
                out[g.name] = None
                continue
            conv = self._to_host(g.name)
            out[g.name] = {}
            # the phase's wall and CPU seconds of this donor's QEMU
            busy, reread = {}, {}
            for name, p0, p1 in self.phases:
                r0, r1 = self.reads.get(p0, {}).get(g.name), self.reads.get(p1, {}).get(g.name)
                if r0 is not None and r1 is not None:
                    reread[name] = reread.get(name, 0) + r1 - r0
                c0, c1 = self.cpu.get(p0, {}).get(g.name), self.cpu.get(p1, {}).get(g.name)
                v0, v1 = self.vcpu.get(p0, {}).get(g.name), self.vcpu.get(p1, {}).get(g.name)
                if c0 is None or c1 is None:
                    continue
                d = busy.setdefault(name, [0.0, 0.0, 0.0])
                d[0] += p1 - p0
                d[1] += c1 - c0
                d[2] += v1 - v0 if v0 is not None and v1 is not None else 0.0
            for w in self.WORKLOADS:
                samples = []
                prev = None
                for line in g.cmd("sh cat /tmp/speed-%s.log" % w, timeout=120):
                    f = line.split()
                    if len(f) != 5 or f[0] != "S":
                        continue
                    t = conv(int(f[1]) / 1e6)
                    if prev is not None:
                        samples.append((prev, t, int(f[2]), int(f[3]), int(f[4])))
                    prev = t
                per = {}
                for name, p0, p1 in self.phases:
                    sel = [x for x in samples
                           if min(x[1], p1) - max(x[0], p0) > (x[1] - x[0]) / 2]
                    if not sel:
                        continue
                    p99 = sorted(x[3] for x in sel)
                    d = per.setdefault(name, {"ops": 0, "s": 0.0, "p99": [], "max": 0})
                    d["ops"] += sum(x[2] for x in sel)
                    d["s"] += sum(x[1] - x[0] for x in sel)
                    d["p99"] += p99
                    d["max"] = max(d["max"], max(x[4] for x in sel))
                out[g.name][w] = {n: {"ops_s": d["ops"] / d["s"] if d["s"] else 0.0,
                                      "p99_us": median(d["p99"]) / 1e3,
                                      "worst_p99_us": max(d["p99"]) / 1e3,
                                      "max_us": d["max"] / 1e3, "windows": len(d["p99"])}
                                  for n, d in per.items()}
                for n, x in out[g.name][w].items():
                    wall, cpu, vcpu = busy.get(n, (0.0, 0.0, 0.0))
                    # the phase's operations per CPU-second its QEMU got
                    x["cpu_s"] = cpu
                    x["ops_cpu_s"] = x["ops_s"] * wall / cpu if cpu > 0.05 else None
                    # and per second of its vCPUs' own (not QEMU's discards)
                    x["vcpu_s"] = vcpu
                    x["ops_vcpu_s"] = x["ops_s"] * wall / vcpu if vcpu > 0.05 else None
                    if w == "cache" and n in reread:
                        # the page cache it lost and read again from disk
                        x["reread_kib"] = reread[n]
        return out


class Bench:
    def __init__(self, args):
        self.a = args
        self.work = hrvm.workdir("hr-vmstart-")
        self.guests = []
        self.daemon = None
        self.vm = None
        self.hogs = []
        self.results = []
        self.speed = None
        self.outer = hrhost.OuterReporting()

    def outer_mib(self):
        """The outer hypervisor's reported MiB so far (None: no counter)."""
        return self.outer.reported_mib()

    def mark(self, phase):
        if self.speed:
            self.speed.mark(phase)

    # ---------------------------------------------------------------- setup
    def prepare_images(self):
        self.qemu = hrvm.qemu_binary()
        self.kver, (self.vmlinuz, _) = hrvm.pick_kernel(self.a.kernel)
        # the test build: its debugfs "occupancy" (every pageblock's free
        # pages) is the snapshot the migration minimum comes from; its other
        # aids are off unless written to
        ko = hrvm.build_module(self.kver, test=True)
        mods = ["virtio_pci"]
        if self.a.page_cache or self.a.donor_speed:
            mods.append("virtio_blk")
        if "virtio-mem" in self.a.cases:
            mods.append("virtio_mem")
        os.environ["HUGEROOM_INITRAMFS_MODULES"] = " ".join(mods)
        self.initrd = hrvm.build_initramfs(self.kver, ko, self.work, tools=True)

    def cleanup_case(self):
        if self.vm:
            self.vm.stop()
            self.vm = None
        for hog in self.hogs:
            hog.stop()
        self.hogs = []
        for g in self.guests:
            try:
                g.stop()
            except (hrvm.Failure, OSError):
                pass
        self.guests = []
        self.speed = None
        if self.daemon and self.daemon.alive():
            # what the reservations (the reserve's parts among them) hold
            # in the host's hugetlb pool goes back before the daemon stops
            try:
                hrvm.http(self.daemon.api_sock, "PUT", "/v1/reserve", {"bytes": 0})
                for res in self.daemon.ctl_json("reservations")["reservations"]:
                    if res["state"] in ("created", "in-progress", "ready"):
                        self.daemon.ctl("release", res["id"])
            except (hrvm.Failure, OSError) as e:
                say("  releasing the reservations: %s" % e)
        if self.daemon:
            self.daemon.stop()
            self.daemon = None

    def boot_donors(self, case):
        a = self.a
        if case in HUGEROOM_CASES:
            self.daemon = hrvm.Daemon(self.work, interval_ms=1000)
            with open(self.daemon.conf, "a") as f:
                # the shipped defaults (return_high_mark_mb among them) but
                # where the state goes and the donors' floor
                f.write("state_dir=%s\n" % self.work)
                if case == "reserve":
                    f.write("reserve=%dM\n" % a.vm_mem)
                f.write("[guest:donor*]\nfloor_mb=%d\n" % a.floor)
            self.daemon.start()
        for i in range(a.donors):
            extra = []
            mem, append = "%dM" % a.donor_mem, ""
            if case in BALLOON_CASES:
                extra += ["-device", "virtio-balloon-pci,id=bal0"]
            elif case in FPR_CASES:
                extra += ["-device", "virtio-balloon-pci,id=bal0,free-page-reporting=on"]
            elif case == "virtio-mem":
                vmem = a.donor_mem - a.vmem_base
                mem = "%dM,maxmem=%dM" % (a.vmem_base, a.donor_mem)
                extra += ["-object", "memory-backend-ram,id=vmem0,size=%dM" % vmem,
                          "-device", "virtio-mem-pci,id=vm0,memdev=vmem0,requested-size=%dM"
                          % vmem]
                append = "memhp_default_state=online_movable"
            if a.prealloc_donors:
                extra += ["-mem-prealloc"]
            if a.donor_speed:
                # the page-cache workload's disk, found by its serial
                img = os.path.join(self.work, "speed%d.img" % i)
                with open(img, "wb") as f:
                    f.truncate(a.speed_mib << 20)
                extra += ["-drive", "file=%s,if=none,id=sp0,format=raw" % img,
                          "-device", "virtio-blk-pci,drive=sp0,serial=hrspeed"]
            if a.page_cache and i == 0:
                img = os.path.join(self.work, "pagecache.img")
                with open(img, "wb") as f:
                    f.truncate(a.page_cache << 20)
                extra += ["-drive", "file=%s,if=none,id=pc0,format=raw" % img,
                          "-device", "virtio-blk-pci,drive=pc0"]
            g = hrvm.Guest(self.qemu, self.kver, self.vmlinuz, self.initrd, self.work,
                           daemon=self.daemon, mem=mem, name="donor%d" % i,
                           uuid=str(uuid.uuid4()), tag=case, extra=extra,
                           hugeroom=(case in HUGEROOM_CASES), append=append)
            self.guests.append(g)
            g.start()
            # the OOM killer's first choice, before anything else on this host
            hrhost.set_oom_score_adj(g.pid, 1000)
            if case in BALLOON_CASES + FPR_CASES:
                g.cmd("sh modprobe virtio_balloon")
            if case == "virtio-mem":
                self.wait_vmem_plugged(g, (a.donor_mem - a.vmem_base) << 20)
            if case in HUGEROOM_CASES and a.claim_holes is not None:
                g.cmd("sh echo %d >/sys/module/virtio_hugeroom/parameters/claim_holes"
                      % a.claim_holes)
            if case in HUGEROOM_CASES and a.span_blocks is not None:
                g.cmd("sh echo %d >/sys/module/virtio_hugeroom/parameters/span_blocks"
                      % a.span_blocks)
            if case in HUGEROOM_CASES and a.evac_nice is not None:
                g.cmd("sh echo %d >/sys/module/virtio_hugeroom/parameters/evac_nice"
                      % a.evac_nice)
        touch = a.touch
        if case == "roomy" and not a.hog_leave:
            # no dense helper to leave room: the donors touch what the new
            # VM needs less, so its memory is free (and they still run)
            touch = max(64, a.touch - (a.vm_mem + a.margin + a.donors - 1) // a.donors)
        whole = int(touch * a.whole_free) // 8 * 8 if case == "fpr-whole" else 0
        for i, g in enumerate(self.guests):
            avail = g.meminfo()["MemAvailable"] >> 10
            if touch > avail - 64:
                raise hrvm.Failure("%s has %d MiB available: --touch %d does not fit (at "
                                   "most %d)" % (g.name, avail, touch, avail - 64))
            if whole:
                # touched first, so its pages lie together, and freed whole
                # once the holed part is in place
                hrhost.memfill_start(g, "whole", whole, 0, 200 + i)
        for g in self.guests:
            if whole:
                hrhost.memfill_wait(g, "whole")
        for i, g in enumerate(self.guests):
            # as much used memory as the other cases: the holes of the rest
            # are what --free-fraction leaves beyond the whole free blocks
            ff = ((a.free_fraction * touch - whole) / (touch - whole) if whole
                  else a.free_fraction)
            hrhost.memfill_start(g, "fill", touch - whole, a.chunk, 100 + i,
                                 int(round(ff * 1000)), a.holes == "random")
        for g in self.guests:
            hrhost.memfill_wait(g, "fill")
            if whole:
                g.cmd("sh /tools/memfill ctl /tmp/whole quit >/dev/null; sleep 1")
        if a.page_cache:
            g = self.guests[0]
            g.cmd("sh for d in /sys/block/vd*; do [ \"$(cat $d/serial)\" = hrspeed ] || "
                  "dd if=/dev/${d##*/} of=/dev/null bs=1M 2>/dev/null; done", timeout=600)
        if a.donor_speed:
            self.speed = DonorSpeed(self.guests, a.speed_mib)
            self.speed.start()
        if self.daemon:
            hrhost.wait_reporting(self.daemon, len(self.guests), timeout=120)
        hog_leave = a.hog_leave
        if case == "roomy" and hog_leave:
            # the same donors, idle, but the new VM's memory already free
            hog_leave += a.vm_mem + a.margin
        if hog_leave:
            # Memory the host frees after the first look (a large process
            # that just exited, reclaim catching up) would otherwise stay
            # available in one case and not the next: top the helper up
            # until MiB is what is left, so every case starts alike.
            held = 0
            for _ in range(4):
                kb = hrhost.meminfo_host()["MemAvailable"] - (hog_leave << 10)
                if kb < (128 << 10) and held > 0:
                    break
                if kb <= 0:
                    break
                hog = hrhost.DenseHog(kb)
                hog.start()
                self.hogs.append(hog)
                held += kb
                time.sleep(1)
            if held:
                say("  a dense helper (oom_score_adj 0, the donors 1000) holds %d MiB of host "
                    "memory (%d parts)" % (held >> 10, len(self.hogs)))
        time.sleep(2)

    def wait_vmem_plugged(self, g, size):
        """Wait until @g's virtio-mem device plugged @size bytes (the
        driver plugs what is requested once it probed)."""
        def plugged():
            return g.qmp("qom-get", path="/machine/peripheral/vm0", property="size") >= size
        hrvm.wait_for(plugged, 300, "%s's virtio-mem to plug %d MiB" % (g.name, size >> 20),
                      interval=1)

    def donors_mem(self):
        out = {}
        for g in self.guests:
            m = hrhost.proc_mem(g.pid) if g.alive() else None
            out[g.name] = m
        return out

    def guest_migrated(self):
        tot = 0
        for g in self.guests:
            if g.alive():
                try:
                    tot += g.vmstat().get("pgmigrate_success", 0)
                except hrvm.Failure:
                    pass
        return tot

    # --------------------------------------------------------- the methods
    def do_compact(self, r):
        self.mark("compaction")
        with open("/proc/sys/vm/compact_memory", "w") as f:
            f.write("1\n")

    def do_balloon(self, r):
        per = int(math.ceil(r["shortfall_mib"] / len(self.guests)))
        r["balloon_per_donor_mib"] = per
        target = (self.a.donor_mem - per) << 20
        self.mark("inflate")
        for g in self.guests:
            g.qmp("balloon", value=target)

        def reached():
            return all(g.qmp("query-balloon")["actual"] <= target + (4 << 20)
                       for g in self.guests)
        try:
            hrvm.wait_for(reached, self.a.balloon_timeout, "the balloons' targets",
                          interval=1)
            r["balloon_reached"] = True
        except hrvm.Failure:
            r["balloon_reached"] = False
        r["balloon_actual_mib"] = [g.qmp("query-balloon")["actual"] >> 20 for g in self.guests]
        r["balloon_target_mib"] = target >> 20

    def do_balloon_compact(self, r):
        self.do_balloon(r)
        self.do_compact(r)

    def do_reserve(self, r):
        self.do_hugeroom(r)

    def do_fpr_whole(self, r):
        self.do_fpr(r)

    def do_virtio_mem(self, r):
        """Unplug the shortfall across the donors' virtio-mem devices, in
        whole device blocks (2 MiB here), until they reached their size."""
        per = int(math.ceil(r["shortfall_mib"] / len(self.guests) / 2.0)) * 2
        size0 = (self.a.donor_mem - self.a.vmem_base) << 20
        target = max(0, size0 - (per << 20))
        r["vmem_per_donor_mib"] = per
        r["vmem_target_mib"] = target >> 20
        for g in self.guests:
            g.qmp("qom-set", path="/machine/peripheral/vm0", property="requested-size",
                  value=target)

        def sizes():
            return [g.qmp("qom-get", path="/machine/peripheral/vm0", property="size")
                    for g in self.guests]
        try:
            hrvm.wait_for(lambda: all(x <= target for x in sizes()), self.a.balloon_timeout,
                          "the virtio-mem devices' sizes", interval=1)
            r["vmem_reached"] = True
        except hrvm.Failure:
            r["vmem_reached"] = False
        r["vmem_size_mib"] = [x >> 20 for x in sizes()]

    def do_fpr(self, r):
        # reporting runs from boot (module loaded before the fill); give it
        # time to report what became free, until the donors' RSS stops moving
        last = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.a.fpr_wait:
            time.sleep(2)
            now = sum((m or {}).get("rss", 0) for m in self.donors_mem().values())
            if last is not None and abs(now - last) < 4096 and time.monotonic() - t0 >= 10:
                break
            last = now

    def candidates_snapshot(self, r):
        """The occupancy snapshot before prepare: every movable pageblock of
        each donor with its free pages (the driver's debugfs occupancy, the
        count the host's candidates come from), how the host backs it
        (pagemap + kpageflags of the donor's QEMU), and from that the
        minimum number of guest pages to migrate for the blocks the host
        lacks: the host THP-backed blocks with the most free pages (a block
        the host does not back with a huge page frees no 2 MiB block when
        discarded).  The guests' candidate lists, what the daemon plans
        from, are summarized beside it."""
        host = self.daemon.ctl_json("host")["nodes"][0]
        need = max(0, (self.a.vm_mem + 1) // 2 - host_takes_blocks(host))
        r["need_from_guests_blocks"] = need
        used_backed = []
        summ = {}
        for g in self.guests:
            g.fresh_status()
            st = self.daemon.ctl_json("guest", g.name)
            cands = (st.get("status") or {}).get("candidates") or []
            ram = st.get("ram") or []

            def backing(gpa):
                for reg in ram:
                    if reg["gpa"] <= gpa < reg["gpa"] + reg["size"]:
                        return hrhost.host_backing(g.pid, reg["hva"] + gpa - reg["gpa"])
                return None
            n_thp = n_4k = n_none = 0
            for c in cands:
                b = backing(c["gpa"])
                if b is None:
                    continue
                present, thp = b
                if present == 0:
                    n_none += 1
                elif thp:
                    n_thp += 1
                else:
                    n_4k += 1
            blocks = backed = 0
            for line in g.debugfs("occupancy"):
                f = line.split()
                if len(f) != 3 or int(f[2]) != MT_MOVABLE:
                    continue
                blocks += 1
                b = backing(int(f[0], 16))
                if b is not None and b[0] == 512 and b[1]:
                    backed += 1
                    used_backed.append(512 - int(f[1]))
            summ[g.name] = {"candidates": len(cands), "host_thp": n_thp, "host_4k": n_4k,
                            "not_resident": n_none, "movable_blocks": blocks,
                            "movable_host_thp": backed,
                            "free_pages": (st.get("status") or {}).get("mem_free_pages")}
        used_backed.sort()
        r["snapshot"] = summ
        if not used_backed:
            raise hrvm.Failure("no occupancy snapshot: the donors' debugfs occupancy listed "
                               "no host THP-backed movable block")
        # fewer backed blocks than needed: the minimum is not reachable by
        # donations alone; count the rest as whole blocks to move
        r["min_migrate_short"] = max(0, need - len(used_backed))
        r["min_migrate_pages"] = int(sum(used_backed[:need]) + r["min_migrate_short"] * 512)

    def do_hugeroom(self, r):
        ctl = os.path.join(hrvm.build_dir(), "host", "hugeroomctl")
        self.mark("prepare")
        p = subprocess.run([ctl, "--socket", self.daemon.api_sock, "--json", "prepare",
                            "%dM" % self.a.vm_mem, "--deadline", str(self.a.deadline),
                            "--requester", "vm-start", "--wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        r["prepare_exit"] = p.returncode
        if p.stderr.strip():
            r["prepare_stderr"] = p.stderr.strip()[-2000:]
        rid = None
        try:
            rid = json.loads(p.stdout).get("id")
        except ValueError:
            pass
        if not rid:
            res = self.daemon.ctl_json("reservations")["reservations"]
            rid = res[-1]["id"] if res else None
        r["reservation_id"] = rid

    def reserve_json(self):
        st, body = hrvm.http(self.daemon.api_sock, "GET", "/v1/reserve")
        if st != 200:
            raise hrvm.Failure("GET /v1/reserve: %d %s" % (st, body[:300]))
        return json.loads(body)

    def reserve_fill(self, r):
        """Wait for the standing reserve (the new VM's size) to be filled
        before the VM is asked for; what that cost the donors."""
        free0 = sum(g.meminfo()["MemFree"] >> 10 for g in self.guests if g.alive())
        t0 = time.monotonic()
        try:
            hrvm.wait_for(lambda: (lambda x: x["blocks_ready"] >= x["blocks"])(
                self.reserve_json()), self.a.deadline, "the standing reserve filled",
                interval=0.5)
            r["reserve_filled"] = True
        except hrvm.Failure:
            r["reserve_filled"] = False
        r["reserve_fill_s"] = time.monotonic() - t0
        r["reserve_before"] = self.reserve_json()
        r["reserve_donors_free_mib"] = [free0, sum(g.meminfo()["MemFree"] >> 10
                                                   for g in self.guests if g.alive())]
        say("  standing reserve: %d of %d blocks ready in %.1f s; donors' free memory %d -> "
            "%d MiB" % (r["reserve_before"]["blocks_ready"], r["reserve_before"]["blocks"],
                        r["reserve_fill_s"], r["reserve_donors_free_mib"][0],
                        r["reserve_donors_free_mib"][1]))
        # the host as the VM finds it, after the fill
        mi = hrhost.meminfo_host()
        r["host_after_fill"] = {"mem_free_mib": mi["MemFree"] >> 10,
                                "mem_available_mib": mi["MemAvailable"] >> 10,
                                "free_2m_blocks": hrhost.buddy_blocks()}

    def reserve_refill(self, r):
        """After the start (the VM runs): how long the reserve takes to
        refill, from donors now, and what it gave back meanwhile."""
        t0 = time.monotonic()
        try:
            hrvm.wait_for(lambda: (lambda x: x["blocks_ready"] >= x["blocks"])(
                self.reserve_json()), self.a.deadline, "the standing reserve refilled",
                interval=1)
            r["reserve_refilled"] = True
        except hrvm.Failure:
            r["reserve_refilled"] = False
        r["reserve_refill_wait_s"] = time.monotonic() - t0
        r["reserve_after"] = self.reserve_json()
        say("  standing reserve after the start: %d of %d blocks ready after %.1f s%s; "
            "refill %s ms, given back %d blocks, paused: %s" % (
                r["reserve_after"]["blocks_ready"], r["reserve_after"]["blocks"],
                r["reserve_refill_wait_s"], "" if r["reserve_refilled"] else " (NOT refilled)",
                r["reserve_after"]["last_refill_ms"], r["reserve_after"]["given_back_blocks"],
                r["reserve_after"]["paused"]))
        # the reserve off, so that releasing gives every hold back
        st, body = hrvm.http(self.daemon.api_sock, "PUT", "/v1/reserve", {"bytes": 0})
        if st != 200:
            r["reserve_off_error"] = "%d %s" % (st, body[:300])

    def hugeroom_after_prepare(self, r):
        rid = r.get("reservation_id")
        if not rid:
            return
        res = self.daemon.ctl_json("reservation", rid)
        r["reservation"] = {k: res.get(k) for k in ("state", "partial", "reason", "obtained",
                                                      "need_blocks", "held_blocks")}
        r["steps"] = res.get("steps", [])
        donate = [s for s in r["steps"] if s.get("kind") == "donate"]
        r["steps_pages_migrated"] = sum(s.get("pages_migrated", 0) for s in donate)
        r["steps_blocks_held"] = sum(s.get("blocks_held", 0) for s in donate)
        kinds = {}
        for s in r["steps"]:
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
        r["step_kinds"] = kinds
        # where the donors' evacuations spent their time (debugfs status,
        # since the donor booted): emptying blocks, claiming holes, sweeps
        r["driver_time"] = {}
        for g in self.guests:
            if not g.alive():
                continue
            try:
                st = g.driver_status()
            except hrvm.Failure:
                continue
            r["driver_time"][g.name] = {
                k: int(st[k][0]) for k in ("evac_block_ns", "evac_block_calls", "evac_claim_ns",
                                           "evac_claim_calls", "evac_sweep_ns",
                                           "evac_taken_blocks", "evac_taken_migrated",
                                           "evac_span_calls", "evac_span_blocks")
                if k in st}
        # the executor's plans, for who was asked when
        r["plans"] = [ln.split(": plan ", 1)[1] for ln in self.daemon.log().splitlines()
                      if "reservation %s: plan " % rid in ln][:20]

    def hugeroom_release(self, r):
        rid = r.get("reservation_id")
        if not rid:
            return
        self.mark("release")
        try:
            self.daemon.ctl("release", rid)
        except hrvm.Failure as e:
            r["release_error"] = str(e)[-500:]
        try:
            hrvm.wait_for(lambda: sum(x["held_blocks"] for x in
                                      self.daemon.ctl_json("guests")["guests"]) == 0,
                          120, "every hold back", interval=1)
            r["holds_returned"] = True
        except hrvm.Failure:
            r["holds_returned"] = False
        self.mark(None)

    def balloon_deflate(self, r):
        """Give the balloons' memory back to the donors (the balloon's
        "release"), until they are back to full size or 120 s."""
        full = self.a.donor_mem << 20
        self.mark("release")
        for g in self.guests:
            if g.alive():
                g.qmp("balloon", value=full)
        try:
            hrvm.wait_for(lambda: all(g.qmp("query-balloon")["actual"] >= full - (4 << 20)
                                      for g in self.guests if g.alive()), 120,
                          "the balloons deflated", interval=1)
            r["balloon_deflated"] = True
        except hrvm.Failure:
            r["balloon_deflated"] = False
        self.mark(None)

    def hugeroom_verify(self, r):
        if not r.get("reservation_id"):
            return
        bad = []
        for g in self.guests:
            if g.alive():
                bad += [g.name for _ in hrhost.verify(g, ("fill",))]
            else:
                bad.append(g.name + " (dead)")
        r["checksums_bad"] = bad

    # ----------------------------------------------------------- one case
    def run_case(self, case):
        a = self.a
        r = {"case": case}
        say("\n== %s: booting %d donors (%d MiB, touching %d MiB, %.0f%% of every block "
            "freed, %s holes)" % (LABELS[case], a.donors, a.donor_mem, a.touch,
                                  a.free_fraction * 100, a.holes))
        t0 = time.monotonic()
        self.boot_donors(case)
        r["setup_s"] = time.monotonic() - t0
        mi = hrhost.meminfo_host()
        r["host_before"] = {"mem_free_mib": mi["MemFree"] >> 10,
                            "mem_available_mib": mi["MemAvailable"] >> 10,
                            "free_2m_blocks": hrhost.buddy_blocks()}
        r["shortfall_mib"] = max(0, a.vm_mem + a.margin - (mi["MemAvailable"] >> 10))
        r["donors_before"] = self.donors_mem()
        say("  host: %(mem_free_mib)d MiB free, %(mem_available_mib)d available, "
            "%(free_2m_blocks)d free 2 MiB blocks" % r["host_before"])
        say("  donors: " + ", ".join("%s RSS %d MiB, host THP %d MiB" %
                                     (n, m["rss"] >> 10, m["thp"] >> 10)
                                     for n, m in r["donors_before"].items() if m))
        say("  shortfall for a %d MiB VM: %d MiB" % (a.vm_mem, r["shortfall_mib"]))
        if case == "reserve":
            self.reserve_fill(r)
        if case == "hugeroom":
            self.candidates_snapshot(r)
            say("  occupancy snapshot: %s; host needs %d blocks from guests, minimum "
                "%d guest pages to migrate%s" % (
                    "; ".join("%s %d candidates (%d host THP, %d 4K, %d not resident)" %
                              (n, s["candidates"], s["host_thp"], s["host_4k"],
                               s["not_resident"]) for n, s in r["snapshot"].items()),
                    r["need_from_guests_blocks"], r["min_migrate_pages"],
                    " (%d blocks more than the host THP-backed movable ones, counted at 512)"
                    % r["min_migrate_short"] if r["min_migrate_short"] else ""))
        if self.speed:
            self.speed.window("idle", a.speed_window)
        gm0 = self.guest_migrated()
        alive0 = [g.name for g in self.guests if g.alive()]
        v0 = hrhost.vmstat_all()
        o0 = self.outer_mib()
        t0 = time.monotonic()
        getattr(self, "do_" + case.replace("-", "_"), lambda r: None)(r)
        r["prepare_s"] = time.monotonic() - t0
        self.mark(None)
        v1 = hrhost.vmstat_all()
        r["vm_prepare"] = vdelta(v0, v1)
        o1 = self.outer_mib()
        r["donors_after_prepare"] = self.donors_mem()
        r["free_2m_blocks_ready"] = hrhost.buddy_blocks()
        if case in HUGEROOM_CASES:
            self.hugeroom_after_prepare(r)
            say("  prepare: exit %s, %s%s: %s" % (
                r.get("prepare_exit"), r["reservation"]["state"],
                " (partial)" if r["reservation"].get("partial") else "",
                r["reservation"].get("reason")))
            for s in r["steps"]:
                say("    step %-8s %-10s gained %5s held %5s migrated %7s  %s" % (
                    s.get("kind"), s.get("state"), s.get("gained"), s.get("blocks_held", "-"),
                    s.get("pages_migrated", "-"), s.get("detail", "")))
            for name, t in sorted(r.get("driver_time", {}).items()):
                say("    %s's driver: %d blocks taken, %d pages migrated; emptying %.1f s "
                    "(%d calls, %d of them spans taking %d blocks), claiming %.1f s "
                    "(%d calls), sweeps %.1f s" % (
                        name, t.get("evac_taken_blocks", 0), t.get("evac_taken_migrated", 0),
                        t.get("evac_block_ns", 0) / 1e9, t.get("evac_block_calls", 0),
                        t.get("evac_span_calls", 0), t.get("evac_span_blocks", 0),
                        t.get("evac_claim_ns", 0) / 1e9, t.get("evac_claim_calls", 0),
                        t.get("evac_sweep_ns", 0) / 1e9))
            if r.get("reservation_id"):
                try:
                    self.daemon.ctl("consume", r["reservation_id"])
                except hrvm.Failure as e:
                    r["consume_error"] = str(e)[-500:]
        # the start
        self.vm = hrhost.PreallocVM(self.qemu, a.vm_mem, self.work)
        v1 = hrhost.vmstat_all()
        self.mark("start")
        try:
            r["start_s"] = self.vm.start()
            thp, rss = self.vm.coverage()
            r["vm_thp_kb"], r["vm_rss_kb"] = thp, rss
            r["vm_thp_pct"] = 100.0 * thp / max(rss, 1)
        except hrvm.Failure as e:
            r["start_error"] = str(e)[-1000:]
            r["start_s"] = None
            r["vm_thp_pct"] = None
        self.mark(None)
        v2 = hrhost.vmstat_all()
        r["vm_start"] = vdelta(v1, v2)
        if o0 is not None:
            r["outer_reported_mib"] = {"prepare": o1 - o0, "start": self.outer_mib() - o1}
        time.sleep(1)
        if case == "reserve" and r.get("start_s") is not None:
            self.reserve_refill(r)
        r["donors_after"] = self.donors_mem()
        r["donors_killed"] = [n for n in alive0
                              if not [g for g in self.guests if g.name == n and g.alive()]]
        r["oom_kills"] = vdelta(v0, hrhost.vmstat_all())["oom_kill"]
        self.vm.stop()
        self.vm = None
        r["guest_pages_migrated"] = max(0, self.guest_migrated() - gm0)
        if case in HUGEROOM_CASES:
            self.hugeroom_release(r)
        elif case in BALLOON_CASES and self.speed:
            self.balloon_deflate(r)
        if self.speed:
            self.speed.window("after", a.speed_window)
            r["donor_speed"] = self.speed.collect()
            r["donor_speed_phases"] = [(n, p1 - p0) for n, p0, p1 in self.speed.phases]
        if case in HUGEROOM_CASES:
            self.hugeroom_verify(r)
        self.cleanup_case()
        say("  new VM: %s%% THP, started in %s s; %d OOM kills (%s)" % (
            "%.1f" % r["vm_thp_pct"] if r["vm_thp_pct"] is not None else "n/a",
            "%.1f" % r["start_s"] if r["start_s"] is not None else "n/a", r["oom_kills"],
            ", ".join(r["donors_killed"]) or "no donor died"))
        return r


# ------------------------------------------------------------------ output
def mib_pair(before, after, key):
    b = sum(m[key] for m in before.values() if m) >> 10
    aa = sum(m[key] for m in after.values() if m) >> 10
    return b, aa


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def spread(xs, fmt="%.1f"):
    """'median [min-max]' of @xs, or '-'."""
    if not xs:
        return "-"
    m = fmt % median(xs)
    return m if len(xs) == 1 else "%s [%s-%s]" % (m, fmt % min(xs), fmt % max(xs))


def notes(r):
    """What a row would otherwise hide: an error, prepare's exit status, a
    consume that failed, how far a balloon or virtio-mem got, a failed start."""
    if r.get("error"):
        return "ERROR: " + r["error"].strip().splitlines()[-1][:160]
    out = []
    if r["case"] in HUGEROOM_CASES:
        res = r.get("reservation") or {}
        out.append("prepare exit %s, %s%s" % (r.get("prepare_exit"), res.get("state"),
                                             " (partial)" if res.get("partial") else ""))
        if r.get("consume_error"):
            out.append("consume: " + r["consume_error"].strip().splitlines()[-1][:120])
    if "balloon_actual_mib" in r:
        out.append("balloon %s MiB of target %d%s" % (
            "+".join(str(x) for x in r["balloon_actual_mib"]), r.get("balloon_target_mib", -1),
            "" if r.get("balloon_reached") else " NOT reached"))
    if "vmem_size_mib" in r:
        out.append("virtio-mem %s MiB of target %d%s" % (
            "+".join(str(x) for x in r["vmem_size_mib"]), r["vmem_target_mib"],
            "" if r.get("vmem_reached") else " NOT reached"))
    o = r.get("outer_reported_mib")
    if o and (o["prepare"] or o["start"]):
        out.append("outer reported %d/%d MiB" % (o["prepare"], o["start"]))
    if r.get("start_error"):
        out.append("START FAILED: " + r["start_error"].strip().splitlines()[0][:120])
    return "; ".join(out)


def row(r):
    if r.get("error"):
        return [LABELS[r["case"]], str(r.get("rep", 1)), "ERROR"] + ["-"] * 10 + [notes(r)]
    b_rss, a_rss = mib_pair(r["donors_before"], r["donors_after"], "rss")
    b_thp, a_thp = mib_pair(r["donors_before"], r["donors_after"], "thp")
    thp = "%.1f" % r["vm_thp_pct"] if r["vm_thp_pct"] is not None else "FAILED"
    total = (r["prepare_s"] + r["start_s"]) if r["start_s"] is not None else None
    mig = "%d" % r["guest_pages_migrated"]
    if r["case"] == "hugeroom":
        mig = "%d/%d" % (r.get("steps_pages_migrated", 0), r.get("min_migrate_pages", 0))
    return [LABELS[r["case"]], str(r.get("rep", 1)), thp, "%.1f" % r["prepare_s"],
            "%.1f" % r["start_s"] if r["start_s"] is not None else "-",
            "%.1f" % total if total is not None else "-",
            "%d/%d" % (r["vm_prepare"]["compact_stall"], r["vm_start"]["compact_stall"]),
            "%.2f/%.2f" % (r["vm_prepare"]["scanned"] / 1e6, r["vm_start"]["scanned"] / 1e6),
            "%d->%d" % (b_rss, a_rss), "%d->%d" % (b_thp, a_thp),
            donor_ram_thp_pct(r),
            "%d%s" % (r["oom_kills"], " (%s)" % ",".join(r["donors_killed"])
                      if r["donors_killed"] else ""), mig, notes(r)]


def per_block(h):
    """Migrations per block the donors gave against the snapshot's per block
    minimum: apart from how many blocks were asked (the daemon keeps a free
    margin on the host), how well each was chosen and emptied."""
    held, need = h.get("steps_blocks_held", 0), h.get("need_from_guests_blocks", 0)
    mig, mn = h.get("steps_pages_migrated", 0), h.get("min_migrate_pages", 0)
    if not held or not need or not mn:
        return ""
    return "; %d blocks given for %d needed, %.0f pages per block given vs a minimum of %.0f" % (
        held, need, mig / held, mn / need)


def donor_ram_thp_pct(r):
    """THP share of the donors' resident guest RAM after the start."""
    _, a_rss = mib_pair(r["donors_before"], r["donors_after"], "ram_rss")
    _, a_thp = mib_pair(r["donors_before"], r["donors_after"], "ram_thp")
    return "%.0f" % (100.0 * a_thp / a_rss) if a_rss else "-"


HEADER = ["case", "run", "VM THP%", "prep s", "start s", "total s", "stalls p/s",
          "scanned M p/s", "donors RSS MiB", "donors THP MiB", "donor THP%", "OOM",
          "guest migrated", "notes"]
SUMMARY = ["case", "runs", "VM THP%", "prep s", "start s", "total s", "donor THP%",
           "OOM kills", "guest migrated"]


def render(header, rows):
    rows = [header] + rows
    w = [max(len(x[i]) for x in rows) for i in range(len(header))]
    lines = []
    for n, x in enumerate(rows):
        lines.append("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(x)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w[i] + 2) for i in range(len(w))) + "|")
    return "\n".join(lines)


def table(results):
    return render(HEADER, [row(r) for r in results])


def by_case(results):
    out = {}
    for r in results:
        out.setdefault(r["case"], []).append(r)
    return [(c, out[c]) for c in CASES if c in out]


def summarize(case, runs):
    """One case over its runs: median [min-max]; a failed start counts 0% THP."""
    ok = [r for r in runs if not r.get("error")]
    started = [r for r in ok if r["start_s"] is not None]
    dthp = [float(donor_ram_thp_pct(r)) for r in ok if donor_ram_thp_pct(r) != "-"]
    mig = [r.get("steps_pages_migrated", 0) if case == "hugeroom" else r["guest_pages_migrated"]
           for r in ok]
    return {"case": case, "runs": len(runs), "errors": len(runs) - len(ok),
            "started": len(started),
            "vm_thp_pct": [r["vm_thp_pct"] if r["vm_thp_pct"] is not None else 0.0 for r in ok],
            "prepare_s": [r["prepare_s"] for r in ok],
            "start_s": [r["start_s"] for r in started],
            "total_s": [r["prepare_s"] + r["start_s"] for r in started],
            "donor_thp_pct": dthp, "oom_kills": [r["oom_kills"] for r in ok],
            "migrated": mig,
            "min_migrate": [r.get("min_migrate_pages", 0) for r in ok]}


def summary_table(results):
    rows = []
    for case, runs in by_case(results):
        s = summarize(case, runs)
        mig = spread(s["migrated"], "%d")
        if case == "hugeroom" and s["min_migrate"]:
            mig += " / min %s" % spread(s["min_migrate"], "%d")
        rows.append([LABELS[case], "%d (%d started%s)" % (
            s["runs"], s["started"], ", %d ERROR" % s["errors"] if s["errors"] else ""),
            spread(s["vm_thp_pct"]), spread(s["prepare_s"]), spread(s["start_s"]),
            spread(s["total_s"]), spread(s["donor_thp_pct"], "%.0f"),
            "%d in %d runs" % (sum(s["oom_kills"]), sum(1 for x in s["oom_kills"] if x)), mig])
    return render(SUMMARY, rows)


PHASES = ("idle", "compaction", "inflate", "prepare", "start", "release", "after")
SPEED_HEADER = ["case", "run", "phase", "s", "anon ops/s", "anon ops/CPU s", "anon p99 x",
                "anon worst p99 x", "cache ops/s", "cache ops/CPU s", "cache p99 x",
                "cache worst p99 x", "cache re-read MiB"]


def speed_fractions(r):
    """{phase: {workload: (ops fraction, p99 ratio, worst window p99 ratio,
    ops per CPU-second fraction or None)}} against the same donor's idle,
    each the worst donor's (lowest throughput, highest latency); a donor
    that died counts 0 throughput."""
    out = {}
    for name, donor in (r.get("donor_speed") or {}).items():
        for w in DonorSpeed.WORKLOADS:
            ph = (donor or {}).get(w) or {}
            idle = ph.get("idle")
            for phase in PHASES:
                if phase == "idle" or phase not in ph or not idle or not idle["ops_s"]:
                    continue
                x = ph[phase]
                per_cpu = (x["ops_cpu_s"] / idle["ops_cpu_s"]
                           if x.get("ops_cpu_s") is not None and idle.get("ops_cpu_s")
                           else None)
                per_vcpu = (x["ops_vcpu_s"] / idle["ops_vcpu_s"]
                            if x.get("ops_vcpu_s") is not None and idle.get("ops_vcpu_s")
                            else None)
                f = (x["ops_s"] / idle["ops_s"], x["p99_us"] / max(idle["p99_us"], 1e-3),
                     x["worst_p99_us"] / max(idle["p99_us"], 1e-3), per_cpu, per_vcpu)
                cur = out.setdefault(phase, {}).get(w)
                out[phase][w] = f if cur is None else (
                    min(cur[0], f[0]), max(cur[1], f[1]), max(cur[2], f[2]),
                    None if cur[3] is None or f[3] is None else min(cur[3], f[3]),
                    None if cur[4] is None or f[4] is None else min(cur[4], f[4]))
    return out


def reread_mib(r, phase):
    """MiB the donors' cache workloads read again from disk in @phase
    (all donors), "-" when not measured."""
    kib = [((d or {}).get("cache") or {}).get(phase, {}).get("reread_kib")
           for d in (r.get("donor_speed") or {}).values()]
    kib = [k for k in kib if k is not None]
    return "%.1f" % (sum(kib) / 1024) if kib else "-"


def speed_table(results):
    rows = []
    for r in results:
        if r.get("error") or "donor_speed" not in r:
            continue
        secs = {}
        for n, d in r.get("donor_speed_phases", []):
            secs[n] = secs.get(n, 0) + d
        idle, idle_cpu = {}, {}
        for donor in r["donor_speed"].values():
            for w in DonorSpeed.WORKLOADS:
                x = ((donor or {}).get(w) or {}).get("idle")
                if x:
                    idle.setdefault(w, []).append("%.0f/s p99 %.0f us" % (x["ops_s"], x["p99_us"]))
                    idle_cpu.setdefault(w, []).append("%.0f" % x["ops_cpu_s"]
                                                      if x.get("ops_cpu_s") else "-")
        rows.append([LABELS[r["case"]], str(r.get("rep", 1)), "idle", "%.1f" % secs.get("idle", 0),
                     ", ".join(idle.get("anon", [])), ", ".join(idle_cpu.get("anon", [])), "1",
                     "-", ", ".join(idle.get("cache", [])), ", ".join(idle_cpu.get("cache", [])),
                     "1", "-", reread_mib(r, "idle")])
        fr = speed_fractions(r)
        for phase in PHASES:
            if phase not in fr:
                continue
            cells = []
            for w in DonorSpeed.WORKLOADS:
                f = fr[phase].get(w)
                cells += ["%.0f%%" % (100 * f[0]),
                          "%.0f%%" % (100 * f[3]) if f[3] is not None else "-",
                          "%.2f" % f[1], "%.2f" % f[2]] if f else ["-", "-", "-", "-"]
            rows.append([LABELS[r["case"]], str(r.get("rep", 1)), phase,
                         "%.1f" % secs.get(phase, 0)] + cells + [reread_mib(r, phase)])
    return render(SPEED_HEADER, rows) if rows else ""


def speed_targets(h, b):
    """The donors' speed targets of the hugeroom case @h, the balloon's
    figures @b beside them."""
    fh = speed_fractions(h)
    fb = speed_fractions(b) if b else {}

    def worst(fr, phase, i, pick):
        # a workload without CPU figures (index 3) leaves the phase without
        xs = [v[i] for v in fr.get(phase, {}).values()]
        return pick(xs) if xs and None not in xs else None

    def beside(phase, i, pick, fmt):
        x = worst(fb, phase, i, pick)
        return "; the balloon's %s: %s" % (phase, fmt % x) if x is not None else ""

    def per_cpu(phase):
        """The worst workload's ops per CPU-second against idle, and the
        raw figure beside it."""
        x, raw = worst(fh, phase, 3, min), worst(fh, phase, 0, min)
        v = worst(fh, phase, 4, min)
        if x is None:
            return None, ("no %s phase" % phase if raw is None else
                          "no CPU figures (raw %.0f%%)" % (100 * raw))
        return x, "worst workload %.0f%% per CPU-second of its QEMU (%s; raw ops/s %.0f%%)" % (
            100 * x, "per second of its vCPUs %.0f%%" % (100 * v) if v is not None
            else "no vCPU figures", 100 * raw)
    out = []
    x, text = per_cpu("prepare")
    out.append(("donors during prepare >= 90% of idle throughput (per CPU-second)",
                x is not None and x >= 0.9, text + beside("inflate", 3, min, "%.2f")))
    x = worst(fh, "prepare", 1, max)
    out.append(("donors' p99 during prepare <= 2x idle", x is not None and x <= 2.0,
                ("worst workload %.2fx (median of its 100 ms windows' p99)" % x
                 if x is not None else "no prepare phase")
                + beside("inflate", 1, max, "%.2fx")))
    x, text = per_cpu("after")
    out.append(("donors after release at idle throughput (per CPU-second; >= 98%: the run's "
                "noise)", x is not None and x >= 0.98, text + beside("after", 3, min, "%.2f")))
    return out


def reserve_targets(by):
    """The standing reserve's targets (issue 21 item 1): the reserve case
    against the roomy host of the same round."""
    h, roomy = by.get("reserve"), by.get("roomy")
    if not h:
        return []
    out = [("reserve: prepare <= 50 ms", h["prepare_s"] <= 0.05 and h.get("prepare_exit") == 0,
            "%.0f ms (exit %s)%s" % (h["prepare_s"] * 1000, h.get("prepare_exit"),
                                     "" if h.get("reserve_filled") else
                                     "; the reserve was NOT filled before the VM was asked for"))]
    if roomy and roomy["start_s"] is not None and h["start_s"] is not None:
        out.append(("reserve: start <= 1.1x the roomy host's", h["start_s"] <= 1.1 * roomy["start_s"],
                    "%.1f s vs %.1f s (%.2fx)" % (h["start_s"], roomy["start_s"],
                                                 h["start_s"] / roomy["start_s"])))
    else:
        out.append(("reserve: start <= 1.1x the roomy host's", False,
                    "no roomy case in this round, or a start failed"))
    thp = h["vm_thp_pct"]
    out.append(("reserve: new VM >= 99.5% THP", thp is not None and thp >= 99.5,
                "%.1f%%" % thp if thp is not None else "the new VM did not start"))
    out.append(("reserve: 0 processes killed", h["oom_kills"] == 0 and not h["donors_killed"],
                "%d OOM kills" % h["oom_kills"]))
    return out


def reserve_cost(results):
    """What the reserve cost, one line per run of the reserve case."""
    lines = []
    for r in results:
        if r["case"] != "reserve" or r.get("error"):
            continue
        a, b = r.get("reserve_donors_free_mib", [0, 0]), r.get("reserve_after") or {}
        lines.append("run %d: filled in %.1f s (donors' free memory %d -> %d MiB), after the "
                     "start %d of %d blocks again after %.1f s (refill %s ms), given back under "
                     "pressure %d blocks, paused: %s" % (
                         r.get("rep", 1), r.get("reserve_fill_s", 0), a[0], a[1],
                         b.get("blocks_ready", 0), b.get("blocks", 0),
                         r.get("reserve_refill_wait_s", 0), b.get("last_refill_ms"),
                         b.get("given_back_blocks", 0), b.get("paused")))
    return lines


def targets(results):
    """The issue's targets for the hugeroom case; (name, met, note)."""
    by = {r["case"]: r for r in results if not r.get("error")}
    h = by.get("hugeroom")
    extra = reserve_targets(by)
    if not h:
        err = [r for r in results if r["case"] == "hugeroom"]
        return ([("the hugeroom case ran", False, err[0]["error"].strip().splitlines()[-1])]
                if err else []) + extra
    b = by.get("balloon")
    out = []
    thp = h["vm_thp_pct"]
    res = h.get("reservation") or {}
    why = "; reservation %s%s: %s" % (res.get("state"), " (partial)" if res.get("partial")
                                      else "", res.get("reason"))
    out.append(("new VM >= 99% THP", thp is not None and thp >= 99.0,
                ("%.1f%%" % thp + (", %.1f points short" % (99.0 - thp) if thp < 99.0 else "")
                 if thp is not None else "the new VM did not start") + (why if thp is None or thp < 99 else "")))
    out.append(("0 processes killed", h["oom_kills"] == 0 and not h["donors_killed"],
                "%d OOM kills, donors dead: %s" % (h["oom_kills"],
                                                   ", ".join(h["donors_killed"]) or "none")))
    _, a_rss = mib_pair(h["donors_before"], h["donors_after"], "ram_rss")
    _, a_thp = mib_pair(h["donors_before"], h["donors_after"], "ram_thp")
    pct = 100.0 * a_thp / a_rss if a_rss else 0.0
    b_thp = mib_pair(h["donors_before"], h["donors_after"], "ram_thp")[0]
    dead = h["donors_killed"]
    out.append(("donors keep >= 95% of their memory THP-backed",
                a_rss > 0 and pct >= 95.0 and not dead,
                "%.1f%% (%d of %d MiB of guest RAM; its host THP %d -> %d MiB: %d MiB freed "
                "or split)%s"
                % (pct, a_thp, a_rss, b_thp, a_thp, b_thp - a_thp,
                   "; of the survivors only: %s killed, keeping nothing" % ", ".join(dead)
                   if dead else "")))
    if b and b["start_s"] is not None and h["start_s"] is not None:
        ht = h["prepare_s"] + h["start_s"]
        bt = b["prepare_s"] + b["start_s"]
        out.append(("prepare+start <= 0.5x the balloon path", ht <= 0.5 * bt,
                    "%.1f s vs %.1f s (%.2fx)" % (ht, bt, ht / bt if bt else 0)))
    else:
        out.append(("prepare+start <= 0.5x the balloon path", False,
                    "no balloon case or a start failed"))
    st = h["vm_start"]["compact_stall"]
    out.append(("< 10 compaction stalls during the start", st < 10, "%d stalls" % st))
    mig, mn = h.get("steps_pages_migrated", 0), h.get("min_migrate_pages", 0)
    out.append(("guest pages migrated <= 1.1x the minimum",
                mn > 0 and mig <= 1.1 * mn and mig > 0,
                "%d migrated, minimum %d%s (%.2fx)%s" % (
                    mig, mn, " (%d blocks short of backed ones)" % h["min_migrate_short"]
                    if h.get("min_migrate_short") else "",
                    mig / mn if mn else 0,
                    "; nothing migrated means the guests gave no host memory" if mig == 0
                    else per_block(h))))
    if b:
        hs = h["vm_prepare"]["scanned"] + h["vm_start"]["scanned"]
        bs = b["vm_prepare"]["scanned"] + b["vm_start"]["scanned"]
        out.append(("host compaction scanned >= 90% below the balloon path",
                    hs <= 0.1 * bs if bs else hs == 0,
                    "%d vs %d pages (%s)" % (hs, bs, "%.0f%% of it" % (100.0 * hs / bs)
                                             if bs else "balloon scanned nothing")))
    if "donor_speed" in h:
        out += speed_targets(h, b)
    if h.get("checksums_bad"):
        out.append(("donors' checksums intact after release", False,
                    ", ".join(h["checksums_bad"])))
    else:
        out.append(("donors' checksums intact after release", True, "all match"))
    return out + extra


def plot(results, png, work):
    if not shutil.which("gnuplot"):
        say("installing gnuplot-nox for the plot (apt-get)")
        p = subprocess.run(["apt-get", "install", "-y", "-q", "gnuplot-nox"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        if p.returncode != 0 or not shutil.which("gnuplot"):
            say("no plot: gnuplot-nox did not install:\n" + p.stdout[-1000:])
            return False
    dat = os.path.join(work, "vm-start.dat")
    with open(dat, "w") as f:
        # medians over each case's runs; a case with a failed start or an
        # error is drawn red and says how many of its runs failed
        for case, runs in by_case(results):
            sm = summarize(case, runs)
            ok = [r for r in runs if not r.get("error")]
            failed = sm["runs"] - sm["started"]
            scanned = [(r["vm_prepare"]["scanned"] + r["vm_start"]["scanned"]) / 1e6 for r in ok]
            mark = ("%d/%d FAILED" % (failed, sm["runs"])) if failed else ""
            f.write('"%s" %.2f %.2f %.2f %.2f %.3f %.2f %d "%s" %.2f\n' % (
                LABELS[case], median(sm["vm_thp_pct"]) or 0, median(sm["prepare_s"]) or 0,
                median(sm["start_s"]) or 0, median(sm["donor_thp_pct"]) or 0,
                median(scanned) or 0,
                sum(sm["oom_kills"]) / float(max(len(sm["oom_kills"]), 1)),
                0xc53a32 if failed else 0x3b75af, mark,
                (median(sm["prepare_s"]) or 0) + (median(sm["start_s"]) or 0)))
    reps = max(r.get("rep", 1) for r in results)
    gp = """set terminal pngcairo size 1900,460 noenhanced
set output '%s'
set multiplot layout 1,5 title 'vm-start: a %d MiB THP VM on a host the donors own (median of %d run(s); red: a start failed)'
set style fill solid 0.8 border -1
set boxwidth 0.8
set xtics rotate by -30 scale 0 font ',8'
set grid ytics
unset key
set xrange [-0.6:*]
set yrange [0:112]
set title 'new VM THP %%'
plot '%s' using 0:2:(0.8):8:xtic(1) with boxes lc rgb variable, \\
     '' using 0:($2+5):9 with labels font ',8' tc rgb '#c53a32'
set title 'surviving donors THP %% after'
plot '%s' using 0:5:(0.8):xtic(1) with boxes lc rgb '#519e3e'
set yrange [0:*]
set key top left font ',8'
set title 'seconds (prepare + start)'
plot '%s' using 0:10:(0.8):xtic(1) with boxes title 'start' lc rgb '#c53a32', \\
     '' using 0:3:(0.8) with boxes title 'prepare' lc rgb '#ef8636', \\
     '' using 0:($10*1.05+0.5):9 with labels notitle font ',8'
unset key
set title 'host compaction scanned (M pages)'
plot '%s' using 0:6:(0.8):xtic(1) with boxes lc rgb '#8d69b8'
set title 'processes OOM-killed per run'
set yrange [0:3]
plot '%s' using 0:7:(0.8):xtic(1) with boxes lc rgb '#444444'
unset multiplot
""" % (png, results[0].get("vm_mem_mib", 0), reps, dat, dat, dat, dat, dat)
    gpf = os.path.join(work, "vm-start.gp")
    with open(gpf, "w") as f:
        f.write(gp)
    p = subprocess.run(["gnuplot", gpf], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        say("gnuplot failed: " + p.stdout[-1000:])
        return False
    return True


def machine():
    mi = hrhost.meminfo_host()
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        thp = f.read().split("[")[1].split("]")[0]
    with open("/sys/kernel/mm/transparent_hugepage/defrag") as f:
        defrag = f.read().split("[")[1].split("]")[0]
    return {"kernel": os.uname().release, "cpus": os.cpu_count(), "cpu": cpu,
            "mem_total_mib": mi["MemTotal"] >> 10, "swap_mib": mi.get("SwapTotal", 0) >> 10,
            "thp_enabled": thp, "thp_defrag": defrag, "accel": hrvm.accel()}


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated, of %s (default all)" % ",".join(CASES))
    ap.add_argument("--donors", type=int, default=2)
    ap.add_argument("--donor-mem", type=int, help="MiB per donor (default: 9 GiB on 24 GiB)")
    ap.add_argument("--touch", type=int, help="MiB each donor touches (default: 8000 on 24 GiB)")
    ap.add_argument("--vm-mem", type=int, help="MiB of the new VM (default: 10 GiB on 24 GiB)")
    ap.add_argument("--free-fraction", type=float, default=0.5,
                    help="fraction of each donor's touched memory freed again (0.5)")
    ap.add_argument("--holes", choices=("striped", "random"), default="striped",
                    help="freed chunks evenly spread or random")
    ap.add_argument("--chunk", type=int, default=16,
                    help="pages per freed chunk (16: 64 KiB, so every 2 MiB block is hit)")
    ap.add_argument("--prealloc-donors", action="store_true",
                    help="donors' whole RAM host-backed (-mem-prealloc): none never touched")
    ap.add_argument("--page-cache", type=int, default=0, metavar="MIB",
                    help="donor0 also reads MIB of a virtio-blk disk into its page cache")
    ap.add_argument("--hog-leave", type=int, default=0, metavar="MIB",
                    help="after the donors, a dense helper takes all host memory but MIB")
    ap.add_argument("--margin", type=int, default=1024,
                    help="MiB above the VM's size the host should have free (shortfall)")
    ap.add_argument("--floor", type=int, default=None,
                    help="donors' floor_mb for hugeroomd (256; the demo 128)")
    ap.add_argument("--deadline", type=int, default=240, help="prepare --deadline (s)")
    ap.add_argument("--balloon-timeout", type=int, default=None,
                    help="s to wait for the balloons' targets (300; the demo 60): a donor "
                         "without that much free memory never reaches it")
    ap.add_argument("--fpr-wait", type=int, default=30,
                    help="at most this long for free page reporting (s)")
    ap.add_argument("--kernel", default="6.12")
    ap.add_argument("--claim-holes", type=int, choices=(0, 1, 2), default=None,
                    help="the guest driver's claim_holes for the hugeroom case "
                         "(0 never, 1 where it pays: the default, 2 always)")
    ap.add_argument("--span-blocks", type=int, choices=range(1, 65), default=None,
                    metavar="1-64",
                    help="the donors' driver span_blocks: the most blocks at consecutive "
                         "addresses one alloc_contig_range() empties (default: the "
                         "driver's, 64; 1 empties each block on its own)")
    ap.add_argument("--evac-nice", type=int, choices=range(20), default=None, metavar="0-19",
                    help="the donors' driver evac_nice: the nice level their EVACUATE runs at "
                         "(default: the driver's, 0)")
    ap.add_argument("--repeat", type=int, default=None,
                    help="rounds of every case, each in an order rotated by one; the "
                         "table gives median [min-max] (default 3; the demo 1)")
    ap.add_argument("--whole-free", type=float, default=0.25, metavar="FRACTION",
                    help="fpr-whole: this fraction of each donor's touched memory is freed "
                         "in whole blocks (default 0.25, below --free-fraction)")
    ap.add_argument("--vmem-base", type=int, default=None, metavar="MIB",
                    help="virtio-mem: the donors' boot memory; the rest of --donor-mem is "
                         "the virtio-mem device (default: an eighth, at least 512)")
    ap.add_argument("--donor-speed", action="store_true",
                    help="run the donors' own workloads (anonymous memory, page cache) and "
                         "report their speed in each phase as a fraction of idle")
    ap.add_argument("--speed-mib", type=int, default=64,
                    help="MiB each donor workload works on (64)")
    ap.add_argument("--speed-window", type=float, default=5.0,
                    help="s of the idle and after windows of --donor-speed (5)")
    ap.add_argument("--json", default="vm-start.json")
    ap.add_argument("--png", default="vm-start.png")
    ap.add_argument("--demo", action="store_true",
                    help="the small version scripts/demo.sh runs")
    ap.add_argument("--no-first-touch", action="store_true")
    ap.add_argument("--touch-margin", type=int, default=None, metavar="MIB",
                    help="the first touch leaves this much of MemAvailable untouched (256 "
                         "while outer reporting is held: what it leaves, the outer "
                         "hypervisor has taken back, and the case to use it first pays "
                         "for that; 1024 otherwise)")
    ap.add_argument("--outer-reporting", choices=("hold", "keep"), default="hold",
                    help="where this host is itself a guest whose free memory is reported to "
                         "an outer hypervisor (virtio-balloon free page reporting), hold the "
                         "reports for the run and touch the host's memory again before each "
                         "case, as on a host of its own (default), or keep them")
    ap.add_argument("--from-json", metavar="FILE",
                    help="print the table and targets of a saved run (and plot it), run nothing")
    a = ap.parse_args(argv)
    d = demo_defaults() if a.demo else defaults(hrhost.meminfo_host()["MemTotal"] >> 10)
    for k in ("donor_mem", "touch", "vm_mem", "floor", "balloon_timeout"):
        if getattr(a, k) is None:
            setattr(a, k, d[k])
    if a.demo and not a.hog_leave:
        a.hog_leave = d["hog_leave"]
    if a.repeat is None:
        a.repeat = 1 if a.demo else 3
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.vmem_base is None:
        a.vmem_base = max(512, a.donor_mem // 8 // 2 * 2)
    if not 0 < a.whole_free < a.free_fraction:
        ap.error("--whole-free must be above 0 and below --free-fraction")
    a.cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    for c in a.cases:
        if c not in CASES:
            ap.error("unknown case %r" % c)
    if a.touch >= a.donor_mem:
        ap.error("--touch must be below --donor-mem")
    return a


def all_targets(results):
    """The targets of each run (the cases of one round), then per target:
    (name, runs met, runs, [notes])."""
    reps = sorted({r.get("rep", 1) for r in results})
    per = {}
    order = []
    for n in reps:
        for name, ok, note in targets([r for r in results if r.get("rep", 1) == n]):
            if name not in per:
                per[name] = [0, 0, []]
                order.append(name)
            per[name][0] += 1 if ok else 0
            per[name][1] += 1
            per[name][2].append("run %d: %s" % (n, note))
    return [(name, per[name][0], per[name][1], per[name][2]) for name in order]


def report(results):
    say(table(results))
    say("stalls and scanned: host compaction during prepare / during start; guest "
        "migrated: guest pgmigrate_success (hugeroom: donate steps' pages_migrated / "
        "minimum from the occupancy snapshot)")
    st = speed_table(results)
    if st:
        say("\nthe donors' own speed (tools/speed in every donor), each phase against the same "
            "donor's idle, the worst donor: throughput as a fraction, the median 100 ms "
            "window's p99 and the worst window's p99 as multiples of idle's median p99:")
        say(st)
    say("\nper case over its runs, median [min-max] (a failed start counts 0% THP):")
    say(summary_table(results))
    rc = reserve_cost(results)
    if rc:
        say("\nwhat the standing reserve cost:")
        for line in rc:
            say("  " + line)
    tg = all_targets(results)
    if tg:
        say("\ntargets (hugeroom case), met in how many runs:")
        for name, met, runs, ns in tg:
            say("  [%s %d/%d] %s:" % ("met" if met == runs else "MISSED", met, runs, name))
            for note in ns:
                say("      " + note)
    return tg


def write_json(path, data):
    """Replace @path with @data at once: a reader never sees half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def main(argv):
    a = parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        say("machine: %(kernel)s, %(cpus)d CPUs (%(cpu)s), %(mem_total_mib)d MiB" %
            saved["machine"])
        if saved["machine"].get("outer_reporting"):
            say("outer free page reporting: " + saved["machine"]["outer_reporting"])
        report(saved["results"])
        failed = any(r.get("error") for r in saved["results"])
        work = hrvm.workdir("hr-vmstart-")
        try:
            if plot(saved["results"], os.path.abspath(a.png), work):
                say("plot: %s" % os.path.abspath(a.png))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 1 if failed else 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(130))
    hrhost.bigmem_lock(exclusive=True)
    b = Bench(a)
    try:
        m = machine()
        say("machine: %(kernel)s, %(cpus)d CPUs (%(cpu)s), %(mem_total_mib)d MiB, swap "
            "%(swap_mib)d MiB, THP %(thp_enabled)s, defrag %(thp_defrag)s, guests %(accel)s"
            % m)
        if a.outer_reporting == "hold":
            m["outer_reporting"] = b.outer.hold()
        else:
            m["outer_reporting"] = "kept (--outer-reporting keep)" if b.outer.present() \
                else "none (no free page reporting to an outer hypervisor)"
        say("outer free page reporting: " + m["outer_reporting"])
        held = b.outer.saved is not None
        if a.touch_margin is None:
            a.touch_margin = 256 if held else 1024
        b.prepare_images()
        if not a.no_first_touch and not held:
            hrhost.first_touch(a.touch_margin << 10)
        # every case --repeat times, each round in an order rotated by one,
        # so that no case always runs first on a host just touched, or
        # always after the same one
        n = len(a.cases)
        for rep in range(1, a.repeat + 1):
            order = a.cases[(rep - 1) % n:] + a.cases[:(rep - 1) % n]
            say("\n== round %d of %d: %s" % (rep, a.repeat, ", ".join(order)))
            for case in order:
                try:
                    if held and not a.no_first_touch:
                        # memory freed over five minutes ago is reported still
                        hrhost.first_touch(a.touch_margin << 10)
                    r = b.run_case(case)
                except Exception as e:  # noqa: B902 -- every error is a row, and exit 1
                    err = "%s: %s" % (type(e).__name__, e)
                    say("  %s (round %d) ERROR: %s" % (case, rep, err))
                    say("".join(traceback.format_exc()))
                    r = {"case": case, "error": err}
                    if b.daemon:
                        say("  hugeroomd log tail:\n" + b.daemon.log())
                        r["daemon_log_tail"] = b.daemon.log()[-4000:]
                    b.cleanup_case()
                r["rep"] = rep
                r["vm_mem_mib"] = a.vm_mem
                b.results.append(r)
                # a run stopped later keeps the cases it finished
                # (--from-json re-prints them)
                write_json(a.json, {"machine": m, "args": vars(a), "results": b.results,
                                    "partial": True})
        say("\n== %d MiB new VM; %d donors of %d MiB, %d MiB touched, %.0f%% of every block "
            "freed (%s); %d round(s)" % (a.vm_mem, a.donors, a.donor_mem, a.touch,
                                         a.free_fraction * 100, a.holes, a.repeat))
        tg = report(b.results)
        errors = [r for r in b.results if r.get("error")]
        write_json(a.json, {"machine": m, "args": vars(a), "results": b.results,
                            "summary": [summarize(c, rs) for c, rs in by_case(b.results)],
                            "targets": [{"target": name, "met_runs": met, "runs": runs,
                                         "notes": ns} for name, met, runs, ns in tg],
                            "errors": len(errors)})
        say("\nJSON: %s" % os.path.abspath(a.json))
        if plot(b.results, os.path.abspath(a.png), b.work):
            say("plot: %s" % os.path.abspath(a.png))
        if errors:
            say("\n%d of %d case runs ended in an error (rows marked ERROR): exit 1"
                % (len(errors), len(b.results)))
            return 1
        return 0
    except KeyboardInterrupt:
        say("interrupted; the cases that finished are in %s (--from-json re-prints them)"
            % os.path.abspath(a.json))
        return 130
    finally:
        b.cleanup_case()
        b.outer.restore()
        shutil.rmtree(b.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
