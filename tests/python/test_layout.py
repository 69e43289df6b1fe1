"""A tensor spec may omit `dim_order` (and `strides`): the format's default is the identity
order. Every reader of a spec in the front end takes it so, through layout.spec_dim_order:
the layout helpers, the weights file, the replay and the client's blob decoding."""
import json
import struct

import torch

from viewlower import client as vc, layout, replay, weights

#: A hand-written graph whose specs give no dim_order: x + p_w, then a view_copy.
HAND = {
    "format": "viewlower.graph", "version": 1, "name": "hand", "nodes": [
        {"name": "x", "op": "placeholder", "kind": "user_input",
         "val": {"dtype": "float32", "shape": [2, 3]}},
        {"name": "p_w", "op": "placeholder", "kind": "parameter",
         "val": {"dtype": "float32", "shape": [2, 3]}},
        {"name": "y", "op": "call_function", "target": "aten.add.Tensor", "args": ["x", "p_w"],
         "val": {"dtype": "float32", "shape": [2, 3]}},
        {"name": "v", "op": "call_function", "target": "aten.view_copy.default",
         "args": ["y", [3, 2]], "val": {"dtype": "float32", "shape": [3, 2]}},
        {"name": "output", "op": "output", "args": ["v"]}]}


def test_a_spec_without_dim_order_is_in_the_identity_order():
    for shape, strides in (([2, 3], [3, 1]), ([], []), ([2, 3, 4, 5], [60, 20, 5, 1]),
                           ([0, 4], [4, 1])):
        spec = {"dtype": "float32", "shape": shape}
        assert layout.spec_dim_order(spec) == list(range(len(shape)))
        assert layout.spec_strides(spec) == strides


def test_the_weights_of_a_graph_without_dim_order_are_stored_contiguous():
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    stored = weights.apply_param_layouts({"w": w}, HAND)
    assert list(stored) == ["w"] and stored["w"].stride() == (3, 1)
    assert torch.equal(stored["w"], w)
    data = weights.weights_bytes(HAND, {"w": w})
    (hlen,) = struct.unpack("<Q", data[8:16])
    (entry,) = json.loads(data[16:16 + hlen])["tensors"]
    assert (entry["node"], entry["name"], entry["dim_order"], entry["offset"], entry["nbytes"]) \
        == ("p_w", "w", [0, 1], 0, 24)
    start = (16 + hlen + 63) // 64 * 64
    assert data[start:start + 24] == struct.pack("<6f", 0, 1, 2, 3, 4, 5)


def test_the_replay_runs_a_graph_without_dim_order():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    w = torch.tensor([[0.5, 0.25, -1.0], [8.0, -0.0, 2.0]])
    assert replay.declared_layout(HAND["nodes"][3], 0, torch.empty(3, 2)) == [2, 1]
    r = replay.Run(HAND, {"x": x, "p_w": w})
    for _ in r:
        pass
    (out,) = r.outputs
    assert out.stride() == (2, 1)
    assert torch.equal(out, torch.tensor([[1.5, 2.25], [2.0, 12.0], [5.0, 8.0]]))


def test_a_result_blob_without_dim_order_decodes_contiguous():
    payload = memoryview(struct.pack("<6f", 0, 1, 2, 3, 4, 5))
    spec = {"dtype": "float32", "shape": [3, 2], "blob": {"offset": 0, "nbytes": 24}}
    t = vc.decode_tensor(spec, payload, "torch")
    assert t.stride() == (2, 1) and t.tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
