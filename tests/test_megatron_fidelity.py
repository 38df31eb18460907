"""What a Megatron-LM step on A100s pays that a dataflow schedule need not: tensor-parallel all-reduces that the
compute stream waits for, and links at the rates NCCL reaches (hwconfigs/a100_*.yaml [NT])."""
import pytest

import accelsim as A

GPT = dict(layers=1, d_model=32, heads=2, seq=8, vocab=64, batch=1)


def _tp_step(hw: str) -> A.Schedule:
    graph = A.training_graph(A.models.build("gpt2", tensor_parallel=2, **GPT), optimizer="sgd")
    return A.compile(graph, A.load_hw(hw), tensor_parallel=2, granularity="task", effort="fast")


def _overlapping(schedule: A.Schedule) -> list[tuple[str, str]]:
    """(all-reduce, kernel) pairs of one chip whose intervals overlap."""
    reduces = [t for t in schedule.tasks if t.kind == "tp_allreduce"]
    kernels = [t for t in schedule.tasks if t.kind in ("node", "accumulate")]
    return [(r.node, k.node) for r in reduces for k in kernels
            if r.chip == k.chip and r.start < k.end and k.start < r.end]


def test_a_gpu_runs_no_kernel_beside_a_tensor_parallel_allreduce():
    """Megatron-LM calls each tensor-parallel all-reduce synchronously between two kernels (SC21): on a chip
    with gpu_overheads the all-reduce holds the compute stream."""
    schedule = _tp_step("a100_x8")
    assert any(t.kind == "tp_allreduce" for t in schedule.tasks)
    assert _overlapping(schedule) == []


def test_a_dataflow_chip_may_still_overlap_its_allreduces():
    """The stream rule is a GPU's (gpu_overheads): the same step on a chip without them keeps its freedom, and
    on this step it uses it (otherwise the test above would prove nothing)."""
    assert A.load_hw("groq_like_x4").chips[0].gpu_overheads is None
    assert _overlapping(_tp_step("groq_like_x4")) != []


@pytest.mark.parametrize("name", ["a100_x8", "a100_x64", "a100_superpod"])
def test_a100_links_run_at_the_rates_nccl_reaches(name):
    """0.8 of NVLink's 300 GB/s per GPU and direction, 0.92 of HDR's 25 GB/s per NIC: the [NT] figures."""
    hw = A.load_hw(name)
    assert hw.interconnect.bytes_per_cycle(hw.clock_hz) * hw.clock_hz == pytest.approx(0.8 * 300e9)
    if hw.interconnect.scale_out is not None:
        scale_out = hw.interconnect.scale_out
        assert scale_out.bytes_per_cycle(hw.clock_hz) * hw.clock_hz == pytest.approx(0.92 * 25e9)
