"""Host-side helpers shared by the prepare test, its benchmark and the demo:
reading the host's free 2 MiB blocks, making the host short of them, and
filling a guest's memory so it is a realistic donor."""

import fcntl
import glob
import json
import mmap
import os
import socket
import subprocess
import sys
import time

import hrvm

# Run as a child so its memory goes away with it, whatever happens to us.
HOG = r"""
import mmap, sys, time
size = int(sys.argv[1]) << 10
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
for off in range(0, size, 4096):
    m[off] = 1
# keep one page in 64 (8 of every 512): no 2 MiB block stays whole
for off in range(0, size, 64 * 4096):
    n = min(63 * 4096, size - off - 4096)
    if n > 0:
        m.madvise(mmap.MADV_DONTNEED, off + 4096, n)
print("READY", flush=True)
time.sleep(3600)
"""

# A dense helper: @kb KiB of 4 KiB pages, all kept (used memory the host
# cannot compact away), with its own oom_score_adj.
DENSE_HOG = r"""
import mmap, sys, time
size = int(sys.argv[1]) << 10
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(sys.argv[2])
except OSError:
    pass  # below 0 needs CAP_SYS_RESOURCE, which containers may lack
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
for off in range(0, size, 4096):
    m[off] = 1
print("READY", flush=True)
if sys.argv[3] == "exit":
    sys.exit(0)
time.sleep(3600)
"""

assert mmap.MADV_DONTNEED  # the helper needs Python 3.8+ madvise

# Runs that use more than 4 GiB of host memory take this lock exclusively,
# small VM tests shared (other sessions share this machine).
BIGMEM_LOCK = "/tmp/hr-bigmem.lock"

# The two-donor setting of the prepare test and the host-work benchmark:
# each donor's floor of free memory, in MiB.
DONOR_FLOORS_MB = {"hr-prep-a": 300, "hr-prep-b": 200}
# The fragmenting helper leaves this much host memory available, and takes
# at most this much (KiB).
HOG_MARGIN_KB = 3 << 20
HOG_MAX_KB = 14 << 20


def meminfo_host():
    d = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            d[k] = int(v.split()[0])
    return d


def vmstat_host(key):
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == key:
                return int(v)
    return 0


def buddy_blocks(node=0):
    """Free 2 MiB-capable chunks on @node, in 2 MiB blocks, ZONE_DMA excluded."""
    n = 0
    with open("/proc/buddyinfo") as f:
        for line in f:
            parts = line.split()
            if int(parts[1].rstrip(",")) != node or parts[3] == "DMA":
                continue
            counts = [int(x) for x in parts[4:]]
            for order in range(9, len(counts)):
                n += counts[order] << (order - 9)
    return n


class Hog:
    """Touches @kb KiB of host memory with 4 KiB pages and keeps one page in
    64: plenty of free memory, but no whole 2 MiB block in it."""

    def __init__(self, kb):
        self.kb = kb
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-c", HOG, str(self.kb)],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.stop()
            raise hrvm.Failure("the fragmenting helper did not start: %r" % line)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def hog_kb():
    """What the fragmenting helper takes on this host: all it has available
    but HOG_MARGIN_KB, capped at HOG_MAX_KB."""
    return min(meminfo_host()["MemAvailable"] - HOG_MARGIN_KB, HOG_MAX_KB)


def fragmenting_hog():
    """A Hog sized to this host by hog_kb()."""
    return Hog(hog_kb())


def fill_donor(g, seed):
    """Make guest @g a realistic donor: 30% of its available memory dense,
    30% with holes (every other 64 KiB chunk freed)."""
    avail = g.meminfo()["MemAvailable"] // 1024
    memfill(g, "dense", int(avail * 0.30), 0, seed)
    memfill(g, "holes", int(avail * 0.30), 16, seed + 10)


def wait_reporting(daemon, n, timeout=60):
    """Wait until the daemon lists exactly @n guests, all connected and with
    a status report."""
    def reporting():
        guests = daemon.ctl_json("guests")["guests"]
        return len(guests) == n and all(x["connected"] and x["seq"] is not None
                                         for x in guests)
    hrvm.wait_for(reporting, timeout, "%d guests reporting" % n, interval=1)


def memfill(g, name, mib, chunk, seed):
    """Start memfill in guest @g: @mib MiB with a checksummed pattern, every
    @chunk-th chunk freed again (0: dense)."""
    d = "/tmp/" + name
    g.cmd("sh mkdir -p %s; /tools/memfill serve %s %d %d %d >%s/log 2>&1 &"
          % (d, d, mib, chunk, seed, d))
    hrvm.wait_for(lambda: any("READY" in l for l in g.cmd("sh cat %s/log" % d)), 600,
                  "memfill %s READY" % name, interval=2)


def verify(g, names):
    """memfill's checksums in @g; returns the failures."""
    bad = []
    for name in names:
        out = g.cmd("sh /tools/memfill ctl /tmp/%s verify || true" % name, timeout=600)
        if not any("bad=0 " in l for l in out):
            bad.append((name, out))
    return bad


def thp_coverage(pid):
    """(AnonHugePages, Rss) of a process in KiB, from smaps_rollup."""
    thp = rss = 0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k == "AnonHugePages":
                thp = int(v.split()[0])
            elif k == "Rss":
                rss = int(v.split()[0])
    return thp, rss


def settle_free(still_kb=64 << 10, every_s=1.0, timeout_s=30):
    """Wait until the host's MemFree moves by less than @still_kb between
    two reads @every_s apart (the processes of a run that just ended may
    still be giving their memory back), at most @timeout_s; returns the
    last MemFree in KiB."""
    last = meminfo_host()["MemFree"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(every_s)
        now = meminfo_host()["MemFree"]
        if abs(now - last) < still_kb:
            return now
        last = now
    hrvm.log("host MemFree still moving after %d s (%d MiB)" % (timeout_s, last >> 10))
    return last


# the mode this process holds BIGMEM_LOCK in: None, "shared" or "exclusive"
_bigmem_held = None


def bigmem_lock(exclusive=True):
    """Take the machine's big-memory lock (flock on BIGMEM_LOCK), exclusive
    or shared; returns the fd, held until the process exits.  A test that
    uses all of the host's memory takes it exclusively; every guest a test
    boots takes it shared (hrvm.Guest.start()), so that such a test never
    runs beside another test's guests, and they wait for it.  Held already,
    as strongly: nothing to do.  Under `flock -x BIGMEM_LOCK cmd` the lock's
    fd is inherited: an exclusive lock is taken on that fd (the same lock,
    so no self-deadlock), a shared one leaves the ancestor's as it is.  An
    ancestor holding the lock on an fd we did not inherit would deadlock
    us: then we fail."""
    global _bigmem_held
    if _bigmem_held == "exclusive" or (_bigmem_held and not exclusive):
        return None
    op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    mode = "exclusive" if exclusive else "shared"
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/%s" % fd) == BIGMEM_LOCK:
                if exclusive:
                    fcntl.flock(int(fd), op)
                _bigmem_held = mode
                return int(fd)
        except OSError:
            continue
    fd = os.open(BIGMEM_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)
        _bigmem_held = mode
        return fd
    except BlockingIOError:
        pass
    pid = os.getppid()
    while pid > 1:
        try:
            for fd2 in os.listdir("/proc/%d/fd" % pid):
                if os.readlink("/proc/%d/fd/%s" % (pid, fd2)) == BIGMEM_LOCK:
                    os.close(fd)
                    raise hrvm.Failure("ancestor process %d holds %s; run this under "
                                       "`flock -x %s` or outside it" %
                                       (pid, BIGMEM_LOCK, BIGMEM_LOCK))
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    hrvm.log("waiting for the %s lock on %s (another big-memory run)"
             % (mode, BIGMEM_LOCK))
    fcntl.flock(fd, op)
    _bigmem_held = mode
    return fd


def normal_managed_mib():
    """The Normal zones' managed pages in MiB (this host's Normal zone grows
    as memory is first touched)."""
    n = 0
    zone = None
    with open("/proc/zoneinfo") as f:
        for line in f:
            p = line.split()
            if len(p) >= 4 and p[0] == "Node" and p[2] == "zone":
                zone = p[3]
            elif zone == "Normal" and len(p) == 2 and p[0] == "managed":
                n += int(p[1])
    return n >> 8


def first_touch(margin_kb=1 << 20):
    """Touch all the host's available memory but @margin_kb once and give it
    back, so the Normal zone has grown (DESIGN.md, "Test environment").
    The helper is the OOM killer's first choice."""
    kb = meminfo_host()["MemAvailable"] - margin_kb
    if kb <= 0:
        return 0
    before = normal_managed_mib()
    p = subprocess.run([sys.executable, "-c", DENSE_HOG, str(kb), "1000", "exit"],
                       stdout=subprocess.PIPE, text=True)
    if "READY" not in p.stdout:
        raise hrvm.Failure("the first-touch helper failed (exit %d)" % p.returncode)
    hrvm.log("first touch: %d MiB touched once; Normal zone managed %d -> %d MiB"
             % (kb >> 10, before, normal_managed_mib()))
    return kb


class OuterReporting:
    """Free page reporting of the machine this host itself runs in.

    The hosts here are guests of an outer hypervisor: a virtio-balloon
    with VIRTIO_BALLOON_F_REPORTING hands every free 2 MiB block back to it
    (this kernel's page_reporting module: min_free_ms 0, so at once), and
    touching such a block again costs an outer fault per page: a 2 GiB
    prealloc VM started in 0.3 s on memory just freed and in 3.7-5.4 s on
    memory freed 5 s earlier.  A real KVM host has no such layer, so a
    benchmark that times starts holds it: hold() keeps freed memory from
    being reported for five minutes (min_free_ms, whose maximum here is
    about 300000, and max_waiting_mib of this kernel's module: memory freed
    longer ago is reported still, so a run touches the host's memory again
    before each case), restore() puts the values back.  The values taken are
    kept in STATE until restored, so a run that was killed is undone by the
    next one.  reported_mib() is the module's counter (None without it)."""

    PARAMS = "/sys/module/page_reporting/parameters"
    STATE = "/var/tmp/hugeroom-outer-reporting.json"
    HOLD = {"min_free_ms": "299000", "max_waiting_mib": "1048576"}

    def __init__(self):
        self.saved = None
        self.restore_stale()

    @staticmethod
    def present():
        """True if a virtio-balloon with free page reporting is driven."""
        for d in glob.glob("/sys/bus/virtio/devices/*"):
            try:
                with open(d + "/device") as f:
                    dev = int(f.read(), 16)
                with open(d + "/features") as f:
                    feat = f.read().strip()
            except OSError:
                continue
            # VIRTIO_BALLOON_F_REPORTING is feature bit 5
            if dev == 5 and len(feat) > 5 and feat[5] == "1" and \
                    os.path.exists(d + "/driver"):
                return True
        return False

    def _read(self, name):
        try:
            with open(os.path.join(self.PARAMS, name)) as f:
                return f.read().strip()
        except OSError:
            return None

    def _write(self, values):
        for k, v in values.items():
            with open(os.path.join(self.PARAMS, k), "w") as f:
                f.write(v)

    def reported_mib(self):
        v = self._read("reported_kib")
        return int(v) >> 10 if v is not None else None

    def holdable(self):
        return all(self._read(k) is not None for k in self.HOLD)

    def hold(self):
        """Hold reporting; returns what it did, for the run's header."""
        if not self.present():
            return "none (no free page reporting to an outer hypervisor)"
        if not self.holdable():
            return "kept: this kernel's page_reporting cannot delay reports"
        self.saved = {k: self._read(k) for k in self.HOLD}
        with open(self.STATE, "w") as f:
            json.dump(self.saved, f)
        self._write(self.HOLD)
        return "held (%s; restored at exit)" % ", ".join(
            "%s %s -> %s" % (k, self.saved[k], v) for k, v in self.HOLD.items())

    def restore(self):
        if self.saved is None:
            return
        self._write(self.saved)
        self.saved = None
        try:
            os.unlink(self.STATE)
        except OSError:
            pass

    def restore_stale(self):
        """Undo the hold of a run that died before restore()."""
        try:
            with open(self.STATE) as f:
                stale = json.load(f)
        except (OSError, ValueError):
            return
        if self.holdable():
            self._write(stale)
            hrvm.log("outer free page reporting: restored %s, left held by a run that died"
                     % stale)
        os.unlink(self.STATE)


class DenseHog:
    """@kb KiB of used host memory (4 KiB pages, no holes) with
    oom_score_adj @adj (default 0; lowering it needs CAP_SYS_RESOURCE, which
    a container may not have: give the donors 1000 instead, so the OOM
    killer picks a donor first)."""

    def __init__(self, kb, adj=0):
        self.kb = kb
        self.adj = adj
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-c", DENSE_HOG, str(self.kb),
                                      str(self.adj), "stay"],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.stop()
            raise hrvm.Failure("the dense helper did not start: %r" % line)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def vmstat_all():
    d = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            d[k] = int(v)
    return d


def ram_coverage(pid, min_kib=256 << 10):
    """(AnonHugePages, Rss) in KiB of a QEMU's guest RAM alone: its large
    (>= min_kib), non-executable mappings, without the rest of the process
    (heap, TCG code buffer, libraries), which no THP target is about."""
    thp = rss = 0
    big = False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                lo, _, hi = first.partition("-")
                perms = line.split()[1]
                big = ((int(hi, 16) - int(lo, 16)) >> 10 >= min_kib and "x" not in perms)
                continue
            if not big:
                continue
            k, _, v = line.partition(":")
            if k == "AnonHugePages":
                thp += int(v.split()[0])
            elif k == "Rss":
                rss += int(v.split()[0])
    return thp, rss


def proc_mem(pid):
    """{"rss": KiB, "thp": KiB} of a live process (smaps_rollup), and
    "ram_rss", "ram_thp" of its guest RAM (ram_coverage()), or None."""
    try:
        thp, rss = thp_coverage(pid)
        ram_thp, ram_rss = ram_coverage(pid)
    except (OSError, ValueError):
        return None
    return {"rss": rss, "thp": thp, "ram_rss": ram_rss, "ram_thp": ram_thp}


def set_oom_score_adj(pid, adj):
    try:
        with open("/proc/%d/oom_score_adj" % pid, "w") as f:
            f.write("%d\n" % adj)
    except OSError:
        pass


def memfill_start(g, name, mib, chunk, seed, free_permille=500, random_holes=False):
    """Like memfill() without waiting: start it, return at once (several
    guests fill in parallel); memfill_wait() waits for READY."""
    d = "/tmp/" + name
    opts = " -f %d%s" % (free_permille, " -R" if random_holes else "")
    g.cmd("sh mkdir -p %s; /tools/memfill serve %s %d %d %d%s >%s/log 2>&1 & echo $! >%s/pid"
          % (d, d, mib, chunk, seed, opts, d, d))


def memfill_wait(g, name, timeout=1200):
    """Wait for memfill @name in @g to be READY; fail at once when it or
    the guest died (the guest's OOM killer, say)."""
    d = "/tmp/" + name

    def ready():
        if not g.alive():
            return ["DEAD guest"]
        out = g.cmd("sh cat %s/log; kill -0 $(cat %s/pid) 2>/dev/null || echo MEMFILL-GONE"
                    % (d, d))
        return [l for l in out if "READY" in l] or [l for l in out if "MEMFILL-GONE" in l]
    lines = hrvm.wait_for(ready, timeout, "memfill %s READY" % name, interval=2)
    if not lines[0].startswith("READY"):
        raise hrvm.Failure("%s: memfill %s ended before READY (%s); guest console:\n%s"
                           % (g.name, name, lines[0], g.console()[-1500:]))
    return lines[0]


def _qmp(path, *cmds, timeout=600):
    """Connect to a QMP socket, run @cmds ((name, args) pairs), return the
    answers; waits for the greeting up to @timeout."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(path)
    f = s.makefile("rw")
    json.loads(f.readline())
    out = []
    for name, args in (("qmp_capabilities", None),) + cmds:
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        f.write(json.dumps(msg) + "\n")
        f.flush()
        while True:
            line = f.readline()
            if not line:
                raise hrvm.Failure("QMP %s: connection closed" % name)
            r = json.loads(line)
            if "return" in r or "error" in r:
                break
        out.append(r)
    s.close()
    return out[1:]


class PreallocVM:
    """The new VM: the built QEMU (TCG), @mib MiB of guest RAM from
    memory-backend-ram with prealloc=on (QEMU madvises guest RAM
    MADV_HUGEPAGE, so with host THP "madvise" it is THP-advised), paused
    (-S): no kernel boots, only its RAM is allocated.  start() returns the
    seconds until preallocation ended: QMP answers and the process' RSS
    holds all its RAM."""

    def __init__(self, qemu, mib, workdir, name="new-vm", oom_adj=500):
        self.qemu = qemu
        self.mib = mib
        self.qmp_sock = os.path.join(workdir, "qmp-%s.sock" % name)
        self.errlog = os.path.join(workdir, "%s.log" % name)
        self.name = name
        self.oom_adj = oom_adj
        self.proc = None
        self.killed = False

    def start(self, timeout=900):
        if os.path.exists(self.qmp_sock):
            os.unlink(self.qmp_sock)
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [self.qemu, "-nodefaults", "-display", "none", "-L", "/usr/share/qemu",
             "-L", "/usr/share/seabios", "-machine", "q35,memory-backend=m0", "-accel", "tcg",
             "-m", "%dM" % self.mib, "-object",
             "memory-backend-ram,id=m0,size=%dM,prealloc=on" % self.mib, "-S",
             "-name", self.name, "-qmp", "unix:%s,server=on,wait=off" % self.qmp_sock],
            stdout=subprocess.DEVNULL, stderr=open(self.errlog, "w"))
        set_oom_score_adj(self.proc.pid, self.oom_adj)

        def dead():
            if self.proc.poll() is not None:
                self.killed = self.proc.returncode == -9
                raise hrvm.Failure("the new VM's QEMU exited (%d)%s: %s" % (
                    self.proc.returncode, " (SIGKILL: OOM?)" if self.killed else "",
                    open(self.errlog).read()[-2000:]))
        hrvm.wait_for(lambda: dead() or os.path.exists(self.qmp_sock), timeout,
                      "the new VM's QMP socket", interval=0.01)
        # the monitor answers once the main loop runs, i.e. after prealloc
        while True:
            try:
                _qmp(self.qmp_sock, ("query-status", None), timeout=5)
                break
            except (OSError, ValueError, hrvm.Failure):
                dead()
                if time.monotonic() - t0 > timeout:
                    raise hrvm.Failure("the new VM's QMP did not answer in %d s" % timeout)
        hrvm.wait_for(lambda: dead() or thp_coverage(self.proc.pid)[1] >= self.mib * 1024,
                      timeout, "the new VM's RSS to hold its RAM", interval=0.01)
        return time.monotonic() - t0

    def coverage(self):
        """(AnonHugePages KiB, Rss KiB) of its guest RAM (ram_coverage())."""
        return ram_coverage(self.proc.pid)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                _qmp(self.qmp_sock, ("quit", None), timeout=5)
                self.proc.wait(20)
            except (OSError, ValueError, hrvm.Failure, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def host_backing(pid, hva, pages=512):
    """How the host backs @pages 4 KiB pages of process @pid at @hva:
    (resident pages, True if the first resident one is in a host THP),
    from /proc/PID/pagemap and /proc/kpageflags (root)."""
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek((hva >> 12) * 8)
        raw = f.read(pages * 8)
    present = 0
    pfn = None
    for i in range(0, len(raw), 8):
        e = int.from_bytes(raw[i:i + 8], "little")
        if e >> 63:
            present += 1
            if pfn is None:
                pfn = e & ((1 << 55) - 1)
    thp = False
    if pfn:
        with open("/proc/kpageflags", "rb") as f:
            f.seek(pfn * 8)
            flags = int.from_bytes(f.read(8), "little")
        thp = bool(flags & (1 << 22))
    return present, thp
