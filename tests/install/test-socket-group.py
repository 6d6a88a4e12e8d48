#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""The packaged API socket under socket activation: api_group's members connect.

This machine's PID 1 is not systemd, so the test is the service manager,
and it does for hugeroomd.socket what systemd does: it reads the [Socket]
section of the unit in the hugeroom .deb (tests/install/build-debs.sh
builds it from this tree), binds ListenStream (moved into a temporary
directory, with the packaged hugeroomd.conf's api_socket moved the same
way), gives the file SocketUser=/SocketGroup= (root when unset; a group
that does not exist fails the socket, as in systemd) and SocketMode=, and
starts the packaged hugeroomd with the socket as fd 3 (LISTEN_FDS=1,
LISTEN_PID).  The group is the one the package's postinst creates; when
this host does not have it the test adds it for its run and removes it
again.

Then the packaged hugeroomctl, as nobody with the group as a
supplementary group, gets the host's memory (exit 0), and as nobody
without it, "cannot connect" (exit 3); the daemon does not warn that
api_group's members cannot connect.  With the unit before SocketGroup=
(mode 0660, root's group) the member got exit 3 as well.  TAP.
"""

import grp
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkgfiles  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
tap = Tap()
check = tap.ok


def socket_section(path):
    """[Socket] of the unit as systemd reads it"""
    return dict(pkgfiles.unit(path)["Socket"])


def activate(sec, path):
    """What systemd does for the [Socket] @sec, with ListenStream at @path."""
    user = sec.get("SocketUser", "") or "root"
    group = sec.get("SocketGroup", "")
    uid = pwd.getpwnam(user).pw_uid
    gid = grp.getgrnam(group).gr_gid if group else pwd.getpwnam(user).pw_gid
    mode = int(sec.get("SocketMode", "0666"), 8)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chown(path, uid, gid)
    os.chmod(path, mode)
    s.listen(128)
    return s


def start_daemon(exe, conf, s, log):
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(s.fileno(), 3)
            os.set_inheritable(3, True)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LISTEN_FDS": "1",
                   "LISTEN_PID": str(os.getpid())}
            os.execve(exe, [exe, "-f", "-v", "-c", conf], env)
        finally:
            os._exit(127)
    return pid


def ctl(exe, api, gid_extra):
    nobody = pwd.getpwnam("nobody")
    r = subprocess.run([exe, "--socket", api, "host"], user=nobody.pw_uid,
                       group=nobody.pw_gid, extra_groups=gid_extra,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    return r.returncode, r.stdout


def main():
    d = tempfile.mkdtemp(prefix="hugeroom-sockgroup-")
    os.chmod(d, 0o755)
    made_group = None
    pid = None
    try:
        root = pkgfiles.extract(pkgfiles.build_debs(), d)
        unit = os.path.join(root, "lib/systemd/system/hugeroomd.socket")
        sec = socket_section(unit)
        group = sec.get("SocketGroup", "")
        # the packaged configuration, with its paths moved into the test's directory
        cp = pkgfiles.conf(os.path.join(root, "etc/hugeroom/hugeroomd.conf"))
        h = cp["hugeroomd"]
        check(h.get("api_socket") == sec.get("ListenStream"),
              "the unit listens where hugeroomd.conf's api_socket is (%s, %s)"
              % (sec.get("ListenStream"), h.get("api_socket")))
        api_group = h.get("api_group", "")
        check(api_group != "" and group == api_group,
              "hugeroomd.socket's SocketGroup= is the packaged api_group (%r, %r)"
              % (group, api_group))
        if not api_group:
            return tap.done()
        try:
            grp.getgrnam(api_group)
        except KeyError:
            subprocess.run(["groupadd", "--system", api_group], check=True)
            made_group = api_group
        api = os.path.join(d, "api.sock")
        h["api_socket"] = api
        h["vm_socket"] = os.path.join(d, "vm.sock")
        h["state_dir"] = os.path.join(d, "state")
        h["hold_in_pool"] = "false"
        h["libvirt_uri"] = ""
        conf = os.path.join(d, "hugeroomd.conf")
        with open(conf, "w") as f:
            cp.write(f, space_around_delimiters=False)
        try:
            s = activate(sec, api)
        except KeyError as e:
            check(False, "the socket unit's user or group exists: %s" % e)
            return tap.done()
        st = os.stat(api)
        logpath = os.path.join(d, "daemon.log")
        with open(logpath, "w") as log:
            pid = start_daemon(os.path.join(root, "usr/sbin/hugeroomd"), conf, s, log)
        s.close()
        exe = os.path.join(root, "usr/bin/hugeroomctl")
        gid = grp.getgrnam(api_group).gr_gid
        rc, out = ctl(exe, api, [gid])
        deadline = time.time() + 20
        # the daemon takes the socket before it serves; connections wait in the backlog
        while rc != 0 and "cannot connect" not in out.lower() and time.time() < deadline:
            time.sleep(0.2)
            rc, out = ctl(exe, api, [gid])
        with open(logpath) as f:
            dlog = f.read()
        check(rc == 0 and "node" in out.lower(),
              "a member of api_group %s (nobody, supplementary group) gets the host's "
              "memory through the activated socket (mode %04o, gid %d): exit %d"
              % (api_group, st.st_mode & 0o7777, st.st_gid, rc), out + "\n" + dlog[-2000:])
        rc, out = ctl(exe, api, [])
        check(rc == 3, "nobody without the group cannot connect: exit %d" % rc, out)
        check("using the socket the service manager passed (fd 3)" in dlog and
              "members cannot connect" not in dlog,
              "hugeroomd took the passed socket and does not warn about its mode", dlog[-2000:])
    except Exception as e:  # a crash is a failure
        check(False, "unexpected %s: %s" % (type(e).__name__, e))
    finally:
        if pid is not None:
            os.kill(pid, 15)
            os.waitpid(pid, 0)
        if made_group:
            subprocess.run(["groupdel", made_group])
        shutil.rmtree(d, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
