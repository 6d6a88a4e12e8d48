#!/usr/bin/python3
"""hugeroom demo: make room for a THP-backed VM among running guests.

1. starts hugeroomd on private sockets;
2. boots two donor guests (Debian 6.12 under the patched QEMU with the
   virtio-hugeroom device and driver; TCG here, KVM where it works), fills
   part of their memory with checksummed data, some of it full of holes;
3. makes the host short of free 2 MiB blocks: a helper touches most of the
   host's free memory and keeps one 4 KiB page in 64, so memory is free but
   no 2 MiB block is;
4. asks hugeroomd to prepare memory for a new VM bigger than what the host
   has free in 2 MiB blocks (`hugeroomctl prepare SIZE --wait`), which takes
   the cheapest sources first: free blocks, host compaction, then 2 MiB
   blocks evacuated inside the donors;
5. starts the new VM with preallocated RAM and prints its THP coverage
   (AnonHugePages / Rss of its QEMU process), the time it took, and what it
   cost the donors (blocks given, floors kept, checksums intact).
Everything is stopped and removed at the end, also on errors or Ctrl-C.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "vm"))
import hrvm  # noqa: E402
from hrhost import (buddy_blocks, fill_donor, fragmenting_hog, meminfo_host,  # noqa: E402
                    thp_coverage, verify, wait_reporting)

FLOOR_MB = 200


def section(text):
    print("\n== " + text, flush=True)


def show(daemon, *args):
    print("$ hugeroomctl " + " ".join(args), flush=True)
    print(daemon.ctl(*args), flush=True)


def start_new_vm(qemu, mib, work):
    """A paused VM with @mib MiB of preallocated RAM; returns (proc, seconds
    until all its RAM was allocated)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([qemu, "-nodefaults", "-display", "none", "-machine", "q35",
                             "-accel", "tcg", "-m", "%dM" % mib, "-mem-prealloc", "-S",
                             "-name", "new-vm"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    # The monitor can answer before preallocation ends, so watch the
    # process's resident memory instead: prealloc touches every page.
    def ready():
        if proc.poll() is not None:
            raise hrvm.Failure("the new VM's QEMU exited: %s" % proc.stderr.read())
        return thp_coverage(proc.pid)[1] >= mib * 1024
    hrvm.wait_for(ready, 600, "the new VM to allocate its RAM", interval=0.02)
    return proc, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="6.12", help="donor kernel series (6.12 or 6.1)")
    ap.add_argument("--donor-mem", default="1G", help="memory per donor (default 1G)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    work = hrvm.workdir("hugeroom-demo-")
    daemon = hog = newvm = None
    guests = []
    try:
        mi = meminfo_host()
        if mi["MemAvailable"] < 7 << 20:
            raise hrvm.Failure("the demo needs 7 GiB of available host memory, "
                               "this host has %d MiB" % (mi["MemAvailable"] >> 10))
        section("preparing: QEMU with the hugeroom patches, guest kernel %s, driver"
                % args.kernel)
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _) = hrvm.pick_kernel(args.kernel)
        initrd = hrvm.build_initramfs(kver, hrvm.build_module(kver), work, tools=True)

        section("starting hugeroomd (sockets in %s)" % work)
        daemon = hrvm.Daemon(work, interval_ms=1000)
        with open(daemon.conf, "a") as f:
            f.write("state_dir=%s\nreturn_high_mark_mb=0\n" % work)
            f.write("[guest:donor*]\nfloor_mb=%d\n" % FLOOR_MB)
        daemon.start()

        for i, seed in ((1, 1), (2, 2)):
            name = "donor%d" % i
            section("booting %s: %s RAM, kernel %s, accel %s, filling part of its memory"
                    % (name, args.donor_mem, kver, hrvm.accel()))
            g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon,
                           mem=args.donor_mem, name=name, extra=("-mem-prealloc",))
            g.start()
            guests.append(g)
            fill_donor(g, seed)
        wait_reporting(daemon, len(guests))

        section("making the host short of free 2 MiB blocks")
        hog = fragmenting_hog()
        b_before = buddy_blocks()
        hog.start()
        time.sleep(1)
        b_frag = buddy_blocks()
        print("a helper touched %d MiB and kept 1 page in 64: free 2 MiB blocks on node 0 "
              "went from %d to %d" % (hog.kb >> 10, b_before, b_frag))
        show(daemon, "host")
        show(daemon, "guests")

        host = daemon.ctl_json("host")["nodes"][0]
        vm_mib = (host["available_blocks"] * 2 + 512 + 255) // 256 * 256
        section("preparing %d MiB for a new VM (the host has %d MiB in free 2 MiB blocks "
                "above its watermark)" % (vm_mib, host["available_blocks"] * 2))
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"),
                            "--socket", daemon.api_sock, "prepare", "%dM" % vm_mib,
                            "--deadline", "180", "--requester", "demo", "--wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        prep_s = time.monotonic() - t0
        print("$ hugeroomctl prepare %dM --deadline 180 --wait" % vm_mib)
        print(p.stdout + p.stderr, flush=True)
        res = daemon.ctl_json("reservations")["reservations"][-1]
        b_ready = buddy_blocks()

        section("starting the new VM: %d MiB, preallocated" % vm_mib)
        newvm, start_s = start_new_vm(qemu, vm_mib, work)
        thp, rss = thp_coverage(newvm.pid)
        daemon.ctl("consume", res["id"])

        section("result")
        held = {x["name"]: x["held_blocks"] for x in daemon.ctl_json("guests")["guests"]}
        print("reservation %s: %s%s in %.1f s; free 2 MiB blocks %d -> %d"
              % (res["id"], res["state"], " (partial)" if res.get("partial") else "",
                 prep_s, b_frag, b_ready))
        print("new VM: %d MiB, started in %.1f s, THP coverage %.1f%% (%d of %d MiB "
              "in huge pages)" % (vm_mib, start_s, 100.0 * thp / max(rss, 1), thp >> 10,
                                   rss >> 10))
        for g in guests:
            free_mb = g.meminfo()["MemFree"] // 1024
            print("%s: gave %d blocks (%d MiB), %d MiB free (floor %d MiB)"
                  % (g.name, held.get(g.name, 0), held.get(g.name, 0) * 2, free_mb, FLOOR_MB))

        section("cleaning up: stopping the new VM, giving the blocks back to the donors")
        newvm.kill()
        newvm.wait()
        newvm = None
        hog.stop()
        daemon.ctl("release", res["id"])
        hrvm.wait_for(lambda: sum(x["held_blocks"]
                                  for x in daemon.ctl_json("guests")["guests"]) == 0,
                      60, "the donors to get their blocks back", interval=1)
        bad = [b for g in guests for b in verify(g, ("dense", "holes"))]
        print("donors hold nothing for the host any more; their data checksums: %s"
              % ("all intact" if not bad else "MISMATCH %s" % bad))
        return 0 if not bad and res["state"] in ("ready", "consumed") else 1
    except hrvm.Failure as e:
        print("demo failed: %s" % e, file=sys.stderr)
        if daemon:
            print("hugeroomd log tail:\n" + daemon.log(), file=sys.stderr)
        return 1
    finally:
        if newvm:
            newvm.kill()
            newvm.wait()
        if hog:
            hog.stop()
        for g in guests:
            g.stop()
        if daemon:
            daemon.stop()
        if args.keep:
            print("work directory kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
