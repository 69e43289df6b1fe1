"""Eager PyTorch as the oracle: the lowered graph (stored parameter layouts and the memory plan
on), replayed in one arena of its plan, against the model's own forward on the same input.

With `--layout traced` the exported graph runs every op on the strides the model's forward
gives it, so its outputs are `model(x)`'s bits, and so are the lowered graph's. With `--layout
edge` the graph is another program in one respect: each view-like copy is declared contiguous
(as ExecuTorch allocates it), and torch picks some kernels by strides. A Linear's `addmm` reads
`W.t()` as a strided view in eager mode and as a contiguous `t_copy` in an edge graph, and
rounds differently; the lowering (whatever it relays or aliases) keeps the edge graph's bits,
which is what `check` compares. README, "Lower a torchvision model", says so."""
import pytest
import torch

from viewlower import check, export as ex, plan, replay


class ConvBnLinear(torch.nn.Module):
    """Every kind of placeholder and a weight transposed for a Linear (relaid in an edge graph)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.nn.functional.max_pool2d(y, 2)
        return self.fc(y.flatten(1))


def _bits(t):
    return replay.logical_bytes(t.contiguous())


def lowered_against_eager(lowerer, model, shape, layout, channels_last=False):
    """(eager output, the lowered graph's output replayed in its arena, the lowering's report)."""
    torch.set_num_threads(1)
    model = model.eval()
    if channels_last:
        model = ex.to_channels_last(model)
    ex.randomize_zero_parameters(model)
    inputs = ex.make_inputs([(shape, torch.float32)], channels_last=channels_last)
    with torch.no_grad():
        want = model(*[x.clone(memory_format=torch.preserve_format) for x in inputs])
    e = ex.export(model, inputs, layout_mode=layout)
    res = lowerer.lower(e.graph, {"plan": True})
    lowered, report = res["graph"], res["report"]
    assert plan.check_plan(lowered) is None
    assert check.compare_replay(e, lowered, arena=True) is None
    with torch.no_grad():
        got = replay.Run(lowered, check.stored_values(e, lowered), arena=True).complete().outputs
    assert len(got) == 1
    return want, got[0], report


@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels_last"])
def test_a_traced_graph_lowered_and_planned_gives_the_models_own_bits(lowerer, channels_last):
    torch.manual_seed(0)
    want, got, report = lowered_against_eager(lowerer, ConvBnLinear(), [2, 3, 8, 8], "traced",
                                              channels_last)
    assert report["plan"]["arena_bytes"] == report["plan"]["lower_bound_bytes"]
    assert got.shape == want.shape == (2, 10)
    assert torch.equal(_bits(got), _bits(want))


def test_an_edge_graph_relays_the_linear_weight_and_keeps_the_edge_graphs_bits(lowerer):
    torch.manual_seed(0)
    model = ConvBnLinear()
    want, got, report = lowered_against_eager(lowerer, model, [2, 3, 8, 8], "edge")
    assert [p["node"] for p in report["param_layouts"]] == ["p_fc_weight"]
    assert report["param_layouts"][0]["dim_order"] == [1, 0]
    # Not bit for bit model(x) in general (the addmm above), but the same values to rounding.
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)


ZOO = ["regnet_y_400mf", "googlenet", "densenet121", "squeezenet1_1", "mnasnet0_5"]


@pytest.mark.zoo
@pytest.mark.parametrize("name", ZOO)
def test_torchvision_models_outside_the_zoo_traced_give_their_own_bits(lowerer, name):
    import torchvision
    kwargs = {"init_weights": True} if name == "googlenet" else {}
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(**kwargs)
    want, got, _ = lowered_against_eager(lowerer, model, [1, 3, 64, 64], "traced",
                                         channels_last=name == "densenet121")
    assert torch.equal(_bits(got), _bits(want))
