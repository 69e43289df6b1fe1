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
import json
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import layout, replay
from .errors import ExportError
from .export import Exported, target_name

#: Layout-only targets (docs/format.md §3; as_strided_copy and the conversions are checked below).
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
    """Whether a call is one of the layout-only ops of docs/format.md §3 (a conversion that keeps
    the dtype)."""
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
        # Without the layout algebra (fold false, or a core without it) the counters cover the
        # view_copy nodes alone: the report's layout_copy_nodes is then view_copy_nodes.
        self.layout_copies = int(report.get("layout_copy_nodes", report.get("view_copy_nodes", n_in)))
        self.layout_nodes_in_graph = n_in
        self.layout_bytes = bytes_in
        self.replaced = int(report.get("replaced", 0))
        self.kept = int(report.get("kept", 0))
        self.merged = int(report.get("merged", 0))
        self.removed_dead = int(report.get("removed_dead", 0))
        self.bytes_saved = int(report.get("bytes_saved", 0))
        self.bytes_copied = int(report["bytes_copied"]) if "bytes_copied" in report else bytes_out
        self.bytes_copied_in_graph = bytes_out
        self.views = sum(1 for n in lowered["nodes"] if n.get("target") == "memory.view")
        #: parameters stored in another layout (absent when that step did not run)
        self.params_relaid = report.get("params_relaid")
        self.param_layouts = report.get("param_layouts", [])
        #: the report's plan figures (docs/format.md §9; None without a plan)
        self.plan = report.get("plan")

    def as_dict(self) -> dict:
        d = {"nodes": self.nodes, "layout_copy_nodes": self.layout_copies,
             "replaced": self.replaced, "kept": self.kept, "merged": self.merged,
             "removed_dead": self.removed_dead, "bytes_saved": self.bytes_saved,
             "bytes_copied": self.bytes_copied}
        if self.params_relaid is not None:
            d["params_relaid"] = int(self.params_relaid)
        if self.plan is not None:
            d["plan"] = {k: self.plan[k] for k in ("arena_bytes", "lower_bound_bytes",
                                                   "naive_bytes", "planned", "alignment")
                         if k in self.plan}
        return d

    def line(self) -> str:
        text = (f"nodes {self.nodes}, layout-only copies {self.layout_copies}: "
                f"replaced {self.replaced}, kept {self.kept}, merged {self.merged}, "
                f"removed dead {self.removed_dead}; bytes saved {self.bytes_saved}, "
                f"still copied {self.bytes_copied}")
        if self.params_relaid is not None:
            text += f"; parameters relaid {self.params_relaid}"
        return text

    def plan_line(self) -> Optional[str]:
        """The plan's three figures (docs/format.md §9), or None without a plan."""
        p = self.plan
        if p is None:
            return None
        return (f"plan: arena {p['arena_bytes']} bytes, lower bound {p['lower_bound_bytes']}, "
                f"naive {p['naive_bytes']} ({p.get('planned', '?')} storages, alignment "
                f"{p.get('alignment', '?')})")


class Result:
    def __init__(self, summary: Summary, mismatch: Optional[dict], lowered: dict, report: dict,
                 trace_mismatch: Optional[dict] = None):
        self.summary = summary
        self.mismatch = mismatch
        self.trace_mismatch = trace_mismatch
        self.lowered = lowered
        self.report = report

        self.literal_change: Optional[dict] = None

    @property
    def equal(self) -> bool:
        return (self.mismatch is None and self.trace_mismatch is None
                and self.literal_change is None)


def _mismatch(exported: Exported, name: str, actual: torch.Tensor,
              output: Optional[int] = None) -> dict:
    """The details of a digest mismatch: the reference value is recomputed up to that node."""
    if output is None:
        expected = replay.value_at(exported.graph, exported.values, name)
    else:
        with torch.no_grad():
            expected = replay.Run(exported.graph, exported.values).complete().outputs[output]
    d = replay.first_difference(expected, actual) if expected is not None else None
    d = d or (-1, "the reference value", "a different one")
    m = {"node": name, "index": d[0], "expected": d[1], "actual": d[2]}
    if output is not None:
        m["output"] = output
    return m


def stored_values(exported: Exported, lowered: dict) -> Dict[str, torch.Tensor]:
    """The placeholders' values for a replay of `lowered`: every parameter, buffer and constant
    in the layout the lowered graph declares for it (weights.apply_param_layouts: the very
    tensors `--weights-out` writes, a relaid weight really stored permuted), the inputs as
    exported."""
    from .weights import apply_param_layouts
    values = dict(exported.values)
    values.update(apply_param_layouts(exported.values, lowered))
    return values


def compare_replay(exported: Exported, lowered: dict, arena: bool = False,
                   phase: Any = None) -> Optional[dict]:
    """Runs the lowered graph with real aliases and returns the first node (then output) whose
    value differs from the reference, or None. Nodes removed as dead are not compared. With
    `arena` the graph's plan is replayed in one arena (replay.Arena). `phase` (a progress phase)
    is stepped once per node."""
    on_node = (lambda i: phase.step()) if phase is not None else None
    try:
        r = replay.Run(lowered, stored_values(exported, lowered), arena=arena, on_node=on_node)
    except ExportError as e:
        return {"node": "plan", "index": -1, "expected": "a plan to replay", "actual": str(e)}
    with torch.no_grad():
        try:
            for name, v in r:
                want = exported.digests.get(name)
                if want is not None and isinstance(v, torch.Tensor) and replay.digest(v) != want:
                    return _mismatch(exported, name, v.clone())
        except ExportError as e:  # the lowered graph does not even run: its first bad node
            idx = int(e.path.split("/")[2]) if e.path and e.path.startswith("/nodes/") else -1
            node = lowered["nodes"][idx]["name"] if idx >= 0 else "?"
            return {"node": node, "index": -1, "expected": "a value", "actual": e.message}
    outs = lowered["nodes"][-1]["args"]
    if len(r.outputs) != len(exported.output_digests):
        return {"node": "output", "index": -1, "expected": len(exported.output_digests),
                "actual": len(r.outputs)}
    for i, (t, want) in enumerate(zip(r.outputs, exported.output_digests)):
        if replay.digest(t) != want:
            return _mismatch(exported, outs[i], t.clone(), output=i)
    final = r.final_state()
    for name, want in exported.state_digests.items():
        if name in final and replay.digest(final[name]) != want:
            return {"node": name, "index": -1, "expected": "the state the reference leaves",
                    "actual": "another (the mutated placeholder's final value differs)"}
    return None


def compare_with_trace(exported: Exported) -> Optional[dict]:
    """The first node whose value differs between torch running its own traced fx graph and the
    reference run of the exported graph (the proof that the exporter's rewrites keep values;
    meaningful with the traced layout, where both run on the same strides)."""
    import torch.fx
    found: List[dict] = []

    class Rec(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            r = super().run_node(n)
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
                r = replay.defined(target_name(n.target, ""), r)
            want = exported.digests.get(n.name)
            if (not found and want is not None and isinstance(r, torch.Tensor)
                    and replay.digest(r) != want):
                found.append(_mismatch(exported, n.name, r.clone()))
            return r

    ph = [n for n in exported.graph["nodes"] if n["op"] == "placeholder" and n["kind"] != "constant"]
    vals = [exported.values[n["name"]].clone(memory_format=torch.preserve_format) for n in ph]
    with torch.no_grad():
        torch.manual_seed(replay.RNG_SEED)
        Rec(exported.gm).run(*vals)
    return found[0] if found else None


def _same_literal(a: Any, b: Any, refs: bool = False) -> bool:
    """Whether a and b are the same literals. With `refs` (a node's `args`), a string is a
    reference to a node, not a literal: the lowering may point it elsewhere (normalization
    rebases a view_copy of a view_copy onto the first one's base), so only its kind counts."""
    if type(a) is not type(b):
        return False
    if refs and isinstance(a, str):
        return True
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_literal(x, y, refs) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_literal(a[k], b[k], refs) for k in a)
    return a == b


def literal_change(graph: dict, lowered: dict) -> Optional[dict]:
    """The first node whose args or kwargs literals the lowering changed although it kept its
    target (docs/format.md §2: lowering never changes a literal), or None. References in `args` may
    change (normalization); a wrong one shows in the replay."""
    by_name = {n["name"]: n for n in graph["nodes"]}
    for n in lowered["nodes"]:
        o = by_name.get(n["name"])
        if o is None or o.get("target") != n.get("target") or n["op"] == "output":
            continue
        for key in ("args", "kwargs"):
            if not _same_literal(o.get(key, [] if key == "args" else {}),
                                 n.get(key, [] if key == "args" else {}), refs=key == "args"):
                return {"node": n["name"], "index": -1, "literal": key,
                        "expected": json.dumps(o.get(key)), "actual": json.dumps(n.get(key))}
    return None


def run_check(exported: Exported, lowerer: Any, opts: Dict[str, Any],
              against_trace: bool = False, arena: bool = False, progress: Any = None) -> Result:
    """Lowers the exported graph with `opts` and replays it; see the module docstring. With
    `arena` (and `plan` in `opts`) the replay runs inside the plan's arena, after the plan is
    checked against the plan's invariant (docs/format.md §9; plan.check_plan). `progress` times the
    phases `lower`, `replay` and `compare with trace`."""
    from .plan import check_plan
    from .progress import silent
    progress = progress or silent()
    with progress.phase("lower"):
        res = lowerer.lower(exported.graph, opts)
    lowered, report = res["graph"], res["report"]
    changed = literal_change(exported.graph, lowered)
    bad_plan = check_plan(lowered) if arena else None
    mismatch = None
    if bad_plan is not None:
        mismatch = {"node": "plan", "index": -1, "actual": bad_plan,
                    "expected": "a plan keeping the memory plan's invariant"}
    elif changed is None:
        # A changed literal makes the lowered graph another program: it is the finding.
        with progress.phase("replay in the arena" if arena else "replay",
                            total=len(lowered["nodes"])) as phase:
            mismatch = compare_replay(exported, lowered, arena=arena, phase=phase)
    tm = None
    if against_trace:
        with progress.phase("compare with trace"):
            tm = compare_with_trace(exported)
    r = Result(Summary(exported.graph, lowered, report), mismatch, lowered, report, tm)
    r.literal_change = changed
    return r


def _reorders(by_name: Dict[str, dict], n: dict) -> bool:
    """A view_copy between a base that is not physically contiguous and a contiguous view of
    another shape: aliasing it would read the base's bytes in the wrong order."""
    base = by_name.get(n["args"][0])
    if base is None or "val" not in base:
        return False
    bs, vs = base["val"], n["val"]
    return (not layout.is_physically_contiguous(bs["shape"], layout.spec_strides(bs))
            and layout.is_physically_contiguous(vs["shape"], layout.spec_strides(vs))
            and [s for s in bs["shape"] if s != 1] != [s for s in vs["shape"] if s != 1])


def force_wrong_alias(graph: dict, report: Optional[dict] = None) -> Optional[str]:
    """Turns one copy that may not alias into a memory.view, in place, and returns its name
    (None when there is none): a view_copy the lowering kept for a layout reason
    (base_layout/view_layout/reorders, from `report`), else one whose base is not physically
    contiguous and whose view is a contiguous reshape (the flatten of a channels-last tensor),
    else any other layout-only copy kept for a layout reason (a permute or slice kept for
    `reorders`: a model whose every reshape aliased, RAFT's channels-last correlation), as a
    view of its input's buffer in its own declared layout. A replay that really aliases must
    then differ."""
    wanted = {"base_layout", "view_layout", "reorders"}
    by_name = {n["name"]: n for n in graph["nodes"]}
    kept = [d.get("node") for d in (report or {}).get("decisions", [])
            if d.get("decision") == "kept" and wanted & set(d.get("reasons", []))]
    candidates = [by_name[k] for k in kept if k in by_name]
    candidates += [n for n in graph["nodes"] if n.get("target") == "aten.view_copy.default"
                   and _reorders(by_name, n)]
    for n in candidates:
        if n.get("target") == "aten.view_copy.default" and layout.numel(n["val"]["shape"]) > 1:
            n["target"] = "memory.view"
            n["alias_of"] = _owner(by_name, n["args"][0])
            n.pop("kwargs", None)
            return n["name"]
    for n in candidates:
        if (is_layout_only(n, by_name) and n["target"] != "operator.getitem"
                and n["target"] != "aten.as_strided_copy.default"
                and layout.numel(n["val"]["shape"]) > 1):
            n.update(target="memory.view", args=[n["args"][0], list(n["val"]["shape"])],
                     alias_of=_owner(by_name, n["args"][0]))
            n.pop("kwargs", None)
            return n["name"]
    return None


def _owner(by_name: Dict[str, dict], name: str) -> str:
    n = by_name[name]
    while n.get("target") == "memory.view":
        n = by_name[n["alias_of"]]
    return n["name"]


def self_test(exported: Exported, lowered: dict,
              report: dict) -> Tuple[Optional[str], Optional[dict]]:
    """(forced node, mismatch found) after forcing one wrong alias: into the lowered graph when
    it kept such a copy, else into the exported graph itself (the layout algebra may have
    removed the copy by aliasing the whole chain)."""
    for g, rep in ((lowered, report), (exported.graph, None)):
        wrong = copy.deepcopy(g)
        forced = force_wrong_alias(wrong, rep)
        if forced is not None:
            return forced, compare_replay(exported, wrong)
    return None, None


def describe(m: dict) -> str:
    where = f"output {m['output']} ({m['node']})" if "output" in m else f"node {m['node']}"
    if "literal" in m:
        return f"{where}: the lowering changed its {m['literal']} from {m['expected']} to {m['actual']}"
    if m["index"] == -1:
        return f"{where}: expected {m['expected']}, got {m['actual']}"
    return (f"{where} differs at flat index {m['index']}: expected {m['expected']!r}, "
            f"got {m['actual']!r}")
