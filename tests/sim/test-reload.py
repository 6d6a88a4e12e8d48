#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-only
"""hugeroomd.conf on the real daemon binary: unknown keys, SIGHUP reloads.

An unknown key stops the start with a message naming the key and the file;
SIGHUP applies what can change live (host_backing, seen in GET /v1/host;
api_tokens, read again even under the same name),
logs what takes a restart (reservation_tick_ms) and keeps the sockets; a broken file
on reload is logged and the daemon goes on with what it had. TAP output.
"""

import http.client
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "vm"))
from hrvm import Tap  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "api"))
from simharness import SimSetup, build_dir  # noqa: E402
from apiharness import READ_TOKEN, free_port, make_tls, tls_config  # noqa: E402

tap = Tap()
check = tap.ok




def wait_log(s, needle, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if needle in s.daemon_log():
            return True
        time.sleep(0.1)
    return False


def write_conf(s, body):
    with open(s.conf, "w") as f:
        f.write("[hugeroomd]\nstate_dir=%s\nhold_in_pool=false\nlibvirt_uri=\n"
                "qemu_executables=%s\n%s" % (s.dir, os.path.realpath(s.sim_bin), body))


def test_unknown_key(s):
    bad = os.path.join(s.dir, "bad.conf")
    with open(bad, "w") as f:
        f.write("[hugeroomd]\nstatus_interval_ms=1000\nrequest_timeout=5\n")
    p = subprocess.run([os.path.join(build_dir(), "host", "hugeroomd"), "-f", "-c", bad,
                        "--vm-socket", os.path.join(s.dir, "x-vm.sock"),
                        "--api-socket", os.path.join(s.dir, "x-api.sock")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 1 and "unknown key 'request_timeout' in [hugeroomd]" in p.stderr
          and bad in p.stderr, "an unknown key stops the start, naming the key and the file",
          p.stderr)


NEW_TOKEN = "rotated-token-0123456789abcdef"


def write_tokens(path, body, mode=0o600):
    tmp = path + ".new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, body.encode())
    os.close(fd)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def https_status(tls, port, token):
    ctx = ssl.create_default_context(cafile=os.path.join(tls, "ca.pem"))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    conn.request("GET", "/v1/guests", headers={"Authorization": "Bearer " + token})
    r = conn.getresponse()
    r.read()
    conn.close()
    return r.status


def reload_and_wait(s, needle):
    """SIGHUP, then the log's next line with @needle"""
    seen = s.daemon_log().count(needle)
    s.daemon.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        if s.daemon_log().count(needle) > seen:
            return True
        time.sleep(0.1)
    return False


def test_tokens():
    """api_tokens: read again on SIGHUP, a broken file keeps the tokens in use"""
    port = free_port()
    tls = tempfile.mkdtemp(prefix="hugeroom-reload-tls-")
    make_tls(tls)
    tokens = os.path.join(tls, "tokens")
    s = SimSetup(extra_config=tls_config(tls, port))
    try:
        check(https_status(tls, port, READ_TOKEN) == 200, "the read token of the start works",
              s.daemon_log())
        write_tokens(tokens, "read %s\n" % NEW_TOKEN)
        ok = reload_and_wait(s, "reload: api_tokens %s read again" % tokens)
        check(ok and https_status(tls, port, NEW_TOKEN) == 200
              and https_status(tls, port, READ_TOKEN) == 401,
              "SIGHUP reads the same api_tokens file again: the new token works, the "
              "removed one is refused", s.daemon_log())
        write_tokens(tokens, "read %s\n" % NEW_TOKEN, mode=0o644)
        ok = reload_and_wait(s, "keeping the tokens of %s" % tokens)
        check(ok and "readable by everyone" in s.daemon_log()
              and https_status(tls, port, NEW_TOKEN) == 200,
              "a token file readable by everyone is refused on reload; the tokens in use "
              "stay", s.daemon_log())
        other = os.path.join(tls, "other-tokens")
        write_tokens(other, "admin %s\n" % READ_TOKEN)
        with open(s.conf) as f:
            conf = f.read()
        with open(s.conf, "w") as f:
            f.write(conf.replace("api_tokens=%s\n" % tokens, "api_tokens=%s\n" % other))
        ok = reload_and_wait(s, "reload: applied api_tokens")
        check(ok and https_status(tls, port, READ_TOKEN) == 200
              and https_status(tls, port, NEW_TOKEN) == 401,
              "api_tokens naming another file applies at once", s.daemon_log())
    except Exception as e:  # a crash is a failure, with the daemon's log
        check(False, "unexpected %s: %s" % (type(e).__name__, e), s.daemon_log())
    finally:
        s.close()
        shutil.rmtree(tls, ignore_errors=True)


def main():
    s = SimSetup(extra_config="host_backing=thp")
    try:
        test_unknown_key(s)
        check(s.api("GET", "/v1/host")["backing"] == "thp", "started with host_backing=thp")
        # --vm-socket on the command line still wins over the file
        write_conf(s, "host_backing=small\nreservation_tick_ms=100\n"
                   "vm_socket=%s/elsewhere.sock\n" % s.dir)
        s.daemon.send_signal(signal.SIGHUP)
        ok = wait_log(s, "reload: applied host_backing")
        check(ok and s.api("GET", "/v1/host")["backing"] == "small",
              "SIGHUP applies host_backing at once", s.daemon_log())
        check(wait_log(s, "reload: changed, but applied only when hugeroomd restarts "
                       "(systemctl restart hugeroomd): reservation_tick_ms\n")
              and os.path.exists(s.vm_sock)
              and not os.path.exists(os.path.join(s.dir, "elsewhere.sock")),
              "reservation_tick_ms is logged as needing a restart; the VM socket stays",
              s.daemon_log())
        write_conf(s, "host_backing=thp\nno_such_key=1\n")
        s.daemon.send_signal(signal.SIGHUP)
        ok = wait_log(s, "reload: config %s: unknown key 'no_such_key' in [hugeroomd]" % s.conf)
        check(ok and wait_log(s, "keeping the configuration in use"),
              "a reload of a broken file names the key and the file, keeps the old one",
              s.daemon_log())
        check(s.daemon.poll() is None and s.api("GET", "/v1/host")["backing"] == "small",
              "the daemon runs on with what it had", s.daemon_log())
    except Exception as e:  # a crash is a failure, with the daemon's log
        check(False, "unexpected %s: %s" % (type(e).__name__, e), s.daemon_log())
    finally:
        s.close()
    test_tokens()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
