"""python3 -m viewlower export|check|lower (SPEC §10); exit codes as viewlowerctl's (SPEC §8)."""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from typing import Any, Callable, Dict, List, Tuple

from .errors import (EXIT_INVALID, EXIT_MISMATCH, EXIT_OK, EXIT_USAGE, UsageError,
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
    p.add_argument("model", metavar="MODEL", help="package.module:callable or file.py:callable")
    p.add_argument("--kwarg", action="append", default=[], metavar="K=V",
                   help="keyword argument of the callable (VALUE a Python literal)")
    p.add_argument("--input", action="append", default=[], metavar="SHAPE[:DTYPE]",
                   help="one model input, e.g. 1,3,64,64 or 4,8:int64 (repeat per input)")
    p.add_argument("--channels-last", action="store_true",
                   help="model and rank-4 inputs in channels-last")
    p.add_argument("--layout", choices=["edge", "traced"], default="edge")
    p.add_argument("--skip-dim-order", action="store_true",
                   help="spell layout conversions as aten._to_copy/clone with memory_format")
    p.add_argument("--split", choices=["slices", "outputs"], default="slices",
                   help="split_copy/unbind_copy as one slice per piece (default) or as a "
                        "multi-output node read through getitems")
    p.add_argument("--train", action="store_true", help="train() mode instead of eval()")
    p.add_argument("--seed", type=int, default=0, help="seed of the input values (default 0)")
    p.add_argument("--name", help="graph name (default: from the model, layout and format)")


def _lower_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--socket", metavar="PATH", help="viewlowerd socket (default as viewlowerctl)")
    g.add_argument("--local", action="store_true", help="lower in-process via viewlowerctl --local")
    p.add_argument("--viewlowerctl", metavar="PATH", help="viewlowerctl binary for --local")
    p.add_argument("--timeout-ms", type=int, default=120000)
    p.add_argument("--policy", choices=["safe", "legacy"])
    p.add_argument("--no-fold", action="store_true")
    p.add_argument("--keep-view-copy", action="store_true")


def _export_model(a: argparse.Namespace) -> Any:
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
                     skip_dim_order=a.skip_dim_order, split=a.split)


def cmd_export(a: argparse.Namespace) -> int:
    from .export import export_text
    text = export_text(_export_model(a).graph)
    if a.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)
    return EXIT_OK


def _lowerer(a: argparse.Namespace) -> Any:
    from .lowering import Lowerer
    return Lowerer(local=a.local, socket=a.socket, viewlowerctl=a.viewlowerctl,
                   timeout=a.timeout_ms / 1000.0)


def _opts(a: argparse.Namespace) -> Dict[str, Any]:
    from .lowering import options_of
    return options_of(a.policy, fold=not a.no_fold, remove_view_copy=not a.keep_view_copy)


def cmd_check(a: argparse.Namespace) -> int:
    from . import check
    exported = _export_model(a)
    low = _lowerer(a)
    try:
        res = check.run_check(exported, low, _opts(a), against_trace=a.layout == "traced")
    finally:
        low.close()
    s = res.summary
    print(f"{exported.graph['name']}: {s.line()}")
    if a.json:
        print(json.dumps(s.as_dict()))
    if a.save_lowered:
        from .export import export_text
        with open(a.save_lowered, "w") as f:
            f.write(export_text(res.lowered))
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
    print("equal: every node and output bit for bit")
    if a.self_test:
        forced, found = check.self_test(exported, res.lowered, res.report)
        if forced is None:
            print("self-test: the lowering kept no layout copy that could be forced into an alias",
                  file=sys.stderr)
            return EXIT_INVALID
        if found is None:
            print(f"self-test FAILED: aliasing {forced} wrongly went unnoticed", file=sys.stderr)
            return EXIT_MISMATCH
        print(f"self-test: forcing {forced} into an alias is caught: {check.describe(found)}")
    return EXIT_OK


def cmd_lower(a: argparse.Namespace) -> int:
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
    low = _lowerer(a)
    try:
        results = low.lower_many(texts, _opts(a))
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
            _write(a.output, dumps(results[0]) + "\n")
        return worst
    if a.output:
        os.makedirs(a.output, exist_ok=True)
    for path, r in zip(a.graphs, results):
        if isinstance(r, ViewlowerError):
            continue
        text = dumps(r) + "\n"
        if a.output:
            _write(os.path.join(a.output, os.path.basename(path)), text)
        else:
            sys.stdout.write(text)
    return worst


def _write(path: Any, text: str) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def _setup_export(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    p.add_argument("-o", "--output", metavar="G.json", help="output file (default stdout)")


def _setup_check(p: argparse.ArgumentParser) -> None:
    _model_args(p)
    _lower_args(p)
    p.add_argument("--self-test", action="store_true",
                   help="also force one wrong alias and require the replay to catch it")
    p.add_argument("--json", action="store_true", help="also print the summary as JSON")
    p.add_argument("--save-lowered", metavar="FILE", help="write the lowered graph here")


def _setup_lower(p: argparse.ArgumentParser) -> None:
    p.add_argument("graphs", nargs="+", metavar="G.json")
    _lower_args(p)
    p.add_argument("-o", "--output", metavar="OUT",
                   help="file (one graph) or directory (several graphs)")


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
    parser = _Parser(prog="python3 -m viewlower")
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
