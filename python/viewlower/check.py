"""check: export → lower → replay in torch with real aliases → bit-exact comparison.

The reference is the exported graph run in torch op by op, every node in its declared layout
(the run the exporter makes to find those layouts). The lowered graph is then run the same way
except that each `memory.view` is a real `torch.as_strided` alias of its owner's storage and each
merged copy an `as_strided_copy` of its root's buffer (replay.py). Every node present in both
runs is compared bit for bit right after it ran, then every output at the end. With the traced
layout the exported graph is also compared with the fx graph torch traced, node by node, which
proves the exporter's rewrites (split into slices, reshapes into view_copy) keep every value.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import layout, replay
from .errors import ExportError, ViewlowerError
from .export import Exported

#: SPEC §3a's layout-only targets (as_strided_copy and the conversions are checked below).
LAYOUT_ONLY = {
    "aten.view_copy.default", "aten._reshape_alias_copy.default", "aten.permute_copy.default",
    "aten.transpose_copy.int", "aten.t_copy.default", "aten.squeeze_copy.default",
    "aten.squeeze_copy.dim", "aten.squeeze_copy.dims", "aten.unsqueeze_copy.default",
    "aten.alias_copy.default", "aten.slice_copy.Tensor", "aten.select_copy.int",
    "aten.as_strided_copy.default", "dim_order_ops._clone_dim_order.default",
    "aten.clone.default",
}
CHANGES_DTYPE = {"dim_order_ops._to_dim_order_copy.default", "aten._to_copy.default"}
SPLIT_PRODUCERS = {"aten.split_copy.Tensor", "aten.split_with_sizes_copy.default",
                   "aten.unbind_copy.int"}


def is_layout_only(node: dict, by_name: Dict[str, dict]) -> bool:
    """Whether a call is one of SPEC §3a's layout-only ops (a conversion that keeps the dtype)."""
    t = node.get("target")
    if node.get("op") != "call_function":
        return False
    if t in LAYOUT_ONLY:
        return True
    if t in CHANGES_DTYPE:
        src = by_name.get(node["args"][0]) if node.get("args") else None
        if src is None or "val" not in src:
            return False
        return node["val"]["dtype"] == src["val"]["dtype"]
    if t == "operator.getitem":
        prod = by_name.get(node["args"][0])
        return prod is not None and prod.get("target") in SPLIT_PRODUCERS
    return False


def layout_only_bytes(graph: dict) -> Tuple[int, int]:
    """(count, nbytes) of the graph's layout-only nodes that copy (memory.view excluded)."""
    by_name = {n["name"]: n for n in graph["nodes"]}
    count = total = 0
    for n in graph["nodes"]:
        if is_layout_only(n, by_name):
            count += 1
            total += layout.nbytes(n["val"])
    return count, total


class Summary:
    """The figures `check` prints."""

    def __init__(self, graph: dict, lowered: dict, report: dict):
        self.nodes = len(graph["nodes"])
        n_in, bytes_in = layout_only_bytes(graph)
        n_out, bytes_out = layout_only_bytes(lowered)
        self.layout_copies = int(report.get("layout_copy_nodes", n_in))
        self.layout_bytes = bytes_in
        self.replaced = int(report.get("replaced", 0))
        self.kept = int(report.get("kept", 0))
        self.merged = int(report.get("merged", 0))
        self.removed_dead = int(report.get("removed_dead", 0))
        self.bytes_saved = int(report.get("bytes_saved", 0))
        self.bytes_copied = int(report["bytes_copied"]) if "bytes_copied" in report else bytes_out
        self.bytes_copied_in_graph = bytes_out
        self.views = sum(1 for n in lowered["nodes"] if n.get("target") == "memory.view")

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "layout_copy_nodes": self.layout_copies,
                "replaced": self.replaced, "kept": self.kept, "merged": self.merged,
                "removed_dead": self.removed_dead, "bytes_saved": self.bytes_saved,
                "bytes_copied": self.bytes_copied}

    def line(self) -> str:
        return (f"nodes {self.nodes}, layout-only copies {self.layout_copies}: "
                f"replaced {self.replaced}, kept {self.kept}, merged {self.merged}, "
                f"removed dead {self.removed_dead}; bytes saved {self.bytes_saved}, "
                f"still copied {self.bytes_copied}")


class Result:
    def __init__(self, summary: Summary, mismatch: Optional[dict], lowered: dict, report: dict,
                 trace_mismatch: Optional[dict] = None):
        self.summary = summary
        self.mismatch = mismatch
        self.trace_mismatch = trace_mismatch
        self.lowered = lowered
        self.report = report

    @property
    def equal(self) -> bool:
        return self.mismatch is None and self.trace_mismatch is None


def _fresh(values: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {k: v.clone(memory_format=torch.preserve_format) for k, v in values.items()}


def reference_run(exported: Exported) -> replay.Run:
    """The exported graph run in torch, every node placed in its declared layout."""
    with torch.no_grad():
        return replay.run(exported.graph, _fresh(exported.values), snapshot=True)


def replay_run(lowered: dict, exported: Exported) -> replay.Run:
    with torch.no_grad():
        return replay.run(lowered, _fresh(exported.values), snapshot=True)


def trace_run(exported: Exported) -> Dict[str, Any]:
    """Every node's value when torch runs its own traced fx graph (the traced layout's proof)."""
    import torch.fx
    seen: Dict[str, Any] = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            r = super().run_node(n)
            if isinstance(r, torch.Tensor):
                seen[n.name] = r.clone(memory_format=torch.contiguous_format)
            return r

    ph = [n for n in exported.graph["nodes"] if n["op"] == "placeholder" and n["kind"] != "constant"]
    vals = _fresh(exported.values)
    with torch.no_grad():
        out = Rec(exported.gm).run(*[vals[n["name"]] for n in ph])
    seen["__outputs__"] = out
    return seen


def compare_with_trace(exported: Exported, ref: replay.Run) -> Optional[dict]:
    traced = trace_run(exported)
    for name in ref.order:
        if name in traced and name in ref.snapshots:
            d = replay.first_difference(traced[name], ref.snapshots[name])
            if d is not None:
                return {"node": name, "index": d[0], "expected": d[1], "actual": d[2]}
    return None


def run_check(exported: Exported, lowerer: Any, opts: Dict[str, Any],
              ref: Optional[replay.Run] = None, against_trace: bool = False) -> Result:
    """Lowers the exported graph with `opts` and replays it; see the module docstring."""
    ref = ref if ref is not None else reference_run(exported)
    res = lowerer.lower(exported.graph, opts)
    lowered, report = res["graph"], res["report"]
    got = replay_run(lowered, exported)
    mismatch = replay.compare_runs(lowered, ref, got)
    tm = compare_with_trace(exported, ref) if against_trace else None
    return Result(Summary(exported.graph, lowered, report), mismatch, lowered, report, tm)


def force_wrong_alias(lowered: dict, report: dict) -> Optional[str]:
    """Turns one kept copy that may not alias (a view_copy kept for base_layout/view_layout,
    e.g. the flatten of a channels-last tensor) into a memory.view, in place, and returns its
    name (None when the graph has no such copy). A replay that really aliases must then differ."""
    wanted = {"base_layout", "view_layout", "reorders"}
    by_name = {n["name"]: n for n in lowered["nodes"]}
    for d in report.get("decisions", []):
        n = by_name.get(d.get("node"))
        if (d.get("decision") == "kept" and wanted & set(d.get("reasons", [])) and n is not None
                and n.get("target") == "aten.view_copy.default"
                and layout.numel(n["val"]["shape"]) > 1):
            base = n["args"][0]
            n["target"] = "memory.view"
            n["alias_of"] = _owner(by_name, base)
            n.pop("kwargs", None)
            return n["name"]
    return None


def _owner(by_name: Dict[str, dict], name: str) -> str:
    n = by_name[name]
    while n.get("target") == "memory.view":
        n = by_name[n["alias_of"]]
    return n["name"]


def self_test(exported: Exported, lowered: dict, report: dict,
              ref: Optional[replay.Run] = None) -> Tuple[Optional[str], Optional[dict]]:
    """(forced node, mismatch found) after forcing one wrong alias into the lowered graph."""
    wrong = copy.deepcopy(lowered)
    forced = force_wrong_alias(wrong, report)
    if forced is None:
        return None, None
    ref = ref if ref is not None else reference_run(exported)
    return forced, replay.compare_runs(wrong, ref, replay_run(wrong, exported))


def describe(m: dict) -> str:
    where = f"output {m['output']} ({m['node']})" if "output" in m else f"node {m['node']}"
    if m["index"] == -1:
        return f"{where}: expected {m['expected']}, got {m['actual']}"
    return (f"{where} differs at flat index {m['index']}: expected {m['expected']!r}, "
            f"got {m['actual']!r}")
