"""A minimal NATS client on the Python standard library alone.

It speaks just enough of the NATS client protocol for a request-reply
worker: CONNECT (with headers and no_responders on), PING/PONG, SUB with a
queue group, MSG and HMSG (messages with headers), PUB and HPUB. No TLS, no
reconnect, no JetStream: a worker that loses its connection exits and is
restarted, and the node retries the record it held.

Use nats-py (https://github.com/nats-io/nats.py) where PyPI is reachable;
this exists so the reference worker runs with python3 and nothing else.
"""

import json
import socket
import urllib.parse

MAX_CONTROL_LINE = 4096


class ProtocolError(Exception):
    """The server answered -ERR or something this client does not read."""


class Msg:
    """A message received: subject, reply subject, headers (dict) and data."""

    def __init__(self, subject, reply, headers, data):
        self.subject = subject
        self.reply = reply
        self.headers = headers
        self.data = data


class Client:
    """One connection. Not thread-safe: use it from one thread."""

    def __init__(self, url="nats://127.0.0.1:4222", name="nats_min", timeout=10.0):
        u = urllib.parse.urlparse(url if "://" in url else "nats://" + url)
        if u.scheme not in ("nats", ""):
            raise ValueError(f"unsupported URL scheme {u.scheme!r}: want nats:// (no TLS here)")
        self._sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222), timeout=timeout)
        self._sock.settimeout(None)
        self._rd = self._sock.makefile("rb")
        self._sid = 0
        self.max_payload = 1 << 20
        line = self._line()
        if not line.startswith(b"INFO "):
            raise ProtocolError(f"expected INFO, got {line[:80]!r}")
        info = json.loads(line[5:])
        self.max_payload = info.get("max_payload", self.max_payload)
        opts = {
            "verbose": False, "pedantic": False, "headers": True, "no_responders": True,
            "protocol": 1, "lang": "python-stdlib", "version": "0.1", "name": name,
        }
        if u.username and u.password is not None:
            opts["user"], opts["pass"] = urllib.parse.unquote(u.username), urllib.parse.unquote(u.password)
        elif u.username:
            opts["auth_token"] = urllib.parse.unquote(u.username)
        self._write(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise ProtocolError(line.decode(errors="replace"))
            # INFO updates and +OK are fine here.

    def _write(self, data):
        self._sock.sendall(data)

    def _line(self):
        line = self._rd.readline(MAX_CONTROL_LINE + 2)
        if not line:
            raise ConnectionError("connection closed by the server")
        if not line.endswith(b"\r\n"):
            raise ProtocolError(f"control line longer than {MAX_CONTROL_LINE} bytes")
        return line[:-2]

    def _read(self, n):
        data = self._rd.read(n + 2)
        if len(data) != n + 2:
            raise ConnectionError("connection closed by the server")
        return data[:-2]

    def subscribe(self, subject, queue=""):
        """Subscribes to subject (in queue group queue if given); returns the sid."""
        self._sid += 1
        q = f" {queue}" if queue else ""
        self._write(f"SUB {subject}{q} {self._sid}\r\n".encode())
        return self._sid

    def publish(self, subject, data=b"", headers=None):
        """Publishes data on subject, with headers (a dict) if given."""
        if not headers:
            self._write(f"PUB {subject} {len(data)}\r\n".encode() + data + b"\r\n")
            return
        head = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        hb = head.encode()
        self._write(f"HPUB {subject} {len(hb)} {len(hb) + len(data)}\r\n".encode() + hb + data + b"\r\n")

    def next_msg(self):
        """Blocks until the next message and returns it, answering PINGs."""
        while True:
            line = self._line()
            op, _, rest = line.partition(b" ")
            op = op.upper()
            if op == b"PING":
                self._write(b"PONG\r\n")
            elif op in (b"PONG", b"+OK", b"INFO"):
                continue
            elif op == b"-ERR":
                raise ProtocolError(line.decode(errors="replace"))
            elif op == b"MSG":
                parts = rest.decode().split(" ")
                subject, reply = parts[0], parts[2] if len(parts) == 4 else ""
                return Msg(subject, reply, {}, self._read(int(parts[-1])))
            elif op == b"HMSG":
                parts = rest.decode().split(" ")
                subject, reply = parts[0], parts[2] if len(parts) == 5 else ""
                hlen, total = int(parts[-2]), int(parts[-1])
                raw = self._read(total)
                return Msg(subject, reply, _headers(raw[:hlen]), raw[hlen:])
            else:
                raise ProtocolError(f"unexpected {line[:80]!r}")

    def close(self):
        try:
            self._sock.close()
        except OSError:
            pass


def _headers(raw):
    """Parses a NATS/1.0 header block into a dict (last value wins)."""
    lines = raw.decode(errors="replace").split("\r\n")
    out = {}
    status = lines[0][len("NATS/1.0"):].strip()
    if status:
        out["Status"] = status
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            out[k.strip()] = v.strip()
    return out
