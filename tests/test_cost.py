"""Cost model on the toy machine (tests/data/toy_hw.yaml): 1 GHz, a 4x4 WS array with 2 cycles of
latency, an 8-lane vector unit, one SRAM at 64 B/cycle, float32 = 4 bytes."""
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import best_cost, capable_units, node_cost
from accelsim.cost.roofline import chip_peak_ops_per_s, roofs
from accelsim.cost.systolic import gemm_cycles

TOY = A.load_hw(Path(__file__).parent / "data" / "toy_hw.yaml")


def _unit(name):
    return next(u for u in TOY.chips[0].units if u.name == name)


def test_elementwise_add_is_memory_bound_on_the_vector_unit():
    """add of two (64,) vectors: 64 FLOPs / 8 lanes = 8 compute cycles; (2*64 + 64) * 4 B = 768 B over
    one shared 64 B/cycle SRAM port = 12 memory cycles; no latency -> 12 cycles, utilization 64/(12*8)."""
    g = A.Graph("t")
    y = g.input("a", (64,)) + g.input("b", (64,))
    c = best_cost(TOY, g, y.node)
    assert (c.unit, c.compute_cycles, c.memory_cycles, c.cycles, c.bound) == ("vpu", 8, 12, 12, "memory")
    assert c.utilization == pytest.approx(64 / 96)
    assert c.arithmetic_intensity == pytest.approx(64 / 768)


def test_matmul_on_the_array_is_latency_plus_systolic_compute():
    """(16,16) @ (16,16): 4096 MACs; operands 2*256*4 B + result 1 KiB = 3 KiB / 64 = 48 memory cycles,
    far below the array's folds, so cycles = 2 + systolic compute cycles and the node is compute-bound."""
    g = A.Graph("t")
    y = F.matmul(g.input("a", (16, 16)), g.input("b", (16, 16)))
    c = node_cost(TOY, g, y.node, _unit("mxu"))
    expected = gemm_cycles(16, 16, 16, 4, 4, "ws").compute_cycles
    assert c.memory_cycles == 48 and c.compute_cycles == expected and c.cycles == 2 + expected
    assert c.bound == "compute" and c.flops == 2 * 16**3


def test_array_units_only_take_ops_with_a_gemm_view():
    g = A.Graph("t")
    y = F.relu(g.input("x", (4, 4)))
    assert [u.name for u in capable_units(TOY, g, y.node)] == ["vpu"]


def test_ridge_point_is_peak_over_bandwidth():
    peak = 2 * 4 * 4 * 1e9 + 8 * 1e9
    assert chip_peak_ops_per_s(TOY) == peak
    (roof,) = roofs(TOY)
    assert roof.bandwidth_bytes_per_s == 64e9 and roof.ridge_ops_per_byte == pytest.approx(peak / 64e9)


def _conv_only_hw(kernel):
    return A.hw.parse_hw({"name": "conv5", "clock_hz": 1e9, "chips": [{"units": [
        {"name": "conv5x5", "ops": ["conv2d"], "when": {"kernel": kernel}, "array": {"rows": 8, "cols": 8,
         "dataflow": "os"}, "reads": ["m"], "writes": ["m"]}],
        "memories": [{"name": "m", "kind": "sram", "capacity_bytes": 1e6, "bandwidth_bytes_per_cycle": 64}]}]})


def test_when_constraint_selects_units_by_kernel_shape_and_unmapped_nodes_are_named():
    hw = _conv_only_hw([5, 5])
    g = A.Graph("t")
    x = g.input("x", (1, 1, 8, 8))
    ok = F.conv2d(x, g.param("w5", (4, 1, 5, 5)), padding=2)
    bad = F.conv2d(x, g.param("w3", (4, 1, 3, 3)), padding=1)
    assert capable_units(hw, g, ok.node)[0].name == "conv5x5"
    with pytest.raises(A.MappingError) as e:
        capable_units(hw, g, bad.node)
    msg = str(e.value)
    assert f"conv2d node %{bad.id}" in msg and "conv5x5" in msg and "kernel" in msg


dims = st.integers(1, 96)


@settings(max_examples=60)
@given(m=dims, k=dims, n=dims, unit=st.sampled_from(["mxu", "vpu"]))
def test_cost_never_beats_the_compute_or_bandwidth_bound(m, k, n, unit):
    g = A.Graph("t")
    y = F.matmul(g.input("a", (m, k)), g.input("b", (k, n)))
    hw_unit = _unit(unit)
    if unit == "vpu":
        hw_unit = hw_unit.model_copy(update={"ops": ["matmul"]})
    c = node_cost(TOY, g, y.node, hw_unit)
    peak = 2 * 16 if unit == "mxu" else 8
    assert c.cycles >= -(-c.flops // peak)
    assert c.cycles >= (c.bytes_read + c.bytes_written) / 64


@settings(max_examples=60)
@given(m=dims, k=dims, n=dims, axis=st.integers(0, 2))
def test_cost_grows_monotonically_with_problem_size(m, k, n, axis):
    def cycles(m, k, n):
        g = A.Graph("t")
        return best_cost(TOY, g, F.matmul(g.input("a", (m, k)), g.input("b", (k, n))).node).cycles
    bigger = [m, k, n]
    bigger[axis] += 1
    assert cycles(*bigger) >= cycles(m, k, n)


def test_a_gang_unit_splits_one_node_over_its_instances():
    """4 ganged 4x4 arrays take 16 folds of a (16,16)@(16,16) WS GEMM... (4x4 folds of K and N) 4 at a time."""
    g = A.Graph("t")
    y = F.matmul(g.input("a", (16, 16)), g.input("b", (16, 16)))
    solo = node_cost(TOY, g, y.node, _unit("mxu").model_copy(update={"count": 4}))
    gang = node_cost(TOY, g, y.node, _unit("mxu").model_copy(update={"count": 4, "gang": True}))
    sc = gemm_cycles(16, 16, 16, 4, 4, "ws")
    assert sc.folds == 16
    assert solo.compute_cycles == sc.compute_cycles
    assert gang.compute_cycles == sc.compute_cycles // 4
