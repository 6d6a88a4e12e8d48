#!/usr/bin/python3
"""The headline, scaled to fit CI: the donors own the host's memory,
`hugeroomctl prepare` makes room, a preallocated QEMU VM larger than what
was free starts.

Setting (takes /tmp/hr-bigmem.lock exclusively: it uses the whole host):
 * all host memory is touched once (the Normal zone grows on first touch);
 * hugeroomd, two donor guests (Debian 6.12, the driver, own -uuid,
   oom_score_adj 1000 so the OOM killer would pick a donor), each touching
   most of its RAM with memfill (host THP-backed) and freeing half of every
   2 MiB block again;
 * a dense helper (4 KiB pages, not THP, oom_score_adj 0 below the donors'
   1000) takes all host memory but LEAVE_MIB: used memory nobody gives back;
 * the new VM: what the host has available plus FROM_GUESTS_MIB, so that
   much has to come from the donors' holes.

Checks:
 1. prepare SIZE --wait ends ready in full (exit 0); consume;
 1b. both donors (alike, so near-equal in cost) were asked at once and
    alike: the first donation step of each started within 3 s of the
    other's and asked at least 0.8 times as many blocks (donations run in
    parallel: work given to one donor first makes the preparation longer);
 2. the new VM (memory-backend-ram,prealloc=on, THP-advised) gets >= 95%
    of its RAM in host huge pages (AnonHugePages / Rss);
 3. /proc/vmstat oom_kill did not move and both donors are alive;
 4. the donors' resident guest RAM fell (over prepare) by at least 98% of
    the memory they gave (their QEMUs' own heap and TCG buffers aside; the
    rest is what the guests allocated meanwhile or migrations faulted in);
 5. after release the donors hold nothing for the host and memfill's
    checksums match in both.
"""

import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402
import hrhost  # noqa: E402

DONOR_MIB = 2816
TOUCH_MIB = 2400
LEAVE_MIB = 1536
FROM_GUESTS_MIB = 768
FLOOR_MB = 128


def rss_total(guests):
    """Resident guest RAM of the donors' QEMUs (KiB): what their discards
    free and what migrations into never-backed guest memory would fault in
    again; their QEMUs' own heap and TCG buffers are left out."""
    return sum((hrhost.proc_mem(g.pid) or {"ram_rss": 0})["ram_rss"]
               for g in guests if g.alive())


def main():
    series = sys.argv[1] if len(sys.argv) > 1 else "6.12"
    tap = hrvm.Tap()
    work = hrvm.workdir("hr-headline-%s-" % series)
    daemon = hog = vm = None
    guests = []
    try:
        hrhost.bigmem_lock(exclusive=True)
        mi = hrhost.meminfo_host()
        need = 2 * DONOR_MIB + LEAVE_MIB + 2048
        if mi["MemAvailable"] >> 10 < need:
            print("1..0 # SKIP the host has %d MiB available; this test needs %d MiB"
                  % (mi["MemAvailable"] >> 10, need))
            return 0
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel(series)
        hrvm.log("kernel %s, qemu %s, accel %s, workdir %s" % (kver, qemu, hrvm.accel(), work))
        initrd = hrvm.build_initramfs(kver, hrvm.build_module(kver), work, tools=True)
        hrhost.first_touch()

        daemon = hrvm.Daemon(work, interval_ms=1000)
        with open(daemon.conf, "a") as f:
            f.write("state_dir=%s\nreturn_high_mark_mb=0\n[guest:donor*]\nfloor_mb=%d\n"
                    % (work, FLOOR_MB))
        daemon.start()
        for i in range(2):
            g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon,
                           mem="%dM" % DONOR_MIB, name="donor%d" % i, uuid=str(uuid.uuid4()))
            guests.append(g)
            g.start()
            hrhost.set_oom_score_adj(g.pid, 1000)
            # the driver's claim_holes (guest-driver/README.md), to compare
            if os.environ.get("HR_HEADLINE_CLAIM_HOLES"):
                g.cmd("sh echo %s >/sys/module/virtio_hugeroom/parameters/claim_holes"
                      % os.environ["HR_HEADLINE_CLAIM_HOLES"])
        for i, g in enumerate(guests):
            # the guest's kernel and initramfs take a few hundred MiB
            touch = min(TOUCH_MIB, (g.meminfo()["MemAvailable"] >> 10) - 128)
            hrhost.memfill_start(g, "fill", touch, 16, 7 + i)
        for g in guests:
            hrhost.memfill_wait(g, "fill")
        hrhost.wait_reporting(daemon, 2, timeout=120)
        mems = [hrhost.proc_mem(g.pid) for g in guests]
        hrvm.log("donors: " + ", ".join("%s RSS %d MiB, host THP %d MiB"
                                        % (g.name, m["rss"] >> 10, m["thp"] >> 10)
                                        for g, m in zip(guests, mems)))

        hog_kb = hrhost.meminfo_host()["MemAvailable"] - (LEAVE_MIB << 10)
        hog = hrhost.DenseHog(hog_kb)
        hog.start()
        time.sleep(2)
        mi = hrhost.meminfo_host()
        vm_mib = ((mi["MemAvailable"] >> 10) + FROM_GUESTS_MIB + 255) // 256 * 256
        hrvm.log("dense helper: %d MiB; host %d MiB free, %d available, %d free 2 MiB "
                 "blocks; new VM %d MiB" % (hog_kb >> 10, mi["MemFree"] >> 10,
                                            mi["MemAvailable"] >> 10, hrhost.buddy_blocks(),
                                            vm_mib))
        tap.ok(True, "two donors own the host's memory; a %d MiB VM needs %d MiB from them"
               % (vm_mib, FROM_GUESTS_MIB))

        # 1. prepare, consume
        oom0 = hrhost.vmstat_host("oom_kill")
        rss0 = rss_total(guests)
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"),
                            "--socket", daemon.api_sock, "--json", "prepare", "%dM" % vm_mib,
                            "--deadline", "180", "--requester", "test-headline", "--wait"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        took = time.monotonic() - t0
        try:
            rid = json.loads(p.stdout)["id"]
        except (ValueError, KeyError):
            rid = daemon.ctl_json("reservations")["reservations"][-1]["id"]
        r = daemon.ctl_json("reservation", rid)
        for s in r["steps"]:
            hrvm.log("step %s %s: gained %s, held %s, migrated %s; %s" % (
                s["kind"], s.get("state"), s.get("gained"), s.get("blocks_held", "-"),
                s.get("pages_migrated", "-"), s.get("detail", "")))
        tap.ok(p.returncode == 0 and r["state"] == "ready" and not r["partial"],
               "prepare %d MiB ended ready in full in %.1f s (exit %d): %s"
               % (vm_mib, took, p.returncode, r.get("reason")), p.stderr)
        first = {}
        for s in r["steps"]:
            if (s["kind"] == "donate" and s.get("started_us") and
                    s["started_us"] < first.get(s["guest"], (1 << 62, 0))[0]):
                first[s["guest"]] = (s["started_us"], s.get("blocks_asked", 0))
        starts = [t for t, _ in first.values()] or [0]
        asked = [n for _, n in first.values()] or [0]
        apart = (max(starts) - min(starts)) / 1e6
        tap.ok(sorted(first) == sorted(g.name for g in guests) and apart <= 3.0 and
               min(asked) >= 0.8 * max(asked),
               "both donors were asked at once and alike (first donations %.1f s apart, "
               "%s blocks asked)" % (apart, " and ".join(str(n) for n in asked)))
        rss1 = rss_total(guests)
        for g in guests:
            st = g.driver_status()
            taken = int(st["evac_taken_blocks"][0])
            hrvm.log("%s: %d blocks taken, %s pages migrated for them, %s in use when "
                     "chosen (%.1f and %.1f per block); claims %s calls in %d ms"
                     % (g.name, taken, st["evac_taken_migrated"][0],
                        st["evac_taken_used"][0],
                        int(st["evac_taken_migrated"][0]) / max(taken, 1),
                        int(st["evac_taken_used"][0]) / max(taken, 1),
                        st["evac_claim_calls"][0], int(st["evac_claim_ns"][0]) // 1000000))
        given_kb = sum(s.get("blocks_held", 0) for s in r["steps"]
                       if s["kind"] == "donate") * 2048
        daemon.ctl("consume", rid)

        # 2. the new VM
        vm = hrhost.PreallocVM(qemu, vm_mib, work)
        try:
            secs = vm.start()
            thp, rss = vm.coverage()
            pct = 100.0 * thp / max(rss, 1)
            tap.ok(pct >= 95.0, "the new VM got %.1f%% THP (%d of %d MiB) in %.1f s"
                   % (pct, thp >> 10, rss >> 10, secs))
        except hrvm.Failure as e:
            tap.ok(False, "the new VM started", str(e))
        time.sleep(1)
        oom = hrhost.vmstat_host("oom_kill") - oom0
        dead = [g.name for g in guests if not g.alive()]
        tap.ok(oom == 0 and not dead, "nobody was OOM-killed (oom_kill +%d, dead donors: %s)"
               % (oom, ", ".join(dead) or "none"))
        vm.stop()
        vm = None

        # 4. RSS fell by what they gave. Not quite all of it: the guests
        # allocate on their own meanwhile, and a page a migration moves may
        # land in guest memory the host never backed (the driver does not
        # fence that off); measured 0.25-0.6% of what was given. More than
        # 2% would mean donations that fault the memory straight back in.
        fell = rss0 - rss1
        tap.ok(given_kb > 0 and fell >= given_kb * 0.98,
               "the donors' resident guest RAM fell by %d MiB over prepare; they gave %d MiB "
               "(%.2f%% faulted back in)"
               % (fell >> 10, given_kb >> 10, 100.0 * (given_kb - fell) / max(given_kb, 1)))

        # 5. release, data intact
        hog.stop()
        hog = None
        daemon.ctl("release", rid)
        alive = [g for g in guests if g.alive()]
        try:
            hrvm.wait_for(lambda: sum(x["held_blocks"] for x in
                                      daemon.ctl_json("guests")["guests"]
                                      if x["connected"]) == 0,
                          60, "every hold returned", interval=1)
            tap.ok(True, "after release the donors hold nothing for the host")
        except hrvm.Failure as e:
            tap.ok(False, "after release the donors hold nothing for the host", str(e))
        for g in guests:
            if g in alive:
                bad = hrhost.verify(g, ("fill",))
                tap.ok(not bad, "%s: every memfill checksum matches" % g.name, bad)
            else:
                tap.ok(False, "%s: every memfill checksum matches" % g.name, "it was killed")
    except hrvm.Failure as e:
        tap.ok(False, "unexpected failure", str(e))
        if daemon:
            print("# daemon log:\n# " + daemon.log().replace("\n", "\n# "))
    finally:
        if vm:
            vm.stop()
        if hog:
            hog.stop()
        for g in guests:
            try:
                g.stop()
            except hrvm.Failure:
                pass
        if daemon:
            daemon.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
