"""The opcode table (ops/fused.py) and the CPU backend's scalar table: one function per opcode, each
matching its op's numpy reference, also when reached by opcode. (The CUDA table's functions are device
code: tests/test_fused_elementwise.py and tests/test_kernels.py run them through every kernel.)"""
import numpy as np
import pytest

from accelsim.kernels.cpu import scalar as cpu_scalar
from accelsim.ops import OPS
from accelsim.ops.epilogue import ACTIVATIONS
from accelsim.ops.fused import INSTRUCTIONS, OPCODES, Opcode

OPERANDS = {"x": np.array([-2.5, -0.75, -0.0, 0.3, 1.7]), "y": np.array([1.25, -0.4, 0.6, 2.0, -1.1])}
POSITIVE = {"log", "sqrt", "pow"}


def _case(name: str) -> tuple[tuple[np.ndarray, ...], dict[str, float]]:
    x = np.abs(OPERANDS["x"]) + 0.1 if name in POSITIVE else OPERANDS["x"]
    spec = INSTRUCTIONS[name]
    arrays = (x, OPERANDS["y"])[:spec.arity]
    return arrays, {p: 1.5 for p in spec.params}


def test_every_elementwise_op_with_a_scalar_formula_is_in_the_opcode_table_and_fusible():
    # a program, a positional mask, a normalisation with per-channel operands, a collective: no scalar formula;
    # comparisons and where (ops/select.py) give a mask or pick between operands: not fused (yet)
    no_formula = {"fused_elementwise", "causal_mask", "batch_norm_inference", "tp_allreduce",
                  "eq", "ne", "lt", "le", "gt", "ge", "where",
                  "int_eq", "int_ne", "int_lt", "int_le", "int_gt", "int_ge"}
    elementwise = {name for name, op in OPS.items() if op.category == "elementwise"}
    assert elementwise - no_formula == set(OPCODES), "a new elementwise op: add it to INSTRUCTIONS or to no_formula"
    assert "erf" in OPCODES
    assert [Opcode[name.upper()] for name in OPCODES] == list(range(len(OPCODES)))


def test_every_epilogue_activation_is_a_unary_op_of_the_table():
    for act in ACTIVATIONS.values():
        assert act.op is None or (INSTRUCTIONS[act.op].arity == 1 and not INSTRUCTIONS[act.op].params)
        assert act.opcode == (OPCODES[act.op] if act.op else -1)


@pytest.mark.parametrize("name", sorted(OPCODES))
def test_each_cpu_scalar_function_and_its_opcode_give_the_reference(name):
    arrays, params = _case(name)
    expected = OPS[name].ref(*arrays, **params)
    f = cpu_scalar.SCALARS[name]
    by_function = [f(*(a[k] for a in arrays), *params.values()) for k in range(arrays[0].size)]
    x, y = arrays[0], arrays[-1]
    p = next(iter(params.values()), 0.0)
    by_opcode = [cpu_scalar.apply(OPCODES[name], x[k], y[k], p) for k in range(x.size)]
    block = np.full(x.size, np.nan)
    cpu_scalar.apply_block(OPCODES[name], x[1:], y[1:], p, block[1:], x.size - 1)  # leaves element 0 alone
    np.testing.assert_allclose(by_function, expected, rtol=1e-15, atol=0, err_msg=name)
    np.testing.assert_array_equal(by_opcode, by_function)
    np.testing.assert_array_equal(block[1:], by_function[1:])
    assert np.isnan(block[0])


def test_an_opcode_outside_the_table_gives_nan_rather_than_another_ops_numbers():
    x = np.array([1.0, 2.0])
    out = np.zeros(2)
    cpu_scalar.apply_block(len(OPCODES), x, x, 0.0, out, 2)
    assert np.isnan(out).all() and np.isnan(cpu_scalar.apply(len(OPCODES), 1.0, 1.0, 0.0))
