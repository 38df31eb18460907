"""The per-layer table's op column names the op a layer spends unit time in, not the one whose output crosses a link."""
import io

from rich.console import Console

import accelsim as A
from accelsim.cli.layer_table import time_table


def _row(table, layer: str) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=200).print(table)
    return next(line.split("│")[1:3] for line in out.getvalue().splitlines() if f"│ {layer} " in line)


def test_a_stages_last_layer_is_named_by_its_matmul_not_the_relu_sent_to_the_next_chip():
    step = A.training_graph(A.models.build("mlp", batch=64, sizes=(16, 256, 10)), optimizer="sgd", lr=0.01)
    hw = A.load_hw("groq_like_x4")
    sched = A.compile(step, hw, pipeline_stages=2, microbatches=2, stage_layers=(1, 1), split=False, effort="fast")
    report = A.layer_report(sched, hw, step)
    fc1 = next(r for r in report.layers if r.layer == "fc1")
    relu = next(d for d in fc1.nodes if d.op == "relu" and d.phase == "forward")
    matmul = next(d for d in fc1.nodes if d.op == "matmul" and d.phase == "forward")
    assert relu.work.busy_cycles > matmul.work.busy_cycles > 0  # the relu's span includes its output's transfer
    assert relu.work.communication_cycles > 0
    assert _row(time_table(report), "fc1")[1].strip().startswith("matmul")
