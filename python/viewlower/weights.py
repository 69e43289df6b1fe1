"""The stored bytes of a graph's parameters, buffers and constants, in its declared layouts.

After SPEC §3b a lowered graph may declare a parameter in another dim order than the model holds
it (the weight of a Linear stored transposed, so the transpose becomes an alias): whoever deploys
the graph must store those bytes. `apply_param_layouts(state_dict, lowered)` gives each of the
graph's constant-data placeholders as a tensor really laid out in its declared dim order
(`torch.empty_strided` with the declared strides, then a copy); `write_weights` /
`read_weights` keep them in a weights file (docs/format.md, "Weights files"): a 16-byte header,
a JSON index, then each tensor's raw little-endian bytes in physical (memory) order.

Placeholder names map back to qualified names by the exporter's rule (export.placeholder_names):
`p_fc_weight` is the parameter `fc.weight`, `b_...` a buffer; a key equal to a node's name
matches it directly (constants, or a mapping keyed by node names).
"""
from __future__ import annotations

import json
import re
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
#: The kinds of placeholder whose values are the program's constant data (SPEC §11).
STORED_KINDS = ("parameter", "buffer", "constant")
PREFIX = {"parameter": "p_", "buffer": "b_"}
#: A weights file's JSON index may not be larger than this (a corrupt length is refused).
MAX_HEADER = 64 << 20


class WeightsError(ViewlowerError):
    """A weights file or a state dict that does not fit the graph (exit 2, invalid input)."""


def _identifier(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def _tensors_of(source: Any) -> Dict[str, torch.Tensor]:
    if isinstance(source, torch.nn.Module):
        out = {k: p.detach() for k, p in source.named_parameters()}
        out.update({k: b for k, b in source.named_buffers()})
        return out
    if not isinstance(source, Mapping):
        raise WeightsError(f"expected a state dict (name → tensor) or a module, not a "
                           f"{type(source).__name__}")
    return dict(source)


def program_state(model: torch.nn.Module, exported: Any) -> Dict[str, torch.Tensor]:
    """The tensors of an exported program by the names a weights file gives them: the model's
    parameters and buffers by qualified name, the trace's constants by node name."""
    out = _tensors_of(model)
    for n in exported.graph["nodes"]:
        if n["op"] == "placeholder" and n.get("kind") == "constant":
            out[n["name"]] = exported.values[n["name"]]
    return out


def match_qualified_names(graph: dict, source: Any) -> Dict[str, Tuple[str, torch.Tensor]]:
    """Placeholder name → (key in `source`, tensor) for every placeholder of kind parameter,
    buffer or constant of `graph`. A key equal to the node's name matches first; else a
    parameter `p_N` (a buffer `b_N`) is the key whose dots and other non-identifier characters
    made `_` give N, and `p_N_k` the (k+1)-th such key of N in the mapping's order when the
    exporter had to make the name unique. Parameters and buffers must be found; a constant
    without a key is left out."""
    tensors = _tensors_of(source)
    by_ident: Dict[str, List[str]] = {}
    for key in tensors:
        by_ident.setdefault(_identifier(key), []).append(key)
    out: Dict[str, Tuple[str, torch.Tensor]] = {}
    for idx, n in enumerate(graph["nodes"]):
        kind = n.get("kind", "user_input")
        if n["op"] != "placeholder" or kind not in STORED_KINDS:
            continue
        name = n["name"]
        key = name if name in tensors else _by_rule(name, PREFIX.get(kind), by_ident)
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


def _by_rule(name: str, prefix: Optional[str], by_ident: Dict[str, List[str]]) -> Optional[str]:
    if prefix is None or not name.startswith(prefix):
        return None
    ident = name[len(prefix):]
    keys = by_ident.get(ident)
    if keys:
        return keys[0]
    m = re.fullmatch(r"(.*)_([1-9][0-9]*)", ident)
    if m:
        keys = by_ident.get(m.group(1), [])
        k = int(m.group(2))
        if k < len(keys):
            return keys[k]
    return None


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
    `state_dict` maps qualified names to tensors (`model.state_dict()`) or is the module;
    placeholder names map back by the exporter's rule (see `match_qualified_names`)."""
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


def load_state(path: str) -> Dict[str, torch.Tensor]:
    """The tensors of a weights file (keyed by the names it gives: qualified names, a constant's
    node name) or of a
    `torch.save`d state dict, as a mapping `apply_param_layouts` takes."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise WeightsError(f"{path}: cannot open: {e.strerror}")
    if head == MAGIC:
        out: Dict[str, torch.Tensor] = {}
        for e in read_weights(path)["tensors"]:
            out[e["name"]] = e["tensor"]
        return out
    try:
        sd = torch.load(path, map_location="cpu")
    except Exception as e:  # pickle errors of every kind: not a state dict
        raise WeightsError(f"{path}: neither a weights file nor a torch.save'd state dict ({e})")
    if isinstance(sd, torch.nn.Module):
        return _tensors_of(sd)
    if not isinstance(sd, Mapping):
        raise WeightsError(f"{path}: holds a {type(sd).__name__}, not a state dict")
    return dict(sd)
