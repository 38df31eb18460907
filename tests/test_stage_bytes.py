"""Stage templates count the bytes one tensor-parallel rank sends and stashes (compose.py's transfers take
bytes per rank: every rank sends its copy to its twin at once)."""
from __future__ import annotations

import accelsim as A
from accelsim.compiler.hierarchy.templates import step_work
from accelsim.schedule.options import StepOptions


def test_activation_and_stash_bytes_are_one_ranks():
    hw = A.load_hw("a100_x8")
    graph = A.training_graph(A.models.build("transformer_block", batch=1, seq=16, d_model=32, heads=2,
                                            tensor_parallel=2), optimizer="sgd")
    schedule = A.compile(graph, hw, pipeline_stages=2, tensor_parallel=2, validate=False)
    rank0 = {t.chip for t in schedule.tasks if t.stage == 0 and t.kind != "transfer"}
    sent = [t for t in schedule.tasks if t.kind == "transfer" and t.phase == "forward" and t.stage == 0]
    first = step_work(graph, hw, StepOptions(pipeline_stages=2, tensor_parallel=2)).chunks[0]
    per_chip = {c: sum(t.out_bytes for t in sent if t.chip == c) for c in rank0}
    assert len(per_chip) == 2 and min(per_chip.values()) > 0
    assert first.activation_bytes == max(per_chip.values()) < sum(per_chip.values())
