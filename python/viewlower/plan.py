"""The memory plan of a lowered graph (docs/format.md §9), recomputed in Python from the graph
alone.

`storages(graph)` finds every run-time buffer (one per storage owner), its size rounded to the
plan's alignment and its lifetime; `check_plan(graph)` tests a planned graph's invariant (two
storages live at one position never share a byte; offsets aligned and inside the arena; every
planned owner has a `mem_offset`) and `figures(graph)` gives the lower bound and the naive size.
This is an implementation independent of the C planner's, so `check --plan` and the tests can
hold the planner to the rule, and so the arena replay (replay.Arena) can be fed a plan broken on
purpose to show that overlapping live buffers give wrong values.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import layout

#: Placeholder kinds whose storage lives with the program's constant data (never planned).
CONSTANT_KINDS = ("parameter", "constant")


class Storage:
    def __init__(self, owner: str, index: int, start: int, size: int, nbytes: int):
        self.owner = owner
        self.index = index  # the owner node's index
        self.start = start
        self.end = start
        self.size = size
        self.nbytes = nbytes

    def __repr__(self) -> str:
        return f"Storage({self.owner}, [{self.start},{self.end}], {self.size} B)"


def _writes_arg0(target: str) -> bool:
    parts = target.split(".")
    return len(parts) >= 2 and parts[1].endswith("_")


def owners(graph: dict) -> Dict[str, Optional[str]]:
    """Node name → the name of the node owning its storage (None: a multi-output producer, whose
    getitems own its outputs; a second getitem of one output is the first one's storage; the
    output node is left out)."""
    own: Dict[str, Optional[str]] = {}
    items: Dict[Tuple[Any, Any], str] = {}  # (producer, index) → its first getitem
    for n in graph["nodes"]:
        name, op = n["name"], n["op"]
        if op == "output":
            continue
        if op == "placeholder":
            own[name] = name
            continue
        t = n.get("target", "")
        out = n.get("kwargs", {}).get("out")
        if t == "memory.view":
            own[name] = own.get(n["args"][0]) or n.get("alias_of")
        elif isinstance(out, str):
            own[name] = own.get(out)
        elif _writes_arg0(t) and n.get("args") and isinstance(n["args"][0], str):
            own[name] = own.get(n["args"][0])
        elif "vals" in n:
            own[name] = None
        elif t == "operator.getitem" and len(n.get("args", [])) == 2:
            first = items.setdefault((n["args"][0], n["args"][1]), name)
            own[name] = name if first == name else own.get(first)
        else:
            own[name] = name
    return own


def alignment_of(graph: dict) -> int:
    plan = graph.get("plan") or {}
    a = plan.get("alignment", 16)
    return a if isinstance(a, int) and a >= 1 else 16


def storages(graph: dict, alignment: Optional[int] = None) -> List[Storage]:
    """The planned storages of docs/format.md §9 with their lifetimes, in the order of their
    owners."""
    align = alignment or alignment_of(graph)
    nodes = graph["nodes"]
    own = owners(graph)
    index = {n["name"]: i for i, n in enumerate(nodes)}
    out_idx = len(nodes) - 1
    found: Dict[str, Storage] = {}
    for i, n in enumerate(nodes):
        if n["op"] == "output" or own.get(n["name"]) != n["name"]:
            continue
        if n["op"] == "placeholder":
            kind = n.get("kind", "user_input")
            if kind in CONSTANT_KINDS or (kind == "buffer" and not n.get("mutated")):
                continue
        nbytes = layout.nbytes(n["val"])
        if nbytes == 0:
            continue
        start = 0 if n["op"] == "placeholder" else i
        if n.get("target") == "operator.getitem":
            start = index[n["args"][0]]
        s = Storage(n["name"], i, start, (nbytes + align - 1) // align * align, nbytes)
        if n["op"] == "placeholder" and n.get("mutated"):
            s.end = out_idx
        found[n["name"]] = s
    for i, n in enumerate(nodes):
        names: List[str] = []
        layout.arg_refs(n.get("args", []), names)
        out = n.get("kwargs", {}).get("out")
        if isinstance(out, str):
            names.append(out)
        names += [m for m in n.get("mutates", []) if isinstance(m, str)]
        if n["op"] != "output":
            names.append(n["name"])  # an alias or in-place result is a use of its owner
        for name in names:
            o = own.get(name)
            if o in found:
                found[o].end = max(found[o].end, i)
    return list(found.values())


def figures(graph: dict, alignment: Optional[int] = None) -> Dict[str, int]:
    """{"lower_bound_bytes", "naive_bytes", "planned"} of docs/format.md §9 for this graph."""
    ss = storages(graph, alignment)
    events: Dict[int, int] = {}
    for s in ss:
        events[s.start] = events.get(s.start, 0) + s.size
        events[s.end + 1] = events.get(s.end + 1, 0) - s.size
    live = peak = 0
    for pos in sorted(events):
        live += events[pos]
        peak = max(peak, live)
    return {"lower_bound_bytes": peak, "naive_bytes": sum(s.size for s in ss),
            "planned": len(ss)}


def check_plan(graph: dict) -> Optional[str]:
    """None when the graph's plan keeps the invariant of docs/format.md §9, else the first violation
    as `/nodes/k/mem_offset: …` (k the later node of an overlapping pair)."""
    plan = graph.get("plan")
    if not isinstance(plan, dict):
        return "/plan: the graph has no plan"
    arena, align = plan.get("arena_bytes"), plan.get("alignment")
    if not isinstance(arena, int) or not isinstance(align, int) or align < 1 or align & (align - 1):
        return "/plan: arena_bytes and alignment (a power of two) must be integers"
    ss = storages(graph, align)
    planned = {s.owner for s in ss}
    index = {n["name"]: i for i, n in enumerate(graph["nodes"])}
    for i, n in enumerate(graph["nodes"]):
        if "mem_offset" in n and n["name"] not in planned:
            return f"/nodes/{i}/mem_offset: {n['name']} owns no planned storage"
    off: Dict[str, int] = {}
    for s in ss:
        n = graph["nodes"][s.index]
        if "mem_offset" not in n:
            return f"/nodes/{s.index}: planned storage {s.owner} has no mem_offset"
        o = n["mem_offset"]
        if not isinstance(o, int) or o < 0 or o % align:
            return f"/nodes/{s.index}/mem_offset: {o} is not a multiple of {align} >= 0"
        if o + s.size > arena:
            return f"/nodes/{s.index}/mem_offset: {o}+{s.size} is past the arena ({arena})"
        off[s.owner] = o
    by_start = sorted(ss, key=lambda s: (s.start, s.index))
    active: List[Storage] = []
    for s in by_start:
        active = [a for a in active if a.end >= s.start]
        for a in active:
            if off[a.owner] < off[s.owner] + s.size and off[s.owner] < off[a.owner] + a.size:
                later = s if (s.index, s.owner) > (a.index, a.owner) else a
                other = a if later is s else s
                return (f"/nodes/{index[later.owner]}/mem_offset: overlaps {other.owner} "
                        "while both are live")
        active.append(s)
    return None
