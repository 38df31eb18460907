"""Fused GEMM epilogues: matmul or conv2d, then an optional bias, then an optional activation, as one op
(`matmul_epilogue`, `conv2d_epilogue`) whose pre-activation is never stored.

Modelled on cuBLASLt's epilogues (BIAS, RELU_BIAS, GELU_BIAS): a fixed form, not a program,

    out = act(base(a, b) + bias)      bias: a vector along the output's columns (matmul) or channels (conv2d)

Nothing is restated here: the base op's registry entry gives the shape, reference, FLOPs, GEMM view,
features, splits and gradient; `add` and each activation's own entry give the rest. A matrix unit so
spends the base op's compute cycles on the fused node, which moves fewer bytes than the ops it replaces
(the intermediate is neither written nor read back).
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.fused import INSTRUCTIONS, OPCODES
from accelsim.ops.reduce import sum as reduce_sum
from accelsim.ops.registry import Example, OpDef, Shape, Split, apply, get_op, numel, register
from accelsim.ops.window import pair

__all__ = ["matmul_epilogue", "conv2d_epilogue"]


# ---- the two small tables: activations and the ops that take an epilogue ------------------

@dataclass(frozen=True)
class Activation:
    """One epilogue activation: the registry op that defines it (None: the identity), a unary op of the
    opcode table (ops/fused.py), so every kernel backend computes it with its scalar function; and
    whether that op's gradient rule must see the pre-activation. relu's may be handed the output instead
    (out > 0 exactly where pre > 0), sigmoid's and tanh's read only the output; gelu's and erf's need the
    pre-activation, which the fused op never stores, so their gradients recompute it (rematerialization)."""

    name: str
    op: str | None
    grad_reads_input: bool = False

    @property
    def opcode(self) -> int:
        """What the kernels run after the bias: the op's opcode, or NO_ACTIVATION for the identity."""
        return NO_ACTIVATION if self.op is None else OPCODES[self.op]


NO_ACTIVATION = -1
"""The opcode of the "none" activation: not one of the opcode table's."""

ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("none", None),
    Activation("relu", "relu"),
    Activation("gelu", "gelu", grad_reads_input=True),
    Activation("sigmoid", "sigmoid"),
    Activation("tanh", "tanh"),
    Activation("erf", "erf", grad_reads_input=True),
)}
ACTIVATION_OF_OP: dict[str, Activation] = {a.op: a for a in ACTIVATIONS.values() if a.op is not None}
_NOT_UNARY = [a.name for a in ACTIVATIONS.values()
              if a.op is not None and (a.op not in INSTRUCTIONS or INSTRUCTIONS[a.op].arity != 1
                                       or INSTRUCTIONS[a.op].params)]
if _NOT_UNARY:
    raise ImportError(f"ops/epilogue.py: activations {_NOT_UNARY} are not unary ops of the opcode table "
                      f"without parameters (ops/fused.py INSTRUCTIONS), which the kernels run")


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of a base op, and the check its value must pass (said as `expected` in the error)."""

    name: str
    check: Callable[[Any], bool]
    expected: str


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, (bool, np.bool_))


def _is_pair(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2 and all(_is_int(d) for d in v)


@dataclass(frozen=True)
class EpilogueBase:
    """A tensor op that takes an epilogue: the fused op's name, the base op's name and attributes, and
    the output axis a bias vector runs along (named `channel` in errors)."""

    op: str
    base: str
    attrs: tuple[AttrSpec, ...]
    channel_axis: Callable[[Shape], int]
    channel: str


BASES: dict[str, EpilogueBase] = {b.op: b for b in (
    EpilogueBase("matmul_epilogue", "matmul",
                 tuple(AttrSpec(k, _is_bool, "True or False") for k in ("transpose_a", "transpose_b")),
                 channel_axis=lambda out: len(out) - 1, channel="column"),
    EpilogueBase("conv2d_epilogue", "conv2d",
                 tuple(AttrSpec(k, _is_pair, "a pair of ints") for k in ("stride", "padding", "dilation"))
                 + (AttrSpec("groups", _is_int, "an int"),),
                 channel_axis=lambda out: 1, channel="output channel"),
)}
FUSED_OF_BASE: dict[str, EpilogueBase] = {b.base: b for b in BASES.values()}
"""The fused op of each base op (what fuse_epilogue looks for)."""


# ---- builders --------------------------------------------------------------------------

def _with_bias(bias: Any) -> tuple[Any, ...]:
    return () if bias is None else (bias,)


def matmul_epilogue(a: Any, b: Any, bias: Any = None, transpose_a: bool = False, transpose_b: bool = False,
                    activation: str = "none") -> Any:
    """act(op(a) @ op(b) + bias), bias (n,) along the output's columns (None: no bias)."""
    return apply("matmul_epilogue", a, b, *_with_bias(bias), transpose_a=bool(transpose_a),
                 transpose_b=bool(transpose_b), activation=activation)


def conv2d_epilogue(x: Any, w: Any, bias: Any = None, stride: int | Sequence[int] = 1,
                    padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                    activation: str = "none") -> Any:
    """act(conv2d(x, w) + bias), bias (O,) along the output channels, as torch's conv2d bias (None: no bias)."""
    return apply("conv2d_epilogue", x, w, *_with_bias(bias), stride=pair(stride, "stride"),
                 padding=pair(padding, "padding"), dilation=pair(dilation, "dilation"), groups=int(groups),
                 activation=activation)


# ---- attributes and the bias -------------------------------------------------------------

def _split_attrs(spec: EpilogueBase, attrs: Mapping[str, Any]) -> tuple[dict[str, Any], Activation]:
    """(the base op's attributes, the activation) of a fused node; ValueError saying what is wrong."""
    wanted = [a.name for a in spec.attrs] + ["activation"]
    missing, unknown = [k for k in wanted if k not in attrs], sorted(set(attrs) - set(wanted))
    if missing or unknown:
        raise ValueError(f"{spec.op} takes the attributes {', '.join(wanted)}; missing {missing or 'none'}, "
                         f"unknown {unknown or 'none'}")
    for a in spec.attrs:
        if not a.check(attrs[a.name]):
            raise ValueError(f"{a.name} must be {a.expected}, got {attrs[a.name]!r}")
    name = attrs["activation"]
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got {name!r}")
    return {a.name: attrs[a.name] for a in spec.attrs}, ACTIVATIONS[name]


def _check_inputs(spec: EpilogueBase, count: int) -> None:
    if count not in (2, 3):
        raise ShapeError(f"{spec.op} takes the {spec.base} operands and an optional bias (2 or 3 inputs), "
                         f"got {count}")


def _check_bias(spec: EpilogueBase, out: Shape, bias: Shape) -> None:
    axis = spec.channel_axis(out)
    if tuple(bias) != (out[axis],):
        raise ShapeError(f"bias {tuple(bias)} must be a vector of the output's {out[axis]} {spec.channel}s, "
                         f"shape ({out[axis]},), added along axis {axis} of the {spec.base} output {out}")


def _along(bias: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """The bias vector shaped to broadcast along `axis` of an ndim-dimensional output."""
    return bias.reshape((1,) * axis + (-1,) + (1,) * (ndim - axis - 1))


# ---- the registry entry, built from the base op's --------------------------------------

def _entry(spec: EpilogueBase) -> OpDef:
    """The OpDef of spec.op: every function is the base op's plus the epilogue's share."""

    def infer(*ins: Shape, **attrs: Any) -> Shape:
        base_attrs, _ = _split_attrs(spec, attrs)
        _check_inputs(spec, len(ins))
        out = tuple(get_op(spec.base).infer(*ins[:2], **base_attrs))
        if len(ins) == 3:
            _check_bias(spec, out, ins[2])
        return out

    def ref(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
        base_attrs, act = _split_attrs(spec, attrs)
        y = get_op(spec.base).ref(*arrays[:2], **base_attrs)
        if len(arrays) == 3:
            y = np.add(y, _along(np.asarray(arrays[2]), y.ndim, spec.channel_axis(y.shape)))
        return get_op(act.op).ref(y) if act.op is not None else y

    def flops(out: Shape, *ins: Shape, **attrs: Any) -> int:
        base_attrs, act = _split_attrs(spec, attrs)
        total = get_op(spec.base).flops(out, *ins[:2], **base_attrs)
        if len(ins) == 3:
            total += get_op("add").flops(out, out, ins[2])
        if act.op is not None:
            total += get_op(act.op).flops(out, out)
        return total

    def read_elems(out: Shape, *ins: Shape, **attrs: Any) -> int:
        base_attrs, _ = _split_attrs(spec, attrs)
        return get_op(spec.base).read_elems(out, *ins[:2], **base_attrs) + sum(numel(s) for s in ins[2:])

    def written_elems(out: Shape, *ins: Shape, **attrs: Any) -> int:
        base_attrs, _ = _split_attrs(spec, attrs)
        return get_op(spec.base).written_elems(out, *ins[:2], **base_attrs)

    def gemm(out: Shape, *ins: Shape, **attrs: Any) -> tuple[int, int, int, int]:
        base_attrs, _ = _split_attrs(spec, attrs)
        return get_op(spec.base).gemm(out, *ins[:2], **base_attrs)

    def features(out: Shape, *ins: Shape, **attrs: Any) -> dict[str, Any]:
        base_attrs, _ = _split_attrs(spec, attrs)
        return get_op(spec.base).features(out, *ins[:2], **base_attrs)

    def splits(out: Shape, *ins: Shape, **attrs: Any) -> tuple[Split, ...]:
        """The base op's cuts; the bias is sliced with a cut along its axis and read whole by the others."""
        base_attrs, _ = _split_attrs(spec, attrs)
        cuts = get_op(spec.base).splits(out, *ins[:2], **base_attrs)
        if len(ins) == 2:
            return cuts
        axis = spec.channel_axis(out)
        return tuple(Split(s.name, s.out_axis, s.in_axes + (0 if s.out_axis == axis else None,), s.shape_attr)
                     for s in cuts)

    def grad(g: Any, out: Any, *inputs: Any, **attrs: Any) -> tuple[Any, ...]:
        """Exact: the activation's own rule, then the base op's rule for a and b, and the bias's adjoint
        summed over every axis but its own. The base output is never stored; matmul's and conv2d's rules
        read only their inputs, so they are handed None in its place (a rule that read it would fail
        loudly, not silently)."""
        base_attrs, act = _split_attrs(spec, attrs)
        dz = g
        if act.op is not None:
            pre = out
            if act.grad_reads_input:  # rematerialize the pre-activation: the GEMM (and bias) once more
                pre = (apply(spec.op, *inputs, **base_attrs, activation="none") if len(inputs) == 3
                       else apply(spec.base, *inputs, **base_attrs))
            (dz,) = get_op(act.op).grad(g, out, pre)
        d_base = tuple(get_op(spec.base).grad(dz, None, *inputs[:2], **base_attrs))
        if len(inputs) == 2:
            return d_base
        axis = spec.channel_axis(out.shape)
        return d_base + (reduce_sum(dz, tuple(k for k in range(len(out.shape)) if k != axis)),)

    return OpDef(spec.op, "tensor", infer=infer, ref=ref, flops=flops, grad=grad, examples=_EXAMPLES[spec.op],
                 read_elems=read_elems, written_elems=written_elems, gemm=gemm, splits=splits,
                 features=features if get_op(spec.base).features is not None else None,
                 doc=f"act({spec.base} + bias) in one op (cuBLASLt-style epilogue); bias a vector along the "
                     f"output {spec.channel}s, activation one of {', '.join(ACTIVATIONS)}")


# ---- examples: every activation, with and without a bias, on small shapes ------------------

def _matmul_examples(rng: np.random.Generator) -> list[Example]:
    # (a shape, b shape, transpose_a, transpose_b): plain, both transposes, batched, batch-broadcast b
    geometry = [((3, 4), (4, 5), False, False), ((4, 3), (4, 5), True, False), ((3, 4), (5, 4), False, True),
                ((2, 3, 4), (2, 4, 5), False, False), ((2, 4, 3), (5, 4), True, True)]
    cases = []
    for k, act in enumerate(ACTIVATIONS):  # every activation, the geometries in turn
        sa, sb, ta, tb = geometry[k % len(geometry)]
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        attrs = {"transpose_a": ta, "transpose_b": tb, "activation": act}
        cases.append(((a, b, rng.normal(size=(5,))), attrs))
        cases.append(((a, b), attrs))
    return cases


_CONV_GEOMETRY: list[tuple[Shape, Shape, dict[str, Any]]] = [
    # (x shape, w shape, attrs): tiny, since the CUDA kernel test runs them in numba's simulator
    ((2, 2, 4, 4), (3, 2, 3, 3), {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}),
    ((1, 4, 5, 4), (4, 2, 2, 3), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 2}),
    ((1, 2, 6, 5), (3, 2, 2, 2), {"stride": (1, 2), "padding": (0, 1), "dilation": (2, 1), "groups": 1}),
    ((2, 3, 3, 3), (2, 3, 1, 1), {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}),
    ((1, 2, 4, 4), (2, 1, 3, 3), {"stride": (2, 2), "padding": (1, 1), "dilation": (1, 1), "groups": 2}),
]


def _conv_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for k, act in enumerate(ACTIVATIONS):  # every activation, the geometries in turn
        xs, ws, geo = _CONV_GEOMETRY[k % len(_CONV_GEOMETRY)]
        x, w = rng.normal(size=xs), rng.normal(size=ws)
        attrs = {**geo, "activation": act}
        cases.append(((x, w, rng.normal(size=(ws[0],))), attrs))
        cases.append(((x, w), attrs))
    return cases


_EXAMPLES: dict[str, Callable[[np.random.Generator], list[Example]]] = {
    "matmul_epilogue": _matmul_examples, "conv2d_epilogue": _conv_examples}

# accelsim.ops imports linalg and conv, registering the base ops, before it imports this module
for _spec in BASES.values():
    register(_entry(_spec))
