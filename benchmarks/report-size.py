#!/usr/bin/python3
"""Benchmark: size of a status report and the guest time to build one.

Boots the Debian 6.12 guest with 1, 4 and 16 GiB under the patched QEMU
(TCG here: times are inflated by emulation, compare them with each other,
not with hardware), asks the driver for reports and prints, per guest size,
the report size in bytes and the median build time the driver measured.
It then shows the bound for a 1 TiB guest from the wire format: the report
size is fixed by the zone and candidate counts, not by the memory size.

  sudo benchmarks/report-size.py [--sizes 1,4,16] [--reports 7]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "vm"))
import hrvm  # noqa: E402

STATUS, ZONE, CAND = 208, 256, 16  # pinned by static asserts in the header
MAX_ZONES, MAX_CAND, MAX_MSG = 64, 2048, 65536


def status_fields(lines):
    fields = {}
    for line in lines:
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            fields[f[0]] = int(f[1])
    return fields


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,4,16", help="guest sizes in GiB")
    ap.add_argument("--reports", type=int, default=7, help="reports per guest")
    args = ap.parse_args()

    qemu = hrvm.qemu_binary()
    kver, (vmlinuz, _) = hrvm.pick_kernel("6.12")
    work = hrvm.workdir("hr-bench-")
    initrd = hrvm.build_initramfs(kver, hrvm.build_module(kver), work)
    rows = []
    for gib in [int(x) for x in args.sizes.split(",")]:
        g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, mem="%dG" % gib,
                       name="bench%d" % gib)
        g.start()
        try:
            builds, size, zones, cands = [], 0, 0, 0
            for _ in range(args.reports):
                g.cmd("sh echo 1 > /sys/kernel/debug/virtio_hugeroom/report_now")
                st = status_fields(g.cmd("status"))
                builds.append(st["build_ns"])
                size, zones, cands = st["report_bytes"], st["nr_zones"], st["nr_candidates"]
            # The pageblock sweep resumes across reports (bounded work per
            # report); its full length shows what a report no longer pays.
            rows.append((gib, size, zones, cands, statistics.median(builds),
                         min(builds), max(builds), st["scan_last_sweep_ns"],
                         st["scan_blocks"]))
        finally:
            g.stop()

    print("guest  report-bytes  zones  candidates  build-median-us  build-min-us  build-max-us"
          "  full-sweep-us  sweep-blocks")
    for gib, size, zones, cands, med, lo, hi, sweep, blocks in rows:
        print("%4d G  %12d  %5d  %10d  %15.1f  %12.1f  %12.1f  %13.1f  %12d"
              % (gib, size, zones, cands, med / 1e3, lo / 1e3, hi / 1e3, sweep / 1e3, blocks))
    if len(rows) > 1:
        print("build time ratio %dG/%dG: %.2f (memory ratio %d)"
              % (rows[-1][0], rows[0][0], rows[-1][4] / rows[0][4], rows[-1][0] // rows[0][0]))
    # A 1 TiB guest: 1 node has DMA, DMA32, Normal (and Movable); even 16
    # nodes stay well under MAX_ZONES, and candidates are capped.
    one_node = STATUS + 4 * ZONE + MAX_CAND * CAND
    worst = STATUS + MAX_ZONES * ZONE + MAX_CAND * CAND
    # A sweep that spanned several reports also counts the time between
    # them, so the scan rate comes from the fastest (single-report) sweep.
    per_block_ns = min(r[7] / max(r[8], 1) for r in rows)
    print("1 TiB time: a full sweep of 524288 pageblocks at %.0f ns each is %.1f s of scanning,"
          " spread over reports that each scan at most 1%% of the report period (20 ms cap),"
          " so one report costs at most ~20 ms plus the zone copy" % (per_block_ns, per_block_ns * 524288 / 1e9))
    print("1 TiB bound: %d bytes with one node and %d candidates, %d bytes at the "
          "protocol maximum (%d zones), limit %d" % (one_node, MAX_CAND, worst, MAX_ZONES, MAX_MSG))
    return 0


if __name__ == "__main__":
    sys.exit(main())
