"""The fused elementwise op: a small program of registered elementwise ops run as one node.

A program is plain data (a tuple of instruction tuples), so a node's attrs stay hashable, print in
graph listings and serialise as JSON lists. Slots 0..k-1 hold the node's k inputs; instruction i
appends slot k+i; the last slot is the output. An instruction is `(op, slot, ...)` with as many
slots as the op has operands, then its scalar parameters (pow's exponent):

    D + (A + B) * C on inputs (D, A, B, C):  (("add", 1, 2), ("mul", 4, 3), ("add", 0, 5))

Each instruction means exactly what its op's registry entry says (infer, ref, flops, grad), so a
fused node computes the chain it replaces, counts the same FLOPs, and reads only its inputs.
"""
from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass
from enum import IntEnum
from numbers import Integral, Real
from typing import Any

import numpy as np

from accelsim.errors import GraphError, ShapeError
from accelsim.ops.registry import OPS, Example, OpDef, Shape, apply, register

__all__ = ["fused_elementwise"]

MAX_SLOTS = 64
"""Most slots (inputs + instructions) of one program: the CUDA kernel's per-thread scratch."""

Program = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Instruction:
    """An elementwise op a program may use: its tensor operands and its scalar parameters (the
    node attributes that follow the operands in an instruction, in this order)."""

    op: str
    arity: int
    params: tuple[str, ...] = ()
    symbol: str = ""  # infix operator for render_program; "" renders as a call


INSTRUCTIONS: dict[str, Instruction] = {i.op: i for i in (
    Instruction("add", 2, symbol="+"), Instruction("sub", 2, symbol="-"), Instruction("mul", 2, symbol="*"),
    Instruction("div", 2, symbol="/"), Instruction("neg", 1, symbol="-"), Instruction("exp", 1),
    Instruction("log", 1), Instruction("sin", 1), Instruction("cos", 1), Instruction("erf", 1),
    Instruction("square", 1), Instruction("sqrt", 1), Instruction("pow", 1, ("exponent",), symbol="**"),
    Instruction("relu", 1), Instruction("sigmoid", 1), Instruction("tanh", 1), Instruction("gelu", 1),
    Instruction("relu_grad", 2), Instruction("sigmoid_grad", 2), Instruction("tanh_grad", 2),
    Instruction("gelu_grad", 2),
)}
"""The opcode table: every elementwise op with a scalar formula. Each kernel backend has one scalar
function per entry (kernels/cpu/scalar.py, kernels/cuda/scalar.py), and fuse_elementwise fuses exactly
these ops; an op's opcode is its position here."""
OPCODES: dict[str, int] = {name: k for k, name in enumerate(INSTRUCTIONS)}
Opcode = IntEnum("Opcode", {name.upper(): k for name, k in OPCODES.items()})
"""The opcodes by name (Opcode.ADD), for kernels to branch on: numba folds IntEnum members to constants."""


# ---- validation --------------------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxtuple = _REPR.maxlist = 8
_REPR.maxstring = _REPR.maxother = 40


def _show(x: Any) -> str:
    """A short repr, however large or deeply nested `x` is (a hostile program may be huge)."""
    return _REPR.repr(x)


def _instruction(k: int, ins: Any, n_slots: int) -> tuple[Instruction, tuple[int, ...], tuple[float, ...]]:
    """Instruction k checked against the n_slots slots before it: (its entry, operand slots, params)."""
    if not isinstance(ins, tuple) or not ins:
        raise ShapeError(f"program instruction {k} must be a non-empty tuple (op, slot, ...), got {_show(ins)}")
    op = ins[0]
    if not isinstance(op, str) or op not in INSTRUCTIONS:
        raise ShapeError(f"program instruction {k} {_show(ins)}: unknown op {_show(op)}; a program may use "
                         f"{', '.join(INSTRUCTIONS)}")
    spec = INSTRUCTIONS[op]
    if len(ins) != 1 + spec.arity + len(spec.params):
        want = f"{spec.arity} operand slot(s)" + (f" then {', '.join(spec.params)}" if spec.params else "")
        raise ShapeError(f"program instruction {k} {_show(ins)}: {op} takes {want}, got {len(ins) - 1} item(s)")
    slots = ins[1:1 + spec.arity]
    for s in slots:
        if not isinstance(s, int) or isinstance(s, bool):
            raise ShapeError(f"program instruction {k} {_show(ins)}: slot {_show(s)} is not an int")
        if not 0 <= s < n_slots:
            raise ShapeError(f"program instruction {k} {_show(ins)}: slot {s} is not an earlier slot (it may read "
                             f"slots 0..{n_slots - 1}: the inputs, then one per earlier instruction)")
    params = ins[1 + spec.arity:]
    for name, p in zip(spec.params, params):
        if not isinstance(p, Real) or isinstance(p, bool) or not math.isfinite(float(p)):
            raise ShapeError(f"program instruction {k} {_show(ins)}: {name} must be a finite number, got {_show(p)}")
    return spec, tuple(slots), tuple(float(p) for p in params)


def check_program(program: Any, n_inputs: int) -> None:
    """Raise ShapeError naming the first problem of `program` on `n_inputs` inputs: its types, ops,
    arities, slots (earlier only), parameters, size, and that every slot but the last is read."""
    if not isinstance(program, tuple):
        raise ShapeError(f"program must be a tuple of instruction tuples, got {type(program).__name__} "
                         f"{_show(program)}")
    if not program:
        raise ShapeError("program is empty: it needs at least one instruction")
    if n_inputs < 1:
        raise ShapeError("a fused_elementwise node needs at least one input")
    if n_inputs + len(program) > MAX_SLOTS:
        raise ShapeError(f"program of {len(program)} instruction(s) on {n_inputs} input(s) uses "
                         f"{n_inputs + len(program)} slots; at most {MAX_SLOTS} (a kernel thread's scratch)")
    read = [False] * (n_inputs + len(program))
    for k, ins in enumerate(program):
        _, slots, _ = _instruction(k, ins, n_inputs + k)
        for s in slots:
            read[s] = True
    unread = [s for s in range(len(read) - 1) if not read[s]]
    if unread:
        s = unread[0]
        what = (f"input {s}" if s < n_inputs
                else f"the result of instruction {s - n_inputs} {_show(program[s - n_inputs])}")
        raise ShapeError(f"program never reads slot {s} ({what}); every input and every instruction but the "
                         f"last must feed the output")


def decode(program: Program, n_inputs: int) -> list[tuple[Instruction, tuple[int, ...], dict[str, float]]]:
    """The instructions of a checked program: (entry, operand slots, params as node attrs)."""
    out = []
    for k, ins in enumerate(program):
        spec, slots, params = _instruction(k, ins, n_inputs + k)
        out.append((spec, slots, dict(zip(spec.params, params))))
    return out


def encode(program: Program, n_inputs: int) -> tuple[np.ndarray, np.ndarray]:
    """What the kernels interpret, for a program it checks first: code int64 (n, 3) of opcode and two
    operand slots (a unary op's second = its first), and params float64 (n,): pow's exponent, else 0."""
    check_program(program, n_inputs)
    steps = decode(program, n_inputs)
    code = np.zeros((len(steps), 3), np.int64)
    params = np.zeros(len(steps), np.float64)
    for i, (spec, args, attrs) in enumerate(steps):
        code[i] = (OPCODES[spec.op], args[0], args[-1])
        params[i] = next(iter(attrs.values()), 0.0)
    return code, params


def slot_shapes(program: Program, *ins: Shape) -> list[Shape]:
    """The shape of every slot, each instruction's from its op's own shape inference."""
    check_program(program, len(ins))
    shapes = list(ins)
    for k, (spec, slots, params) in enumerate(decode(program, len(ins))):
        try:
            shapes.append(tuple(OPS[spec.op].infer(*(shapes[s] for s in slots), **params)))
        except ShapeError as e:
            raise ShapeError(f"program instruction {k} {_show(program[k])}: {e}") from None
    return shapes


def as_program(program: Any) -> Program:
    """`program` in canonical form (lists -> tuples, numpy ints -> int, parameters -> float), so equal
    programs print and hash alike; anything else is left for check_program to report."""
    if not isinstance(program, (tuple, list)):
        return program
    out = []
    for ins in program:
        if not isinstance(ins, (tuple, list)) or not ins or not isinstance(ins[0], str) or ins[0] not in INSTRUCTIONS:
            out.append(tuple(ins) if isinstance(ins, list) else ins)
            continue
        spec = INSTRUCTIONS[ins[0]]
        slots = [int(s) if isinstance(s, Integral) and not isinstance(s, bool) else s
                 for s in ins[1:1 + spec.arity]]
        params = [float(p) if isinstance(p, Real) and not isinstance(p, bool) else p for p in ins[1 + spec.arity:]]
        out.append((ins[0], *slots, *params))
    return tuple(out)


# ---- registry entry -------------------------------------------------------------------------

def fused_elementwise(*inputs: Any, program: Any) -> Any:
    """One node computing `program` on `inputs` (see the module docstring for the format)."""
    return apply("fused_elementwise", *inputs, program=as_program(program))


def _infer(*ins: Shape, program: Program) -> Shape:
    return slot_shapes(program, *ins)[-1]


def _ref(*arrays: np.ndarray, program: Program) -> np.ndarray:
    slots = list(arrays)
    for spec, args, params in decode(program, len(arrays)):
        slots.append(OPS[spec.op].ref(*(slots[s] for s in args), **params))
    return np.asarray(slots[-1])


def _flops(out: Shape, *ins: Shape, program: Program) -> int:
    """Each instruction's registry FLOPs at the output's size: the kernel runs every instruction for
    every output element (the pass fuses only nodes of the output's shape, so this is the chain's sum)."""
    return sum(int(OPS[spec.op].flops(out, *(out,) * spec.arity, **params))
               for spec, _, params in decode(program, len(ins)))


def _grad(g: Any, out: Any, *inputs: Any, program: Program) -> tuple[Any, ...]:
    """Exact: the program re-emitted as primitive nodes, then each primitive's own gradient rule in
    reverse, so the adjoints are those of the unfused chain. The intermediates are recomputed here
    (a fused kernel keeps none); the output is the node's own value. Intermediates no rule reads are
    left unused (training_graph drops them)."""
    k = len(inputs)
    steps = decode(program, k)
    slots = list(inputs)
    for spec, args, params in steps[:-1]:
        slots.append(apply(spec.op, *(slots[s] for s in args), **params))
    slots.append(out)
    adjoint: dict[int, Any] = {len(slots) - 1: g}
    for i in range(len(steps) - 1, -1, -1):
        if k + i not in adjoint:
            continue
        spec, args, params = steps[i]
        rule = OPS[spec.op].grad
        if rule is None:
            raise GraphError(f"fused_elementwise node %{out.id} ({out.node.name!r}): a gradient flows through "
                             f"program instruction {i} {_show(program[i])}, but {spec.op} has no gradient rule")
        for s, gs in zip(args, rule(adjoint[k + i], slots[k + i], *(slots[s] for s in args), **params)):
            if gs is not None:
                adjoint[s] = adjoint[s] + gs if s in adjoint else gs
    return tuple(adjoint.get(j) for j in range(k))


SEED_PROGRAM: Program = (("add", 1, 2), ("mul", 4, 3), ("add", 0, 5))
"""The seed's E = D + (A + B) * C on inputs (D, A, B, C)."""


def _examples(rng: np.random.Generator) -> list[Example]:
    """Small (the CUDA simulator runs them), differentiable, and away from kinks and domain edges."""
    def u(low: float, high: float, *shape: int) -> np.ndarray:
        return rng.uniform(low, high, size=shape)
    away = lambda x: np.where(np.abs(x) < 0.1, x + 0.2, x)  # noqa: E731 - relu's kink out of finite differences
    return [
        ((u(-2, 2, 5), u(-2, 2, 5), u(-2, 2, 5), u(-2, 2, 5)), {"program": SEED_PROGRAM}),
        # exp(x * s) + b, then sigmoid and gelu: a scalar and a bias broadcast against (3, 4)
        ((u(-1, 1, 3, 4), u(-1, 1), u(-1, 1, 4)),
         {"program": (("mul", 0, 1), ("exp", 3), ("add", 4, 2), ("sigmoid", 5), ("gelu", 6))}),
        # log(x) / sqrt(y) ** 1.5 - tanh(x): positive inputs, x (2, 1) against y (1, 3), x read twice
        ((u(0.5, 2, 2, 1), u(0.5, 2, 1, 3)),
         {"program": (("log", 0), ("sqrt", 1), ("pow", 3, 1.5), ("div", 2, 4), ("tanh", 0), ("sub", 5, 6))}),
        # relu(x) * x + square(sin(x)) - cos(neg(y)): a slot read twice, every other unary op
        ((away(u(-2, 2, 2, 3)), u(-2, 2, 3)),
         {"program": (("relu", 0), ("mul", 2, 0), ("sin", 0), ("square", 4), ("add", 3, 5), ("neg", 1),
                      ("cos", 7), ("sub", 6, 8))}),
        # exact GELU as the importers build it, x * 0.5 * (erf(x * (1 / sqrt 2)) + 1), on (x, 1/sqrt 2, 0.5, 1)
        ((u(-3, 3, 3, 4), np.array(math.sqrt(0.5)), np.array(0.5), np.array(1.0)),
         {"program": (("mul", 0, 1), ("erf", 4), ("add", 5, 3), ("mul", 0, 2), ("mul", 7, 6))}),
    ]


register(OpDef(
    "fused_elementwise", "elementwise", infer=_infer, ref=_ref, flops=_flops, grad=_grad, examples=_examples,
    doc="a program of elementwise ops in one pass over the output (fuse_elementwise builds them)"))


# ---- reading a program ----------------------------------------------------------------------

_INFIX = {"+": 1, "-": 1, "*": 2, "/": 2, "**": 4}  # Python's precedences, so the text reads as Python
_PREFIX, _ATOM = 3, 5


def render_program(program: Program, names: tuple[str, ...] | None = None) -> str:
    """`program` as an expression, e.g. "%0 + (%1 + %2) * %3". `names`: one per input (default "%k").
    An intermediate read more than once is bound first ("t5 = exp(%0); t5 * t5"), so the text stays
    as long as the program."""
    n_inputs = len(names) if names is not None else _count_inputs(program)
    check_program(program, n_inputs)
    steps = decode(program, n_inputs)
    names = names or tuple(f"%{k}" for k in range(n_inputs))
    uses = [0] * (n_inputs + len(steps))
    for _, args, _ in steps:
        for s in args:
            uses[s] += 1
    text: list[tuple[str, int]] = [(name, _ATOM) for name in names]
    bindings = []
    for i, (spec, args, params) in enumerate(steps):
        expr = _render(spec, [text[s] for s in args], params)
        slot = n_inputs + i
        if uses[slot] > 1:
            bindings.append(f"t{slot} = {expr[0]}")
            expr = (f"t{slot}", _ATOM)
        text.append(expr)
    return "; ".join(bindings + [text[-1][0]])


def _count_inputs(program: Program) -> int:
    """The inputs a valid program has: it reads every slot but the last, so its highest is k + n - 2."""
    try:
        return max(1, max(s for ins in program for s in ins[1:1 + INSTRUCTIONS[ins[0]].arity]) - len(program) + 2)
    except (KeyError, TypeError, IndexError, ValueError):
        return 1  # malformed: check_program says how


def _render(spec: Instruction, args: list[tuple[str, int]], params: dict[str, float]) -> tuple[str, int]:
    """(text, precedence) of one instruction: infix for a binary symbol, prefix for a unary one, infix
    with the parameter on the right for a unary symbol with one (pow), else a call."""
    def wrap(arg: tuple[str, int], below: int) -> str:
        return f"({arg[0]})" if arg[1] < below else arg[0]
    if spec.symbol and spec.arity == 2:
        p = _INFIX[spec.symbol]  # left-associative: a right operand of equal precedence keeps its parentheses
        return f"{wrap(args[0], p)} {spec.symbol} {wrap(args[1], p + 1)}", p
    if spec.symbol and params:
        p = _INFIX[spec.symbol]  # ** is right-associative: a left operand of equal precedence keeps them
        return f"{wrap(args[0], p + 1)} {spec.symbol} {next(iter(params.values()))!r}", p
    if spec.symbol:
        return f"{spec.symbol}{wrap(args[0], _PREFIX)}", _PREFIX
    return f"{spec.op}({', '.join(a[0] for a in args)})", _ATOM
