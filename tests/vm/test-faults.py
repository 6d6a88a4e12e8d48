#!/usr/bin/python3
"""hugeroomd under faults, with real guests (Debian 6.12, patched QEMU).

Two donors, fa and fb (512 MiB each, the driver's test build). The daemon
plans over a copy of a fixture host short of free 2 MiB blocks (its
host_root), so every reservation asks the real guests to donate, without
pressing this shared host's memory. Its state_dir is a small tmpfs.

After each fault the daemon must serve, every guest's held set must be
what the device says it holds (QMP), and what the reservations own:
nothing held that no reservation owns, no hold of a guest that is gone
(once migration_grace_s, 5 s here, passed: a gone QEMU's holds wait that
long for a migration destination of its VM).

 1. hugeroomd SIGKILLed while a reservation's donation runs, restarted;
 2. SIGKILL of fb's QEMU while it holds blocks for a reservation (one
    larger than fa's budget, so fb must donate; the test waits until it
    holds some): its holds go with it;
 3. fb, booted again, panics while it holds blocks for a reservation
    (panic=-1 and -no-reboot: its QEMU ends);
 4. a driver that stops answering (fault_inject sweep_delay_ms): its
    request times out and is cancelled, the daemon keeps serving;
 5. a full state disk: the API keeps answering, the error names the file,
    the previous file stays whole, /metrics says it is stale, and once
    there is room the daemon's retry writes it with no further change to
    prompt it; that daemon runs under valgrind: no error, nothing
    definitely lost.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "unit", "fixtures", "proc", "host-6.18.44")
MIB = 1 << 20
# fa's budget_blocks (config()): a reservation larger than this much must
# ask fb as well
FA_BUDGET_BLOCKS = 64
# what the QEMU kill and the panic reserve: fa's budget and 96 blocks more,
# which fb (512 MiB, floor 64 MiB) has free
FB_NEEDED_MIB = (FA_BUDGET_BLOCKS + 96) * 2


def set_free_blocks(root, blocks):
    """The fixture host's node 0: @blocks free 2 MiB blocks above the marks."""
    with open(os.path.join(root, "proc", "buddyinfo"), "w") as f:
        f.write("Node 0, zone      DMA      0      0      0      0      0      0      0      0"
                "      1      1      3 \n"
                "Node 0, zone    DMA32  26000      0      0      0      0      0      0      0"
                "      0      0      0 \n"
                "Node 0, zone   Normal    100     50     20      0      0      0      0      0"
                "      0 %6d      0 \n" % blocks)


class ValgrindDaemon(hrvm.Daemon):
    """hugeroomd under valgrind's memcheck."""

    def start(self):
        exe = os.path.join(hrvm.build_dir(), "host", "hugeroomd")
        self.vglog = os.path.join(self.workdir, "valgrind.log")
        logf = open(self.logfile, "a")
        self.proc = subprocess.Popen(
            ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
             "--show-leak-kinds=definite", "--error-exitcode=99", "--num-callers=30",
             "--suppressions=/usr/share/glib-2.0/valgrind/glib.supp",
             "--log-file=" + self.vglog, exe, "--config", self.conf, "--foreground"],
            stdout=logf, stderr=subprocess.STDOUT, env=dict(os.environ, G_SLICE="always-malloc"))
        hrvm.wait_for(lambda: os.path.exists(self.api_sock) or self.proc.poll() is not None,
                      120, "hugeroomd under valgrind to open %s" % self.api_sock)
        if self.proc.poll() is not None:
            raise hrvm.Failure("hugeroomd under valgrind exited: %s" % self.log())


class Faults:
    def __init__(self, tap, work, qemu, kver, vmlinuz, initrd):
        self.tap, self.work = tap, work
        self.qemu, self.kver, self.vmlinuz, self.initrd = qemu, kver, vmlinuz, initrd
        self.root = os.path.join(work, "host")
        shutil.copytree(FIXTURE, self.root)
        set_free_blocks(self.root, 1)
        self.state = os.path.join(work, "state")
        os.mkdir(self.state)
        # 0750: the daemon neither reads nor writes a state directory
        # others may write to (a tmpfs is 1777 by default)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0750", "hr-faults",
                        self.state],
                       check=True)
        self.daemon = None
        self.guests = {}

    def config(self, daemon):
        with open(daemon.conf, "a") as f:
            f.write("state_dir=%s\nhost_root=%s\nhold_in_pool=false\nhost_backing=thp\n"
                    "return_high_mark_mb=0\nreservation_tick_ms=100\nmigration_grace_s=5\n"
                    # fa gives at most 64 blocks: fb donates too
                    "[guest:fa]\nfloor_mb=64\nbudget_blocks=%d\n"
                    "[guest:*]\nfloor_mb=64\n" % (self.state, self.root, FA_BUDGET_BLOCKS))

    def start_daemon(self, valgrind=False):
        self.daemon = (ValgrindDaemon if valgrind else hrvm.Daemon)(self.work, interval_ms=1000)
        self.config(self.daemon)
        self.daemon.start()
        self.wait_api()

    def wait_api(self):
        """A killed daemon leaves its socket file: wait until the new one answers."""
        def answers():
            try:
                self.daemon.ctl("guests")
                return True
            except hrvm.Failure:
                return False
        hrvm.wait_for(answers, 120, "hugeroomd to answer on %s" % self.daemon.api_sock,
                      interval=0.5)

    def boot(self, name):
        g = hrvm.Guest(self.qemu, self.kver, self.vmlinuz, self.initrd, self.work,
                       daemon=self.daemon, mem="512M", name=name)
        g.start()
        self.guests[name] = g
        return g

    def api_guests(self):
        return {g["name"]: g for g in self.daemon.ctl_json("guests")["guests"]}

    def wait_connected(self, names, timeout=60):
        """Connected, reporting, and able to donate: a reservation made
        before a donor's device state is in plans without it (and on the
        fixture host, where fa sits at its budget, fails at once)."""
        def ready(n):
            _, body = hrvm.http(self.daemon.api_sock, "GET", "/v1/guests/" + n)
            dev = json.loads(body).get("device") or {}
            return dev.get("driver_ok") is True and dev.get("discard_disabled") is False

        def ok():
            gs = self.api_guests()
            return all(n in gs and gs[n]["connected"] and gs[n].get("seq") is not None and
                       ready(n) for n in names)
        hrvm.wait_for(ok, timeout, "%s connected, reporting and able to donate"
                      % ", ".join(names), interval=1)

    def reservations(self):
        out = []
        for r in self.daemon.ctl_json("reservations")["reservations"]:
            out.append(self.daemon.ctl_json("reservation", r["id"]))
        return out

    def owned(self):
        """Holds per guest name, over all reservations."""
        per = {}
        for r in self.reservations():
            for h in r.get("holds") or ():
                per[h["guest"]] = per.get(h["guest"], 0) + 1
        return per

    def check(self, label, gone=()):
        """The daemon serves; held sets agree with the devices and the reservations."""
        last = {}

        def agree():
            gs = self.api_guests()
            owned = self.owned()
            last.update(owned=owned, daemon={n: g["held_blocks"] for n, g in gs.items()})
            for name, g in self.guests.items():
                if name in gone:
                    if owned.get(name, 0) != 0:
                        return False
                    continue
                held = gs.get(name, {}).get("held_blocks")
                qmp = g.qmp("query-hugeroom")[0]["held-blocks"]
                last[name] = dict(daemon=held, qmp=qmp, owned=owned.get(name, 0))
                if held != qmp or held != owned.get(name, 0):
                    return False
            return True
        try:
            hrvm.wait_for(agree, 60, "held sets to agree", interval=1)
            self.tap.ok(True, "%s: the daemon serves; held sets are the devices' and the "
                        "reservations' (%s)" % (label, last.get("owned")))
        except hrvm.Failure:
            self.tap.ok(False, "%s: held sets agree with the devices and reservations" % label,
                        json.dumps(last, indent=1))

    def prepare(self, mib, deadline=60):
        return self.daemon.ctl_json("prepare", "%dM" % mib, "--deadline", str(deadline),
                                    "--requester", "test-faults")["id"]

    def ctl_quiet(self, *args):
        """A command whose exit status the test does not judge (partial is fine)."""
        exe = os.path.join(hrvm.build_dir(), "host", "hugeroomctl")
        return subprocess.run([exe, "--socket", self.daemon.api_sock] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120).stdout

    def reservation(self, rid):
        return self.daemon.ctl_json("reservation", rid)

    def wait_donating(self, name, rid):
        """Wait until @name's device holds blocks (a fault of a donor that
        holds nothing tests nothing); returns how many.  Polled on the
        device (QMP), which is quick: on the fixture host a reservation
        never sees its gains and fails, giving the blocks back, once its
        donations ended, so the fault must come while they run."""
        g = self.guests[name]

        def holding():
            return g.qmp("query-hugeroom")[0]["held-blocks"] or None
        try:
            return hrvm.wait_for(holding, 120, "%s to hold blocks for reservations" % name,
                                 interval=0.05)
        except hrvm.Failure:
            r = self.reservation(rid)
            raise hrvm.Failure("%s holds no block for a reservation: %s %s (%s), steps %s" % (
                name, rid, r.get("state"), r.get("reason"),
                [(s.get("guest"), s.get("state"), s.get("blocks_held")) for s in r["steps"]]))

    def block_delay(self, ms):
        """Make every donor's EVACUATE sleep @ms before each block."""
        for g in self.guests.values():
            g.fault_inject("block_delay_ms", ms)

    def metric(self, name):
        """An unlabelled metric of the daemon's /metrics, or None."""
        _, text = hrvm.http(self.daemon.api_sock, "GET", "/metrics")
        for line in text.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None


def fault_daemon_kill(f):
    tap = f.tap
    # A donation of these small, idle guests ends within a second or two,
    # faster than a poll through hugeroomctl sees it run: each block is
    # made to take 20 ms, as one of a loaded guest would, so that the kill
    # comes while the reservation's donations run.
    f.block_delay(20)
    rid = f.prepare(256)

    def donating():
        held = sum(g.qmp("query-hugeroom")[0]["held-blocks"] for g in f.guests.values())
        if not held:
            return None
        _, body = hrvm.http(f.daemon.api_sock, "GET", "/v1/reservations/" + rid)
        return json.loads(body)["state"] == "in-progress"
    hrvm.wait_for(donating, 120, "a donation of the reservation to hold blocks", interval=0.05)
    f.daemon.proc.send_signal(signal.SIGKILL)
    f.daemon.proc.wait()
    tap.ok(True, "daemon kill: hugeroomd SIGKILLed while reservation %s was in progress" % rid)
    f.block_delay(0)
    f.daemon.start()
    f.wait_api()
    f.wait_connected(list(f.guests))
    r = f.reservation(rid)
    tap.ok(r is not None and r["id"] == rid, "daemon kill: the reservation survived (%s, %d holds)"
           % (r["state"], len(r.get("holds") or ())))
    # let the reservation settle: the fixture host never gains blocks
    hrvm.wait_for(lambda: f.reservation(rid)["state"] not in ("created", "in-progress"), 120,
                  "the reservation to settle", interval=1)
    f.check("daemon kill")


def fault_qemu_kill(f):
    tap = f.tap
    fb = f.guests["fb"]
    rid = f.prepare(FB_NEEDED_MIB)
    held = f.wait_donating("fb", rid)
    os.kill(fb.pid, signal.SIGKILL)
    hrvm.wait_for(lambda: not fb.alive(), 10, "fb's QEMU to die")
    tap.ok(held > 0, "qemu kill: fb's QEMU SIGKILLed while its device held %d blocks for "
           "reservation %s" % (held, rid))
    f.check("qemu kill", gone=("fb",))
    del f.guests["fb"]


def fault_panic(f):
    tap = f.tap
    fb = f.boot("fb")
    f.wait_connected(["fa", "fb"])
    rid = f.prepare(FB_NEEDED_MIB)
    held = f.wait_donating("fb", rid)
    try:
        fb.sock.sendall(b"99 sh echo c > /proc/sysrq-trigger\n")
    except OSError:
        pass
    # read its console: a panic printing into a full serial socket never ends
    def ended():
        fb._fill()
        return not fb.alive()
    hrvm.wait_for(ended, 120, "the panicked guest's QEMU to end")
    tap.ok(held > 0, "panic: fb panicked while its device held %d blocks for reservation %s "
           "(its QEMU ended, -no-reboot)" % (held, rid))
    f.check("panic", gone=("fb",))
    del f.guests["fb"]


def fault_driver_stalls(f):
    tap = f.tap
    fa = f.guests["fa"]
    fa.fault_inject("sweep_delay_ms", 3000)
    t0 = time.monotonic()
    out = subprocess.run([os.path.join(hrvm.build_dir(), "host", "hugeroomctl"),
                          "--socket", f.daemon.api_sock, "--json", "evacuate", "fa",
                          "--blocks", "128", "--timeout", "3", "--wait"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    took = time.monotonic() - t0
    state = None
    try:
        state = json.loads(out.stdout).get("state")
    except ValueError:
        pass
    tap.ok(state == "timed-out" and took < 30,
           "driver stalls: its evacuation timed out in %.1f s (%s)" % (took, state),
           out.stdout + out.stderr)
    gs = f.api_guests()
    tap.ok("fa" in gs and gs["fa"]["connected"],
           "driver stalls: the daemon serves and fa stays connected")
    fa.fault_inject("sweep_delay_ms", 0)
    # what the stalled evacuation froze before the cancel is the API's: give it back
    f.ctl_quiet("return", "fa", "--all", "--wait")
    f.check("driver stalls")


def fault_full_disk(f):
    tap = f.tap
    path = os.path.join(f.state, "reservations.json")
    f.daemon.stop()
    f.start_daemon(valgrind=True)
    f.wait_connected(list(f.guests), timeout=180)
    with open(path) as fh:
        before = fh.read()
    json.loads(before)
    filler = os.path.join(f.state, "filler")
    subprocess.run(["dd", "if=/dev/zero", "of=" + filler, "bs=4k"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rid = f.prepare(8, deadline=5)
    r = f.reservation(rid)
    tap.ok(r["id"] == rid, "full disk: the API still creates reservations (%s)" % rid)
    hrvm.wait_for(lambda: "cannot save reservations" in f.daemon.log(), 60,
                  "the daemon to report the failed save", interval=1)
    with open(path) as fh:
        after = fh.read()
    tap.ok(after == before and "free space" in f.daemon.log(),
           "full disk: the error says what to do and the previous file is whole")
    # everything the reservation does happens on the full disk: it settles and
    # gives its holds back; then nothing changes
    hrvm.wait_for(lambda: f.reservation(rid)["state"] not in ("created", "in-progress") and
                  not f.reservation(rid).get("holds"), 120,
                  "the reservation to settle and hold nothing", interval=1)
    settled = f.reservation(rid)["state"]
    time.sleep(3)
    tap.ok(f.metric("hugeroom_state_file_stale") == 1 and
           f.metric("hugeroom_state_write_failures_total") > 0,
           "full disk: /metrics says the state file is stale (%s failed writes)"
           % f.metric("hugeroom_state_write_failures_total"))
    os.unlink(filler)

    def saved():
        with open(path) as fh:
            text = fh.read()
        try:
            rs = json.loads(text)["reservations"]
        except ValueError:
            return False
        return any(r["id"] == rid and r["state"] == settled for r in rs)
    # no change comes to prompt a write: the daemon's retry writes it
    hrvm.wait_for(saved, 60, "the state file to be written again", interval=1)
    tap.ok(f.metric("hugeroom_state_file_stale") == 0,
           "full disk: with room again and no change the retry wrote %s (%s) to the state "
           "file" % (rid, settled))
    f.ctl_quiet("release", rid)
    f.check("full disk")
    proc = f.daemon.proc
    f.daemon.stop()
    rc = proc.returncode
    with open(f.daemon.vglog) as fh:
        vg = fh.read()
    lost = [int(x.replace(",", "")) for x in re.findall(r"definitely lost: ([\d,]+) bytes", vg)]
    tap.ok(rc == 0 and "ERROR SUMMARY: 0 errors" in vg and not any(lost),
           "valgrind: hugeroomd exited 0 with no error and nothing definitely lost",
           "exit %s\n%s" % (rc, vg[-3000:]))


def main():
    # meson's timeout sends SIGTERM: still stop the guests and unmount
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    tap = hrvm.Tap()
    work = hrvm.workdir("hr-faults-")
    f = None
    try:
        qemu = hrvm.qemu_binary()
        kver, (vmlinuz, _mods) = hrvm.pick_kernel("6.12")
        ko = hrvm.build_module(kver, test=True)
        initrd = hrvm.build_initramfs(kver, ko, work)
        f = Faults(tap, work, qemu, kver, vmlinuz, initrd)
        f.start_daemon()
        f.boot("fa")
        f.boot("fb")
        f.wait_connected(["fa", "fb"])
        tap.ok(True, "two donors booted and reporting")
        for name, fn in (("daemon kill", fault_daemon_kill), ("qemu kill", fault_qemu_kill),
                         ("panic", fault_panic), ("driver stalls", fault_driver_stalls),
                         ("full disk", fault_full_disk)):
            try:
                fn(f)
            except hrvm.Failure as e:
                tap.ok(False, "%s: unexpected failure" % name, str(e))
    except hrvm.Failure as e:
        tap.ok(False, "unexpected failure", str(e))
    finally:
        if f:
            if f.daemon and tap.failed:
                hrvm.log("daemon log tail:\n" + f.daemon.log())
            for g in f.guests.values():
                g.stop()
            if f.daemon:
                f.daemon.stop()
            subprocess.run(["umount", f.state])
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
