"""Runs a graph of docs/format.md §2 in torch, with real aliases, and compares runs bit for bit.

Every node that owns a buffer gets a fresh tensor in exactly its declared layout (`val`), so the
bytes sit where the graph says they sit. A `memory.view` is `torch.as_strided` on the storage of
its `args[0]` (from that tensor's own storage offset plus the node's `offset`) with the strides of
its declared layout, so a wrong alias reads the wrong bytes, as it would on a device.
`aten.as_strided_copy.default` reads its input's buffer the same way (docs/format.md §3). In-place
ops write into their argument's storage; `mutates` ops write the tensors they are given.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch

from . import layout
from .errors import ExportError

#: Names of torch dtypes as docs/format.md §1 spells them.
DTYPES = {name: getattr(torch, name) for name in layout.DTYPE_SIZES}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}

MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format, "channels_last": torch.channels_last,
                  "channels_last_3d": torch.channels_last_3d,
                  "preserve_format": torch.preserve_format}
LAYOUTS = {"strided": torch.strided}


def dtype_name(dt: torch.dtype, where: str = "") -> str:
    if dt not in DTYPE_NAMES:
        raise ExportError(f"dtype {dt} is not one of the graph format's dtypes (docs/format.md §1)", kind="unsupported",
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

def _in_dim_order(x: torch.Tensor, dim_order: Any) -> torch.Tensor:
    if dim_order is None:
        return x.clone()
    return place(x, layout.strides_from_dim_order(list(x.shape), list(dim_order)))


def _to_dim_order_copy(x: torch.Tensor, *, dtype: Any = None, layout: Any = None, device: Any = None,
                       pin_memory: Any = None, non_blocking: bool = False, dim_order: Any = None,
                       memory_format: Any = None) -> torch.Tensor:
    return _in_dim_order(x.to(dtype=dtype) if dtype is not None else x, dim_order)


def _clone_dim_order(x: torch.Tensor, *, non_blocking: bool = False,
                     dim_order: Any = None) -> torch.Tensor:
    return _in_dim_order(x, dim_order)


def _as_strided_copy(x: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                     storage_offset: Optional[int] = None) -> torch.Tensor:
    # reads x's buffer from x's own offset on (x may be a memory.view alias).
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


#: Ops whose result holds unspecified values (uninitialised memory: dropout in train mode traces
#: as `bernoulli_` into an `empty_like`, after an `expand_copy` of an `empty`). Every run fills
#: them with zeros, so the reference and the replay read the same bytes from them.
UNINITIALISED = {"aten.empty.memory_format", "aten.empty_like.default",
                 "aten.empty_strided.default", "aten.new_empty.default",
                 "aten.new_empty_strided.default"}

#: Every run starts torch's global generator from this seed, so random ops (`bernoulli_` of
#: dropout in train mode, `rand`, …) draw the same numbers in the reference and the replay: the
#: lowering keeps the order of every op that is not layout-only.
RNG_SEED = 0


def defined(target: str, res: Any) -> Any:
    """`res` of `target`, with an uninitialised result (UNINITIALISED) zero-filled."""
    if target in UNINITIALISED and isinstance(res, torch.Tensor):
        res.zero_()
    return res


def writes_arg0(target: str) -> bool:
    """An operator name ending in `_` writes argument 0 (docs/format.md §2, "Writes")."""
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
    flat = t.contiguous().reshape(-1)
    if flat.numel() == 1 and flat.stride(0) != 1:
        # One element that a select or slice left with its base's stride: torch calls it
        # contiguous and keeps the stride, which a view as bytes refuses.
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat.view(torch.uint8)


def digest(t: torch.Tensor) -> bytes:
    """A fingerprint of dtype, shape and logical bytes: equal digests mean bit-equal tensors."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{t.dtype}{list(t.shape)}".encode())
    b = logical_bytes(t)
    if b.numel():
        h.update(memoryview(b.numpy()))
    return h.digest()


LayoutFn = Callable[[dict, int, torch.Tensor], Sequence[int]]


def declared_layout(node: dict, i: int, value: torch.Tensor) -> Sequence[int]:
    """Strides of a node's output i as its `val`/`vals` declares them."""
    spec = node["vals"][i] if "vals" in node else node["val"]
    return layout.spec_strides(spec)


def last_uses(graph: dict) -> Dict[int, List[str]]:
    """Node index → names read for the last time there (their tensors may be dropped after)."""
    last: Dict[str, int] = {}
    for i, n in enumerate(graph["nodes"]):
        names: List[str] = []
        layout.arg_refs(n.get("args", []), names)
        out = n.get("kwargs", {}).get("out")
        if isinstance(out, str):
            names.append(out)
        for name in names:
            last[name] = i
    by_index: Dict[int, List[str]] = {}
    for name, i in last.items():
        by_index.setdefault(i, []).append(name)
    return by_index


class Run:
    """One execution of a graph, as an iterator of (name, value) right after each node ran
    (value a tensor, or a tuple for a multi-output producer). Tensors are dropped after their
    last reader, so memory stays at what is live; `outputs` holds the graph's outputs at the end.

    `values` (placeholder name → tensor) are copied, never written. `layout_of(node, i, result)`
    gives the strides output i is placed in (the declared ones by default; the exporter passes
    its own). `before`/`after` are called around each op with (index, node, args, kwargs[,
    result, token]); the exporter uses them to see writes the format's rules do not show."""

    def __init__(self, graph: dict, values: Dict[str, torch.Tensor],
                 layout_of: LayoutFn = declared_layout, before: Any = None, after: Any = None,
                 arena: bool = False, on_node: Any = None):
        self.graph = graph
        self.values = values
        self.layout_of = layout_of
        self.before, self.after = before, after
        self.on_node = on_node
        self.env: Dict[str, Any] = {}
        self.outputs: List[torch.Tensor] = []
        self.keep = False
        #: placeholders kept to the end (the state a program writes: mutated buffers and inputs)
        self.keep_placeholders = {n["name"] for n in graph["nodes"]
                                  if n["op"] == "placeholder" and n.get("mutated")}
        #: with `arena`, the graph's plan (docs/format.md §9) is replayed in one byte tensor
        self.arena: Optional[Arena] = Arena(graph) if arena else None

    def __iter__(self) -> Iterator[Tuple[str, Any]]:
        env = self.env
        drop = {} if self.keep else last_uses(self.graph)
        torch.manual_seed(RNG_SEED)
        for idx, node in enumerate(self.graph["nodes"]):
            name, op = node["name"], node["op"]
            where = f"/nodes/{idx}"
            if op == "output":
                self.outputs = [env[a] for a in node["args"]]
                break
            if op == "placeholder":
                if name not in self.values:
                    raise ExportError(f"no value for placeholder {name}", path=where)
                v = self.values[name]
                t = place(v, self.layout_of(node, 0, v))
            else:
                t = _call(node, idx, where, env, self.layout_of, self.before, self.after)
            if self.arena is not None:
                t = self.arena.settle(idx, node, t)
            env[name] = t
            if self.on_node is not None:
                self.on_node(idx)
            yield name, t
            for gone in drop.get(idx, ()):
                if gone not in self.keep_placeholders:
                    env.pop(gone, None)

    def final_state(self) -> Dict[str, torch.Tensor]:
        """After the run: each kept placeholder's tensor as the program left it."""
        return {k: self.env[k] for k in sorted(self.keep_placeholders) if k in self.env}

    def complete(self) -> "Run":
        for _ in self:
            pass
        return self


class Arena:
    """The memory plan of a graph (docs/format.md §9) as one uint8 tensor of `arena_bytes`. Every
    node with a `mem_offset` has its value copied into its slot (the bytes from its offset, read
    through its declared shape and strides) when it is written first, and the slot is what every
    later node reads; a `memory.view` of it is then `as_strided` of the arena's storage, an in-place
    op writes the slot. So two storages the plan puts in the same bytes while both are live
    really overwrite each other, as they would on a device. Getitems are written when their
    producer runs (their storage's lifetime starts there); a second getitem of one output reads
    the first one's slot."""

    def __init__(self, graph: dict):
        plan = graph.get("plan")
        if not isinstance(plan, dict) or not isinstance(plan.get("arena_bytes"), int):
            raise ExportError("the graph has no plan (lower it with the plan option)",
                              kind="no_plan", path="/plan")
        self.size = int(plan["arena_bytes"])
        self.bytes = torch.zeros(self.size + 8, dtype=torch.uint8)  # + a tail for typed views
        self._typed: Dict[torch.dtype, torch.Tensor] = {}
        self.by_name = {n["name"]: (i, n) for i, n in enumerate(graph["nodes"])}
        self.items: Dict[str, List[Tuple[int, str]]] = {}
        #: a second getitem of one output → the first (docs/format.md §2: same storage, its slot)
        self.same: Dict[str, str] = {}
        first: Dict[Tuple[Any, Any], str] = {}
        for n in graph["nodes"]:
            if n.get("target") != "operator.getitem" or len(n.get("args", [])) != 2:
                continue
            key = (n["args"][0], n["args"][1])
            if key in first:
                self.same[n["name"]] = first[key]
                continue
            first[key] = n["name"]
            if "mem_offset" in n:
                self.items.setdefault(n["args"][0], []).append((n["args"][1], n["name"]))
        self._written: Dict[str, torch.Tensor] = {}
        self._item_slots: Dict[str, torch.Tensor] = {}  # each planned getitem's slot
        self.planned = sum(1 for n in graph["nodes"] if "mem_offset" in n)

    def slot(self, idx: int, node: dict, spec: dict) -> torch.Tensor:
        """The arena's bytes of a planned node, as a tensor of its declared spec."""
        where = f"/nodes/{idx}/mem_offset"
        off = node["mem_offset"]
        dt = DTYPES[spec["dtype"]]
        size = torch.empty((), dtype=dt).element_size()
        nbytes = layout.nbytes(spec)
        if not isinstance(off, int) or off < 0 or off + nbytes > self.size:
            raise ExportError(f"{node['name']}: bytes {off}..{off}+{nbytes} are outside the "
                              f"arena of {self.size} bytes", kind="bad_plan", path=where)
        if off % size:
            raise ExportError(f"{node['name']}: offset {off} is not a multiple of its element "
                              f"size {size}: a torch tensor cannot start there", kind="bad_plan",
                              path=where)
        if dt not in self._typed:
            n = (self.size + 8) // size * size
            self._typed[dt] = self.bytes[:n].view(dt)
        return torch.as_strided(self._typed[dt], tuple(spec["shape"]),
                                tuple(layout.spec_strides(spec)), off // size)

    def settle(self, idx: int, node: dict, value: Any) -> Any:
        """The value the graph holds for `node` from now on: its slot (filled with `value`) when
        the plan gives it one, else `value`."""
        name = node["name"]
        if name in self._written:
            return self._written.pop(name)
        if self.same.get(name) in self._item_slots:
            return self._item_slots[self.same[name]]
        if name in self.items and isinstance(value, tuple):
            for i, item in self.items[name]:
                j, g = self.by_name[item]
                slot = self.slot(j, g, g["val"])
                slot.copy_(value[i])
                self._written[item] = self._item_slots[item] = slot
            return value
        if "mem_offset" not in node or not isinstance(value, torch.Tensor):
            return value
        slot = self.slot(idx, node, node["val"])
        slot.copy_(value)
        return slot


def run(graph: dict, values: Dict[str, torch.Tensor], **kw: Any) -> Run:
    """Runs the whole graph, keeping every node's tensor in `env`."""
    r = Run(graph, values, **kw)
    r.keep = True
    return r.complete()


def _call(node: dict, idx: int, where: str, env: Dict[str, Any], layout_of: LayoutFn,
          before: Any, after: Any) -> Any:
    def ref(v: Any) -> Any:
        if isinstance(v, str):
            return env[v]
        if isinstance(v, list):
            return [ref(x) for x in v]
        return decode_literal(v)

    target = node["target"]
    args = node.get("args", [])
    if target == "operator.getitem":
        return env[args[0]][args[1]]
    if target == "memory.view":
        base = env[args[0]]
        spec = node["val"]
        try:
            return torch.as_strided(base, tuple(spec["shape"]), tuple(layout.spec_strides(spec)),
                                    base.storage_offset() + int(node.get("offset", 0)))
        except RuntimeError as e:  # e.g. an alias reaching past its owner's buffer
            raise ExportError(f"memory.view of {args[0]}: {e}".splitlines()[0],
                              kind="torch_error", path=where)
    fn = resolve(target, where + "/target")
    a = [ref(x) for x in args]
    kw = {k: (env[v] if k == "out" else decode_kwarg(k, v))
          for k, v in node.get("kwargs", {}).items()}
    token = before(idx, node, a, kw) if before else None
    try:
        res = defined(target, fn(*a, **kw))
    except Exception as e:  # an op torch refuses: name the node
        raise ExportError(f"{target} failed in torch: {e}".splitlines()[0], kind="torch_error",
                          path=where)
    if after:
        after(idx, node, a, kw, res, token)
    if writes_arg0(target) or "out" in kw:
        return res  # shares the written argument's storage, as docs/format.md §2 says
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


def digests(run_: Run, skip_placeholders: bool = True) -> Tuple[Dict[str, bytes], List[bytes]]:
    """Runs to the end; (node name → digest of its value right after it ran, output digests)."""
    ph = {n["name"] for n in run_.graph["nodes"] if n["op"] == "placeholder"}
    out: Dict[str, bytes] = {}
    for name, v in run_:
        if isinstance(v, torch.Tensor) and not (skip_placeholders and name in ph):
            out[name] = digest(v)
    return out, [digest(t) for t in run_.outputs]


def value_at(graph: dict, values: Dict[str, torch.Tensor], name: str) -> Optional[torch.Tensor]:
    """The value node `name` has right after it ran (a copy), running the graph up to there."""
    for n, v in Run(graph, values):
        if n == name:
            return v.clone() if isinstance(v, torch.Tensor) else None
    return None
