"""ResNet-18 as ZigZag and Stream read it (zigzag-dse's resnet18.onnx, saved as tests/data/zigzag_resnet18.onnx;
Stream's frontend reads the same file) -> an inference Graph, for experiments/zigzag_compare.py and
experiments/stream_compare.py. experiments/ is no package: they load this file by its path."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from accelsim.graph.ir import Graph

ONNX_FILE = Path(__file__).resolve().parent.parent / "tests" / "data" / "zigzag_resnet18.onnx"
"""zigzag-dse 3.x's inputs/workload/resnet18.onnx: batch 1, 3x224x224; shapes only, its weights external."""


def resnet18_graph(path: Path = ONNX_FILE) -> Graph:
    """The file as an inference Graph. It names its weights in an external file that zigzag-dse does not ship
    (ZigZag and Stream need only shapes); they are zeros here, which changes no cost."""
    import onnx
    from onnx import numpy_helper

    from accelsim.frontends.onnx_import import from_onnx

    model = onnx.load(str(path), load_external_data=False)
    for i, init in enumerate(model.graph.initializer):
        if init.data_location == onnx.TensorProto.EXTERNAL:
            zeros = numpy_helper.from_array(np.zeros(tuple(init.dims), np.float32), init.name)
            model.graph.initializer[i].CopyFrom(zeros)
    return from_onnx(model, name="resnet18", loss="none")
