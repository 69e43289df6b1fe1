"""The arena replay of a planned graph (docs/format.md §9, `check --plan`) and the plan checker of
viewlower.plan: a valid plan replays bit for bit inside one byte tensor; a plan with two live
storages in the same bytes is refused by the checker and, replayed anyway, gives wrong values.

The plans here are made by a small first-fit planner of this file over plan.storages, so the
replay and the checker are tested whatever the C planner does; test_zoo checks the C planner's
plans on the zoo."""
import copy

import pytest
import torch

from viewlower import check, export as ex, plan
from viewlower.models import gpt_attention, patch_embed
from viewlower.replay import Run


def first_fit(graph, align=16):
    """Each storage, by start, at the lowest offset clear of every placed storage whose lifetime
    meets its own."""
    g = copy.deepcopy(graph)
    placed = []
    for s in sorted(plan.storages(g, align), key=lambda s: (s.start, s.index)):
        live = sorted((o, o + t.size) for o, t in placed if t.start <= s.end and s.start <= t.end)
        off = 0
        for lo, hi in live:
            if off + s.size <= lo:
                break
            off = max(off, hi)
        placed.append((off, s))
        g["nodes"][s.index]["mem_offset"] = off
    g["plan"] = {"arena_bytes": max((o + s.size for o, s in placed), default=0),
                 "alignment": align}
    return g


def best_fit_by_size(graph, align=16):
    """The arena of the known baseline (issue 20): storages by decreasing size, each in the
    smallest gap between the placed storages whose lifetimes meet its own that fits it, else
    above them all."""
    placed = []
    for s in sorted(plan.storages(graph, align), key=lambda s: (-s.size, s.start, s.index)):
        live = sorted((o, o + t.size) for o, t in placed if t.start <= s.end and s.start <= t.end)
        gaps, off = [], 0
        for lo, hi in live:
            if lo - off >= s.size:
                gaps.append((lo - off, off))
            off = max(off, hi)
        placed.append((min(gaps)[1] if gaps else off, s))
    return max((o + s.size for o, s in placed), default=0)


def exported(model, shape, cl=False, layout="edge"):
    torch.manual_seed(0)
    return ex.export(model.eval(), ex.make_inputs([(shape, torch.float32)], channels_last=cl),
                     layout_mode=layout)


@pytest.fixture(scope="module")
def attention():
    return exported(gpt_attention(), [2, 8, 64])


def test_storages_and_lifetimes_follow_the_rule_on_a_small_graph():
    g = {"format": "viewlower.graph", "version": 1, "nodes": [
        {"name": "w", "op": "placeholder", "kind": "parameter",
         "val": {"dtype": "float32", "shape": [4]}},
        {"name": "x", "op": "placeholder", "val": {"dtype": "float32", "shape": [4]}},
        {"name": "a", "op": "call_function", "target": "aten.mul.Tensor", "args": ["x", "w"],
         "val": {"dtype": "float32", "shape": [4]}},
        {"name": "v", "op": "call_function", "target": "memory.view", "args": ["a", [2, 2]],
         "alias_of": "a", "val": {"dtype": "float32", "shape": [2, 2]}},
        {"name": "b", "op": "call_function", "target": "aten.relu.default", "args": ["x"],
         "val": {"dtype": "float32", "shape": [4]}},
        {"name": "c", "op": "call_function", "target": "aten.add_.Tensor", "args": ["b", "b"],
         "val": {"dtype": "float32", "shape": [4]}},
        {"name": "d", "op": "call_function", "target": "aten.relu.default", "args": ["v"],
         "val": {"dtype": "float32", "shape": [2, 2]}},
        {"name": "e", "op": "call_function", "target": "aten.empty.memory_format", "args": [[0]],
         "val": {"dtype": "float32", "shape": [0]}},
        {"name": "output", "op": "output", "args": ["d", "c"]}]}
    got = {s.owner: (s.start, s.end, s.size) for s in plan.storages(g, 32)}
    # w: a parameter (constant data); v aliases a, c is b written in place; e has no bytes
    assert got == {"x": (0, 4, 32), "a": (2, 6, 32), "b": (4, 8, 32), "d": (6, 8, 32)}
    assert plan.figures(g, 32) == {"lower_bound_bytes": 96, "naive_bytes": 128, "planned": 4}


@pytest.mark.parametrize("name", ["attention", "patch_embed_cl", "patch_embed_traced"])
def test_a_first_fit_plan_keeps_the_invariant_and_replays_bit_exact_in_one_arena(name, attention):
    e = {"attention": lambda: attention,
         "patch_embed_cl": lambda: exported(patch_embed(), [2, 3, 32, 32], cl=True),
         "patch_embed_traced": lambda: exported(patch_embed(), [2, 3, 32, 32], layout="traced")
         }[name]()
    g = first_fit(e.graph)
    assert plan.check_plan(g) is None
    f = plan.figures(g)
    assert f["lower_bound_bytes"] <= g["plan"]["arena_bytes"] < f["naive_bytes"]
    assert check.compare_replay(e, g, arena=True) is None
    r = Run(g, check.stored_values(e, g), arena=True)
    with torch.no_grad():
        for node, v in r:
            n = next(m for m in g["nodes"] if m["name"] == node)
            if "mem_offset" in n:  # the value the graph holds from now on is the arena's slot
                assert v.storage().data_ptr() == r.arena.bytes.storage().data_ptr()
                assert v.storage_offset() * v.element_size() == n["mem_offset"]


def _overlapping_pair(g):
    """(a, b): b starts while a is live and a is read after b is written."""
    ss = sorted(plan.storages(g), key=lambda s: (s.start, s.index))
    offs = {s.owner: g["nodes"][s.index]["mem_offset"] for s in ss}
    for b in ss:
        for a in ss:
            if a.start < b.start < a.end and offs[a.owner] != offs[b.owner] and \
                    offs[a.owner] + b.size <= g["plan"]["arena_bytes"] and \
                    g["nodes"][b.index]["op"] == "call_function":
                return a, b
    return None


def test_a_storage_moved_onto_a_live_neighbour_is_refused_and_replays_wrong(attention):
    e = attention
    g = first_fit(e.graph)
    a, b = _overlapping_pair(g)
    bad = copy.deepcopy(g)
    bad["nodes"][b.index]["mem_offset"] = g["nodes"][a.index]["mem_offset"]
    k = max(a.index, b.index)
    other = a.owner if k == b.index else b.owner
    assert plan.check_plan(bad) == f"/nodes/{k}/mem_offset: overlaps {other} while both are live"
    found = check.compare_replay(e, bad, arena=True)  # the checker bypassed
    assert found is not None and found["index"] >= 0
    assert check.compare_replay(e, bad) is None  # without the arena the plan is not used


@pytest.mark.parametrize("change,message", [
    (lambda g, i: g["nodes"][i].update(mem_offset=8), "is not a multiple of 16"),
    (lambda g, i: g["nodes"][i].pop("mem_offset"), "has no mem_offset"),
    (lambda g, i: g["plan"].update(arena_bytes=16), "is past the arena"),
    (lambda g, i: g["nodes"][0].update(mem_offset=0), "owns no planned storage"),
])
def test_the_checker_names_each_broken_rule(attention, change, message):
    g = first_fit(attention.graph)
    i = plan.storages(g)[-1].index
    change(g, i)
    assert message in plan.check_plan(g)


def test_an_arena_replay_of_a_slot_outside_the_arena_names_the_node(attention):
    g = first_fit(attention.graph)
    s = plan.storages(g)[-1]
    g["nodes"][s.index]["mem_offset"] = g["plan"]["arena_bytes"]
    found = check.compare_replay(attention, g, arena=True)
    assert found["node"] == s.owner and "outside the arena" in found["actual"]


def test_a_graph_without_a_plan_cannot_be_replayed_in_an_arena(attention):
    found = check.compare_replay(attention, attention.graph, arena=True)
    assert found["node"] == "plan" and "no plan" in found["actual"]


def test_two_getitems_of_one_output_are_one_storage_in_the_plan_and_the_arena():
    """A getitem result is output i of its producer: a second getitem of the same output is the
    same storage (the C planner gives it no mem_offset), so it sees the first one's in-place
    write in the arena too."""
    spec = {"dtype": "float32", "shape": [2, 3], "dim_order": [0, 1]}
    g = {"format": "viewlower.graph", "version": 1, "nodes": [
        {"name": "x", "op": "placeholder",
         "val": {"dtype": "float32", "shape": [4, 3], "dim_order": [0, 1]}},
        {"name": "s", "op": "call_function", "target": "aten.split_with_sizes_copy.default",
         "args": ["x", [2, 2]], "vals": [spec, spec]},
        {"name": "g0", "op": "call_function", "target": "operator.getitem", "args": ["s", 0],
         "val": spec},
        {"name": "g1", "op": "call_function", "target": "operator.getitem", "args": ["s", 1],
         "val": spec},
        {"name": "r", "op": "call_function", "target": "aten.relu_.default", "args": ["g0"],
         "val": spec},
        {"name": "g0b", "op": "call_function", "target": "operator.getitem", "args": ["s", 0],
         "val": spec},
        {"name": "y", "op": "call_function", "target": "aten.add.Tensor", "args": ["g0b", "g1"],
         "val": spec},
        {"name": "out", "op": "output", "args": ["y"]}]}
    got = {s.owner: (s.start, s.end, s.size) for s in plan.storages(g)}
    assert got == {"x": (0, 1, 48), "g0": (1, 6, 32), "g1": (1, 6, 32), "y": (6, 7, 32)}
    planned = first_fit(g)
    assert "mem_offset" not in planned["nodes"][5] and plan.check_plan(planned) is None
    x = torch.arange(-6, 6, dtype=torch.float32).reshape(4, 3)
    eager = Run(g, {"x": x}).complete().outputs[0]
    arena = Run(planned, {"x": x}, arena=True).complete().outputs[0]
    assert torch.equal(eager, torch.tensor([[0.0, 1, 2], [3, 4, 5]]))
    assert eager.numpy().tobytes() == arena.numpy().tobytes()
