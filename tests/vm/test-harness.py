#!/usr/bin/env python3
"""The VM harness's guard against orphaned QEMUs (hrvm.sweep_stale_qemus),
with stand-in processes instead of QEMU: a harness that is killed leaves
its "QEMU" running in a session of its own, as boot-guest.sh's setsid does;
the next sweep ends that one, and no process whose start time or command
line does not match what the harness recorded, nor one whose harness
still runs.  Also the big-memory lock (hrhost.bigmem_lock): a guest's
shared hold keeps a whole-host test out, and the guests that test boots
do not weaken its exclusive hold."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hrvm  # noqa: E402

SLEEPER = "import time; time.sleep(300)"

# The harness stand-in: records a "QEMU" with its marker, and a process
# whose command line lacks the marker it is recorded with, then waits to
# be killed.
CHILD = r"""
import os, subprocess, sys, time
sys.path.insert(0, %(dir)r)
import hrvm
hrvm.PIDS_DIR = %(pids)r
qemu = subprocess.Popen([sys.executable, "-c", %(sleeper)r, "serial-%(tag)s.log"],
                        start_new_session=True)
other = subprocess.Popen([sys.executable, "-c", %(sleeper)r, "unrelated"],
                         start_new_session=True)
hrvm.wait_for(lambda: hrvm.proc_cmdline(qemu.pid)[-1:] == ["serial-%(tag)s.log"] and
              hrvm.proc_cmdline(other.pid)[-1:] == ["unrelated"], 10, "the sleepers")
hrvm.record_qemu(qemu.pid, "serial-%(tag)s.log")
hrvm.record_qemu(other.pid, "serial-%(tag)s-elsewhere.log")
print(qemu.pid, other.pid, flush=True)
time.sleep(300)
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def main():
    tap = hrvm.Tap()
    pids = tempfile.mkdtemp(prefix="hr-vm-pids-")
    hrvm.PIDS_DIR = pids
    tag = str(os.getpid())
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD % {"dir": os.path.dirname(os.path.abspath(__file__)),
                                        "pids": pids, "sleeper": SLEEPER, "tag": tag}],
        stdout=subprocess.PIPE, text=True)
    qemu, other = (int(x) for x in child.stdout.readline().split())
    mine = subprocess.Popen([sys.executable, "-c", SLEEPER, "serial-mine.log"])
    try:
        hrvm.wait_for(lambda: hrvm.proc_cmdline(mine.pid)[-1:] == ["serial-mine.log"], 10,
                      "our own sleeper")
        hrvm.record_qemu(mine.pid, "serial-mine.log")
        tap.ok(len(os.listdir(pids)) == 3, "three QEMUs recorded", os.listdir(pids))
        with open(hrvm._pidfile(mine.pid)) as f:
            e = json.load(f)
        tap.ok(e["start"] == hrvm.proc_starttime(mine.pid) and e["owner"] == os.getpid(),
               "a record names the process by pid and start time, and its harness", e)

        tap.ok(hrvm.sweep_stale_qemus() == [], "nothing is ended while its harness runs")
        tap.ok(alive(qemu) and alive(other), "the harness's processes run on")

        child.send_signal(signal.SIGKILL)
        child.wait()
        tap.ok(alive(qemu), "a killed harness leaves its QEMU running (setsid)")
        killed = hrvm.sweep_stale_qemus()
        tap.ok(killed == [qemu], "the sweep ends that QEMU and only it", killed)
        hrvm.wait_for(lambda: not alive(qemu), 10, "the orphaned QEMU to go")
        tap.ok(not alive(qemu), "the orphaned QEMU is gone")
        tap.ok(alive(other), "a process whose command line lacks its recorded marker runs on")
        tap.ok(alive(mine.pid), "a QEMU of a harness that still runs (ours) runs on")
        left = sorted(os.listdir(pids))
        tap.ok(left == [os.path.basename(hrvm._pidfile(mine.pid))],
               "the gone harness's records are removed, ours kept", left)
        hrvm.forget_qemu(mine.pid)
        tap.ok(os.listdir(pids) == [], "a stopped guest's record goes")
    finally:
        for pid in (qemu, other, mine.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        mine.wait()
        if child.poll() is None:
            child.kill()
            child.wait()
        for name in os.listdir(pids):
            os.unlink(os.path.join(pids, name))
        os.rmdir(pids)
    check_bigmem_lock(tap)
    return tap.done()


# A process that takes the big-memory lock (on @path) as told, then says
# so and waits.
LOCKER = r"""
import sys, time
sys.path.insert(0, %(dir)r)
import hrhost
hrhost.BIGMEM_LOCK = %(path)r
for mode in %(modes)r:
    hrhost.bigmem_lock(exclusive=(mode == "x"))
print("held", flush=True)
time.sleep(300)
"""


def check_bigmem_lock(tap):
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bigmem.lock")
        for modes, probe, what in (
                (["s"], "-x", "a guest's shared hold keeps an exclusive (whole-host) test out"),
                (["x", "s"], "-s", "a whole-host test's own guest leaves its hold exclusive")):
            p = subprocess.Popen([sys.executable, "-c", LOCKER % dict(dir=here, path=path,
                                                                      modes=modes)],
                                 stdout=subprocess.PIPE, text=True)
            try:
                line = p.stdout.readline().strip()
                rc = subprocess.run(["flock", probe, "-n", path, "true"]).returncode
                tap.ok(line == "held" and rc == 1, "%s (flock %s -n: exit %d)" % (what, probe, rc))
            finally:
                p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
