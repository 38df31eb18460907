"""Elementwise ops (numpy broadcasting for binary ones) and their backward-only helpers."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

# GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel
# 2016, as GPT-2 and PyTorch's approximate="tanh"). Every kernel imports these two.
GELU_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def broadcast_shape(*shapes: Shape) -> Shape:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def _unbroadcast(g: Any, shape: Shape) -> Any:
    """The adjoint of numpy broadcasting: sum g back down to `shape`."""
    from accelsim.ops.reduce import sum_to
    return g if g.shape == shape else sum_to(g, shape)


def _same_shape(*shapes: Shape, **attrs: Any) -> Shape:
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(f"inputs must have the same shape, got {' and '.join(map(str, shapes))}")
    return shapes[0]


def _per_elem(k: int) -> Callable[..., int]:
    return lambda out, *ins, **attrs: k * numel(out)


def _random_shape(rng: np.random.Generator, max_rank: int = 3) -> Shape:
    return tuple(int(d) for d in rng.integers(1, 5, size=int(rng.integers(0, max_rank + 1))))


def _unary_examples(low: float = -2.0, high: float = 2.0, away_from_zero: bool = False):
    def examples(rng: np.random.Generator) -> list[Example]:
        cases = []
        for _ in range(3):
            x = rng.uniform(low, high, size=_random_shape(rng))
            if away_from_zero:  # keep kinks (relu at 0) out of finite differences
                x = np.where(np.abs(x) < 0.1, x + 0.2, x)
            cases.append(((x,), {}))
        return cases
    return examples


def _binary_examples(positive_b: bool = False):
    def examples(rng: np.random.Generator) -> list[Example]:
        shape = (3, 4)
        pairs = [(shape, shape), ((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3))]
        cases = []
        for sa, sb in pairs:
            a = rng.uniform(-2, 2, size=sa)
            b = rng.uniform(0.5, 2, size=sb) if positive_b else rng.uniform(-2, 2, size=sb)
            cases.append(((a, b), {}))
        return cases
    return examples


def _binary(name: str, ref: Callable, grad: Callable, positive_b: bool = False) -> None:
    register(OpDef(name, "elementwise", infer=lambda a, b: broadcast_shape(a, b), ref=ref,
                   flops=_per_elem(1), grad=grad, examples=_binary_examples(positive_b)))


def _unary(name: str, ref: Callable, grad: Callable | None, flops_per_elem: int = 1,
           examples=None, **kw: Any) -> None:
    register(OpDef(name, "elementwise", infer=_same_shape, ref=ref, flops=_per_elem(flops_per_elem),
                   grad=grad, examples=examples or _unary_examples(), **kw))


# ---- builders: the API models are written in ------------------------------------------

def add(a: Any, b: Any) -> Any:
    return apply("add", a, b)


def sub(a: Any, b: Any) -> Any:
    return apply("sub", a, b)


def mul(a: Any, b: Any) -> Any:
    return apply("mul", a, b)


def div(a: Any, b: Any) -> Any:
    return apply("div", a, b)


def neg(x: Any) -> Any:
    return apply("neg", x)


def exp(x: Any) -> Any:
    return apply("exp", x)


def log(x: Any) -> Any:
    return apply("log", x)


def sin(x: Any) -> Any:
    return apply("sin", x)


def cos(x: Any) -> Any:
    return apply("cos", x)


def erf(x: Any) -> Any:
    """The error function: exact GELU is x/2 (1 + erf(x / sqrt 2)) (PyTorch's default nn.GELU, BERT, ViT)."""
    return apply("erf", x)


def square(x: Any) -> Any:
    return apply("square", x)


def pow(x: Any, exponent: float) -> Any:  # noqa: A001 - mirrors numpy's name
    if exponent == 2:
        return square(x)
    return apply("pow", x, exponent=float(exponent))


def sqrt(x: Any) -> Any:
    return apply("sqrt", x)


def relu(x: Any) -> Any:
    return apply("relu", x)


def sigmoid(x: Any) -> Any:
    return apply("sigmoid", x)


def tanh(x: Any) -> Any:
    return apply("tanh", x)


def gelu(x: Any) -> Any:
    """GELU, tanh approximation (GPT-2's; PyTorch's approximate='tanh')."""
    return apply("gelu", x)


ERF_SLOPE = 2.0 / math.sqrt(math.pi)
"""d erf(x)/dx = ERF_SLOPE * exp(-x^2)."""
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _erf_ref(x: np.ndarray) -> np.ndarray:
    """erf elementwise in float64 (libm's, as numba and CUDA call), cast back to the input's dtype."""
    x = np.asarray(x)
    return _ERF(x).astype(x.dtype, copy=False)


# ---- registry entries -------------------------------------------------------------------

_binary("add", np.add, lambda g, out, a, b: (_unbroadcast(g, a.shape), _unbroadcast(g, b.shape)))
_binary("sub", np.subtract, lambda g, out, a, b: (_unbroadcast(g, a.shape), _unbroadcast(-g, b.shape)))
_binary("mul", np.multiply, lambda g, out, a, b: (_unbroadcast(g * b, a.shape), _unbroadcast(g * a, b.shape)))
_binary("div", np.divide,
        lambda g, out, a, b: (_unbroadcast(g / b, a.shape), _unbroadcast(-(g * out) / b, b.shape)),
        positive_b=True)

_unary("neg", np.negative, lambda g, out, x: (-g,))
_unary("exp", np.exp, lambda g, out, x: (g * out,))
_unary("log", np.log, lambda g, out, x: (g / x,), examples=_unary_examples(0.2, 3.0))
_unary("sin", np.sin, lambda g, out, x: (g * cos(x),))
_unary("cos", np.cos, lambda g, out, x: (-(g * sin(x)),))
_unary("erf", lambda x: _erf_ref(x), lambda g, out, x: (g * (exp(-square(x)) * ERF_SLOPE),), flops_per_elem=20)
_unary("square", np.square, lambda g, out, x: (g * (x * 2.0),))
_unary("sqrt", np.sqrt, lambda g, out, x: (g / (out * 2.0),), examples=_unary_examples(0.2, 3.0))
register(OpDef("pow", "elementwise", infer=_same_shape, flops=_per_elem(1),
               ref=lambda x, exponent: np.power(x, exponent),
               grad=lambda g, out, x, exponent: (g * (pow(x, exponent - 1.0) * exponent),),
               examples=lambda rng: [((rng.uniform(0.2, 2.0, size=(3, 4)),), {"exponent": p})
                                     for p in (3.0, 0.5, -1.5)]))

_unary("relu", lambda x: np.maximum(x, 0), lambda g, out, x: (apply("relu_grad", g, x),),
       examples=_unary_examples(away_from_zero=True))
_unary("relu_grad", lambda g, x: np.where(x > 0, g, np.zeros_like(g)), None, backward_only=True,
       examples=lambda rng: [((rng.normal(size=(3, 4)), rng.normal(size=(3, 4))), {})],
       doc="relu's mask: g where x > 0, else 0")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)  # overflow-free form of 1 / (1 + exp(-x))


_unary("sigmoid", _sigmoid, lambda g, out, x: (apply("sigmoid_grad", g, out),), flops_per_elem=4)
_unary("sigmoid_grad", lambda g, y: g * y * (1.0 - y), None, flops_per_elem=3, backward_only=True,
       examples=lambda rng: [((rng.normal(size=(3, 4)), rng.uniform(0, 1, size=(3, 4))), {})],
       doc="g * y * (1 - y) with y = sigmoid(x)")
_unary("tanh", np.tanh, lambda g, out, x: (apply("tanh_grad", g, out),))
_unary("tanh_grad", lambda g, y: g * (1.0 - y * y), None, flops_per_elem=3, backward_only=True,
       examples=lambda rng: [((rng.normal(size=(3, 4)), rng.uniform(-1, 1, size=(3, 4))), {})],
       doc="g * (1 - y^2) with y = tanh(x)")


def _gelu_ref(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x**3)))


def _gelu_grad_ref(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    t = np.tanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x**3))
    dt = (1.0 - t * t) * GELU_SQRT_2_OVER_PI * (1.0 + 3 * GELU_CUBIC * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * dt)


_unary("gelu", _gelu_ref, lambda g, out, x: (apply("gelu_grad", g, x),), flops_per_elem=8)
_unary("gelu_grad", _gelu_grad_ref, None, flops_per_elem=14, backward_only=True,
       examples=lambda rng: [((rng.normal(size=(3, 4)), rng.normal(size=(3, 4))), {})],
       doc="d gelu(x)/dx * g, tanh approximation")
