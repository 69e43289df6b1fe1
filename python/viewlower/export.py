"""Export: a torch model to a graph of docs/format.md §2 (make_fx + functionalization, torch 1.13).

The trace is `functorch.make_fx(functionalize(f, remove="mutations_and_views"))`, where f calls
the model with its parameters and buffers passed in, so each of them is a placeholder (kind
parameter/buffer) and every view is a `*_copy` op. The traced graph is then rewritten into the
format's spelling and run once in torch to give every node its `val`:

* targets are `namespace.operator.overload`; `_reshape_alias_copy` and `_unsafe_view` become
  `aten.view_copy.default` (logical reshapes in a functional graph; the stride argument of
  `_reshape_alias_copy` says nothing about values);
* `split_copy` / `split_with_sizes_copy` / `unbind_copy` are rewritten into one `slice_copy`
  (`select_copy` for unbind) per output read, named as the getitem was: each piece is by
  definition that slice of the input, and `check --layout traced` proves it on every model by
  comparing the rewritten graph with the traced one bit for bit (`split="outputs"` keeps the
  split as a multi-output node with `vals` read through `operator.getitem` instead);
* layout conversions use `dim_order_ops.*` with `kwargs.dim_order`, or with `skip_dim_order`
  `aten._to_copy` / `aten.clone` with `kwargs.memory_format` (docs/format.md §2);
* nodes with several tensor outputs get `vals` and are read through `operator.getitem`;
* a write that the format's naming rules do not show (docs/format.md §2, "Writes": name ending in
  `_` writes arg 0, `kwargs.out`) is given as `mutates` (batch norm's running statistics in train
  mode); it is found by comparing each tensor argument's bytes before and after the node runs;
* placeholders are named as torch.export names them: `p_fc_weight` for the parameter
  `fc.weight`, `b_` for buffers, user inputs after the forward's arguments (`placeholder_names`);
* placeholders written by the program are marked `mutated`;
* literals are exact: ints as ints (INT64_MAX stays 9223372036854775807), floats as float tokens,
  non-finite floats as {"float": "inf"}; dtypes, layouts, devices and memory formats are strings
  in `kwargs` (a positional one is moved to `kwargs` under its schema name).

`layout="edge"` declares every view-like `*_copy` output contiguous (as ExecuTorch's edge
dialect allocates it) and runs the graph that way, so every other node's `val` is the layout
torch gives it from those inputs; `layout="traced"` declares the strides the trace gives.
Anything the format cannot carry is an ExportError whose `path` is the node's JSON pointer.
"""
from __future__ import annotations

import importlib
import importlib.util
import math
import operator
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from . import layout, replay
from .errors import ExportError, UsageError

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
SPLITS = {"aten.split_copy.Tensor", "aten.split_with_sizes_copy.default", "aten.unbind_copy.int"}
RESHAPES = {"aten._reshape_alias_copy.default", "aten._unsafe_view.default"}
CONVERSIONS = {"aten._to_copy.default": "dim_order_ops._to_dim_order_copy.default",
               "aten.clone.default": "dim_order_ops._clone_dim_order.default"}
STRING_KWARGS = ("dtype", "layout", "device", "memory_format")


class Exported:
    """An exported program: `graph` (the JSON object), `values` (placeholder name → tensor, the
    model's parameters, buffers, constants and the inputs), `gm` (the traced fx graph), and the
    reference: `digests` (node name → digest of its value right after it ran, when the graph
    ran in torch op by op with every node in its declared layout) and `output_digests`."""

    def __init__(self, graph: dict, values: Dict[str, torch.Tensor], gm: Any,
                 user_inputs: List[str], digests: Dict[str, bytes], output_digests: List[bytes]):
        self.graph = graph
        self.values = values
        self.gm = gm
        self.user_inputs = user_inputs
        self.digests = digests
        self.output_digests = output_digests
        #: mutated placeholder → digest of the value the program leaves in it
        self.state_digests: Dict[str, bytes] = {}
        #: parameter or buffer placeholder → the qualified name it was named after, as
        #: `placeholder_names` named it (`p_a_w_2` → `a.w`): what a weights file calls it
        self.state_names: Dict[str, str] = {}


# ---- models and inputs ---------------------------------------------------------------------

def load_callable(spec: str) -> Any:
    """`package.module:callable` or `path/to/file.py:callable`."""
    if ":" not in spec:
        raise UsageError(f"MODEL {spec!r}: expected package.module:callable or file.py:callable")
    mod_name, attr = spec.rsplit(":", 1)
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            s = importlib.util.spec_from_file_location(os.path.basename(mod_name)[:-3] or "model",
                                                       mod_name)
            if s is None or s.loader is None:
                raise UsageError(f"MODEL {spec!r}: cannot load {mod_name}")
            mod = importlib.util.module_from_spec(s)
            s.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except (ImportError, OSError) as e:
        raise UsageError(f"MODEL {spec!r}: {e}")
    except Exception as e:  # the module's own code raised while it was imported (a SyntaxError
        # of file.py, an exception at its top level): a usage error naming it, not a traceback
        raise UsageError(f"MODEL {spec!r}: importing {mod_name} failed: {_raised(e)}")
    fn = mod
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise UsageError(f"MODEL {spec!r}: {mod_name} has no {attr}")
        fn = getattr(fn, part)
    return fn


def build_model(spec: str, kwargs: Dict[str, Any], train: bool = False,
                channels_last: bool = False) -> torch.nn.Module:
    """The model `spec` names, called with `kwargs`, in eval() (or train()) mode; channels-last
    moves its 4-D parameters and buffers to channels-last and its 5-D ones to channels-last-3d
    (torch's `Module.to(memory_format=channels_last)` refuses a 5-D weight: a video model)."""
    torch.manual_seed(0)
    fn = load_callable(spec)
    try:
        model = fn(**kwargs)
    except TypeError as e:  # a keyword the callable does not take
        raise UsageError(f"MODEL {spec!r}: {e}")
    except Exception as e:  # the constructor itself failed (torchvision's quantized models
        # without a quantized engine: "Quantized backend not supported"): one line, not a
        # traceback, and still one JSON object with --json
        raise ExportError(f"building the model failed: {_raised(e)}", kind="build_failed")
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"MODEL {spec!r} returned a {type(model).__name__}, not a torch.nn.Module")
    model.train(train)
    if channels_last:
        model = to_channels_last(model)
    return model


def to_channels_last(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with its 4-D parameters and buffers channels-last and its 5-D ones
    channels-last-3d, in place (as make_inputs lays out rank-4 and rank-5 inputs). Each is
    converted as `Module.to(memory_format=...)` converts it, by `Tensor.to`: a weight whose
    layout is ambiguous (a 1x1 or depthwise kernel, contiguous and channels-last at once) is
    still given channels-last strides, which is what makes torch's convolution choose a
    channels-last output; `contiguous(memory_format=...)` would keep its contiguous strides."""
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}

    def convert(t: torch.Tensor) -> torch.Tensor:
        mf = formats.get(t.dim())
        return t.to(memory_format=mf) if mf is not None else t
    return model._apply(convert)


def randomize_zero_parameters(model: torch.nn.Module, seed: int = 1) -> int:
    """Gives every all-zero floating parameter random values (a zero classifier would hide wrong
    activations). Returns how many it changed."""
    g = torch.Generator().manual_seed(seed)
    n = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() > 0 and not bool(p.any()):
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype))
                n += 1
    return n


def parse_input(text: str) -> Tuple[List[int], torch.dtype]:
    """`1,3,64,64[:dtype]` → (shape, dtype); an empty shape is a scalar."""
    shape_text, _, dt = text.partition(":")
    try:
        shape = [int(s) for s in shape_text.split(",") if s.strip() != ""]
    except ValueError:
        raise UsageError(f"--input {text}: sizes must be integers")
    if any(s < 0 for s in shape):
        raise UsageError(f"--input {text}: sizes must be >= 0")
    dt = dt or "float32"
    if dt not in replay.DTYPES:
        raise UsageError(f"--input {text}: dtype must be one of {', '.join(replay.DTYPES)}")
    return shape, replay.DTYPES[dt]


def make_inputs(specs: Sequence[Tuple[List[int], torch.dtype]], seed: int = 0,
                channels_last: bool = False) -> List[torch.Tensor]:
    """Inputs filled from a fixed seed (normal floats, small integers, random booleans);
    rank-4 (rank-5) inputs are made channels-last (channels-last-3d) when asked."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for shape, dt in specs:
        if dt.is_floating_point:
            t = torch.randn(shape, generator=g, dtype=torch.float64).to(dt)
        elif dt == torch.bool:
            t = torch.randint(0, 2, shape, generator=g).bool()
        else:
            t = torch.randint(0, 10, shape, generator=g).to(dt)
        if channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        elif channels_last and t.dim() == 5:
            t = t.contiguous(memory_format=torch.channels_last_3d)
        out.append(t)
    return out


# ---- tracing -------------------------------------------------------------------------------

def trace(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> Tuple[Any, List[str], List[str], Dict[str, torch.Tensor]]:
    """(fx graph module, parameter names, buffer names, state) of the functionalized trace; the
    graph's placeholders are the parameters, then the buffers, then the inputs."""
    from functorch import make_fx
    from functorch.experimental import functionalize
    from torch.nn.utils.stateless import functional_call
    from torch.utils._pytree import tree_flatten

    params = [(n, p.detach()) for n, p in model.named_parameters()]
    buffers = [(n, b) for n, b in model.named_buffers()]
    names = [n for n, _ in params] + [n for n, _ in buffers]
    tied = _tied_names(model, names)

    def f(*flat: torch.Tensor) -> Any:
        state = dict(zip(names, flat[:len(names)]))
        state.update({alias: state[name] for alias, name in tied.items()})
        out = functional_call(model, state, tuple(flat[len(names):]))
        # the outputs' leaves in order (lists, tuples, dicts by their values): a named tuple
        # (GoogLeNetOutputs, InceptionOutputs in train mode) would trace as a call of its class
        return tree_flatten(out)[0]

    state = {n: t for n, t in params + buffers}
    args = [t.clone(memory_format=torch.preserve_format) for _, t in params + buffers]
    args += [x.clone(memory_format=torch.preserve_format) for x in inputs]
    try:
        with torch.no_grad(), _unfused_attention(model), _memory_format_contiguous():
            gm = make_fx(functionalize(f, remove="mutations_and_views"))(*args)
    except Exception as e:  # whatever the model raised on these inputs: torch._assert's
        # AssertionError (vit_b_16 at another image size), a KeyError of its own, ...
        raise ExportError(f"tracing the model failed: {_raised(e)}", kind="trace_failed")
    return gm, [n for n, _ in params], [n for n, _ in buffers], state


def _raised(e: BaseException) -> str:
    """What the model's code raised, in one line: the exception's type, the first line of its
    message (or only the type) and the model's own frame (_model_frame)."""
    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return f"{type(e).__name__}: {first}{_model_frame(e)}"


def _model_frame(e: BaseException) -> str:
    """Where in the model's own code e was raised: the innermost frame outside torch, functorch
    and this module (` (at file.py:line, in function)`), or "" when there is none. A data-dependent
    branch (detection models' resizing of images) then names the line that asked for a value."""
    import os
    import traceback
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if f.filename != __file__ and not f.filename.startswith(torch_dir)
              and os.sep + "functorch" + os.sep not in f.filename
              and not f.filename.startswith("<")]  # importlib's <frozen …>, fx's <string>
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {os.path.basename(f.filename)}:{f.lineno}, in {f.name})"


def _tied_names(model: torch.nn.Module, names: Sequence[str]) -> Dict[str, str]:
    """Every other qualified name of a parameter or buffer that is reachable under several
    (weight tying: `fc.weight = emb.weight`; a submodule used twice) → the name
    named_parameters/named_buffers give it. torch 1.13's functional_call swaps only the names
    it is given, so the trace would capture the tensor behind an untied name as a constant
    (`_param_constant0`, read through a non-functional `aten.t`) beside its placeholder."""
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    by_id = {id(tensors[n]): n for n in names}
    tied: Dict[str, str] = {}
    for prefix, mod in model.named_modules(remove_duplicate=False):
        for attr, t in list(mod._parameters.items()) + list(mod._buffers.items()):
            full = f"{prefix}.{attr}" if prefix else attr
            if t is not None and id(t) in by_id and by_id[id(t)] != full:
                tied[full] = by_id[id(t)]
    return tied


class _memory_format_contiguous:
    """torch 1.13's functional tensors answer is_contiguous(memory_format=channels_last) wrongly,
    so `x.contiguous(memory_format=...)` traces as nothing even when x is in another layout.
    During the trace it is decided on x's strides (which are right) instead."""

    def __enter__(self) -> None:
        self.orig = torch.Tensor.contiguous
        orig = self.orig

        def contiguous(x: torch.Tensor, memory_format: Any = torch.contiguous_format) -> torch.Tensor:
            rank = {torch.channels_last: 4, torch.channels_last_3d: 5}.get(memory_format)
            if rank is not None:
                want = layout.CHANNELS_LAST[rank]
                have = layout.dim_order_from_strides(list(x.shape), list(x.stride()))
                if x.dim() != rank or have != want:  # of another rank: clone raises torch's
                    # "required rank 4 tensor to use channels_last format", as eager does
                    return torch.ops.aten.clone.default(x, memory_format=memory_format)
                return x
            return orig(x, memory_format=memory_format)
        torch.Tensor.contiguous = contiguous  # type: ignore[assignment]

    def __exit__(self, *exc: Any) -> None:
        torch.Tensor.contiguous = self.orig  # type: ignore[assignment]


class _unfused_attention:
    """In eval mode nn.MultiheadAttention takes a fused fast path, one opaque
    `_native_multi_head_attention` op that hides every view of the attention. With dropout 0
    its training path computes the same thing op by op, so each such module is traced in
    training mode (and put back afterwards)."""

    def __init__(self, model: torch.nn.Module):
        self.mods = [m for m in model.modules()
                     if isinstance(m, torch.nn.MultiheadAttention) and not m.training
                     and m.dropout == 0.0]

    def __enter__(self) -> None:
        for m in self.mods:
            m.training = True

    def __exit__(self, *exc: Any) -> None:
        for m in self.mods:
            m.training = False


# ---- literals ------------------------------------------------------------------------------

def _enum_name(v: Any) -> Optional[str]:
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, (torch.layout, torch.memory_format)):
        return str(v).replace("torch.", "")
    if isinstance(v, torch.device):
        return str(v)
    return None


def literal(v: Any, where: str, in_kwargs: bool) -> Any:
    """A Python value of a traced call as a literal of docs/format.md §2 (node references as
    names)."""
    import torch.fx
    if isinstance(v, torch.fx.Node):
        return v.name
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        if not INT64_MIN <= v <= INT64_MAX:
            raise ExportError(f"integer {v} is outside int64", kind="unsupported", path=where)
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return {"float": "nan"}
        if math.isinf(v):
            return {"float": "inf" if v > 0 else "-inf"}
        return float(v)
    if isinstance(v, (list, tuple)):
        return [literal(x, f"{where}/{i}", in_kwargs) for i, x in enumerate(v)]
    name = _enum_name(v)
    if isinstance(v, torch.dtype):
        name = replay.dtype_name(v, where)
    if name is not None or isinstance(v, str):
        if in_kwargs:
            return name if name is not None else v
        raise ExportError(f"positional {type(v).__name__} argument {v!r} cannot be carried "
                          "(a string in args is a node reference)", kind="unsupported", path=where)
    raise ExportError(f"argument of type {type(v).__name__} ({v!r}) cannot be carried",
                      kind="unsupported", path=where)


def _stringlike(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_stringlike(x) for x in v)
    return isinstance(v, str) or _enum_name(v) is not None


def _has_node(v: Any) -> bool:
    import torch.fx
    if isinstance(v, (list, tuple)):
        return any(_has_node(x) for x in v)
    return isinstance(v, torch.fx.Node)


def call_arguments(fx_node: Any, where: str) -> Tuple[list, dict]:
    """args and kwargs of a call in the format: strings (and dtypes, devices, …) only in kwargs,
    node references only in args (and kwargs.out)."""
    args, kwargs = list(fx_node.args), dict(fx_node.kwargs)
    schema = getattr(fx_node.target, "_schema", None)
    cut = next((i for i, a in enumerate(args) if _stringlike(a)), None)
    if cut is not None:
        if schema is None:
            raise ExportError("a string-like positional argument and no schema to name it",
                              kind="unsupported", path=f"{where}/args/{cut}")
        for i in range(cut, len(args)):
            kwargs[schema.arguments[i].name] = args[i]
        args = args[:cut]
    for k, v in kwargs.items():
        if k != "out" and _has_node(v):
            raise ExportError(f"tensor argument {k} given by keyword cannot be carried",
                              kind="unsupported", path=f"{where}/kwargs/{k}")
    out_args = [literal(a, f"{where}/args/{i}", False) for i, a in enumerate(args)]
    out_kwargs = {k: literal(v, f"{where}/kwargs/{k}", True) for k, v in kwargs.items()}
    return out_args, out_kwargs


def target_name(t: Any, where: str) -> str:
    if t is operator.getitem:
        return "operator.getitem"
    if isinstance(t, torch._ops.OpOverload):
        return f"{t.namespace}.{t._schema.name.split('::', 1)[1]}.{t._overloadname}"
    raise ExportError(f"call of {t!r} is not an ATen operator", kind="unsupported", path=where)


def is_view_like_copy(target: str) -> bool:
    """A `*_copy` op that is the functional form of a view op (its non-copy twin returns an
    alias), or a reshape rewritten into view_copy: its output is contiguous in the edge layout."""
    parts = target.split(".")
    if len(parts) != 3 or parts[0] != "aten" or not parts[1].endswith("_copy"):
        return False
    base = getattr(torch.ops.aten, parts[1][:-len("_copy")], None)
    if base is None:
        return False
    try:
        ov = getattr(base, parts[2])
    except (AttributeError, RuntimeError):
        return False
    rets = ov._schema.returns
    return bool(rets) and rets[0].alias_info is not None and not rets[0].alias_info.is_write


def _memory_format_dim_order(mf: str, rank: int, where: str) -> List[int]:
    if mf == "contiguous_format":
        return list(range(rank))
    if mf == "channels_last" and rank == 4:
        return [0, 2, 3, 1]
    if mf == "channels_last_3d" and rank == 5:
        return [0, 2, 3, 4, 1]
    raise ExportError(f"memory_format {mf} does not apply to rank {rank}", kind="unsupported",
                      path=where)


# ---- building the graph --------------------------------------------------------------------

class _Builder:
    def __init__(self, gm: Any, n_params: int, n_buffers: int, skip_dim_order: bool,
                 split: str = "slices"):
        self.gm = gm
        self.n_params, self.n_buffers = n_params, n_buffers
        self.skip_dim_order = skip_dim_order
        self.split = split
        self.nodes: List[dict] = []
        self.fx_of: Dict[str, Any] = {}
        self.constants: List[dict] = []

    def where(self) -> str:
        return f"/nodes/{len(self.nodes)}"

    def build(self) -> List[dict]:
        fx_nodes = list(self.gm.graph.nodes)
        ph_index = 0
        placeholders, calls, output = [], [], None  # calls: fx nodes after the placeholders
        splits = {n.name: n for n in fx_nodes
                  if self.split == "slices" and n.op == "call_function"
                  and isinstance(n.target, torch._ops.OpOverload)
                  and target_name(n.target, "") in SPLITS}
        for n in fx_nodes:
            if n.op == "placeholder":
                kind = ("parameter" if ph_index < self.n_params else
                        "buffer" if ph_index < self.n_params + self.n_buffers else "user_input")
                placeholders.append({"name": n.name, "op": "placeholder", "kind": kind})
                ph_index += 1
            elif n.op == "get_attr":  # stays where the trace first reads it
                self.constants.append({"name": n.name, "op": "placeholder", "kind": "constant"})
                calls.append(n)
            elif n.op == "call_function":
                calls.append(n)
            elif n.op == "output":
                output = n
            else:
                raise ExportError(f"fx node {n.name} of op {n.op} cannot be carried",
                                  kind="unsupported", path=f"/nodes/{len(placeholders)}")
        self.nodes = placeholders
        constants = {c["name"]: c for c in self.constants}
        for n in calls:
            if n.name in constants:
                self.nodes.append(constants[n.name])
                continue
            if n.name in splits:
                self._check_split_users(n)
                continue
            self.nodes.append(self._call(n, splits))
            self.fx_of[n.name] = n
        self.nodes.append(self._output(output))
        return self.nodes

    def _check_split_users(self, n: Any) -> None:
        for u in n.users:
            if u.target is not operator.getitem:
                raise ExportError(f"{u.name} reads the list of {n.name} other than by getitem",
                                  kind="unsupported", path=self.where())

    def _call(self, n: Any, splits: Dict[str, Any]) -> dict:
        where = self.where()
        target = target_name(n.target, where + "/target")
        if target == "operator.getitem" and n.args[0].name in splits:
            return self._split_piece(n, splits[n.args[0].name], where)
        args, kwargs = call_arguments(n, where)
        if target in RESHAPES:
            target, args = "aten.view_copy.default", args[:2]
        elif target in CONVERSIONS:
            target, kwargs = self._conversion(n, target, kwargs, where)
        node: Dict[str, Any] = {"name": n.name, "op": "call_function", "target": target,
                                "args": args}
        if kwargs:
            node["kwargs"] = kwargs
        return node

    def _conversion(self, n: Any, target: str, kwargs: dict, where: str) -> Tuple[str, dict]:
        mf = kwargs.get("memory_format")
        if self.skip_dim_order or mf in (None, "preserve_format"):
            return target, kwargs
        meta = n.meta.get("tensor_meta") or n.args[0].meta.get("tensor_meta")
        if meta is None:
            raise ExportError("layout conversion of a tensor of unknown rank", kind="unsupported",
                              path=where)
        rank = len(meta.shape)
        kwargs = {k: v for k, v in kwargs.items() if k != "memory_format"}
        kwargs["dim_order"] = _memory_format_dim_order(mf, rank, where + "/kwargs/memory_format")
        return CONVERSIONS[target], kwargs

    def _split_piece(self, n: Any, split: Any, where: str) -> dict:
        """getitem i of a split (unbind) as the slice (select) of the input it is."""
        i = n.args[1]
        x = split.args[0]
        target = target_name(split.target, where)
        dim = split.args[-1] if len(split.args) > (1 if target.endswith("unbind_copy.int") else 2) \
            else split.kwargs.get("dim", 0)
        shape = list(x.meta["tensor_meta"].shape)
        rank = len(shape)
        d = dim + rank if dim < 0 else dim
        dim = d  # the pieces name the dim non-negative, as the lowering's slice map does
        if target.endswith("unbind_copy.int"):
            return {"name": n.name, "op": "call_function", "target": "aten.select_copy.int",
                    "args": [x.name, dim, i]}
        if target.endswith("split_copy.Tensor"):
            size = split.args[1]
            sizes = [min(size, shape[d] - s) for s in range(0, shape[d], size)] or [0]
        else:
            sizes = list(split.args[1])
        start = sum(sizes[:i])
        return {"name": n.name, "op": "call_function", "target": "aten.slice_copy.Tensor",
                "args": [x.name, dim, start, start + sizes[i], 1]}

    def _output(self, n: Any) -> dict:
        import torch.fx
        flat: List[str] = []

        def walk(v: Any) -> None:
            if isinstance(v, torch.fx.Node):
                flat.append(v.name)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
            else:  # the i-th leaf of the outputs as trace() flattens them (0-based)
                raise ExportError(f"output {len(flat)} of the model (counting the leaves of "
                                  f"its lists, tuples and dicts from 0) is "
                                  f"{type(v).__name__} {v!r}, not a tensor: every output of "
                                  f"a graph is a tensor", kind="unsupported",
                                  path=self.where() + "/args")
        walk(n.args)
        return {"name": "output" if "output" not in self.fx_of else n.name, "op": "output",
                "args": flat}


# ---- names ---------------------------------------------------------------------------------

def identifier(text: str) -> str:
    """`text` with every character other than a letter, digit or underscore made `_`."""
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def input_names(model: torch.nn.Module, n: int) -> List[str]:
    """Names of the model's n inputs, from its forward's signature as torch.export takes them: the
    positional parameters' names, `NAME_i` for the i-th element of `*NAME`, `input_i` where the
    signature cannot be read."""
    import inspect
    names: List[str] = []
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if len(names) == n:
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(identifier(p.name))
        elif p.kind == p.VAR_POSITIONAL:
            names += [f"{identifier(p.name)}_{i}" for i in range(n - len(names))]
    names += [f"input_{i}" for i in range(len(names), n)]
    return names


def placeholder_names(nodes: List[dict], params: Sequence[str], buffers: Sequence[str],
                      inputs: Sequence[str]) -> Dict[str, str]:
    """Trace name → graph name of each parameter, buffer and user-input placeholder, as
    torch.export names them: `p_` + the parameter's qualified name (`fc.weight` → `p_fc_weight`),
    `b_` + a buffer's, a user input after the forward's argument; dots and every other character
    that is not a letter, digit or `_` become `_`. A name taken (by an earlier placeholder or by
    any other node) gets the first free suffix `_1`, `_2`, … Constants keep the trace's names
    (they are tensors the trace made, with no qualified name)."""
    ph = [n for n in nodes if n["op"] == "placeholder" and n["kind"] != "constant"]
    wanted = ([f"p_{identifier(q)}" for q in params] + [f"b_{identifier(q)}" for q in buffers]
              + list(inputs))
    if len(wanted) != len(ph):
        raise ExportError(f"the trace has {len(ph)} placeholders for {len(params)} parameters, "
                          f"{len(buffers)} buffers and {len(inputs)} inputs", kind="trace_failed")
    renamed = {n["name"] for n in ph}
    taken = {n["name"] for n in nodes if n["name"] not in renamed}
    out: Dict[str, str] = {}
    for n, want in zip(ph, wanted):
        out[n["name"]] = name = free_name(want, taken)
        taken.add(name)
    return out


def free_name(want: str, taken: Any) -> str:
    """The one rule that makes a placeholder's name unique: `want` if it is not in `taken`, else
    `want_1`, `want_2`, ... the first that is not. `placeholder_names` names with it, and
    `weights` maps names back to qualified names with it (so the two cannot disagree)."""
    name, k = want, 0
    while name in taken:
        k += 1
        name = f"{want}_{k}"
    return name


def _rename(nodes: List[dict], names: Dict[str, str]) -> None:
    """Renames nodes and every reference to them (args, kwargs.out, mutates), in place."""
    def ref(v: Any) -> Any:
        if isinstance(v, str):
            return names.get(v, v)
        if isinstance(v, list):
            return [ref(x) for x in v]
        return v
    for n in nodes:
        n["name"] = names.get(n["name"], n["name"])
        if "args" in n:
            n["args"] = ref(n["args"])
        out = n.get("kwargs", {}).get("out")
        if isinstance(out, str):
            n["kwargs"]["out"] = names.get(out, out)
        if "mutates" in n:
            n["mutates"] = ref(n["mutates"])


def _spec(t: torch.Tensor, strides: Sequence[int], where: str) -> dict:
    return {"dtype": replay.dtype_name(t.dtype, where), "shape": list(t.shape),
            "strides": list(strides)}


def _dense_strides(t: torch.Tensor) -> List[int]:
    """t's strides when dense, else the dense strides that keep its dims' memory order."""
    shape, strides = list(t.shape), list(t.stride())
    if layout.dim_order_from_strides(shape, strides) is not None:
        return strides
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], d))
    return layout.strides_from_dim_order(shape, order)


class _Discover:
    """Gives each node its layout while the new graph runs once in torch, and records writes
    to arguments that the naming rules of docs/format.md §2 do not show."""

    def __init__(self, edge: bool):
        self.edge = edge
        self.index: Dict[str, int] = {}
        self.specs: Dict[str, Any] = {}
        self.mutates: Dict[str, List[str]] = {}

    def layout_of(self, node: dict, i: int, value: torch.Tensor) -> Sequence[int]:
        target = node.get("target", "")
        if self.edge and (is_view_like_copy(target)):
            strides = layout.strides_from_dim_order(list(value.shape), range(value.dim()))
        else:
            strides = _dense_strides(value)
        where = f"/nodes/{self.index.get(node['name'], 0)}"
        try:
            spec = _spec(value, strides, where)
        except ExportError as e:  # name the node and its op, not only its index
            what = (f"{node['op']} {node['name']}" if node["op"] == "placeholder"
                    else f"node {node['name']} ({target})")
            out = f" output {i}" if i else ""
            raise ExportError(f"{what}{out}: {e.message}", kind=e.kind, path=e.path)
        self.specs.setdefault(node["name"], {})[i] = spec
        return strides

    def before(self, idx: int, node: dict, args: list, kwargs: dict) -> Any:
        seen = []
        for pos, (a, ref) in enumerate(zip(args, node["args"])):
            if isinstance(a, torch.Tensor) and isinstance(ref, str):
                seen.append((pos, ref, a, replay.logical_bytes(a).clone()))
            elif isinstance(a, list) and isinstance(ref, list):
                for x, r in zip(a, ref):
                    if isinstance(x, torch.Tensor) and isinstance(r, str):
                        seen.append((pos, r, x, replay.logical_bytes(x).clone()))
        return seen

    def after(self, idx: int, node: dict, args: list, kwargs: dict, res: Any, seen: Any) -> None:
        shown = replay.writes_arg0(node["target"])
        for pos, ref, t, old in seen:
            if shown and pos == 0:
                continue
            if not torch.equal(replay.logical_bytes(t), old):
                lst = self.mutates.setdefault(node["name"], [])
                if ref not in lst:
                    lst.append(ref)


def _mark_mutated(nodes: List[dict]) -> None:
    """Placeholders whose storage some node writes get `"mutated": true`."""
    root: Dict[str, str] = {}
    kinds = {n["name"]: n for n in nodes if n["op"] == "placeholder"}
    written = set()
    for n in nodes:
        if n["op"] != "call_function":
            continue
        tgt = n["target"]
        hits = list(n.get("mutates", []))
        if replay.writes_arg0(tgt) and n["args"]:
            a0 = n["args"][0]
            hits += a0 if isinstance(a0, list) else [a0]
            if isinstance(a0, str):
                root[n["name"]] = root.get(a0, a0)
        if isinstance(n.get("kwargs", {}).get("out"), str):
            out = n["kwargs"]["out"]
            hits.append(out)
            root[n["name"]] = root.get(out, out)
        for h in hits:
            if isinstance(h, str):
                written.add(root.get(h, h))
    for name in written:
        if name in kinds:
            kinds[name]["mutated"] = True


def _check_as_strided(nodes: List[dict], fx_of: Dict[str, Any], specs: Dict[str, Any]) -> None:
    """as_strided reads its input's buffer: the input must be laid out as in the trace."""
    for idx, n in enumerate(nodes):
        if n["op"] != "call_function" or not n["target"].startswith("aten.as_strided"):
            continue
        src = n["args"][0]
        fx = fx_of.get(src)
        meta = fx.meta.get("tensor_meta") if fx is not None else None
        if meta is None or src not in specs:
            continue
        spec = specs[src][0]
        traced = list(meta.stride)
        if any(a != b for a, b, s in zip(layout.spec_strides(spec), traced, spec["shape"]) if s > 1):
            raise ExportError(f"{n['target']} reads the buffer of {src}, whose declared layout "
                              f"{spec['strides']} differs from the traced {traced}",
                              kind="unsupported", path=f"/nodes/{idx}")


def export(model: torch.nn.Module, inputs: Sequence[torch.Tensor], name: str = "model",
           layout_mode: str = "edge", skip_dim_order: bool = False,
           split: str = "slices", progress: Any = None) -> Exported:
    """Traces `model` on `inputs` and returns the exported program (see the module docstring).
    `split="outputs"` keeps each split as one multi-output node read through getitems
    (docs/format.md §3) instead of rewriting it into slices. `progress` (a progress.Progress) times
    the two phases, `trace` and `layouts` (the run that gives every node its layout)."""
    from .progress import silent
    if layout_mode not in ("edge", "traced"):
        raise UsageError(f"--layout {layout_mode}: must be edge or traced")
    if split not in ("slices", "outputs"):
        raise UsageError(f"--split {split}: must be slices or outputs")
    progress = progress or silent()
    with progress.phase("trace"):
        gm, pnames, bnames, state = trace(model, inputs)
        b = _Builder(gm, len(pnames), len(bnames), skip_dim_order, split)
        nodes = b.build()
        attr_of = {c["name"]: c["name"] for c in b.constants}  # a constant's is its gm attribute
        names = placeholder_names(nodes, pnames, bnames, input_names(model, len(inputs)))
        traced = [n["name"] for n in nodes if n["op"] == "placeholder" and n["kind"] != "constant"]
        state_names = {names[t]: q for t, q in zip(traced, pnames + bnames)}
        _rename(nodes, names)
    with progress.phase("layouts", total=len(nodes)) as phase:
        e = _layouts(model, inputs, name, layout_mode, skip_dim_order, gm, b, nodes, state,
                     pnames, bnames, attr_of, phase)
    e.state_names = state_names
    return e


def _layouts(model: torch.nn.Module, inputs: Sequence[torch.Tensor], name: str,
             layout_mode: str, skip_dim_order: bool, gm: Any, b: "_Builder", nodes: List[dict],
             state: Dict[str, torch.Tensor], pnames: List[str], bnames: List[str],
             attr_of: Dict[str, str], phase: Any) -> Exported:
    values: Dict[str, torch.Tensor] = {}
    ph = [n for n in nodes if n["op"] == "placeholder"]
    flat = [state[k] for k in pnames + bnames] + list(inputs)
    user_inputs = []
    for n, v in zip([p for p in ph if p["kind"] != "constant"], flat):
        values[n["name"]] = v
        if n["kind"] == "user_input":
            user_inputs.append(n["name"])
    for c, attr in zip(b.constants, attr_of.values()):
        values[c["name"]] = getattr(gm, attr)
    graph = {"format": "viewlower.graph", "version": 1, "name": name,
             "skip_dim_order": bool(skip_dim_order), "nodes": nodes}
    d = _Discover(layout_mode == "edge")
    d.index = {n["name"]: i for i, n in enumerate(nodes)}
    ph_names = {n["name"] for n in ph}
    ref: Dict[str, bytes] = {}
    r = replay.Run(graph, values, layout_of=d.layout_of, before=d.before, after=d.after)
    r.keep_placeholders = set(ph_names)  # which ones the program writes is known afterwards
    with torch.no_grad():
        for k, t in r:
            phase.step()
            if not isinstance(t, torch.Tensor):
                continue
            if k not in d.specs:  # in-place results share their argument's storage
                d.specs[k] = {0: _spec(t, _dense_strides(t), f"/nodes/{d.index[k]}")}
            if k not in ph_names:
                ref[k] = replay.digest(t)
    out_digests = [replay.digest(t) for t in r.outputs]
    for n in nodes:
        if n["op"] == "output":
            continue
        specs = d.specs.get(n["name"])
        if n["op"] == "call_function" and n["target"] == "operator.getitem":
            prod = d.specs.get(n["args"][0], {})
            if n["args"][1] not in prod:
                raise ExportError(f"output {n['args'][1]} of {n['args'][0]} is not a tensor",
                                  kind="unsupported", path=f"/nodes/{d.index[n['name']]}")
            n["val"] = prod[n["args"][1]]
            continue
        if specs is None:
            raise ExportError(f"node {n['name']} produced no tensor", kind="unsupported",
                              path=f"/nodes/{nodes.index(n)}")
        if n["name"] in d.mutates:
            n["mutates"] = d.mutates[n["name"]]
        if _is_multi(b.fx_of.get(n["name"])):
            if sorted(specs) != list(range(len(specs))):
                raise ExportError(f"{n['target']} returns an output that is not a tensor",
                                  kind="unsupported", path=f"/nodes/{d.index[n['name']]}")
            n["vals"] = [specs[i] for i in sorted(specs)]
        else:
            n["val"] = specs[0]
    _check_as_strided(nodes, b.fx_of, d.specs)
    _mark_mutated(nodes)
    final = r.final_state()
    state_digests = {n["name"]: replay.digest(final[n["name"]])
                     for n in nodes if n.get("mutated") and n["name"] in final}
    _reorder_keys(nodes)
    e = Exported(graph, values, gm, user_inputs, ref, out_digests)
    e.state_digests = state_digests
    return e


def _is_multi(fx: Any) -> bool:
    if fx is None:
        return False
    sch = getattr(fx.target, "_schema", None)
    if sch is None:
        return False
    rets = sch.returns
    return len(rets) > 1 or (len(rets) == 1 and str(rets[0].type).startswith("List"))


def _reorder_keys(nodes: List[dict]) -> None:
    order = ["name", "op", "target", "kind", "args", "kwargs", "mutates", "val", "vals", "mutated",
             "offset", "alias_of"]
    for i, n in enumerate(nodes):
        nodes[i] = {k: n[k] for k in order if k in n}
        nodes[i].update({k: v for k, v in n.items() if k not in order})


def export_text(graph: dict) -> str:
    from .client import dumps
    return dumps(graph) + "\n"
