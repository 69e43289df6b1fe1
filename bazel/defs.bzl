"""Bazel rules for viewlower: lowering a graph is one hermetic, cacheable build action.

    load("@viewlower//bazel:defs.bzl", "viewlower_lower", "viewlower_verify")

    viewlower_lower(name = "model_lowered", graph = "model.json")
        -> model_lowered.json (the lowered graph) and model_lowered.report.json (the report)
    viewlower_export(name = "resnet", model = "torchvision.models:resnet18", inputs = ["1,3,64,64"])
        -> resnet.json, the graph the PyTorch front end exports (host python3 + torch; see below)
    viewlower_verify(name = "model_verify", graph = "model.json")
        -> a test (rule viewlower_verify_test): the graph and its lowering give bit-equal
           outputs (viewlowerctl verify)

Every action runs `viewlowerctl --local` on its declared inputs alone: no daemon, no socket, no
network, no absolute path, so actions cache by content and run remotely unchanged. Lowering
actions (mnemonic ViewlowerLower) take Bazel's JSON persistent-worker protocol: with the worker
strategy (Bazel's default for actions that support it, or --strategy=ViewlowerLower=worker) one
`viewlowerctl worker` process serves them all; with any other strategy each runs
`viewlowerctl worker @ARGSFILE` once, with the same bytes out. Bazel 4 needs
--experimental_worker_allow_json_protocol for JSON workers (examples/bazel/.bazelrc sets it).

viewlower_export is the one action that is not hermetic: it runs the host's python3 with the
host's torch (Debian python3-torch), which Bazel does not see as inputs, so it is tagged
no-remote-exec (it runs on this host only). Its inputs are the front end's sources; its result
is cached by them, so a change of the host's torch needs `bazel clean` (or a new cache).
"""

_POLICIES = ["safe", "legacy"]

def _option_args(args, attr):
    if not attr.remove_view_copy:
        args.add("--keep-view-copy")
    if not attr.fold:
        args.add("--no-fold")
    if attr.policy != "safe":
        args.add("--policy", attr.policy)

_TOOL = {
    "_viewlowerctl": attr.label(
        default = Label("//:viewlowerctl"),
        executable = True,
        cfg = "exec",
        doc = "The viewlowerctl binary (a cc_binary built from the repository's sources).",
    ),
}

_OPTIONS = {
    "graph": attr.label(
        mandatory = True,
        allow_single_file = [".json"],
        doc = "The graph JSON (format viewlower.graph).",
    ),
    "remove_view_copy": attr.bool(
        default = True,
        doc = "Lowering option remove_view_copy; False keeps every view_copy (--keep-view-copy).",
    ),
    "fold": attr.bool(
        default = True,
        doc = "Lowering option fold (the layout algebra); False passes --no-fold.",
    ),
    "policy": attr.string(
        default = "safe",
        values = _POLICIES,
        doc = "Lowering policy: safe, or legacy (the upstream behaviour, for verify to refute).",
    ),
}

def _viewlower_lower_impl(ctx):
    graph_out = ctx.actions.declare_file(ctx.label.name + ".json")
    report_out = ctx.actions.declare_file(ctx.label.name + ".report.json")

    # The request: worker options, then a viewlowerctl command line (run with --local).
    request = ctx.actions.args()
    request.add("--graph-out", graph_out)
    request.add("--report-out", report_out)
    request.add("lower")
    request.add(ctx.file.graph)
    _option_args(request, ctx.attr)
    request.use_param_file("@%s", use_always = True)
    request.set_param_file_format("multiline")

    ctx.actions.run(
        executable = ctx.executable._viewlowerctl,
        arguments = ["worker", request],
        inputs = [ctx.file.graph],
        outputs = [graph_out, report_out],
        mnemonic = "ViewlowerLower",
        progress_message = "Lowering %s into %s" % (ctx.attr.graph.label, graph_out.short_path),
        execution_requirements = {
            "supports-workers": "1",
            "supports-multiplex-workers": "1",
            "requires-worker-protocol": "json",
        },
    )
    return [DefaultInfo(files = depset([graph_out, report_out]))]

viewlower_lower = rule(
    implementation = _viewlower_lower_impl,
    attrs = dict(_OPTIONS, **_TOOL),
    doc = "Lowers graph: <name>.json is the lowered graph, <name>.report.json the report " +
          "(docs/format.md §3), byte for byte as `viewlowerctl --local lower` prints them.",
)

def _viewlower_export_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".json")
    args = ctx.actions.args()
    args.add_all(["-m", "viewlower", "export", ctx.attr.model])
    args.add_all(ctx.attr.kwargs, before_each = "--kwarg")
    args.add_all(ctx.attr.inputs, before_each = "--input")
    if ctx.attr.channels_last:
        args.add("--channels-last")
    if ctx.attr.train:
        args.add("--train")
    args.add("--layout", ctx.attr.layout)
    args.add("-o", out)

    # python/viewlower/__init__.py -> python: the directory that holds the package.
    init = [f for f in ctx.files._frontend if f.path.endswith("viewlower/__init__.py")][0]
    ctx.actions.run(
        executable = ctx.attr.python,
        arguments = [args],
        inputs = ctx.files._frontend,
        outputs = [out],
        env = {
            "PYTHONPATH": init.dirname.rpartition("/")[0],
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        mnemonic = "ViewlowerExport",
        progress_message = "Exporting %s into %s" % (ctx.attr.model, out.short_path),
        execution_requirements = {"no-remote-exec": "1"},
    )
    return [DefaultInfo(files = depset([out]))]

viewlower_export = rule(
    implementation = _viewlower_export_impl,
    attrs = {
        "model": attr.string(
            mandatory = True,
            doc = "package.module:callable, as `python3 -m viewlower export MODEL`.",
        ),
        "inputs": attr.string_list(
            mandatory = True,
            doc = "One SHAPE[:DTYPE] per model input (--input), e.g. 1,3,64,64.",
        ),
        "kwargs": attr.string_list(doc = "NAME=VALUE arguments of the callable (--kwarg)."),
        "channels_last": attr.bool(doc = "Model and rank-4 inputs in channels-last."),
        "train": attr.bool(doc = "train() mode instead of eval()."),
        "layout": attr.string(default = "edge", values = ["edge", "traced"]),
        "python": attr.string(
            default = "/usr/bin/python3",
            doc = "The host's Python with torch (Debian's python3-torch): not hermetic.",
        ),
        "_frontend": attr.label(default = Label("//:python_frontend")),
    },
    doc = "Exports a PyTorch model to graph JSON (<name>.json) with the front end (python/viewlower).",
)

def _shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"

def _viewlower_verify_impl(ctx):
    command = [ctx.executable._viewlowerctl.short_path, "--local", "verify", ctx.file.graph.short_path]
    if ctx.file.inputs:
        command += ["--inputs", ctx.file.inputs.short_path]
    if ctx.attr.seed >= 0:
        command += ["--seed", str(ctx.attr.seed)]
    if not ctx.attr.remove_view_copy:
        command.append("--keep-view-copy")
    if not ctx.attr.fold:
        command.append("--no-fold")
    if ctx.attr.policy != "safe":
        command += ["--policy", ctx.attr.policy]
    want = 1 if ctx.attr.expect_mismatch else 0
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.write(
        output = script,
        is_executable = True,
        content = "\n".join([
            "#!/bin/sh",
            "# viewlower_verify %s: exit 0 when verify exits %d." % (ctx.label.name, want),
            "%s > \"${TEST_UNDECLARED_OUTPUTS_DIR:-.}/verify.json\"" % " ".join([_shell_quote(c) for c in command]),
            "rc=$?",
            "cat \"${TEST_UNDECLARED_OUTPUTS_DIR:-.}/verify.json\"",
            "if [ \"$rc\" -ne %d ]; then" % want,
            "  echo \"viewlower_verify: viewlowerctl verify exited $rc; expected %d\" >&2" % want,
            "  exit 1",
            "fi",
            "",
        ]),
    )
    files = [ctx.file.graph] + ([ctx.file.inputs] if ctx.file.inputs else [])
    runfiles = ctx.runfiles(files = files).merge(ctx.attr._viewlowerctl[DefaultInfo].default_runfiles)
    return [DefaultInfo(executable = script, runfiles = runfiles)]

viewlower_verify_test = rule(
    implementation = _viewlower_verify_impl,
    test = True,
    attrs = dict(
        _OPTIONS,
        inputs = attr.label(
            allow_single_file = [".json"],
            doc = "Inputs JSON for verify (--inputs); default: seeded random inputs.",
        ),
        seed = attr.int(default = -1, doc = "Seed for random inputs (--seed); -1: the default."),
        expect_mismatch = attr.bool(
            default = False,
            doc = "Pass when verify finds a mismatch (exit 1): to pin that a policy is wrong.",
        ),
        **_TOOL
    ),
    doc = "Test: `viewlowerctl --local verify` says the lowering keeps every output bit-equal " +
          "(or, with expect_mismatch, that it does not).",
)

def viewlower_verify(name, size = "small", **kwargs):
    """A viewlower_verify_test named name (test rule names must end in _test)."""
    viewlower_verify_test(name = name, size = size, **kwargs)
