#!/usr/bin/python3
"""fold_replay.py - PyTorch replays every lowering of real traced graphs (docs/format.md §3).

Each graph is lowered by `viewlowerctl --local lower` with fold on and off; the original and the
lowered graph then run in torch (python/viewlower/replay.py: every memory.view a real
torch.as_strided alias of its base's storage at its offset, as_strided_copy as such, in-place
ops on shared storage) on the same seeded inputs. Every output and every mutated input's final
state must agree bit for bit. `--expect NAME=BYTES` also requires the fold lowering of NAME to
leave exactly BYTES layout-only bytes copied.

usage: fold_replay.py PATH/TO/viewlowerctl [--expect NAME=BYTES]... GRAPH...
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from viewlower import replay  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "float64": torch.float64,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}


def inputs(graph):
    gen = torch.Generator().manual_seed(20261201)
    vals = {}
    for n in graph["nodes"]:
        if n["op"] != "placeholder":
            continue
        shape, dt = n["val"]["shape"], DTYPES[n["val"]["dtype"]]
        if dt.is_floating_point:
            vals[n["name"]] = torch.randn(shape, generator=gen).to(dt)
        else:
            hi = 2 if dt == torch.bool else 5
            vals[n["name"]] = torch.randint(0, hi, shape, generator=gen).to(dt)
    return vals


def differs(a, b):
    return [k for k, (x, y) in enumerate(zip(a, b)) if replay.first_difference(x, y)]


def main():
    ctl, args = sys.argv[1], sys.argv[2:]
    expect, graphs = {}, []
    while args:
        a = args.pop(0)
        if a == "--expect":
            name, value = args.pop(0).split("=")
            expect[name] = int(value)
        else:
            graphs.append(a)
    failed = 0
    for path in graphs:
        # validate prints every val in full (dim_order included), as the replay wants it
        res = subprocess.run([ctl, "--local", "validate", path], capture_output=True, timeout=300)
        if res.returncode != 0:
            print("%s: validate failed: %s" % (path, res.stderr.decode().strip()))
            failed += 1
            continue
        graph = json.loads(res.stdout)
        vals = inputs(graph)
        want = replay.run(graph, {k: v.clone() for k, v in vals.items()})
        name = os.path.basename(path)[:-5]
        for flags in ([], ["--no-fold"]):
            res = subprocess.run([ctl, "--local", "lower", path] + flags, capture_output=True,
                                 timeout=300)
            if res.returncode != 0:
                print("%s %s: lower failed: %s" % (name, flags, res.stderr.decode().strip()))
                failed += 1
                continue
            low = json.loads(res.stdout)
            got = replay.run(low["graph"], {k: v.clone() for k, v in vals.items()})
            bad = differs(want.outputs, got.outputs)
            ws, gs = want.final_state(), got.final_state()
            bad_state = [k for k in ws if replay.first_difference(ws[k], gs[k])]
            r = low["report"]
            mode = " ".join(flags) or "fold"
            print("%-40s %-9s %s: %d layout-only, %d replaced, %d kept, %d merged, %d removed "
                  "dead; %d bytes still copied" % (name, mode, "equal" if not (bad or bad_state)
                                                   else "DIFFERENT", r["layout_copy_nodes"],
                                                   r["replaced"], r["kept"], r["merged"],
                                                   r["removed_dead"], r["bytes_copied"]))
            if bad or bad_state:
                print("  outputs %s, mutated inputs %s differ" % (bad, bad_state))
                failed += 1
            if not flags and name in expect and r["bytes_copied"] != expect[name]:
                print("  bytes_copied %d, want %d" % (r["bytes_copied"], expect[name]))
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
