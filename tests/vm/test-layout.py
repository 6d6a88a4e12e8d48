#!/usr/bin/python3
"""End to end: a pc-dimm plugged into a running guest reaches the daemon as
a LAYOUT, on the same connection (SPEC 2.5.1, 2.9).

Boots a Debian guest kernel (argv[1], "6.12" or "6.1") under the patched
QEMU with room for memory devices, connected to a real hugeroomd, holds a
few blocks, then plugs a 256 MiB pc-dimm over QMP and checks:

  * the daemon and the device agreed on protocol version 2 with
    HR_CHAN_F_LAYOUT (hugeroomctl's proto_version, the daemon's log);
  * the daemon's RAM layout gains the dimm's range with its host address,
    and its ram_size grows by the dimm;
  * no reconnect: the daemon counts the same connections as before the
    plug, and its held set, the device's and the guest's stay the same;
  * the daemon rejected nothing, and QEMU and hugeroomd stay up.

The qtests check the device side against a fake daemon (LAYOUT, and the
reconnect a version 1 daemon gets), the daemon's unit tests the LAYOUT
validator; this is the real pair.
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402

DIMM = 256 << 20


def guest_detail(daemon, name):
    return daemon.ctl_json("guest", name)


def guest_held(guest):
    """The blocks the guest's driver holds (debugfs held)."""
    return {int(t, 16) for line in guest.debugfs("held")
            for t in re.findall(r"0x[0-9a-fA-F]+", line)}


def returned_for_pressure(guest):
    """Blocks the driver gave back for its own memory pressure so far."""
    return int(guest.driver_status()["blocks_returned_pressure"][0])


def main():
    series = sys.argv[1] if len(sys.argv) > 1 else "6.12"
    tap = hrvm.Tap()
    work = hrvm.workdir("hr-vm-layout-%s-" % series)
    daemon = guest = None
    try:
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel(series)
        hrvm.log("kernel %s, qemu %s, accel %s" % (kver, qemu, hrvm.accel()))
        ko = hrvm.build_module(kver)
        initrd = hrvm.build_initramfs(kver, ko, work)

        daemon = hrvm.Daemon(work, interval_ms=0)
        daemon.start()
        guest = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon,
                           mem="1G,slots=2,maxmem=2G")
        guest.start()
        before = hrvm.wait_for(
            lambda: (lambda d: d if d.get("connected") and (d.get("device") or {}).get(
                "driver_ok") else None)(guest_detail(daemon, guest.name)),
            60, "the daemon to see %s's driver" % guest.name)
        tap.ok(before.get("proto_version") == 2,
               "daemon and device speak protocol version 2", before.get("proto_version"))

        # a few held blocks, which the plug must not lose (hugeroomctl
        # exits non-zero for a partial request: the held count is what counts)
        try:
            daemon.ctl("evacuate", guest.name, "--blocks", "4", "--wait")
        except hrvm.Failure as e:
            hrvm.log("evacuate: %s" % e)
        held = hrvm.wait_for(
            lambda: (lambda d: d if (d.get("device") or {}).get("num_held", 0) > 0 else None)(
                guest_detail(daemon, guest.name)),
            120, "blocks held")["device"]["num_held"]
        before = guest_detail(daemon, guest.name)
        p0 = returned_for_pressure(guest)
        qemu_held = guest.qmp("query-hugeroom")[0]["held-blocks"]
        gheld = guest_held(guest)
        tap.ok(held == qemu_held and held > 0,
               "%d blocks held, the device agrees" % held, "device %d" % qemu_held)

        guest.qmp("object-add", **{"qom-type": "memory-backend-ram", "id": "m0",
                                   "size": DIMM})
        guest.qmp("device_add", driver="pc-dimm", id="dimm0", memdev="m0")
        addr = [d["data"]["addr"] for d in guest.qmp("query-memory-devices")
                if d["data"].get("id") == "dimm0"][0]
        hrvm.log("pc-dimm plugged at 0x%x" % addr)

        try:
            after = hrvm.wait_for(
                lambda: (lambda d: d if any(r["gpa"] == addr for r in d.get("ram") or [])
                         else None)(guest_detail(daemon, guest.name)),
                30, "the daemon to learn the dimm's range")
        except hrvm.Failure as e:
            after = guest_detail(daemon, guest.name)
            tap.ok(False, "the daemon's layout has the dimm", "%s\n%s" % (e, after.get("ram")))
        else:
            dimm = [r for r in after["ram"] if r["gpa"] == addr][0]
            tap.ok(dimm["size"] == DIMM and dimm["hva"] != 0,
                   "the daemon's layout has the dimm at 0x%x with its host address" % addr,
                   dimm)
        tap.ok(after.get("ram_size") == before.get("ram_size") + DIMM,
               "the daemon's ram_size grew by the dimm",
               "%s -> %s" % (before.get("ram_size"), after.get("ram_size")))
        tap.ok(after.get("connections") == before.get("connections") and after.get("connected"),
               "no reconnect: still connection %s" % before.get("connections"),
               "connections %s -> %s" % (before.get("connections"), after.get("connections")))
        # the guest may give blocks back for its own pressure meanwhile
        # (allowed, counted): those are the only ones that may go
        back = returned_for_pressure(guest) - p0
        now = guest_held(guest)
        tap.ok(after["device"]["num_held"] == held - back
               and guest.qmp("query-hugeroom")[0]["held-blocks"] == held - back
               and now <= gheld and len(now) == held - back and len(gheld) == held,
               "the held set stays: %d blocks on daemon, device and guest (%d given back "
               "for pressure)" % (held - back, back),
               "daemon %s, device %s, guest %s (before %s)" % (
                   after["device"]["num_held"], guest.qmp("query-hugeroom")[0]["held-blocks"],
                   sorted(guest_held(guest)), sorted(gheld)))
        log = open(daemon.logfile, errors="replace").read()
        tap.ok("guest RAM is now" in log and "closing" not in log,
               "the daemon took a LAYOUT and closed nothing", daemon.log())
        tap.ok(after["daemon_counters"]["rejected"] == 0 and guest.alive() and daemon.alive(),
               "nothing rejected, QEMU and hugeroomd up", after["daemon_counters"])
    except hrvm.Failure as e:
        tap.ok(False, "test ran to the end", "%s\n--- daemon:\n%s\n--- console:\n%s" % (
            e, daemon.log() if daemon else "", guest.console() if guest else ""))
    finally:
        hrvm.stop_all(guest, daemon)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
