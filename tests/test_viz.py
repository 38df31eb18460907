import dataclasses
import json
import re

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from accelsim.errors import AccelsimError
from accelsim.schedule.plan import PER_STEP
from accelsim.sim.trace import Channel, MemoryTrace, Result, Span
from accelsim.viz.perfetto import write_perfetto
from accelsim.viz.timeline import MERGE_ABOVE_SPANS, format_bytes, format_mib, merge_subpixel, plot_memory, plot_timeline, plot_utilization

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CLOCK_HZ = 1e9  # 1 cycle = 1 ns, so 1000 cycles = 1 µs


def span(task, chip, resource, instance, start, end, microbatch=0, phase="forward", kind="node", stalls=()):
    return Span(task=task, kind=kind, node=task, op="matmul" if kind == "node" else kind, phase=phase,
                microbatch=microbatch, replica=chip, stage=0, chip=chip, resource=resource, instance=instance,
                ready=start, start=start, end=end, planned_start=start, stalls=stalls)


def result(spans, unit_instances=None, occupancy=None):
    """`occupancy`: {chip: ((cycle, bytes in use), ...)} for each chip's memory "mem" (8 MiB)."""
    spans = tuple(spans)
    makespan = max((s.end for s in spans), default=0)
    if occupancy is None:
        occupancy = {0: ((0, 0), (100, 3 << 20), (400, 5 << 20), (900, 1 << 20)), 1: ((0, 0), (150, 2 << 20), (800, 0))}
    return Result(
        mode="static", graph_name="toy", hw_name="toy_hw", clock_hz=CLOCK_HZ, samples_per_step=8,
        spans=spans, makespan_cycles=makespan, compiled_makespan_cycles=makespan,
        memories=tuple(MemoryTrace(chip, "mem", 8 << 20, steps) for chip, steps in occupancy.items()),
        channels=(Channel(0, 0, "mem", 4000, 16.0), Channel(1, 1, "mem", 2000, 16.0), Channel(0, 1, "", 512, 4.0)),
        unit_instances=unit_instances if unit_instances is not None else {"mxm": 4, "vxm": 2},
        events=len(spans) * 3,
    )


@pytest.fixture
def small():
    """Two chips: forward/backward for two micro-batches, a per-step update, a transfer and an all-reduce."""
    return result([
        span(0, 0, "mxm", 0, 0, 100, microbatch=0),
        span(1, 0, "mxm", 1, 0, 120, microbatch=1),
        span(2, 0, "vxm", 0, 100, 150, microbatch=0, stalls=(("data", 7),)),
        span(3, 0, "link:0->1", 0, 150, 260, microbatch=0, kind="transfer"),
        span(4, 1, "mxm", 0, 260, 400, microbatch=0),
        span(5, 1, "mxm", 0, 400, 600, microbatch=0, phase="backward"),
        span(6, 0, "mxm", 0, 600, 800, microbatch=1, phase="backward"),
        span(7, 0, "allreduce", 0, 800, 900, microbatch=PER_STEP, phase="backward", kind="allreduce"),
        span(8, 1, "allreduce", 0, 800, 900, microbatch=PER_STEP, phase="backward", kind="allreduce"),
        span(9, 0, "vxm", 1, 900, 1000, microbatch=PER_STEP, phase="update"),
        span(10, 0, "vxm", 1, 1000, 1000, microbatch=PER_STEP, phase="update"),  # zero-length
    ])


def synthetic(n_spans, n_chips=2, units=(("mxm", 4), ("vxm", 2)), microbatches=8):
    """n_spans back-to-back spans spread round-robin over every unit instance and a link per chip pair."""
    rows = [(c, u, i) for c in range(n_chips) for u, n in units for i in range(n)]
    rows += [(c, f"link:{c}->{(c + 1) % n_chips}", 0) for c in range(n_chips)]
    phases = ("forward", "backward", "update")
    clock = dict.fromkeys(rows, 0)
    spans = []
    for k in range(n_spans):
        row = rows[k % len(rows)]
        phase = phases[(k // len(rows)) % 3]
        mb = PER_STEP if phase == "update" else (k // 7) % microbatches
        start = clock[row] + k % 3  # small gaps between some spans
        clock[row] = start + 10 + k % 13
        kind = "transfer" if row[1].startswith("link") else "node"
        spans.append(span(k, *row, start, clock[row], microbatch=mb, phase=phase, kind=kind))
    return result(spans, unit_instances=dict(units))


def timeline_axes(fig: Figure):
    return next(a for a in fig.axes if a.collections)


def span_collections(ax) -> list:
    """The collections of task bars (plot_timeline gives each a gid "spans ..."; stalls have their own)."""
    return [c for c in ax.collections if isinstance(c, PolyCollection) and (c.get_gid() or "").startswith("spans")]


def bars_drawn(ax) -> int:
    return sum(len(c.get_paths()) for c in span_collections(ax))


def distinct_rows(res: Result) -> set:
    return {(s.chip, s.resource, s.instance) for s in res.spans}


def assert_png(path, min_bytes=5_000):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > min_bytes


@pytest.mark.parametrize("plot", [plot_timeline, plot_utilization, plot_memory])
def test_each_plot_writes_a_png_into_a_new_directory_and_returns_its_figure(plot, small, tmp_path):
    path = tmp_path / "plots" / "nested" / f"{plot.__name__}.png"
    fig = plot(small, path=path)
    assert isinstance(fig, Figure)
    assert_png(path)


@pytest.mark.parametrize("plot", [plot_timeline, plot_utilization, plot_memory])
def test_each_plot_draws_into_a_given_axes(plot, small):
    fig = Figure()
    ax = fig.add_subplot()
    assert plot(small, ax=ax) is fig
    assert ax.has_data()


def test_timeline_draws_one_bar_per_span_and_one_row_per_resource_instance(small):
    ax = timeline_axes(plot_timeline(small))
    assert bars_drawn(ax) == len(small.spans)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(distinct_rows(small)) == 8
    assert labels[:5] == ["chip0 mxm[0]", "chip0 mxm[1]", "chip0 vxm[0]", "chip0 vxm[1]", "chip0 allreduce"]
    assert "chip0 link:0->1" in labels and labels[-1] == "chip1 allreduce"


def test_timeline_legend_lists_microbatches_per_step_phases_communication_and_stalls(small):
    ax = timeline_axes(plot_timeline(small))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["micro-batch 0", "micro-batch 1", "per step"]
    assert [t.split()[0] for t in legend[3:6]] == ["forward", "backward", "update"]
    assert legend[6:] == ["all-reduce", "transfer (link)", "stall, waiting for: data"]


def test_timeline_legend_caps_microbatch_entries():
    res = result([span(k, 0, "mxm", 0, 10 * k, 10 * k + 5, microbatch=k) for k in range(25)])
    legend = [t.get_text() for t in timeline_axes(plot_timeline(res)).get_legend().get_texts()]
    assert sum(t.startswith("micro-batch") for t in legend) == 10
    assert any(t.startswith("... (15 more") for t in legend)


def test_timeline_x_axis_spans_the_makespan_in_cycles(small):
    assert timeline_axes(plot_timeline(small)).get_xlim() == (0, small.makespan_cycles)


def test_timeline_window_restricts_x_limits_and_drops_spans_outside_it(small):
    ax = timeline_axes(plot_timeline(small, window=(250, 650)))
    assert ax.get_xlim() == (250, 650)
    inside = [s for s in small.spans if s.end >= 250 and s.start <= 650]
    assert bars_drawn(ax) == len(inside) == 4


def test_timeline_rejects_an_empty_window(small):
    with pytest.raises(AccelsimError, match="t0 < t1"):
        plot_timeline(small, window=(500, 500))


def test_timeline_keeps_only_the_busiest_rows_past_max_rows():
    # 30 rows; row k is busy for k + 1 cycles, so the 5 busiest are the last 5.
    res = result([span(k, 0, "mxm", k, 0, k + 1) for k in range(30)], unit_instances={"mxm": 30})
    ax = timeline_axes(plot_timeline(res, max_rows=5))
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"chip0 mxm[{k}]" for k in range(25, 30)]
    assert bars_drawn(ax) == 5
    assert "5 busiest of 30 rows" in ax.get_title()


def test_timeline_draws_every_row_at_max_rows():
    res = result([span(k, 0, "mxm", k, 0, k + 1) for k in range(30)], unit_instances={"mxm": 30})
    ax = timeline_axes(plot_timeline(res, max_rows=30))
    assert len(ax.get_yticklabels()) == 30
    assert "busiest" not in ax.get_title()


def test_timeline_of_a_result_without_spans_still_renders(tmp_path):
    plot_timeline(result([]), path=tmp_path / "empty.png")
    assert_png(tmp_path / "empty.png", min_bytes=1_000)


def test_timeline_of_5000_spans_draws_them_with_no_more_artists_than_500(tmp_path):
    """What keeps thousands of spans fast to draw, counted rather than timed: ten times the spans add paths
    to the same collections, not artists (matplotlib's cost grows with its artists)."""
    artists_for_500 = len(timeline_axes(plot_timeline(synthetic(500))).get_children())
    fig = plot_timeline(synthetic(5000), path=tmp_path / "big.png")
    ax = timeline_axes(fig)
    assert bars_drawn(ax) == 5000
    assert len(ax.get_children()) <= artists_for_500
    assert_png(tmp_path / "big.png")


def test_utilization_has_one_bar_per_unit_kind_and_port(small):
    fig = plot_utilization(small)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [*small.utilization(), *small.port_utilization()]
    widths = [p.get_width() for p in ax.patches]
    expected = [100 * v for v in (*small.utilization().values(), *small.port_utilization().values())]
    assert widths == pytest.approx(expected)


def test_memory_plots_occupancy_in_mib_and_capacity_dashed_in_the_same_colour(small):
    ax = plot_memory(small).axes[0]
    solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(solid) == len(dashed) == 2
    assert max(solid[0].get_ydata()) == 5  # chip0:mem peaks at 5 MiB
    assert list(dashed[0].get_ydata()) == [8, 8]  # capacity 8 MiB
    assert [ln.get_color() for ln in solid] == [ln.get_color() for ln in dashed]


def test_memory_zooms_to_the_occupancy_when_capacity_dwarfs_it_and_lists_unused_memories(small):
    res = result(small.spans, occupancy={0: ((0, 0), (10, 1 << 16)), 1: ((0, 0),)})
    ax = plot_memory(res).axes[0]
    assert ax.get_ylim()[1] < 100 and "(KiB)" in ax.get_ylabel()  # the 8 MiB capacity would squash 64 KiB
    assert len([ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]) == 1
    assert "unused, not drawn: chip1:mem" in ax.get_title()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chip0:mem: peak 64 KiB of 8 MiB"]
    assert not [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]  # no capacity line above the range


def test_memory_levels_get_a_panel_each_in_their_own_unit(small):
    # a 32 MiB SRAM and a 16 GiB HBM holding 2.4 GiB: one linear axis flattened the SRAM's curve into it
    res = result(small.spans, occupancy={0: ((0, 0), (10, 20 << 20)), 1: ((0, 0), (20, int(2.4 * 2**30)))})
    res = dataclasses.replace(res, memories=(
        dataclasses.replace(res.memories[0], memory="sram", capacity_bytes=32 << 20),
        dataclasses.replace(res.memories[1], chip=0, memory="hbm", capacity_bytes=16 << 30)))
    fig = plot_memory(res)
    sram, hbm = fig.axes  # in the order the hardware declares them: the fastest level on top
    assert "hbm in use (GiB)" == hbm.get_ylabel() and "sram in use (MiB)" == sram.get_ylabel()
    assert max(hbm.get_lines()[0].get_ydata()) == pytest.approx(2.4)
    assert max(sram.get_lines()[0].get_ydata()) == pytest.approx(20)
    assert [t.get_text() for t in sram.get_legend().get_texts()][0] == "chip0:sram: peak 20 MiB of 32 MiB"
    assert len(hbm.get_xticks()) <= 8  # thousands-separated cycle labels do not run together


@pytest.mark.parametrize("nbytes, text", [(0, "0 B"), (512, "512 B"), (1 << 16, "64 KiB"), (5 << 20, "5 MiB"),
                                          (int(2.4 * 2**30), "2.4 GiB"), (3 << 40, "3,072 GiB")])
def test_format_bytes_uses_the_largest_unit_reached(nbytes, text):
    assert format_bytes(nbytes) == text


def load_trace(path):
    with open(path) as f:
        return json.load(f)


def test_perfetto_json_loads_and_equals_the_returned_dict(small, tmp_path):
    path = tmp_path / "traces" / "t.json"
    written = write_perfetto(small, path)
    assert load_trace(path) == written


def test_perfetto_has_one_thread_per_resource_instance_and_a_process_per_chip(small, tmp_path):
    trace = write_perfetto(small, tmp_path / "t.json")["traceEvents"]
    threads = [(e["pid"], e["tid"], e["args"]["name"]) for e in trace if e["name"] == "thread_name"]
    assert len(threads) == len({(p, t) for p, t, _ in threads}) == len(distinct_rows(small))
    assert (0, "mxm[1]") in {(p, n) for p, _, n in threads}
    assert (0, "link:0->1") in {(p, n) for p, _, n in threads}
    processes = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert processes == {0: "chip0", 1: "chip1"}


def test_perfetto_has_one_complete_event_per_span_in_microseconds(small, tmp_path):
    trace = write_perfetto(small, tmp_path / "t.json")["traceEvents"]
    complete = [e for e in trace if e["ph"] == "X"]
    assert len(complete) == len(small.spans)
    assert all(e["dur"] >= 0 for e in complete)
    by_task = {e["args"]["task"]: e for e in complete}
    assert by_task[5]["ts"] == pytest.approx(0.4)  # cycle 400 at 1 GHz
    assert by_task[5]["dur"] == pytest.approx(0.2)
    assert by_task[5]["name"] == "matmul" and by_task[5]["args"]["phase"] == "backward"
    assert by_task[2]["args"]["stall_cycles"] == 7
    assert by_task[7]["args"]["microbatch"] == PER_STEP


def test_perfetto_events_sit_on_their_resource_threads(small, tmp_path):
    trace = write_perfetto(small, tmp_path / "t.json")["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace if e["name"] == "thread_name"}
    link = next(e for e in trace if e["ph"] == "X" and e["args"]["kind"] == "transfer")
    assert names[(link["pid"], link["tid"])] == "link:0->1"


def test_perfetto_has_a_counter_per_memory_occupancy_step(small, tmp_path):
    trace = write_perfetto(small, tmp_path / "t.json")["traceEvents"]
    counters = [e for e in trace if e["ph"] == "C"]
    assert len(counters) == sum(len(steps) for steps in small.occupancy.values())
    chip0 = [(e["ts"], e["args"]["in_use"]) for e in counters if e["name"] == "chip0:mem bytes"]
    assert chip0 == [(0.0, 0), (0.1, 3 << 20), (0.4, 5 << 20), (0.9, 1 << 20)]  # cycles / 1 GHz in µs


def test_perfetto_output_is_deterministic(small, tmp_path):
    write_perfetto(small, tmp_path / "a.json")
    write_perfetto(small, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_plots_and_trace_of_a_simulated_training_step(tmp_path):
    import accelsim as A
    from accelsim.sim.engine import simulate

    hw = A.load_hw("groq_like_x4")
    schedule = A.compile(A.training_graph(A.models.build("mlp", batch=4)), hw, microbatches=2, data_parallel=2)
    res = simulate(schedule, hw)
    ax = timeline_axes(plot_timeline(res, path=tmp_path / "timeline.png"))
    assert bars_drawn(ax) == len(res.spans)
    assert len(ax.get_yticklabels()) == len(distinct_rows(res))
    plot_utilization(res, path=tmp_path / "utilization.png")
    plot_memory(res, path=tmp_path / "memory.png")
    trace = write_perfetto(res, tmp_path / "trace.json")
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(res.spans)
    for name in ("timeline", "utilization", "memory"):
        assert_png(tmp_path / f"{name}.png")


# --- Step 7: what the figures show (inspected on the Figure objects, not the files) ------------------------

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

import accelsim as A  # noqa: E402
from accelsim.cost.model import graph_costs  # noqa: E402
from accelsim.viz.roofline import MAX_NAMED_POINTS, plot_roofline  # noqa: E402


def rendered(fig: Figure) -> Figure:
    """Lay out and draw the figure (Agg), so text extents and tick labels are final."""
    FigureCanvasAgg(fig).draw()
    return fig


def face_hatch_by_microbatch(ax) -> dict[int, tuple]:
    out = {}
    for c in span_collections(ax):
        mb = int(c.get_gid().split()[1].removeprefix("mb="))
        out[mb] = (tuple(round(v, 6) for v in c.get_facecolor()[0]), c.get_hatch() or "")
    return out


@pytest.mark.parametrize("phase", ["forward", "backward"])
def test_sixteen_microbatches_get_distinct_colour_and_hatch_pairs(phase):
    res = result([span(k, 0, "mxm", 0, 10 * k, 10 * k + 8, microbatch=k, phase=phase) for k in range(16)])
    styles = face_hatch_by_microbatch(timeline_axes(plot_timeline(res)))
    assert sorted(styles) == list(range(16))
    assert len(set(styles.values())) == 16  # tab10 alone would repeat micro-batches 0-5 as 10-15


def test_communication_kinds_are_named_in_the_legend_and_hatched_apart():
    kinds = ["allreduce", "reduce_scatter", "all_gather", "tp_allreduce", "transfer"]
    spans = [span(0, 0, "mxm", 0, 0, 50)]
    spans += [span(i + 1, 0, "allreduce" if k != "transfer" else "link:0->1", 0, 60 * (i + 1), 60 * (i + 1) + 50,
                   microbatch=PER_STEP, phase="backward", kind=k) for i, k in enumerate(kinds)]
    ax = timeline_axes(plot_timeline(result(spans)))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for name in ("all-reduce", "reduce-scatter", "all-gather", "tensor-parallel all-reduce", "transfer (link)"):
        assert name in legend
    hatches = {c.get_gid().split()[-1]: c.get_hatch() for c in span_collections(ax)}
    assert set(hatches) == {*kinds, "unit"}
    assert len(set(hatches.values())) == len(hatches)  # every kind drawn differently from the others and nodes


def stall_bars(ax) -> list[tuple[float, float]]:
    out = []
    for c in ax.collections:
        if c.get_gid() == "stalls":
            for p in c.get_paths():
                xs = p.vertices[:, 0]
                out.append((float(xs.min()), float(xs.max())))
    return sorted(out)


def test_stalls_are_drawn_as_the_cycles_before_their_task_started(small):
    ax = timeline_axes(plot_timeline(small))
    assert stall_bars(ax) == [(93.0, 100.0)]  # span 2 started at 100 after 7 cycles waiting for data
    clean = result([s for s in small.spans if not s.stalls])
    ax = timeline_axes(plot_timeline(clean))
    assert stall_bars(ax) == []
    assert not any("stall" in t.get_text() for t in ax.get_legend().get_texts())


def op_labels(ax) -> list:
    return [t for t in ax.texts if t.get_gid() == "op_label"]


def test_op_names_sit_on_bars_wide_enough_for_them_and_only_there():
    res = result([span(0, 0, "mxm", 0, 0, 900), span(1, 0, "mxm", 0, 900, 903), span(2, 0, "vxm", 0, 0, 10)],
                 unit_instances={"mxm": 1, "vxm": 1})
    fig = plot_timeline(res)
    ax = timeline_axes(fig)
    labels = op_labels(ax)
    assert [(t.get_text(), t.get_position()) for t in labels] == [("matmul", (450.0, 0))]
    rendered(fig)  # after layout the label still lies inside its bar
    box = labels[0].get_window_extent()
    x0, x1 = (ax.transData.transform((x, 0))[0] for x in (0, 900))
    assert x0 <= box.x0 and box.x1 <= x1


def test_zooming_in_labels_the_bars_that_become_wide_enough():
    res = result([span(k, 0, "mxm", 0, 10 * k, 10 * k + 10) for k in range(100)], unit_instances={"mxm": 1})
    assert op_labels(timeline_axes(plot_timeline(res))) == []  # 100 bars of ~8 px each
    zoomed = op_labels(timeline_axes(plot_timeline(res, window=(0, 40))))
    assert [t.get_text() for t in zoomed] == ["matmul"] * 4  # the 4 bars in [0, 40] (the one at 40 shows 0 px)


@pytest.mark.parametrize("plot", [plot_timeline, plot_memory])
def test_time_axis_shows_plain_cycles_without_an_offset(plot):
    t0 = 12_000_000
    spans = [span(0, 0, "mxm", 0, t0, t0 + 400), span(1, 0, "mxm", 0, t0 + 500, t0 + 1000)]
    res = result(spans, occupancy={0: ((0, 0), (t0, 1 << 20), (t0 + 900, 0))})
    kwargs = {"window": (t0, t0 + 1000)} if plot is plot_timeline else {}
    fig = rendered(plot(res, **kwargs))
    ax = timeline_axes(fig) if plot is plot_timeline else fig.axes[0]
    fmt = ax.xaxis.get_major_formatter()
    assert isinstance(fmt, ScalarFormatter) and fmt.get_useOffset() is False
    assert ax.xaxis.get_offset_text().get_text() == ""  # no "+1.2e7" above the axis
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(re.fullmatch(r"\d{1,3}(,\d{3})*", t) for t in ticks)  # plain, thousands separated
    if plot is plot_timeline:
        assert f"{t0:,}" in ticks


def test_memory_legend_names_only_drawn_lines_and_the_capacity_only_when_drawn(small):
    ax = plot_memory(small).axes[0]  # capacity 8 MiB is within the range of a 5 MiB peak: drawn
    drawn = {ln.get_label() for ln in ax.get_lines()}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert set(legend) <= drawn
    assert legend == ["chip0:mem: peak 5 MiB of 8 MiB", "capacity (dashed, its memory's colour)",
                      "chip1:mem: peak 2 MiB of 8 MiB"]
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert all(ln.get_ydata()[0] <= ax.get_ylim()[1] for ln in dashed)


@pytest.mark.parametrize("nbytes, text", [(1863488, "1.777 MiB"), (16019736, "15.28 MiB"), (316608, "0.3019 MiB"),
                                          (220 << 20, "220 MiB"), (3 << 30, "3,072 MiB"), (64, "0.000061 MiB"),
                                          (0, "0 MiB")])
def test_memory_sizes_are_shown_in_mib_to_four_significant_digits(nbytes, text):
    assert format_mib(nbytes) == text


def test_memory_marks_each_peak_at_its_first_cycle(small):
    ax = plot_memory(small).axes[0]
    marks = [(float(ln.get_xdata()[0]), float(ln.get_ydata()[0])) for ln in ax.get_lines() if ln.get_marker() == "v"]
    assert marks == [(400.0, 5.0), (150.0, 2.0)]


def test_memory_of_a_dynamic_run_says_its_peak_is_its_own(small):
    from dataclasses import replace

    ax = plot_memory(replace(small, mode="dynamic")).axes[0]
    assert "dynamic runtime's own allocation" in ax.get_title()
    assert "own allocation" not in plot_memory(small).axes[0].get_title()


ROOF_HW = {"name": "roofy", "clock_hz": 1e9, "chips": [{"units": [
    {"name": "big", "categories": ["tensor"], "count": 2, "array": {"rows": 32, "cols": 32, "dataflow": "os"},
     "reads": ["sram"], "writes": ["sram"]},
    {"name": "small", "ops": ["matmul"], "array": {"rows": 8, "cols": 8, "dataflow": "os"},
     "reads": ["sram"], "writes": ["sram"]},
    {"name": "vec", "categories": ["elementwise", "reduction"], "vector": {"lanes": 16, "ops_per_lane_per_cycle": 2},
     "reads": ["sram"], "writes": ["sram"]},
    {"name": "mover", "categories": ["data_movement"], "stream": {"bytes_per_cycle": 64}, "reads": ["sram"],
     "writes": ["sram"]}],
    "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": 1 << 22, "bandwidth_bytes_per_cycle": 256},
                 {"name": "dram", "kind": "dram", "capacity_bytes": 1 << 30, "bandwidth_bytes_per_cycle": 16}]}]}


def test_roofline_draws_a_ceiling_per_unit_kind_and_a_slope_per_memory_in_tflops():
    hw = A.hw.parse_hw(ROOF_HW)
    g = A.Graph("mlp")
    A.ops.relu(A.ops.matmul(g.input("x", (64, 32)), g.input("w", (32, 16))))
    fig = plot_roofline(hw, graph_costs(hw, g))
    ax = fig.axes[0]
    assert "TFLOP/s" in ax.get_ylabel() and "FLOP/byte" in ax.get_xlabel()
    ceilings = sorted(float(seg[0][1]) for c in ax.collections if c.get_label().startswith("ceiling")
                      for seg in c.get_segments())
    # one instance each, in TFLOP/s at 1 GHz: big 2*32*32, small 2*8*8, vec 16*2 ops per cycle
    assert ceilings == pytest.approx([0.032, 0.128, 2.048])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for unit in ("big (array, x2 = 4.096 in all)", "small (array)", "vec (vector)"):
        assert sum(unit in t for t in legend) == 1
    slopes = [t for t in legend if "bandwidth" in t]
    # chip peak (2 x 2.048 + 0.128 + 0.032 = 4.256 TFLOP/s) / bandwidth
    assert slopes == ["sram bandwidth 256 GB/s (ridge 16.6 FLOP/byte)", "dram bandwidth 16 GB/s (ridge 266 FLOP/byte)"]
    assert "chip peak, all units: 4.256 TFLOP/s" in legend
    assert "no compute roof (no arithmetic peak): mover" in ax.get_title()
    points = [o for c in ax.collections if c.get_label().endswith("nodes (1)") for o in c.get_offsets()]
    assert len(points) == 2 and all(y < 2.048 for _, y in points)  # matmul and relu, under their roofs
    assert not ax.texts  # no names asked for: no labels


def test_roofline_names_its_heaviest_nodes_without_overlap():
    hw = A.hw.parse_hw(ROOF_HW)
    g = A.Graph("mlp")
    h = g.input("x", (64, 32))
    for k in range(20):  # 20 matmuls and 20 relus of the same shape: their points sit on top of each other
        h = A.ops.relu(A.ops.matmul(h, g.input(f"w{k}", (32, 32))))
    costs = graph_costs(hw, g)
    names = {n.id: f"layer{n.id}.{n.op}" for n in g.nodes}
    fig = plot_roofline(hw, costs, node_names=names)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts and all(t.startswith("layer") for t in texts) and len(texts) <= MAX_NAMED_POINTS
    assert texts[0] == names[min(c.node for c in costs if c.op == "matmul")]  # the heaviest first, ties by id
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_timeline_title_writes_the_makespan_as_the_terminal_does(small):
    # the terminal says "68.77 ms" where the title said "6.877e+04 us"
    long = dataclasses.replace(small, makespan_cycles=68_770_000)
    title = plot_timeline(long).axes[0].get_title()
    assert "68,770,000 cycles = 68.77 ms" in title and "e+" not in title


@pytest.mark.parametrize("xranges, pixel, merged", [
    ([(0, 5), (5, 5)], 1.0, [(0, 5), (5, 5)]),                  # visible bars keep their own edges
    ([(0, 1), (1, 1), (3, 1)], 10.0, [(0, 4)]),                 # sub-pixel bars under a pixel apart: one
    ([(0, 1), (50, 1)], 10.0, [(0, 1), (50, 1)]),               # far apart: both drawn
    ([(20, 2), (0, 100)], 10.0, [(0, 100)]),                    # inside a wide bar, unsorted input
    ([], 10.0, []),
])
def test_merge_subpixel_joins_only_what_a_pixel_cannot_tell_apart(xranges, pixel, merged):
    assert merge_subpixel(xranges, pixel) == merged


def test_a_long_raster_timeline_joins_subpixel_bars_and_a_vector_one_keeps_every_span(small, tmp_path):
    many = [span(0, 0, "mxm", 0, 2 * k, 2 * k + 1, microbatch=0) for k in range(MERGE_ABOVE_SPANS + 1)]
    res = result(many)
    assert bars_drawn(timeline_axes(plot_timeline(res))) < len(many) // 10  # a 4,002-cycle row of 1-cycle tasks
    assert bars_drawn(timeline_axes(plot_timeline(res, tmp_path / "t.svg"))) == len(many)
