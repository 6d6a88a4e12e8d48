"""Host-side helpers shared by the prepare test, its benchmark and the demo:
reading the host's free 2 MiB blocks, making the host short of them, and
filling a guest's memory so it is a realistic donor."""

import mmap
import subprocess
import sys

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

assert mmap.MADV_DONTNEED  # the helper needs Python 3.8+ madvise

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
