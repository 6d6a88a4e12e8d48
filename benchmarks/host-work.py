#!/usr/bin/python3
"""Host work saved: host compaction alone versus the planner, same target.

The setting of tests/vm/test-prepare.py: two 1 GiB donor guests (Debian
6.12, patched QEMU, -mem-prealloc, memfill with holes) and a host whose
free memory a capped helper scattered (one page in 64 kept). The target: a
new THP-backed VM needing every free 2 MiB block the node has plus 200 MiB,
played by a process that faults that much anonymous memory with
MADV_HUGEPAGE (THP defrag "madvise": the fault compacts directly when no
free 2 MiB block is left).

 A. compaction alone: the process faults in on the fragmented host.
 B. planner: the host is fragmented again, `hugeroomctl prepare` makes the
    room (free blocks, guest donations, compaction only if it planned it),
    then the same process faults in.

For each: wall time, host pages scanned and migrated by compaction and
migration (/proc/vmstat deltas: compact_migrate_scanned +
compact_free_scanned, pgmigrate_success), THP faults served and fallen
back. The vmstat counters are host-wide: anything else running on this
host is counted too (the figures say how many THP faults happened).
kcompactd's proactive compaction would quietly undo the fragmentation
between the setup and the measurement: it is switched off
(vm.compaction_proactiveness=0) for the run and restored after, and
kcompactd's own scanning is counted in "scanned".

  HUGEROOM_BUILD=build benchmarks/host-work.py
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vm"))
import hrvm  # noqa: E402

import hrhost  # noqa: E402

CONSUMER = r"""
import mmap, sys, time
size = int(sys.argv[1]) << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_HUGEPAGE)
t0 = time.monotonic()
for off in range(0, size, 4096):
    m[off] = 1
print("TOUCHED %.3f" % (time.monotonic() - t0), flush=True)
sys.stdin.readline()
"""

KEYS = ("compact_migrate_scanned", "compact_free_scanned", "pgmigrate_success",
        "thp_fault_alloc", "thp_fault_fallback", "compact_stall",
        "compact_daemon_migrate_scanned", "compact_daemon_free_scanned")
PROACTIVE = "/proc/sys/vm/compaction_proactiveness"


def vmstat():
    d = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k in KEYS:
                d[k] = int(v)
    return d


def delta(a, b):
    return {k: b[k] - a[k] for k in KEYS}


def consume(mib):
    """Fault in @mib MiB of THP-advised memory; return (seconds, process)."""
    p = subprocess.Popen([sys.executable, "-c", CONSUMER, str(mib)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("TOUCHED"):
        p.kill()
        raise hrvm.Failure("consumer failed: %r" % line)
    return float(line.split()[1]), p


def release(p):
    if p and p.poll() is None:
        p.kill()
        p.wait()


def report(label, secs, d, extra=""):
    print("%-22s %8.2f s %12d %12d %9d %9d %s" % (
        label, secs, d["compact_migrate_scanned"] + d["compact_free_scanned"]
        + d["compact_daemon_migrate_scanned"] + d["compact_daemon_free_scanned"],
        d["pgmigrate_success"], d["thp_fault_alloc"], d["thp_fault_fallback"], extra),
        flush=True)


def main():
    work = hrvm.workdir("hr-hostwork-")
    daemon = hog = cons = None
    guests = []
    with open(PROACTIVE) as f:
        proactive = f.read().strip()
    try:
        with open(PROACTIVE, "w") as f:
            f.write("0\n")
        mi = hrhost.meminfo_host()
        if mi["MemAvailable"] < hrhost.HOG_MARGIN_KB + (4 << 20):
            print("the host has %d MiB available; this needs 7 GiB" % (mi["MemAvailable"] >> 10))
            return 1
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel("6.12")
        ko = hrvm.build_module(kver)
        initrd = hrvm.build_initramfs(kver, ko, work, tools=True)
        daemon = hrvm.Daemon(work, interval_ms=1000)
        with open(daemon.conf, "a") as f:
            f.write("state_dir=%s\nreturn_high_mark_mb=0\n" % work)
            for name, mb in hrhost.DONOR_FLOORS_MB.items():
                f.write("[guest:%s]\nfloor_mb=%d\n" % (name, mb))
        daemon.start()
        for name in hrhost.DONOR_FLOORS_MB:
            g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon, mem="1G",
                           name=name, extra=("-mem-prealloc",))
            g.start()
            guests.append(g)
        for g, seed in zip(guests, (1, 2)):
            hrhost.fill_donor(g, seed)
        hrhost.wait_reporting(daemon, 2)
        hog_kb = hrhost.hog_kb()

        print("%-22s %10s %12s %12s %9s %9s" % ("", "time", "scanned", "migrated",
                                               "THP", "fallback"))
        # A: compaction alone
        hog = hrhost.Hog(hog_kb)
        hog.start()
        time.sleep(1)
        avail = daemon.ctl_json("host")["nodes"][0]["available_blocks"]
        target_mib = (avail + 100) * 2
        print("target: %d MiB of THP (the node has %d free 2 MiB blocks above the high "
              "watermark, scattered free memory %d MiB)" % (target_mib, avail, hog_kb >> 10))
        v0 = vmstat()
        secs, cons = consume(target_mib)
        report("A compaction alone", secs, delta(v0, vmstat()))
        release(cons)
        cons = None
        hog.stop()
        time.sleep(2)

        # B: the planner first, then the same faults
        hog = hrhost.Hog(hog_kb)
        hog.start()
        time.sleep(1)
        avail = daemon.ctl_json("host")["nodes"][0]["available_blocks"]
        v0 = vmstat()
        t0 = time.monotonic()
        subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"), "--socket",
                        daemon.api_sock, "prepare", "%dM" % target_mib, "--deadline", "120",
                        "--wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        prep_secs = time.monotonic() - t0
        v1 = vmstat()
        r = daemon.ctl_json("reservations")["reservations"][-1]
        r = daemon.ctl_json("reservation", r["id"])
        kinds = {}
        for s in r["steps"]:
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
        guest_pages = sum(s["pages_migrated"] for s in r["steps"] if s["kind"] == "donate")
        report("B1 planner prepare", prep_secs, delta(v0, v1),
               "%s, %s; %d blocks from guests, %d guest pages migrated"
               % (r["state"] + (" partial" if r["partial"] else ""),
                  ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items())),
                  sum(s["blocks_held"] for s in r["steps"] if s["kind"] == "donate"),
                  guest_pages))
        secs, cons = consume(target_mib)
        v2 = vmstat()
        report("B2 then the faults", secs, delta(v1, v2))
        report("B total", prep_secs + secs, delta(v0, v2))
        print("B's reservation: %s" % r["reason"])
        release(cons)
        cons = None
        daemon.ctl("release", r["id"])
    finally:
        with open(PROACTIVE, "w") as f:
            f.write(proactive + "\n")
        release(cons)
        if hog:
            hog.stop()
        for g in guests:
            g.stop()
        if daemon:
            daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
