"""The per-layer report: its cycles add up to the tasks' spans, its bytes and energy to the step's, its mapping
efficiency is the cost model's fold utilization; `accelsim run --report` writes CSV and JSON that read back
as the report, and refuses paths it cannot write; trace and timeline name spans by layer."""
import csv
import json
import os

import pytest

import accelsim as A
from accelsim.cli import main, sched_cmds
from accelsim.cost.systolic import gemm_cycles
from accelsim.layer_names import layer_names
from accelsim.per_layer import build_layer_report, layer_report
from accelsim.per_layer_io import ReportPathError, report_text, write_layer_report
from accelsim.ops.registry import get_op
from accelsim.report import run_summary
from accelsim.schedule.plan import graph_hash, hw_hash
from accelsim.viz import plot_timeline, write_perfetto

RESNET = {"width": 4, "size": 32}
RESNET_ARGS = ["--model", "resnet50", "--set", "width=4", "--set", "size=32", "--hw", "tpu_v1_like"]


@pytest.fixture(scope="module")
def step():
    """A ResNet-50 training step on tpu_v1_like (small width and images), compiled and simulated."""
    hw = A.load_hw("tpu_v1_like")
    graph = A.training_graph(A.models.build("resnet50", **RESNET))
    schedule = A.compile(graph, hw)
    result = A.simulate(schedule, hw, graph=graph)
    return schedule, hw, graph, result, build_layer_report(schedule, hw, graph, result)


def test_layer_cycles_sum_to_the_tasks_spans(step):
    schedule, _, _, result, report = step
    assert sum(r.work.busy_cycles for r in report.layers) == sum(s.end - s.start for s in result.spans)
    assert sum(r.work.tasks for r in report.layers) == len(schedule.tasks)
    for r in report.layers:
        w = r.work
        assert w.busy_cycles == w.ideal_cycles + w.latency_cycles + w.memory_stall_cycles + w.communication_cycles
        assert w.busy_cycles == sum(n.work.busy_cycles for n in r.nodes)
        assert min(w.ideal_cycles, w.memory_stall_cycles, w.wait_cycles, w.port_stall_cycles) >= 0
    assert sum(r.work.flops for r in report.layers) == sum(t.flops for t in schedule.tasks)


def test_layer_bytes_and_energy_sum_to_the_run_summarys(step):
    schedule, hw, graph, _, report = step
    breakdown = run_summary(schedule, hw, graph).energy_breakdown
    for kind, attr in (("memory_read", "bytes_read"), ("memory_write", "bytes_written")):
        step_bytes = {i.name: int(i.quantity) for i in breakdown.items if i.kind == kind}
        layer_bytes: dict[str, int] = {}
        for r in report.layers:
            for memory, nbytes in getattr(r, attr):
                layer_bytes[memory] = layer_bytes.get(memory, 0) + nbytes
        assert layer_bytes == step_bytes and step_bytes
    assert sum(r.total_energy_pj for r in report.layers) == pytest.approx(breakdown.dynamic_pj, rel=1e-9)
    assert report.static_energy_pj == pytest.approx(breakdown.static_pj, rel=1e-9)


def test_mapping_efficiency_of_a_convolution_is_the_arrays_fold_utilization(step):
    schedule, hw, graph, _, report = step
    names = layer_names(graph)
    conv = next(n for n in graph.nodes if n.op == "conv2d" and names[n.id] == "layer3.1.conv2")
    detail = next(d for r in report.layers if r.layer == "layer3.1.conv2" for d in r.nodes if d.node == conv.id)
    array = next(u for u in hw.chips[0].units if u.name == detail.units[0]).model
    batch, m, k, n = get_op("conv2d").gemm(conv.shape, *(graph.nodes[i].shape for i in conv.inputs), **conv.attrs)
    fold = gemm_cycles(m, k, n, array.rows, array.cols, array.dataflow, batch, array.fold_overlap,
                       array.preload_rows_per_cycle)
    assert detail.work.mapping_efficiency == pytest.approx(fold.utilization, rel=1e-9)
    assert detail.work.utilization <= detail.work.mapping_efficiency


def test_the_report_is_deterministic_and_the_public_entry_validates(step):
    schedule, hw, graph, result, report = step
    again = A.layer_report(schedule, hw, graph, result)
    assert report_text(again, ".json") == report_text(report, ".json")
    assert report_text(again, ".csv") == report_text(report, ".csv")
    compiled = layer_report(schedule, hw, graph)
    assert compiled.timeline == "compiled" and report.timeline == "static"
    assert [r.work.busy_cycles for r in compiled.layers] == [r.work.busy_cycles for r in report.layers]
    with pytest.raises(A.AccelsimError, match="result must be a simulation of this schedule"):
        build_layer_report(schedule, hw, graph, result="not a result")


def test_trace_and_timeline_name_spans_by_layer(step, tmp_path):
    _, _, graph, result, _ = step
    names = layer_names(graph)
    trace = write_perfetto(result, tmp_path / "trace.json", layers=names)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in events} <= set(names) and "layer3.1.conv2" in {e["name"] for e in events}
    assert all(e["args"]["op"] for e in events)
    longest = max(result.spans, key=lambda s: (s.end - s.start, -s.task))
    fig = plot_timeline(result, layers=names, window=(longest.start, longest.end))  # wide enough for a label
    labels = {t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "op_label"}
    assert names[longest.node] in labels and labels <= set(names)
    with pytest.raises(A.AccelsimError, match="layers names 2 nodes"):
        write_perfetto(result, tmp_path / "t.json", layers=["a", "b"])


def _compile_each_step_once(monkeypatch) -> list:
    """Let `accelsim run` compile a step (same graph, hardware, options and limits) once per test: the second
    run reuses the first's schedule. Returns the log of (graph hash, reused) per call."""
    compiled, log = {}, []
    real = sched_cmds.compile_schedule

    def once(graph, hw, options, **kwargs):
        key = (graph_hash(graph), hw_hash(hw), options, repr(sorted(kwargs.items())))
        log.append((key[0], key in compiled))
        if key not in compiled:
            compiled[key] = real(graph, hw, options, **kwargs)
        return compiled[key]

    monkeypatch.setattr(sched_cmds, "compile_schedule", once)
    return log


def test_cli_report_csv_and_json_round_trip(step, tmp_path, capsys, monkeypatch):
    """The CSV run (simulated) and the JSON run (--no-sim) compile the same step: the JSON run reuses the
    CSV run's schedule, whose report the CSV rows already matched against the library's."""
    schedule, _, _, _, report = step
    compiles = _compile_each_step_once(monkeypatch)
    out = tmp_path / "rep"
    assert main(["run", *RESNET_ARGS, "--out", str(tmp_path / "plots"), "--report", str(out / "r.csv")]) == 0
    printed = capsys.readouterr().out
    assert "top 10 layers by time" in printed and "top 10 layers by dynamic energy" in printed
    assert report.top_by_time(1)[0].layer in printed
    with open(out / "r.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["layer"] for r in rows] == [r.layer for r in report.layers]
    assert [int(r["busy_cycles"]) for r in rows] == [r.work.busy_cycles for r in report.layers]
    assert [float(r["energy_pj"]) for r in rows] == pytest.approx([r.total_energy_pj for r in report.layers])
    assert main(["run", *RESNET_ARGS, "--no-sim", "--report", str(out / "r.json")]) == 0
    data = json.loads((out / "r.json").read_text())
    compiled = layer_report(*step[:3])
    assert data == json.loads(report_text(compiled, ".json"))
    assert data["layers"][0]["nodes"][0]["node"] == compiled.layers[0].nodes[0].node
    assert compiles == [(schedule.graph_hash, False), (schedule.graph_hash, True)]


@pytest.mark.parametrize("where, match", [
    ("{dir}/", "is a directory"),
    ("{file}/r.csv", "is an existing file, not a directory"),
    ("{dir}/r.txt", "must end in .csv or .json"),
    ("{fifo}", "is a named pipe"),
])
def test_bad_report_paths_are_refused_in_one_paragraph_before_any_work(where, match, tmp_path, capsys):
    paths = {"dir": tmp_path / "d.csv", "file": tmp_path / "f", "fifo": tmp_path / "p.json"}
    paths["dir"].mkdir()
    paths["file"].write_text("x")
    os.mkfifo(paths["fifo"])
    target = where.format(**paths).rstrip("/")
    code = main(["run", "--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4", "--no-sim",
                 "--report", target])
    err = capsys.readouterr()
    assert code == 1 and match in err.err and "Traceback" not in err.err
    assert "compiled" not in err.out  # refused before compiling
    with pytest.raises(ReportPathError, match=match):
        write_layer_report(step_report_stub(), target)


def step_report_stub():
    """An empty report: the writer refuses the path before it looks at the report."""
    from accelsim.per_layer import LayerReport
    return LayerReport("g", "hw", "compiled", (), None)
