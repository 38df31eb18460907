"""Bring a checked model of an old opset up to one the converters implement (ModelProto at opset < MIN_OPSET ->
ModelProto at CONVERTED_OPSET), with onnx's own version converter.

Many published models (the ONNX model zoo, caffe2 exports) are opset 7-9. The converter rewrites each node
through ONNX's adapters; when one has none, the error names the opset, the node and its op type, found by
converting each distinct op type alone (the converter's own message rarely names the node).
"""
from __future__ import annotations

from typing import Any

from accelsim.frontends.onnx_errors import fail, one_line

CONVERTED_OPSET = 17
"""The opset old models are converted to: the newest the exporters of accelsim's tests emit by default."""


def convert_opset(model: Any, label: str, opset: int) -> Any:
    """`model` (default-domain opset `opset`) converted to CONVERTED_OPSET."""
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, CONVERTED_OPSET)
    except Exception as e:  # the converter raises RuntimeError (a failed C++ assertion) or ValueError
        culprit = _failing_node(model, opset)
        what = f"node {culprit.name or culprit.output[0]!r} ({culprit.op_type})" if culprit is not None else "a node"
        raise fail(label, f"uses opset {opset}, which the importer converts to opset {CONVERTED_OPSET} with "
                          f"onnx.version_converter, but {what} cannot be converted ({one_line(e, 200)}); "
                          f"re-export the model at opset {CONVERTED_OPSET}") from None


def _failing_node(model: Any, opset: int) -> Any:
    """The first node whose op type does not convert on its own (None: each converts alone)."""
    import onnx
    from onnx import helper, version_converter

    tried: set[tuple[str, str]] = set()
    for node in model.graph.node:
        key = (node.domain, node.op_type)
        if key in tried:
            continue
        tried.add(key)
        alone = onnx.NodeProto()
        alone.CopyFrom(node)
        names = [n for n in node.input if n]
        inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in dict.fromkeys(names)]
        outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in node.output if n]
        graph = helper.make_graph([alone], "one_node", inputs, outputs)
        one = helper.make_model(graph, opset_imports=list(model.opset_import))
        try:
            version_converter.convert_version(one, CONVERTED_OPSET)
        except Exception:  # this op type is what the converter cannot handle
            return node
    return None
