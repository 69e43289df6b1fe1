"""Eager PyTorch as the oracle for small graphs the zoo does not reach: layout-only chains of
every dtype (one-element results, reshapes of reshapes), each exported, lowered, replayed and
compared bit for bit with the model's own forward."""
import pytest
import torch
from torch import nn

from viewlower import check, replay
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
