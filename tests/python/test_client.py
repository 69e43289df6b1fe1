"""viewlower.Client against a real viewlowerd: every method, blobs both ways, pipelining,
errors with code/kind/path, timeouts."""
import os
import socket
import tempfile
import threading
import time

import numpy as np
import pytest
import torch

import viewlower
from viewlower import Client, client as vc

PATCH = {
    "format": "viewlower.graph", "version": 1, "name": "patch_embed", "nodes": [
        {"name": "x", "op": "placeholder", "val": {"dtype": "float32", "shape": [1, 2, 2, 3],
                                                   "dim_order": [0, 2, 3, 1]}},
        {"name": "flat", "op": "call_function", "target": "aten.view_copy.default",
         "args": ["x", [1, 2, -1]], "val": {"dtype": "float32", "shape": [1, 2, 6],
                                             "dim_order": [0, 1, 2]}},
        {"name": "tokens", "op": "call_function", "target": "aten.permute_copy.default",
         "args": ["flat", [0, 2, 1]], "val": {"dtype": "float32", "shape": [1, 6, 2],
                                               "dim_order": [0, 1, 2]}},
        {"name": "out", "op": "output", "args": ["tokens"]}]}


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8)


def test_ping_version_and_stats_answer(daemon):
    with Client(daemon) as c:
        assert c.ping() == {"pong": True}
        assert c.version()["protocol"] == 1
        assert "uptime" in " ".join(c.stats().keys()) or c.stats()


def test_view_copy_of_a_channels_last_torch_tensor_equals_torch_reshape(daemon):
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    x = x.contiguous(memory_format=torch.channels_last)
    with Client(daemon, tensors="torch") as c:
        y = c.view_copy(x, [2, 3, 20])
    assert torch.equal(raw_bytes(y), raw_bytes(x.reshape(2, 3, 20)))
    assert y.stride() == (60, 20, 1)


def test_view_copy_keeps_every_bit_of_bfloat16_nan_and_negative_zero(daemon):
    x = torch.tensor([[float("nan"), -0.0], [float("inf"), 1.5]], dtype=torch.bfloat16)
    with Client(daemon, tensors="torch") as c:
        y = c.view_copy(x.t(), [4], out_dim_order=[0])
    assert torch.equal(raw_bytes(y), raw_bytes(x.t().reshape(4)))


def test_view_copy_of_a_transposed_numpy_array_comes_back_as_numpy(daemon):
    a = np.arange(12, dtype=np.int64).reshape(3, 4).T  # strides of a transpose
    with Client(daemon, tensors="numpy") as c:
        y = c.view_copy(a, [12])
    assert isinstance(y, np.ndarray)
    assert y.tolist() == a.reshape(12).tolist()


def test_execute_sends_and_returns_blobs_in_declared_layout(daemon):
    x = torch.arange(12, dtype=torch.float32).reshape(1, 2, 2, 3)
    x = x.contiguous(memory_format=torch.channels_last)
    with Client(daemon, tensors="torch") as c:
        (out,) = c.execute(PATCH, {"x": x})
    assert torch.equal(raw_bytes(out), raw_bytes(x.reshape(1, 2, 6).permute(0, 2, 1)))


def test_lower_returns_graph_and_report_and_keeps_the_channels_last_flatten(daemon):
    with Client(daemon) as c:
        r = c.lower(PATCH)
    flat = [d for d in r["report"]["decisions"] if d["node"] == "flat"]
    if flat:  # without the layout algebra the flatten is decided on its own
        assert flat[0]["decision"] == "kept" and "base_layout" in flat[0]["reasons"]
    assert r["graph"]["nodes"][-1] == {"name": "out", "op": "output", "args": ["tokens"]}


def test_verify_with_legacy_policy_reports_the_mismatch(daemon):
    with Client(daemon) as c:
        r = c.verify(PATCH, seed=1, policy="legacy")
    assert r["equal"] is False
    assert r["mismatches"][0]["name"] == "tokens"


def test_an_invalid_graph_raises_with_code_kind_and_pointer(daemon):
    bad = {**PATCH, "nodes": [dict(PATCH["nodes"][0], val={"dtype": "float33", "shape": [1],
                                                           "dim_order": [0]})] + PATCH["nodes"][1:]}
    with Client(daemon) as c:
        with pytest.raises(viewlower.RemoteError) as e:
            c.lower(bad)
        assert c.ping() == {"pong": True}  # the connection stays usable
    assert e.value.code == -32001
    assert e.value.kind == "invalid_graph"
    assert e.value.path == "/graph/nodes/0/val/dtype"
    assert e.value.exit_code == 2


def test_an_unknown_method_is_a_remote_error_with_its_code(daemon):
    with Client(daemon) as c:
        with pytest.raises(viewlower.RemoteError) as e:
            c.call("no_such_method", {})
    assert e.value.code == -32601


def test_pipelined_requests_are_all_answered_by_id(daemon):
    with Client(daemon) as c:
        ids = [c.send("ping", {}) for _ in range(20)] + [c.send("lower", {"graph": PATCH})]
        results = [c.receive(i) for i in reversed(ids)]
    assert results[0]["graph"]["name"] == "patch_embed"
    assert all(r == {"pong": True} for r in results[1:])


def test_pipeline_returns_results_in_request_order(daemon):
    with Client(daemon) as c:
        rs = c.pipeline([("version", {}), ("ping", {}), ("lower", {"graph": PATCH})])
    assert rs[1] == {"pong": True} and "graph" in rs[2] and rs[0]["protocol"] == 1


def test_graph_text_is_sent_as_is_and_int64_max_survives_lowering(daemon):
    text = ('{"format":"viewlower.graph","version":1,"name":"s","nodes":['
            '{"name":"x","op":"placeholder","val":{"dtype":"float32","shape":[4,6],"dim_order":[0,1]}},'
            '{"name":"s","op":"call_function","target":"aten.slice_copy.Tensor",'
            '"args":["x",1,2,9223372036854775807,1],'
            '"val":{"dtype":"float32","shape":[4,4],"dim_order":[0,1]}},'
            '{"name":"m","op":"call_function","target":"aten.mul.Tensor","args":["s",2.0],'
            '"val":{"dtype":"float32","shape":[4,4],"dim_order":[0,1]}},'
            '{"name":"out","op":"output","args":["m"]}]}')
    with Client(daemon) as c:
        g = c.lower(text)["graph"]
    by = {n["name"]: n for n in g["nodes"]}
    assert by["m"]["args"] == ["s", 2.0] and isinstance(by["m"]["args"][1], float)
    assert by["s"]["args"][3] == 9223372036854775807 and isinstance(by["s"]["args"][3], int)


def test_a_daemon_that_never_answers_times_out():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "silent.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    conns = []
    t = threading.Thread(target=lambda: conns.append(srv.accept()), daemon=True)
    t.start()
    try:
        with Client(path, timeout=0.3) as c:
            with pytest.raises(viewlower.CallTimeout) as e:
                c.ping()
        assert e.value.exit_code == 3
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)


def test_a_connection_the_daemon_closed_while_idle_is_opened_again(start_daemon):
    with start_daemon("--idle-timeout-ms", "50") as sock, Client(sock, timeout=30) as c:
        assert c.ping() == {"pong": True}
        first = c._sock
        deadline = time.monotonic() + 60  # the daemon closes it 50 to 100 ms after the ping
        while not c._peer_closed():
            assert time.monotonic() < deadline, "the daemon did not close the idle connection"
            time.sleep(0.01)
        assert c.ping() == {"pong": True}
        assert c._sock is not first and first.fileno() == -1
        assert c.stats()["connections"]["total"] >= 2


def test_no_daemon_at_the_path_is_a_transport_error():
    with pytest.raises(viewlower.TransportError) as e:
        Client("/nonexistent/dir/vl.sock")
    assert e.value.exit_code == 3


def test_socket_lookup_follows_viewlowerctl(monkeypatch):
    monkeypatch.setenv("VIEWLOWER_SOCKET", "/tmp/a.sock")
    assert vc.default_socket() == "/tmp/a.sock"
    monkeypatch.delenv("VIEWLOWER_SOCKET")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    expected = "/run/viewlower/viewlower.sock" if os.geteuid() == 0 else "/run/user/7/viewlower.sock"
    assert vc.default_socket() == expected


def test_dumps_keeps_integers_exact_and_floats_as_float_tokens():
    assert vc.dumps([9223372036854775807, 2.0, 0.30000000000000004, 1e-05, True, None]) == \
        "[9223372036854775807,2.0,0.30000000000000004,1e-05,true,null]"
    with pytest.raises(ValueError):
        vc.dumps(float("inf"))


class FakeDaemon:
    """A socket that answers each request with the frames `reply(request_id)` returns."""

    def __init__(self, reply):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "fake.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.reply = reply
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        import json as _json
        conn, _ = self.srv.accept()
        buf = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 16:
                _, jlen, plen = vc.HEADER.unpack(buf[:16])
                if len(buf) < 16 + jlen + plen:
                    break
                req = _json.loads(buf[16:16 + jlen])
                buf = buf[16 + jlen + plen:]
                for frame in self.reply(req["id"]):
                    conn.sendall(frame)

    def close(self):
        self.srv.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def frame(text, magic=b"VLW1", payload=b""):
    t = text.encode()
    return vc.HEADER.pack(magic, len(t), len(payload)) + t + payload


def test_a_frame_with_bad_magic_is_a_transport_error():
    d = FakeDaemon(lambda rid: [frame('{"jsonrpc":"2.0","id":%d,"result":{}}' % rid, magic=b"XXXX")])
    try:
        with Client(d.path, timeout=5) as c:
            with pytest.raises(viewlower.TransportError):
                c.ping()
    finally:
        d.close()


def test_an_error_with_null_id_raises_its_code_and_responses_out_of_order_are_matched():
    replies = {1: [], 2: [frame('{"jsonrpc":"2.0","id":2,"result":{"n":2}}'),
                          frame('{"jsonrpc":"2.0","id":1,"result":{"n":1}}')],
               3: [frame('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad frame",'
                         '"data":{"kind":"invalid_request","path":""}}}')]}
    d = FakeDaemon(lambda rid: replies[rid])
    try:
        with Client(d.path, timeout=5) as c:
            a, b = c.send("ping", {}), c.send("ping", {})
            assert c.receive(b) == {"n": 2} and c.receive(a) == {"n": 1}
            with pytest.raises(viewlower.RemoteError) as e:
                c.ping()
        assert e.value.code == -32600 and e.value.kind == "invalid_request"
        assert e.value.exit_code == 3
    finally:
        d.close()


def test_a_blob_outside_the_payload_is_a_transport_error():
    bad = ('{"jsonrpc":"2.0","id":1,"result":{"output":{"dtype":"float32","shape":[4],'
           '"dim_order":[0],"blob":{"offset":0,"nbytes":16}}}}')
    d = FakeDaemon(lambda rid: [frame(bad, payload=b"\0" * 8)])
    try:
        with Client(d.path, timeout=5, tensors="torch") as c:
            with pytest.raises(viewlower.TransportError):
                c.view_copy(torch.zeros(4), [4])
    finally:
        d.close()


def test_execute_takes_numpy_inputs_and_returns_numpy(daemon):
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3)
    with Client(daemon, tensors="numpy") as c:
        (out,) = c.execute(PATCH, {"x": x})
    # PATCH declares x channels-last: the array (default order) is converted to it
    assert out.tolist() == x.reshape(1, 2, 6).transpose(0, 2, 1).tolist()


# ---- reliability round 3: what a fake (or broken) daemon may send -------------------------

def test_responses_to_ids_never_sent_are_dropped_within_bounded_memory():
    """A daemon answering request 1 with 400 responses of 256 KiB to ids the client never sent:
    each is dropped as it arrives (the client kept them all: 13 -> 1606 MiB in one call)."""
    import tracemalloc
    junk = b"\0" * (256 << 10)
    bogus = [frame('{"jsonrpc":"2.0","id":%d,"result":{}}' % (1000 + i), payload=junk)
             for i in range(400)]
    d = FakeDaemon(lambda rid: bogus + [frame('{"jsonrpc":"2.0","id":%d,"result":{"pong":true}}'
                                               % rid)])
    try:
        with Client(d.path, timeout=30) as c:
            tracemalloc.start()
            assert c.ping() == {"pong": True}
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            assert c.dropped == 400
            assert c._done == {} and c._pending == {}
        assert peak < 16 << 20, f"peak {peak >> 20} MiB while 100 MiB of strays went by"
    finally:
        d.close()


def test_a_response_for_an_id_already_received_is_dropped():
    twice = lambda rid: [frame('{"jsonrpc":"2.0","id":%d,"result":{"n":%d}}' % (rid, rid))] * 2
    d = FakeDaemon(twice)
    try:
        with Client(d.path, timeout=5) as c:
            assert c.call("ping", {}) == {"n": 1}
            assert c.call("ping", {}) == {"n": 2}  # the second copy of 1 was dropped, not taken
            assert c.dropped == 1
    finally:
        d.close()


def test_id_true_is_not_request_1():
    d = FakeDaemon(lambda rid: [frame('{"jsonrpc":"2.0","id":true,"result":{"pong":true}}')])
    try:
        with Client(d.path, timeout=5) as c:
            with pytest.raises(viewlower.TransportError, match="id True is not an integer"):
                c.ping()
    finally:
        d.close()


MALFORMED = [
    ('{"jsonrpc":"2.0","id":1,"error":"boom"}', None, "malformed error"),
    ('{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', None, "malformed error"),
    ('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":[1]}}', None,
     "malformed error"),
    ('{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"kind":7}}}', None,
     "malformed error data"),
    ('{"jsonrpc":"2.0","id":1,"result":NaN}', None, "not JSON"),
    ('{"jsonrpc":"2.0","id":1,"result":{},"error":{}}', None, "exactly one of"),
    ('{"id":1,"result":{}}', None, "not a JSON-RPC 2.0 response"),
    ('[' * 100000 + ']' * 100000, None, "not JSON"),
    ('{"jsonrpc":"2.0","id":1,"result":{"t":{"dtype":"nope","shape":[1],"blob":'
     '{"offset":0,"nbytes":4}}}}', b"\0" * 4, "malformed tensor"),
    ('{"jsonrpc":"2.0","id":1,"result":{"t":{"dtype":"float32","shape":[3],"blob":'
     '{"offset":0,"nbytes":4}}}}', b"\0" * 4, "malformed tensor"),
    ('{"jsonrpc":"2.0","id":1,"result":{"t":{"dtype":"float32","shape":"x","blob":'
     '{"offset":0,"nbytes":4}}}}', b"\0" * 4, "malformed tensor"),
    ('{"jsonrpc":"2.0","id":1,"result":{"t":{"dtype":"float32","shape":[1],"blob":'
     '{"offset":"a","nbytes":4}}}}', b"\0" * 4, "malformed tensor"),
    ('{"jsonrpc":"2.0","id":1,"result":{"t":{"dtype":"float32","shape":[1],"dim_order":[5],'
     '"blob":{"offset":0,"nbytes":4}}}}', b"\0" * 4, "malformed tensor"),
]


@pytest.mark.parametrize("kind", ["torch", "numpy"])
@pytest.mark.parametrize("text,payload,message", MALFORMED)
def test_malformed_responses_raise_transport_error(text, payload, message, kind):
    """Each used to raise a bare ValueError, TypeError, KeyError or RecursionError."""
    d = FakeDaemon(lambda rid: [frame(text, payload=payload or b"")])
    try:
        with Client(d.path, timeout=5, tensors=kind) as c:
            with pytest.raises(viewlower.TransportError, match=message):
                c.ping()
    finally:
        d.close()


def test_a_response_that_is_not_utf8_is_a_transport_error():
    t = b'{"jsonrpc":"2.0","id":1,"result":{"s":"\xff"}}'
    d = FakeDaemon(lambda rid: [vc.HEADER.pack(b"VLW1", len(t), 0) + t])
    try:
        with Client(d.path, timeout=5) as c:
            with pytest.raises(viewlower.TransportError, match="not JSON"):
                c.ping()
    finally:
        d.close()


def test_an_unknown_tensors_value_is_refused_before_connecting():
    with pytest.raises(ValueError, match=r"tensors='tf': must be one of 'auto', 'torch', "
                                         r"'numpy', 'raw'"):
        Client("/nonexistent/dir/vl.sock", tensors="tf")


def test_auto_returns_numpy_for_numpy_input_and_torch_for_torch_input(daemon):
    """torch is loaded here: "auto" used to return torch tensors for numpy input."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with Client(daemon) as c:
        y = c.view_copy(a, [6])
        z = c.view_copy(t, [6])
        (out,) = c.execute(PATCH, {"x": np.zeros((1, 2, 2, 3), dtype=np.float32)})
    assert isinstance(y, np.ndarray) and y.tolist() == [0, 1, 2, 3, 4, 5]
    assert isinstance(z, torch.Tensor) and z.tolist() == [0, 1, 2, 3, 4, 5]
    assert isinstance(out, np.ndarray)


def test_an_answer_sent_before_the_daemon_closes_is_reported_not_epipe():
    """The daemon refuses a frame over half its budget after its header, answers -32005 with id
    null and closes while the client is still writing: the client raises that answer."""
    import json as _json
    d = tempfile.mkdtemp()
    path = os.path.join(d, "refusing.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        conn.recv(16)
        conn.sendall(frame(_json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": -32005, "message": "overloaded: a frame of 33554600 bytes does not fit the "
            "memory budget", "data": {"kind": "overloaded"}}})))
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    try:
        with Client(path, timeout=10) as c:
            with pytest.raises(viewlower.RemoteError) as e:
                c.view_copy(np.zeros(32 << 20, dtype=np.uint8), [32 << 20])
        assert e.value.code == -32005 and "memory budget" in str(e.value)
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)
