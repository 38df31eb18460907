"""The ONNX op table: every default-domain ONNX op type the importer converts, one record each.

Ops whose inputs are all known at import (shape arithmetic) need no record: they are folded by the
onnx package's reference implementation (onnx_fold.py).
"""
from __future__ import annotations

from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.frontends.onnx_ops_clamp import CLAMP_OPS
from accelsim.frontends.onnx_ops_conv import CONV_OPS
from accelsim.frontends.onnx_ops_loss import LOSS_OPS
from accelsim.frontends.onnx_ops_math import MATH_OPS
from accelsim.frontends.onnx_ops_random import RANDOM_OPS
from accelsim.frontends.onnx_ops_resize import RESIZE_OPS
from accelsim.frontends.onnx_ops_select import SELECT_OPS
from accelsim.frontends.onnx_ops_sequence import SEQUENCE_OPS
from accelsim.frontends.onnx_ops_shape import SHAPE_OPS

ONNX_OPS: dict[str, OnnxOpDef] = {}
for _op in (*MATH_OPS, *CLAMP_OPS, *SELECT_OPS, *LOSS_OPS, *CONV_OPS, *SHAPE_OPS,
            *SEQUENCE_OPS, *RESIZE_OPS, *RANDOM_OPS):
    assert _op.op_type not in ONNX_OPS, f"ONNX op {_op.op_type} has two converters"
    ONNX_OPS[_op.op_type] = _op
