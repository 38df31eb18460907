"""Constant folding at import: a node whose inputs are all known is computed now, by the onnx
package's reference implementation, instead of becoming graph nodes (NodeProto + arrays -> arrays).

Exporters emit shape arithmetic (Shape, Gather, Concat, Range, ConstantOfShape, Cast, Expand...) that
static shapes make constant; folding it with ONNX's own reference keeps one source of truth for those
ops' semantics and leaves the accelsim graph holding only the computation.

A hostile file can ask for anything from constants (Pad a 2-element constant by 2e9, MatMul two 65,536-element
vectors into 2**32 elements), so before anything is computed every output's shape comes from ONNX's own shape
inference on the node and its inputs' shapes (and small inputs' values), and the folded value, a product's
multiply-adds and a convolution's workspace are checked against ReadLimits.max_folded_elements.
"""
from __future__ import annotations

import math
import string
from typing import Any, Sequence

import numpy as np

from accelsim.frontends.onnx_errors import fail, one_line
from accelsim.limits import ReadLimits

RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                        "Bernoulli"})
"""Never folded: a random draw would make a different constant at every import (and graph hash)."""
PYTHON_LOOP_OPS = frozenset({"AveragePool", "MaxPool", "LpPool", "MaxRoiPool", "ConvTranspose", "GridSample",
                             "Col2Im", "RoiAlign", "DeformConv", "NonMaxSuppression"})
"""Never folded: the onnx reference computes these element by element in Python (65,536 pooled outputs take
seconds, GridSample's tens of seconds), so a small constant could hold an import for hours. Ops the importer
converts become graph nodes on constant inputs instead."""
SMALL_INPUT_ELEMENTS = 4096
"""Inputs up to this size are handed to shape inference with their values (shapes, pads, repeats, sizes are
that small); larger ones by type and shape only."""
MACS_PER_ELEMENT = 64
"""A product may take this many multiply-adds per allowed element (2**32 at the default limit: seconds of
numpy): legitimate folds of weight preprocessing are far below it."""
CONV_OPS = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3}  # op -> index of its weight input
MATMUL_OPS = {"MatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3)}
BOUNDED_BY_INPUT = frozenset({"NonZero", "Unique", "Compress"})
"""Ops whose output size depends on their inputs' values but never exceeds rank x the input's elements."""


def foldable(node: Any) -> bool:
    """Whether the folder may compute `node` from constants: not a random draw, not an op the reference runs
    element by element in Python, and no subgraph (a Loop of 2**62 trips, an If whose branch is a graph)."""
    return (node.op_type not in RANDOM_OPS and node.op_type not in PYTHON_LOOP_OPS
            and not any(a.type in (5, 10) for a in node.attribute))  # AttributeProto.GRAPH, GRAPHS


def fold(node: Any, inputs: Sequence[np.ndarray | None], opset: int, where: str,
         limits: ReadLimits) -> list[np.ndarray]:
    """The outputs of `node` on known `inputs` (None: an absent optional input), once their sizes are known
    to be within limits.max_folded_elements."""
    from onnx.reference import ReferenceEvaluator

    check_fold_size(node, inputs, opset, where, limits)
    feeds = {name: value for name, value in zip(node.input, inputs) if name}
    try:
        evaluator = ReferenceEvaluator(node, opsets={"": opset})
        outs = evaluator.run(None, feeds)
    except Exception as e:  # the reference raises whatever numpy or its op raise on bad operands
        raise fail(where, f"cannot be computed at import from its constant inputs ({one_line(e, 200)})") from None
    return [np.asarray(o) for o in outs]


def check_fold_size(node: Any, inputs: Sequence[np.ndarray | None], opset: int, where: str,
                    limits: ReadLimits) -> None:
    """OnnxImportError when folding `node` would compute a value, a workspace or a number of multiply-adds
    above the limit, judged from shapes (and small inputs' values) alone."""
    limit = limits.max_folded_elements
    shapes = output_shapes(node, inputs, opset, where)
    for name, shape in zip(node.output, shapes):
        if not name:
            continue
        if shape is None:
            shape = _bounded_by_input(node, inputs, where)
        size = math.prod(shape)
        if size > limit:
            raise _over(where, f"would compute a constant {name!r} of shape {list(shape)} ({size:,} elements) at "
                               f"import", f"{limit:,} elements", limits)
    workspace = _conv_workspace(node, inputs, shapes)
    if workspace > limit:
        raise _over(where, f"would need a workspace of {workspace:,} elements (im2col) to fold at import",
                    f"{limit:,} elements", limits)
    macs = _macs(node, inputs, shapes)
    if macs > limit * MACS_PER_ELEMENT:
        raise _over(where, f"would take {macs:,} multiply-adds to fold at import",
                    f"{limit * MACS_PER_ELEMENT:,} multiply-adds ({MACS_PER_ELEMENT} per allowed element)", limits)


def _over(where: str, what: str, limit: str, limits: ReadLimits) -> Exception:
    return fail(where, f"{what}, above the limit of {limit} on what is computed from constants at import; "
                       f"{ReadLimits.how_to_raise('max_folded_elements')}")


def output_shapes(node: Any, inputs: Sequence[np.ndarray | None], opset: int,
                  where: str) -> list[tuple[int, ...] | None]:
    """Each output's shape from ONNX shape inference on `node` alone (None: not known before computing it)."""
    import onnx
    from onnx import helper, numpy_helper

    if node.op_type == "Constant":
        return [_constant_shape(node)]
    initializers, declared, seen = [], [], set()
    for name, value in zip(node.input, inputs):
        if not name or value is None or name in seen:
            continue
        seen.add(name)
        value = np.asarray(value)
        try:
            if value.size <= SMALL_INPUT_ELEMENTS or value.dtype.kind in "OUS":
                initializers.append(numpy_helper.from_array(value, name))
            else:
                elem = helper.np_dtype_to_tensor_dtype(value.dtype)
                declared.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
        except Exception as e:  # a value onnx has no tensor type for
            raise fail(where, f"has an input {name!r} of {value.dtype} that cannot be folded at import "
                              f"({one_line(e, 120)})") from None
    alone = onnx.NodeProto()
    alone.CopyFrom(node)
    alone.domain = ""  # "ai.onnx" is the default domain too
    graph = helper.make_graph([alone], "fold", declared, [], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # InferenceError, or a ValidationError on a malformed node
        raise fail(where, f"cannot be computed at import from its constant inputs (ONNX shape inference: "
                          f"{one_line(e, 200)})") from None
    types = {vi.name: vi.type for vi in inferred.graph.value_info}
    return [_static_shape(types.get(name)) for name in node.output]


def _constant_shape(node: Any) -> tuple[int, ...] | None:
    """A Constant's shape from its attribute, without copying the tensor it may hold (weights, at times)."""
    for a in node.attribute:
        if a.name == "value":
            return tuple(int(d) for d in a.t.dims)
        if a.name == "sparse_value":
            return tuple(int(d) for d in a.sparse_tensor.dims)
        if a.name in ("value_floats", "value_ints", "value_strings"):
            return (len(a.floats) or len(a.ints) or len(a.strings),)
        if a.name in ("value_float", "value_int", "value_string"):
            return ()
    return None


def _static_shape(t: Any) -> tuple[int, ...] | None:
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def _bounded_by_input(node: Any, inputs: Sequence[np.ndarray | None], where: str) -> tuple[int, ...]:
    """A shape as large as the output of an op whose output size depends on its input's values."""
    first = inputs[0] if inputs else None
    if node.op_type in BOUNDED_BY_INPUT and first is not None:
        return (max(np.ndim(first), 1), int(np.size(first)))
    raise fail(where, "has an output whose shape ONNX shape inference cannot tell before computing it, so it "
                      "cannot be bounded and is not folded at import; re-export the model with static shapes "
                      "(onnx.shape_inference, or onnxsim) so it is a constant in the file")


def _shape(value: np.ndarray | None) -> tuple[int, ...]:
    return tuple(np.shape(value)) if value is not None else ()


def _conv_workspace(node: Any, inputs: Sequence[np.ndarray | None], shapes: list[Any]) -> int:
    """The reference convolution's im2col matrix: input channels x kernel elements x output positions."""
    w = CONV_OPS.get(node.op_type)
    if w is None or len(inputs) <= w or not shapes or shapes[0] is None:
        return 0
    weight, out = _shape(inputs[w]), shapes[0]
    if len(weight) < 2 or len(out) < 2:
        return 0
    groups = max(next((a.i for a in node.attribute if a.name == "group"), 1), 1)
    return out[0] * math.prod(weight[1:]) * groups * math.prod(out[2:])


def _macs(node: Any, inputs: Sequence[np.ndarray | None], shapes: list[Any]) -> int:
    """Multiply-adds of a product op (0 for others: their work is their output's size)."""
    out = shapes[0] if shapes else None
    if out is None:
        return 0
    numel = math.prod(out)
    op = node.op_type
    if op in MATMUL_OPS:
        a = _shape(inputs[MATMUL_OPS[op][0]]) if len(inputs) > MATMUL_OPS[op][0] else ()
        return numel * (a[-1] if a else 1)
    if op == "Gemm":
        a = _shape(inputs[0])
        trans_a = next((x.i for x in node.attribute if x.name == "transA"), 0)
        return numel * (a[0] if trans_a else a[-1]) if len(a) == 2 else numel
    if op in CONV_OPS and len(inputs) > CONV_OPS[op]:
        weight = _shape(inputs[CONV_OPS[op]])
        return numel * math.prod(weight[1:])
    if op == "Einsum":
        return _einsum_macs(node, inputs)
    return 0


def _einsum_macs(node: Any, inputs: Sequence[np.ndarray | None]) -> int:
    """The product of every index's size (the loop nest np.einsum runs), '...' counted as its broadcast."""
    equation = next((a.s.decode("utf-8", "replace") for a in node.attribute if a.name == "equation"), "")
    operands = equation.split("->")[0].replace(" ", "").split(",")
    sizes: dict[str, int] = {}
    ellipsis = 1
    for term, value in zip(operands, inputs):
        shape = _shape(value)
        letters = [c for c in term.replace("...", "") if c in string.ascii_letters]
        if "..." in term:
            k = term.index("...")
            before = len([c for c in term[:k] if c in string.ascii_letters])
            n_ell = max(len(shape) - len(letters), 0)
            ellipsis = max(ellipsis, math.prod(shape[before:before + n_ell]))
            shape = shape[:before] + shape[before + n_ell:]
        for c, d in zip(letters, shape):
            sizes[c] = max(sizes.get(c, 1), int(d))
    return math.prod(sizes.values()) * ellipsis
