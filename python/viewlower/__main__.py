"""python3 -m viewlower export|check|lower (README, "Lower a torchvision model"); exit codes as
viewlowerctl's (viewlowerctl(1), EXIT STATUS)."""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from typing import Any, Callable, Dict, List, Tuple

from .errors import (EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, UsageError,
                     ViewlowerError)


def _kwargs(pairs: List[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"--kwarg {p}: expected NAME=VALUE")
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            raise UsageError(f"--kwarg {p}: {v} is not a Python literal")
    return out


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL",
                   help="package.module:callable (e.g. torchvision.models:resnet18) or "
                        "file.py:callable, returning a torch.nn.Module")
    p.add_argument("--kwarg", action="append", default=[], metavar="K=V",
                   help="keyword argument of the callable (VALUE a Python literal, e.g. "
                        "image_size=64); repeat per argument")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one model input, e.g. 1,3,64,64 or 4,8:int64 (float32 unless given); "
                        "repeat per input; values come from --seed")
    p.add_argument("--channels-last", action="store_true",
                   help="rank-4 inputs and parameters in channels-last, rank-5 ones "
                        "in channels-last-3d")
    p.add_argument("--layout", choices=["edge", "traced"], default="edge",
                   help="edge (default): every view-like *_copy output declared contiguous, as "
                        "ExecuTorch's edge dialect allocates it; traced: the strides torch's "
                        "trace gives")
    p.add_argument("--skip-dim-order", action="store_true",
                   help="spell layout conversions as aten._to_copy/clone with memory_format")
    p.add_argument("--split", choices=["slices", "outputs"], default="slices",
                   help="split_copy/unbind_copy as one slice per piece (default) or as a "
                        "multi-output node read through getitems")
    p.add_argument("--train", action="store_true", help="train() mode instead of eval()")
    p.add_argument("--seed", type=int, default=0, metavar="N",
                   help="seed of the input values (default 0)")
    p.add_argument("--name", help="graph name (default: from the model, layout and format)")


def _lower_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--socket", metavar="PATH",
                   help="viewlowerd socket (default: $VIEWLOWER_SOCKET, else as root "
                        "/run/viewlower/viewlower.sock, else $XDG_RUNTIME_DIR/viewlower.sock; "
                        "unlike viewlowerctl, no fallback to the system socket)")
    g.add_argument("--local", action="store_true", help="lower in-process via viewlowerctl --local")
    p.add_argument("--viewlowerctl", metavar="PATH",
                   help="viewlowerctl binary for --local (default: $VIEWLOWERCTL, the build "
                        "tree, the install prefix, PATH)")
    p.add_argument("--timeout-ms", type=int, default=120000, metavar="N",
                   help="deadline of each lowering in milliseconds (default 120000)")
    p.add_argument("--policy", choices=["safe", "legacy"],
                   help="safe (default), or legacy: the upstream rule that ignores layouts and "
                        "writes (only to show why it is wrong)")
    p.add_argument("--no-fold", action="store_true",
                   help="only view_copy is lowered (no layout algebra)")
    p.add_argument("--keep-view-copy", action="store_true",
                   help="change nothing; every layout-only copy reported kept (disabled)")
    p.add_argument("--no-param-layouts", action="store_true",
                   help="keep every parameter in its exported layout (no stored parameter layouts)")
    p.add_argument("--plan", action="store_true",
                   help="plan one arena for every run-time buffer (docs/format.md §9); "
                        "check then replays inside it")
    p.add_argument("--plan-alignment", type=int, metavar="N",
                   help="alignment of every planned offset in bytes, a power of two "
                        "(default 16; with --plan)")


def _weights_out_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--weights-out", metavar="FILE",
                   help=f"write {what} parameters, buffers and constants in the graph's "
                        "declared layouts to FILE (a weights file, docs/format.md)")


def _export_model(a: argparse.Namespace, progress: Any) -> Tuple[Any, Any]:
    """(exported program, model)."""
    import torch
    from . import export as ex
    if not a.input:
        raise UsageError("at least one --input SHAPE[:DTYPE] is needed")
    torch.set_num_threads(1)  # the same op order every run: bit-exact comparisons
    model = ex.build_model(a.model, _kwargs(a.kwarg), train=a.train, channels_last=a.channels_last)
    if a.cmd == "check":
        ex.randomize_zero_parameters(model)
    inputs = ex.make_inputs([ex.parse_input(s) for s in a.input], seed=a.seed,
                            channels_last=a.channels_last)
    name = a.name or "_".join([a.model.rsplit(":", 1)[1].split(".")[-1]]
                              + (["channels_last"] if a.channels_last else [])
                              + (["train"] if a.train else []) + [a.layout])
    return ex.export(model, inputs, name=name, layout_mode=a.layout,
                     skip_dim_order=a.skip_dim_order, split=a.split, progress=progress), model


def _progress(a: argparse.Namespace) -> Any:
    from .progress import Progress
    return Progress(enabled=not getattr(a, "json", False))


def cmd_export(a: argparse.Namespace) -> int:
    from .export import export_text
    exported, model = _export_model(a, _progress(a))
    text = export_text(exported.graph)
    if a.weights_out:
        from .weights import program_state, write_weights
        write_weights(a.weights_out, exported.graph, program_state(model, exported))
    _write(a.output, text)
    return EXIT_OK


def _lowerer(a: argparse.Namespace) -> Any:
    from .lowering import Lowerer
    return Lowerer(local=a.local, socket=a.socket, viewlowerctl=a.viewlowerctl,
                   timeout=a.timeout_ms / 1000.0)


def _opts(a: argparse.Namespace) -> Dict[str, Any]:
    from .lowering import options_of
    if a.plan_alignment is not None:
        if not a.plan:
            raise UsageError("--plan-alignment needs --plan")
        if a.plan_alignment < 1 or a.plan_alignment & (a.plan_alignment - 1):
            raise UsageError(f"--plan-alignment {a.plan_alignment}: must be a power of two >= 1")
    return options_of(a.policy, fold=not a.no_fold, remove_view_copy=not a.keep_view_copy,
                      param_layouts=not a.no_param_layouts, plan=a.plan,
                      plan_alignment=a.plan_alignment)


def _model_of(a: argparse.Namespace, exported: Any) -> Dict[str, Any]:
    return {"model": a.model, "kwargs": _kwargs(a.kwarg), "inputs": a.input,
            "channels_last": a.channels_last, "layout": a.layout, "train": a.train,
            "graph": exported.graph["name"] if exported is not None else None}


def cmd_check(a: argparse.Namespace) -> int:
    progress = _progress(a)
    out: Dict[str, Any] = {"equal": None, "model": None, "figures": None,
                           "timings": progress.timings}
    try:
        code = _check(a, progress, out)
    except ViewlowerError as e:
        if not a.json:
            raise
        out["error"] = {"message": str(e), "kind": e.kind, "path": e.path,
                        "exit_code": e.exit_code}
        print(f"viewlower: {e}", file=sys.stderr)
        code = e.exit_code
    if a.json:
        print(json.dumps(out))
    return code


def _check(a: argparse.Namespace, progress: Any, out: Dict[str, Any]) -> int:
    from . import check
    say = (lambda text: None) if a.json else print
    opts = _opts(a)
    exported, model = _export_model(a, progress)
    out["model"] = _model_of(a, exported)
    low = _lowerer(a)
    try:
        res = check.run_check(exported, low, opts, against_trace=a.layout == "traced",
                              arena=a.plan, progress=progress)
    finally:
        low.close()
    s = res.summary
    out["figures"] = s.as_dict()
    say(f"{exported.graph['name']}: {s.line()}")
    if s.plan_line():
        say(s.plan_line())
    if a.save_lowered:
        from .export import export_text
        _write(a.save_lowered, export_text(res.lowered))
    if a.weights_out:
        from .weights import program_state, write_weights
        write_weights(a.weights_out, res.lowered, program_state(model, exported))
    if a.explain_svg:
        _explain_svg(a, res.lowered, opts, exported.graph)
    out["equal"] = res.equal
    if not res.equal:
        found = res.trace_mismatch or res.mismatch or res.literal_change
        out["mismatch"] = dict(found, message=check.describe(found))
    if res.trace_mismatch is not None:
        print("viewlower: the exported graph differs from torch's trace at "
              + check.describe(res.trace_mismatch), file=sys.stderr)
        return EXIT_MISMATCH
    if res.mismatch is not None:
        print("viewlower: mismatch: " + check.describe(res.mismatch), file=sys.stderr)
        return EXIT_MISMATCH
    if res.literal_change is not None:
        print("viewlower: " + check.describe(res.literal_change), file=sys.stderr)
        return EXIT_MISMATCH
    say("equal: every node and output bit for bit"
        + (", inside one arena of the plan" if a.plan else ""))
    if a.self_test:
        with progress.phase("self-test"):
            forced, found = check.self_test(exported, res.lowered, res.report)
        out["self_test"] = {"forced": forced,
                            "caught": None if forced is None else found is not None,
                            "found": check.describe(found) if found is not None else None}
        if forced is None:
            # Nothing to force is no failure: the check itself was equal, and a lowering that
            # aliased every layout copy leaves no kept copy to turn into a wrong alias.
            say("self-test: nothing to force: the lowering kept no layout copy that an alias "
                "would break")
            return EXIT_OK
        if found is None:
            print(f"self-test FAILED: aliasing {forced} wrongly went unnoticed", file=sys.stderr)
            return EXIT_MISMATCH
        say(f"self-test: forcing {forced} into an alias is caught: {check.describe(found)}")
    return EXIT_OK


def _explain_svg(a: argparse.Namespace, lowered: dict, opts: Dict[str, Any], graph: dict) -> None:
    """viewlowerctl explain --format dot of the exported graph, rendered by Graphviz's dot."""
    import shutil
    import subprocess
    import tempfile
    from .export import export_text
    from .lowering import _ctl_flags, find_viewlowerctl
    ctl = find_viewlowerctl(a.viewlowerctl)
    dot = shutil.which("dot")
    if dot is None:
        raise UsageError("--explain-svg needs Graphviz's dot (Debian: apt-get install graphviz)")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(export_text(graph))
        path = f.name
    try:
        mode = ["--local"] if a.local or not a.socket else ["--socket", a.socket]
        p = subprocess.run([ctl, *mode, "--timeout-ms", str(a.timeout_ms), "explain", path,
                            "--format", "dot", *_ctl_flags(opts)], capture_output=True,
                           timeout=a.timeout_ms / 1000.0 + 30)
        if p.returncode != 0:
            msg = (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise ViewlowerError(f"explain --format dot failed: {msg}")
        r = subprocess.run([dot, "-Tsvg", "-o", a.explain_svg], input=p.stdout,
                           capture_output=True, timeout=300)
        if r.returncode != 0:
            raise ViewlowerError("dot -Tsvg failed: "
                                 + r.stderr.decode(errors="replace").strip())
    finally:
        os.unlink(path)


def _out_name(path: str) -> str:
    """The file name a graph's result is written under in the -o directory (as viewlowerctl's
    out_name): standard input's is stdin.json."""
    return "stdin.json" if path == "-" else path.rsplit("/", 1)[-1]


def _check_out_names(a: argparse.Namespace) -> None:
    """Two graphs whose results would land on one file of the -o directory are a usage error,
    found before any work (as viewlowerctl's check_out_names): `a/g.json b/g.json` wrote
    OUT/g.json twice, the second result silently replacing the first."""
    seen: Dict[str, str] = {}
    for path in a.graphs:
        name = _out_name(path)
        if name == "":
            raise UsageError(f"-o {a.output}: {path} names no file")
        if name in seen:
            raise UsageError(f"-o {a.output}: {seen[name]} and {path} would both be written "
                             f"to {a.output}/{name}")
        seen[name] = path


def cmd_lower(a: argparse.Namespace) -> int:
    if a.output and len(a.graphs) > 1:
        _check_out_names(a)
    texts = []
    for path in a.graphs:
        try:
            texts.append(sys.stdin.read() if path == "-" else open(path).read())
        except OSError as e:  # as viewlowerctl: an unreadable file is invalid input (2)
            raise ViewlowerError(f"{path}: cannot open: {e.strerror}")
    for path, text in zip(a.graphs, texts):
        try:  # a file that is not JSON is refused here, as viewlowerctl does, not sent
            json.loads(text)
        except ValueError as e:
            raise ViewlowerError(f"{path}: malformed JSON: {e}")
    if (a.weights_out or a.weights) and len(a.graphs) != 1:
        raise UsageError("--weights/--weights-out take one graph")
    if bool(a.weights_out) != bool(a.weights):
        raise UsageError("--weights-out needs --weights FILE (the tensors to lay out), and "
                         "--weights needs --weights-out")
    state = None
    if a.weights:
        from .weights import load_state
        state = load_state(a.weights)
    opts = _opts(a)
    low = _lowerer(a)
    try:
        results = low.lower_many(texts, opts)
    finally:
        low.close()
    from .client import dumps
    worst = EXIT_OK
    for path, r in zip(a.graphs, results):
        if isinstance(r, ViewlowerError):
            print(f"viewlower: {path}: {r}", file=sys.stderr)
            worst = max(worst, r.exit_code)
    if len(a.graphs) == 1:
        if worst == EXIT_OK:
            if state is not None:
                from .weights import write_weights
                write_weights(a.weights_out, results[0]["graph"], state)
            _write(a.output, dumps(results[0]) + "\n")
        return worst
    if a.output:
        os.makedirs(a.output, exist_ok=True)
    for path, r in zip(a.graphs, results):
        if isinstance(r, ViewlowerError):
            continue
        text = dumps(r) + "\n"
        if a.output:
            _write(os.path.join(a.output, _out_name(path)), text)
        else:
            sys.stdout.write(text)
    return worst


def _write(path: Any, text: str) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
    else:
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError as e:
            raise ViewlowerError(f"{path}: cannot write: {e.strerror}")


def _setup_export(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("-o", "--output", metavar="G.json", help="output file (default stdout)")
    _weights_out_arg(p, "the exported graph's")


def _setup_check(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    _lower_args(p)
    p.add_argument("--self-test", action="store_true",
                   help="also force one wrong alias and require the replay to catch it "
                        "(a lowering that kept no layout copy has nothing to force: still 0)")
    p.add_argument("--json", action="store_true",
                   help="print exactly one JSON object on stdout (equal, model, figures, "
                        "timings) and no phase lines")
    p.add_argument("--save-lowered", metavar="FILE", help="write the lowered graph here")
    _weights_out_arg(p, "the lowered graph's")
    p.add_argument("--explain-svg", metavar="FILE",
                   help="render viewlowerctl explain --format dot of the graph to FILE with "
                        "Graphviz's dot -Tsvg")


def _setup_lower(p: argparse.ArgumentParser) -> None:
    p.add_argument("graphs", nargs="+", metavar="G.json", help="graph files (- for stdin)")
    _lower_args(p)
    p.add_argument("-o", "--output", metavar="OUT",
                   help="file (one graph) or directory (several graphs)")
    p.add_argument("--weights", metavar="FILE",
                   help="the graph's tensors: a weights file (export --weights-out) or a "
                        "torch.save'd state dict (one graph; with --weights-out)")
    _weights_out_arg(p, "the lowered graph's")


#: The sub-command table: name → (help, argument setup, handler).
COMMANDS: Dict[str, Tuple[str, Callable[[argparse.ArgumentParser], None],
                          Callable[[argparse.Namespace], int]]] = {
    "export": ("trace a torch model into graph JSON", _setup_export, cmd_export),
    "check": ("export, lower, replay with real aliases and compare bit for bit", _setup_check,
              cmd_check),
    "lower": ("lower graph files (as viewlowerctl lower)", _setup_lower, cmd_lower),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors exit 64, as viewlowerctl's
        self.print_usage(sys.stderr)
        print(f"viewlower: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def main(argv: List[str] = None) -> int:
    parser = _Parser(prog="python3 -m viewlower",
                     description="Export torch models to graph JSON, lower them through "
                                 "viewlowerd (or viewlowerctl --local), and check the lowering "
                                 "by replaying it in torch.")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, (help_text, setup, _) in COMMANDS.items():
        setup(sub.add_parser(name, help=help_text))
    a = parser.parse_args(argv)
    try:
        return COMMANDS[a.cmd][2](a)
    except ViewlowerError as e:
        print(f"viewlower: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
