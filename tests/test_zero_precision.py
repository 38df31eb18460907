"""ZeRO under mixed precision (compiler/planning/zero.py, zero_memory.py): each chip holds the model states of
Rajbhandari et al. (SC'20), section 5 and Figure 1, to the byte, with the fp32 master copy counted in K and
sharded with the optimizer state from stage 1 on.

Oracle: the paper's table, written out here with Psi counted from the graph's trainable parameters. The
GPT-2 is sized so that every tensor and every shard fills its 64-byte alignment (d_model 128: a bias's
quarter is 32 bf16 values), so the schedule's placed bytes are the formula's bytes.
"""
from __future__ import annotations

import math

import pytest

import accelsim as A
from accelsim.models.sizes import SMALL
from accelsim.zero_memory import zero_memory

HW = "a100_x8"  # eight A100-like chips: replicas on chips of their own, peaks for fp32 and bf16
COEFFICIENTS = {"fp32": (4, 4, 8), "bf16": (2, 2, 12)}
"""(parameter, gradient, K) bytes per parameter under Adam: fp32 keeps m and v; bf16 keeps a bf16 working copy
and gradient, and K = fp32 master + m + v, as the paper's mixed-precision Adam."""


def paper_bytes(precision: str, psi: int, n_d: int, stage: int) -> int:
    """ZeRO's Figure 1, per device: baseline (2+2+K)Psi, P_os 2Psi+2Psi+K Psi/N_d, P_os+g 2Psi+(2+K)Psi/N_d."""
    p, g, k = COEFFICIENTS[precision]
    return [(p + g + k) * psi, (p + g) * psi + k * psi // n_d, p * psi + (g + k) * psi // n_d][stage]


@pytest.fixture(scope="module")
def gpt2():
    return A.training_graph(A.models.build("gpt2", batch=1, seq=8, layers=1, d_model=128, heads=2, vocab=128),
                            optimizer="adam")


@pytest.fixture(scope="module")
def hw():
    return A.load_hw(HW)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("d", [2, 4])
@pytest.mark.parametrize("zero", [0, 1, 2])
def test_each_chip_holds_the_papers_model_state_bytes(gpt2, hw, precision, d, zero):
    psi = sum(math.prod(n.shape) for n in gpt2.params if n.trainable)
    assert psi % d == 0  # Psi / N_d whole: the formula is a whole number of bytes
    schedule = A.compile(gpt2, hw, data_parallel=d, zero=zero, precision=precision, effort="fast", split=False)
    chips = zero_memory(schedule, gpt2, hw)
    want = paper_bytes(precision, psi, d, zero)
    assert [c.chip for c in chips] == list(range(d))
    for c in chips:
        assert c.held_bytes == c.formula_bytes == want, c
        assert c.model_state_peak_bytes >= c.held_bytes  # a collective's result beside its input only adds


def test_under_bf16_stage_1_shards_the_master_and_gathers_only_the_working_copy(gpt2, hw):
    """The all-gather after the update moves 2 bytes per parameter element (DeepSpeed gathers the fp16
    parameters), and each replica keeps its part of the new fp32 master for the next step."""
    schedule = A.compile(gpt2, hw, data_parallel=2, zero=1, precision="bf16", effort="fast", split=False)
    new_weights = {gpt2.outputs[f"{n.name}.new"]: n for n in gpt2.params if n.trainable}
    gathers = [t for t in schedule.tasks if t.kind == "all_gather"]
    assert gathers and {t.node for t in gathers} <= set(new_weights)
    for t in gathers:
        assert t.out_bytes == 2 * math.prod(new_weights[t.node].shape)
    kept = {(x.node, x.replica) for x in schedule.tensors if x.node in new_weights and x.task >= 0
            and schedule.tasks[x.task].kind == "node" and x.end == schedule.makespan_cycles}
    assert {r for _, r in kept} == {0, 1}


@pytest.mark.parametrize("zero", [1, 2])
def test_a_bf16_step_with_sharded_masters_passes_check(zero):
    graph = A.training_graph(A.models.build("mlp", **SMALL["mlp"]), optimizer="adam")
    hw = A.load_hw(HW)
    schedule = A.compile(graph, hw, data_parallel=2, zero=zero, precision="bf16", split=False)
    report = A.check(schedule, graph=graph, hw=hw, backend="numpy")
    assert report.passed, report.failures[:5]
