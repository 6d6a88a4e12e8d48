#!/usr/bin/python3
"""End to end: the guest's free-list summary reaches hugeroomctl.

Boots a Debian guest kernel (series given as argv[1], "6.12" or "6.1")
under the patched QEMU with virtio-hugeroom connected to a real hugeroomd,
then checks:
  * the daemon identifies the guest (name, UUID, QEMU pid, RAM layout);
  * per-zone, per-order free counts and compaction counters shown by
    `hugeroomctl --json guest NAME` match what the guest reads from
    /proc/buddyinfo and /proc/vmstat around the same report;
  * malformed messages from the guest are rejected and counted while QEMU,
    the daemon and the guest stay up;
  * hugeroomd restarts while the guest runs and status flows again.

Tolerance for free counts: the guest reads /proc/buddyinfo just before and
just after asking the driver for a report (shell builtins, no fork).  The
report is built between the two reads, so each count must lie between the
two readings, widened by what one per-CPU list refill or drain can move
between the buddy lists and the per-CPU lists in that window: one batch
(at most 64 pages on these guests), i.e. 64 >> order blocks, at least 2.
Compaction counters only move when compaction runs; they must equal the
guest's reading, or lie between the two readings if compaction ran.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402

INJECT_KINDS = ["bad_len", "bad_type", "unaligned_candidate",
                "too_many_zones", "bad_zone_name", "truncated"]


def parse_snapshot(lines):
    snap = {"before": {}, "after": {}, "vmbefore": {}, "vmafter": {},
            "status": []}
    for line in lines:
        tag, _, rest = line.partition(" ")
        if tag in ("before", "after"):
            # "Node 0, zone      DMA      1      0 ..."
            head, _, counts = rest.partition("zone")
            nid = int(head.split()[1].rstrip(","))
            f = counts.split()
            snap[tag][(nid, f[0])] = [int(x) for x in f[1:]]
        elif tag in ("vmbefore", "vmafter"):
            k, v = rest.split()
            snap[tag][k] = int(v)
        elif tag == "status":
            snap["status"].append(rest)
    seq = None
    for line in snap["status"]:
        f = line.split()
        if f and f[0] == "seq":
            seq = int(f[1])
    snap["seq"] = seq
    return snap


def guest_entry(daemon, name):
    for g in daemon.ctl_json("guests").get("guests", []):
        if g.get("name") == name:
            return g
    return None


def wait_connected(daemon, name, what):
    """The daemon's list entry for @name once it shows it connected."""
    return hrvm.wait_for(lambda: (lambda e: e if e and e.get("connected") else None)(
        guest_entry(daemon, name)), 30, what)


def wait_seq(daemon, name, seq, timeout=20):
    def got():
        d = daemon.ctl_json("guest", name)
        st = d.get("status") or {}
        return d if st.get("seq", -1) >= seq else None
    return hrvm.wait_for(got, timeout, "status seq %d of %s in hugeroomctl" % (seq, name))


def compare_free(tap, detail, snap, label):
    problems = []
    zones = detail["status"]["zones"]
    seen = set()
    for z in zones:
        key = (z["nid"], z["zone"])
        seen.add(key)
        if key not in snap["before"]:
            problems.append("daemon reports zone %r the guest does not have" % (key,))
            continue
        b, a, r = snap["before"][key], snap["after"][key], z["nr_free"]
        for o in range(min(len(b), len(r))):
            tol = max(2, 64 >> o)
            lo, hi = min(b[o], a[o]) - tol, max(b[o], a[o]) + tol
            if not lo <= r[o] <= hi:
                problems.append("node %d zone %s order %d: daemon %d, guest %d/%d (tolerance %d)"
                                % (key[0], key[1], o, r[o], b[o], a[o], tol))
        if len(r) != 11:
            problems.append("zone %r: %d orders, want 11" % (key, len(r)))
    for key in snap["before"]:
        if key not in seen:
            problems.append("guest zone %r missing from the daemon's status" % (key,))
    tap.ok(not problems and zones, "%s: per-order free counts match /proc/buddyinfo" % label,
           "\n".join(problems) or "no zones reported")


def compare_vmstat(tap, detail, snap, label):
    problems = []
    vm = detail["status"]["vmstat"]
    checked = 0
    for k, v in vm.items():
        if k not in snap["vmbefore"]:
            continue  # e.g. an event this kernel does not have
        checked += 1
        b, a = snap["vmbefore"][k], snap["vmafter"][k]
        if not min(b, a) <= v <= max(b, a):
            problems.append("%s: daemon %d, guest %d/%d" % (k, v, b, a))
    for k in ("compact_stall", "compact_fail", "compact_success",
              "compact_migrate_scanned", "compact_free_scanned"):
        if k not in vm:
            problems.append("%s missing from the daemon's vmstat" % k)
    tap.ok(not problems and checked >= 5, "%s: compaction counters match /proc/vmstat (%d compared)"
           % (label, checked), "\n".join(problems))


def snapshot_round(tap, guest, daemon, label):
    snap = parse_snapshot(guest.cmd("snapshot"))
    if not tap.ok(snap["seq"] is not None, "%s: guest sent report (debugfs status has a seq)" % label,
                  "\n".join(snap["status"])):
        return None
    detail = wait_seq(daemon, guest.name, snap["seq"])
    tap.ok(detail["status"]["seq"] == snap["seq"],
           "%s: daemon holds exactly the report the guest sent (seq %d)" % (label, snap["seq"]),
           "daemon seq %s" % detail["status"]["seq"])
    compare_free(tap, detail, snap, label)
    compare_vmstat(tap, detail, snap, label)
    return detail


def main():
    series = sys.argv[1] if len(sys.argv) > 1 else "6.12"
    tap = hrvm.Tap()
    work = hrvm.workdir("hr-vm-%s-" % series)
    daemon = guest = None
    try:
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel(series)
        hrvm.log("kernel %s, qemu %s, accel %s" % (kver, qemu, hrvm.accel()))
        ko = hrvm.build_module(kver, test=True)
        initrd = hrvm.build_initramfs(kver, ko, work)

        daemon = hrvm.Daemon(work, interval_ms=0)
        daemon.start()
        guest = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon)
        guest.start()
        tap.ok(True, "%s: guest booted with the module loaded" % kver)

        g = wait_connected(daemon, guest.name, "the daemon to list %s" % guest.name)
        detail = daemon.ctl_json("guest", guest.name)
        tap.ok(g.get("uuid") == guest.uuid and g.get("pid") == guest.pid,
               "daemon identifies the guest by name, UUID and QEMU pid",
               "got %s, want uuid %s pid %d" % (g, guest.uuid, guest.pid))
        ram = detail.get("ram") or []
        # Before the firmware maps the PC's 640 KiB-1 MiB window to ROM and
        # VGA, guest RAM is one 1 GiB range; after, it is 1 GiB less (part
        # of) that hole.  Either way everything above 1 MiB is one range.
        total = sum(r["size"] for r in ram)
        tap.ok((1 << 30) - (1 << 20) <= total <= 1 << 30 and all(r["hva"] for r in ram)
               and any(r["gpa"] <= 1 << 21 and r["gpa"] + r["size"] == 1 << 30 for r in ram),
               "HELLO carried the 1 GiB RAM layout with host addresses", ram)

        for i in range(2):
            snapshot_round(tap, guest, daemon, "%s round %d" % (kver, i + 1))

        before = guest.qmp("query-hugeroom")[0]
        for kind in INJECT_KINDS:
            guest.cmd("inject " + kind)
        after = hrvm.wait_for(
            lambda: (lambda q: q if q["msgs-rejected"] >= before["msgs-rejected"] + len(INJECT_KINDS)
                     else None)(guest.qmp("query-hugeroom")[0]),
            10, "QEMU to count the malformed messages")
        tap.ok(after["msgs-rejected"] - before["msgs-rejected"] == len(INJECT_KINDS),
               "QEMU rejected and counted each malformed message (%d)" % len(INJECT_KINDS),
               "before %s after %s" % (before, after))
        tap.ok(guest.alive() and daemon.alive(), "QEMU and hugeroomd stay up after malformed input",
               daemon.log())
        # DEVICE_STATE is rate-limited (at most one frame per 100 ms).
        try:
            d = hrvm.wait_for(lambda: (lambda d: d if (d.get("device") or {}).get(
                "msgs_rejected", 0) >= after["msgs-rejected"] else None)(
                daemon.ctl_json("guest", guest.name)), 5, "the device state to reach the daemon")
        except hrvm.Failure:
            d = daemon.ctl_json("guest", guest.name)
        tap.ok((d.get("device") or {}).get("msgs_rejected") == after["msgs-rejected"]
               and d["device"]["driver_ok"],
               "the rejections are visible through hugeroomctl (%d)" % after["msgs-rejected"],
               d.get("device"))
        snapshot_round(tap, guest, daemon, "%s after malformed input" % kver)

        pid_before = guest.pid
        daemon.stop()
        time.sleep(1)
        daemon.start()
        wait_connected(daemon, guest.name, "QEMU to reconnect to the restarted daemon")
        tap.ok(guest.pid == pid_before and guest.alive(),
               "guest kept running across the daemon restart")
        snapshot_round(tap, guest, daemon, "%s after daemon restart" % kver)
    except hrvm.Failure as e:
        tap.ok(False, "unexpected failure", str(e))
        if guest:
            hrvm.log("console tail:\n" + guest.console()[-2000:])
        if daemon:
            hrvm.log("daemon log tail:\n" + daemon.log())
    finally:
        if guest:
            guest.stop()
        if daemon:
            daemon.stop()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
