"""Tensor specs (docs/format.md §1) in pure Python: dtypes, dim orders, strides, sizes.

Everything here is standard library only, so the client and the CLI work without torch.
A spec is the JSON object of docs/format.md §1: {"dtype", "shape", "dim_order" | "strides"},
both optional (neither: the identity order); `spec_dim_order` is the one reader of its layout.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

#: Element sizes of the dtypes the format names (ExecuTorch scalar types).
DTYPE_SIZES: Dict[str, int] = {
    "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "bool": 1,
}

CONTIGUOUS_4D = [0, 1, 2, 3]
CHANNELS_LAST = {4: [0, 2, 3, 1], 5: [0, 2, 3, 4, 1]}


def strides_from_dim_order(shape: Sequence[int], dim_order: Sequence[int]) -> List[int]:
    """Strides (in elements) of a dense layout: the innermost dim of dim_order has stride 1,
    each outer dim the next-inner stride times that dim's size (a size of 0 counts as 1)."""
    strides = [0] * len(shape)
    acc = 1
    for d in reversed(list(dim_order)):
        strides[d] = acc
        acc *= max(int(shape[d]), 1)
    return strides


def _fits(shape: Sequence[int], strides: Sequence[int], order: Sequence[int], exact: bool) -> bool:
    want = strides_from_dim_order(shape, order)
    return all(w == s for d, (w, s) in enumerate(zip(want, strides)) if exact or shape[d] > 1)


def dim_order_from_strides(shape: Sequence[int], strides: Sequence[int]) -> Optional[List[int]]:
    """The canonical dim order that produces `strides` (format.md §1), or None when the
    strides of the dims of size > 1 are not dense. Prefers the default order, then channels-last, exactly and
    then ignoring size-1 dims; otherwise dims by descending stride, ties by ascending index."""
    rank = len(shape)
    candidates = [list(range(rank))]
    if rank in CHANNELS_LAST:
        candidates.append(CHANNELS_LAST[rank])
    for exact in (True, False):
        for order in candidates:
            if _fits(shape, strides, order, exact):
                return order
    order = sorted(range(rank), key=lambda d: (-strides[d], d))
    return order if _fits(shape, strides, order, False) else None


def spec_dim_order(spec: dict) -> List[int]:
    """The dim order of a spec given with `dim_order`, with `strides`, or with neither (the
    format's default: the identity, contiguous). The one place a spec's layout is read: every
    reader of a spec that may come from a hand-written graph goes through it (or
    `spec_strides`), never `spec["dim_order"]`."""
    if "dim_order" in spec:
        return list(spec["dim_order"])
    if "strides" not in spec:
        return list(range(len(spec["shape"])))
    order = dim_order_from_strides(spec["shape"], spec["strides"])
    if order is None:
        raise ValueError(f"strides {spec['strides']} of shape {spec['shape']} are not dense")
    return order


def spec_strides(spec: dict) -> List[int]:
    """The element strides a spec declares (dense strides of `spec_dim_order`)."""
    return strides_from_dim_order(spec["shape"], spec_dim_order(spec))


def numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def nbytes(spec: dict) -> int:
    """Bytes of a tensor of this spec."""
    return numel(spec["shape"]) * DTYPE_SIZES[spec["dtype"]]


def is_physically_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """format.md §1: every dim of size > 1 has the stride the default order gives it."""
    if numel(shape) <= 1:
        return True
    return _fits(shape, strides, list(range(len(shape))), False)


def arg_refs(v: Any, out: List[str]) -> None:
    """Appends the node names an `args` value refers to (every string, nested lists too)."""
    if isinstance(v, str):
        out.append(v)
    elif isinstance(v, list):
        for x in v:
            arg_refs(x, out)
