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
