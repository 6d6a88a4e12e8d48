# SPDX-License-Identifier: GPL-2.0-only
"""What the API's test and benchmark share: a test CA, tokens, a free port."""

import os
import socket
import subprocess

ADMIN_TOKEN = "admin-token-0123456789abcdef"
READ_TOKEN = "read-token-0123456789abcdef"


def make_tls(d):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    def ssl(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, cwd=d)
    # P-256: a handshake costs the daemon far less than with RSA
    ssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=hugeroom test CA")
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    tokens = os.path.join(d, "tokens")  # never readable by others
    fd = os.open(tokens, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, ("# test tokens\nadmin %s\nread %s\n" % (ADMIN_TOKEN, READ_TOKEN)).encode())
    os.close(fd)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tls_config(d, port):
    """hugeroomd.conf keys serving HTTPS on 127.0.0.1:@port with make_tls(@d)'s files."""
    return ("api_listen=127.0.0.1:%d\napi_tls_cert=%s/server.pem\napi_tls_key=%s/server.key\n"
            "api_tokens=%s/tokens\n" % (port, d, d, d))
