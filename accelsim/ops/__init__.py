"""The op registry (`OPS`) and the builder functions models are written in.

Import as `from accelsim import ops as F`: `y = F.log(x1) + x1 * x2 - F.sin(x2)`.
"""
from accelsim.ops import leaf  # noqa: F401  (registers input/param/const)
from accelsim.ops.elementwise import (add, cos, div, erf, exp, gelu, log, mul, neg, pow, relu, sigmoid, sin,
                                      sqrt, square, sub, tanh)
from accelsim.ops.linalg import matmul
from accelsim.ops.reduce import broadcast_to, max, mean, sum, sum_to
from accelsim.ops.registry import CATEGORIES, OPS, OpDef, apply, get_op, register
from accelsim.ops.shape import concat, reshape, slice, transpose
from accelsim.ops.conv import *  # noqa: F401,F403  (each module's __all__ lists its builders)
from accelsim.ops.pool import *  # noqa: F401,F403
from accelsim.ops.pixel import *  # noqa: F401,F403
from accelsim.ops.norm import *  # noqa: F401,F403
from accelsim.ops.nn import *  # noqa: F401,F403
from accelsim.ops.select import *  # noqa: F401,F403
from accelsim.ops.conv_transpose import *  # noqa: F401,F403
from accelsim.ops.fused import fused_elementwise  # noqa: F401  (registers the fused op)
from accelsim.ops import conv as _conv, nn as _nn, norm as _norm, pixel as _pixel, pool as _pool, select as _select
from accelsim.ops import conv_transpose as _conv_transpose
from accelsim.ops.epilogue import conv2d_epilogue, matmul_epilogue  # noqa: F401  (registers the fused ops)
from accelsim.ops.parallel import tp_allreduce  # noqa: F401  (registers the tensor-parallel all-reduce)
from accelsim.ops.fused_optimizer import fused_adam, fused_sgd  # noqa: F401  (multi-tensor optimizer updates)
from accelsim.ops.vocab import tp_allreduce_xent, vocab_embedding, vocab_parallel_xent  # noqa: F401  (vocab split)

__all__ = [
    "CATEGORIES", "OPS", "OpDef", "apply", "get_op", "register",
    "add", "sub", "mul", "div", "neg", "exp", "log", "sin", "cos", "erf", "square", "pow", "sqrt",
    "relu", "sigmoid", "tanh", "gelu", "matmul", "sum", "mean", "max", "broadcast_to", "sum_to",
    "reshape", "transpose", "concat", "slice",
    *_conv.__all__, *_pool.__all__, *_pixel.__all__, *_norm.__all__, *_nn.__all__, *_select.__all__,
    *_conv_transpose.__all__,
]
