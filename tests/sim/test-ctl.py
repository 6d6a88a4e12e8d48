#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomctl against the real hugeroomd binary and simulated guests.

Human and --json output of status, plan, guests, guest, report,
reservations, libvirt-xml, and the documented exit codes: 0 done, 1 an
error answer, 2 a usage error, 3 the daemon unreachable, 4 a plan that
cannot make the size free. Nothing here changes the host: plan is a dry
run, and the daemon runs with hold_in_pool=false. TAP output.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
from simharness import SimSetup, build_dir  # noqa: E402

tap = Tap()
check = tap.ok

GUESTS = 3
MEM_GIB = 4



def ctl(sock, *args):
    exe = os.path.join(build_dir(), "host", "hugeroomctl")
    p = subprocess.run([exe, "--socket", sock] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def as_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def show(rc, out, err):
    return "exit %d\nstdout:\n%s\nstderr:\n%s" % (rc, out, err)


def test_unreachable(dirname):
    gone = os.path.join(dirname, "nobody.sock")
    rc, out, err = ctl(gone, "status")
    check(rc == 3 and "cannot connect to hugeroomd at " + gone in err and out == "",
          "no daemon: exit 3, the socket named on stderr", show(rc, out, err))
    rc, out, err = ctl(gone, "--json", "guests")
    j = as_json(out)
    check(rc == 3 and j is not None and gone in j.get("error", ""),
          "no daemon, --json: exit 3 and {\"error\"} on stdout", show(rc, out, err))


def test_usage(sock):
    for args, needle in [((), "no command given"),
                         (("frobnicate",), "cannot understand 'frobnicate'"),
                         (("plan",), "plan takes one SIZE"),
                         (("status", "extra"), "cannot understand 'status' with 1"),
                         (("guests", "--node", "0"), "go with prepare or plan"),
                         (("plan", "4G", "--wait"), "plan does nothing to wait for"),
                         (("prepare", "4G", "--timeout", "3"), "takes --deadline, not"),
                         (("guests", "--timeout", "3"), "does not take --timeout"),
                         (("--no-such-option",), "Unknown option")]:
        rc, out, err = ctl(sock, *args)
        check(rc == 2 and needle in err, "usage %r: exit 2, says %r" % (args, needle),
              show(rc, out, err))
    rc, out, err = ctl(sock, "--json", "frobnicate")
    j = as_json(out)
    check(rc == 2 and j is not None and "frobnicate" in j.get("error", ""),
          "usage error with --json: exit 2 and {\"error\"} on stdout", show(rc, out, err))


def test_status(s, names):
    rc, out, err = ctl(s.api_sock, "status")
    lines = out.splitlines()
    ok = rc == 0 and lines[:2] and lines[0] == "Host:" and lines[1].split()[:3] == [
        "NODE", "FREE", "FREE-2M"]
    ok = ok and "Reservations:" in lines and "no reservations" in lines and "Guests:" in lines
    guest_rows = [ln.split()[0] for ln in lines[lines.index("Guests:") + 2:]] if ok else []
    check(ok and guest_rows == names, "status: host nodes, reservations, the %d guests"
          % len(names), show(rc, out, err))
    host = s.api("GET", "/v1/host")
    node0 = [ln.split() for ln in lines if ln.startswith("0 ")]
    check(len(node0) == 1 and abs(int(node0[0][3]) - host["nodes"][0]["free_blocks"]) < 2048,
          "status: node 0's free 2 MiB blocks as the API counts them", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "status")
    j = as_json(out)
    check(rc == 0 and j is not None and j["reservations"] == [] and
          [g["name"] for g in j["guests"]] == names and
          [n["node"] for n in j["host"]["nodes"]] == [n["node"] for n in host["nodes"]],
          "status --json: host, reservations and guests", show(rc, out, err))


def test_plan(s):
    rc, out, err = ctl(s.api_sock, "plan", "2M", "--node", "0")
    check(rc == 0 and "Plan:         2.0 MiB (1 blocks of 2 MiB) on node 0: complete" in out
          and "Nothing was done" in out,
          "plan 2M: complete, exit 0", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "plan", "64T")
    check(rc == 4 and "cannot make all of it free now" in out,
          "plan 64T: not satisfiable, exit 4", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "plan", "64T", "--strict")
    j = as_json(out)
    check(rc == 4 and j is not None and j["plan"]["complete"] is False and
          j["plan"]["need_blocks"] == 64 << 19,
          "plan --json 64T: the planner's JSON, exit 4", show(rc, out, err))
    # more than the host has free: the donors show up
    free = s.api("GET", "/v1/host")["nodes"][0]["available_blocks"]
    size = "%dM" % ((free + 300) * 2)
    rc, out, err = ctl(s.api_sock, "--json", "plan", size, "--node", "0")
    j = as_json(out)
    donors = sorted({st["guest"] for st in j["plan"]["steps"] if st["kind"] == "donate"}) \
        if j else []
    check(rc in (0, 4) and donors and all(d.startswith("sim") for d in donors),
          "plan beyond the host's free blocks asks simulated guests: %s" % donors,
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "plan", size, "--node", "0")
    rows = [ln.split() for ln in out.splitlines() if ln.split()[1:2] == ["donate"]]
    check(rc in (0, 4) and rows and all(r[3].startswith("sim") for r in rows),
          "plan, human: a donate row per donor, named", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "plan", "12X")
    check(rc == 1 and "12X" in err, "plan with a bad size: the daemon's error, exit 1",
          show(rc, out, err))


def test_guests(s, names):
    rc, out, err = ctl(s.api_sock, "--json", "guests")
    j = as_json(out)
    check(rc == 0 and j is not None and [g["name"] for g in j["guests"]] == names,
          "guests --json", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "guest", names[0])
    check(rc == 0 and ("Guest:        %s\n" % names[0]) in out and "Memory:" in out,
          "guest NAME, human", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "guest", "no-such-guest")
    check(rc == 1 and "no-such-guest" in err and out == "",
          "guest that does not exist: exit 1, the daemon's message", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "guest", "no-such-guest")
    j = as_json(out)
    check(rc == 1 and j is not None and "no-such-guest" in j.get("error", ""),
          "guest that does not exist, --json: the daemon's error body", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "report", names[1])
    check(rc == 0 and out.startswith("report requested from %s (request " % names[1]),
          "report NAME", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "report", names[1])
    j = as_json(out)
    check(rc == 0 and j is not None and j["request_id"] > 0, "report --json",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "reservations")
    j = as_json(out)
    check(rc == 0 and j == {"reservations": []}, "reservations --json", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "reservation", "r999")
    check(rc == 1 and "r999" in err, "reservation that does not exist: exit 1",
          show(rc, out, err))


def test_reservations(s):
    """2 MiB, which the host has free: counted, not compacted (hold_in_pool=false)"""
    rc, out, err = ctl(s.api_sock, "--json", "prepare", "2M", "--node", "0", "--wait",
                       "--requester", "test-ctl")
    j = as_json(out)
    check(rc == 0 and j is not None and j["state"] == "ready" and not j["partial"] and
          ("%s ready: 1/1 blocks" % j["id"]) in err,
          "prepare 2M --wait --json: ready in full, exit 0, progress on stderr",
          show(rc, out, err))
    rid = j["id"] if j else "r0"
    rc, out, err = ctl(s.api_sock, "reservations")
    rows = [ln.split() for ln in out.splitlines()[1:]]
    check(rc == 0 and [r[0] for r in rows if r and r[0] == rid] == [rid] and
          any(r[1] == "ready" and "test-ctl" in r for r in rows),
          "reservations, human: the ready reservation and its requester", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "consume", rid)
    check(rc == 0 and out.startswith("Reservation:  %s for test-ctl" % rid) and
          "State:        consumed" in out, "consume ID, human", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "release", rid)
    j = as_json(out)
    check(rc == 0 and j is not None and j["id"] == rid, "release ID --json", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "consume", rid)
    check(rc == 1 and rid in err, "consume of a released reservation: exit 1",
          show(rc, out, err))


def test_libvirt_xml(sock):
    rc, out, err = ctl(sock, "--json", "libvirt-xml", "vm1", "--vm-socket", "/run/x/vm.sock")
    j = as_json(out)
    check(rc == 0 and j is not None and j["domain"] == "vm1" and
          "path=/run/x/vm.sock" in j["qemu_commandline"],
          "libvirt-xml --json", show(rc, out, err))


def main():
    s = SimSetup(extra_config="host_backing=thp")
    try:
        test_unreachable(s.dir)
        test_usage(s.api_sock)
        s.start_guests(GUESTS, MEM_GIB, prefix="sim")
        s.wait_statuses(GUESTS)
        names = ["sim%d" % i for i in range(GUESTS)]
        test_status(s, names)
        test_plan(s)
        test_guests(s, names)
        test_reservations(s)
        test_libvirt_xml(s.api_sock)
    except Exception as e:  # a crash is a failure, with the daemon's log
        check(False, "unexpected %s: %s" % (type(e).__name__, e), s.daemon_log())
    finally:
        s.close()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
