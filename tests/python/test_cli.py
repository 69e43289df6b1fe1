"""python3 -m viewlower check / lower / export as a user runs them: summaries, exit codes."""
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PATCH = ["viewlower.models:patch_embed", "--input", "2,3,32,32", "--channels-last"]


def cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "viewlower", *args], capture_output=True,
                          text=True, env=e, timeout=300)


def test_check_through_the_daemon_prints_the_summary_and_exits_0(daemon):
    p = cli("check", *PATCH, "--socket", daemon, "--json", "--self-test")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("patch_embed_channels_last_edge: nodes 8, layout-only copies 2:")
    summary = json.loads(lines[1])
    assert summary["replaced"] + summary["kept"] + summary["merged"] + summary["removed_dead"] \
        == summary["layout_copy_nodes"]
    assert "equal: every node and output bit for bit" in lines
    assert any(l.startswith("self-test: forcing _reshape_alias_copy into an alias is caught")
               for l in lines)


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


def test_lower_of_a_missing_or_malformed_file_exits_2_naming_it(tmp_path, daemon):
    p = cli("lower", str(tmp_path / "missing.json"), "--socket", daemon)
    assert p.returncode == 2 and "missing.json: cannot open" in p.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    p = cli("lower", str(bad), "--socket", daemon)
    assert p.returncode == 2 and "bad.json: malformed JSON" in p.stderr
