"""Eager PyTorch as the oracle for small graphs the zoo does not reach: layout-only chains of
every dtype (one-element results, reshapes of reshapes), each exported, lowered, replayed and
compared bit for bit with the model's own forward."""
import collections

import pytest
import torch
from torch import nn

from viewlower import check, plan, replay
from viewlower import export as ex


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def _bits(t):
    return replay.logical_bytes(t)


def checked(lowerer, fn, x, layout="traced", opts=None):
    """The check's result for Lambda(fn) on x, after asserting that the lowered graph's outputs,
    replayed, are the eager forward's bits."""
    model = Lambda(fn).eval()
    with torch.no_grad():
        want = fn(x.clone(memory_format=torch.preserve_format))
    want = list(want) if isinstance(want, tuple) else [want]
    e = ex.export(model, [x], name="m", layout_mode=layout)
    res = check.run_check(e, lowerer, opts or {})
    assert res.equal, check.describe(res.mismatch or res.trace_mismatch or res.literal_change)
    with torch.no_grad():
        got = replay.Run(res.lowered, check.stored_values(e, res.lowered)).complete().outputs
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        assert torch.equal(_bits(w), _bits(g))
    return res


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int64])
def test_a_one_element_result_that_keeps_its_bases_stride_is_compared(lowerer, dtype):
    # select(-1, -1).select(1, -2) of a channels-last (1,4,1,5) tensor is one element whose
    # stride torch leaves at 20: viewing it as bytes failed, so export itself raised.
    x = torch.arange(20).reshape(1, 4, 1, 5).to(dtype).contiguous(memory_format=torch.channels_last)
    t = x.select(-1, -1).select(1, -2)
    assert t.numel() == 1 and t.reshape(-1).stride() != (1,)
    assert torch.equal(replay.logical_bytes(t), replay.logical_bytes(t.clone()))
    for layout in ("traced", "edge"):
        checked(lowerer, lambda x: x.select(-1, -1).select(1, -2), x, layout)


def test_a_named_tuple_output_is_its_fields_in_order(lowerer):
    # GoogLeNet and Inception v3 return a named tuple in train mode (logits and the aux
    # logits): traced as a call of the tuple's class, it was refused as no ATen operator.
    Out = collections.namedtuple("Out", ["logits", "aux"])
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    res = checked(lowerer, lambda x: Out(x.permute(0, 2, 1).reshape(2, -1), x.flatten(1) * 2), x)
    assert [n["op"] for n in res.lowered["nodes"]].count("output") == 1


def test_a_view_copy_rebased_by_normalization_is_not_a_changed_literal(lowerer):
    # movedim, flatten, unflatten: the unflatten's view_copy reads the flatten's view_copy and
    # normalization points it at the flatten's base (a reference, not a literal, changes).
    x = torch.arange(120, dtype=torch.float32).reshape(2, 4, 3, 5)
    fn = lambda x: x.movedim(1, -1).flatten(1, 2).unflatten(1, (3, 5))
    for opts in ({}, {"fold": False}):
        res = checked(lowerer, fn, x, "traced", opts)
        assert res.report["normalized"] == 1
    # A changed literal is still found.
    e = ex.export(Lambda(fn), [x], name="m", layout_mode="traced")
    lowered = lowerer.lower(e.graph, {})["graph"]
    node = next(n for n in lowered["nodes"] if n.get("target") == "aten.view_copy.default")
    node["args"][1] = list(reversed(node["args"][1]))
    assert check.literal_change(e.graph, lowered)["node"] == node["name"]


class Tied(nn.Module):
    """A classifier tied to its embedding (fc.weight is emb.weight), and a Linear used twice."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.fc = nn.Linear(6, 10, bias=False)
        self.fc.weight = self.emb.weight
        self.mix = nn.Linear(6, 6)
        self.again = self.mix

    def forward(self, i):
        return self.fc(self.again(self.mix(self.emb(i))))


def test_a_tied_weight_is_one_placeholder_read_by_both_readers(lowerer):
    # torch 1.13's functional_call swaps only the names it is given: the trace captured the
    # classifier's view of the embedding as a constant (_param_constant0, through aten.t).
    torch.manual_seed(0)
    model = Tied().eval()
    i = torch.tensor([[1, 2, 3], [4, 5, 9]])
    with torch.no_grad():
        want = model(i)
    for layout in ("traced", "edge"):
        e = ex.export(model, [i], name="tied", layout_mode=layout)
        ph = [n["name"] for n in e.graph["nodes"] if n["op"] == "placeholder"]
        assert ph == ["p_emb_weight", "p_mix_weight", "p_mix_bias", "i"]
        assert not any(n.get("target", "").startswith("aten.t.") for n in e.graph["nodes"])
        res = check.run_check(e, lowerer, {})
        assert res.equal, check.describe(res.mismatch or res.literal_change)
        got = replay.Run(res.lowered, check.stored_values(e, res.lowered)).complete().outputs[0]
        if layout == "traced":
            assert torch.equal(_bits(got), _bits(want))
        else:  # the edge graph's own bits (an addmm on a contiguous t_copy rounds otherwise)
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
    # The embedding keeps the weight in its layout; the classifier's transpose stays a copy
    # (the twice-used Linear's weight is relaid: both its transposes alias).
    assert [p["node"] for p in res.report["param_layouts"]] == ["p_mix_weight"]
    assert res.report["param_layouts"][0]["aliased"] == 2
    blocked = [p for p in res.report["params_not_relaid"] if p["node"] == "p_emb_weight"]
    assert blocked[0]["blockers"] == [{"node": "embedding", "reason": "read_by_op"}]


CHAINS = {
    "patch_tokens": lambda x: x.permute(0, 2, 3, 1).reshape(2, -1, 4).transpose(-1, -2),
    "slices": lambda x: x[:, :100, -100:2, 1:-1:3].unsqueeze(-1).squeeze(-1),
    "select_negative": lambda x: x.select(-1, -1).select(1, -2),
    "split_unbind": lambda x: x.split([1, 3], 1) + x.unbind(2),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int8,
                                   torch.uint8, torch.bool])
def test_layout_only_chains_of_every_dtype_planned_give_eager_bits(lowerer, dtype):
    # A channels-last (2,4,3,5) input through permutes, reshapes, steps, out-of-range and
    # negative bounds, negative selects, splits: lowered with the plan, replayed in its arena.
    x = torch.randperm(120).reshape(2, 4, 3, 5).remainder(100).to(dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    for name, fn in CHAINS.items():
        for layout in ("traced", "edge"):
            with torch.no_grad():
                want = fn(x.clone(memory_format=torch.preserve_format))
            want = list(want) if isinstance(want, tuple) else [want]
            e = ex.export(Lambda(fn), [x], name=name, layout_mode=layout)
            res = check.run_check(e, lowerer, {"plan": True}, arena=True)
            assert res.equal, (name, layout, check.describe(res.mismatch or res.literal_change))
            got = replay.Run(res.lowered, check.stored_values(e, res.lowered),
                             arena=True).complete().outputs
            assert [(g.dtype, g.shape) for g in got] == [(w.dtype, w.shape) for w in want]
            assert all(torch.equal(_bits(w), _bits(g)) for w, g in zip(want, got)), (name, layout)


def _node(name, target, args, t, kwargs=None):
    n = {"name": name, "op": "call_function", "target": target, "args": args,
         "val": {"dtype": replay.dtype_name(t.dtype), "shape": list(t.shape),
                 "strides": list(t.stride())}}
    if kwargs:
        n["kwargs"] = kwargs
    return n


def test_in_place_writes_through_views_of_planned_buffers_give_eager_values(lowerer):
    # relu_ through a view, index_put_ into a view, copy_ into a slice, add.out into a buffer
    # read through a permute, add_ on a base a kept view still reads: each kept or aliased as
    # the write rules say, planned, and replayed in the arena against torch running the same
    # ops (a *_copy op is a copy there too).
    aten = torch.ops.aten
    x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) - 7.5
    idx, vals = torch.tensor([0, 3, 5]), torch.tensor([-1.0, -2.0, -3.0])
    y = torch.arange(16, dtype=torch.float32).reshape(2, 2, 4)
    a = aten.add.Tensor(x, x)
    v = aten.view_copy.default(a, [6, 4])
    r = aten.relu_.default(v)
    w = aten.view_copy.default(a, [24])
    ip = aten.index_put_.default(w, [idx], vals)
    s = aten.slice_copy.Tensor(a, 1, 0, 2)
    c = aten.copy_.default(s, y)
    p = aten.permute_copy.default(a, [2, 0, 1])
    a2 = aten.add_.Tensor(a, 1.0)
    buf = torch.zeros(2, 3, 4)
    o = aten.add.out(p.permute(1, 2, 0), x, out=buf)
    q = aten.transpose_copy.int(o, 0, 2)
    m = aten.mul.Tensor(q, 2.0)
    want = [t.clone() for t in (r, ip, c, a2, m)]
    ph = lambda name, t: {"name": name, "op": "placeholder", "kind": "user_input",
                          "val": {"dtype": "float32" if t.is_floating_point() else "int64",
                                  "shape": list(t.shape)}}
    graph = {"format": "viewlower.graph", "version": 1, "name": "writes", "nodes": [
        ph("x", x), ph("idx", idx), ph("vals", vals), ph("y", y),
        _node("a", "aten.add.Tensor", ["x", "x"], a),
        _node("v", "aten.view_copy.default", ["a", [6, 4]], v),
        _node("r", "aten.relu_.default", ["v"], r),
        _node("w", "aten.view_copy.default", ["a", [24]], w),
        _node("ip", "aten.index_put_.default", ["w", ["idx"], "vals"], ip),
        _node("s", "aten.slice_copy.Tensor", ["a", 1, 0, 2], s),
        _node("c", "aten.copy_.default", ["s", "y"], c),
        _node("p", "aten.permute_copy.default", ["a", [2, 0, 1]], p),
        _node("a2", "aten.add_.Tensor", ["a", 1.0], a2),
        _node("buf", "aten.zeros.default", [[2, 3, 4]], buf, {"dtype": "float32"}),
        _node("pp", "aten.permute_copy.default", ["p", [1, 2, 0]], p.permute(1, 2, 0).contiguous()),
        _node("o", "aten.add.out", ["pp", "x"], o, {"out": "buf"}),
        _node("q", "aten.transpose_copy.int", ["o", 0, 2], q),
        _node("m", "aten.mul.Tensor", ["q", 2.0], m),
        {"name": "output", "op": "output", "args": ["r", "ip", "c", "a2", "m"]}]}
    values = {"x": x, "idx": idx, "vals": vals, "y": y}
    for opts in ({"plan": True}, {"plan": True, "fold": False},
                 {"plan": True, "plan_alignment": 1}):
        res = lowerer.lower(graph, opts)
        lowered, report = res["graph"], res["report"]
        assert plan.check_plan(lowered) is None
        got = replay.Run(lowered, values, arena=True).complete().outputs
        assert all(torch.equal(_bits(w_), _bits(g)) for w_, g in zip(want, got)), opts
        kept = {d["node"]: d["reasons"] for d in report["decisions"] if d["decision"] == "kept"}
        assert "view_mutated" in kept["v"] and "view_mutated" in kept["w"]
        if opts.get("fold") is not False:  # the permute is a candidate only with fold
            assert "base_mutated" in kept["p"]
