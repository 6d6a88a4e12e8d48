#!/usr/bin/python3
"""Benchmark: the cost of getting 2 MiB blocks out of a fragmented guest.

Boots the Debian 6.12 guest (1 GiB by default) under the patched QEMU with
hugeroomd, fragments its memory with tools/memfill (every other 64 KiB
chunk of a large fill freed again, so most pageblocks are about half
used) and then obtains N blocks three ways, re-fragmenting in between:

  evacuate  `hugeroomctl evacuate --blocks N --wait`: the driver picks the
            cheapest blocks and empties them with alloc_contig_range;
  capture   `hugeroomctl capture --blocks N --wait`: the guest kernel's own
            allocator and direct compaction find order-9 pages;
  compact   `echo 1 >/proc/sys/vm/compact_memory` in the guest: full
            compaction of every zone; blocks obtained = the rise in free
            order-9 (and 2x order-10) buddies in /proc/buddyinfo.

For evacuate it prints pages migrated per freed block against the minimum
the status snapshot taken just before said those same blocks needed
(512 - free pages of each, from the candidate list; target <= 1.1x), with
pages migrated both as the driver counts them and as the guest's
pgmigrate_success counter moved; blocks freed per second; blocks tried per
block freed.  For all three it prints the compaction counters
(compact_migrate_scanned, compact_free_scanned, compact_isolated,
pgmigrate_success) per block obtained.

The per-page limit: the evacuation's time per migrated page (the driver's
elapsed_us over its pages_migrated) against move_pages(2) of the same
number of pages in the same guest, in the same run (tools/movepages,
right after the evacuation once its fill is gone: the kernel's own
migration of those pages, node 0 to node 1 and back; target <= 1.5x).
move_pages skips pages already on the target node, so the guest has a
second, memory-only NUMA node of --numa-mib MiB beside its --mem.

Under TCG every time is inflated by emulation: compare the rows with each
other, not with hardware.  This prints figures; it asserts nothing.

  benchmarks/evacuate.py [--series 6.12] [--mem 1G] [--blocks 32] [--chunk 16]
                         [--numa-mib 256]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "vm"))
import hrvm  # noqa: E402

D = "/sys/kernel/debug/virtio_hugeroom"
COUNTERS = ("pgmigrate_success", "pgmigrate_fail", "compact_migrate_scanned",
            "compact_free_scanned", "compact_isolated", "compact_stall",
            "compact_success", "compact_fail")

# the driver's counters of where an evacuation's time goes (debugfs status)
TIME_KEYS = ("evac_sweep_ns", "evac_block_ns", "evac_block_calls", "evac_take_ns",
             "evac_hold_ns", "evac_hold_sends", "evac_claim_ns", "evac_claim_calls")


class Bench:
    def __init__(self, guest, daemon, chunk):
        self.g = guest
        self.d = daemon
        self.chunk = chunk
        self.n_fill = 0
        self.serving = False  # the latest memfill still runs

    def ctl_request(self, *args):
        # exit 3 = the request ended partial: still a result to print
        exe = os.path.join(hrvm.build_dir(), "host", "hugeroomctl")
        p = subprocess.run([exe, "--socket", self.d.api_sock, "--json"] + list(args) + ["--wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = p.stdout
        if not out.strip():
            raise hrvm.Failure("hugeroomctl %s: exit %d\n%s" % (args, p.returncode, p.stderr))
        dec = json.JSONDecoder()
        s, last = out.strip(), None
        while s:
            last, n = dec.raw_decode(s)
            s = s[n:].strip()
        if isinstance(last, dict) and isinstance(last.get("request"), dict):
            last = last["request"]
        return last

    def snapshot(self):
        """Fresh report: {gpa: free pages} of the candidates, hist per zone."""
        cands, hist, flags = {}, {}, "?"
        for line in self.g.fresh_status():
            f = line.split()
            if not f:
                continue
            if f[0] == "candidate":
                cands[int(f[1], 16)] = int(f[3])
            elif f[0] == "zone" and len(f) > 4 and f[4] == "hist":
                hist[f[3]] = [int(x) for x in f[5:11]]
            elif f[0] == "flags":
                flags = f[1]
        return cands, hist, flags

    def buddy_blocks(self):
        """Free 2 MiB blocks: order-9 buddies + 2 x order-10, all zones."""
        n = 0
        for line in self.g.cmd("sh cat /proc/buddyinfo"):
            f = line.split()
            counts = [int(x) for x in f[4:]]
            if len(counts) >= 11:
                n += counts[9] + 2 * counts[10]
        return n

    def fragment(self):
        """(Re)start one memfill with holes over nearly all free memory."""
        if self.serving:
            self.quit_fill()
        self.n_fill += 1
        self.serving = True
        avail = self.g.meminfo()["MemAvailable"] // 1024
        mib = max(64, avail - 24)
        d = "/tmp/bf%d" % self.n_fill
        self.g.cmd("sh mkdir -p %s; /tools/memfill serve %s %d %d %d >%s/log 2>&1 &"
                   % (d, d, mib, self.chunk, self.n_fill, d))
        hrvm.wait_for(lambda: (lambda l: l if l and l[0].startswith("READY") else None)(
            self.g.cmd("sh cat %s/log" % d)), 900, "memfill READY", interval=2)
        return mib

    def quit_fill(self):
        # a memfill that quit has no reader on its fifo: ask only once
        self.g.cmd("sh /tools/memfill ctl /tmp/bf%d quit || true" % self.n_fill)
        self.serving = False
        time.sleep(1)

    def move_pages(self, pages):
        """move_pages(2) of @pages fresh anonymous pages to node 1 and back:
        {"move": ns per page, "back": ns per page, ...}; the memfill that
        filled the guest is stopped first."""
        self.quit_fill()
        out = {"pages": pages}
        for line in self.g.cmd("sh /tools/movepages %d 0 1" % pages, timeout=600):
            f = line.split()
            if f and f[0] in ("MOVE", "BACK"):
                kv = dict(x.split("=") for x in f[1:])
                out[f[0].lower()] = int(kv["ns_per_page"])
                out[f[0].lower() + "_moved"] = int(kv["moved"])
                out[f[0].lower() + "_us"] = int(kv["us"])
        if "move" not in out or not out["move_moved"]:
            raise hrvm.Failure("movepages moved nothing: %s" % out)
        return out

    def driver_times(self):
        """The driver's own time counters (debugfs status): where an
        evacuation's time goes."""
        out = {}
        for line in self.g.debugfs("status"):
            f = line.split()
            if len(f) == 2 and f[0] in TIME_KEYS:
                out[f[0]] = int(f[1])
        return out

    def measure(self, fn):
        v0 = self.g.vmstat()
        b0 = self.buddy_blocks()
        t0 = time.monotonic()
        out = fn()
        dt = time.monotonic() - t0
        v1 = self.g.vmstat()
        b1 = self.buddy_blocks()
        delta = {k: v1.get(k, 0) - v0.get(k, 0) for k in COUNTERS}
        return out, delta, dt, b1 - b0


def per(x, n):
    return "%.1f" % (x / n) if n else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", default="6.12")
    ap.add_argument("--mem", default="1G")
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=16, help="hole size in 4 KiB pages")
    ap.add_argument("--numa-mib", type=int, default=256,
                    help="MiB of the guest's second NUMA node (memory only), where "
                         "move_pages moves to; 0: no node, no move_pages comparison")
    args = ap.parse_args()
    unit = {"G": 1024, "M": 1}.get(args.mem[-1].upper())
    mem_mib = int(args.mem[:-1]) * unit if unit else int(args.mem)
    mem, extra = args.mem, []
    if args.numa_mib:
        mem = "%dM" % (mem_mib + args.numa_mib)
        extra = ["-object", "memory-backend-ram,id=n0,size=%dM" % mem_mib,
                 "-object", "memory-backend-ram,id=n1,size=%dM" % args.numa_mib,
                 "-numa", "node,nodeid=0,cpus=0-1,memdev=n0",
                 "-numa", "node,nodeid=1,memdev=n1"]
    mp = None
    work = hrvm.workdir("hr-bench-evac-")
    daemon = guest = None
    rows = []
    try:
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _m) = hrvm.pick_kernel(args.series)
        ko = hrvm.build_module(kver)
        initrd = hrvm.build_initramfs(kver, ko, work, tools=True)
        daemon = hrvm.Daemon(work)
        daemon.start()
        guest = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon, mem=mem,
                           extra=extra)
        guest.start()
        hrvm.wait_for(lambda: (lambda d: d if d.get("connected") else None)(
            daemon.ctl_json("guest", guest.name)), 30, "the guest to connect", interval=0.5)
        b = Bench(guest, daemon, args.chunk)
        # The guest's proactive compaction (kcompactd, on by default) reacts
        # to the fragmentation memfill makes and migrates pages in the
        # background; its migrations land in the global pgmigrate_success
        # the table compares, so it is switched off in the guest: every
        # method is then measured on its own work only.
        guest.cmd("sh echo 0 > /proc/sys/vm/compaction_proactiveness")

        # 1. evacuate
        mib = b.fragment()
        cands, hist, flags = b.snapshot()
        # Entirely free blocks cost nothing to anyone: ask for that many
        # plus --blocks, so that --blocks of them need pages moved.
        nfree = sum(h[0] for z, h in hist.items() if z != "DMA")
        n = nfree + args.blocks
        print("# %s, %s guest, accel %s, holes of %d pages, %d blocks per method "
              "(%d entirely free + %d)" % (kver, args.mem, hrvm.accel(), args.chunk, n,
                                           nfree, args.blocks))
        print("# evacuate: fragmented %d MiB; movable pageblocks by free pages "
              "(512, 448-511, 256-447, 64-255, 1-63, 0): %s; %d candidates, flags %s"
              % (mib, hist, len(cands), flags))
        t_before = b.driver_times()
        req, delta, dt, _ = b.measure(lambda: b.ctl_request("evacuate", guest.name,
                                                            "--blocks", str(n)))
        t_after = b.driver_times()
        times = {k: t_after.get(k, 0) - t_before.get(k, 0) for k in TIME_KEYS}
        res = req.get("result") or {}
        freed = res.get("blocks_freed", 0)
        blocks = [int(x, 16) for x in req.get("blocks") or []]
        known = [x for x in blocks if x in cands]
        minimum = sum(512 - cands[x] for x in known)
        mig = res.get("pages_migrated", 0)
        elapsed = res.get("elapsed_us", 0) / 1e6 or dt
        print("# evacuate result: %s" % json.dumps(res))
        print("# evacuate: %d of %d freed blocks were in the snapshot's candidate list;"
              " minimum pages to migrate for them: %d" % (len(known), len(blocks), minimum))
        if len(known) == len(blocks) and minimum:
            print("# evacuate efficiency: driver-counted migrated / minimum = %.3f "
                  "(target <= 1.1); pgmigrate_success / minimum = %.3f"
                  % (mig / minimum, delta["pgmigrate_success"] / minimum))
        if t_after:
            total_ns = res.get("elapsed_us", 0) * 1000 or int(dt * 1e9)
            parts = [("sweeps", times["evac_sweep_ns"], None),
                     ("alloc_contig_range of blocks", times["evac_block_ns"],
                      "%d calls" % times["evac_block_calls"]),
                     ("claims", times["evac_claim_ns"], "%d calls" % times["evac_claim_calls"]),
                     ("taking blocks offline", times["evac_take_ns"], None),
                     ("HOLD round trips", times["evac_hold_ns"],
                      "%d HOLDs" % times["evac_hold_sends"])]
            rest = total_ns - sum(ns for _n, ns, _x in parts)
            parts.append(("the rest (checks, PROGRESS, other)", rest, None))
            print("# evacuate time, %.3f s over %d blocks freed (%d tried), %d pages migrated:"
                  % (total_ns / 1e9, freed, res.get("blocks_tried", 0), mig))
            for name, ns, extra in parts:
                print("#   %-36s %9.1f ms %5.1f%%  %7.2f ms per block freed%s" % (
                    name, ns / 1e6, 100.0 * ns / total_ns if total_ns else 0,
                    ns / 1e6 / freed if freed else 0, "  (%s)" % extra if extra else ""))
            if times["evac_block_calls"]:
                print("#   alloc_contig_range: %.2f ms per call; per page migrated %.0f us"
                      % (times["evac_block_ns"] / 1e6 / times["evac_block_calls"],
                         times["evac_block_ns"] / 1e3 / mig if mig else 0))
        rows.append(("evacuate", freed, res.get("blocks_tried", 0), elapsed, mig, delta,
                     minimum if len(known) == len(blocks) else None))
        b.ctl_request("return", guest.name, "--all")
        if args.numa_mib and mig:
            # as many pages as the evacuation migrated, what node 1 can take
            mp = b.move_pages(min(mig, (args.numa_mib - 32) * 256))
            mp["evacuate"] = int(elapsed * 1e9 / mig)
            print("# move_pages: %s" % json.dumps(mp))

        # 2. capture
        mib = b.fragment()
        _c, hist, _f = b.snapshot()
        print("# capture: fragmented %d MiB; hist %s" % (mib, hist))
        req, delta, dt, _ = b.measure(lambda: b.ctl_request("capture", guest.name,
                                                            "--blocks", str(n)))
        res = req.get("result") or {}
        print("# capture result: %s" % json.dumps(res))
        rows.append(("capture", res.get("blocks_freed", 0), res.get("blocks_tried", 0),
                     res.get("elapsed_us", 0) / 1e6 or dt, res.get("pages_migrated", 0),
                     delta, None))
        b.ctl_request("return", guest.name, "--all")

        # 3. compact_memory
        mib = b.fragment()
        _c, hist, _f = b.snapshot()
        print("# compact_memory: fragmented %d MiB; hist %s" % (mib, hist))
        _o, delta, dt, got = b.measure(lambda: guest.cmd("sh echo 1 >/proc/sys/vm/compact_memory",
                                                         timeout=900))
        rows.append(("compact_memory", max(got, 0), None, dt, delta["pgmigrate_success"],
                     delta, None))
    except hrvm.Failure as e:
        print("# FAILED: %s" % e)
        if daemon:
            print("# daemon log:\n" + daemon.log())
        return 1
    finally:
        if guest:
            guest.stop()
        if daemon:
            daemon.stop()

    hdr = ("method", "blocks", "tried/blk", "blk/s", "migr/blk", "min/blk", "ratio",
           "pgmig/blk", "mscan/blk", "fscan/blk", "isol/blk")
    print()
    print("%-15s %6s %9s %7s %9s %8s %6s %9s %10s %10s %9s" % hdr)
    for name, got, tried, secs, mig, delta, minimum in rows:
        print("%-15s %6d %9s %7s %9s %8s %6s %9s %10s %10s %9s" % (
            name, got, per(tried, got) if tried is not None else "-",
            "%.2f" % (got / secs) if secs else "-", per(mig, got),
            per(minimum, got) if minimum is not None else "-",
            "%.2f" % (mig / minimum) if minimum else "-",
            per(delta["pgmigrate_success"], got), per(delta["compact_migrate_scanned"], got),
            per(delta["compact_free_scanned"], got), per(delta["compact_isolated"], got)))
    print()
    print("# blocks: 2 MiB blocks obtained (compact_memory: rise of free order>=9 buddies);"
          " migr: pages migrated as the method reports it (compact_memory: pgmigrate_success);"
          " min: pages the status snapshot said the same blocks needed; pgmig/mscan/fscan/isol:"
          " guest /proc/vmstat deltas per block (pgmigrate_success, compact_migrate_scanned,"
          " compact_free_scanned, compact_isolated)")
    if mp:
        print()
        print("per migrated page, same guest, same run:")
        print("  evacuate    %8d ns  (%.3f s for %d pages migrated)" % (
            mp["evacuate"], rows[0][3], rows[0][4]))
        print("  move_pages  %8d ns  node 0 -> 1 (%d pages in %d us), %d ns back" % (
            mp["move"], mp["move_moved"], mp["move_us"], mp.get("back", 0)))
        print("  evacuate / move_pages: %.2fx (target <= 1.5x)" % (mp["evacuate"] / mp["move"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
