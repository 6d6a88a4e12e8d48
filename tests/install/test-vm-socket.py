#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""QEMU run as libvirt runs it reaches the packaged hugeroomd's VM socket.

Nothing here is set up by the test beyond what systemd would do for the
packaged hugeroomd.service: its RuntimeDirectory= (with
RuntimeDirectoryMode=, owned by root, moved under a temporary directory)
is made, and the packaged hugeroomd starts with the packaged hugeroomd.conf
(its sockets moved into that directory the same way).  No set-group-ID
directory, no chmod of the socket: the VM socket is as the daemon makes it
(mode 0660, given to vm_socket_group).

Then the patched QEMU (scripts/build-qemu.sh, paused with -S: no guest
runs) starts with the chardev and virtio-hugeroom-pci device that
`hugeroomctl libvirt-xml` prints, under the credentials libvirt gives QEMU
on Debian: the real libvirt-qemu user (qemu.conf's user, from libvirt's
packages, installed by scripts/install-deps.sh), the group qemu.conf names
(libvirt-qemu) and the user's supplementary groups.  It connects (QEMU
without reconnect-ms exits at once when it cannot), and hugeroomd takes it
as a QEMU peer (qemu_user, qemu_executables) and lists its device.  The
same QEMU as nobody cannot connect (Permission denied).  TAP.
"""

import grp
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "vm"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sim"))
sys.path.insert(0, HERE)
import hrvm  # noqa: E402
import pkgfiles  # noqa: E402
from simharness import http_get  # noqa: E402

tap = hrvm.Tap()
check = tap.ok


def qemu_conf_credentials():
    """libvirt's QEMU user and group: qemu.conf's, else Debian's build default"""
    user, group = "libvirt-qemu", "libvirt-qemu"
    try:
        with open("/etc/libvirt/qemu.conf") as f:
            for line in f:
                m = re.match(r'\s*(user|group)\s*=\s*"([^"]*)"', line)
                if m and m.group(1) == "user":
                    user = m.group(2)
                elif m:
                    group = m.group(2)
    except FileNotFoundError:
        pass
    return user, group


def start_qemu(qemu, vm_sock, uid, gid, groups, log):
    # what hugeroomctl libvirt-xml gives a domain, without reconnect-ms: a
    # QEMU that cannot connect exits
    chardev = "socket,id=hugeroom0,path=%s" % vm_sock
    return subprocess.Popen(
        [qemu, "-M", "q35", "-S", "-nodefaults", "-display", "none", "-m", "64",
         "-chardev", chardev, "-device", "virtio-hugeroom-pci,chardev=hugeroom0"],
        user=uid, group=gid, extra_groups=groups, stdout=log, stderr=subprocess.STDOUT,
        cwd="/")


def still_running(proc, seconds):
    try:
        proc.wait(seconds)
        return False
    except subprocess.TimeoutExpired:
        return True


def main():
    if os.geteuid() != 0:
        check(False, "runs as root (it starts QEMU as libvirt's user)")
        return tap.done()
    d = tempfile.mkdtemp(prefix="hr-vmsock-")
    os.chmod(d, 0o711)
    daemon = None
    procs = []
    try:
        root = pkgfiles.extract(pkgfiles.build_debs(), d)
        qemu = hrvm.qemu_binary()
        svc = pkgfiles.unit(os.path.join(root, "lib/systemd/system/hugeroomd.service"))["Service"]
        cp = pkgfiles.conf(os.path.join(root, "etc/hugeroom/hugeroomd.conf"))
        h = cp["hugeroomd"]
        rundir_name = svc.get("RuntimeDirectory")
        mode = int(svc.get("RuntimeDirectoryMode", "0755"), 8)
        check(rundir_name == "hugeroom" and h.get("vm_socket") == "/run/hugeroom/vm.sock",
              "the unit's RuntimeDirectory=%s (mode %04o) holds the packaged vm_socket %s"
              % (rundir_name, mode, h.get("vm_socket")))
        # what systemd does for RuntimeDirectory=: /run/NAME, root's, the mode
        run = os.path.join(d, "run")
        os.mkdir(run, 0o755)
        rundir = os.path.join(run, rundir_name)
        os.mkdir(rundir)
        os.chown(rundir, 0, 0)
        os.chmod(rundir, mode)
        vm_sock = os.path.join(rundir, os.path.basename(h["vm_socket"]))
        api_sock = os.path.join(rundir, os.path.basename(h["api_socket"]))
        h["vm_socket"] = vm_sock
        h["api_socket"] = api_sock
        h["state_dir"] = os.path.join(d, "state")
        h["hold_in_pool"] = "false"
        h["api_group"] = ""
        # the packaged list names Debian's QEMU; this one is built (build-qemu.sh)
        h["qemu_executables"] = os.path.realpath(qemu)
        conf = os.path.join(d, "hugeroomd.conf")
        with open(conf, "w") as f:
            cp.write(f, space_around_delimiters=False)
        dlog_path = os.path.join(d, "daemon.log")
        dlog = open(dlog_path, "w")
        daemon = subprocess.Popen([os.path.join(root, "usr/sbin/hugeroomd"), "-f", "-v",
                                   "-c", conf], stdout=dlog, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while not os.path.exists(api_sock) and time.time() < deadline:
            time.sleep(0.1)
        st = os.stat(vm_sock)
        group = h.get("vm_socket_group", "")
        check(group != "" and st.st_gid == grp.getgrnam(group).gr_gid and
              st.st_mode & 0o777 == 0o660,
              "hugeroomd made %s mode %04o, group %s (vm_socket_group=%s)"
              % (vm_sock, st.st_mode & 0o7777, grp.getgrgid(st.st_gid).gr_name, group))

        user, qgroup = qemu_conf_credentials()
        pw = pwd.getpwnam(user)
        qgid = grp.getgrnam(qgroup).gr_gid
        groups = os.getgrouplist(user, qgid)
        names = ",".join(grp.getgrgid(g).gr_name for g in groups)
        qlog_path = os.path.join(d, "qemu-libvirt.log")
        with open(qlog_path, "w") as qlog:
            p = start_qemu(qemu, vm_sock, pw.pw_uid, qgid, groups, qlog)
        procs.append(p)
        alive = still_running(p, 5)
        with open(qlog_path) as f:
            qout = f.read()
        check(alive, "QEMU as %s (uid %d, group %s, groups %s) connected to the VM socket "
              "and runs" % (user, pw.pw_uid, qgroup, names), qout)
        status, body = None, ""
        deadline = time.time() + 20
        while time.time() < deadline:
            status, body = http_get(api_sock, "/v1/guests")
            if status == 200 and '"pid":%d' % p.pid in body.replace(" ", ""):
                break
            time.sleep(0.5)
        with open(dlog_path) as f:
            dtext = f.read()
        check(status == 200 and '"pid":%d' % p.pid in body.replace(" ", ""),
              "hugeroomd took libvirt's QEMU (pid %d) as a guest's device" % p.pid,
              "GET /v1/guests: %s %s\n%s" % (status, body[:600], dtext[-1500:]))

        nobody = pwd.getpwnam("nobody")
        qlog_path = os.path.join(d, "qemu-nobody.log")
        with open(qlog_path, "w") as qlog:
            q = start_qemu(qemu, vm_sock, nobody.pw_uid, nobody.pw_gid, [], qlog)
        procs.append(q)
        alive = still_running(q, 10)
        with open(qlog_path) as f:
            qout = f.read()
        check(not alive and "Permission denied" in qout,
              "QEMU as nobody cannot connect: %s" % qout.strip().splitlines()[-1:], qout)
    except Exception as e:  # a crash is a failure
        check(False, "unexpected %s: %s" % (type(e).__name__, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if daemon is not None:
            daemon.terminate()
            daemon.wait(15)
        shutil.rmtree(d, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
