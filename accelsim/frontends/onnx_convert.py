"""Convert a checked ONNX graph node by node into an accelsim forward Graph (CheckedModel -> Graph).

Every node is visited even after a failure, so one error names every op type the importer lacks
(with counts and a node each) and every use it cannot express, not just the first.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.frontends.onnx_context import ImportContext, Unsupported, Value
from accelsim.frontends.onnx_errors import fail
from accelsim.frontends.onnx_fold import fold, foldable
from accelsim.frontends.onnx_leaves import frozen_initializers, param_inits
from accelsim.frontends.onnx_ops import ONNX_OPS
from accelsim.frontends.onnx_read import DEFAULT_DOMAINS, CheckedModel
from accelsim.graph.ir import Graph, Var
from accelsim.limits import DEFAULT_READ_LIMITS, ReadLimits


def _op_key(node: Any) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"


def _node_label(node: Any) -> str:
    return node.name or node.output[0]


LABEL_LOSSES = frozenset({"SoftmaxCrossEntropyLoss"})
"""Loss ops whose input 1 holds int64 class labels (their range is set when the loss is converted:
onnx_ops_loss.py)."""
LABEL_PASSES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast"})
"""Ops that carry labels unchanged on their way to a loss (GPT-2's `targets.view(-1)`)."""


def _label_inputs(checked: CheckedModel) -> set[str]:
    """Graph inputs a label loss reads as its labels, directly or through LABEL_PASSES ops."""
    producer = {out: node for node in checked.nodes for out in node.output if out}
    found = set()
    for node in checked.nodes:
        if node.op_type not in LABEL_LOSSES or len(node.input) < 2:
            continue
        name = node.input[1]
        while name in producer and producer[name].op_type in LABEL_PASSES and producer[name].input:
            name = producer[name].input[0]
        if name in checked.inputs:
            found.add(name)
    return found


def _add_inputs(g: Graph, checked: CheckedModel) -> tuple[dict[str, Value], set[str]]:
    """Graph inputs in file order: floats drawn N(0, 1), int64 ids uniform over the rows of the table they
    index (a Gather on a weight), which the default values need to be valid; int64 class labels of a loss
    uniform over its classes, which the loss's converter sets (it knows the scores' shape): their names are
    returned too. Both kinds are marked `indices=True`: evaluate refuses a fed value outside [0, high)."""
    labels = _label_inputs(checked)
    rows: dict[str, int] = {}
    for node in checked.nodes:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in checked.initializers:
            table = checked.initializers[node.input[0]]
            if table.ndim >= 1:
                rows[node.input[1]] = min(rows.get(node.input[1], table.shape[0]), table.shape[0])
    values: dict[str, Value] = {}
    pending: set[str] = set()
    for name, (shape, dtype) in checked.inputs.items():
        if dtype == "int64" and name in labels and name not in rows:
            values[name] = g.input(name, shape, dtype="int64", init="randint", indices=True)  # `high`: by the loss
            pending.add(name)
        elif dtype == "int64":
            if name not in rows:
                raise fail(f"{checked.label}: input {name!r}", "is int64 but neither the indices of a Gather on a "
                                                               "weight table nor the class labels of a loss "
                                                               f"({', '.join(sorted(LABEL_LOSSES))}); accelsim "
                                                               "imports integer inputs only as embedding ids and "
                                                               "class labels")
            values[name] = g.input(name, shape, dtype="int64", init="randint", high=rows[name], indices=True)
        else:
            values[name] = g.input(name, shape, dtype=g.dtype)
    return values, pending


def _all_static(ctx: ImportContext) -> bool:
    return all(ctx.is_static(i) for i in range(len(ctx.node.input)) if ctx.has(i))


def _folds(ctx: ImportContext) -> bool:
    """The node is computed at import: a default-domain op the folder may run, on known inputs only."""
    node = ctx.node
    if node.domain not in DEFAULT_DOMAINS or (node.op_type in ONNX_OPS and ONNX_OPS[node.op_type].before_folding):
        return False
    return foldable(node) and _all_static(ctx)


def _convert_node(ctx: ImportContext) -> list[Value]:
    """The node's outputs: folded when every input is known at import, else through its converter."""
    node = ctx.node
    if _folds(ctx):
        inputs = [ctx.static(i, "") if ctx.has(i) else None for i in range(len(node.input))]
        return fold(node, inputs, ctx.opset, ctx.where, ctx.limits)
    first = len(ctx.graph.nodes)
    try:
        outs = ONNX_OPS[node.op_type].convert(ctx)
    except AccelsimError as e:  # a registry op refused the shapes: the file disagrees with itself
        raise fail(ctx.where, f"cannot be built: {e}") from None
    for k, name in enumerate(node.output):
        if name and k >= len(outs):
            raise Unsupported(f"its output {k} ({name!r}) is used, which the importer does not produce")
    ctx.label_nodes(first, outs)
    return outs


def _report(missing: dict[str, list[str]], unsupported: list[str]) -> str:
    parts = []
    if missing:
        n = sum(len(v) for v in missing.values())
        ops = "; ".join(f"{op} x{len(names)} (e.g. node {names[0]!r})" for op, names in sorted(missing.items()))
        parts.append(f"{n} node(s) use {len(missing)} ONNX op type(s) the importer cannot convert: {ops}")
    if unsupported:
        parts.append(f"{len(unsupported)} node(s) use a supported op in a way the importer cannot express: "
                     + "; ".join(unsupported))
    known = ", ".join(sorted(ONNX_OPS))
    return (". ".join(parts) + f". Supported ONNX ops: {known} (plus any op on constants "
            "only, folded at import, except control flow (Loop, If, Scan), random draws and the ops the ONNX "
            "reference computes element by element in Python). Re-export the model without them, or add the op "
            "to accelsim's registry and to accelsim/frontends/onnx_ops.py.")


def convert(checked: CheckedModel, name: str, batch_norm: str, limits: ReadLimits = DEFAULT_READ_LIMITS) -> Graph:
    """The forward graph of `checked`: its inputs, its float initializers as parameters named as in the
    file (drawn by onnx_leaves' rule), one output per ONNX graph output; no loss. Values folded from
    constants stay within limits.max_folded_elements."""
    g = Graph(name, dtype=checked.dtype)
    values, labels = _add_inputs(g, checked)
    ctx = ImportContext(g, checked.label, checked.opset, checked.initializers, frozen_initializers(checked),
                        param_inits(checked), batch_norm, limits, values=values, labels=labels)
    missing: dict[str, list[str]] = defaultdict(list)
    unsupported: list[str] = []
    unknown: set[str] = set()  # tensors whose producer failed: their readers are skipped
    for node in checked.nodes:
        ctx.node = node
        key = _op_key(node)
        after_failure = any(i in unknown for i in node.input if i)
        convertible = key in ONNX_OPS or (not after_failure and _folds(ctx))
        if after_failure or not convertible:
            if key not in ONNX_OPS:
                missing[key].append(_node_label(node))
            unknown.update(o for o in node.output if o)
            continue
        try:
            with g.layer(_node_label(node)):  # reports and traces name its nodes as the ONNX file does
                outs = _convert_node(ctx)
        except Unsupported as e:
            unsupported.append(f"{node.op_type} node {_node_label(node)!r}: {e}")
            unknown.update(o for o in node.output if o)
            continue
        for name_k, value in zip(node.output, outs):
            if name_k:
                ctx.check_value(name_k, value)
                ctx.values[name_k] = value
    if missing or unsupported:
        raise fail(checked.label, _report(missing, unsupported))
    if ctx.labels:  # each reaches a loss's labels through LABEL_PASSES ops; one that changed them is left here
        name = min(ctx.labels)
        raise fail(f"{checked.label}: input {name!r}", "is int64 and reaches a loss's class labels, but through ops "
                                                       "that change it; expected the labels to be this input, "
                                                       "reshaped at most")
    _add_outputs(g, ctx, checked)
    return g


def _add_outputs(g: Graph, ctx: ImportContext, checked: CheckedModel) -> None:
    """One graph output per ONNX output, checked against the shape and type the file declares."""
    onnx_types = {1: "float32", 11: "float64", 7: "int64"}
    for vi in checked.model.graph.output:
        v = ctx.as_var(vi.name)
        tt = vi.type.tensor_type
        declared = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        where = f"{checked.label}: output {vi.name!r}"
        if tt.HasField("shape") and (len(declared) != len(v.shape)
                                     or any(d is not None and d != s for d, s in zip(declared, v.shape))):
            raise fail(where, f"the file declares shape {declared} but the imported graph computes {v.shape}")
        if tt.elem_type and onnx_types.get(tt.elem_type) not in (v.dtype, None):
            raise fail(where, f"the file declares element type {onnx_types.get(tt.elem_type)} but the imported "
                              f"graph computes {v.dtype}")
        g.output(vi.name, v if isinstance(v, Var) else g.const(np.asarray(v)))
