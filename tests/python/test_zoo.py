"""The model zoo through a real viewlowerd: every model exported (contiguous and channels-last,
edge and traced layouts), lowered with the safe policy, replayed in torch with real aliases and
compared bit for bit node by node; the report's counters checked against the graphs; the legacy
policy caught where it breaks channels-last models. `-m "not zoo"` is the fast subset."""
import copy

import pytest
import torch

from viewlower import check, export as ex, layout
from viewlower.lowering import options_of

#: name → (MODEL, kwargs, inputs, has channels-last variant, in the fast subset)
ZOO = {
    "patch_embed": ("viewlower.models:patch_embed", {}, [[2, 3, 32, 32]], True, True),
    "gpt_attention": ("viewlower.models:gpt_attention", {}, [[2, 8, 64]], False, True),
    "resnet18": ("torchvision.models:resnet18", {}, [[1, 3, 32, 32]], True, False),
    "mobilenet_v3_small": ("torchvision.models:mobilenet_v3_small", {}, [[1, 3, 32, 32]], True, False),
    "efficientnet_b0": ("torchvision.models:efficientnet_b0", {}, [[1, 3, 32, 32]], True, False),
    "vit_b_16": ("torchvision.models:vit_b_16", {"image_size": 64}, [[1, 3, 64, 64]], True, False),
    "swin_t": ("torchvision.models:swin_t", {}, [[1, 3, 64, 64]], True, False),
    "convnext_tiny": ("torchvision.models:convnext_tiny", {}, [[1, 3, 32, 32]], True, False),
    "shufflenet_v2_x0_5": ("torchvision.models:shufflenet_v2_x0_5", {}, [[1, 3, 64, 64]], True, False),
    # rank-5 activations and weights, channels-last-3d (3-D then 2-D-in-time convolutions)
    "mc3_18": ("torchvision.models:video.mc3_18", {}, [[1, 3, 4, 32, 32]], True, False),
    # block and grid attention: window partitions of strided views, relative position bias
    "maxvit": ("torchvision.models:maxvit.MaxVit",
               {"input_size": (64, 64), "stem_channels": 16, "partition_size": 2,
                "block_channels": [16, 32], "block_layers": [1, 1], "head_dim": 8,
                "stochastic_depth_prob": 0.0}, [[1, 3, 64, 64]], True, False),
    # two inputs, a correlation volume, grid_sample, a list of outputs; its channels-last
    # graph keeps permutes for `reorders` but no reshape
    "raft_small": ("torchvision.models:optical_flow.raft_small", {},
                   [[1, 3, 64, 64], [1, 3, 64, 64]], True, False),
}

#: Channels-last models in which the legacy policy aliases a view_copy that reorders elements
#: (the flatten of a channels-last tensor); in the others every view_copy legacy aliases sits
#: on a physically contiguous base, so it changes nothing.
LEGACY_BREAKS = {"patch_embed", "vit_b_16", "shufflenet_v2_x0_5", "maxvit"}

CASES = [pytest.param(name, cl, lay, id=f"{name}-{'channels_last' if cl else 'contiguous'}-{lay}",
                      marks=[] if ZOO[name][4] else [pytest.mark.zoo])
         for name in ZOO for cl in ([False, True] if ZOO[name][3] else [False])
         for lay in ("edge", "traced")]

_cache = {}
SUMMARIES = {}  # graph name → check.Summary, printed as a table at the end (conftest)


def exported(name, cl, lay):
    """Each model is built once (zero parameters randomised) and traced once per layout."""
    key = (name, cl, lay)
    if key not in _cache:
        if not any(k[0] == name for k in _cache):
            _cache.clear()  # one model at a time in memory
        spec, kwargs, shapes, has_cl, _ = ZOO[name]
        if (name, False) not in _cache:
            base = ex.build_model(spec, kwargs)
            ex.randomize_zero_parameters(base)
            _cache[(name, False)] = base
            if has_cl:  # copied before any trace: RAFT keeps traced tensors as attributes
                _cache[(name, True)] = ex.to_channels_last(copy.deepcopy(base))
        inputs = ex.make_inputs([(s, torch.float32) for s in shapes], channels_last=cl)
        _cache[key] = ex.export(_cache[(name, cl)], inputs,
                                name=f"{name}{'_channels_last' if cl else ''}_{lay}",
                                layout_mode=lay)
    return _cache[key]


def assert_counters_consistent(e, res, fold=True):
    g, low, rep = e.graph, res.lowered, res.report
    n_layout, bytes_layout = check.layout_only_bytes(g)
    view_copies = sum(1 for n in g["nodes"] if n.get("target") == "aten.view_copy.default")
    assert rep["view_copy_nodes"] == view_copies
    total = rep.get("layout_copy_nodes", view_copies)
    assert rep["replaced"] + rep["kept"] + rep.get("merged", 0) + rep["removed_dead"] == total
    assert len(rep["decisions"]) == rep["replaced"] + rep["kept"] + rep.get("merged", 0)
    views = [n for n in low["nodes"] if n.get("target") == "memory.view"]
    assert len(views) == rep["replaced"]
    by_name = {n["name"]: n for n in low["nodes"]}
    for d in rep["decisions"]:
        want = {"replaced": "memory.view", "merged": "aten.as_strided_copy.default"}
        if d["decision"] in want:
            assert by_name[d["node"]]["target"] == want[d["decision"]]
        else:
            assert d["reasons"], d
    assert rep["bytes_saved"] >= sum(layout.nbytes(v["val"]) for v in views)
    if fold and "layout_copy_nodes" in rep:  # the layout algebra's report
        assert rep["layout_copy_nodes"] == n_layout
        assert rep["bytes_saved"] + rep["bytes_copied"] == bytes_layout
        assert rep["bytes_copied"] == check.layout_only_bytes(low)[1]
        for v in views:
            owner = by_name[v["alias_of"]]
            assert owner.get("target") != "memory.view"
    for v in views:  # alias_of is the storage owner of args[0] (docs/format.md §3)
        assert v["alias_of"] == storage_owner(by_name, v["args"][0]), v["name"]


def storage_owner(by_name, name):
    n = by_name[name]
    while True:
        t = n.get("target", "")
        if t == "memory.view":
            return n["alias_of"]
        if isinstance(n.get("kwargs", {}).get("out"), str):
            n = by_name[n["kwargs"]["out"]]
        elif n["op"] == "call_function" and t.split(".")[1].endswith("_") and \
                isinstance(n["args"][0], str):
            n = by_name[n["args"][0]]
        else:
            return n["name"]


#: Edge-layout CNN classifiers: with stored parameter layouts every byte they still copied was the
#: classifier's weight transposed, so nothing is copied any more (issue 19's table, checked here
#: exactly).
CNN = {"resnet18", "mobilenet_v3_small", "efficientnet_b0"}


def assert_param_layouts_declared(e, res):
    """Each relaid parameter (the report's param_layouts) is declared in its new order in the
    lowered graph, was something else, and at least one of its readers no longer copies."""
    by_name = {n["name"]: n for n in res.lowered["nodes"]}
    before = {n["name"]: n for n in e.graph["nodes"]}
    rep = res.report
    if "params_relaid" not in rep:  # a core without parameter layouts
        return
    assert rep["params_relaid"] == len(rep["param_layouts"])
    for entry in rep["param_layouts"]:
        node = by_name[entry["node"]]
        assert node["op"] == "placeholder" and node["kind"] in ("parameter", "constant")
        assert layout.spec_dim_order(node["val"]) == entry["dim_order"] != entry["was"]
        assert layout.spec_dim_order(before[entry["node"]]["val"]) == entry["was"]
        assert entry["nbytes"] == layout.nbytes(node["val"]) and entry["aliased"] >= 1
    relaid = {p["node"] for p in rep["param_layouts"]}
    for n in res.lowered["nodes"]:
        if n["op"] == "placeholder" and n["name"] not in relaid and n["name"] in before:
            assert n["val"]["shape"] == before[n["name"]]["val"]["shape"]
            assert layout.spec_dim_order(n["val"]) == layout.spec_dim_order(
                before[n["name"]]["val"]), n["name"]


def assert_idempotent(lowerer, res, opts):
    """Lowering the lowered graph changes nothing (docs/format.md §3 and §9)."""
    again = lowerer.lower(res.lowered, opts)
    assert again["graph"] == res.lowered
    if "params_relaid" in again["report"]:
        assert again["report"]["params_relaid"] == 0


def assert_plan_checked(res):
    """The C planner's plan recomputed in Python (storages, lifetimes, the invariant, the lower
    bound, the naive size), and no larger than greedy-by-size best fit on the same storages."""
    from viewlower import plan
    from test_plan import best_fit_by_size
    p = res.report["plan"]
    assert plan.check_plan(res.lowered) is None
    mine = plan.figures(res.lowered)
    assert {k: p[k] for k in mine} == mine
    assert res.lowered["plan"] == {"arena_bytes": p["arena_bytes"], "alignment": 16}
    assert p["alignment"] == 16
    assert p["lower_bound_bytes"] <= p["arena_bytes"] <= best_fit_by_size(res.lowered)
    assert p["arena_bytes"] <= p["naive_bytes"]


PLANS = {}  # graph name → the report's plan, printed with the zoo table (conftest)


@pytest.mark.parametrize("name,cl,lay", CASES)
def test_lowering_replays_bit_exact(lowerer, name, cl, lay):
    """The default lowering, planned (the plan changes no decision), replayed in torch
    inside the plan's one arena (`check --plan`) and compared node by node."""
    e = exported(name, cl, lay)
    opts = options_of(plan=True)
    res = check.run_check(e, lowerer, opts, against_trace=lay == "traced", arena=True)
    assert res.trace_mismatch is None, check.describe(res.trace_mismatch)
    assert res.literal_change is None, check.describe(res.literal_change)
    assert res.mismatch is None, check.describe(res.mismatch)
    assert_counters_consistent(e, res)
    assert_param_layouts_declared(e, res)
    assert_plan_checked(res)
    assert_idempotent(lowerer, res, opts)
    if name in CNN and lay == "edge":
        assert res.summary.bytes_copied == 0
    SUMMARIES[e.graph["name"]] = res.summary
    PLANS[e.graph["name"]] = res.report["plan"]


PLAN_CASES = [pytest.param(name, cl, lay, id=f"{name}-{'channels_last' if cl else 'contiguous'}-{lay}",
                           marks=[] if ZOO[name][4] else [pytest.mark.zoo])
              for name in ZOO for cl in ([False, True] if ZOO[name][3] else [False])
              for lay in ("edge", "traced")]


@pytest.mark.parametrize("name,cl,lay", PLAN_CASES)
def test_the_plan_is_within_5_percent_of_the_lower_bound(lowerer, name, cl, lay):
    """Issue 20's bound on every zoo graph (today every one plans exactly at its lower bound)."""
    p = lowerer.lower(exported(name, cl, lay).graph, options_of(plan=True))["report"]["plan"]
    assert p["arena_bytes"] <= p["lower_bound_bytes"] * 1.05, p


LEGACY = [pytest.param(name, id=name, marks=[] if ZOO[name][4] else [pytest.mark.zoo])
          for name in ZOO if ZOO[name][3]]


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_policy_is_caught_breaking_channels_last_models(lowerer, name):
    e = exported(name, True, "edge")
    res = check.run_check(e, lowerer, options_of("legacy"))
    assert res.literal_change is None, check.describe(res.literal_change)
    if name in LEGACY_BREAKS:
        assert res.mismatch is not None, "legacy aliased a channels-last flatten unnoticed"
        assert res.mismatch["index"] >= 0
    else:
        assert res.mismatch is None, check.describe(res.mismatch)


SELF_TEST = [pytest.param(name, id=name, marks=[] if ZOO[name][4] else [pytest.mark.zoo])
             for name in sorted(LEGACY_BREAKS)]


@pytest.mark.parametrize("name", SELF_TEST)
def test_self_test_catches_a_forced_wrong_alias_of_a_channels_last_flatten(lowerer, name):
    e = exported(name, True, "edge")
    res = check.run_check(e, lowerer, options_of())
    assert res.equal
    forced, found = check.self_test(e, res.lowered, res.report)
    assert forced is not None
    if name == "patch_embed":
        assert forced == "_reshape_alias_copy"
    assert found is not None and found["node"] == forced and found["index"] >= 0


class _TransposeChannelsLast(torch.nn.Module):
    def forward(self, x):
        return x.transpose(1, 2) + 1


def test_self_test_forces_a_kept_transpose_when_no_reshape_reorders(lowerer):
    """A graph whose only kept copy is a transpose of a channels-last input (kept: reorders), as
    in RAFT's channels-last graph: the self-test forces that transpose into an alias of its
    input's buffer, and the replay catches it."""
    e = ex.export(_TransposeChannelsLast(),
                  ex.make_inputs([([2, 3, 4, 5], torch.float32)], channels_last=True))
    assert not [n for n in e.graph["nodes"] if n.get("target") == "aten.view_copy.default"]
    res = check.run_check(e, lowerer, options_of())
    assert res.equal
    (d,) = res.report["decisions"]
    assert (d["node"], d["decision"], d["reasons"]) == ("transpose_copy", "kept", ["reorders"])
    forced, found = check.self_test(e, res.lowered, res.report)
    assert forced == "transpose_copy"
    assert found is not None and found["node"] == forced and found["index"] >= 0


def test_self_test_has_nothing_to_force_in_a_graph_without_reordering_reshapes(lowerer):
    e = exported("gpt_attention", False, "edge")
    wrong = copy.deepcopy(e.graph)
    assert check.force_wrong_alias(wrong) is None


@pytest.mark.parametrize("lay", ["edge", "traced"])
def test_a_split_kept_as_outputs_lowers_and_replays_like_its_slices(lowerer, lay):
    slices = exported("gpt_attention", False, lay)
    spec, kwargs, shapes, _, _ = ZOO["gpt_attention"]
    e = ex.export(_cache[("gpt_attention", False)],
                  ex.make_inputs([(s, torch.float32) for s in shapes]), layout_mode=lay,
                  split="outputs")
    assert [n for n in e.graph["nodes"] if n.get("target") == "aten.split_copy.Tensor"]
    res = check.run_check(e, lowerer, options_of(), against_trace=lay == "traced")
    assert res.equal, check.describe(res.mismatch or res.trace_mismatch or res.literal_change)
    base = check.run_check(slices, lowerer, options_of())
    for key in ("replaced", "kept", "merged", "bytes_saved", "bytes_copied"):
        assert getattr(res.summary, key) == getattr(base.summary, key), key


FAST = [pytest.param(name, lay, id=f"{name}-{lay}") for name in ("patch_embed", "gpt_attention")
        for lay in ("edge", "traced")]


@pytest.mark.parametrize("name,lay", FAST)
def test_without_fold_only_view_copy_is_lowered_and_the_replay_is_bit_exact(lowerer, name, lay):
    e = exported(name, ZOO[name][3], lay)
    res = check.run_check(e, lowerer, options_of(fold=False))
    assert res.equal, check.describe(res.mismatch or res.literal_change)
    rep = res.report
    assert rep["layout_copy_nodes"] == rep["view_copy_nodes"] and rep["merged"] == 0
    assert {d["target"] for d in rep["decisions"]} <= {"aten.view_copy.default"}
    assert_counters_consistent(e, res, fold=False)


def test_keep_view_copy_changes_nothing_and_reports_every_copy_disabled(lowerer):
    e = exported("gpt_attention", False, "edge")
    res = check.run_check(e, lowerer, options_of(remove_view_copy=False))
    assert res.equal
    assert res.lowered["nodes"] == e.graph["nodes"] or all(
        n.get("target") != "memory.view" for n in res.lowered["nodes"])
    assert res.report["replaced"] == 0 and res.report["kept"] == res.report["layout_copy_nodes"]
    assert all(d["reasons"] == ["disabled"] for d in res.report["decisions"])


@pytest.mark.zoo
def test_resnet18_stores_its_classifier_weight_transposed_and_explain_names_it(lowerer, tmp_path,
                                                                             viewlowerctl):
    """Stored parameter layouts on resnet18 (edge): fc.weight is relaid to [1,0] (its t_copy an
    alias), the replay stores it so (its storage holds W.t()'s bytes), the weights file holds
    exactly W.t().contiguous()'s bytes, and explain's lines name p_fc_weight."""
    import subprocess
    from viewlower import replay, weights
    e = exported("resnet18", False, "edge")
    model = _cache[("resnet18", False)]
    res = check.run_check(e, lowerer, options_of())
    assert res.equal
    (entry,) = [p for p in res.report["param_layouts"] if p["node"] == "p_fc_weight"]
    assert entry == {"node": "p_fc_weight", "dim_order": [1, 0], "was": [0, 1],
                     "nbytes": 1000 * 512 * 4, "aliased": 1}
    by_name = {n["name"]: n for n in res.lowered["nodes"]}
    assert by_name["t_copy"]["target"] == "memory.view"
    assert by_name["t_copy"]["alias_of"] == "p_fc_weight"
    w = model.fc.weight.detach()
    r = replay.Run(res.lowered, check.stored_values(e, res.lowered))
    r.keep = True
    with torch.no_grad():
        r.complete()
    stored = r.env["p_fc_weight"]
    assert stored.stride() == (1, 1000) and torch.equal(stored, w)
    raw = stored.as_strided((512 * 1000,), (1,)).numpy().tobytes()
    assert raw == w.t().contiguous().numpy().tobytes()
    path = tmp_path / "resnet18.vlw"
    weights.write_weights(str(path), res.lowered, weights.program_state(model, e))
    data = path.read_bytes()
    index = weights.read_weights(str(path))
    (fc,) = [t for t in index["tensors"] if t["node"] == "p_fc_weight"]
    assert (fc["name"], fc["dim_order"], fc["nbytes"]) == ("fc.weight", [1, 0], 2048000)
    hlen = int.from_bytes(data[8:16], "little")
    start = (16 + hlen + 63) // 64 * 64
    assert data[start + fc["offset"]:start + fc["offset"] + fc["nbytes"]] == \
        w.t().contiguous().numpy().tobytes()
    g = tmp_path / "resnet18_edge.json"
    g.write_text(ex.export_text(e.graph))
    p = subprocess.run([viewlowerctl, "--local", "explain", str(g)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "p_fc_weight" in p.stdout
