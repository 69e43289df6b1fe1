#!/usr/bin/python3
"""desc_oracle.py - PyTorch as the oracle for viewlower's descriptor maps (docs/format.md §3).

Seeded random chains of layout-only ops (reshape, permute, transpose, t, squeeze, unsqueeze,
slice, select, alias, as_strided) over random layouts (every dim order, storage offsets, and the
strides earlier slices leave) run through PyTorch's own *view* ops on a real storage, and through
the layout module's maps (the desc_chain helper). After every op the two must agree: the
descriptor exists exactly when PyTorch gives a view (no error), with the same sizes, strides and
storage offset.

usage: desc_oracle.py PATH/TO/desc_chain [CHAINS] [SEED]
Exits 0 when every chain agrees, 1 on the first disagreement (printed with its chain).
"""
import json
import random
import subprocess
import sys

import torch

aten = torch.ops.aten
INT64_MAX = 2**63 - 1
STORAGE = 1 << 14


def random_base(rng):
    rank = rng.choice([0, 1, 2, 2, 3, 3, 4, 4, 5])
    shape = [rng.choice([0, 1, 1, 2, 2, 3, 4]) if rng.random() < 0.1 else rng.choice([1, 2, 3, 4])
             for _ in range(rank)]
    order = list(range(rank))
    if rng.random() < 0.7:
        rng.shuffle(order)
    strides = [0] * rank
    s = 1
    for d in reversed(order):
        strides[d] = s
        s *= max(shape[d], 1)
    return shape, strides, rng.randrange(0, 7)


def rdim(rng, rank, extra=0):
    r = max(rank + extra, 1)
    if rng.random() < 0.05:
        return rng.choice([r, -r - 1])  # out of range
    return rng.randrange(-r, r)


def random_factorization(rng, numel, rank):
    """A shape of numel elements (or, rarely, a wrong one)."""
    if numel == 0:
        return [rng.choice([0, 2, 3]) for _ in range(max(rank, 1))]
    shape = []
    n = numel
    for _ in range(rank - 1):
        divs = [d for d in range(1, n + 1) if n % d == 0]
        f = rng.choice(divs)
        shape.append(f)
        n //= f
    if rank > 0:
        shape.append(n)
    rng.shuffle(shape)
    if rng.random() < 0.2:
        shape.insert(rng.randrange(len(shape) + 1), 1)
    if rng.random() < 0.03:
        shape.append(2)  # numel mismatch
    return shape


def random_op(rng, t):
    rank = t.dim()
    sizes = list(t.shape)
    numel = t.numel()
    kind = rng.choice(["reshape"] * 4 + ["permute", "transpose", "t", "squeeze", "unsqueeze",
                                         "slice", "slice", "select", "alias", "as_strided"])
    if kind == "reshape":
        return ["reshape", random_factorization(rng, numel, rng.randrange(0, 5) if numel == 1
                                                else rng.randrange(1, 5))]
    if kind == "permute":
        dims = list(range(rank))
        rng.shuffle(dims)
        dims = [d - rank if rng.random() < 0.3 else d for d in dims]
        if rng.random() < 0.05 and rank > 1:
            dims[0] = dims[1]  # not a permutation
        return ["permute", dims]
    if kind == "transpose":
        return ["transpose", rdim(rng, rank), rdim(rng, rank)]
    if kind == "t":
        return ["t"]
    if kind == "squeeze":
        return ["squeeze"] if rng.random() < 0.4 else ["squeeze", [rdim(rng, rank)]]
    if kind == "unsqueeze":
        return ["unsqueeze", rdim(rng, rank, 1)]
    if kind == "slice":
        d = rdim(rng, rank)
        size = sizes[d] if -rank <= d < rank and rank > 0 else 1
        start = rng.choice([None, 0, 1, -1, -size - 2, size, size + 3, INT64_MAX,
                            rng.randrange(-size - 1, size + 2)])
        end = rng.choice([None, INT64_MAX, size, -1, 0, rng.randrange(-size - 1, size + 2)])
        step = rng.choice([1, 1, 1, 2, 3]) if rng.random() > 0.03 else 0
        return ["slice", d, start, end, step]
    if kind == "select":
        d = rdim(rng, rank)
        size = sizes[d] if -rank <= d < rank and rank > 0 else 1
        return ["select", d, rng.randrange(-size - 1, size + 1)]
    if kind == "alias":
        return ["alias"]
    r = rng.randrange(0, 4)
    size = [rng.randrange(0, 4) for _ in range(r)]
    stride = [rng.randrange(0, 9) for _ in range(r)]
    if rng.random() < 0.05 and r > 0:
        stride[0] = -1
    return ["as_strided", size, stride, rng.randrange(0, 9)]


def torch_apply(t, op):
    name = op[0]
    if name == "reshape":
        return aten.view.default(t, op[1])
    if name == "permute":
        return aten.permute.default(t, op[1])
    if name == "transpose":
        return aten.transpose.int(t, op[1], op[2])
    if name == "t":
        return aten.t.default(t)
    if name == "squeeze":
        return aten.squeeze.default(t) if len(op) == 1 else aten.squeeze.dim(t, op[1][0])
    if name == "unsqueeze":
        return aten.unsqueeze.default(t, op[1])
    if name == "slice":
        return aten.slice.Tensor(t, op[1], op[2], op[3], op[4])
    if name == "select":
        return aten.select.int(t, op[1], op[2])
    if name == "alias":
        return aten.alias.default(t)
    if name == "as_strided":
        return aten.as_strided.default(t, op[1], op[2], t.storage_offset() + op[3])
    raise ValueError(name)


def main():
    helper = sys.argv[1]
    chains = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261201
    rng = random.Random(seed)
    storage = torch.zeros(STORAGE)
    cases, expected = [], []
    counts = {}
    for _ in range(chains):
        shape, strides, offset = random_base(rng)
        t = storage.as_strided(shape, strides, offset)
        ops, want = [], []
        for _ in range(rng.randrange(1, 7)):
            op = random_op(rng, t)
            ops.append(op)
            try:
                t = torch_apply(t, op)
            except (RuntimeError, IndexError):
                want.append(None)
                counts[op[0] + " fails"] = counts.get(op[0] + " fails", 0) + 1
                break
            counts[op[0]] = counts.get(op[0], 0) + 1
            want.append({"shape": list(t.shape), "strides": list(t.stride()),
                         "offset": t.storage_offset()})
        cases.append({"shape": shape, "strides": strides, "offset": offset, "ops": ops})
        expected.append(want)
    text = "".join(json.dumps(c) + "\n" for c in cases)
    res = subprocess.run([helper], input=text.encode(), capture_output=True, timeout=600)
    if res.returncode != 0:
        print("desc_chain failed (%d): %s" % (res.returncode, res.stderr.decode()))
        return 1
    lines = res.stdout.decode().splitlines()
    if len(lines) != len(cases):
        print("desc_chain answered %d chains of %d" % (len(lines), len(cases)))
        return 1
    for case, want, line in zip(cases, expected, lines):
        got = json.loads(line)
        if got != want:
            print("chain %s\n  PyTorch: %s\n  layout:  %s" % (json.dumps(case), want, got))
            return 1
    for k in ["reshape", "reshape fails", "permute", "transpose", "t", "squeeze", "unsqueeze",
              "slice", "select", "alias", "as_strided", "as_strided fails"]:
        if counts.get(k, 0) == 0:
            print("vacuous: no chain exercised %s" % k)
            return 1
    print("%d chains agree with PyTorch %s: %s" % (len(cases), torch.__version__,
                                                   json.dumps(dict(sorted(counts.items())))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
