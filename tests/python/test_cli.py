"""python3 -m viewlower check / lower / export as a user runs them: summaries, exit codes."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PATCH = ["viewlower.models:patch_embed", "--input", "2,3,32,32", "--channels-last"]


def cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "viewlower", *args], capture_output=True,
                          text=True, env=e, timeout=300)


def test_check_through_the_daemon_prints_the_summary_and_exits_0(daemon):
    p = cli("check", *PATCH, "--socket", daemon, "--self-test")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("patch_embed_channels_last_edge: nodes 8, layout-only copies 2:")
    assert "equal: every node and output bit for bit" in lines
    assert any(l.startswith("self-test: forcing _reshape_alias_copy into an alias is caught")
               for l in lines)


PHASE = re.compile(r"viewlower: (trace|layouts|lower|replay|self-test) [0-9]+\.[0-9]{2} s"
                   r"( \([0-9]+ nodes\))?")


def test_check_prints_each_phase_with_its_time_on_stderr_and_no_bar_off_a_terminal(daemon):
    p = cli("check", *PATCH, "--socket", daemon, "--self-test")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert [PHASE.fullmatch(l).group(1) for l in lines] == \
        ["trace", "layouts", "lower", "replay", "self-test"]
    assert lines[1].endswith("(8 nodes)")  # the exported graph's nodes
    assert "\r" not in p.stderr and "[" not in p.stderr
    p = cli("export", *PATCH)
    assert p.returncode == 0 and [PHASE.fullmatch(l).group(1) for l in p.stderr.splitlines()] \
        == ["trace", "layouts"]
    json.loads(p.stdout)  # the graph alone on stdout


def test_check_json_prints_exactly_one_object_and_nothing_on_stderr(daemon):
    p = cli("check", *PATCH, "--socket", daemon, "--json", "--self-test")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    out = json.loads(p.stdout)  # one JSON document: anything else on stdout fails here
    assert p.stdout.count("\n") == 1
    assert out["equal"] is True
    assert out["model"] == {"model": "viewlower.models:patch_embed", "kwargs": {},
                            "inputs": ["2,3,32,32"], "channels_last": True, "layout": "edge",
                            "train": False, "graph": "patch_embed_channels_last_edge"}
    f = out["figures"]
    assert f["nodes"] == 8 and f["layout_copy_nodes"] == 2
    assert f["replaced"] + f["kept"] + f["merged"] + f["removed_dead"] == f["layout_copy_nodes"]
    assert set(out["timings"]) == {"trace", "layouts", "lower", "replay", "self-test"}
    assert all(isinstance(v, float) and v >= 0 for v in out["timings"].values())
    assert out["self_test"]["forced"] == "_reshape_alias_copy" and out["self_test"]["caught"]


def test_self_test_with_nothing_to_force_still_exits_0(daemon):
    """ResNet-18 in contiguous layout keeps no layout copy: the check is equal and the self-test
    has nothing to turn into a wrong alias, which is no failure (it exited 2 once)."""
    model = ["torchvision.models:resnet18", "--input", "1,3,32,32"]
    p = cli("check", *model, "--socket", daemon, "--self-test")
    assert p.returncode == 0, p.stderr
    assert "self-test: nothing to force: the lowering kept no layout copy that an alias would " \
        "break" in p.stdout.splitlines()
    p = cli("check", *model, "--socket", daemon, "--self-test", "--json")
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)
    assert out["equal"] is True and out["figures"]["kept"] == 0
    assert out["self_test"] == {"forced": None, "caught": None, "found": None}


def test_check_json_of_a_mismatch_and_of_an_error_is_still_one_object(tmp_path, daemon):
    p = cli("check", *PATCH, "--socket", daemon, "--json", "--policy", "legacy")
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["equal"] is False and out["mismatch"]["node"] == "_reshape_alias_copy"
    assert out["mismatch"]["message"].startswith("node _reshape_alias_copy differs at flat index")
    p = cli("check", *PATCH, "--json", "--socket", str(tmp_path / "none.sock"))
    assert p.returncode == 3
    out = json.loads(p.stdout)
    assert out["equal"] is None and out["error"]["exit_code"] == 3
    assert set(out["timings"]) == {"trace", "layouts", "lower"}  # the phase that failed too


def test_the_socket_help_names_the_clients_own_default_without_viewlowerctls_fallback():
    for command in ("check", "lower"):
        p = cli(command, "--help", env={"COLUMNS": "400"})
        assert p.returncode == 0, p.stderr
        assert ("--socket PATH viewlowerd socket (default: $VIEWLOWER_SOCKET, else as root "
                "/run/viewlower/viewlower.sock, else $XDG_RUNTIME_DIR/viewlower.sock; unlike "
                "viewlowerctl, no fallback to the system socket)") in " ".join(p.stdout.split())


def test_every_flag_of_every_command_has_help():
    import argparse
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from viewlower import __main__ as m
    for name, (_, setup, _) in m.COMMANDS.items():
        parser = argparse.ArgumentParser()
        setup(parser)
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}"


def test_check_with_the_legacy_policy_exits_1_naming_the_flatten(daemon):
    p = cli("check", *PATCH, "--policy", "legacy", env={"VIEWLOWER_SOCKET": daemon})
    assert p.returncode == 1
    assert "mismatch: node _reshape_alias_copy differs at flat index" in p.stderr


def test_check_local_uses_viewlowerctl_in_process(viewlowerctl):
    p = cli("check", *PATCH, "--local", "--viewlowerctl", viewlowerctl)
    assert p.returncode == 0, p.stderr


def test_check_of_a_model_the_format_cannot_carry_exits_2_naming_the_node(tmp_path, daemon):
    f = tmp_path / "m.py"
    f.write_text("import torch\n"
                 "class M(torch.nn.Module):\n"
                 "    def forward(self, x):\n"
                 "        return (x.to(torch.complex64) * 2).abs()\n")
    p = cli("check", f"{f}:M", "--input", "2,2", "--socket", daemon)
    assert p.returncode == 2
    assert p.stderr.startswith("viewlower: /nodes/") and "complex64" in p.stderr


def test_check_without_a_daemon_exits_3(tmp_path):
    p = cli("check", *PATCH, "--socket", str(tmp_path / "none.sock"))
    assert p.returncode == 3


def test_lower_several_graphs_writes_one_result_each_into_the_directory(tmp_path, daemon):
    g = tmp_path / "a.json"
    assert cli("export", *PATCH, "-o", str(g)).returncode == 0
    h = tmp_path / "b.json"
    h.write_text(g.read_text())
    out = tmp_path / "out"
    p = cli("lower", str(g), str(h), "--socket", daemon, "-o", str(out), "--no-fold")
    assert p.returncode == 0, p.stderr
    a = json.loads((out / "a.json").read_text())
    assert a == json.loads((out / "b.json").read_text())
    assert a["report"]["merged"] == 0 and set(a) == {"graph", "report"}


def test_lower_of_an_invalid_graph_exits_2_with_the_pointer(tmp_path, daemon):
    g = tmp_path / "bad.json"
    g.write_text('{"format":"viewlower.graph","version":1,"nodes":[{"name":"out","op":"output","args":["x"]}]}')
    p = cli("lower", str(g), "--socket", daemon)
    assert p.returncode == 2
    assert p.stderr.startswith(f"viewlower: {g}: /nodes/0")


def test_a_keyword_the_model_does_not_take_is_a_usage_error():
    p = cli("export", "torchvision.models:resnet18", "--kwarg", "nope=1", "--input", "1,3,32,32")
    assert p.returncode == 64 and "nope" in p.stderr


def test_inputs_the_model_cannot_run_on_are_invalid_input_with_torch_message():
    p = cli("export", "torchvision.models:resnet18", "--input", "1,5,32,32")
    assert p.returncode == 2
    assert p.stderr.startswith("viewlower: tracing the model failed: RuntimeError:")


def test_a_model_assertion_during_the_trace_is_invalid_input_with_one_json_object():
    p = cli("check", "torchvision.models:vit_b_16", "--input", "1,3,64,64", "--local", "--json")
    assert p.returncode == 2, p.stderr
    out = json.loads(p.stdout)
    assert out["equal"] is None and out["error"]["kind"] == "trace_failed"
    assert out["error"]["message"].startswith(
        "tracing the model failed: AssertionError: Wrong image height! Expected 224 but got 64!")


def test_lower_of_a_missing_or_malformed_file_exits_2_naming_it(tmp_path, daemon):
    p = cli("lower", str(tmp_path / "missing.json"), "--socket", daemon)
    assert p.returncode == 2 and "missing.json: cannot open" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    p = cli("lower", str(bad), "--socket", daemon)
    assert p.returncode == 2 and "bad.json: malformed JSON" in p.stderr


def test_a_terminal_gets_a_live_bar_erased_before_each_phase_line_and_json_mode_gets_nothing():
    import io
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from viewlower.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    buf = Tty()
    prog = Progress(stream=buf)
    assert prog.live
    with prog.phase("replay", total=4) as ph:
        ph.step(2)
        assert re.fullmatch(r"viewlower: replay \[#{12}\.{12}\] 2/4 [0-9.]+ s", ph.line())
        ph.step(2)
    last = buf.getvalue().split("\r")[-1]
    assert re.fullmatch(r"viewlower: replay [0-9]+\.[0-9]{2} s \(4 nodes\)\n", last)
    assert set(prog.timings) == {"replay"}
    quiet = Tty()
    prog = Progress(enabled=False, stream=quiet)
    with prog.phase("trace"):
        pass
    assert not prog.live and quiet.getvalue() == "" and set(prog.timings) == {"trace"}
    plain = io.StringIO()  # not a terminal: the line, no bar, no carriage return
    with Progress(stream=plain).phase("lower"):
        pass
    assert re.fullmatch(r"viewlower: lower [0-9]+\.[0-9]{2} s\n", plain.getvalue())


def _explain_dot_supported(viewlowerctl):
    g = os.path.join(ROOT, "examples", "graphs", "patch_tokens.json")
    p = subprocess.run([viewlowerctl, "--local", "explain", g, "--format", "dot"],
                       capture_output=True, timeout=60)
    return p.returncode == 0


def test_check_explain_svg_renders_the_decisions_with_dot(tmp_path, viewlowerctl):
    import shutil
    import xml.etree.ElementTree as ET
    if shutil.which("dot") is None or not _explain_dot_supported(viewlowerctl):
        import pytest
        pytest.skip("needs Graphviz's dot and viewlowerctl explain --format dot")
    svg = tmp_path / "d.svg"
    p = cli("check", *PATCH, "--local", "--viewlowerctl", viewlowerctl, "--explain-svg", str(svg))
    assert p.returncode == 0, p.stderr
    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "_reshape_alias_copy" in texts and "transpose_copy" in texts


def test_plan_alignment_must_be_a_power_of_two_and_needs_plan(tmp_path):
    g = tmp_path / "g.json"
    g.write_text("{}")
    p = cli("lower", str(g), "--local", "--plan", "--plan-alignment", "24")
    assert p.returncode == 64 and "--plan-alignment 24: must be a power of two" in p.stderr
    p = cli("lower", str(g), "--local", "--plan-alignment", "16")
    assert p.returncode == 64 and "--plan-alignment needs --plan" in p.stderr


def test_check_plan_replays_in_the_arena_and_prints_the_three_figures(daemon):
    p = cli("check", "viewlower.models:gpt_attention", "--input", "2,8,64", "--socket", daemon,
            "--plan")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    m = re.fullmatch(r"plan: arena ([0-9]+) bytes, lower bound ([0-9]+), naive ([0-9]+) "
                     r"\(([0-9]+) storages, alignment 16\)", lines[1])
    assert m, lines
    arena, lb, naive, _ = map(int, m.groups())
    assert lb <= arena <= naive
    assert lines[2] == "equal: every node and output bit for bit, inside one arena of the plan"
    assert "viewlower: replay in the arena" in p.stderr


def test_lower_plan_alignment_reaches_the_lowering(tmp_path, daemon):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from viewlower import plan
    g = tmp_path / "g.json"
    assert cli("export", "viewlower.models:gpt_attention", "--input", "2,8,64",
               "-o", str(g)).returncode == 0
    p = cli("lower", str(g), "--socket", daemon, "--plan", "--plan-alignment", "64")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    lowered = res["graph"]
    assert lowered["plan"]["alignment"] == 64 and res["report"]["plan"]["alignment"] == 64
    assert plan.check_plan(lowered) is None
    assert all(n["mem_offset"] % 64 == 0 for n in lowered["nodes"] if "mem_offset" in n)
    mine = plan.figures(lowered)
    assert {k: res["report"]["plan"][k] for k in mine} == mine


def test_a_model_whose_constructor_raises_is_invalid_input_with_one_json_object(tmp_path):
    # torchvision's quantized models raise RuntimeError("Quantized backend not supported") on
    # a torch without a quantized engine: that was a traceback and no JSON object.
    f = tmp_path / "broken.py"
    f.write_text("def make():\n    raise RuntimeError('no backend\\nsecond line')\n")
    p = cli("check", f"{f}:make", "--input", "1,3,8,8", "--local", "--json")
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    out = json.loads(p.stdout)
    assert out["error"]["kind"] == "build_failed"
    assert out["error"]["message"] == \
        "building the model failed: RuntimeError: no backend (at broken.py:2, in make)"


def test_a_model_file_that_does_not_import_is_a_usage_error_not_a_traceback(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("def make(:\n")
    p = cli("export", f"{f}:make", "--input", "1,3,8,8")
    assert p.returncode == 64, p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith(f"viewlower: MODEL '{f}:make': importing {f} failed: SyntaxError")


def test_lower_refuses_two_graphs_that_would_be_written_to_one_file_before_any_work(tmp_path):
    # as viewlowerctl lower: a/g.json and b/g.json both went to OUT/g.json, the second result
    # silently replacing the first
    graph = open(os.path.join(ROOT, "tests", "data", "patch_embed_channels_last_edge.json")).read()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "g.json").write_text(graph)
    out = tmp_path / "out"
    a, b = str(tmp_path / "a" / "g.json"), str(tmp_path / "b" / "g.json")
    p = cli("lower", a, b, "--local", "-o", str(out))
    assert p.returncode == 64, p.stderr
    assert p.stderr == f"viewlower: -o {out}: {a} and {b} would both be written to {out}/g.json\n"
    assert not out.exists()
    p = cli("lower", a, str(tmp_path / "b") + "/", "--local", "-o", str(out))
    assert p.returncode == 64 and "names no file" in p.stderr, p.stderr


def test_lower_writes_the_result_of_standard_input_as_stdin_json_in_the_directory(tmp_path):
    # as viewlowerctl's out_name; it was written to a file named "-"
    src = os.path.join(ROOT, "tests", "data", "patch_embed_channels_last_edge.json")
    out = tmp_path / "out"
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-m", "viewlower", "lower", src, "-", "--local",
                        "-o", str(out)], input=open(src).read(), capture_output=True, text=True,
                       env=e, timeout=300)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["patch_embed_channels_last_edge.json", "stdin.json"]
