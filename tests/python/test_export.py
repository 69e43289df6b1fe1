"""The exporter: spelling of targets, placeholders, layouts, literals, multi-output nodes,
mutations, the split rewrite, and errors that name the node."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from viewlower import export as ex
from viewlower import check, layout
from viewlower.errors import ExportError

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def exported(model, *shapes, layout="edge", skip=False, cl=False, dtype=torch.float32):
    torch.manual_seed(0)
    model.eval()
    if cl:
        model = ex.to_channels_last(model)
    inputs = ex.make_inputs([(list(s), dtype) for s in shapes], channels_last=cl)
    return ex.export(model, inputs, name="m", layout_mode=layout, skip_dim_order=skip)


def nodes_of(e, target):
    return [n for n in e.graph["nodes"] if n.get("target") == target]


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def test_resnet18_in_train_mode_exports_exactly_the_reference_traced_graph():
    torch.manual_seed(0)
    m = ex.build_model("torchvision.models:resnet18", {}, train=True)
    inputs = ex.make_inputs([([2, 3, 64, 64], torch.float32)])
    e = ex.export(m, inputs, name="resnet18_train_traced", layout_mode="traced")
    with open(os.path.join(DATA, "resnet18_train_traced.json")) as f:
        ref = json.load(f)
    assert e.graph["nodes"] == ref["nodes"]
    bn = nodes_of(e, "aten.native_batch_norm.default")[0]
    assert bn["mutates"] == [bn["args"][3], bn["args"][4]]  # running mean and var
    assert "vals" in bn and "val" not in bn
    buffers = [n for n in e.graph["nodes"] if n.get("kind") == "buffer"]
    assert buffers and all(n.get("mutated") for n in buffers)


def test_eval_mode_batch_norm_writes_nothing_and_marks_nothing_mutated():
    e = exported(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), (1, 3, 8, 8))
    assert not any("mutates" in n or n.get("mutated") for n in e.graph["nodes"])


def test_parameters_and_buffers_are_placeholders_and_a_weight_transpose_is_t_copy():
    e = exported(nn.Linear(4, 3), (2, 4), layout="traced")
    kinds = [n["kind"] for n in e.graph["nodes"] if n["op"] == "placeholder"]
    assert kinds == ["parameter", "parameter", "user_input"]
    (t,) = nodes_of(e, "aten.t_copy.default")
    assert t["args"] == ["p_weight"] and t["val"]["strides"] == [1, 4]  # as traced


class Named(nn.Module):
    """Qualified names with dots, a Sequential index, a buffer, and two names that only differ
    in a dot (`a.b_c` and `a_b.c` both give `a_b_c`)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.body = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
        self.a = nn.Module()
        self.a.b_c = nn.Parameter(torch.ones(3))
        self.a_b = nn.Module()
        self.a_b.c = nn.Parameter(torch.ones(3))

    def forward(self, image, scale):
        return self.body(self.fc(image)) * scale + self.a.b_c + self.a_b.c


def test_placeholders_are_named_after_qualified_names_as_torch_export_does():
    e = exported(Named(), (2, 4), (2, 3))
    ph = [(n["name"], n["kind"]) for n in e.graph["nodes"] if n["op"] == "placeholder"]
    assert ph == [("p_fc_weight", "parameter"), ("p_fc_bias", "parameter"),
                  ("p_body_0_weight", "parameter"), ("p_body_0_bias", "parameter"),
                  ("p_body_1_weight", "parameter"), ("p_body_1_bias", "parameter"),
                  ("p_a_b_c", "parameter"), ("p_a_b_c_1", "parameter"),
                  ("b_body_1_running_mean", "buffer"), ("b_body_1_running_var", "buffer"),
                  ("b_body_1_num_batches_tracked", "buffer"),
                  ("image", "user_input"), ("scale", "user_input")]
    (t,) = [n for n in nodes_of(e, "aten.t_copy.default") if n["args"] == ["p_fc_weight"]]
    assert set(e.values) >= {"p_fc_weight", "b_body_1_running_var", "image", "scale"}
    assert torch.equal(e.values["p_fc_weight"], dict(Named().named_parameters())["fc.weight"])


def test_a_placeholder_name_taken_by_another_node_gets_the_next_free_suffix():
    names = ex.placeholder_names(
        [{"name": "arg0_1", "op": "placeholder", "kind": "parameter"},
         {"name": "arg1_1", "op": "placeholder", "kind": "user_input"},
         {"name": "p_w", "op": "call_function"}, {"name": "p_w_1", "op": "call_function"},
         {"name": "x", "op": "call_function"}], ["w"], [], ["x"])
    assert names == {"arg0_1": "p_w_2", "arg1_1": "x_1"}


def test_a_renamed_placeholder_is_renamed_in_every_reference():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    e = ex.export(m, ex.make_inputs([([2, 3, 8, 8], torch.float32)]), layout_mode="traced")
    (bn,) = nodes_of(e, "aten.native_batch_norm.default")
    assert bn["args"][:5] == ["convolution", "p_1_weight", "p_1_bias", "b_1_running_mean",
                              "b_1_running_var"]
    assert bn["mutates"] == ["b_1_running_mean", "b_1_running_var"]
    (add,) = [n for n in nodes_of(e, "aten.add.Tensor") if n["args"][0] == "b_1_num_batches_tracked"]
    (copy_,) = [n for n in nodes_of(e, "aten.copy_.default")
                if n["args"][0] == "b_1_num_batches_tracked"]
    assert copy_["args"][1] == add["name"]


def test_edge_layout_declares_view_like_copies_contiguous():
    e = exported(nn.Linear(4, 3), (2, 4), layout="edge")
    (t,) = nodes_of(e, "aten.t_copy.default")
    assert t["val"]["strides"] == [3, 1]


def test_gpt_attention_split_becomes_slices_and_masking_keeps_minus_infinity():
    from viewlower.models import gpt_attention
    e = exported(gpt_attention(), (2, 8, 64))
    targets = {n.get("target") for n in e.graph["nodes"]}
    assert not targets & check.SPLIT_PRODUCERS
    slices = [n for n in nodes_of(e, "aten.slice_copy.Tensor") if n["name"].startswith("getitem")]
    assert [n["args"][1:] for n in slices] == [[2, 0, 64, 1], [2, 64, 128, 1], [2, 128, 192, 1]]
    (fill,) = nodes_of(e, "aten.masked_fill.Scalar")
    assert fill["args"][2] == {"float": "-inf"}
    (mul,) = [n for n in nodes_of(e, "aten.mul.Tensor") if not isinstance(n["args"][1], str)]
    assert mul["args"][1] == 0.25 and isinstance(mul["args"][1], float)
    (ln,) = nodes_of(e, "aten.native_layer_norm.default")
    assert len(ln["vals"]) == 3
    getitems = [n for n in nodes_of(e, "operator.getitem") if n["args"][0] == ln["name"]]
    assert [g["val"] for g in getitems] == ln["vals"]


def test_the_split_rewrite_keeps_every_value_of_the_trace():
    from viewlower.models import gpt_attention
    e = exported(gpt_attention(), (2, 8, 64), layout="traced")
    assert check.compare_with_trace(e) is None


def test_int64_max_slice_ends_stay_exact_and_whole_floats_stay_float_tokens():
    e = exported(Lambda(lambda x: x[:, 1:] * 2.0), (3, 5))
    (s,) = [n for n in nodes_of(e, "aten.slice_copy.Tensor") if n["args"][1] == 1]
    assert s["args"][2:4] == [1, 9223372036854775807]
    text = ex.export_text(e.graph)
    assert "9223372036854775807" in text
    assert ',2.0]' in text


def test_layout_conversions_use_dim_order_ops_or_memory_format_when_skipping():
    m = Lambda(lambda x: (x.contiguous(memory_format=torch.channels_last) + 1).to(
        memory_format=torch.contiguous_format))
    e = exported(m, (1, 2, 3, 4))
    (clone,) = nodes_of(e, "dim_order_ops._clone_dim_order.default")
    assert clone["kwargs"] == {"dim_order": [0, 2, 3, 1]}
    assert clone["val"]["strides"] == [24, 1, 8, 2]
    (to,) = nodes_of(e, "dim_order_ops._to_dim_order_copy.default")
    assert to["kwargs"]["dim_order"] == [0, 1, 2, 3] and "memory_format" not in to["kwargs"]
    s = exported(m, (1, 2, 3, 4), skip=True)
    assert s.graph["skip_dim_order"] is True
    assert nodes_of(s, "aten.clone.default")[0]["kwargs"] == {"memory_format": "channels_last"}
    assert nodes_of(s, "aten._to_copy.default")[0]["kwargs"]["memory_format"] == "contiguous_format"
    assert not any(n.get("target", "").startswith("dim_order_ops") for n in s.graph["nodes"])


def test_a_positional_dtype_moves_to_kwargs_under_its_schema_name():
    e = exported(Lambda(lambda x: x.view(torch.int32) + 1), (2, 3))
    (v,) = nodes_of(e, "aten.view_copy.dtype")
    assert v["args"] == ["xs_0"] and v["kwargs"] == {"dtype": "int32"}


def test_an_in_place_write_to_a_user_input_marks_it_mutated():
    e = exported(Lambda(lambda x: x.add_(1.0) * 3.0), (2, 2))
    (x,) = [n for n in e.graph["nodes"] if n.get("kind") == "user_input"]
    assert x.get("mutated") is True
    (c,) = nodes_of(e, "aten.copy_.default")
    assert c["args"][0] == x["name"]


def test_a_tensor_of_a_dtype_the_format_lacks_is_an_error_naming_the_node():
    with pytest.raises(ExportError) as err:
        exported(Lambda(lambda x: (x.to(torch.complex64) * 2).abs()), (2, 2))
    assert err.value.path.startswith("/nodes/")
    assert "complex" in str(err.value)
    idx = int(err.value.path.split("/")[2])
    assert idx >= 1


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    return subprocess.run([sys.executable, "-m", "viewlower", *args], capture_output=True,
                          text=True, env=env, timeout=300, **kw)


def test_cli_export_writes_a_graph_viewlowerctl_validates(tmp_path, viewlowerctl):
    out = tmp_path / "g.json"
    p = _cli("export", "viewlower.models:patch_embed", "--input", "2,3,32,32", "--channels-last",
             "-o", str(out))
    assert p.returncode == 0, p.stderr
    g = json.loads(out.read_text())
    assert g["name"] == "patch_embed_channels_last_edge"
    v = subprocess.run([viewlowerctl, "--local", "validate", str(out)], capture_output=True)
    assert v.returncode == 0, v.stderr


def test_cli_usage_errors_exit_64_and_a_bad_model_names_itself():
    assert _cli("export").returncode == 64
    p = _cli("export", "no.such.module:thing", "--input", "1")
    assert p.returncode == 64 and "no.such.module" in p.stderr


def test_a_replay_that_leaves_other_running_statistics_is_a_mismatch():
    import copy
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).train()
    e = ex.export(m, ex.make_inputs([([2, 3, 8, 8], torch.float32)]), layout_mode="traced")
    assert check.compare_replay(e, e.graph) is None
    tampered = copy.deepcopy(e.graph)
    (bn,) = [n for n in tampered["nodes"] if n.get("target") == "aten.native_batch_norm.default"]
    bn["args"][6] = 0.5  # another momentum: same outputs in train mode, other running statistics
    found = check.compare_replay(e, tampered)
    assert found is not None and found["node"] == bn["mutates"][0]


def test_a_replayed_alias_past_its_owners_buffer_is_a_mismatch_naming_it():
    import copy
    from viewlower.models import patch_embed
    e = exported(patch_embed(), (2, 3, 32, 32), cl=True)
    bad = copy.deepcopy(e.graph)
    (flat,) = nodes_of_graph(bad, "aten.view_copy.default")
    flat.update(target="memory.view", alias_of=flat["args"][0], offset=100000)
    found = check.compare_replay(e, bad)
    assert found["node"] == flat["name"] and "memory.view" in found["actual"]


def nodes_of_graph(g, target):
    return [n for n in g["nodes"] if n.get("target") == target]


@pytest.mark.parametrize("layout", ["edge", "traced"])
def test_dropout_in_train_mode_replays_bit_exact_and_another_probability_is_a_mismatch(layout):
    """Dropout traces as bernoulli_ into an empty_like (after an expand of an empty): every run
    zero-fills the uninitialised results and starts torch's generator from one seed, so two runs
    agree bit for bit, and a changed probability still shows."""
    import copy
    from viewlower import replay
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 64), nn.Dropout(0.3)).train()
    e = ex.export(m, ex.make_inputs([([4, 8], torch.float32)]), layout_mode=layout)
    assert nodes_of(e, "aten.empty_like.default") and nodes_of(e, "aten.bernoulli_.float")
    r = replay.run(e.graph, e.values)
    for n in e.graph["nodes"]:
        if n.get("target") in replay.UNINITIALISED:
            assert not r.env[n["name"]].any() or n["name"] in {
                m["args"][0] for m in nodes_of(e, "aten.bernoulli_.float")}
    assert check.compare_replay(e, e.graph) is None
    if layout == "traced":
        assert check.compare_with_trace(e) is None
    tampered = copy.deepcopy(e.graph)
    (b,) = nodes_of_graph(tampered, "aten.bernoulli_.float")
    b["args"][1] = 0.25
    found = check.compare_replay(e, tampered)
    assert found is not None and found["node"] == b["name"]


def test_channels_last_lays_out_a_video_model_channels_last_3d_and_keeps_other_ranks():
    """torch's Module.to(memory_format=channels_last) refuses a 5-D weight; --channels-last
    gives rank-5 parameters and inputs channels-last-3d, rank-4 ones channels-last."""
    m = nn.Sequential(nn.Conv3d(3, 4, 3), nn.Flatten(), nn.Linear(4 * 2 * 2 * 2, 5))
    e = exported(m, (1, 3, 4, 4, 4), cl=True)
    dim_orders = {n["name"]: layout.spec_dim_order(n["val"]) for n in e.graph["nodes"]
                  if n["op"] == "placeholder"}
    assert dim_orders == {"p_0_weight": [0, 2, 3, 4, 1], "p_0_bias": [0],
                          "p_2_weight": [0, 1], "p_2_bias": [0], "input": [0, 2, 3, 4, 1]}
    assert check.compare_replay(e, e.graph) is None
    conv = ex.to_channels_last(nn.Conv2d(3, 4, 3))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_channels_last_gives_ambiguous_kernels_channels_last_strides_as_module_to_does():
    """A 1x1 kernel and a depthwise one are contiguous and channels-last at once; torch's
    convolution picks its output's layout from the strides the weight carries, so they must be
    the channels-last ones Module.to(memory_format=channels_last) gives, or a channels-last
    model's pointwise and depthwise convolutions come out contiguous (ShuffleNet, ConvNeXt)."""
    for conv in (nn.Conv2d(4, 6, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4)):
        ours = ex.to_channels_last(copy.deepcopy(conv))
        theirs = copy.deepcopy(conv).to(memory_format=torch.channels_last)
        assert ours.weight.stride() == theirs.weight.stride()
        e = exported(conv, (1, 4, 5, 5), cl=True)
        outs = [n for n in e.graph["nodes"] if n.get("target") == "aten.convolution.default"]
        assert [layout.spec_dim_order(n["val"]) for n in outs] == [[0, 2, 3, 1]]


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a value asked of a traced tensor
            return x.flatten(1)
        return x


class Asserting(nn.Module):
    def forward(self, x):
        torch._assert(x.shape[-1] == 5, "need width 5")  # as torchvision's ViT checks sizes
        return x.flatten(1)


def test_an_assertion_of_the_model_is_a_failed_trace_too():
    """torch._assert raises AssertionError, which escaped as a traceback (exit 1, the mismatch
    code, and no JSON): vit_b_16 given 64x64 images without image_size=64."""
    with pytest.raises(ExportError) as e:
        exported(Asserting(), [1, 3, 4, 4])
    line = Asserting.forward.__code__.co_firstlineno + 1
    assert e.value.kind == "trace_failed"
    assert str(e.value) == ("tracing the model failed: AssertionError: need width 5 "
                            f"(at test_export.py:{line}, in forward)"), str(e.value)


def test_a_failed_trace_names_the_line_of_the_model_that_caused_it():
    with pytest.raises(ExportError) as e:
        exported(DataDependent(), [1, 3, 4, 4])
    line = DataDependent.forward.__code__.co_firstlineno + 1
    assert e.value.kind == "trace_failed"
    assert str(e.value).endswith(f"(at test_export.py:{line}, in forward)"), str(e.value)


def test_an_output_that_is_not_a_tensor_is_named_by_its_position_and_value():
    """A model returning (x.sum(), x.shape[0]) was refused as "model output 2 is not a tensor":
    2 was the value (the batch size), which read as the output's position."""
    with pytest.raises(ExportError) as e:
        exported(Lambda(lambda x: (x.sum(), {"n": x.shape[0]})), [2, 3])
    assert e.value.kind == "unsupported"
    assert e.value.path == "/nodes/2/args"
    assert e.value.message == ("output 1 of the model (counting the leaves of its lists, "
                               "tuples and dicts from 0) is int 2, not a tensor: every output "
                               "of a graph is a tensor")


def test_a_failed_trace_names_no_frame_of_generated_code():
    """Two inputs to a model of one: the TypeError is raised where the trace's generated wrapper
    (`<string>`) calls the model, and the message named that: `(at <string>:1, in <lambda>)`."""
    with pytest.raises(ExportError) as e:
        exported(nn.ReLU(), [2, 3], [2, 3])
    assert e.value.kind == "trace_failed"
    assert "<string>" not in str(e.value) and "<lambda>" not in str(e.value), str(e.value)
    assert str(e.value).startswith("tracing the model failed: TypeError:"), str(e.value)


def test_a_dtype_the_format_cannot_carry_names_the_node_and_its_op():
    """torch.fft.rfft gives complex64: the error said only `/nodes/1: dtype torch.complex64 is
    not one of the graph format's dtypes`, naming neither the node nor the op."""
    with pytest.raises(ExportError) as e:
        exported(Lambda(lambda x: torch.fft.rfft(x, dim=-1).abs()), [2, 8])
    assert e.value.kind == "unsupported" and e.value.path == "/nodes/1"
    assert e.value.message.startswith("node _fft_r2c (aten._fft_r2c.default): dtype "
                                      "torch.complex64 is not one of the graph format's dtypes"), \
        e.value.message


@pytest.mark.parametrize("fmt,shape", [(torch.channels_last, [2, 3, 4]),
                                       (torch.channels_last_3d, [2, 3, 4, 5])])
def test_contiguous_in_a_memory_format_of_another_rank_fails_the_trace_as_in_eager(fmt, shape):
    """x.contiguous(memory_format=channels_last) of a rank-3 tensor raises in eager ("required
    rank 4 tensor"); the trace's stand-in for contiguous() returned x, so check called a model
    equal that torch cannot run."""
    m = Lambda(lambda x: x.contiguous(memory_format=fmt) * 2)
    with pytest.raises(RuntimeError, match="required rank"):
        m(torch.randn(shape))
    with pytest.raises(ExportError) as e:
        exported(m, shape)
    assert e.value.kind == "trace_failed" and "required rank" in str(e.value), str(e.value)
