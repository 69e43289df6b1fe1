#!/usr/bin/env python3
"""make_seeds.py - writes the seed corpora of tests/fuzz/corpus/<harness>/ (committed; run again
only to regenerate them). Seeds are small: the example graphs, graphs using every feature of the
format, tensors of every dtype and encoding, frames, and params of every method."""
import base64, json, os, struct, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(ROOT, "examples", "graphs")


def out(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def j(obj):
    return json.dumps(obj, separators=(",", ":"))


def node(name, target, args, val, **extra):
    n = {"name": name, "op": "call_function", "target": target, "args": args, "val": val}
    n.update(extra)
    return n


def ph(name, val, **extra):
    n = {"name": name, "op": "placeholder", "val": val}
    n.update(extra)
    return n


def graph(name, nodes, outs, skip=False):
    return {"format": "viewlower.graph", "version": 1, "name": name, "skip_dim_order": skip,
            "nodes": nodes + [{"name": "out", "op": "output", "args": outs}]}


def spec(shape, order=None, dtype="float32", **extra):
    s = {"dtype": dtype, "shape": shape}
    if order is not None:
        s["dim_order"] = order
    s.update(extra)
    return s


def feature_graphs():
    cl = [0, 2, 3, 1]
    g = {}
    g["skip_dim_order"] = graph("skip", [
        ph("x", spec([1, 2, 2, 3])),
        node("x_cl", "aten._to_copy.default", ["x"], spec([1, 2, 2, 3], cl),
             kwargs={"memory_format": "channels_last"}),
        node("v", "aten.view_copy.default", ["x_cl", [1, 2, 6]], spec([1, 2, 6], [0, 2, 1])),
        node("c", "aten.clone.default", ["v"], spec([1, 2, 6]),
             kwargs={"memory_format": "contiguous_format"}),
    ], ["c"], skip=True)
    g["mutations"] = graph("mutations", [
        ph("buf", spec([4, 3]), kind="buffer", mutated=True),
        ph("y", spec([12])),
        node("v", "aten.view_copy.default", ["buf", [12]], spec([12])),
        node("s", "aten.add.Tensor", ["v", "y"], spec([12])),
        node("w", "aten.copy_.default", ["buf", "buf"], spec([4, 3])),
        node("t", "custom.scale.default", ["s", 2], spec([12]), mutates=["s"]),
        node("o", "aten.mul.Tensor", ["v", "y"], spec([12]), kwargs={"out": "y"}),
        node("r", "aten.relu_.default", ["o"], spec([12])),
    ], ["r", "t"])
    g["dynamic_strides"] = graph("dynamic", [
        ph("x", spec([8, 1, 3, 3], strides=[9, 1, 3, 1], dynamic=True)),
        node("v", "aten.view_copy.default", ["x", [8, -1]], spec([8, 9], dynamic=True)),
        node("p", "aten.permute_copy.default", ["v", [1, 0]], spec([9, 8])),
        node("t", "aten.transpose_copy.int", ["p", 0, 1], spec([8, 9])),
    ], ["t"])
    g["dtypes"] = graph("dtypes", [
        ph("a", spec([2, 3], dtype="int64")),
        ph("b", spec([6], dtype="bfloat16")),
        ph("c", spec([1, 3, 1, 2], cl, dtype="float16")),
        node("va", "aten.view_copy.default", ["a", [3, 2]], spec([3, 2], dtype="int64")),
        node("vc", "aten.view_copy.default", ["c", [3, 2]], spec([3, 2], dtype="float16")),
        node("d", "dim_order_ops._clone_dim_order.default", ["vc"], spec([3, 2], [1, 0], dtype="float16"),
             kwargs={"dim_order": [1, 0]}),
        node("s", "aten.add.Tensor", ["va", 1], spec([3, 2], dtype="int64")),
    ], ["s", "d", "b"])
    g["memory_view"] = graph("lowered", [
        ph("x", spec([2, 3])),
        node("v", "memory.view", ["x", [3, 2]], spec([3, 2]), alias_of="x"),
        node("y", "aten.relu.default", ["v"], spec([3, 2])),
    ], ["y"])
    g["rank0_empty"] = graph("rank0", [
        ph("x", spec([])),
        ph("e", spec([0, 4], dtype="bool")),
        node("v", "aten.view_copy.default", ["x", [1, 1]], spec([1, 1])),
        node("w", "aten.view_copy.default", ["e", [4, 0]], spec([4, 0], dtype="bool")),
        node("m", "aten.mul.Tensor", ["v", 3.5], spec([1, 1])),
    ], ["m", "w"])
    return g


def alias_graphs():
    """Graphs the interpreter runs whose views meet writes: every mutation rule (the reasons of
    docs/format.md §3)."""
    f = lambda shape, order=None, **e: spec(shape, order, **e)
    g = {}
    g["base_mutated"] = graph("base_mutated", [
        ph("x", f([2, 3])),
        node("b", "aten.mul.Tensor", ["x", 2.0], f([2, 3])),
        node("v", "aten.view_copy.default", ["b", [6]], f([6])),
        node("w", "aten.add_.Tensor", ["b", 1.0], f([2, 3])),
        node("r", "aten.relu.default", ["v"], f([6])),
    ], ["r", "w"])
    g["view_mutated"] = graph("view_mutated", [
        ph("x", f([2, 3])),
        node("b", "aten.mul.Tensor", ["x", 1.0], f([2, 3])),
        node("v", "aten.view_copy.default", ["b", [3, 2]], f([3, 2])),
        node("w", "aten.relu_.default", ["v"], f([3, 2])),
        node("r", "aten.add.Tensor", ["b", 1.0], f([2, 3])),
    ], ["r", "w"])
    g["out_into_view"] = graph("out_into_view", [
        ph("x", f([6])),
        ph("y", f([6])),
        node("b", "aten.mul.Tensor", ["x", 3.0], f([6])),
        node("v", "aten.view_copy.default", ["b", [2, 3]], f([2, 3])),
        node("y2", "aten.view_copy.default", ["y", [2, 3]], f([2, 3])),
        node("m", "aten.mul.Tensor", ["y2", 2.0], f([2, 3]), kwargs={"out": "v"}),
        node("r", "aten.add.Tensor", ["b", "x"], f([6])),
    ], ["r", "m"])
    g["copy_into_base"] = graph("copy_into_base", [
        ph("x", f([4, 2])),
        ph("z", f([4, 2])),
        node("b", "aten.add.Tensor", ["x", "z"], f([4, 2])),
        node("v", "aten.view_copy.default", ["b", [8]], f([8])),
        node("c", "aten.copy_.default", ["b", "z"], f([4, 2])),
        node("r", "aten.mul.Tensor", ["v", 2.0], f([8])),
    ], ["r", "c"])
    g["chain_over_write"] = graph("chain_over_write", [
        ph("x", f([2, 6])),
        node("b", "aten.mul.Tensor", ["x", 1.0], f([2, 6])),
        node("v1", "aten.view_copy.default", ["b", [12]], f([12])),
        node("w", "aten.add_.Tensor", ["b", 5.0], f([2, 6])),
        node("v2", "aten.view_copy.default", ["v1", [3, 4]], f([3, 4])),
        node("r", "aten.relu.default", ["v2"], f([3, 4])),
    ], ["r", "w"])
    g["mutated_buffer"] = graph("mutated_buffer", [
        ph("buf", f([3, 2]), kind="buffer", mutated=True),
        node("v", "aten.view_copy.default", ["buf", [6]], f([6])),
        node("w", "aten.add_.Tensor", ["buf", 1.0], f([3, 2])),
        node("r", "aten.relu.default", ["v"], f([6])),
    ], ["r"])
    g["layouts"] = graph("layouts", [
        ph("x", f([1, 2, 3, 2])),
        node("cl", "dim_order_ops._to_dim_order_copy.default", ["x"], f([1, 2, 3, 2], [0, 2, 3, 1]),
             kwargs={"dim_order": [0, 2, 3, 1]}),
        node("v", "aten.view_copy.default", ["cl", [1, 2, 6]], f([1, 2, 6], [0, 2, 1])),
        node("t", "aten.transpose_copy.int", ["v", 1, 2], f([1, 6, 2])),
        node("p", "aten.permute_copy.default", ["t", [2, 0, 1]], f([2, 1, 6])),
        node("v2", "aten.view_copy.default", ["p", [12]], f([12])),
        node("r", "aten.relu.default", ["v2"], f([12])),
    ], ["r"])
    g["layouts_3d"] = graph("layouts_3d", [
        ph("x", f([1, 2, 2, 1, 3])),
        node("cl", "aten._to_copy.default", ["x"], f([1, 2, 2, 1, 3], [0, 2, 3, 4, 1]),
             kwargs={"memory_format": "channels_last_3d"}),
        node("v", "aten.view_copy.default", ["cl", [2, 6]], f([2, 6])),
        node("c", "aten.clone.default", ["v"], f([2, 6], [1, 0]), kwargs={"memory_format": "preserve_format"}),
        node("a", "aten.add.Tensor", ["c", "v"], f([2, 6])),
    ], ["a"], skip=True)
    # layout-only nodes whose arguments give no view of their input: lowering keeps them and
    # names the argument, running them is a kernel error at it
    g["bad_layout_args"] = graph("bad_layout_args", [
        ph("x", f([2, 3])),
        node("p", "aten.permute_copy.default", ["x", [0, 0]], f([2, 3])),
        node("t", "aten.transpose_copy.int", ["x", 0, -3], f([3, 2])),
        node("s", "aten.slice_copy.Tensor", ["x", 1], f([2, 3]), kwargs={"step": 0}),
        node("q", "aten.select_copy.int", ["x", -1, 3], f([2])),
        node("u", "aten.squeeze_copy.dims", ["x", [1, -1]], f([2, 3])),
        node("a", "aten.as_strided_copy.default", ["x", [2, 3], [1]], f([2, 3])),
        node("r", "aten.t_copy.default", ["x"], f([2, 3])),
        node("z", "aten.add.Tensor", ["p", "s"], f([2, 3])),
    ], ["z", "t", "q", "u", "a", "r"])
    return g


def graphs():
    g = {}
    for f in sorted(os.listdir(EX)):
        if f.endswith(".json"):
            with open(os.path.join(EX, f)) as fh:
                g[f[:-5]] = json.load(fh)
    g.update(feature_graphs())
    g.update(alias_graphs())
    return g


def tensors():
    cl = [0, 2, 3, 1]
    t = []
    t.append(("f32_cl", {"tensor": {"dtype": "float32", "shape": [1, 2, 2, 3], "dim_order": cl,
                                     "values": list(range(12))}, "size": [1, 2, -1]}))
    t.append(("f32_special", {"tensor": {"dtype": "float32", "shape": [5],
                                          "values": ["nan", "inf", "-inf", -0.0, 1e-45]},
                               "size": [5, 1], "out_dim_order": [1, 0]}))
    t.append(("i64_strings", {"tensor": {"dtype": "int64", "shape": [2, 2],
                                          "values": ["9007199254740993", -1, 0,
                                                     "-9223372036854775808"]}, "size": [4]}))
    for dt, vals in [("uint8", [0, 255]), ("int8", [-128, 127]), ("int16", [-32768, 32767]),
                     ("int32", [-2147483648, 2147483647]), ("float16", [65504, 6e-8]),
                     ("bfloat16", [3.0e38, -1.5]), ("float64", [0.1, 1e308]), ("bool", [True, False])]:
        t.append((dt, {"tensor": {"dtype": dt, "shape": [2, 1], "values": vals}, "size": [1, -1]}))
    raw = struct.pack("<6f", *range(6))
    t.append(("base64", {"tensor": {"dtype": "float32", "shape": [2, 3], "dim_order": [1, 0],
                                     "data": base64.b64encode(raw).decode()}, "size": [3, 2],
                          "out_dim_order": [1, 0]}))
    t.append(("strides", {"tensor": {"dtype": "int32", "shape": [2, 3, 2], "strides": [6, 1, 3],
                                      "values": list(range(12))}, "size": [6, 2]}))
    t.append(("rank5_cl", {"tensor": {"dtype": "uint8", "shape": [1, 2, 1, 2, 2],
                                       "dim_order": [0, 2, 3, 4, 1], "values": list(range(8))},
                            "size": [2, 4], "out_dim_order": [1, 0]}))
    t.append(("empty", {"tensor": {"dtype": "float64", "shape": [0, 3], "values": []}, "size": [3, 0]}))
    t.append(("scalar", {"tensor": {"dtype": "float32", "shape": [], "values": [7]}, "size": []}))
    seeds = [(n, j(o).encode()) for n, o in t]
    blob = {"tensor": {"dtype": "int16", "shape": [2, 2], "blob": {"offset": 8, "nbytes": 8}},
            "size": [-1]}
    seeds.append(("blob", j(blob).encode() + b"\0" + bytes(8) + struct.pack("<4h", 1, -2, 3, -4)))
    return seeds


def frame(obj_or_text, payload=b""):
    text = obj_or_text if isinstance(obj_or_text, bytes) else j(obj_or_text).encode()
    return b"VLW1" + struct.pack(">IQ", len(text), len(payload)) + text + payload


def main():
    gs = graphs()
    for name, g in gs.items():
        out("graph", name + ".json", j(g))
    for i, (name, g) in enumerate(gs.items()):
        params = {"graph": g, "seed": i}
        if i % 3 == 1:
            params["options"] = {"policy": "legacy"}
        elif i % 3 == 2:  # executed inside one arena of the plan
            params["options"] = {"plan": True, "plan_alignment": 1 << (i % 7 * 2)}
        out("verify", name + ".json", j(params))
    out("verify", "inputs.json", j({"graph": gs["patch_embed"], "inputs": {
        "x": {"dtype": "float32", "shape": [1, 2, 2, 3], "dim_order": [0, 2, 3, 1],
              "values": list(range(12))}}, "options": {"remove_view_copy": True}}))
    for name, data in tensors():
        out("tensor", name, data)
    ping = frame({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}})
    out("frame", "ping", b"\x01\x02\x03\x04" + ping)
    out("frame", "pipelined", b"\x07\x00\x00\x00" + ping + frame(b"{}", b"\x01" * 9) + ping)
    out("frame", "empty_frame", b"\x00\x00\x00\x00" + frame(b"") + frame(b"", b"abc"))
    out("frame", "bad_magic", b"\x05\x00\x00\x00" + ping + b"VLW2" + bytes(12))
    out("frame", "too_large", b"\x09\x00\x00\x00" + b"VLW1" + struct.pack(">IQ", 0xFFFFFFFF, 2**64 - 1))
    out("frame", "partial", b"\x0b\x00\x00\x00" + ping[:-3])
    # requests the daemon scans (their graph kept as its own text), pipelined
    lower = frame({"jsonrpc": "2.0", "id": "a", "method": "lower",
                   "params": {"options": {"policy": "legacy"}, "graph": gs["patch_embed"]}})
    execute = frame({"jsonrpc": "2.0", "id": 2.5, "method": "execute",
                     "params": {"graph": gs["patch_embed"], "encoding": "base64", "inputs": {
                         "x": {"dtype": "float32", "shape": [1, 2, 2, 3], "dim_order": [0, 2, 3, 1],
                               "values": list(range(12))}}}})
    out("frame", "scanned_requests", b"\x0d\x00\x00\x00" + lower + execute + ping)
    methods = ["ping", "version", "validate", "lower", "execute", "verify", "view_copy", "stats"]
    pe = gs["patch_embed"]
    x = {"dtype": "float32", "shape": [1, 2, 2, 3], "values": list(range(12))}
    params = {
        "ping": {}, "version": {}, "stats": {},
        "validate": {"graph": gs["dtypes"]},
        "lower": {"graph": gs["mutations"], "options": {"remove_view_copy": True, "policy": "safe"}},
        "execute": {"graph": pe, "inputs": {"x": x}, "encoding": "base64"},
        "verify": {"graph": gs["inplace_after_view"], "seed": 3},
        "view_copy": {"input": x, "size": [3, -1], "out_dim_order": [1, 0], "encoding": "values"},
    }
    for i, m in enumerate(methods):
        out("service", m, bytes([i, 0]) + j(params[m]).encode())
    blob_x = {"dtype": "float32", "shape": [1, 2, 2, 3], "blob": {"offset": 0, "nbytes": 48}}
    payload = struct.pack("<12f", *range(12))
    out("service", "execute_blob", bytes([4, 48]) +
        j({"graph": pe, "inputs": {"x": blob_x}, "encoding": "blob"}).encode() + payload)
    out("service", "view_copy_blob", bytes([6, 48]) +
        j({"input": blob_x, "size": [12], "encoding": "blob"}).encode() + payload)
    # lent from inside the payload (offset 12), and a blob view_copy that moves bytes (not lent)
    tail_x = {"dtype": "float32", "shape": [9], "blob": {"offset": 12, "nbytes": 36}}
    out("service", "view_copy_blob_offset", bytes([6, 48]) +
        j({"input": tail_x, "size": [3, 3], "encoding": "blob"}).encode() + payload)
    cl_x = dict(blob_x, dim_order=[0, 2, 3, 1])
    out("service", "view_copy_blob_channels_last", bytes([6, 48]) +
        j({"input": cl_x, "size": [1, 2, -1], "encoding": "blob"}).encode() + payload)
    out("service", "unknown", bytes([9, 0]) + b"{}")
    out("service", "not_object", bytes([3, 0]) + b"[1,2]")


if __name__ == "__main__":
    sys.exit(main())
