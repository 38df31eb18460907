"""Multi-tensor optimizer updates (apex's FusedAdam / multi_tensor_apply): one node updates many parameters.

Unfused, training_graph's Adam is ~14 elementwise nodes per parameter, each reading and writing a whole
tensor; fused, one node reads each parameter, its gradient and its two moments once and writes the new
parameter and moments once (read_elems / written_elems say exactly that). A node has one output, so the
fused node's value is every new tensor packed flat, in input order ([w', m', v'] per parameter for Adam,
[w'] for SGD), and `multi_tensor_part` names one of them: a view of the packed buffer that moves no bytes.

Exactness: the references evaluate training_graph's own expression tree in its order, with its constants
in the graph's dtype, so a fused step equals the unfused step to the last bit (the CPU kernels too;
a CUDA kernel may contract a multiply and an add into one fused multiply-add, one rounding instead of two).
"""
from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

__all__ = ["fused_adam", "fused_sgd", "multi_tensor_part", "ADAM_FLOPS_PER_ELEM"]

ADAM_FLOPS_PER_ELEM = 14
"""training_graph's Adam per element: m (2 mul, 1 add), v (3 mul, 1 add), two bias corrections, lr, sqrt,
eps, divide and subtract."""
MAX_TENSORS = 4096
"""Most parameters one fused node updates (its inputs: 4 per parameter for Adam)."""


def fused_adam(*tensors: Any, lr: float, beta1: float, beta2: float, eps: float, step: int) -> Any:
    """Adam on many parameters: tensors = (w, dw, m, v) per parameter; packed [w', m', v'] per parameter."""
    return apply("fused_adam", *tensors, lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
                 step=int(step))


def fused_sgd(*tensors: Any, lr: float) -> Any:
    """SGD on many parameters: tensors = (w, dw) per parameter; packed [w'] per parameter."""
    return apply("fused_sgd", *tensors, lr=float(lr))


def multi_tensor_part(packed: Any, offset: int, shape: Shape) -> Any:
    """The tensor of `shape` at element `offset` of a fused update's packed value (a view)."""
    return apply("multi_tensor_part", packed, offset=int(offset), shape=tuple(int(d) for d in shape))


# ---- shapes ---------------------------------------------------------------------------

def _packed_infer(per: int, writes: int, what: str, shapes: tuple[Shape, ...]) -> Shape:
    if not shapes or len(shapes) % per or len(shapes) > per * MAX_TENSORS:
        raise ShapeError(f"{what} takes {per} tensors per parameter ({what}'s inputs in groups of {per}), for 1 to "
                         f"{MAX_TENSORS} parameters; got {len(shapes)} inputs")
    for j in range(0, len(shapes), per):
        group = shapes[j:j + per]
        if any(s != group[0] for s in group):
            raise ShapeError(f"{what}: parameter {j // per}'s tensors must share one shape, got {list(group)}")
    return (writes * sum(numel(shapes[j]) for j in range(0, len(shapes), per)),)


def _adam_infer(*shapes: Shape, lr: float, beta1: float, beta2: float, eps: float, step: int) -> Shape:
    if isinstance(step, bool) or not isinstance(step, Integral) or step < 1:
        raise ShapeError(f"fused_adam: step must be a positive integer, got {step!r}")
    return _packed_infer(4, 3, "fused_adam", shapes)


def _sgd_infer(*shapes: Shape, lr: float) -> Shape:
    return _packed_infer(2, 1, "fused_sgd", shapes)


def _part_infer(packed: Shape, offset: int, shape: Shape) -> Shape:
    if len(packed) != 1 or offset < 0 or offset + numel(shape) > packed[0]:
        raise ShapeError(f"multi_tensor_part: {tuple(shape)} at element {offset} does not fit a packed value of "
                         f"shape {packed}")
    return tuple(shape)


# ---- references: training_graph's expressions, in its order, with its constants ------

def adam_constants(dtype: Any, lr: float, beta1: float, beta2: float, eps: float, step: int) -> tuple[Any, ...]:
    """training_graph's Adam constants as the graph stores them (in its dtype): b1, 1-b1, b2, 1-b2, the two
    bias corrections 1/(1-b^step), lr, eps."""
    t = np.dtype(dtype).type
    return (t(beta1), t(1.0 - beta1), t(beta2), t(1.0 - beta2), t(1.0 / (1.0 - beta1**step)),
            t(1.0 / (1.0 - beta2**step)), t(lr), t(eps))


def adam_one(w: np.ndarray, dw: np.ndarray, m: np.ndarray, v: np.ndarray,
             consts: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w', m', v') of one parameter: w - (m' c1 lr) / (sqrt(v' c2) + eps), m' = m b1 + dw (1-b1),
    v' = v b2 + (dw dw)(1-b2), each operation rounded as its own node would round it."""
    b1, omb1, b2, omb2, c1, c2, lr, eps = consts
    m_new = m * b1 + dw * omb1
    v_new = v * b2 + (dw * dw) * omb2
    return w - ((m_new * c1) * lr) / (np.sqrt(v_new * c2) + eps), m_new, v_new


def _adam_ref(*xs: np.ndarray, lr: float, beta1: float, beta2: float, eps: float, step: int) -> np.ndarray:
    dtype = xs[0].dtype
    consts = adam_constants(dtype, lr, beta1, beta2, eps, step)
    parts = []
    for j in range(0, len(xs), 4):
        parts += [p.reshape(-1) for p in adam_one(*(np.asarray(x, dtype=dtype) for x in xs[j:j + 4]), consts)]
    return np.concatenate(parts).astype(dtype, copy=False)


def _sgd_ref(*xs: np.ndarray, lr: float) -> np.ndarray:
    dtype = xs[0].dtype
    rate = np.dtype(dtype).type(lr)
    return np.concatenate([(xs[j] - np.asarray(xs[j + 1], dtype=dtype) * rate).reshape(-1)
                           for j in range(0, len(xs), 2)]).astype(dtype, copy=False)


def _part_ref(packed: np.ndarray, offset: int, shape: Shape) -> np.ndarray:
    return np.array(packed[offset:offset + numel(shape)].reshape(shape), copy=True)


# ---- examples -------------------------------------------------------------------------

_HYPER = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}


def _adam_examples(rng: np.random.Generator) -> list[Example]:
    def param(shape):
        return (rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape) * 0.1,
                np.abs(rng.normal(size=shape)) * 0.01)
    return [(param((3, 4)) + param((5,)), {**_HYPER, "step": 1}), (param((2, 2)), {**_HYPER, "step": 7})]


def _sgd_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(5,)), rng.normal(size=(5,))),
             {"lr": 0.01}), ((rng.normal(size=(2,)), rng.normal(size=(2,))), {"lr": 0.5})]


# category "reduction", not "elementwise": the packed output has none of its inputs' shapes, so it may not be
# cut into rows (schedule/split.py) nor fused by the scalar opcode table; vector units run both categories
register(OpDef(
    "fused_adam", "reduction", infer=_adam_infer, ref=_adam_ref,
    flops=lambda out, *ins, **a: ADAM_FLOPS_PER_ELEM * (out[0] // 3),
    read_elems=lambda out, *ins, **a: sum(numel(s) for s in ins),  # w, dw, m, v once each
    written_elems=lambda out, *ins, **a: out[0],                   # w', m', v' once each
    examples=_adam_examples,
    doc="Adam on many parameters at once (a multi-tensor update): packed [w', m', v'] per parameter"))
register(OpDef(
    "fused_sgd", "reduction", infer=_sgd_infer, ref=_sgd_ref,
    flops=lambda out, *ins, **a: 2 * out[0], examples=_sgd_examples,
    doc="SGD on many parameters at once (a multi-tensor update): packed [w'] per parameter"))
register(OpDef(
    "multi_tensor_part", "data_movement", infer=_part_infer, ref=_part_ref,
    read_elems=lambda out, packed, **a: 0, written_elems=lambda out, packed, **a: 0,  # a view: no bytes move
    examples=lambda rng: [((rng.normal(size=(10,)),), {"offset": 4, "shape": (2, 3)}),
                          ((rng.normal(size=(3,)),), {"offset": 0, "shape": (3,)})],
    doc="one tensor of a fused update's packed value: a view, moving no bytes"))
