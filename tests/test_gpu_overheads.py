"""GPU overheads (hw/gpu_overheads.py, cost/kernel_overheads.py): on a chip with `gpu_overheads` every node is
one kernel that lasts at least the launch latency and pays the tail, and HBM streams at the achievable fraction;
fusion saves launches; the fields are validated and absent from every other chip's dump."""
import math

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import graph_costs
from accelsim.hw.overrides import parse_assignments
from accelsim.passes.fuse_elementwise import fuse_elementwise


def _seed(n: int) -> A.Graph:
    """E = D + (A + B) * C on vectors of n elements: three elementwise nodes, one fused chain."""
    g = A.Graph("seed", dtype="float32")
    a, b, c, d = (g.input(name, (n,)) for name in "ABCD")
    g.output("E", d + (a + b) * c)
    return g


def _a100(*sets: str) -> A.HwSpec:
    return A.load_hw("a100_like", overrides=parse_assignments(list(sets)))


def test_a_fused_elementwise_chain_pays_one_launch_where_the_unfused_chain_pays_three():
    """64-element vectors take a few cycles of work: each kernel lasts its 10 us launch (14,100 cycles at
    1.41 GHz), so the unfused chain costs three launches and the fused node one."""
    hw = _a100()
    launch = math.ceil(hw.chips[0].gpu_overheads.launch_latency_us * 1e-6 * hw.clock_hz)
    assert launch == 14_100
    unfused, fused = _seed(64), fuse_elementwise(_seed(64))
    assert [c.cycles for c in graph_costs(hw, unfused)] == [launch] * 3
    assert [(c.op, c.cycles) for c in graph_costs(hw, fused)] == [("fused_elementwise", launch)]
    step = {name: A.compile(g, hw).makespan_cycles for name, g in (("unfused", unfused), ("fused", fused))}
    assert step["unfused"] >= 3 * launch and step["fused"] < 2 * launch


def test_a_long_kernel_hides_its_launch_pays_its_tail_and_streams_hbm_at_the_achievable_fraction():
    """2^24-element vectors: an add reads 2 x 32 MiB and writes 32 MiB (fp16) from HBM, far past the launch."""
    n = 2**24
    full, measured = _a100("chips.0.gpu_overheads.hbm_fraction=1"), _a100()
    overheads = measured.chips[0].gpu_overheads
    tail = math.ceil(overheads.tail_latency_us * 1e-6 * measured.clock_hz)
    at_peak, achieved = graph_costs(full, _seed(n))[0], graph_costs(measured, _seed(n))[0]
    assert achieved.op == "add" and achieved.bound == "memory"
    assert achieved.overhead_cycles == at_peak.overhead_cycles == tail == 1410
    assert achieved.cycles == achieved.memory_cycles + tail
    assert achieved.memory_cycles == pytest.approx(at_peak.memory_cycles / overheads.hbm_fraction, abs=1)


def _matmul_beside_relu() -> A.Graph:
    """Two independent kernels for two units: a matmul (Tensor Cores) and a relu (CUDA cores)."""
    g = A.Graph("two", dtype="float32")
    a, b, x = g.input("a", (1024, 1024)), g.input("b", (1024, 1024)), g.input("x", (1 << 22,))
    g.output("m", F.matmul(a, b))
    g.output("r", F.relu(x))
    return g


def test_a_gpu_like_chip_runs_its_kernels_one_at_a_time_on_one_stream():
    """A GPU runs one compute stream: the matmul and the relu, free to run together on a dataflow chip's two
    units, run back to back, and the step lasts their two kernels."""
    hw, graph = _a100(), _matmul_beside_relu()
    sched = A.compile(graph, hw)
    spans = sorted((t.start, t.end, t.resource) for t in sched.tasks if t.kind == "node")
    assert {r for _, _, r in spans} == {"tensor_core", "cuda_cores"}
    assert spans[0][1] <= spans[1][0]
    assert sched.makespan_cycles == sum(c.cycles for c in graph_costs(hw, graph))
    result = A.simulate(sched, hw, graph=graph)
    assert result.makespan_cycles == sched.makespan_cycles


def test_a_chip_without_gpu_overheads_costs_and_dumps_as_before():
    """groq_like has no key: no overhead cycles, and its dump (the hardware hash of shipped schedules) lacks it."""
    hw = A.load_hw("groq_like")
    assert hw.chips[0].gpu_overheads is None and "gpu_overheads" not in hw.model_dump()["chips"][0]
    assert "gpu_overheads" in _a100().model_dump()["chips"][0]
    assert all(c.overhead_cycles == 0 for c in graph_costs(hw, _seed(64)))


def test_every_a100_config_declares_the_same_overheads():
    declared = {name: A.load_hw(name).chips[0].gpu_overheads
                for name in ("a100_like", "a100_x8", "a100_x64", "a100_superpod")}
    assert len(set(declared.values())) == 1 and None not in declared.values()


@pytest.mark.parametrize("key, value, expected", [
    ("launch_latency_us", "-1", "expected a finite number from 0 to 10000 us"),
    ("launch_latency_us", "nan", "got 'nan'"),
    ("tail_latency_us", "inf", "got 'inf'"),
    ("tail_latency_us", "1e9", "expected a finite number from 0 to 10000 us"),
    ("launch_latency_us", "1e-300", "(0, or at least 1e-06)"),
    ("hbm_fraction", "0", "expected a finite number from 0.01 to 1"),
    ("hbm_fraction", "1.5", "expected a finite number from 0.01 to 1"),
    ("hbm_fraction", "nan", "got 'nan'"),
])
def test_bad_overheads_are_refused_naming_the_key_the_value_and_the_range(key, value, expected):
    with pytest.raises(A.HwConfigError) as e:
        _a100(f"chips.0.gpu_overheads.{key}={value}")
    text = str(e.value)
    assert f"chips[0].gpu_overheads.{key}:" in text and value in text and expected in text
    assert "Traceback" not in text


def test_an_unknown_overhead_key_is_refused():
    with pytest.raises(A.HwConfigError, match="gpu_overheads.launch_us"):
        _a100("chips.0.gpu_overheads.launch_us=3")
