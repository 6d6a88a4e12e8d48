"""Test harness for hugeroom's VM tests: real QEMU, real guest kernel,
real hugeroomd.

Everything a test needs is built or fetched by the project's own scripts
(scripts/build-qemu.sh, scripts/fetch-kernels.sh, ...), cached under
$HUGEROOM_CACHE.  Nothing here is faked: the guest runs the Debian kernel
with our module, QEMU carries our patch series and the daemon is the one
meson built.

The guest runs /test.sh (tests/vm/guest-agent.sh) which reads one command a
line from the serial console and answers between "@@BEGIN <n>" and
"@@END <n>" markers, so a test can drive the guest step by step.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO, "scripts")
CACHE = os.environ.get("HUGEROOM_CACHE", "/var/cache/hugeroom")


class Failure(Exception):
    pass


def log(msg):
    print("# " + msg, flush=True)


def run(cmd, **kw):
    """Run a command, return stdout; raise with its stderr on failure."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, **kw)
    if p.returncode != 0:
        raise Failure("%s failed (exit %d):\n%s" %
                      (" ".join(cmd), p.returncode, p.stderr[-4000:]))
    return p.stdout


def build_dir():
    """The meson build dir holding hugeroomd and hugeroomctl."""
    d = os.environ.get("HUGEROOM_BUILD")
    if d:
        return d
    return os.path.join(REPO, "build")


def qemu_binary():
    out = run(["bash", os.path.join(SCRIPTS, "build-qemu.sh")])
    path = out.strip().splitlines()[-1]
    if not os.access(path, os.X_OK):
        raise Failure("build-qemu.sh printed %r, not an executable" % path)
    return path


def kernels():
    """{kver: (vmlinuz, modules_root)} from scripts/fetch-kernels.sh."""
    out = run(["bash", os.path.join(SCRIPTS, "fetch-kernels.sh")])
    ks = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            ks[parts[0]] = (parts[1], parts[2])
    return ks


def pick_kernel(series):
    """The cached kernel whose version starts with series ("6.12", "6.1")."""
    for kver, paths in kernels().items():
        if kver.startswith(series + ".") or kver.startswith(series + "-"):
            return kver, paths
    raise Failure("no %s kernel in the cache; run scripts/fetch-kernels.sh" % series)


def build_module(kver):
    """Build guest-driver/ for kver; return the path of the .ko."""
    out = run(["bash", os.path.join(SCRIPTS, "build-module.sh"), kver])
    path = out.strip().splitlines()[-1]
    if not path.endswith(".ko") or not os.path.exists(path):
        raise Failure("build-module.sh printed %r, not a module" % path)
    return path


def build_initramfs(kver, ko, workdir):
    base = os.path.join(workdir, "base-%s.cpio.gz" % kver)
    run(["bash", os.path.join(SCRIPTS, "build-initramfs.sh"), kver, base, ko])
    overlay_src = os.path.join(workdir, "overlay")
    os.makedirs(overlay_src, exist_ok=True)
    shutil.copy(os.path.join(REPO, "tests", "vm", "guest-agent.sh"),
                os.path.join(overlay_src, "test.sh"))
    os.chmod(os.path.join(overlay_src, "test.sh"), 0o755)
    overlay = os.path.join(workdir, "overlay.cpio.gz")
    run(["bash", os.path.join(SCRIPTS, "make-overlay.sh"), overlay, overlay_src])
    initrd = os.path.join(workdir, "initrd-%s.cpio.gz" % kver)
    with open(initrd, "wb") as out:
        for part in (base, overlay):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out)
    return initrd


def wait_for(pred, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise Failure("timed out after %ds waiting for %s" % (timeout, what))


class Daemon:
    """hugeroomd on private sockets."""

    def __init__(self, workdir, interval_ms=0):
        self.workdir = workdir
        self.vm_sock = os.path.join(workdir, "vm.sock")
        self.api_sock = os.path.join(workdir, "api.sock")
        self.conf = os.path.join(workdir, "hugeroomd.conf")
        self.logfile = os.path.join(workdir, "hugeroomd.log")
        with open(self.conf, "w") as f:
            f.write("[hugeroomd]\nvm_socket=%s\napi_socket=%s\n"
                    "status_interval_ms=%d\n" %
                    (self.vm_sock, self.api_sock, interval_ms))
        self.proc = None

    def start(self):
        exe = os.path.join(build_dir(), "host", "hugeroomd")
        logf = open(self.logfile, "a")
        self.proc = subprocess.Popen([exe, "--config", self.conf, "--foreground", "--verbose"],
                                     stdout=logf, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.api_sock) or self.proc.poll() is not None,
                 10, "hugeroomd to open %s" % self.api_sock)
        if self.proc.poll() is not None:
            raise Failure("hugeroomd exited with %d; log:\n%s" %
                          (self.proc.returncode, self.log()))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        with open(self.logfile) as f:
            return f.read()[-4000:]

    def ctl(self, *args):
        exe = os.path.join(build_dir(), "host", "hugeroomctl")
        return run([exe, "--socket", self.api_sock] + list(args))

    def ctl_json(self, *args):
        return json.loads(self.ctl("--json", *args))


class Guest:
    """A QEMU guest with virtio-hugeroom, driven over its serial console."""

    def __init__(self, qemu, kver, vmlinuz, initrd, workdir, daemon=None,
                 mem="1G", name=None, extra=()):
        self.name = name or "hr-test-%s" % kver.split("-")[0]
        self.uuid = str(uuid.uuid4())
        self.workdir = workdir
        self.serial_sock = os.path.join(workdir, "serial-%s.sock" % self.name)
        self.serial_log = os.path.join(workdir, "serial-%s.log" % self.name)
        self.qmp_sock = os.path.join(workdir, "qmp-%s.sock" % self.name)
        dev = "virtio-hugeroom-pci,id=hr"
        args = [qemu, "-L", "/usr/share/qemu", "-L", "/usr/share/seabios",
                "-machine", "q35", "-accel", accel(), "-m", mem, "-smp", "2",
                "-name", self.name, "-uuid", self.uuid,
                "-display", "none", "-no-reboot",
                "-kernel", vmlinuz, "-initrd", initrd,
                "-append", "console=ttyS0 panic=-1 quiet loglevel=4",
                "-chardev", "socket,id=ser0,path=%s,server=on,wait=off,logfile=%s"
                % (self.serial_sock, self.serial_log),
                "-serial", "chardev:ser0",
                "-qmp", "unix:%s,server=on,wait=off" % self.qmp_sock]
        if daemon:
            args += ["-chardev", "socket,id=hr0,path=%s,reconnect-ms=1000" %
                     daemon.vm_sock]
            dev += ",chardev=hr0"
        args += ["-device", dev] + list(extra)
        self.args = args
        self.proc = None
        self.sock = None
        self.buf = ""
        self.round = 0

    def start(self):
        self.qemu_log = open(os.path.join(self.workdir, "qemu-%s.log" % self.name), "w")
        self.proc = subprocess.Popen(self.args, stdout=self.qemu_log,
                                     stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.serial_sock) or self.proc.poll() is not None,
                 20, "QEMU to create its serial socket")
        if self.proc.poll() is not None:
            raise Failure("QEMU exited with %d:\n%s" % (self.proc.returncode, self.qemu_output()))
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.serial_sock)
        self.sock.settimeout(0.2)
        self.expect("@@READY", 120)

    def qemu_output(self):
        with open(os.path.join(self.workdir, "qemu-%s.log" % self.name)) as f:
            return f.read()[-4000:]

    def console(self):
        try:
            with open(self.serial_log, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def _fill(self):
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return
        if data:
            self.buf += data.decode(errors="replace")

    def expect(self, pattern, timeout):
        """Wait for a regex on the console; return its match, consume up to it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            if self.proc.poll() is not None:
                raise Failure("QEMU exited (%d) while waiting for %r\nconsole:\n%s\nqemu:\n%s" %
                              (self.proc.returncode, pattern, self.console(), self.qemu_output()))
            if time.monotonic() > deadline:
                raise Failure("timed out waiting for %r on the guest console:\n%s" %
                              (pattern, self.console()))
            self._fill()

    def cmd(self, line, timeout=60):
        """Send one agent command, return the lines it printed."""
        self.round += 1
        n = self.round
        self.sock.sendall(("%d %s\n" % (n, line)).encode())
        m = self.expect(r"@@BEGIN %d\r?\n(.*?)@@END %d (\d+)" % (n, n), timeout)
        body, rc = m.group(1), int(m.group(2))
        if rc != 0:
            raise Failure("guest command %r failed (%d):\n%s" % (line, rc, body))
        return [l.rstrip("\r") for l in body.splitlines()]

    def qmp(self, command, **arguments):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(self.qmp_sock)
        f = s.makefile("rw")
        json.loads(f.readline())
        f.write(json.dumps({"execute": "qmp_capabilities"}) + "\n")
        f.flush()
        json.loads(f.readline())
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        f.write(json.dumps(msg) + "\n")
        f.flush()
        while True:
            r = json.loads(f.readline())
            if "return" in r or "error" in r:
                break
        s.close()
        if "error" in r:
            raise Failure("QMP %s: %s" % (command, r["error"]))
        return r["return"]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.sock:
            try:
                self.sock.sendall(b"0 poweroff\n")
            except OSError:
                pass
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.sock:
            self.sock.close()
            self.sock = None


def accel():
    """KVM where it really works, TCG otherwise (nested KVM does not here)."""
    if os.environ.get("HUGEROOM_ACCEL"):
        return os.environ["HUGEROOM_ACCEL"]
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
        return "kvm:tcg"
    except OSError:
        return "tcg"


class Tap:
    """Minimal TAP producer: meson's 'tap' protocol reads it."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag=""):
        self.n += 1
        if cond:
            print("ok %d - %s" % (self.n, name), flush=True)
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, name), flush=True)
            for line in str(diag).splitlines():
                print("# " + line, flush=True)
        return cond

    def done(self):
        print("1..%d" % self.n, flush=True)
        return 1 if self.failed else 0


def workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))
