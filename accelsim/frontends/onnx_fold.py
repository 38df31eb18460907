"""Constant folding at import: a node whose inputs are all known is computed now, by the onnx
package's reference implementation, instead of becoming graph nodes (NodeProto + arrays -> arrays).

Exporters emit shape arithmetic (Shape, Gather, Concat, Range, ConstantOfShape, Cast, Expand...) that
static shapes make constant; folding it with ONNX's own reference keeps one source of truth for those
ops' semantics and leaves the accelsim graph holding only the computation.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from accelsim.frontends.onnx_errors import fail, one_line


MAX_FOLDED_ELEMENTS = 2**26
"""The largest constant folded at import (256 MiB as float32): shape arithmetic is tiny, so a larger one
is a hostile or broken file (a ConstantOfShape of a huge shape), refused before it is allocated."""


def _output_elements(op_type: str, inputs: Sequence[np.ndarray | None]) -> int:
    """An upper estimate of the output size of the ops whose output is not bounded by their inputs."""
    def prod(values: Any) -> int:
        return int(np.prod([max(int(v), 1) for v in np.asarray(values).reshape(-1)], dtype=object))

    if op_type == "ConstantOfShape" and inputs and inputs[0] is not None:
        return prod(inputs[0])
    if op_type == "Expand" and len(inputs) > 1 and inputs[1] is not None:
        return max(prod(inputs[1]), 1) * max(int(np.asarray(inputs[0]).size), 1)
    if op_type == "Tile" and len(inputs) > 1 and inputs[1] is not None:
        return prod(inputs[1]) * int(np.asarray(inputs[0]).size)
    if op_type == "Range" and len(inputs) == 3 and all(x is not None for x in inputs):
        start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in inputs)
        return 0 if delta == 0 else max(int(np.ceil((limit - start) / delta)), 0)
    return 0


def fold(node: Any, inputs: Sequence[np.ndarray | None], opset: int, where: str) -> list[np.ndarray]:
    """The outputs of `node` on known `inputs` (None: an absent optional input)."""
    from onnx.reference import ReferenceEvaluator

    size = _output_elements(node.op_type, inputs)
    if size > MAX_FOLDED_ELEMENTS:
        raise fail(where, f"would compute a constant of {size} elements at import; constants above "
                          f"{MAX_FOLDED_ELEMENTS} elements are refused")
    feeds = {name: value for name, value in zip(node.input, inputs) if name}
    try:
        evaluator = ReferenceEvaluator(node, opsets={"": opset})
        outs = evaluator.run(None, feeds)
    except Exception as e:  # the reference raises whatever numpy or its op raise on bad operands
        raise fail(where, f"cannot be computed at import from its constant inputs ({one_line(e, 200)})") from None
    return [np.asarray(o) for o in outs]
