"""viewlower.Client: the wire protocol (docs/protocol.md) spoken directly over a Unix stream socket.

A frame is a 16-byte header (`VLW1`, JSON length as u32 big-endian, payload length as u64
big-endian), the JSON-RPC 2.0 text, then the binary payload. Tensors (torch tensors or numpy
arrays) anywhere in a request's params travel as `blob` ranges of the payload, in their physical
(dim order) byte order, never base64; tensors in results come back as arrays of the same kind.
Requests may be pipelined: `send` returns an id, `receive` waits for that id's response and
keeps any other response to a request still awaited that arrives first. A response whose id
names no request awaited on this connection is dropped (memory stays bounded by the requests
in flight); anything that breaks the protocol (bad JSON, a non-integer id, a malformed error
or tensor) raises TransportError.
"""
from __future__ import annotations

import json
import math
import os
import select
import socket as _socket
import struct
import sys
import time
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import layout
from .errors import CallTimeout, RemoteError, TransportError, ViewlowerError

MAGIC = b"VLW1"
HEADER = struct.Struct(">4sIQ")
#: Largest response accepted (the daemon's default --max-frame-bytes, 256 MiB, times four).
MAX_RESPONSE_BYTES = 1 << 30
SOCKET_PATH_MAX = 107


class RawJSON:
    """JSON text inserted into a request as it is (a graph read from a file keeps every byte)."""

    def __init__(self, text: str):
        self.text = text


SYSTEM_SOCKET = "/run/viewlower/viewlower.sock"  # viewlowerd.socket's ListenStream=


def default_socket() -> str:
    """The socket viewlowerctl would use: $VIEWLOWER_SOCKET, else /run/viewlower/viewlower.sock
    as root, else $XDG_RUNTIME_DIR/viewlower.sock."""
    env = os.environ.get("VIEWLOWER_SOCKET")
    if env:
        return env
    if os.geteuid() == 0:
        return SYSTEM_SOCKET
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return xdg + "/viewlower.sock"
    raise TransportError("no socket path: none given, VIEWLOWER_SOCKET and XDG_RUNTIME_DIR are "
                         "unset, and not running as root")


# ---- JSON text with exact numbers --------------------------------------------------------

def dumps(obj: Any) -> str:
    """JSON text in which integers keep every digit and floats are float tokens (`2.0`).

    A non-finite float is refused (docs/format.md §2 spells it {"float": "inf"}); RawJSON is
    inserted."""
    if isinstance(obj, RawJSON):
        return obj.text
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if obj is None:
        return "null"
    if isinstance(obj, int):
        return str(int(obj))
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"non-finite float {obj!r} has no JSON token")
        return repr(obj)
    if isinstance(obj, str):
        return json.dumps(obj, ensure_ascii=False)
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dumps(v)
                              for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


# ---- tensors <-> blob ----------------------------------------------------------------------

def _is_torch(x: Any) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _is_numpy(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _torch_dtype_name(dt: Any) -> str:
    name = str(dt).replace("torch.", "")
    if name not in layout.DTYPE_SIZES:
        raise ViewlowerError(f"dtype {name} has no viewlower name", kind="invalid_tensor")
    return name


def _numpy_dtype_name(dt: Any) -> str:
    name = "bool" if dt.kind == "b" else dt.name
    if name not in layout.DTYPE_SIZES or name == "bfloat16":
        raise ViewlowerError(f"dtype {dt} has no viewlower name", kind="invalid_tensor")
    if dt.byteorder == ">":
        raise ViewlowerError("big-endian arrays are not supported (blobs are little-endian)",
                             kind="invalid_tensor")
    return name


def encode_tensor(x: Any) -> Tuple[dict, memoryview]:
    """(spec, physical bytes) of a torch tensor or numpy array with dense strides."""
    if _is_torch(x):
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        shape, strides, name = list(x.shape), list(x.stride()), _torch_dtype_name(x.dtype)
    elif _is_numpy(x):
        name = _numpy_dtype_name(x.dtype)
        shape = list(x.shape)
        if any(s % x.itemsize for s in x.strides):
            raise ViewlowerError("array strides are not whole elements", kind="invalid_tensor")
        strides = [s // x.itemsize for s in x.strides]
    else:
        raise TypeError(f"not a tensor: {type(x).__name__}")
    order = layout.dim_order_from_strides(shape, strides)
    if order is None:
        # Not dense (a slice or an expand): send it in the default order, as a copy would be.
        order = list(range(len(shape)))
    if _is_torch(x):
        phys = x.permute(order).contiguous().reshape(-1)
        data = phys.view(__import__("torch").uint8).numpy()
    else:
        import numpy as np
        data = np.ascontiguousarray(x.transpose(order)).reshape(-1).view(np.uint8)
    return {"dtype": name, "shape": shape, "dim_order": order}, memoryview(data).cast("B")


#: What `tensors=` may say.
TENSOR_KINDS = ("auto", "torch", "numpy", "raw")


def _input_kind(obj: Any, depth: int = 0) -> Optional[str]:
    """"torch" or "numpy": the kind of the first tensor in a request's params, else None."""
    if _is_torch(obj):
        return "torch"
    if _is_numpy(obj):
        return "numpy"
    if depth > 64:
        return None
    if isinstance(obj, dict):
        obj = obj.values()
    elif not isinstance(obj, (list, tuple)):
        return None
    for v in obj:
        k = _input_kind(v, depth + 1)
        if k is not None:
            return k
    return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259)")


def decode_tensor(spec: dict, payload: memoryview, kind: str) -> Any:
    """The tensor a result's {"dtype","shape","dim_order","blob"} names, as `kind`
    ("torch" or "numpy"): a tensor whose strides are the declared dim order's."""
    if spec.get("dtype") not in layout.DTYPE_SIZES:
        raise TransportError(f"malformed tensor in the response: dtype {spec.get('dtype')!r:.40}")
    blob = spec["blob"]
    start, n = int(blob["offset"]), int(blob["nbytes"])
    if start < 0 or n < 0 or start + n > len(payload):
        raise TransportError(f"blob [{start}, {start + n}) is outside the {len(payload)}-byte payload")
    raw = bytearray(payload[start:start + n])  # the one copy: the result owns its bytes
    shape, order = list(spec["shape"]), layout.spec_dim_order(spec)
    phys = [shape[d] for d in order]
    inverse = [order.index(d) for d in range(len(order))]
    if kind == "torch":
        import torch
        dt = getattr(torch, spec["dtype"])
        flat = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        return flat.view(dt).reshape(phys).permute(inverse)
    import numpy as np
    dt = np.dtype("bool" if spec["dtype"] == "bool" else spec["dtype"]).newbyteorder("<")
    return np.frombuffer(raw, dtype=dt).reshape(phys).transpose(inverse)


class _Payload:
    """Collects blobs of one request."""

    def __init__(self) -> None:
        self.parts: List[memoryview] = []
        self.size = 0

    def add(self, x: Any) -> dict:
        spec, data = encode_tensor(x)
        spec["blob"] = {"offset": self.size, "nbytes": len(data)}
        self.parts.append(data)
        self.size += len(data)
        return spec

    def lift(self, obj: Any) -> Any:
        """params with every tensor replaced by its blob spec."""
        if _is_torch(obj) or _is_numpy(obj):
            return self.add(obj)
        if isinstance(obj, dict):
            return {k: self.lift(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.lift(v) for v in obj]
        return obj


def _lower_tensors(obj: Any, payload: memoryview, kind: str) -> Any:
    if isinstance(obj, dict):
        if "blob" in obj and "dtype" in obj and "shape" in obj and kind != "raw":
            return decode_tensor(obj, payload, kind)
        return {k: _lower_tensors(v, payload, kind) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_lower_tensors(v, payload, kind) for v in obj]
    return obj


# ---- the client -------------------------------------------------------------------------

def _options(remove_view_copy: Optional[bool], policy: Optional[str], fold: Optional[bool],
             extra: Dict[str, Any]) -> dict:
    opts = dict(extra)
    if remove_view_copy is not None:
        opts["remove_view_copy"] = bool(remove_view_copy)
    if policy is not None:
        opts["policy"] = policy
    if fold is not None:
        opts["fold"] = bool(fold)
    return opts


class Client:
    """A blocking connection to viewlowerd.

    `socket` defaults to viewlowerctl's lookup (default_socket; for a user who is not root and
    named no socket, /run/viewlower/viewlower.sock after the per-user one). `timeout` (seconds) bounds each
    call, from sending its request to receiving its response; None waits forever. `tensors` says
    how tensors in results are returned: "torch", "numpy", "raw" (the blob specs as they came),
    or "auto": the kind of the request's own tensors (numpy in, numpy out; torch in, torch out),
    and for a request without tensors torch when the torch module is loaded, else numpy. Any
    other value is refused (ValueError). Every method raises RemoteError (code, message, kind, path) when the
    service answers an error, TransportError when the daemon cannot be reached or breaks the
    protocol, and CallTimeout when the deadline passes. A connection the daemon closed while idle
    (its --idle-timeout-ms) is opened again by the next call, when no response is awaited on it.
    Use it as a context manager or call close().
    """

    def __init__(self, socket: Optional[str] = None, timeout: Optional[float] = 120.0,
                 tensors: str = "auto"):
        if tensors not in TENSOR_KINDS:
            raise ValueError(f"tensors={tensors!r}: must be one of "
                             + ", ".join(repr(k) for k in TENSOR_KINDS))
        if socket or os.environ.get("VIEWLOWER_SOCKET") or os.geteuid() == 0:
            paths = [socket if socket else default_socket()]
        else:  # as viewlowerctl: the per-user socket, then the system one of viewlowerd.socket
            xdg = os.environ.get("XDG_RUNTIME_DIR")
            paths = ([xdg + "/viewlower.sock"] if xdg else []) + [SYSTEM_SOCKET]
        self.timeout = timeout
        self.tensors = tensors
        self._next_id = 1
        #: requests sent and not yet received: id -> the tensor kind their results come back as
        self._pending: Dict[int, str] = {}
        self._done: Dict[int, Tuple[dict, memoryview]] = {}
        #: responses dropped because their id named no request awaited here
        self.dropped = 0
        self._buf = bytearray()
        failures: List[str] = []
        for path in paths:
            try:  # a timeout is not a reason to try another daemon (CallTimeout propagates)
                self._sock = self._connect(path, timeout)
                self.path = path
                return
            except CallTimeout:
                raise
            except TransportError as e:
                failures.append(str(e))
        raise TransportError("; ".join(failures))

    @staticmethod
    def _connect(path: str, timeout: Optional[float]) -> _socket.socket:
        if len(path.encode()) > SOCKET_PATH_MAX:
            raise TransportError(f"socket path is {len(path.encode())} bytes, longer than the "
                                 f"{SOCKET_PATH_MAX} a Unix socket allows")
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except _socket.timeout:
            sock.close()
            raise CallTimeout(f"{path}: connect timed out")
        except OSError as e:
            sock.close()
            raise TransportError(f"{path}: {e.strerror or e}")
        return sock

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    # -- framing --

    def send(self, method: str, params: Optional[dict] = None) -> int:
        """Sends one request without waiting; returns its id (pass it to receive)."""
        payload = _Payload()
        lifted = payload.lift(params if params is not None else {})
        rid = self._next_id
        self._next_id += 1
        text = ('{"jsonrpc":"2.0","id":%d,"method":%s,"params":%s}'
                % (rid, json.dumps(method), dumps(lifted))).encode()
        header = HEADER.pack(MAGIC, len(text), payload.size)
        if not self._pending and self._peer_closed():
            # The daemon closes a connection silent for --idle-timeout-ms (60 s) with nothing
            # in flight: with nothing awaited here either, this one is opened again, so a
            # client kept between far-apart calls keeps working. Nothing is lost or repeated:
            # no request of this connection was left unanswered.
            self._reopen()
        try:
            self._sock.sendall(b"".join([header, text, *payload.parts]))
        except _socket.timeout:
            raise CallTimeout(f"{self.path}: sending {method} timed out")
        except (BrokenPipeError, ConnectionResetError) as e:
            # The daemon may have answered before closing (a frame over half its memory
            # budget: -32005; shutting down: -32007): that answer is the reason, not EPIPE.
            raise self._answer_before_close(rid) or \
                TransportError(f"{self.path}: sending {method}: {e.strerror or e}")
        except OSError as e:
            raise TransportError(f"{self.path}: sending {method}: {e.strerror or e}")
        self._pending[rid] = self._kind(params)
        return rid

    def _peer_closed(self) -> bool:
        """True when the daemon has closed this connection and sent nothing more (end of file
        is all there is to read)."""
        try:
            p = select.poll()
            p.register(self._sock, select.POLLIN)
            return bool(p.poll(0)) and \
                self._sock.recv(1, _socket.MSG_PEEK | _socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:  # reset by the peer, or this socket already closed: closed either way
            return True

    def _reopen(self) -> None:
        self._sock.close()
        self._buf = bytearray()
        self._sock = self._connect(self.path, self.timeout)

    def _answer_before_close(self, rid: int) -> Optional[Exception]:
        """The error response already sent for request rid (or with id null), if any."""
        try:
            msg, _ = self._read_frame(time.monotonic() + 0.2)
        except (ViewlowerError, OSError):
            return None
        if "error" in msg and msg.get("id") in (None, rid) and type(msg.get("id")) is not bool:
            try:
                return self._error(msg["error"])
            except TransportError as e:
                return e
        return None

    def _read_exact(self, n: int, deadline: Optional[float]) -> bytes:
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CallTimeout(f"{self.path}: no response within {self.timeout} s")
                self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(max(n - len(self._buf), 1 << 16))
            except _socket.timeout:
                raise CallTimeout(f"{self.path}: no response within {self.timeout} s")
            except OSError as e:
                raise TransportError(f"{self.path}: {e.strerror or e}")
            if not chunk:
                raise TransportError(f"{self.path}: the daemon closed the connection")
            self._buf += chunk
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _read_frame(self, deadline: Optional[float]) -> Tuple[dict, memoryview]:
        magic, jlen, plen = HEADER.unpack(self._read_exact(HEADER.size, deadline))
        if magic != MAGIC:
            raise TransportError(f"{self.path}: bad frame magic {magic!r}")
        if jlen + plen > MAX_RESPONSE_BYTES:
            raise TransportError(f"{self.path}: response of {jlen + plen} bytes is over the limit")
        text = self._read_exact(jlen, deadline)
        payload = memoryview(self._read_exact(plen, deadline)) if plen else memoryview(b"")
        try:
            msg = json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
            raise TransportError(f"{self.path}: response is not JSON: {e}")
        if not isinstance(msg, dict):
            raise TransportError(f"{self.path}: response is not a JSON object")
        if msg.get("jsonrpc") != "2.0" or ("result" in msg) == ("error" in msg):
            raise TransportError(f"{self.path}: malformed response: not a JSON-RPC 2.0 response "
                                 "with exactly one of result and error")
        return msg, payload

    def receive(self, rid: int) -> Any:
        """Waits for the response to request `rid`; returns its result or raises its error."""
        if rid not in self._pending:
            raise ValueError(f"request {rid!r} was not sent on this connection or was received")
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while rid not in self._done:
            msg, payload = self._read_frame(deadline)
            mid = msg.get("id")
            if mid is None and "error" in msg:
                raise self._error(msg["error"])
            # type(), not isinstance(): JSON true is a bool, never request 1
            if type(mid) is not int:
                raise TransportError(f"{self.path}: malformed response: id {mid!r} is not an "
                                     "integer")
            if mid not in self._pending or mid in self._done:
                self.dropped += 1  # not a request awaited here: dropped, memory stays bounded
                continue
            self._done[mid] = (msg, payload)
        msg, payload = self._done.pop(rid)
        kind = self._pending.pop(rid)
        if "error" in msg:
            raise self._error(msg["error"])
        try:
            return _lower_tensors(msg["result"], payload, kind)
        except TransportError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError,
                RecursionError, RuntimeError) as e:  # torch raises RuntimeError for shapes
            raise TransportError(f"{self.path}: malformed tensor in the response: "
                                 f"{type(e).__name__}: {e}")

    def _kind(self, params: Any = None) -> str:
        """How the results of a request with params come back: tensors= when it names a kind;
        for "auto", the kind of the request's own tensors (numpy in, numpy out), else torch
        when the torch module is loaded, else numpy."""
        if self.tensors != "auto":
            return self.tensors
        found = _input_kind(params)
        if found is not None:
            return found
        return "torch" if "torch" in sys.modules else "numpy"

    def _error(self, err: Any) -> RemoteError:
        code = err.get("code") if isinstance(err, dict) else None
        message = err.get("message") if isinstance(err, dict) else None
        data = err.get("data") if isinstance(err, dict) else None
        if type(code) is not int or not isinstance(message, str) or \
                not (data is None or isinstance(data, dict)):
            raise TransportError(f"{self.path}: malformed error in the response: {err!r:.200}")
        data = data or {}
        kind, path = data.get("kind"), data.get("path")
        if not (kind is None or isinstance(kind, str)) or \
                not (path is None or isinstance(path, str)):
            raise TransportError(f"{self.path}: malformed error data in the response: "
                                 f"{data!r:.200}")
        return RemoteError(message, code=code, kind=kind, path=path, data=err.get("data"))

    def call(self, method: str, params: Optional[dict] = None) -> Any:
        """One request, one response."""
        return self.receive(self.send(method, params))

    def pipeline(self, requests: Iterable[Tuple[str, Optional[dict]]]) -> List[Any]:
        """Sends every (method, params) before reading any response; results in request order.
        An error response raises once every response has been read."""
        ids = [self.send(m, p) for m, p in requests]
        results: List[Any] = []
        first: Optional[Exception] = None
        for rid in ids:
            try:
                results.append(self.receive(rid))
            except RemoteError as e:
                results.append(e)
                first = first or e
        if first is not None:
            raise first
        return results

    # -- the methods of docs/protocol.md --

    def ping(self) -> dict:
        return self.call("ping", {})

    def version(self) -> dict:
        return self.call("version", {})

    def stats(self) -> dict:
        return self.call("stats", {})

    def validate(self, graph: Any) -> dict:
        return self.call("validate", {"graph": _graph(graph)})

    def lower(self, graph: Any, remove_view_copy: Optional[bool] = None,
              policy: Optional[str] = None, fold: Optional[bool] = None, **options: Any) -> dict:
        """{"graph": lowered graph, "report": report}. `graph` is a dict, JSON text or RawJSON."""
        return self.call("lower", {"graph": _graph(graph),
                                   "options": _options(remove_view_copy, policy, fold, options)})

    def verify(self, graph: Any, inputs: Optional[Dict[str, Any]] = None,
               seed: Optional[int] = None, remove_view_copy: Optional[bool] = None,
               policy: Optional[str] = None, fold: Optional[bool] = None, **options: Any) -> dict:
        params: Dict[str, Any] = {"graph": _graph(graph),
                                  "options": _options(remove_view_copy, policy, fold, options)}
        if inputs is not None:
            params["inputs"] = inputs
        if seed is not None:
            params["seed"] = int(seed)
        return self.call("verify", params)

    def execute(self, graph: Any, inputs: Dict[str, Any]) -> list:
        """The graph's outputs as tensors (blob transfer both ways)."""
        return self.call("execute", {"graph": _graph(graph), "inputs": inputs,
                                     "encoding": "blob"})["outputs"]

    def view_copy(self, tensor: Any, size: Sequence[int],
                  out_dim_order: Optional[Sequence[int]] = None) -> Any:
        params: Dict[str, Any] = {"input": tensor, "size": list(size), "encoding": "blob"}
        if out_dim_order is not None:
            params["out_dim_order"] = list(out_dim_order)
        return self.call("view_copy", params)["output"]


def _graph(graph: Any) -> Any:
    if isinstance(graph, (str, bytes)):
        return RawJSON(graph.decode() if isinstance(graph, bytes) else graph)
    return graph
