"""The stored bytes of a graph's parameters, buffers and constants, in its declared layouts.

With param_layouts a lowered graph may declare a parameter in another dim order than the model holds
it (the weight of a Linear stored transposed, so the transpose becomes an alias): whoever deploys
the graph must store those bytes. `apply_param_layouts(state_dict, lowered)` gives each of the
graph's constant-data placeholders as a tensor really laid out in its declared dim order
(`torch.empty_strided` with the declared strides, then a copy); `write_weights` /
`read_weights` keep them in a weights file (docs/format.md, "Weights files"): a 16-byte header,
a JSON index, then each tensor's raw little-endian bytes in physical (memory) order.

Which placeholder is which tensor: `p_fc_weight` is the parameter `fc.weight`, `b_...` a
buffer, and a name the exporter made unique ends in `_k` (`p_a_w_2` may be `a.w`). Where it is
known it is not worked out again: the exporter records it (`Exported.state_names`, given on by
`program_state` as a `State`) and a weights file keeps it (`node` → `name`). Otherwise (a module,
a plain state dict) the names are made again by the exporter's own rule (`export.identifier`,
`export.free_name`): exactly for a module; a plain state dict does not say which keys are
buffers, so a name that a parameter and a buffer could both have been given is refused rather
than guessed. A key equal to a node's name matches it directly (constants, or a mapping keyed by
node names).
"""
from __future__ import annotations

import json
import struct
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from . import layout, replay
from .errors import ViewlowerError

MAGIC = b"VLWT"
VERSION = 1
#: Every tensor's bytes start at a multiple of this many bytes from the start of the data.
ALIGNMENT = 64
#: The kinds of placeholder whose values are the program's constant data (docs/format.md §9).
STORED_KINDS = ("parameter", "buffer", "constant")
PREFIX = {"parameter": "p_", "buffer": "b_"}
#: A weights file's JSON index may not be larger than this (a corrupt length is refused).
MAX_HEADER = 64 << 20


class WeightsError(ViewlowerError):
    """A weights file or a state dict that does not fit the graph (exit 2, invalid input)."""


class State(dict):
    """Tensors by the names a weights file gives them (qualified names; a constant's node name),
    with `key_of`: placeholder name → its key, exactly as the exporter named it
    (`Exported.state_names`) or as a weights file records it (`node` → `name`). With it no
    name is worked out again."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], key_of: Mapping[str, str]):
        super().__init__(tensors)
        self.key_of: Dict[str, str] = dict(key_of)


def _tensors_of(source: Any) -> Dict[str, torch.Tensor]:
    if isinstance(source, torch.nn.Module):
        out = {k: p.detach() for k, p in source.named_parameters()}
        out.update({k: b for k, b in source.named_buffers()})
        return out
    if not isinstance(source, Mapping):
        raise WeightsError(f"expected a state dict (name → tensor) or a module, not a "
                           f"{type(source).__name__}")
    return dict(source)


def _kinds_of(source: Any) -> Optional[Dict[str, str]]:
    """Qualified name → "parameter" / "buffer" of a module, in the exporter's order (its
    named_parameters, then its named_buffers); None for a mapping, whose keys do not say."""
    if not isinstance(source, torch.nn.Module):
        return None
    out = {k: "parameter" for k, _ in source.named_parameters()}
    out.update({k: "buffer" for k, _ in source.named_buffers()})
    return out


def program_state(model: torch.nn.Module, exported: Any) -> State:
    """The tensors of an exported program by the names a weights file gives them: the model's
    parameters and buffers by qualified name, the trace's constants by node name; `key_of` is
    the exporter's own record of which placeholder is which."""
    out = _tensors_of(model)
    key_of = dict(exported.state_names)
    for n in exported.graph["nodes"]:
        if n["op"] == "placeholder" and n.get("kind") == "constant":
            out[n["name"]] = exported.values[n["name"]]
            key_of[n["name"]] = n["name"]
    return State(out, key_of)


def match_qualified_names(graph: dict, source: Any) -> Dict[str, Tuple[str, torch.Tensor]]:
    """Placeholder name → (key in `source`, tensor) for every placeholder of kind parameter,
    buffer or constant of `graph`. A `State` says which key each placeholder is (the exporter's
    record, or a weights file's). Otherwise parameters and buffers are named again by the
    exporter's rule (`_keys_by_rule`; in a plain mapping a key equal to the node's name matches
    first): exactly for a module; for a plain state dict, which does not say which keys are
    buffers, a name that a parameter and a buffer could both have been given is refused.
    Parameters and buffers must be found; a constant without a key is left out."""
    tensors = _tensors_of(source)
    if isinstance(source, State):
        key_of = {k: v for k, v in source.key_of.items() if v in tensors}
    else:
        key_of = _keys_by_rule(graph, tensors, _kinds_of(source))
    out: Dict[str, Tuple[str, torch.Tensor]] = {}
    for idx, n in enumerate(graph["nodes"]):
        kind = n.get("kind", "user_input")
        if n["op"] != "placeholder" or kind not in STORED_KINDS:
            continue
        name = n["name"]
        key = key_of.get(name)
        if key is None and isinstance(source, State) and name in source.key_of:
            raise WeightsError(f"no tensor for {kind} {name} (want the key "
                               f"{source.key_of[name]!r})", path=f"/nodes/{idx}")
        if isinstance(key, WeightsError):
            raise WeightsError(key.message, path=f"/nodes/{idx}")
        if key is None:
            if kind == "constant":
                continue
            raise WeightsError(f"no tensor for {kind} {name} (want the key "
                               f"{_wanted(name, PREFIX[kind])!r} or {name!r})",
                               path=f"/nodes/{idx}")
        t = tensors[key]
        spec = n["val"]
        if not isinstance(t, torch.Tensor):
            raise WeightsError(f"{key} is a {type(t).__name__}, not a tensor", path=f"/nodes/{idx}")
        if replay.DTYPE_NAMES.get(t.dtype) != spec["dtype"] or list(t.shape) != list(spec["shape"]):
            raise WeightsError(f"{key} is {t.dtype}{list(t.shape)}; {name} wants "
                               f"{spec['dtype']}{list(spec['shape'])}", path=f"/nodes/{idx}/val")
        out[name] = (key, t)
    return out


def _wanted(name: str, prefix: str) -> str:
    return name[len(prefix):].replace("_", ".") if name.startswith(prefix) else name


def _keys_by_rule(graph: dict, tensors: Mapping[str, Any],
                  kinds: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    """Placeholder name → key of `tensors` (or the WeightsError of an ambiguous one), by naming
    the keys again as the exporter did (`export.free_name`): in graph order, a parameter's
    placeholder is the first key not yet used, in the mapping's order, that `p_` + its
    identifier makes this name with the names taken at that point (every node other than a
    parameter, buffer or user input, and the earlier parameters and buffers); a buffer's
    likewise with `b_`. With `kinds` (a module) only keys of the placeholder's kind count, which
    is exactly the exporter's naming. A plain state dict mixes parameters and buffers, so the
    first such key might be a buffer: when another key also fits and the first could have given
    a buffer's name (or a parameter's, for a buffer), the name is ambiguous and refused. In a
    mapping (not a module) a key equal to a node's name is that node (constants, or a mapping
    keyed by node names)."""
    from .export import free_name, identifier
    nodes = graph["nodes"]
    stored = [n for n in nodes if n["op"] == "placeholder"
              and n.get("kind", "user_input") in ("parameter", "buffer")]
    named = {n["name"] for n in stored} | {n["name"] for n in nodes if n["op"] == "placeholder"
                                           and n.get("kind", "user_input") == "user_input"}
    taken = {n["name"] for n in nodes if n["name"] not in named}
    names_of = {kind: [n["name"] for n in stored if n["kind"] == kind] for kind in PREFIX}
    # a module's keys are qualified names only: a parameter qualified `p_a_w` is not the node
    # p_a_w (which may be `a.w`'s)
    out: Dict[str, Any] = {} if kinds is not None else {
        n["name"]: n["name"] for n in nodes if n["op"] == "placeholder" and n["name"] in tensors}
    used = set(out.values())
    ident = {k: identifier(k) for k in tensors}

    def could_be(key: str, kind: str) -> bool:
        stem = PREFIX[kind] + ident[key]
        return any(m == stem or (m.startswith(stem + "_") and m[len(stem) + 1:].isdigit())
                   for m in names_of[kind])
    for n in stored:
        name, kind = n["name"], n["kind"]
        if name not in out:
            fits = [k for k in tensors if k not in used
                    and (kinds is None or kinds.get(k) == kind)
                    and free_name(PREFIX[kind] + ident[k], taken) == name]
            other = "buffer" if kind == "parameter" else "parameter"
            if kinds is None and len(fits) > 1 and could_be(fits[0], other):
                out[name] = WeightsError(
                    f"{kind} {name}: the state dict's keys {', '.join(map(repr, fits))} all "
                    f"give this name and {fits[0]!r} may be a {other}; a state dict does not say "
                    f"which (give the module, or the weights file export --weights-out wrote)")
            elif fits:
                out[name] = fits[0]
                used.add(fits[0])
        taken.add(name)
    return out


def in_layout(t: torch.Tensor, spec: dict) -> torch.Tensor:
    """A fresh tensor holding t's values, laid out in memory as `spec` declares (its strides)."""
    out = torch.empty_strided(tuple(spec["shape"]), tuple(layout.spec_strides(spec)),
                              dtype=t.dtype)
    out.copy_(t)
    return out


def apply_param_layouts(state_dict: Any, lowered: dict) -> Dict[str, torch.Tensor]:
    """The graph's parameters, buffers (and constants found in `state_dict`), each in the layout
    the lowered graph declares for it: qualified name (the key of `state_dict`) → a tensor whose
    strides are the declared dim order's, so its storage holds the bytes a runtime must store.
    `state_dict` maps qualified names to tensors (`model.state_dict()`; a `State` says which
    placeholder each is) or is the module; see `match_qualified_names`."""
    by_name = {n["name"]: n for n in lowered["nodes"]}
    return {key: in_layout(t, by_name[name]["val"])
            for name, (key, t) in match_qualified_names(lowered, state_dict).items()}


def physical_bytes(t: torch.Tensor, dim_order: List[int]) -> bytes:
    """t's elements in the memory order of `dim_order` (outermost dim first), little-endian."""
    flat = t.permute(*dim_order).contiguous().reshape(-1) if t.dim() else t.reshape(-1)
    if flat.numel() == 0:
        return b""
    if sys.byteorder != "little" and flat.element_size() > 1:
        ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[flat.element_size()]
        return flat.view(ints).numpy().byteswap().tobytes()
    return flat.view(torch.uint8).numpy().tobytes()


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def weights_bytes(lowered: dict, state_dict: Any) -> bytes:
    """A weights file (docs/format.md) of the lowered graph's stored tensors in their declared
    layouts, in graph order."""
    by_name = {n["name"]: n for n in lowered["nodes"]}
    entries, blobs, offset = [], [], 0
    for name, (key, t) in match_qualified_names(lowered, state_dict).items():
        node = by_name[name]
        spec = node["val"]
        order = layout.spec_dim_order(spec)
        data = physical_bytes(in_layout(t, spec), order)
        offset = _align(offset, ALIGNMENT)
        entries.append({"node": name, "name": key, "kind": node.get("kind", "user_input"),
                        "dtype": spec["dtype"], "shape": list(spec["shape"]),
                        "dim_order": order, "offset": offset, "nbytes": len(data)})
        blobs.append((offset, data))
        offset += len(data)
    index = json.dumps({"format": "viewlower.weights", "version": VERSION,
                        "graph": lowered.get("name", ""), "alignment": ALIGNMENT,
                        "tensors": entries}, separators=(",", ":")).encode()
    start = _align(16 + len(index), ALIGNMENT)
    out = bytearray(MAGIC + struct.pack("<IQ", VERSION, len(index)) + index)
    out += bytes(start - len(out))
    for off, data in blobs:
        out += bytes(start + off - len(out))
        out += data
    return bytes(out)


def write_weights(path: str, lowered: dict, state_dict: Any) -> int:
    """Writes the weights file of `lowered` to `path`; returns its size in bytes."""
    data = weights_bytes(lowered, state_dict)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise WeightsError(f"{path}: cannot write: {e.strerror}")
    return len(data)


def _field(obj: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise WeightsError(f"{where}/{key}: missing")
    v = obj[key]
    if kind is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise WeightsError(f"{where}/{key}: must be an integer")
    if not isinstance(v, kind):
        raise WeightsError(f"{where}/{key}: must be a {kind.__name__}")
    return v


def parse_weights(data: bytes, what: str = "weights") -> Dict[str, Any]:
    """The index of a weights file and its tensors: {"graph", "tensors": [entry + "tensor"]},
    each tensor laid out in its dim order. Every field is checked; an error names it by JSON
    pointer into the index (or the header's byte range)."""
    if len(data) < 16 or data[:4] != MAGIC:
        raise WeightsError(f"{what}: not a viewlower weights file (bytes 0-3 must be 'VLWT')")
    version, hlen = struct.unpack("<IQ", data[4:16])
    if version != VERSION:
        raise WeightsError(f"{what}: bytes 4-7: version {version}, this reader knows {VERSION}")
    if hlen > min(MAX_HEADER, len(data) - 16):
        raise WeightsError(f"{what}: bytes 8-15: index length {hlen} is past the end of the file")
    try:
        index = json.loads(data[16:16 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise WeightsError(f"{what}: the index is not JSON: {e}")
    if not isinstance(index, dict):
        raise WeightsError(f"{what}: the index must be an object")
    if _field(index, "format", str, "") != "viewlower.weights":
        raise WeightsError(f"{what}: /format: must be \"viewlower.weights\"")
    if _field(index, "version", int, "") != VERSION:
        raise WeightsError(f"{what}: /version: must be {VERSION}")
    align = _field(index, "alignment", int, "")
    if align < 1 or align & (align - 1):
        raise WeightsError(f"{what}: /alignment: must be a power of two")
    start = _align(16 + hlen, align)
    tensors = _field(index, "tensors", list, "")
    seen = set()
    out = []
    for i, e in enumerate(tensors):
        where = f"/tensors/{i}"
        try:
            node = _field(e, "node", str, where)
            dtype = _field(e, "dtype", str, where)
            shape = _field(e, "shape", list, where)
            order = _field(e, "dim_order", list, where)
            offset = _field(e, "offset", int, where)
            nbytes = _field(e, "nbytes", int, where)
            _field(e, "name", str, where)
        except WeightsError as err:
            raise WeightsError(f"{what}: {err.message}")
        if node in seen:
            raise WeightsError(f"{what}: {where}/node: {node} is given twice")
        seen.add(node)
        if dtype not in layout.DTYPE_SIZES:
            raise WeightsError(f"{what}: {where}/dtype: {dtype!r} is not a dtype of the graph format")
        if len(shape) > 16 or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                                  for s in shape):
            raise WeightsError(f"{what}: {where}/shape: sizes must be integers >= 0, rank <= 16")
        if sorted(o for o in order if isinstance(o, int) and not isinstance(o, bool)) != \
                list(range(len(shape))):
            raise WeightsError(f"{what}: {where}/dim_order: not a permutation of "
                               f"0..{len(shape) - 1}")
        want = layout.numel(shape) * layout.DTYPE_SIZES[dtype]
        if nbytes != want:
            raise WeightsError(f"{what}: {where}/nbytes: {nbytes}, but {dtype}{shape} has {want}")
        if offset < 0 or offset % align:
            raise WeightsError(f"{what}: {where}/offset: must be a multiple of {align} >= 0")
        if start + offset + nbytes > len(data):
            raise WeightsError(f"{what}: {where}/offset: bytes {offset}..{offset + nbytes} are "
                               f"past the end of the data ({len(data) - start} bytes)")
        raw = bytearray(data[start + offset:start + offset + nbytes])
        dt = replay.DTYPES[dtype]
        phys = [shape[d] for d in order]
        flat = torch.frombuffer(raw, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        t = flat.view(dt).reshape(phys) if nbytes else torch.empty(phys, dtype=dt)
        if sys.byteorder != "little" and t.element_size() > 1 and nbytes:
            ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
            t = torch.from_numpy(t.view(ints).numpy().byteswap()).view(dt)
        inverse = [order.index(d) for d in range(len(shape))]
        out.append(dict(e, tensor=t.permute(*inverse) if shape else t.reshape(())))
    return {"graph": index.get("graph", ""), "tensors": out}


def read_weights(path: str) -> Dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise WeightsError(f"{path}: cannot open: {e.strerror}")
    return parse_weights(data, path)


def load_state(path: str) -> Any:
    """What `apply_param_layouts` takes, from a file: a weights file's tensors as a `State`
    (keyed by the names it gives, qualified names and a constant's node name, and which node each
    is), a `torch.save`d module as the module, or a `torch.save`d state dict."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise WeightsError(f"{path}: cannot open: {e.strerror}")
    if head == MAGIC:  # the file says which node each tensor is: nothing to work out
        entries = read_weights(path)["tensors"]
        return State({e["name"]: e["tensor"] for e in entries},
                     {e["node"]: e["name"] for e in entries})
    try:
        sd = torch.load(path, map_location="cpu")
    except Exception as e:  # pickle errors of every kind: not a state dict
        raise WeightsError(f"{path}: neither a weights file nor a torch.save'd state dict ({e})")
    if isinstance(sd, torch.nn.Module):
        return sd  # a module says which tensors are parameters and which buffers
    if not isinstance(sd, Mapping):
        raise WeightsError(f"{path}: holds a {type(sd).__name__}, not a state dict")
    return dict(sd)
