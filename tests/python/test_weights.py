"""Parameters in their declared layouts (docs/format.md §3 and §8): apply_param_layouts, the weights
file (docs/format.md), the qualified-name mapping, the replay storing a relaid weight permuted, and
errors that name the field."""
import copy
import json
import os
import struct
import subprocess
import sys

import pytest
import torch
from torch import nn

from viewlower import check, export as ex, weights
from viewlower.weights import WeightsError

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def linear_export(layout="edge"):
    torch.manual_seed(0)
    m = nn.Linear(5, 3).eval()
    return m, ex.export(m, ex.make_inputs([([2, 5], torch.float32)]), layout_mode=layout)


def relaid_by_hand(graph):
    """The Linear graph as the stored parameter layouts lower it, written by hand: p_weight
    declared [1,0] and the t_copy an alias of it (what the C lowering gives with param_layouts)."""
    g = copy.deepcopy(graph)
    by = {n["name"]: n for n in g["nodes"]}
    w = by["p_weight"]
    w["val"] = {"dtype": "float32", "shape": [3, 5], "dim_order": [1, 0]}
    (t,) = [n for n in g["nodes"] if n.get("target") == "aten.t_copy.default"]
    t.update(target="memory.view", args=["p_weight", [5, 3]], alias_of="p_weight")
    return g


def test_a_relaid_weight_is_stored_transposed_and_its_file_bytes_are_the_transpose():
    m, e = linear_export()
    g = relaid_by_hand(e.graph)
    stored = weights.apply_param_layouts(m.state_dict(), g)
    assert list(stored) == ["weight", "bias"]
    w = stored["weight"]
    assert w.stride() == (1, 3) and torch.equal(w, m.weight.detach())
    data = weights.weights_bytes(g, m)
    (hlen,) = struct.unpack("<Q", data[8:16])
    index = json.loads(data[16:16 + hlen])
    (ew, eb) = index["tensors"]
    assert (ew["node"], ew["name"], ew["kind"], ew["dim_order"], ew["nbytes"]) == \
        ("p_weight", "weight", "parameter", [1, 0], 60)
    start = (16 + hlen + 63) // 64 * 64
    raw = data[start + ew["offset"]:start + ew["offset"] + ew["nbytes"]]
    assert raw == m.weight.detach().t().contiguous().numpy().tobytes()
    assert raw != m.weight.detach().contiguous().numpy().tobytes()
    rawb = data[start + eb["offset"]:start + eb["offset"] + eb["nbytes"]]
    assert eb["offset"] % 64 == 0 and rawb == m.bias.detach().numpy().tobytes()
    back = weights.parse_weights(data)["tensors"]
    assert back[0]["tensor"].stride() == (1, 3) and torch.equal(back[0]["tensor"], m.weight)


def test_the_replay_reads_the_relaid_weight_through_its_permuted_storage():
    """Equal with the weight stored [1,0]; the same alias over a weight stored [0,1] differs,
    so the replay really lays the parameter out as declared (a logical copy would pass both)."""
    m, e = linear_export()
    g = relaid_by_hand(e.graph)
    assert check.compare_replay(e, g) is None
    wrong = copy.deepcopy(g)
    wrong["nodes"][0]["val"] = e.graph["nodes"][0]["val"]
    found = check.compare_replay(e, wrong)
    assert found is not None and found["node"] in ("t_copy", "addmm") and found["index"] >= 0


def test_qualified_names_map_back_through_prefixes_and_suffixes():
    from test_export import Named
    m = Named().eval()
    e = ex.export(m, ex.make_inputs([([2, 4], torch.float32), ([2, 3], torch.float32)]))
    with torch.no_grad():
        m.a_b.c.fill_(7.0)  # a.b_c and a_b.c both make p_a_b_c: the suffix says which
    got = weights.match_qualified_names(e.graph, m.state_dict())
    assert {k: v[0] for k, v in got.items()} == {
        "p_fc_weight": "fc.weight", "p_fc_bias": "fc.bias", "p_body_0_weight": "body.0.weight",
        "p_body_0_bias": "body.0.bias", "p_body_1_weight": "body.1.weight",
        "p_body_1_bias": "body.1.bias", "p_a_b_c": "a.b_c", "p_a_b_c_1": "a_b.c",
        "b_body_1_running_mean": "body.1.running_mean",
        "b_body_1_running_var": "body.1.running_var",
        "b_body_1_num_batches_tracked": "body.1.num_batches_tracked"}
    assert float(got["p_a_b_c_1"][1][0]) == 7.0 and float(got["p_a_b_c"][1][0]) == 1.0


def test_a_state_dict_that_does_not_fit_the_graph_names_the_node():
    m, e = linear_export()
    sd = m.state_dict()
    del sd["bias"]
    with pytest.raises(WeightsError) as err:
        weights.apply_param_layouts(sd, e.graph)
    assert err.value.path == "/nodes/1" and "p_bias" in err.value.message
    sd = dict(m.state_dict(), bias=torch.zeros(4))
    with pytest.raises(WeightsError) as err:
        weights.apply_param_layouts(sd, e.graph)
    assert err.value.path == "/nodes/1/val" and "float32[3]" in err.value.message


def _file(index, data=b"", hlen=None):
    text = json.dumps(index).encode()
    head = b"VLWT" + struct.pack("<IQ", 1, len(text) if hlen is None else hlen)
    body = head + text
    return body + bytes((-len(body)) % 64) + data


GOOD = {"format": "viewlower.weights", "version": 1, "graph": "g", "alignment": 64,
        "tensors": [{"node": "p_w", "name": "w", "kind": "parameter", "dtype": "float32",
                     "shape": [2, 2], "dim_order": [1, 0], "offset": 0, "nbytes": 16}]}


def _bad(**change):
    idx = copy.deepcopy(GOOD)
    idx["tensors"][0].update(change)
    return idx


@pytest.mark.parametrize("data,message", [
    (b"VLWX" + bytes(12), "bytes 0-3 must be 'VLWT'"),
    (b"VLWT" + struct.pack("<IQ", 2, 0), "bytes 4-7: version 2"),
    (_file(GOOD, struct.pack("<4f", 1, 2, 3, 4), hlen=1 << 40), "bytes 8-15: index length"),
    (_file(_bad(nbytes=12), bytes(16)), "/tensors/0/nbytes: 12, but float32[2, 2] has 16"),
    (_file(_bad(dim_order=[0, 0]), bytes(16)), "/tensors/0/dim_order: not a permutation of 0..1"),
    (_file(_bad(dtype="complex64"), bytes(16)), "/tensors/0/dtype: 'complex64'"),
    (_file(_bad(offset=32), bytes(16)), "/tensors/0/offset: must be a multiple of 64"),
    (_file(GOOD, bytes(8)), "/tensors/0/offset: bytes 0..16 are past the end of the data"),
    (_file(_bad(shape=[2, -2]), bytes(16)), "/tensors/0/shape: sizes must be integers >= 0"),
    (_file({k: v for k, v in GOOD.items() if k != "tensors"}), "/tensors: missing"),
    (_file(dict(GOOD, format="other")), '/format: must be "viewlower.weights"'),
])
def test_a_bad_weights_file_is_refused_naming_the_field(data, message):
    with pytest.raises(WeightsError) as err:
        weights.parse_weights(data, "w.vlw")
    assert message in str(err.value)


def test_a_good_weights_file_reads_back_in_its_dim_order():
    got = weights.parse_weights(_file(GOOD, struct.pack("<4f", 1, 2, 3, 4)))["tensors"][0]
    t = got["tensor"]
    assert t.stride() == (1, 2) and t.tolist() == [[1.0, 3.0], [2.0, 4.0]]


def cli(*args):
    # the tests' directory too: a torch.save'd module of a class defined here loads by name
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"),
                                                       os.path.dirname(os.path.abspath(__file__))]))
    return subprocess.run([sys.executable, "-m", "viewlower", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_export_then_lower_writes_the_weights_of_each_graph(tmp_path, daemon):
    g, w, low, w2 = (tmp_path / n for n in ("g.json", "w.vlw", "low.json", "low.vlw"))
    p = cli("export", "viewlower.models:gpt_attention", "--input", "2,8,64", "-o", str(g),
            "--weights-out", str(w))
    assert p.returncode == 0, p.stderr
    graph = json.loads(g.read_text())
    model = ex.build_model("viewlower.models:gpt_attention", {})
    mine = weights.weights_bytes(graph, model)
    assert w.read_bytes() == mine  # the same model (seeded) gives the same file
    p = cli("lower", str(g), "--socket", daemon, "-o", str(low), "--weights", str(w),
            "--weights-out", str(w2))
    assert p.returncode == 0, p.stderr
    lowered = json.loads(low.read_text())["graph"]
    back = {e["node"]: e for e in weights.read_weights(str(w2))["tensors"]}
    by = {n["name"]: n for n in lowered["nodes"]}
    stored = [n for n in lowered["nodes"] if n["op"] == "placeholder" and n["kind"] != "user_input"]
    assert set(back) == {n["name"] for n in stored}
    state = dict(model.named_parameters())
    state.update(model.named_buffers())
    for name, e in back.items():
        assert e["dim_order"] == (by[name]["val"].get("dim_order")
                                  or weights.layout.spec_dim_order(by[name]["val"]))
        assert torch.equal(e["tensor"], state[e["name"]]), name
    p = cli("lower", str(g), str(g), "--socket", daemon, "--weights", str(w), "--weights-out",
            str(w2))
    assert p.returncode == 64 and "one graph" in p.stderr
    p = cli("lower", str(g), "--socket", daemon, "--weights-out", str(w2))
    assert p.returncode == 64 and "--weights-out needs --weights" in p.stderr


class _Inner(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.full((3,), w))


class SameIdentifiers(nn.Module):
    """`a.w`, `a_w` and `a_w_1` all give the identifier-made name `p_a_w...`: named_parameters
    lists `a_w`, `a_w_1`, then `a.w`, so the exporter names them p_a_w, p_a_w_1 and p_a_w_2."""

    def __init__(self):
        super().__init__()
        self.a = _Inner(1.0)
        self.a_w = nn.Parameter(torch.full((3,), 2.0))
        self.a_w_1 = nn.Parameter(torch.full((3,), 3.0))

    def forward(self, x):
        return x * self.a.w + self.a_w - self.a_w_1


def test_a_name_the_exporter_made_unique_maps_to_the_parameter_it_was_made_for(tmp_path):
    m = SameIdentifiers().eval()
    e = ex.export(m, ex.make_inputs([([4, 3], torch.float32)]))
    want = {"p_a_w": ("a_w", 2.0), "p_a_w_1": ("a_w_1", 3.0), "p_a_w_2": ("a.w", 1.0)}
    for source in (weights.program_state(m, e), m, m.state_dict()):
        got = weights.match_qualified_names(e.graph, source)
        assert {k: (key, float(t[0])) for k, (key, t) in got.items()} == want
    assert e.state_names == {"p_a_w": "a_w", "p_a_w_1": "a_w_1", "p_a_w_2": "a.w"}
    g, w = tmp_path / "m3.json", tmp_path / "m3.w"
    p = cli("export", "test_weights:SameIdentifiers", "--input", "4,3", "-o", str(g),
            "--weights-out", str(w))
    assert p.returncode == 0, p.stderr
    back = weights.read_weights(str(w))["tensors"]
    assert [(b["node"], b["name"], b["tensor"].tolist()) for b in back] == [
        ("p_a_w", "a_w", [2.0] * 3), ("p_a_w_1", "a_w_1", [3.0] * 3),
        ("p_a_w_2", "a.w", [1.0] * 3)]


class ParamAndBuffer(nn.Module):
    """A parameter `a.w` and a buffer `a_w` (p_a_w and b_a_w: the same identifier), and a
    BatchNorm's running statistics; every tensor a different value."""

    def __init__(self):
        super().__init__()
        self.a = _Inner(1.0)
        self.register_buffer("a_w", torch.full((3,), 5.0))
        self.bn = nn.BatchNorm1d(3)
        with torch.no_grad():
            self.bn.weight.fill_(0.5)
            self.bn.bias.fill_(0.25)
            self.bn.running_mean.fill_(-1.0)
            self.bn.running_var.fill_(4.0)
            self.bn.num_batches_tracked.fill_(7)

    def forward(self, x):
        return self.bn(x * self.a.w + self.a_w)


def test_a_buffer_is_not_given_the_parameter_of_the_same_identifier(tmp_path, viewlowerctl):
    m = ParamAndBuffer().eval()
    e = ex.export(m, ex.make_inputs([([4, 3], torch.float32)]))
    want = {"p_a_w": "a.w", "p_bn_weight": "bn.weight", "p_bn_bias": "bn.bias",
            "b_a_w": "a_w", "b_bn_running_mean": "bn.running_mean",
            "b_bn_running_var": "bn.running_var",
            "b_bn_num_batches_tracked": "bn.num_batches_tracked"}
    state = m.state_dict()
    for source in (weights.program_state(m, e), m):
        got = weights.match_qualified_names(e.graph, source)
        assert {k: key for k, (key, _) in got.items()} == want
        for k, (key, t) in got.items():
            assert torch.equal(t, state[want[k]]), k
    assert e.state_names == want
    # a plain state dict does not say that a_w is the buffer: refused, not guessed
    with pytest.raises(WeightsError) as err:
        weights.match_qualified_names(e.graph, state)
    assert err.value.path == "/nodes/0" and err.value.message == (
        "parameter p_a_w: the state dict's keys 'a_w', 'a.w' all give this name and 'a_w' may "
        "be a buffer; a state dict does not say which (give the module, or the weights file "
        "export --weights-out wrote)")
    # the weights file round trip: export writes it, lower reads it back by node and lays the
    # lowered graph's tensors out from it, and from the torch.save'd module
    g, w, low, w2, w3, mod = (tmp_path / n for n in ("g.json", "g.w", "low.json", "low.w",
                                                      "low3.w", "m.pt"))
    g.write_text(ex.export_text(e.graph))
    w.write_bytes(weights.weights_bytes(e.graph, weights.program_state(m, e)))
    torch.save(m, str(mod))
    for src, dst in ((w, w2), (mod, w3)):
        p = cli("lower", str(g), "--local", "--viewlowerctl", viewlowerctl, "-o", str(low),
                "--weights", str(src), "--weights-out", str(dst))
        assert p.returncode == 0, p.stderr
    for f in (w, w2, w3):
        back = weights.read_weights(str(f))["tensors"]
        assert {b["node"]: b["name"] for b in back} == want
        for b in back:
            assert torch.equal(b["tensor"], state[b["name"]]), (f, b["node"])


class QualifiedLikeANode(nn.Module):
    """A top-level parameter qualified `p_a_w` (named p_p_a_w) beside `a.w` (named p_a_w)."""

    def __init__(self):
        super().__init__()
        self.p_a_w = nn.Parameter(torch.full((3,), 4.0))
        self.a = _Inner(1.0)

    def forward(self, x):
        return x * self.a.w + self.p_a_w


def test_a_parameter_qualified_like_a_node_name_is_not_taken_for_that_node():
    m = QualifiedLikeANode().eval()
    e = ex.export(m, ex.make_inputs([([4, 3], torch.float32)]))
    want = {"p_p_a_w": ("p_a_w", 4.0), "p_a_w": ("a.w", 1.0)}
    for source in (weights.program_state(m, e), m):
        got = weights.match_qualified_names(e.graph, source)
        assert {k: (key, float(t[0])) for k, (key, t) in got.items()} == want
