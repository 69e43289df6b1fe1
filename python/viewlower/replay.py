"""Runs a graph of SPEC §2 in torch, with real aliases, and compares runs bit for bit.

Every node that owns a buffer gets a fresh tensor in exactly its declared layout (`val`), so the
bytes sit where the graph says they sit. A `memory.view` is `torch.as_strided` on the storage of
its `args[0]` (from that tensor's own storage offset plus the node's `offset`) with the strides of
its declared layout, so a wrong alias reads the wrong bytes, as it would on a device.
`aten.as_strided_copy.default` reads its input's buffer the same way (SPEC §3a). In-place ops
write into their argument's storage; `mutates` ops write the tensors they are given.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from . import layout
from .errors import ExportError

#: Names of torch dtypes as SPEC §1 spells them.
DTYPES = {name: getattr(torch, name) for name in layout.DTYPE_SIZES}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "channels_last": torch.channels_last,
                  "channels_last_3d": torch.channels_last_3d,
                  "preserve_format": torch.preserve_format}
LAYOUTS = {"strided": torch.strided}


def dtype_name(dt: torch.dtype, where: str = "") -> str:
    if dt not in DTYPE_NAMES:
        raise ExportError(f"dtype {dt} is not one of SPEC §1's dtypes", kind="unsupported",
                          path=where)
    return DTYPE_NAMES[dt]


# ---- literals ------------------------------------------------------------------------------

def decode_literal(v: Any) -> Any:
    """A JSON literal as torch takes it ({"float": "inf"} → inf)."""
    if isinstance(v, dict) and set(v) == {"float"}:
        return float(v["float"])
    if isinstance(v, list):
        return [decode_literal(x) for x in v]
    return v


def decode_kwarg(key: str, v: Any) -> Any:
    if isinstance(v, str):
        if key == "dtype":
            return DTYPES[v]
        if key == "memory_format":
            return MEMORY_FORMATS[v]
        if key == "layout":
            return LAYOUTS[v]
        if key == "device":
            return torch.device(v)
    return decode_literal(v)


# ---- targets -------------------------------------------------------------------------------

def _to_dim_order_copy(x: torch.Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
                       pin_memory: Any = None, non_blocking: bool = False, dim_order: Any = None,
                       memory_format: Any = None) -> torch.Tensor:
    # The layout is applied when the result is placed in the node's declared layout.
    return x.to(dtype=dtype, copy=True) if dtype is not None else x.clone()


def _clone_dim_order(x: torch.Tensor, *, non_blocking: bool = False,
                     dim_order: Any = None) -> torch.Tensor:
    return x.clone()


def _as_strided_copy(x: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                     storage_offset: Optional[int] = None) -> torch.Tensor:
    # SPEC §3a: reads x's buffer from x's own offset on (x may be a memory.view alias).
    return torch.as_strided(x, list(size), list(stride),
                            x.storage_offset() + int(storage_offset or 0)).clone()


SPECIAL_TARGETS: Dict[str, Callable[..., Any]] = {
    "dim_order_ops._to_dim_order_copy.default": _to_dim_order_copy,
    "dim_order_ops._clone_dim_order.default": _clone_dim_order,
    "aten.as_strided_copy.default": _as_strided_copy,
}


def resolve(target: str, where: str) -> Callable[..., Any]:
    """The torch callable of a `namespace.operator.overload` target."""
    if target in SPECIAL_TARGETS:
        return SPECIAL_TARGETS[target]
    parts = target.split(".")
    if len(parts) not in (2, 3):
        raise ExportError(f"target {target} is not namespace.operator[.overload]", path=where)
    try:
        packet = getattr(getattr(torch.ops, parts[0]), parts[1])
        return getattr(packet, parts[2] if len(parts) == 3 else "default")
    except (AttributeError, RuntimeError):
        raise ExportError(f"torch has no operator {target}", kind="unknown_target", path=where)


def writes_arg0(target: str) -> bool:
    """SPEC §3: an operator name ending in `_` writes argument 0."""
    parts = target.split(".")
    return len(parts) >= 2 and parts[1].endswith("_")


# ---- running -------------------------------------------------------------------------------

def place(value: torch.Tensor, strides: Sequence[int]) -> torch.Tensor:
    """A fresh tensor that owns its buffer, with `value`'s elements in the given layout."""
    out = torch.empty_strided(tuple(value.shape), tuple(strides), dtype=value.dtype)
    out.copy_(value)
    return out


def logical_bytes(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements in logical order as raw bytes (bit-exact comparison, NaNs too)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


class Run:
    """One execution of a graph: `env` maps node names to tensors (tuples for multi-output
    producers); `snapshots` holds, when asked for, each node's value right after it ran."""

    def __init__(self) -> None:
        self.env: Dict[str, Any] = {}
        self.snapshots: Dict[str, torch.Tensor] = {}
        self.outputs: List[torch.Tensor] = []
        self.order: List[str] = []


LayoutFn = Callable[[dict, int, torch.Tensor], Sequence[int]]


def declared_layout(node: dict, i: int, value: torch.Tensor) -> Sequence[int]:
    """Strides of a node's output i as its `val`/`vals` declares them."""
    spec = node["vals"][i] if "vals" in node else node["val"]
    return layout.spec_strides(spec)


def run(graph: dict, values: Dict[str, torch.Tensor], snapshot: bool = False,
        layout_of: LayoutFn = declared_layout,
        before: Optional[Callable[[int, dict, list, dict], Any]] = None,
        after: Optional[Callable[[int, dict, list, dict, Any, Any], None]] = None) -> Run:
    """Executes `graph` on placeholder `values` (name → tensor; copied, never written).

    `layout_of(node, i, result)` gives the strides output i is placed in (the declared ones by
    default; the exporter passes its own). `before`/`after` are called around each op with
    (index, node, args, kwargs[, result, token]) — the exporter uses them to see undeclared writes."""
    r = Run()
    env = r.env
    nodes = graph["nodes"]

    def ref(v: Any) -> Any:
        if isinstance(v, str):
            return env[v]
        if isinstance(v, list):
            return [ref(x) for x in v]
        return decode_literal(v)

    for idx, node in enumerate(nodes):
        name, op = node["name"], node["op"]
        where = f"/nodes/{idx}"
        if op == "output":
            r.outputs = [env[a] for a in node["args"]]
            break
        if op == "placeholder":
            if name not in values:
                raise ExportError(f"no value for placeholder {name}", path=where)
            v = values[name]
            t = place(v, layout_of(node, 0, v))
        else:
            t = _call(node, idx, where, env, ref, layout_of, before, after)
        env[name] = t
        r.order.append(name)
        if snapshot and isinstance(t, torch.Tensor):
            r.snapshots[name] = t.clone(memory_format=torch.contiguous_format)
    return r


def _call(node: dict, idx: int, where: str, env: Dict[str, Any], ref: Callable[[Any], Any],
          layout_of: LayoutFn, before: Any, after: Any) -> Any:
    target = node["target"]
    args = node.get("args", [])
    if target == "operator.getitem":
        return env[args[0]][args[1]]
    if target == "memory.view":
        base = env[args[0]]
        spec = node["val"]
        return torch.as_strided(base, tuple(spec["shape"]), tuple(layout.spec_strides(spec)),
                                base.storage_offset() + int(node.get("offset", 0)))
    fn = resolve(target, where + "/target")
    a = [ref(x) for x in args]
    kw = {k: (env[v] if k == "out" else decode_kwarg(k, v))
          for k, v in node.get("kwargs", {}).items()}
    token = before(idx, node, a, kw) if before else None
    try:
        res = fn(*a, **kw)
    except Exception as e:  # an op torch refuses: name the node
        raise ExportError(f"{target} failed in torch: {e}".splitlines()[0], kind="torch_error",
                          path=where)
    if after:
        after(idx, node, a, kw, res, token)
    if writes_arg0(target) or "out" in kw:
        return res  # shares the written argument's storage, as SPEC §3 says
    if isinstance(res, (tuple, list)):
        return tuple(place(x, layout_of(node, i, x)) if isinstance(x, torch.Tensor) else x
                     for i, x in enumerate(res))
    if not isinstance(res, torch.Tensor):
        raise ExportError(f"{target} returned a {type(res).__name__}, not a tensor",
                          kind="unsupported", path=where)
    return place(res, layout_of(node, 0, res))


# ---- comparing -----------------------------------------------------------------------------

def first_difference(a: torch.Tensor, b: torch.Tensor) -> Optional[Tuple[int, Any, Any]]:
    """None when a and b hold the same dtype, shape and bytes in logical order; otherwise
    (first differing flat logical index, expected value, actual value)."""
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return (-1, f"{a.dtype}{list(a.shape)}", f"{b.dtype}{list(b.shape)}")
    ab, bb = logical_bytes(a), logical_bytes(b)
    if torch.equal(ab, bb):
        return None
    size = a.element_size()
    diff = (ab != bb).nonzero()
    k = int(diff[0]) // size
    fa, fb = a.contiguous().reshape(-1), b.contiguous().reshape(-1)
    return (k, fa[k].item(), fb[k].item())


def compare_runs(graph: dict, expected: Run, actual: Run) -> Optional[dict]:
    """The first node (in `actual`'s order), then the first output, whose value differs, or None.
    Nodes only one run has (removed as dead) are not compared."""
    for name in actual.order:
        if name in expected.snapshots and name in actual.snapshots:
            d = first_difference(expected.snapshots[name], actual.snapshots[name])
            if d is not None:
                return {"node": name, "index": d[0], "expected": d[1], "actual": d[2]}
    for i, (e, a) in enumerate(zip(expected.outputs, actual.outputs)):
        d = first_difference(e, a)
        if d is not None:
            out = graph["nodes"][-1]["args"][i]
            return {"node": out, "output": i, "index": d[0], "expected": d[1], "actual": d[2]}
    if len(expected.outputs) != len(actual.outputs):
        return {"node": "output", "index": -1, "expected": len(expected.outputs),
                "actual": len(actual.outputs)}
    return None
