"""PyTorch -> Graph through torch.export: export, decompose to core ATen, map each ATen op through ATEN_OPS.

Only what the module's user outputs depend on is imported (torch.export also records batch norm's running
statistics updates as buffer mutations; a graph of one step's values has no place for them). Every op is
looked up before anything is built, so an unsupported module gets one error naming every missing op.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from accelsim.errors import AccelsimError, FrontendError
from accelsim.frontends.aten_registry import AtenOp, Ctx
from accelsim.frontends.aten_table import aten_ops
from accelsim.frontends.losses import loss_head
from accelsim.frontends.quiet import quiet_libraries
from accelsim.frontends.torch_layer import module_path
from accelsim.frontends.torch_fold import as_graph_value, fold, foldable
from accelsim.frontends.torch_leaves import add_constant, add_input, add_param, graph_dtype
from accelsim.graph.ir import Graph
from accelsim.passes.dce import prune_to_outputs

TORCH_EXTRA = "pip install 'accelsim[torch]'"
KEEP_WHOLE = ("scaled_dot_product", "pixel_shuffle", "pixel_unshuffle", "nll_loss_forward")
"""ATen ops kept out of the core decomposition: SDPA's decomposition guards fully masked rows with boolean
ops (eq, logical_not, any, where) that a graph of float values has no use for, and pixel (un)shuffle would
become reshape-transpose-reshape, and nll_loss (F.cross_entropy inside a forward) would become a gather; each
has an exact converter onto one registry op (or a few)."""


def require_torch() -> Any:
    """The torch module, or a FrontendError that says which extra to install."""
    try:
        import torch
    except ImportError:
        raise FrontendError(f"importing a PyTorch model needs PyTorch, which is not installed: {TORCH_EXTRA}") \
            from None
    return torch


def from_torch(module: Any, example_inputs: Sequence[Any], *, name: str | None = None, loss: str = "mse") -> Graph:
    """The forward Graph of `module` called on `example_inputs` (shapes and dtypes fixed by them), ending in the
    loss head `loss` ("mse", "cross_entropy", "output", "none": see frontends.losses). Parameters and buffers
    keep the module's names (`layer1.0.conv1.weight`); user inputs keep the forward's argument names."""
    torch = require_torch()
    if not isinstance(module, torch.nn.Module):
        raise FrontendError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise FrontendError("from_torch: example_inputs must be a tuple of tensors (one per forward argument), got "
                            f"{type(example_inputs).__name__}")
    model = name or type(module).__name__
    with quiet_libraries():  # torch prints the traced FX graph and logs warnings when tracing fails
        try:
            ep = torch.export.export(module, tuple(example_inputs))
        except Exception as e:  # torch raises many kinds; the user needs the first line, not the trace
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise FrontendError(f"model {model!r}: torch.export could not trace the module on inputs of shapes "
                                f"{[tuple(t.shape) for t in example_inputs]}: {first}") from None
    return from_exported(ep, name=model, loss=loss, example_inputs=tuple(example_inputs))


def from_exported(ep: Any, *, name: str, loss: str = "mse", example_inputs: tuple[Any, ...] | None = None) -> Graph:
    """The forward Graph of an ExportedProgram (from torch.export.export or torch.export.load)."""
    torch = require_torch()
    head = loss_head(loss)
    with quiet_libraries():  # decomposition warns (deprecations) and logs as it retraces
        ep = _decompose(torch, ep, name)
    fx = ep.graph
    kinds = _placeholder_kinds(ep)
    outputs = _user_outputs(ep, name)
    needed = _needed(fx, outputs)
    ops = aten_ops()
    constant = foldable(fx, needed)
    _refuse_unsupported(name, [n for n in fx.nodes if n in needed and n.op == "call_function" and n not in constant],
                        ops)
    inputs = example_inputs if example_inputs is not None else tuple(getattr(ep, "example_inputs", None) or ((),))[0]
    values = _user_values(fx, kinds, inputs)
    leaves = {n.name: n.meta["val"] for n in fx.nodes if n.op == "placeholder" and n in needed}
    g = Graph(name=name, dtype=graph_dtype(leaves, name))
    env = _leaves(g, ep, fx, kinds, needed, values, name)
    with quiet_libraries():
        folded = fold(fx, constant, name)
    env.update({n: as_graph_value(g, v, name, n.name) for n, v in folded.items()})
    ctx = Ctx(g)
    for n in fx.nodes:
        if n in needed and n.op == "call_function" and n not in constant:
            with g.layer(module_path(n)):
                env[n] = _convert(ctx, n, env, ops, name)
    outs = [_tensor_out(env[o], o, name) for o in outputs]
    names = ["y"] if len(outs) == 1 else [f"y{k}" for k in range(len(outs))]
    for k, v in zip(names, outs):
        g.output(k, v)
    with g.layer("loss"):
        loss_var = head.build(g, outs)
    if loss_var is not None:
        g.set_loss(loss_var)
    return prune_to_outputs(g, list(g.outputs))


def _decompose(torch: Any, ep: Any, model: str) -> Any:
    """`ep` decomposed to core ATen, keeping KEEP_WHOLE ops whole."""
    table = torch.export.default_decompositions()
    for key in [k for k in table if any(w in str(k) for w in KEEP_WHOLE)]:
        del table[key]
    try:
        return ep.run_decompositions(table)
    except Exception as e:  # a program torch.export.load accepted but cannot retrace
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FrontendError(f"model {model!r}: torch could not decompose the exported program to core ATen "
                            f"ops: {first}") from None


def _placeholder_kinds(ep: Any) -> dict[str, tuple[str, str | None]]:
    """placeholder name -> (kind, module target): PARAMETER, BUFFER, CONSTANT_TENSOR, USER_INPUT, ..."""
    out = {}
    for spec in ep.graph_signature.input_specs:
        arg_name = getattr(spec.arg, "name", None)
        if arg_name is not None:
            out[arg_name] = (spec.kind.name, spec.target)
    return out


def _user_outputs(ep: Any, model: str) -> list[Any]:
    fx_out = next(n for n in ep.graph.nodes if n.op == "output")
    flat = list(fx_out.args[0])
    specs = ep.graph_signature.output_specs
    outs = [node for node, spec in zip(flat, specs) if spec.kind.name == "USER_OUTPUT"]
    if not outs or not all(hasattr(o, "op") for o in outs):
        raise FrontendError(f"model {model!r}: the module must return one or more tensors")
    return outs


def _needed(fx: Any, outputs: list[Any]) -> set[Any]:
    """FX nodes the user outputs depend on."""
    needed: set[Any] = set()
    stack = list(outputs)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        stack.extend(n.all_input_nodes)
    return needed


def _label(n: Any) -> str:
    target = n.target
    return str(target) if not callable(target) or hasattr(target, "_schema") else getattr(target, "__name__", "?")


def _refuse_unsupported(model: str, calls: list[Any], ops: dict[str, AtenOp]) -> None:
    """One FrontendError naming every ATen op (or use of one) that has no accelsim decomposition."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for n in calls:
        label = _label(n)
        if label == "getitem":
            continue
        op = ops.get(label)
        why = "no accelsim decomposition" if op is None else op.refuse(n.args, dict(n.kwargs))
        if why is None:
            continue
        key = f"{label} ({why})"
        counts[key] += 1
        first.setdefault(key, n.name)
    if counts:
        listed = "; ".join(f"{k} x{c} (first: node {first[k]!r})" for k, c in counts.items())
        raise FrontendError(f"model {model!r}: {len(counts)} ATen op(s) cannot be imported: {listed}. accelsim maps "
                            f"{len(ops)} ATen ops onto its registry (accelsim.frontends.aten_table.ATEN_OPS); "
                            "rewrite these parts of the module with supported ones")


def _user_values(fx: Any, kinds: dict[str, tuple[str, str | None]], inputs: tuple[Any, ...]) -> dict[str, Any]:
    """User-input placeholder name -> the example tensor (for an int input's range), where known."""
    names = [n.name for n in fx.nodes if n.op == "placeholder" and kinds.get(n.name, ("",))[0] == "USER_INPUT"]
    return {k: v for k, v in zip(names, inputs) if hasattr(v, "dtype")}


def _leaves(g: Graph, ep: Any, fx: Any, kinds: dict[str, tuple[str, str | None]], needed: set[Any],
            values: dict[str, Any], model: str) -> dict[Any, Any]:
    env: dict[Any, Any] = {}
    constants = getattr(ep, "constants", {})
    for n in fx.nodes:
        if n.op != "placeholder" or n not in needed:
            continue
        kind, target = kinds.get(n.name, ("USER_INPUT", None))
        val = n.meta["val"]
        if kind == "PARAMETER":
            env[n] = add_param(g, target, val, True, model)
        elif kind == "BUFFER":
            env[n] = add_param(g, target, val, False, model)
        elif kind == "CONSTANT_TENSOR" and target in constants:
            env[n] = add_constant(g, target, constants[target], model)
        elif kind == "USER_INPUT":
            env[n] = add_input(g, n.name, val, values.get(n.name), model)
        else:
            raise FrontendError(f"model {model!r}: input {n.name!r} is a {kind}, which accelsim cannot import")
    return env


def _resolve(arg: Any, env: dict[Any, Any]) -> Any:
    from torch.fx.node import map_arg

    return map_arg(arg, lambda node: env[node])


def _convert(ctx: Ctx, n: Any, env: dict[Any, Any], ops: dict[str, AtenOp], model: str) -> Any:
    label = _label(n)
    if label == "getitem":
        src, index = n.args
        out = env[src][index]
        if out is None:
            raise FrontendError(f"model {model!r}: node {n.name!r} reads output {index} of {src.name!r}, which "
                                "accelsim does not compute")
        return out
    args, kwargs = _resolve(n.args, env), _resolve(dict(n.kwargs), env)
    try:
        out = ops[label].convert(ctx, *args, **kwargs)
    except AccelsimError as e:
        raise FrontendError(f"model {model!r}: node {n.name!r} ({label}): {e}") from None
    _check_shape(n, out, label, model)
    return out


def _check_shape(n: Any, out: Any, label: str, model: str) -> None:
    """The converted value has the shape torch.export recorded: a converter that disagrees is refused here,
    at the node, not later as wrong numbers."""
    val = n.meta.get("val")
    if hasattr(out, "shape") and hasattr(val, "shape") and tuple(out.shape) != tuple(int(d) for d in val.shape):
        raise FrontendError(f"model {model!r}: node {n.name!r} ({label}) converts to shape {tuple(out.shape)}, but "
                            f"torch.export recorded {tuple(val.shape)}")


def _tensor_out(value: Any, node: Any, model: str) -> Any:
    if not hasattr(value, "graph"):
        raise FrontendError(f"model {model!r}: output {node.name!r} is not a tensor of the graph")
    return value
