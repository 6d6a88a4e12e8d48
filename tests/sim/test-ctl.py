#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomctl against the real hugeroomd binary and simulated guests.

Human and --json output of status, plan, guests, guest, report,
reservations, libvirt-xml, and the documented exit codes: 0 done, 1 an
error answer, 2 a usage error, 3 the daemon unreachable, 4 a plan that
cannot make the size free. --version and the help pages; what the command
line checks before it sends anything (bounds, a node the host has, a guest
the daemon knows, a PCP policy that exists); errors in the command line's
terms; --output, --noheadings, --raw; names escaped; the API over HTTPS
with --url and --token-file. Nothing here changes the host: plan is a dry
run, and the daemon runs with hold_in_pool=false. TAP output.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api"))
from simharness import SimSetup, build_dir  # noqa: E402
from apiharness import ADMIN_TOKEN, free_port, make_tls, tls_config  # noqa: E402

tap = Tap()
check = tap.ok

GUESTS = 3
MEM_GIB = 4



def ctl_args(args, timeout=60):
    exe = os.path.join(build_dir(), "host", "hugeroomctl")
    p = subprocess.run([exe] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def ctl(sock, *args):
    return ctl_args(["--socket", sock] + list(args))


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
    # as hugeroomctl(8) documents it: watch too (it exited 1, without JSON)
    rc, out, err = ctl(gone, "watch")
    check(rc == 3 and "cannot connect to hugeroomd at " + gone in err,
          "watch, no daemon: exit 3", show(rc, out, err))
    rc, out, err = ctl(gone, "--json", "watch")
    j = as_json(out)
    check(rc == 3 and j is not None and gone in j.get("error", ""),
          "watch --json, no daemon: exit 3 and {\"error\"} on stdout", show(rc, out, err))


def test_usage(sock):
    for args, needle in [((), "no command given"),
                         (("frobnicate",), "no command 'frobnicate'; the commands are status"),
                         (("plan",), "plan takes one argument, not 0"),
                         (("status", "extra"), "status takes no arguments"),
                         (("guests", "--node", "0"), "guests does not take --node"),
                         (("plan", "4G", "--wait"), "plan does not take --wait"),
                         (("prepare", "4G", "--timeout", "3"), "prepare does not take --timeout"),
                         (("guests", "--timeout", "3"), "does not take --timeout"),
                         (("guests", "--output", "NAME,colour"),
                          "--output colour: the guests table has no such column; it has NAME,"),
                         (("status", "--raw"), "status does not take --output, --noheadings"),
                         (("help", "nosuch"), "help: no command 'nosuch'"),
                         (("--token-file", "/nonexistent", "guests"), "go with --url"),
                         (("--no-such-option",), "Unknown option")]:
        rc, out, err = ctl(sock, *args)
        check(rc == 2 and needle in err, "usage %r: exit 2, says %r" % (args, needle),
              show(rc, out, err))
    rc, out, err = ctl(sock, "--json", "frobnicate")
    j = as_json(out)
    check(rc == 2 and j is not None and "frobnicate" in j.get("error", ""),
          "usage error with --json: exit 2 and {\"error\"} on stdout", show(rc, out, err))


def test_version_help(sock):
    rc, out, err = ctl(sock, "--version")
    check(rc == 0 and out.startswith("hugeroomctl ") and out.split()[1][0].isdigit(),
          "--version", show(rc, out, err))
    rc, page, err = ctl(sock, "help", "prepare")
    check(rc == 0 and page.startswith("Usage:\n  hugeroomctl [OPTION...] prepare SIZE")
          and "--requester NAME" in page and "--vm-socket" not in page
          and "Exit codes:" in page,
          "help prepare: the command's page, its options only", show(rc, page, err))
    rc, out, err = ctl(sock, "prepare", "--help")
    check(rc == 0 and out == page, "prepare --help is help prepare", show(rc, out, err))
    rc, out, err = ctl(sock, "help", "guests")
    check(rc == 0 and "Columns (--output):" in out and "  MEM-FREE" in out,
          "help guests: the table's columns", show(rc, out, err))
    rc, out, err = ctl(sock, "--help")
    check(rc == 0 and "Commands:" in out and "  watch " in out and "--url" in out,
          "--help: the global page", show(rc, out, err))
    rc, out, err = ctl(sock, "__complete", "options", "capture")
    opts = out.split()
    check(rc == 0 and "--blocks" in opts and "--budget-ms" in opts and "--gpa" not in opts
          and "--json" in opts, "completion: the options capture takes", show(rc, out, err))


def test_local_checks(s, names):
    """what the command line checks itself: nothing reaches the daemon"""
    rc, out, err = ctl(s.api_sock, "prepare", "18446744073709551615")
    check(rc == 2 and "SIZE 18446744073709551615 is more than 9223372036854775807 bytes" in err,
          "prepare 18446744073709551615: refused naming the limit, exit 2", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "prepare", "4G", "--node", "7")
    check(rc == 1 and "--node 7: the host has no such node; its nodes are 0" in err,
          "prepare 4G --node 7: a node the host does not have, exit 1", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "plan", "12X")
    check(rc == 2 and "SIZE '12X' is not a size" in err, "plan 12X: not a size, exit 2",
          show(rc, out, err))
    check(s.api("GET", "/v1/reservations")["reservations"] == [],
          "none of them made a reservation", "")
    rc, out, err = ctl(s.api_sock, "pcp", "nosuch", "latency")
    check(rc == 1 and "no guest 'nosuch' is known to hugeroomd" in err and "stored" not in out,
          "pcp nosuch latency: no such guest, exit 1 (it said stored, exit 0)",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "pcp", names[0], "latncy")
    check(rc == 2 and "POLICY 'latncy'" in err, "pcp GUEST latncy: no such policy, exit 2",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "evacuate", "nosuch", "--blocks", "1")
    j = as_json(out)
    check(rc == 1 and j is not None and "no guest 'nosuch'" in j.get("error", ""),
          "evacuate nosuch --json: no such guest, {\"error\"}", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "capture", names[0], "--blocks", "0")
    check(rc == 2 and "--blocks 0: give a number of blocks from 1 to 4294967294" in err,
          "capture --blocks 0: the bound named", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "evacuate", names[0], "--gpa", ",".join(
        "0x%x" % (i << 21) for i in range(501)))
    check(rc == 2 and "--gpa: 501 addresses, more than the 500 one command takes" in err,
          "evacuate with 501 --gpa: the limit named", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "guest", "x" * 64)
    check(rc == 2 and "GUEST is 64 bytes, more than the 63" in err,
          "a GUEST longer than a guest's name can be", show(rc, out, err))
    # what only the daemon can check, said with the flag that set it
    rc, out, err = ctl(s.api_sock, "evacuate", names[0], "--gpa", "0x1234")
    check(rc == 1 and "hugeroomctl: --gpa[0]: 0x1234 is not 2 MiB aligned" in err,
          "the daemon's gpas[0] error as --gpa[0]", show(rc, out, err))


def test_table_options(s, names):
    rc, out, err = ctl(s.api_sock, "guests", "--output", "name,held", "--noheadings")
    rows = [ln.split() for ln in out.splitlines()]
    check(rc == 0 and [r[0] for r in rows] == names and all(len(r) == 2 for r in rows),
          "guests --output name,held --noheadings: the names and their holds",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "reservations", "--raw", "--noheadings")
    check(rc == 0 and out == "", "reservations --raw --noheadings, none: no line at all",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "host", "--raw", "-o", "NODE,FREE-2M")
    lines = out.splitlines()
    check(rc == 0 and lines[0] == "NODE FREE-2M" and lines[1].startswith("0 ") and
          "Compaction" not in out, "host --raw -o NODE,FREE-2M: the table only",
          show(rc, out, err))


def test_escaped_names(s):
    """a guest names itself: a newline or ESC never reaches the terminal raw"""
    s.start_guests(1, 1, prefix="ev\nil\x1b[2J", seed=7)
    s.wait_statuses(len(s.api("GET", "/v1/guests")["guests"]))
    rc, out, err = ctl(s.api_sock, "guests")
    check(rc == 0 and "\x1b" not in out and "ev\\x0ail\\x1b[2J0 " in out,
          "guests: the name escaped, one row", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "guest", "ev\nil\x1b[2J0")
    check(rc == 0 and "Guest:        ev\\x0ail\\x1b[2J0\n" in out and "\x1b" not in out,
          "guest NAME: the name escaped", show(rc, out, err))


def complete(sock, *words):
    """what host/doc/hugeroomctl.bash-completion offers after @words"""
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "host", "doc", "hugeroomctl.bash-completion")
    line = ["hugeroomctl", "--socket", sock] + list(words)
    prog = ("_init_completion() { words=(\"${COMP_WORDS[@]}\"); cword=$COMP_CWORD;"
            " cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }\n"
            "_filedir() { :; }\n"
            "source %s\n"
            "COMP_WORDS=(%s); COMP_CWORD=%d\n"
            "_hugeroomctl; printf '%%s\\n' \"${COMPREPLY[@]}\"\n"
            % (script, " ".join("'%s'" % w for w in line), len(line) - 1))
    env = dict(os.environ, PATH=os.path.join(build_dir(), "host") + ":" + os.environ["PATH"])
    p = subprocess.run(["bash", "-c", prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=60)
    return sorted(w for w in p.stdout.split("\n") if w)


def test_completion(s, names):
    """the completion asks hugeroomctl, and offers what the command takes"""
    got = complete(s.api_sock, "guest", "")
    check(got == sorted(names), "completion: guest names from the daemon", got)
    got = complete(s.api_sock, "capture", names[0], "--b")
    check(got == ["--blocks", "--budget-ms"], "completion: only the options capture takes", got)
    got = complete(s.api_sock, "h")
    check(got == ["help", "host"], "completion: the commands", got)
    rc, out, err = ctl(s.api_sock, "--json", "prepare", "2M", "--node", "0")
    rid = (as_json(out) or {}).get("id", "?")
    got = complete(s.api_sock, "release", "")
    check(rid in got, "completion: reservation ids (%s)" % rid, got)
    ctl(s.api_sock, "release", rid)


def test_remote(s, tls, port):
    """the API on the network: --url https://HOST:PORT --token-file F --ca-file CA"""
    url = "https://127.0.0.1:%d" % port
    token = os.path.join(tls, "ctl-token")
    fd = os.open(token, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, ("# the admin token\n%s\n" % ADMIN_TOKEN).encode())
    os.close(fd)
    ca = os.path.join(tls, "ca.pem")
    remote = ["--url", url, "--token-file", token, "--ca-file", ca]
    rc, out, err = ctl_args(remote + ["--json", "guests"])
    j = as_json(out)
    check(rc == 0 and j is not None and len(j["guests"]) >= 1, "guests over HTTPS",
          show(rc, out, err))
    rc, out, err = ctl_args(remote + ["--json", "prepare", "2M", "--node", "0", "--wait"])
    j = as_json(out)
    check(rc == 0 and j is not None and j["state"] == "ready",
          "prepare --wait over HTTPS: the event stream over TLS, ready", show(rc, out, err))
    if j:
        ctl_args(remote + ["release", j["id"]])
    # watch keeps the stream open over TLS until interrupted
    exe = os.path.join(build_dir(), "host", "hugeroomctl")
    w = subprocess.run(["timeout", "2", exe] + remote + ["watch"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    check(w.returncode == 124 and w.stderr == "",
          "watch over HTTPS: the event stream stays open", show(w.returncode, w.stdout, w.stderr))
    bad = os.path.join(tls, "bad-token")
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"not-a-token-of-the-daemon\n")
    os.close(fd)
    rc, out, err = ctl_args(["--url", url, "--token-file", bad, "--ca-file", ca, "guests"])
    check(rc == 1 and "check --token-file" in err, "a token the daemon does not know: exit 1",
          show(rc, out, err))
    os.chmod(token, 0o644)
    rc, out, err = ctl_args(remote + ["guests"])
    check(rc == 2 and "is readable by everyone" in err,
          "a token file others may read is refused", show(rc, out, err))
    os.chmod(token, 0o600)
    rc, out, err = ctl_args(["--url", url, "--token-file", token, "guests"])
    check(rc == 3 and "cannot connect to hugeroomd at " + url in err,
          "a certificate the system does not trust: no answer, exit 3", show(rc, out, err))
    rc, out, err = ctl_args(["--url", "http://127.0.0.1:%d" % port, "--token-file", token,
                             "guests"])
    check(rc == 2 and "is not https://HOST:PORT" in err, "http:// is refused", show(rc, out, err))


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
    check(rc == 0 and j == {"reservations": [], "next_cursor": None}, "reservations --json", show(rc, out, err))
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
    # for another requester: refused, unless an admin says --force (root is one)
    rc, out, err = ctl(s.api_sock, "consume", rid, "--requester", "libvirt:other")
    check(rc == 1 and "--force" in err and '"force"' not in err,
          "consume ID --requester OTHER: refused, naming --force", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "reservation", rid)
    j = as_json(out)
    check(j is not None and j["state"] == "ready", "the refused consume left it ready",
          show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "consume", rid, "--requester", "libvirt:other", "--force")
    check(rc == 0 and "State:        consumed" in out,
          "consume ID --requester OTHER --force: consumed", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "release", rid, "--force", "--requester", "a b&c")
    check(rc == 0, "release ID --force --requester 'a b&c' (escaped)", show(rc, out, err))
    rc, out, err = ctl(s.api_sock, "--json", "prepare", "2M", "--node", "0", "--wait",
                       "--requester", "test-ctl")
    j = as_json(out)
    rid = j["id"] if j else "r0"
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
    tls = tempfile.mkdtemp(prefix="hugeroom-ctl-tls-")
    make_tls(tls)
    port = free_port()
    s = SimSetup(extra_config="host_backing=thp\n" + tls_config(tls, port))
    try:
        test_unreachable(s.dir)
        test_usage(s.api_sock)
        test_version_help(s.api_sock)
        s.start_guests(GUESTS, MEM_GIB, prefix="sim")
        s.wait_statuses(GUESTS)
        names = ["sim%d" % i for i in range(GUESTS)]
        test_status(s, names)
        test_plan(s)
        test_guests(s, names)
        test_local_checks(s, names)
        test_table_options(s, names)
        test_completion(s, names)
        test_reservations(s)
        test_libvirt_xml(s.api_sock)
        test_remote(s, tls, port)
        test_escaped_names(s)
    except Exception as e:  # a crash is a failure, with the daemon's log
        check(False, "unexpected %s: %s" % (type(e).__name__, e), s.daemon_log())
    finally:
        s.close()
        shutil.rmtree(tls, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
