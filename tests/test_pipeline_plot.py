"""The pipeline timeline plot (accelsim/viz/pipeline.py): from synthetic stage spans and from a compiled pipeline
schedule; written, deterministic, readable at 16 stages and 128 micro-batches; its bubble fraction against
GPipe's (p - 1) / (M + p - 1); bad input refused by name."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import fields

import pytest
from matplotlib.figure import Figure

import accelsim as A
from accelsim.compiler.hierarchy.work import StageSpan
from accelsim.errors import AccelsimError
from accelsim.viz.pipeline import PipelineSpan, bubble_fraction, plot_pipeline, schedule_spans

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def gpipe(p: int, m: int, f: int = 10, b: int = 20, comm: bool = True) -> list[StageSpan]:
    """GPipe's timeline with zero-cost transfers: stage s runs forward i over [(s + i) f, ...), then backwards
    in the same order from the last stage; with `comm`, transfers, a gradient all-reduce and the update."""
    spans = []
    for s in range(p):
        for i in range(m):
            start = (s + i) * f
            spans.append(StageSpan(s, "forward", i, s, start, start + f))
            if comm and s < p - 1:
                spans.append(StageSpan(s, "transfer", i, s, start + f, start + f + 2))
        base = (p - 1 + m) * f
        for i in range(m):
            start = base + (p - 1 - s + i) * b
            spans.append(StageSpan(s, "backward", i, s, start, start + b))
        end = base + (p - 1 + m) * b
        if comm:
            spans += [StageSpan(s, "allreduce", -1, s, end - 3 * b, end + 5), StageSpan(s, "update", -1, s, end + 5, end + 15)]
    return spans


def labels(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "microbatch_label"]


@pytest.mark.parametrize("p, m", [(2, 1), (4, 6), (8, 32)])
def test_gpipe_s_bubble_is_p_minus_1_over_m_plus_p_minus_1(p, m):
    assert bubble_fraction(gpipe(p, m, comm=False)) == pytest.approx((p - 1) / (m + p - 1))


def test_a_plot_of_synthetic_spans_is_written_the_same_bytes_each_time(tmp_path):
    spans = gpipe(4, 6)
    a, b = tmp_path / "a.png", tmp_path / "sub" / "b.png"
    fig = plot_pipeline(spans, a, clock_hz=1e9)
    plot_pipeline(spans, b, clock_hz=1e9)
    data = a.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    assert data == b.read_bytes()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [f"stage {s}" for s in range(4)]
    assert sorted(labels(fig), key=int) == sorted((str(i) for i in range(6) for _ in range(8)), key=int)  # F and B
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:5] == ["forward", "backward", "optimizer update", "transfer (link)", "all-reduce"]
    assert "idle (bubble)" in legend and "bubble 33.3%" in fig.axes[0].get_title()


def test_sixteen_stages_and_128_micro_batches_stay_readable(tmp_path):
    spans = gpipe(16, 128)
    fig = plot_pipeline(spans, tmp_path / "big.png")
    ax = fig.axes[0]
    assert labels(fig) == []  # a micro-batch's bar is narrower than its number: no labels at all
    assert len(ax.get_yticklabels()) == 16
    bars = [c for c in ax.collections if (c.get_gid() or "").startswith("stage")]
    assert bars and all(c.get_rasterized() for c in bars)
    assert len(bars) <= 16 * 2 * 4  # one collection per (stage, kind, tone), not one per span
    assert (tmp_path / "big.png").read_bytes().startswith(PNG_MAGIC)


def test_one_replica_is_drawn_and_a_missing_one_is_refused():
    spans = gpipe(2, 2) + [StageSpan(0, "forward", 0, 0, 0, 5, replica=1)]
    fig = plot_pipeline(spans, replica=1)
    assert "replica 1 of 2" in fig.axes[0].get_title()
    with pytest.raises(AccelsimError, match=r"replica=3 has no spans; the spans' replicas: 0, 1"):
        plot_pipeline(spans, replica=3)


@pytest.mark.parametrize("bad, match", [
    (StageSpan(1, "idle", 0, 1, 0, 5), r"span 1 \(stage 1, micro-batch 0\) has kind 'idle'; expected one of forward"),
    (StageSpan(0, "forward", 0, 0, 9, 5), r"span 1 \(forward, stage 0\) runs from cycle 9 to 5"),
    ((0, "forward", 0, 0, 0, 5), r"span 1 is a tuple; expected a StageSpan"),
])
def test_bad_spans_are_refused_by_index(bad, match):
    with pytest.raises(AccelsimError, match=match):
        plot_pipeline([StageSpan(0, "forward", 0, 0, 0, 5), bad])


def test_an_unwritable_suffix_or_a_non_sequence_is_refused(tmp_path):
    with pytest.raises(AccelsimError, match="cannot write the pipeline plot to"):
        plot_pipeline(gpipe(2, 2), tmp_path / "p.notaformat")
    with pytest.raises(AccelsimError, match="needs a sequence of StageSpan or a Schedule, got int"):
        plot_pipeline(3)


def test_drawn_on_a_given_axes():
    fig = Figure()
    ax = fig.add_subplot()
    assert plot_pipeline(gpipe(2, 3), ax=ax) is fig


# ---- from a task-level schedule -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_stage():
    hw = A.load_hw("a100_x8")
    graph = A.rematerialize(A.training_graph(A.models.build("gpt2", batch=1, seq=8, layers=2, d_model=16, heads=2,
                                                            vocab=32), optimizer="sgd"), "every:1")
    return A.compile(graph, hw, microbatches=4, pipeline_stages=2, data_parallel=2), graph


def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [tuple(x) for x in out]


def test_schedule_spans_cover_exactly_the_tasks_of_each_stage_phase_and_micro_batch(two_stage):
    schedule, graph = two_stage
    spans = schedule_spans(schedule, graph)
    by_group = defaultdict(list)
    for s in spans:
        by_group[(s.stage, s.replica, s.kind, s.microbatch)].append((s.start, s.end))
    tasks = defaultdict(list)
    recomputed = {n.id for n in graph.nodes if n.name.endswith(".recompute")}
    for t in schedule.tasks:
        kind = t.kind if t.kind in ("allreduce", "transfer") else (
            "recompute" if t.node in recomputed and t.phase == "backward" else t.phase)
        tasks[(t.stage, t.replica, kind, t.microbatch)].append((t.start, t.end))
    assert set(by_group) == set(tasks)
    for key, intervals in tasks.items():
        assert sorted(by_group[key]) == _union(intervals)  # merged where they touch, disjoint otherwise
    assert {s.kind for s in spans} == {"forward", "backward", "recompute", "update", "allreduce", "transfer"}
    assert spans == schedule_spans(schedule, graph)
    assert [f.name for f in fields(PipelineSpan)] == [f.name for f in fields(StageSpan)]  # one plot for both
    assert "recompute" not in {s.kind for s in schedule_spans(schedule)}  # without the graph: backward


def test_a_compiled_pipeline_schedule_is_plotted(tmp_path, two_stage):
    schedule, graph = two_stage
    fig = plot_pipeline(schedule, tmp_path / "sched.png", graph=graph)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stage 0", "stage 1"]
    assert "2 stages, 4 micro-batches, replica 0 of 2" in ax.get_title()
    assert "recompute" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_xlim()[1] == max(t.end for t in schedule.tasks if t.replica == 0)
    assert (tmp_path / "sched.png").read_bytes().startswith(PNG_MAGIC)
