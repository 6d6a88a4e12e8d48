#!/usr/bin/python3
"""End to end: `hugeroomctl prepare` on a host short of free 2 MiB blocks.

Two donor guests (Debian 6.12 under the patched QEMU, 1 GiB each,
-mem-prealloc so their RAM is resident, THP-backed where the host could)
run memfill: part of their memory dense, part with holes. Then a helper
process makes the host short of free 2 MiB blocks: it touches most of the
host's available memory with 4 KiB pages and gives back all but 8 of every
512 (one page in 64), so that free memory is plenty but scattered. It is
capped (MemAvailable minus 3 GiB, at most 14 GiB), touches memory for a few
seconds only, and is killed in every exit path.

Checks:
 1. `hugeroomctl prepare SIZE --wait`, SIZE being all the node's free
    memory (above its high watermark and the daemon's pool margin) plus
    200 MiB, ends ready and its report lists what each step gave and cost
    (donations with pages migrated and time);
 2. the reservation holds SIZE in the node's hugetlb pool, and the node's
    2 MiB blocks (free in /proc/buddyinfo plus the pool's growth) rose by
    at least the shortfall (SIZE minus the free blocks at the start),
    counting the blocks other processes of this shared host took as THPs
    meanwhile (vmstat thp_fault_alloc + thp_collapse_alloc, printed);
 3. every donor kept its floor ([guest:NAME] floor_mb) of free memory, and
    the daemon's held sets match the reservation's holds;
 4. a request that cannot be met by its deadline (2 GiB more than all the
    host's free memory, 5 s) ends within the deadline plus a margin, ready
    and partial or failed, with a reason that says what it reached;
 5. releasing gives every held block back to the donors (held 0 in the
    daemon), and memfill's checksums still match in both guests.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402
from hrhost import (DONOR_FLOORS_MB as FLOORS_MB, HOG_MARGIN_KB, bigmem_lock,  # noqa: E402
                    buddy_blocks, fill_donor, fragmenting_hog, meminfo_host, verify, vmstat_host,
                    wait_reporting)


POOL_MARGIN_MB = 256  # hugeroomd's default pool_margin_mb


def main():
    series = sys.argv[1] if len(sys.argv) > 1 else "6.12"
    tap = hrvm.Tap()
    work = hrvm.workdir("hr-prepare-%s-" % series)
    daemon = hog = None
    guests = []
    try:
        # the fragmenting helper takes all the host has: not beside another
        # test that does (its helper was OOM-killed before it said READY)
        bigmem_lock(exclusive=True)
        mi = meminfo_host()
        need_kb = HOG_MARGIN_KB + (4 << 20)
        if mi["MemAvailable"] < need_kb:
            tap.ok(False, "the host has %d MiB available; this test needs %d MiB"
                   % (mi["MemAvailable"] >> 10, need_kb >> 10))
            return tap.done()
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel(series)
        hrvm.log("kernel %s, qemu %s, accel %s, workdir %s" % (kver, qemu, hrvm.accel(), work))
        ko = hrvm.build_module(kver)
        initrd = hrvm.build_initramfs(kver, ko, work, tools=True)
        daemon = hrvm.Daemon(work, interval_ms=1000)
        with open(daemon.conf, "a") as f:
            f.write("state_dir=%s\nreturn_high_mark_mb=0\n" % work)
            for name, mb in FLOORS_MB.items():
                f.write("[guest:%s]\nfloor_mb=%d\n" % (name, mb))
        daemon.start()
        for name in FLOORS_MB:
            g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon, mem="1G",
                           name=name, extra=("-mem-prealloc",))
            g.start()
            guests.append(g)
        for g, seed in zip(guests, (1, 2)):
            fill_donor(g, seed)
        wait_reporting(daemon, 2)
        tap.ok(True, "two donors booted, filled and reporting")

        hog = fragmenting_hog()
        b_pre = buddy_blocks()
        hog.start()
        time.sleep(1)
        host = daemon.ctl_json("host")["nodes"][0]
        b0 = buddy_blocks()
        hrvm.log("fragmenting helper: %d MiB touched, 1 page in 64 kept; free 2 MiB blocks "
                 "%d -> %d, %d above the high watermark, unusable index %.3f"
                 % (hog.kb >> 10, b_pre, b0, host["available_blocks"],
                    host["unusable_index"] / 1000))
        hrvm.log(daemon.ctl("host"))

        # 1. prepare all the node's free memory (what the daemon's hugetlb
        # pool may take: above the high watermark and the pool margin, as
        # the kernel can assemble it) plus 200 MiB: that much must come
        # from the donors
        headroom = (host["free_pages"] - host["wmark_high"] - POOL_MARGIN_MB * 256) // 512
        want = max(headroom, 0) + 100
        pool0 = hrvm.pool_pages()
        thp0 = vmstat_host("thp_fault_alloc") + vmstat_host("thp_collapse_alloc")
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"),
                            "--socket", daemon.api_sock, "prepare", "%dM" % (want * 2),
                            "--deadline", "180", "--requester", "test-prepare", "--wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        took = time.monotonic() - t0
        b1 = buddy_blocks()
        pool1 = hrvm.pool_pages()
        thp_faults = vmstat_host("thp_fault_alloc") + vmstat_host("thp_collapse_alloc") - thp0
        for line in p.stdout.splitlines():
            hrvm.log(line)
        res = daemon.ctl_json("reservations")["reservations"][0]
        r = daemon.ctl_json("reservation", res["id"])
        # donations are the donor steps only: a compaction step is host work
        donations = [s for s in r["steps"] if s["kind"] == "donate"]
        given = sum(s.get("blocks_held", 0) for s in donations)
        tap.ok(p.returncode == 0 and r["state"] == "ready" and not r["partial"],
               "prepare %d MiB ended ready in %.1f s (exit %d)" % (want * 2, took, p.returncode),
               p.stderr + r.get("reason", ""))
        tap.ok(len(donations) > 0 and all("pages_migrated" in s and "elapsed_ms" in s
                                          for s in r["steps"])
               and "Cost:" in p.stdout,
               "the report lists each step with its gain and cost (%d donations of %d steps)"
               % (len(donations), len(r["steps"])), p.stdout)
        tap.ok(given > 0,
               "the donors gave blocks: %d held from %d donate steps (%s)"
               % (given, len(donations),
                  ", ".join("%s %s" % (s.get("guest"), s.get("blocks_held", 0))
                            for s in donations) or "no donate step"),
               "steps: %s" % [(s["kind"], s.get("state"), s.get("gained")) for s in r["steps"]])

        # 2. the node's 2 MiB blocks, free in buddyinfo or held in the
        # hugetlb pool for the reservation, rose by at least what was asked
        # beyond the free blocks at the start
        shortfall = want - b0
        # this host is shared: other processes' THP faults and collapses
        # meanwhile (vmstat; our guests' RAM is preallocated and their held
        # blocks untouched) take free 2 MiB blocks too, and count as raised
        tap.ok(b1 - b0 + (pool1 - pool0) + thp_faults >= shortfall
               and abs((pool1 - pool0) - want) <= hrvm.POOL_DRIFT and r["pool_blocks"] == want,
               "free 2 MiB blocks %d -> %d (%+d), hugetlb pool %d -> %d (%+d, the "
               "reservation's %d), shortfall was %d; %d blocks held from donors, %d host THP "
               "faults meanwhile"
               % (b0, b1, b1 - b0, pool0, pool1, pool1 - pool0, r["pool_blocks"], shortfall,
                  r["held_blocks"], thp_faults))

        # 3. floors and held sets
        # the donations' requests end after the daemon counts them done
        # (the driver restores its PCP policy then, and the per-cpu lists
        # refill from the buddy lists); the floor counts those lists' free
        # pages, which MemFree leaves out
        hrvm.wait_for(lambda: not [q for g in guests
                                   for q in daemon.ctl_json("guest", g.name)["requests"]
                                   if q["state"] in ("queued", "sent", "running")],
                      60, "the donors' requests ended", interval=1)
        for g in guests:
            free_mb = g.free_kb() // 1024
            tap.ok(free_mb >= FLOORS_MB[g.name],
                   "%s kept its floor: %d MiB free (per-cpu lists too) >= %d"
                   % (g.name, free_mb, FLOORS_MB[g.name]))
        # both read at the same moment: a donor may give blocks back for
        # its own pressure after prepare (allowed), and both views follow
        seen = {}

        def same():
            seen["held"] = sum(x["held_blocks"] for x in daemon.ctl_json("guests")["guests"])
            seen["owned"] = daemon.ctl_json("reservation", r["id"])["held_blocks"]
            return seen["held"] == seen["owned"]
        try:
            hrvm.wait_for(same, 20, "the held sets to be the reservation's", interval=1)
        except hrvm.Failure:
            pass
        tap.ok(seen["held"] == seen["owned"],
               "the daemon's held sets (%d) are the reservation's holds (%d; %d after prepare)"
               % (seen["held"], seen["owned"], r["held_blocks"]))

        # 4. a deadline that cannot be met: 2 GiB more than all free host
        # memory (compaction may assemble most of the free memory, not more)
        host = daemon.ctl_json("host")["nodes"][0]
        impossible_mb = host["free_pages"] // 256 + 2048
        t0 = time.monotonic()
        p2 = subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"),
                             "--socket", daemon.api_sock, "prepare",
                             "%dM" % impossible_mb, "--deadline", "5", "--wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=60)
        took = time.monotonic() - t0
        r2 = daemon.ctl_json("reservations")["reservations"][1]
        for line in p2.stdout.splitlines():
            hrvm.log(line)
        tap.ok(took < 20 and p2.returncode == 4  # not satisfiable: short or failed
               and ((r2["state"] == "ready" and r2["partial"]) or r2["state"] == "failed")
               and ("deadline passed" in (r2["reason"] or "")
                    or "no more sources" in (r2["reason"] or "")),
               "an impossible request ended in %.1f s: %s, %s" % (took, r2["state"],
                                                                 r2["reason"]))

        # 5. release: every hold goes back, the data is intact
        hog.stop()
        ok, msg = hrvm.release_pool(daemon, lambda: (daemon.ctl("release", r["id"]),
                                                     daemon.ctl("release", r2["id"])))
        tap.ok(ok, "released: %s; %d at the start" % (msg, pool0))
        try:
            hrvm.wait_for(lambda: sum(x["held_blocks"]
                                      for x in daemon.ctl_json("guests")["guests"]) == 0,
                          60, "every hold returned", interval=1)
            tap.ok(True, "after release the donors hold nothing for the host")
        except hrvm.Failure as e:
            tap.ok(False, "after release the donors hold nothing for the host", str(e))
        for g in guests:
            bad = verify(g, ("dense", "holes"))
            tap.ok(not bad, "%s: every memfill checksum matches" % g.name, bad)
    except hrvm.Failure as e:
        tap.ok(False, "unexpected failure", str(e))
        if daemon:
            print("# daemon log:\n# " + daemon.log().replace("\n", "\n# "))
    finally:
        if hog:
            hog.stop()
        for g in guests:
            g.stop()
        if daemon:
            daemon.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
