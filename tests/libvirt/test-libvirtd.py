#!/usr/bin/env python3
"""The libvirt hook under the real libvirtd (TAP).

libvirtd from Debian (bookworm-backports' 11.x, scripts/install-deps.sh)
runs here as root with `libvirtd -d`; this test starts one of its own
(after virtlogd), with the hook built by meson installed as
/etc/libvirt/hooks/qemu.d/hugeroom, and hugeroomd on private sockets in a
directory QEMU's user can reach (the set-up HOOK.md documents).  A
persistent domain with the patched QEMU as <emulator>, TCG, no OS (SeaBIOS
finds nothing to boot, which is all a start needs), 256 MiB, and the
<qemu:commandline> that `hugeroomctl libvirt-xml` prints:

  1. daemon up: `virsh start` runs prepare (a reservation by
     libvirt:UUID, ready), start (consumed), the domain runs as
     libvirt-qemu, its device connects to hugeroomd, which looks the
     domain up in libvirtd and applies its donor and floor; `virsh destroy`
     runs release;
  2. daemon stopped, fail-open: the domain still starts, with the hook's
     warning in libvirtd's log;
  3. daemon stopped, fail-closed: `virsh start` fails with the hook's
     message, the domain stays off;
  4. the domain's own policy: on-failure closed with a NUMA node the host
     does not have is refused with the daemon's reason; prepare=no starts
     without a reservation.

It fails, never skips, when libvirtd cannot be installed or started.  It
stops the libvirtd and virtlogd it started and removes the hook and the
configuration it installed.  Small (256 MiB): it holds /tmp/hr-bigmem.lock
shared, and /tmp/hr-libvirt.lock exclusively (one system libvirtd).
"""

import fcntl
import grp
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid as uuid_mod

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
import hrhost  # noqa: E402
import hrvm  # noqa: E402
from hrvm import Failure, log, run, wait_for  # noqa: E402

HOOK_DIR = "/etc/libvirt/hooks/qemu.d"
HOOK = os.path.join(HOOK_DIR, "hugeroom")
# where the built hook reads it: SYSCONFDIR/hugeroom (meson passes it)
HOOK_CONF = os.environ.get("HUGEROOM_HOOK_CONF", "/etc/hugeroom/hook.conf")
QEMU_USER = "libvirt-qemu"
# qemu.conf's group on Debian; QEMU also has its user's groups (kvm)
QEMU_GROUP = "libvirt-qemu"
CONNECT = ["virsh", "-c", "qemu:///system"]
MEM_MIB = 256


def pids_of(name):
    """Live (not zombie) processes called @name."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        if comm == name and stat[stat.rindex(")") + 2] != "Z":
            out.append(int(d))
    return out


def virsh(*args, check=True):
    p = subprocess.run(CONNECT + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=180)
    if check and p.returncode != 0:
        raise Failure("virsh %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


class Saved:
    """A system file the test replaces, put back as it was at the end."""

    def __init__(self, path):
        self.path = path
        self.backup = None
        self.made_dirs = []
        if os.path.lexists(path):
            self.backup = path + ".hr-test-saved"
            os.rename(path, self.backup)
        d = os.path.dirname(path)
        while not os.path.isdir(d):
            self.made_dirs.insert(0, d)
            d = os.path.dirname(d)
        for d in self.made_dirs:
            os.mkdir(d, 0o755)

    def restore(self):
        if os.path.lexists(self.path):
            os.unlink(self.path)
        if self.backup:
            os.rename(self.backup, self.path)
        for d in reversed(self.made_dirs):
            try:
                os.rmdir(d)
            except OSError:
                pass


class Libvirtd:
    """virtlogd and libvirtd -d of our own, logging the hook's runs."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.conf = os.path.join(workdir, "libvirtd.conf")
        self.pidfile = os.path.join(workdir, "libvirtd.pid")
        self.logfile = os.path.join(workdir, "libvirtd.log")
        self.pid = None
        self.virtlogd_pid = None
        with open(self.conf, "w") as f:
            # util.command logs each hook run with its stdout and stderr
            f.write('log_level = 3\nlog_filters = "1:util.command 1:util.hook"\n'
                    'log_outputs = "1:file:%s"\n' % self.logfile)

    def start(self):
        for exe in ("libvirtd", "virtlogd", "virsh"):
            if shutil.which(exe) is None:
                raise Failure("%s is not installed: scripts/install-deps.sh installs libvirt "
                              "from bookworm-backports" % exe)
        theirs = pids_of("libvirtd")
        if theirs:
            raise Failure("a libvirtd this test did not start is running (pid %s): it read "
                          "its hooks when it started and is not ours to restart; stop it "
                          "and rerun" % theirs)
        if not pids_of("virtlogd"):
            run(["virtlogd", "-d", "-p", os.path.join(self.workdir, "virtlogd.pid")])
            self.virtlogd_pid = int(wait_for(
                lambda: self._read_pid(os.path.join(self.workdir, "virtlogd.pid")),
                10, "virtlogd's pid file"))
        run(["libvirtd", "-d", "-f", self.conf, "-p", self.pidfile])
        self.pid = int(wait_for(lambda: self._read_pid(self.pidfile), 30, "libvirtd's pid file"))
        wait_for(lambda: subprocess.run(CONNECT + ["version"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL).returncode == 0,
                 60, "libvirtd to answer virsh")
        log("libvirtd %s (pid %d)" % (run(["libvirtd", "--version"]).split()[-1], self.pid))

    @staticmethod
    def _read_pid(path):
        try:
            with open(path) as f:
                return f.read().strip() or None
        except OSError:
            return None

    @staticmethod
    def _stop(pid, what):
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            wait_for(lambda: pid not in pids_of(what), 30, "%s to stop" % what)
        except Failure:
            os.kill(pid, signal.SIGKILL)

    def stop(self):
        self._stop(self.pid, "libvirtd")
        self._stop(self.virtlogd_pid, "virtlogd")
        self.pid = self.virtlogd_pid = None

    def log_since(self, offset):
        with open(self.logfile, errors="replace") as f:
            f.seek(offset)
            return f.read()

    def log_size(self):
        try:
            return os.path.getsize(self.logfile)
        except OSError:
            return 0


def hook_output(text, op):
    """What the hook printed on stderr for its runs of @op, from libvirtd's log."""
    out = []
    for m in re.finditer(r"qemu\.d/hugeroom \S+ %s .*?stderr: '(.*?)'\n" % op, text, re.S):
        out.append(m.group(1))
    return "\n".join(out)


def domain_xml(name, qemu, commandline, metadata="", numatune=""):
    return """<domain type='qemu'>
  <name>%(name)s</name>
  <uuid>%(uuid)s</uuid>
  <metadata>%(metadata)s</metadata>
  <memory unit='MiB'>%(mem)d</memory>
  <vcpu>1</vcpu>
  %(numatune)s
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>%(qemu)s</emulator>
    <controller type='usb' model='none'/>
    <video><model type='none'/></video>
    <memballoon model='none'/>
  </devices>
%(commandline)s</domain>
""" % {"name": name, "uuid": uuid_mod.uuid4(), "metadata": metadata, "mem": MEM_MIB,
       "numatune": numatune, "qemu": qemu, "commandline": commandline}


def write_hook_conf(api_socket, state_dir, on_failure):
    with open(HOOK_CONF, "w") as f:
        f.write("[hook]\napi_socket=%s\nstate_dir=%s\non_failure=%s\ndeadline_s=20\n" %
                (api_socket, state_dir, on_failure))


def qemu_pid(name):
    path = "/run/libvirt/qemu/%s.pid" % name
    with open(path) as f:
        return int(f.read().strip())


def take_lock(path, how):
    """flock @path, saying so when someone else holds it (a big-memory run)."""
    f = open(path, "a")
    try:
        fcntl.flock(f, how | fcntl.LOCK_NB)
    except BlockingIOError:
        log("waiting for %s (held by another run)" % path)
        t0 = time.monotonic()
        fcntl.flock(f, how)
        log("got %s after %.0f s" % (path, time.monotonic() - t0))
    return f


TAP = hrvm.Tap()


def main():
    tap = TAP
    if os.geteuid() != 0:
        raise Failure("must run as root: it starts libvirtd and installs its hook")
    lock_mem = take_lock("/tmp/hr-bigmem.lock", fcntl.LOCK_SH)
    lock_lv = take_lock("/tmp/hr-libvirt.lock", fcntl.LOCK_EX)

    run(["bash", os.path.join(hrvm.SCRIPTS, "install-deps.sh")])
    qemu = hrvm.qemu_binary()
    build = hrvm.build_dir()
    hook_exe = os.path.join(build, "host", "hugeroom-hook")
    ctl = os.path.join(build, "host", "hugeroomctl")
    if not os.access(hook_exe, os.X_OK):
        raise Failure("%s is not built (meson compile -C %s)" % (hook_exe, build))

    work = hrvm.workdir("hr-libvirt-")
    # QEMU runs as libvirt-qemu: it must reach the VM socket.  The
    # directory is set-group-ID with QEMU's group, so the socket hugeroomd
    # binds there (mode 0660) is the group's: HOOK.md's set-up.
    qemu_gid = grp.getgrnam(QEMU_GROUP).gr_gid
    os.chmod(work, 0o711)
    rundir = os.path.join(work, "run")
    os.mkdir(rundir)
    os.chown(rundir, 0, qemu_gid)
    os.chmod(rundir, 0o2750)
    daemon = hrvm.Daemon(rundir)
    with open(daemon.conf, "w") as f:
        # hugeroomd lets in only QEMU's uid (HOOK.md: qemu_user)
        # and only the QEMU the domain's <emulator> names (qemu_executables)
        f.write("[hugeroomd]\nvm_socket=%s\napi_socket=%s\nstate_dir=%s\n"
                "status_interval_ms=1000\nqemu_user=%s\nqemu_executables=%s\n" %
                (daemon.vm_sock, daemon.api_sock, os.path.join(work, "state"), QEMU_USER,
                 os.path.realpath(qemu)))
    hook_state = os.path.join(work, "hook")
    commandline = run([ctl, "libvirt-xml", "hr-lv", "--vm-socket", daemon.vm_sock])

    saved = [Saved(HOOK), Saved(HOOK_CONF)]
    libvirtd = Libvirtd(work)
    names = []
    try:
        shutil.copy(hook_exe, HOOK)
        os.chmod(HOOK, 0o755)
        write_hook_conf(daemon.api_sock, hook_state, "open")
        libvirtd.start()
        daemon.start()

        name = "hr-lv-%d" % os.getpid()
        xml_path = os.path.join(work, name + ".xml")
        # donor and floor are for hugeroomd, which reads them from libvirtd itself
        with open(xml_path, "w") as f:
            f.write(domain_xml(name, qemu, commandline,
                               metadata="<hugeroom:policy xmlns:hugeroom="
                               "'https://hugeroom.org/xmlns/1'><hugeroom:donor>no"
                               "</hugeroom:donor><hugeroom:floor unit='MiB'>96"
                               "</hugeroom:floor></hugeroom:policy>"))
        virsh("define", xml_path)
        names.append(name)

        # 1. prepare -> ready -> start -> consumed; the domain runs
        off = libvirtd.log_size()
        p = virsh("start", name, check=False)
        tap.ok(p.returncode == 0, "virsh start with hugeroomd up", p.stderr)
        # the hook is the domain's UUID to the daemon
        dom_uuid = virsh("domuuid", name).stdout.strip()
        mine = [r for r in daemon.ctl_json("reservations")["reservations"]
                if r.get("requester") == "libvirt:" + dom_uuid]
        tap.ok(len(mine) == 1, "prepare made one reservation for libvirt:%s (%s)"
               % (dom_uuid, name), json.dumps(mine))
        r = daemon.ctl_json("reservation", mine[0]["id"]) if mine else {}
        host = {k: v for k, v in hrhost.meminfo_host().items()
                if k in ("MemFree", "HugePages_Total", "HugePages_Free")}
        tap.ok(r.get("state") == "consumed" and r.get("bytes") == MEM_MIB << 20,
               "it was %d MiB and is consumed" % MEM_MIB,
               # a failed one on a host another run has filled says so here
               "%s\nhost: %s" % (json.dumps(r)[:2000], host))
        text = libvirtd.log_since(off)
        prep, start = hook_output(text, "prepare"), hook_output(text, "start")
        tap.ok(re.search(r"reservation %s ready( in part)? after" % r.get("id"), prep),
               "the hook saw it ready at prepare begin", text[-3000:])
        tap.ok("reservation %s consumed" % r.get("id") in start,
               "and consumed it at start begin", text[-3000:])
        state = virsh("domstate", name).stdout.strip()
        tap.ok(state == "running", "the domain runs", state)
        pid = qemu_pid(name)
        uid = hrvm.proc_status(pid)["Uid"].split()[0]
        tap.ok(int(uid) == pwd.getpwnam(QEMU_USER).pw_uid,
               "QEMU runs as %s" % QEMU_USER, "uid %s" % uid)
        try:
            g = wait_for(lambda: next((g for g in daemon.ctl_json("guests")["guests"]
                                       if g.get("name") == name and g.get("connected")),
                                      None), 60, "the domain's device to connect")
        except Failure as e:
            g = None
            log(str(e))
        tap.ok(g is not None, "its device reached hugeroomd's VM socket as %s" % QEMU_USER,
               daemon.log())
        # hugeroomd looked the connected guest up in libvirtd (qemu:///system, its default)
        applied = "%s: libvirt domain %s (%s): policy donor=no floor=96 MiB applied" % (
            name, name, g["uuid"] if g else "?")
        def whole_log():
            with open(daemon.logfile) as f:
                return f.read()
        try:
            wait_for(lambda: applied in whole_log(), 30, "the daemon's domain lookup")
        except Failure as e:
            log(str(e))
        tap.ok(applied in whole_log(), "hugeroomd applied the domain's donor and floor",
               daemon.log())
        off = libvirtd.log_size()
        virsh("destroy", name)
        text = libvirtd.log_since(off)
        tap.ok("reservation %s released" % r.get("id") in hook_output(text, "release"),
               "virsh destroy ran release", text[-3000:])
        left = os.listdir(hook_state) if os.path.isdir(hook_state) else []
        tap.ok(not left, "no hook state left", str(left))

        # 2. daemon stopped, fail-open: starts, with a warning
        daemon.stop()
        off = libvirtd.log_size()
        p = virsh("start", name, check=False)
        tap.ok(p.returncode == 0, "daemon stopped, fail-open: virsh start succeeds", p.stderr)
        prep = hook_output(libvirtd.log_since(off), "prepare")
        tap.ok("warning: cannot reserve" in prep and "starts without prepared memory" in prep,
               "with the hook's warning in libvirtd's log", prep)
        state = virsh("domstate", name).stdout.strip()
        tap.ok(state == "running", "the domain runs", state)
        virsh("destroy", name)

        # 3. daemon stopped, fail-closed: refused with the hook's message
        write_hook_conf(daemon.api_sock, hook_state, "closed")
        p = virsh("start", name, check=False)
        tap.ok(p.returncode != 0, "daemon stopped, fail-closed: virsh start fails", p.stdout)
        tap.ok("refusing to start the domain" in p.stderr and
               "cannot connect to hugeroomd" in p.stderr,
               "virsh shows the hook's reason", p.stderr)
        for line in p.stderr.strip().splitlines():
            log("virsh: " + line)
        state = virsh("domstate", name).stdout.strip()
        tap.ok(state == "shut off", "the domain stays off", state)

        # 4. the domain's own policy, daemon up, configuration fail-open
        write_hook_conf(daemon.api_sock, hook_state, "open")
        daemon.start()
        policy_name = name + "-policy"
        with open(xml_path, "w") as f:
            f.write(domain_xml(policy_name, qemu, commandline,
                               metadata="<hugeroom:policy xmlns:hugeroom="
                               "'https://hugeroom.org/xmlns/1'><hugeroom:on-failure>closed"
                               "</hugeroom:on-failure></hugeroom:policy>",
                               numatune="<numatune><memory mode='strict' nodeset='1000'/>"
                               "</numatune>"))
        virsh("define", xml_path)
        names.append(policy_name)
        p = virsh("start", policy_name, check=False)
        tap.ok(p.returncode != 0 and "refusing to start the domain" in p.stderr and
               "the domain's <hugeroom:policy>" in p.stderr,
               "policy on-failure=closed: a reservation on node 1000 is refused", p.stderr)
        for line in p.stderr.strip().splitlines():
            log("virsh: " + line)
        before = len(daemon.ctl_json("reservations")["reservations"])
        virsh("undefine", policy_name)
        names.remove(policy_name)
        with open(xml_path, "w") as f:
            f.write(domain_xml(policy_name, qemu, commandline,
                               metadata="<hr:policy xmlns:hr='https://hugeroom.org/xmlns/1'>"
                               "<hr:prepare>no</hr:prepare></hr:policy>"))
        virsh("define", xml_path)
        names.append(policy_name)
        p = virsh("start", policy_name, check=False)
        after = len(daemon.ctl_json("reservations")["reservations"])
        tap.ok(p.returncode == 0 and after == before,
               "policy prepare=no: starts, no reservation", p.stderr)
        virsh("destroy", policy_name, check=False)
    finally:
        for n in names:
            virsh("destroy", n, check=False)
            virsh("undefine", n, check=False)
        libvirtd.stop()
        daemon.stop()
        for s in saved:
            s.restore()
    return tap.done()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        TAP.ok(False, "the libvirtd test ran to its end", str(e))
        sys.exit(TAP.done())
