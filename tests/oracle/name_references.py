#!/usr/bin/python3
"""name_references.py - gives the reference traced graphs in tests/data the placeholder names
the exporter gives (docs/format.md §8 and README: `p_fc_weight` for `fc.weight`, `b_` for
buffers, user inputs after the forward's arguments), and changes nothing else.

The references come from an exporter of the same kind run outside the project, and they differ
from ours in documented ways (tests/python/test_fidelity.py), so they are not re-made with our
exporter: each model is exported here only to learn the name of each placeholder, position by
position (the trace orders them parameters, buffers, inputs; kind, dtype and shape must agree at
every position, else the script stops), and every quoted occurrence of an old name in the file's
text is replaced by the new one: the bytes of everything else stay as they were.

usage: name_references.py [NAME...]   (default: every reference of test_fidelity, and
                                       gpt_attention_edge)
"""
import json
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from viewlower import export as ex  # noqa: E402
from test_fidelity import DATA, REFERENCES  # noqa: E402

MODELS = {name: (spec, kwargs, shape, cl, lay, train)
          for name, (spec, kwargs, shape, cl, lay, train, _) in REFERENCES.items()}
MODELS["gpt_attention_edge"] = ("viewlower.models:gpt_attention", {}, [2, 8, 64], False, "edge",
                                False)
#: gpt_attention_edge.json was traced from an earlier version of the block, without the causal
#: mask buffer and with its modules registered qkv, proj, ln: its placeholders are matched to the
#: exported ones by these qualified names (arg0_1 feeds the qkv addmm through t_copy with the
#: bias arg1_1, arg2_1/arg3_1 the output projection's, arg4_1/arg5_1 are native_layer_norm's
#: weight and bias), then checked against the export by kind, dtype and shape like the others.
BY_NAME = {"gpt_attention_edge": {"arg0_1": "p_qkv_weight", "arg1_1": "p_qkv_bias",
                                  "arg2_1": "p_proj_weight", "arg3_1": "p_proj_bias",
                                  "arg4_1": "p_ln_weight", "arg5_1": "p_ln_bias", "arg6_1": "x"}}


def placeholders(graph):
    return [n for n in graph["nodes"] if n["op"] == "placeholder" and n["kind"] != "constant"]


def rename(name):
    spec, kwargs, shape, cl, lay, train = MODELS[name]
    model = ex.build_model(spec, kwargs, train=train, channels_last=cl)
    e = ex.export(model, ex.make_inputs([(shape, torch.float32)], channels_last=cl), name=name,
                  layout_mode=lay)
    path = os.path.join(DATA, name + ".json")
    with open(path) as f:
        text = f.read()
    ref = json.loads(text)
    theirs, mine = placeholders(ref), placeholders(e.graph)
    if name in BY_NAME:
        by_name = {n["name"]: n for n in mine}
        mine = [by_name[BY_NAME[name].get(n["name"], n["name"])] for n in theirs]
    if len(theirs) != len(mine):
        sys.exit(f"{name}: {len(theirs)} placeholders in the reference, {len(mine)} exported")
    mapping = {}
    for a, b in zip(theirs, mine):
        if (a["kind"], a["val"]["dtype"], a["val"]["shape"]) != \
                (b["kind"], b["val"]["dtype"], b["val"]["shape"]):
            sys.exit(f"{name}: placeholder {a['name']} is not {b['name']}")
        if a["name"] != b["name"]:
            mapping[a["name"]] = b["name"]
    clash = set(mapping.values()) & ({n["name"] for n in ref["nodes"]} - set(mapping))
    if clash:
        sys.exit(f"{name}: new names {sorted(clash)} are taken by other nodes")
    if mapping:
        pattern = re.compile('"(' + "|".join(re.escape(k) for k in mapping) + ')"')
        text = pattern.sub(lambda m: '"' + mapping[m.group(1)] + '"', text)
        with open(path, "w") as f:
            f.write(text)
    print(f"{name}: {len(mapping)} placeholders renamed")


def main():
    torch.set_num_threads(1)
    for name in sys.argv[1:] or list(MODELS):
        rename(name)


if __name__ == "__main__":
    main()
