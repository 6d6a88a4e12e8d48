#!/usr/bin/python3
"""What the guest PCP policies buy: churn speed against free 2 MiB blocks.

For each kernel series (6.12 and 6.1 by default) and each case, a fresh
2-vCPU guest (real QEMU with the patched device, the Debian kernel, the
driver; this script plays the daemon over the chardev, as the driver tests
do) gets a PCP policy with SET_PCP, then runs tests/vm/guest-tools/churn:
RESIDENT MiB written and every other 16 KiB freed again (resident memory
spread over many blocks), then 2 threads, one per vCPU, each faulting a
private ROUND-page region page by page and freeing it at once, for SECONDS.
Right after the workload:

  * churn throughput (pages faulted and freed per second, both threads) and
    the latency of each page fault (p50, p99, from a reservoir of samples);
  * pages idle on the per-CPU lists (/proc/zoneinfo count, all CPUs and
    zones) and free 2 MiB blocks (/proc/buddyinfo orders 9 and 10);
  * an EVACUATE CHEAPEST of BLOCKS blocks: blocks freed, pages migrated per
    freed block, time in the guest.

Cases: balanced (the kernel's own sizing; auto-tuned on 6.12), latency,
density, and latency switched to density just before the evacuation (what
hugeroomd's executor does to a donor), with its idle pages measured after
the switch.  One run; the figures are what that run measured.

  benchmarks/pcp.py [--series 6.12,6.1] [--seconds 10] [--round 8192]
                    [--resident 640] [--blocks 128] [--mem 1G]
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vm"))
sys.path.insert(0, os.path.join(HERE, "..", "guest-driver", "tests"))
import hrvm  # noqa: E402
import holds_test as ht  # noqa: E402
import pcp_test as pt  # noqa: E402

CASES = [("balanced", pt.BALANCED, False), ("latency", pt.LATENCY, False),
         ("density", pt.DENSITY, False),
         ("latency>density", pt.LATENCY, True)]


def pcp_idle(g):
    zones = pt.parse_zoneinfo(g.cmd("sh cat /proc/zoneinfo"))
    return sum(p["count"] for z in zones.values() for p in z["cpus"].values())


def free_blocks(g):
    n = 0
    for line in g.cmd("sh cat /proc/buddyinfo"):
        f = line.split()
        counts = [int(x) for x in f[4:]]
        if len(counts) >= 11:
            n += counts[9] + 2 * counts[10]
    return n


def set_policy(d, rid, policy):
    d.send(pt.set_pcp(rid, policy))
    st = d.of(rid, 60)[-1]["status"]
    if st != ht.S_OK:
        raise hrvm.Failure("SET_PCP %d answered %d" % (policy, st))


def run_case(args, kver, initrd, name, policy, switch):
    wd = hrvm.workdir("hr-bench-pcp-")
    d = ht.FakeDaemon(wd)
    g = hrvm.Guest(hrvm.qemu_binary(), kver, None, initrd, wd, daemon=d,
                   mem=args.mem)
    g.start()
    try:
        hrvm.wait_for(lambda: d.state and d.state[5], 120, "DRIVER_OK")
        set_policy(d, 10, policy)
        g.cmd("sh : >/tmp/churn.log; /tools/churn 2 %s %d %d >>/tmp/churn.log 2>&1 &" %
              (args.seconds, args.round, args.resident))
        out = hrvm.wait_for(
            lambda: (lambda l: l if any("READY" in x for x in l) else None)(
                g.cmd("sh cat /tmp/churn.log")),
            args.seconds + 300, "churn", interval=1)
        res = dict(kv.split("=") for x in out if x.startswith("RESULT")
                   for kv in x.split()[1:])
        row = {"case": name, "pages_per_s": float(res["pages_per_s"]),
               "p50_ns": int(res["fault_p50_ns"]),
               "p99_ns": int(res["fault_p99_ns"]),
               "free_ns": float(res["free_ns_per_page"]),
               "pcp_idle": pcp_idle(g), "free_blocks": free_blocks(g)}
        if switch:
            set_policy(d, 11, pt.DENSITY)
            row["pcp_idle_switched"] = pcp_idle(g)
            row["free_blocks_switched"] = free_blocks(g)
        d.drain(quiet=1)
        d.send(ht.evacuate(12, args.blocks, flags=ht.CHEAPEST))
        r = d.of(12, 1200)[-1]
        row.update(freed=r["freed"], migrated=r["migrated"],
                   evac_ms=r["elapsed_us"] / 1000.0,
                   per_block=r["migrated"] / r["freed"] if r["freed"] else 0)
        return row
    finally:
        g.stop()


def table(series, rows):
    head = ("case", "pages/s", "fault p50 ns", "fault p99 ns",
            "free ns/page", "PCP idle pages", "free 2M blocks",
            "evac freed", "migrated/block", "evac ms")
    lines = [head]
    base = rows[0]["pages_per_s"]
    for r in rows:
        idle = str(r["pcp_idle"])
        blocks = str(r["free_blocks"])
        if "pcp_idle_switched" in r:
            idle += " -> %d" % r["pcp_idle_switched"]
            blocks += " -> %d" % r["free_blocks_switched"]
        lines.append((r["case"], "%.0f (%.2fx)" % (r["pages_per_s"],
                                                  r["pages_per_s"] / base),
                      str(r["p50_ns"]), str(r["p99_ns"]),
                      "%.0f" % r["free_ns"], idle, blocks,
                      "%d/%d" % (r["freed"], r["blocks"]),
                      "%.1f" % r["per_block"], "%.0f" % r["evac_ms"]))
    w = [max(len(x[i]) for x in lines) for i in range(len(head))]
    print("\n%s (2 vCPUs; ratios against balanced)" % series)
    for i, line in enumerate(lines):
        print("| " + " | ".join(c.ljust(w[j]) for j, c in enumerate(line)) +
              " |")
        if i == 0:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--series", default="6.12,6.1")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--round", type=int, default=8192,
                    help="pages each thread faults and frees per round")
    ap.add_argument("--resident", type=int, default=640,
                    help="MiB written, half freed again in 16 KiB holes")
    ap.add_argument("--blocks", type=int, default=128,
                    help="blocks the EVACUATE CHEAPEST asks for")
    ap.add_argument("--mem", default="1G")
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    args = ap.parse_args()
    print("# accel %s, churn %ss x 2 threads, round %d pages, resident "
          "%d MiB, evacuate %d blocks, guest %s" %
          (hrvm.accel(), args.seconds, args.round, args.resident,
           args.blocks, args.mem), flush=True)
    want = args.cases.split(",")
    for series in args.series.split(","):
        kver, _ = hrvm.pick_kernel(series)
        wd = hrvm.workdir("hr-bench-pcp-%s-" % series)
        initrd = hrvm.build_initramfs(kver, hrvm.build_module(kver), wd,
                                      tools=True)
        rows = []
        for name, policy, switch in CASES:
            if name not in want:
                continue
            row = run_case(args, kver, initrd, name, policy, switch)
            row["blocks"] = args.blocks
            hrvm.log("%s %s: %s" % (kver, name, row))
            rows.append(row)
        table("%s (%s)" % (series, kver), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
