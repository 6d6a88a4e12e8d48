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
import tempfile
import time
import uuid as uuid_mod

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO, "scripts")
CACHE = os.environ.get("HUGEROOM_CACHE", "/var/cache/hugeroom")


class Failure(Exception):
    pass


def log(msg):
    """A TAP comment: every line of @msg starts with '# '."""
    print("\n".join("# " + line for line in str(msg).splitlines() or [""]), flush=True)


def http(sock, method, path, body=None):
    """One HTTP/1.1 request on the daemon's API socket: (status, body bytes)."""
    data = json.dumps(body).encode() if body is not None else b""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(sock)
    s.sendall(("%s %s HTTP/1.1\r\nHost: hugeroomd\r\nContent-Type: "
               "application/json\r\nContent-Length: %d\r\nConnection: close"
               "\r\n\r\n" % (method, path, len(data))).encode() + data)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    head, _, answer = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), answer


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


_qemu_path = None


def qemu_binary():
    """QEMU from scripts/build-qemu.sh; $HUGEROOM_QEMU overrides it (for
    developing a test while the series rebuilds; never in the suite)."""
    global _qemu_path
    if os.environ.get("HUGEROOM_QEMU"):
        return os.environ["HUGEROOM_QEMU"]
    if _qemu_path is None:
        out = run(["bash", os.path.join(SCRIPTS, "build-qemu.sh")])
        path = out.strip().splitlines()[-1]
        if not os.access(path, os.X_OK):
            raise Failure("build-qemu.sh printed %r, not an executable" % path)
        _qemu_path = path
    return _qemu_path


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
    """The cached kernel whose version starts with series ("6.12", "6.1"),
    or for "sid" the newest Debian has (scripts/fetch-newest-kernel.sh,
    which makes the sid root it is built in; fails if it cannot)."""
    if series == "sid":
        out = run(["bash", os.path.join(SCRIPTS, "fetch-newest-kernel.sh")])
        parts = out.split()
        if len(parts) != 3:
            raise Failure("fetch-newest-kernel.sh printed %r" % out)
        return parts[0], (parts[1], parts[2])
    for kver, paths in kernels().items():
        if kver.startswith(series + ".") or kver.startswith(series + "-"):
            return kver, paths
    raise Failure("no %s kernel in the cache; run scripts/fetch-kernels.sh" % series)


def build_module(kver, test=False):
    """Build guest-driver/ for kver; return the path of the .ko.  test=True
    gives the test build, with the debugfs aids (pin_unmovable, inject,
    fault) that the module users load does not have."""
    out = run(["bash", os.path.join(SCRIPTS, "build-module.sh")] +
              (["--test"] if test else []) + [kver])
    path = out.strip().splitlines()[-1]
    if not path.endswith(".ko") or not os.path.exists(path):
        raise Failure("build-module.sh printed %r, not a module" % path)
    return path


def guest_tools():
    """Build tests/vm/guest-tools (static memfill, pressure, churn, speed,
    movepages); return their dir."""
    out = run(["bash", os.path.join(REPO, "tests", "vm", "guest-tools", "build.sh")])
    path = out.strip().splitlines()[-1]
    for t in GUEST_TOOLS:
        if not os.access(os.path.join(path, t), os.X_OK):
            raise Failure("guest-tools/build.sh printed %r, which has no %s" % (path, t))
    return path


GUEST_TOOLS = ("memfill", "pressure", "churn", "speed", "movepages")


def build_initramfs(kver, ko, workdir, tools=False, modules=None):
    """Base image with the module, plus an overlay with the agent as /test.sh
    and, with tools=True, the guest tools in /tools.  modules: the kernel
    modules /init loads (default virtio_pci), e.g. "virtio_pci virtio_blk"."""
    base = os.path.join(workdir, "base-%s.cpio.gz" % kver)
    env = dict(os.environ)
    if modules:
        env["HUGEROOM_INITRAMFS_MODULES"] = modules
    run(["bash", os.path.join(SCRIPTS, "build-initramfs.sh"), kver, base, ko],
        env=env)
    overlay_src = os.path.join(workdir, "overlay")
    os.makedirs(overlay_src, exist_ok=True)
    if tools:
        tdir = os.path.join(overlay_src, "tools")
        os.makedirs(tdir, exist_ok=True)
        src = guest_tools()
        for t in GUEST_TOOLS:
            shutil.copy(os.path.join(src, t), os.path.join(tdir, t))
            os.chmod(os.path.join(tdir, t), 0o755)
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


def proc_status(pid):
    """/proc/PID/status as {key: value in kB or the raw string}."""
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            v = v.strip()
            if v.endswith(" kB"):
                d[k] = int(v[:-3])
            else:
                d[k] = v
    return d


def rss_anon_kb(pid):
    return proc_status(pid)["RssAnon"]


def proc_stat(pid, tid=None):
    """The fields of /proc/PID/stat (of its thread @tid if given) after the
    command name (the first is field 3, the state), None if gone."""
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%s/stat" % (pid, tid)
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def proc_starttime(pid):
    """Field 22 of /proc/PID/stat (clock ticks since boot), None if gone."""
    fields = proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def proc_cpu_s(pid):
    """CPU seconds the process has used, all its threads (utime + stime,
    fields 14 and 15 of /proc/PID/stat), None if gone."""
    return _cpu_s(proc_stat(pid))


def _cpu_s(fields):
    """utime + stime (fields 14 and 15 of a stat) in seconds, None for None."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else None


def proc_vcpu_cpu_s(pid):
    """CPU seconds the vCPU threads of QEMU @pid have used (threads named
    "CPU n/TCG" or "CPU n/KVM"), None if gone: the guest's own CPU, without
    QEMU's main loop, I/O threads and discards."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    vcpus = []
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                if not f.read().startswith("CPU "):
                    continue
        except OSError:
            continue
        cpu = _cpu_s(proc_stat(pid, tid))
        if cpu is not None:
            vcpus.append(cpu)
    return sum(vcpus) if vcpus else None


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().decode(errors="replace").rstrip("\0").split("\0")
    except OSError:
        return []


# The QEMUs the harness started, one JSON file each, removed when the
# guest stops.  boot-guest.sh starts QEMU under setsid, so a test killed
# from outside (a meson timeout, a killed run) leaves it running,
# reparented to init; the next harness start finds the file of an owner
# that is gone and ends that QEMU, and only that one: the same pid, the
# same start time and its own serial log path on its command line.
PIDS_DIR = os.path.join(CACHE, "vm-pids")
_swept = False


def _pidfile(pid):
    return os.path.join(PIDS_DIR, "%d-%d.json" % (os.getpid(), pid))


def record_qemu(pid, marker):
    os.makedirs(PIDS_DIR, exist_ok=True)
    entry = {"pid": pid, "start": proc_starttime(pid), "marker": marker,
             "owner": os.getpid(), "owner_start": proc_starttime(os.getpid())}
    tmp = _pidfile(pid) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(entry, f)
    os.rename(tmp, _pidfile(pid))


def forget_qemu(pid):
    try:
        os.unlink(_pidfile(pid))
    except FileNotFoundError:
        pass


def sweep_stale_qemus():
    """End the QEMUs of harness runs that are gone; returns their pids."""
    killed = []
    try:
        names = os.listdir(PIDS_DIR)
    except FileNotFoundError:
        return killed
    for name in names:
        path = os.path.join(PIDS_DIR, name)
        try:
            with open(path) as f:
                e = json.load(f)
            pid, owner = int(e["pid"]), int(e["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if e.get("owner_start") is not None and \
                proc_starttime(owner) == e["owner_start"]:
            continue  # its harness still runs (another test, in parallel)
        if e.get("start") is not None and proc_starttime(pid) == e["start"] and \
                e.get("marker") and any(e["marker"] in a for a in proc_cmdline(pid)):
            log("ending QEMU pid %d left by harness pid %d, which is gone" % (pid, owner))
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return killed


def _sweep_once():
    global _swept
    if not _swept:
        _swept = True
        sweep_stale_qemus()


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the harness dies."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


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
            # its reservations and ledger too: never the shared /var/lib/hugeroom;
            # the QEMU the tests boot, by its path (qemu_executables takes no pattern)
            f.write("[hugeroomd]\nvm_socket=%s\napi_socket=%s\nstate_dir=%s\n"
                    "status_interval_ms=%d\nqemu_executables=%s\n" %
                    (self.vm_sock, self.api_sock, os.path.join(workdir, "state"), interval_ms,
                     os.path.realpath(qemu_binary())))
        self.proc = None

    def start(self):
        exe = os.path.join(build_dir(), "host", "hugeroomd")
        logf = open(self.logfile, "a")
        # dies with the harness: a killed test leaves no daemon behind
        self.proc = subprocess.Popen([exe, "--config", self.conf, "--foreground", "--verbose"],
                                     stdout=logf, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent)
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
        try:
            with open(self.logfile) as f:
                return f.read()[-4000:]
        except OSError as e:
            return "(no log: %s)" % e

    def ctl(self, *args):
        exe = os.path.join(build_dir(), "host", "hugeroomctl")
        return run([exe, "--socket", self.api_sock] + list(args))

    def ctl_json(self, *args):
        return json.loads(self.ctl("--json", *args))


class Guest:
    """A QEMU guest with virtio-hugeroom, driven over its serial console.

    Booted by scripts/boot-guest.sh, the one place that knows how to start
    a test guest (accelerator probe, firmware paths, -nodefaults)."""

    def __init__(self, qemu, kver, vmlinuz, initrd, workdir, daemon=None,
                 mem="1G", name=None, extra=(), uuid=None, tag="", hugeroom=True,
                 append=""):
        # A migration destination has the source's name and UUID; tag keeps
        # its sockets and logs apart.
        self.name = name or "hr-test-%s" % kver.split("-")[0]
        self.uuid = uuid or str(uuid_mod.uuid4())
        self.workdir = workdir
        base = self.name + ("-" + tag if tag else "")
        self.serial_sock = os.path.join(workdir, "serial-%s.sock" % base)
        self.serial_log = os.path.join(workdir, "serial-%s.log" % base)
        self.qmp_sock = os.path.join(workdir, "qmp-%s.sock" % base)
        # hugeroom=False: no virtio-hugeroom device (a baseline guest that
        # only the benchmarks' other cases run)
        # the tests' donors run with -mem-prealloc, whose RAM the device
        # refuses to discard unless told (the qtests cover the refusal)
        dev = "virtio-hugeroom-pci,id=hr,discard-preallocated=on"
        args = ["bash", os.path.join(SCRIPTS, "boot-guest.sh"),
                "-q", qemu, "-k", kver, "-i", initrd, "-m", mem,
                "-n", self.name, "-l", self.serial_log,
                "-S", self.serial_sock, "-Q", self.qmp_sock]
        if append:
            args += ["-a", append]
        args += ["--", "-uuid", self.uuid]
        if daemon and hugeroom:
            args += ["-chardev", "socket,id=hr0,path=%s,reconnect-ms=1000" %
                     daemon.vm_sock]
            dev += ",chardev=hr0"
        args += (["-device", dev] if hugeroom else []) + list(extra)
        self.args = args
        self.pid = None
        self.sock = None
        self.buf = ""
        self.round = 0

    def start(self, wait_ready=True):
        """Boot; wait_ready=False for a migration destination (-incoming),
        whose agent is already past @@READY."""
        _sweep_once()
        # not beside a test that uses all of the host's memory
        import hrhost  # noqa: E402  (it imports this module)
        hrhost.bigmem_lock(exclusive=False)
        # A QEMU killed earlier under the same name leaves its socket files:
        # connecting to those is refused, so they must not count as the new
        # QEMU's.
        for path in (self.serial_sock, self.qmp_sock):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        out = run(self.args)
        self.pid = int(out.strip().splitlines()[-1])
        record_qemu(self.pid, self.serial_log)
        wait_for(lambda: os.path.exists(self.serial_sock) or not self.alive(),
                 20, "QEMU to create its serial socket")
        if not self.alive():
            raise Failure("QEMU exited at once:\n%s" % self.qemu_output())
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.serial_sock)
        self.sock.settimeout(0.2)
        if wait_ready:
            self.expect("@@READY", 180)

    def qemu_output(self):
        try:
            with open(self.serial_log + ".qemu", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

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
        rx = re.compile(pattern, re.S)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            if not self.alive():
                raise Failure("QEMU exited while waiting for %r\nconsole:\n%s\nqemu:\n%s" %
                              (pattern, self.console(), self.qemu_output()))
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

    def fault_inject(self, knob, value):
        """Set a test build's fault: "block_delay_ms" (sleep before each
        block of an EVACUATE) or "sweep_delay_ms" (before each sweep)."""
        self.cmd("sh echo '%s %d' > /sys/kernel/debug/virtio_hugeroom/fault_inject"
                 % (knob, value))

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

    def meminfo(self):
        """The guest's /proc/meminfo, kB values."""
        d = {}
        for line in self.cmd("sh cat /proc/meminfo"):
            k, _, v = line.partition(":")
            f = v.split()
            if f:
                d[k] = int(f[0])
        return d

    def pcp_kb(self):
        """The free pages on the guest's per-cpu lists (/proc/zoneinfo's
        pagesets) in kB: MemFree leaves them out, and they refill from the
        buddy lists whenever the PCP policy changes (a donor's is tuned for
        a donation, then restored)."""
        pcp, in_pagesets = 0, False
        for line in self.cmd("sh cat /proc/zoneinfo"):
            f = line.split()
            if f[:1] == ["pagesets"]:
                in_pagesets = True
            elif f[:1] == ["Node"]:
                in_pagesets = False
            elif in_pagesets and len(f) == 2 and f[0] == "count:":
                pcp += int(f[1])
        return 4 * pcp

    def free_kb(self):
        """The guest's free memory in kB: MemFree and the per-cpu lists."""
        return self.meminfo()["MemFree"] + self.pcp_kb()

    def vmstat(self):
        d = {}
        for line in self.cmd("sh cat /proc/vmstat"):
            f = line.split()
            if len(f) == 2:
                d[f[0]] = int(f[1])
        return d

    def debugfs(self, name):
        """Lines of /sys/kernel/debug/virtio_hugeroom/NAME."""
        return self.cmd("sh cat /sys/kernel/debug/virtio_hugeroom/%s" % name)

    def driver_status(self):
        """debugfs status as {key: [its values]}, one key a line."""
        return {f[0]: f[1:] for f in (x.split() for x in self.debugfs("status")) if f}

    def fresh_status(self):
        """Lines of debugfs status after a whole pageblock sweep that started
        now.  Without a report period the driver sweeps only a slice of
        guest memory per report, and a report carries the histogram and
        candidates of the last complete sweep: ask for reports until
        scan_sweeps has moved by two."""
        d = "/sys/kernel/debug/virtio_hugeroom"
        s0 = int(self.driver_status().get("scan_sweeps", ["0"])[0])
        # A subshell: "exit" in the agent's own eval would end the agent.
        self.cmd("sh (i=0; while [ $i -lt 400 ]; do echo 1 >%s/report_now || exit 1; "
                 "s=$(sed -n 's/^scan_sweeps //p' %s/status); [ $s -ge %d ] && exit 0; "
                 "i=$((i+1)); done; exit 1)" % (d, d, s0 + 2), timeout=300)
        return self.debugfs("status")

    def alive(self):
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        # A zombie waiting for its (gone) parent counts as dead.
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                return f.read().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    def stop(self):
        if self.sock:
            try:
                self.sock.sendall(b"0 poweroff\n")
            except OSError:
                pass
        if self.pid:
            try:
                wait_for(lambda: not self.alive(), 15, "the guest to power off")
            except Failure:
                os.kill(self.pid, signal.SIGKILL)
                wait_for(lambda: not self.alive(), 10, "QEMU to die")
            forget_qemu(self.pid)
        if self.sock:
            self.sock.close()
            self.sock = None


def accel():
    """What boot-guest.sh picks: KVM only where a probe boot worked."""
    if os.environ.get("HUGEROOM_ACCEL"):
        return os.environ["HUGEROOM_ACCEL"]
    try:
        probes = os.listdir(os.path.join(CACHE, "accel"))
    except OSError:
        return "auto"
    return "kvm" if any(open(os.path.join(CACHE, "accel", p)).read().strip() == "kvm"
                        for p in probes) else "tcg"


class Tap:
    """Minimal TAP producer: meson's 'tap' protocol reads it."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag="", todo=None):
        """todo: the reason a failure is known and not fixed yet (TAP
        "# TODO": meson counts the failure as expected, and a pass as an
        unexpected pass, which fails the test, so the mark cannot outlive
        the fix)."""
        self.n += 1
        mark = " # TODO %s" % todo if todo else ""
        if cond:
            print("ok %d - %s%s" % (self.n, name, mark), flush=True)
        else:
            if not todo:
                self.failed += 1
            print("not ok %d - %s%s" % (self.n, name, mark), flush=True)
            if str(diag):
                log(diag)
        return cond

    def skip(self, name, why):
        """A check with nothing to look at in this run, saying why."""
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, name, why), flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        return 1 if self.failed else 0


def stop_all(*procs):
    """Stop each of the guests and daemons given that was started (None skipped)."""
    for p in procs:
        if p:
            p.stop()


def workdir(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))


# -- the host's hugetlb pool, as the daemon holds it ------------------------

POOL = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"
# pages another user of this host's kernel may add or take while a test
# waits (a shared kernel here grew the pool by 2 pages every 30 s)
POOL_DRIFT = 4


def pool_pages():
    """node 0's 2 MiB hugetlb pool, host-wide (anyone's pages)"""
    with open(POOL) as f:
        return int(f.read())


def daemon_pool_blocks(daemon):
    """the pool pages the daemon says it holds: its reservations' (a
    standing reserve's parts are reservations too)"""
    return sum(r.get("pool_blocks", 0)
               for r in daemon.ctl_json("reservations")["reservations"])


def release_pool(daemon, release):
    """Call @release() (which releases the daemon's reservations or turns
    its reserve off), then wait until the daemon holds no pool pages and
    the host's pool fell by what it held. The host's count is judged only
    over the release, against what the daemon said it held, so that what
    others do to the pool meanwhile is not charged to it. Returns (ok,
    message)."""
    ours, before = daemon_pool_blocks(daemon), pool_pages()
    release()
    try:
        wait_for(lambda: daemon_pool_blocks(daemon) == 0
                 and before - pool_pages() >= ours - POOL_DRIFT, 30,
                 "the daemon's pool pages back to the host", interval=0.5)
    except Failure:
        pass
    after, left = pool_pages(), daemon_pool_blocks(daemon)
    ok = left == 0 and abs((before - after) - ours) <= POOL_DRIFT
    return ok, ("the daemon holds no pool pages (%d left), the host's pool fell by the %d it "
                "held (%d -> %d)" % (left, ours, before, after))
