#!/usr/bin/python3
"""hugeroom demo: guests report their free lists to hugeroomd.

Starts hugeroomd on private sockets, boots two Debian 6.12 guests under the
patched QEMU (TCG here, KVM where it works) with the virtio-hugeroom device
and driver, waits for their reports and prints what `hugeroomctl` shows.
Everything is stopped and removed at the end, also on Ctrl-C.
"""

import argparse
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "vm"))
import hrvm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guests", type=int, default=2, help="guests to boot (default 2)")
    ap.add_argument("--mem", default="1G", help="memory per guest (default 1G)")
    ap.add_argument("--kernel", default="6.12", help="guest kernel series (6.12 or 6.1)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    work = hrvm.workdir("hugeroom-demo-")
    daemon, guests = None, []
    try:
        print("== preparing: QEMU with the hugeroom patches, guest kernel %s, driver" % args.kernel)
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _) = hrvm.pick_kernel(args.kernel)
        initrd = hrvm.build_initramfs(kver, hrvm.build_module(kver), work)

        print("== starting hugeroomd (sockets in %s)" % work)
        daemon = hrvm.Daemon(work, interval_ms=1000)
        daemon.start()
        for i in range(args.guests):
            name = "guest%d" % (i + 1)
            print("== booting %s: %s RAM, kernel %s, accel %s" % (name, args.mem, kver, hrvm.accel()))
            g = hrvm.Guest(qemu, kver, vmlinuz, initrd, work, daemon=daemon,
                           mem=args.mem, name=name)
            g.start()
            guests.append(g)
        for g in guests:
            hrvm.wait_for(lambda: (daemon.ctl_json("guest", g.name).get("status") or {})
                          .get("seq", -1) >= 1, 60, "a status report from %s" % g.name)

        print("\n$ hugeroomctl guests")
        print(daemon.ctl("guests"))
        for g in guests:
            print("$ hugeroomctl guest %s" % g.name)
            print(daemon.ctl("guest", g.name))
        return 0
    except hrvm.Failure as e:
        print("demo failed: %s" % e, file=sys.stderr)
        if daemon:
            print("hugeroomd log tail:\n" + daemon.log(), file=sys.stderr)
        return 1
    finally:
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
