"""Step 7's metrics: MAC utilization, achieved and peak TOPS, peak memory and latency as run_summary defines
them, checked against hand counts on tiny graphs and against counts made without the scheduler's tasks.

The toy machine: 1 GHz, one 8 x 8 systolic array "mxu" (64 MACs = 128 ops per cycle, 0.128 TOPS) that runs
matmul, one 16-lane vector unit "vpu" (16 ops per cycle, 0.016 TOPS), one SRAM with a wide port."""
import json
import re

import pytest

import accelsim as A
from accelsim import metrics
from accelsim import ops as F
from accelsim.cost.model import graph_costs
from accelsim.report import run_summary
from accelsim.compiler import compile
from accelsim.sim.engine import simulate
from accelsim.viz.timeline import format_bytes, plot_memory

M, K, N = 64, 32, 16  # x (M, K) @ w (K, N)
ROWS = COLS = 8
LANES = 16
RATE_KEYS = {"mac_utilization", "achieved_tops", "peak_tops"}


def toy_hw(chips=1):
    spec = {"name": f"toy_array_x{chips}", "clock_hz": 1e9, "chips": [{"count": chips, "units": [
        {"name": "mxu", "ops": ["matmul"], "array": {"rows": ROWS, "cols": COLS, "dataflow": "os"},
         "reads": ["sram"], "writes": ["sram"]},
        {"name": "vpu", "categories": ["elementwise"], "vector": {"lanes": LANES},
         "reads": ["sram"], "writes": ["sram"]}],
        "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": 1 << 22, "bandwidth_bytes_per_cycle": 1024}]}]}
    if chips > 1:
        spec["interconnect"] = {"topology": "ring", "bandwidth_bytes_per_cycle": 16}
    return A.hw.parse_hw(spec)


def one_matmul(relu=False):
    g = A.Graph("mm")
    y = F.matmul(g.input("x", (M, K)), g.input("w", (K, N)))
    if relu:
        F.relu(y)
    return g


@pytest.fixture(scope="module")
def mlp_step():
    """The training step `accelsim run --hw groq_like --model mlp --set batch=4 --microbatches 2` compiles."""
    hw = A.load_hw("groq_like")
    return A.compile(A.training_graph(A.models.build("mlp", batch=4)), hw, microbatches=2), hw


def test_one_matmul_on_one_array_matches_the_hand_count():
    hw = toy_hw()
    sched = compile(one_matmul(), hw)
    s = run_summary(sched, hw)
    cycles, seconds = sched.makespan_cycles, sched.makespan_cycles / 1e9
    macs = M * K * N  # 32,768 useful MACs
    mxu = s["per_unit"]["mxu"]
    assert mxu["mac_utilization"] == pytest.approx(macs / (ROWS * COLS * cycles))
    assert mxu["achieved_tops"] == pytest.approx(2 * macs / seconds / 1e12)
    assert mxu["peak_tops"] == pytest.approx(2 * ROWS * COLS * 1e9 / 1e12) == pytest.approx(0.128)
    assert s["per_unit"]["vpu"] == {"mac_utilization": 0.0, "achieved_tops": 0.0, "peak_tops": pytest.approx(0.016)}
    # overall: the same work against both units' peak
    assert s["peak_tops"] == pytest.approx(0.144)
    assert s["achieved_tops"] == pytest.approx(mxu["achieved_tops"])
    assert s["mac_utilization"] == pytest.approx(2 * macs / ((2 * ROWS * COLS + LANES) * cycles))
    assert s["mac_utilization"] == pytest.approx(s["achieved_tops"] / s["peak_tops"])
    assert s["per_chip"] == {"chip0": {k: pytest.approx(s[k]) for k in RATE_KEYS}}
    # MAC utilization cannot exceed occupancy: a busy array is not always a full one
    assert mxu["mac_utilization"] <= s["utilization"]["mxu"] == 1.0


def test_work_on_two_unit_kinds_is_counted_on_each():
    hw = toy_hw()
    sched = compile(one_matmul(relu=True), hw)
    s = run_summary(sched, hw)
    cycles = sched.makespan_cycles
    assert s["per_unit"]["mxu"]["mac_utilization"] == pytest.approx(2 * M * K * N / (2 * ROWS * COLS * cycles))
    assert s["per_unit"]["vpu"]["mac_utilization"] == pytest.approx(M * N / (LANES * cycles))  # relu: 1 op/element
    assert s["mac_utilization"] == pytest.approx((2 * M * K * N + M * N) / ((2 * ROWS * COLS + LANES) * cycles))


def test_per_chip_splits_the_work_of_two_replicas():
    hw = toy_hw(chips=2)
    sched = compile(one_matmul(), hw, data_parallel=2)
    s = run_summary(sched, hw)
    seconds = sched.makespan_cycles / 1e9
    assert sorted(s["per_chip"]) == ["chip0", "chip1"]
    for chip in s["per_chip"].values():
        assert chip["achieved_tops"] == pytest.approx(2 * M * K * N / seconds / 1e12)
        assert chip["peak_tops"] == pytest.approx(0.144)
    assert s["peak_tops"] == pytest.approx(0.288)
    assert s["per_unit"]["mxu"]["peak_tops"] == pytest.approx(0.256)  # both chips' arrays
    assert s["achieved_tops"] == pytest.approx(2 * 2 * M * K * N / seconds / 1e12)


@pytest.mark.parametrize("training, microbatches", [(False, 2), (True, 1)])
def test_achieved_ops_equal_the_graph_flops_counted_without_the_scheduler(training, microbatches):
    hw = A.load_hw("groq_like")
    graph = A.models.build("mlp", batch=4)
    if training:
        graph = A.training_graph(graph)
    sched = A.compile(graph, hw, microbatches=microbatches)
    s = run_summary(sched, hw)
    # graph_costs prices every node from the op registry alone; with one micro-batch nothing is accumulated
    expected_ops = microbatches * sum(c.flops for c in graph_costs(hw, graph))
    assert s["achieved_tops"] * 1e12 * s["makespan_s"] == pytest.approx(expected_ops, rel=1e-9)
    assert s["ops_per_step"] == expected_ops
    # the parts add up to the whole
    assert sum(u["achieved_tops"] for u in s["per_unit"].values()) == pytest.approx(s["achieved_tops"])
    assert sum(u["peak_tops"] for u in s["per_unit"].values()) == pytest.approx(s["peak_tops"])
    # groq_like: 4 MXM planes of 320 x 320 and a 320-lane x 16-op VXM at 900 MHz; the stream SXM has no peak
    assert s["peak_tops"] == pytest.approx((4 * 2 * 320 * 320 + 320 * 16) * 0.9e9 / 1e12)
    assert sorted(s["per_unit"]) == ["mxm", "vxm"]
    for unit, rates in s["per_unit"].items():
        assert 0 < rates["mac_utilization"] <= s["utilization"][unit] <= 1


def independent_peaks(schedule) -> dict[str, int]:
    """Most bytes live at once per (chip, memory), swept over the placed tensors' half-open intervals."""
    events: dict[str, list[tuple[int, int]]] = {}
    for x in schedule.tensors:
        ev = events.setdefault(f"chip{x.chip}:{x.memory}", [])
        ev += [(x.start, x.size_bytes), (x.end, -x.size_bytes)]
    out = {}
    for label, ev in events.items():
        live = peak = 0
        for _, delta in sorted(ev, key=lambda e: (e[0], e[1] > 0)):  # frees first at equal times
            live += delta
            peak = max(peak, live)
        out[label] = peak
    return out


def test_peak_memory_is_the_hand_count_and_the_static_replays_peak():
    hw = toy_hw()
    sched = compile(one_matmul(), hw)
    s = run_summary(sched, hw)
    assert s["peak_memory_bytes"] == {"chip0:sram": (M * K + K * N + M * N) * 4}  # x, w and y live at once
    res = simulate(sched, hw)
    assert metrics.peak_memory_bytes(res.memories) == s["peak_memory_bytes"]


def test_peak_memory_is_defined_once_for_the_summary_the_schedule_and_the_replay(mlp_step):
    sched, hw = mlp_step
    s = run_summary(sched, hw)
    assert s["peak_memory_bytes"] == dict(sched.peak_memory_bytes)  # the value run_summary always had
    assert {k: v for k, v in independent_peaks(sched).items()} == {k: v for k, v in s["peak_memory_bytes"].items() if v}
    assert metrics.peak_memory_bytes(simulate(sched, hw).memories) == s["peak_memory_bytes"]
    assert "per memory instance" in s["peak_memory_definition"] and "2**20" in s["peak_memory_definition"]


def memory_plot_peaks(result) -> dict[str, str]:
    """Memory label -> the peak its legend entry shows ("1.777 MiB"), over the plot's panels (one per level)."""
    out = {}
    for ax in plot_memory(result).axes:
        for t in ax.get_legend().get_texts():
            found = re.fullmatch(r"(\S+): peak ([\d.,]+ (?:B|KiB|MiB|GiB)) of .*", t.get_text())
            if found:
                out[found[1]] = found[2]
    return out


BINARY = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def test_the_terminal_the_json_and_the_memory_plot_show_the_same_peak(mlp_step, tmp_path, capsys):
    from accelsim.cli import main

    out, js = tmp_path / "plots", tmp_path / "run.json"
    assert main(["run", "--hw", "groq_like", "--model", "mlp", "--set", "batch=4", "--microbatches", "2",
                 "--out", str(out), "--json", str(js)]) == 0
    terminal = capsys.readouterr().out
    saved = json.loads(js.read_text())
    sched, hw = mlp_step
    assert (sched.makespan_cycles, len(sched.tasks)) == (saved["makespan_cycles"], saved["tasks"])  # the same run
    summary = run_summary(sched, hw)
    assert saved["peak_memory_bytes"] == summary["peak_memory_bytes"]
    shown = memory_plot_peaks(simulate(sched, hw))
    assert shown and shown.keys() == {k for k, v in summary["peak_memory_bytes"].items() if v}
    for label, text in shown.items():
        peak = summary["peak_memory_bytes"][label]
        assert text == format_bytes(peak)
        # the terminal's figure, in whatever binary prefix it picks, rounds the same bytes (not 10**6 B per MB)
        printed = re.search(rf"{re.escape(label)}\W+([\d.,]+) (B|KiB|MiB|GiB)\b", terminal)
        assert printed, f"no peak printed for {label}"
        value = float(printed[1].replace(",", "")) * BINARY[printed[2]]
        assert value == pytest.approx(peak, rel=1e-3)


def test_latency_is_defined_and_unchanged(mlp_step):
    sched, hw = mlp_step
    s = run_summary(sched, hw)
    assert s["latency_s"] == metrics.mean_latency_cycles(sched.tasks, sched.makespan_cycles) / sched.clock_hz
    assert s["latency_s"] < s["makespan_s"]  # two inputs in flight; the update belongs to neither
    assert "(micro-batch, replica)" in s["latency_definition"] and "not the makespan" in s["latency_definition"]
    assert "2 ops" in s["tops_definition"]


def test_the_summary_with_its_new_keys_is_deterministic_json():
    hw = toy_hw(chips=2)
    sched = compile(one_matmul(relu=True), hw, data_parallel=2)
    first, second = (json.dumps(run_summary(sched, hw).to_dict(), sort_keys=True) for _ in range(2))
    assert first == second
    loaded = json.loads(first)
    for key in ("mac_utilization", "achieved_tops", "peak_tops"):
        assert isinstance(loaded[key], float)
    for group in ("per_unit", "per_chip"):
        assert all(set(v) == RATE_KEYS for v in loaded[group].values())
