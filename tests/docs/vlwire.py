"""vlwire.py - the viewlowerd frame protocol over a Unix socket, standard library only
(docs/protocol.md, "Frames"): one request per connection, the raw response back."""
import json
import sys
import socket
import struct

sys.setrecursionlimit(20000)  # responses may nest 1000 levels (protocol.md)


def frame(body: bytes, payload: bytes = b"", magic: bytes = b"VLW1") -> bytes:
    return magic + struct.pack(">IQ", len(body), len(payload)) + body + payload


def _read_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return bytes(buf)
        buf += chunk
    return bytes(buf)


def exchange(path, body: bytes, payload: bytes = b"", magic: bytes = b"VLW1", timeout=60,
             close_wait=0.5):
    """Sends one frame; returns (response JSON or None, response payload, closed after it).
    Keeps reading while it writes, so an early error answer is not lost to EPIPE. Whether the
    daemon closed the connection is judged by waiting close_wait seconds for EOF (long when a
    close is expected, so a loaded machine cannot make it look open)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    data = frame(body, payload, magic)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon answered and closed before reading everything: read its answer
    head = _read_exact(s, 16)
    if len(head) < 16:
        s.close()
        return None, b"", True
    assert head[:4] == b"VLW1", head
    jlen, plen = struct.unpack(">IQ", head[4:])
    resp = json.loads(_read_exact(s, jlen))
    out = _read_exact(s, plen) if plen else b""
    # closed after the response? a closed socket reads EOF at once; an open one times out
    s.settimeout(close_wait)
    try:
        closed = s.recv(1) == b""
    except socket.timeout:
        closed = False
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    s.close()
    return resp, out, closed
