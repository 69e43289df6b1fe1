"""The exporter against the reference traced graphs in tests/data (made by an exporter of the
same kind): same nodes, names, targets, placeholders, mutations and literals, and the same
layouts. The references differ in three documented ways, normalised here: slice ends clamped to
the dim size, in slices and slice_scatter (we keep PyTorch's INT64_MAX and negative ends, as docs/format.md §2 requires), an omitted
slice step written out, and strides of size-1 dims (any value is the same layout)."""
import json
import os

import pytest
import torch

from viewlower import export as ex, layout

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")

#: reference file → (MODEL, kwargs, input shape, channels-last, layout, train, in fast subset)
REFERENCES = {
    "patch_embed_channels_last_edge": ("viewlower.models:patch_embed", {}, [2, 3, 32, 32], True, "edge", False, True),
    "resnet18_train_traced": ("torchvision.models:resnet18", {}, [2, 3, 64, 64], False, "traced", True, False),
    "shufflenet_v2_x0_5_channels_last_edge": ("torchvision.models:shufflenet_v2_x0_5", {}, [1, 3, 64, 64], True, "edge", False, False),
    "convnext_tiny_channels_last_edge": ("torchvision.models:convnext_tiny", {}, [1, 3, 64, 64], True, "edge", False, False),
    "swin_t_edge": ("torchvision.models:swin_t", {}, [1, 3, 64, 64], False, "edge", False, False),
    "vit_b_16_channels_last_edge": ("torchvision.models:vit_b_16", {"image_size": 64}, [1, 3, 64, 64], True, "edge", False, False),
}


def layout_key(spec):
    """dtype, shape and the strides of the dims of size > 1 (the physical layout)."""
    strides = layout.spec_strides(spec)
    return (spec["dtype"], list(spec["shape"]),
            [s for s, n in zip(strides, spec["shape"]) if n > 1])


def slice_args(args, shapes):
    """(input, dim, start, end, step) of a slice_copy with PyTorch's clamping applied."""
    src, dim = args[0], args[1] if len(args) > 1 else 0
    size = shapes[src][dim]
    dim = dim % len(shapes[src])
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else size
    step = args[4] if len(args) > 4 else 1
    start = max(0, min(size, start + size if start < 0 else start))
    end = max(start, min(size, end + size if end < 0 else end))
    return [src, dim, start, end, step]


def normalised(graph):
    shapes = {}
    out = []
    for n in graph["nodes"]:
        m = dict(n)
        if "val" in n:
            shapes[n["name"]] = n["val"]["shape"]
            m["val"] = layout_key(n["val"])
        if "vals" in n:
            m["vals"] = [layout_key(v) for v in n["vals"]]
        if n.get("target") == "aten.slice_copy.Tensor":
            m["args"] = slice_args(n["args"], shapes)
        if n.get("target") == "aten.slice_scatter.default":  # (self, src, dim, start, end, step)
            a = slice_args([n["args"][0]] + n["args"][2:], shapes)
            m["args"] = [a[0], n["args"][1]] + a[1:]
        out.append(m)
    return out


CASES = [pytest.param(name, id=name, marks=[] if REFERENCES[name][6] else [pytest.mark.zoo])
         for name in REFERENCES]


@pytest.mark.parametrize("name", CASES)
def test_export_matches_the_reference_graph(name):
    spec, kwargs, shape, cl, lay, train, _ = REFERENCES[name]
    model = ex.build_model(spec, kwargs, train=train, channels_last=cl)
    e = ex.export(model, ex.make_inputs([(shape, torch.float32)], channels_last=cl),
                  name=name, layout_mode=lay)
    with open(os.path.join(DATA, name + ".json")) as f:
        ref = json.load(f)
    mine, theirs = normalised(e.graph), normalised(ref)
    assert [n["name"] for n in mine] == [n["name"] for n in theirs]
    for a, b in zip(mine, theirs):
        assert a == b, a["name"]
