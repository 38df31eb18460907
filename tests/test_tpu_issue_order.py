"""In-order issue (hw: a chip's `issue: in_order`, schedule/issue_order.py): TPU v1 runs one instruction stream, so
its tasks start in program order; the scheduler, the validator and the dynamic runtime keep the same rule, and the
key is refused where it means nothing or is not modelled."""
import importlib.util
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim.errors import HwConfigError, ScheduleError
from accelsim.hw.overrides import parse_assignments
from accelsim.schedule.issue_order import issue_order_problems

if "tpu_lstm" not in sys.modules:  # experiments/tpu_lstm.py, loaded once (its dataclass needs its module there)
    _spec = importlib.util.spec_from_file_location(
        "tpu_lstm", Path(__file__).resolve().parent.parent / "experiments" / "tpu_lstm.py")
    sys.modules["tpu_lstm"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["tpu_lstm"])
lstm_stack = sys.modules["tpu_lstm"].lstm_stack


@pytest.fixture(scope="module")
def lstm():
    """One small LSTM layer over two steps (one 256x256 weight tile per product), compiled on tpu_v1_like as
    shipped (in order) and with `issue: dataflow`."""
    g = lstm_stack(hidden=256, cells=1, batch=16, steps=2)
    in_order = A.load_hw("tpu_v1_like")
    dataflow = A.load_hw("tpu_v1_like", overrides=parse_assignments(["chips.0.issue=dataflow"]))
    return g, in_order, A.compile(g, in_order, effort="fast"), A.compile(g, dataflow, effort="fast")


def test_tpu_v1_like_issues_in_order():
    assert A.load_hw("tpu_v1_like").chips[0].issue == "in_order"
    assert A.load_hw("groq_like").chips[0].issue == "dataflow"  # the default


def test_an_in_order_chip_starts_its_tasks_in_program_order_and_waits_longer(lstm):
    g, _, in_order, dataflow = lstm
    starts = [t.start for t in in_order.tasks]
    assert starts == sorted(starts)
    # dataflow starts the next step's input products (x_t @ W) while the cell still finishes: out of program order
    assert issue_order_problems(dataflow.tasks, frozenset({0}), str)
    assert in_order.makespan_cycles > dataflow.makespan_cycles


def test_in_order_holds_back_the_next_weights_behind_the_cell(lstm):
    """Step 1's first prefetch (Read_Weights) follows step 0's last cell op (h_0 = o * tanh(c_0)) in program order,
    so the weight stream idles from step 0's last product until that op starts."""
    g, _, sched, _ = lstm
    h0 = next(n for n in g.nodes if n.op == "matmul" and g.nodes[n.inputs[0]].op == "mul").inputs[0]
    h0_task = next(t for t in sched.tasks if t.kind == "node" and t.node == h0)
    after = [t for t in sched.tasks if t.kind == "prefetch" and t.id > h0_task.id]
    before = [t for t in sched.tasks if t.kind == "node" and t.op == "matmul" and t.id < h0_task.id]
    assert after[0].start >= h0_task.start > max(t.end for t in before)
    assert not [t for t in sched.tasks if t.kind == "prefetch" and max(x.end for x in before) < t.start < h0_task.start]


def test_the_validator_names_a_task_that_starts_before_the_one_ahead_of_it(lstm):
    _, _, _, dataflow = lstm
    problems = issue_order_problems(dataflow.tasks, frozenset({0}), lambda t: f"task {t.id}")
    assert problems and all("ahead of it in program order" in p and "issue: in_order" in p for p in problems)
    assert issue_order_problems(dataflow.tasks, frozenset(), str) == []  # a dataflow chip has no such rule


def test_the_dynamic_runtime_keeps_program_order_and_agrees_with_the_replay(lstm):
    g, hw, sched, _ = lstm
    static = A.simulate(sched, hw, graph=g)
    dynamic = A.simulate(sched, hw, mode="dynamic", graph=g)
    starts = [s.start for s in sorted(dynamic.spans, key=lambda s: s.task)]
    assert starts == sorted(starts)
    assert dynamic.makespan_cycles == static.makespan_cycles == sched.makespan_cycles


def test_in_order_is_refused_on_a_gpu_like_chip():
    with pytest.raises(HwConfigError, match=r"issue.*GPU-like.*one compute stream"):
        A.load_hw("a100_like", overrides=parse_assignments(["chips.0.issue=in_order"]))


def test_an_unknown_issue_is_refused_naming_the_choices():
    with pytest.raises(HwConfigError, match=r"issue.*'dataflow' or 'in_order'"):
        A.load_hw("tpu_v1_like", overrides=parse_assignments(["chips.0.issue=out_of_order"]))


def test_in_order_over_several_chips_is_refused():
    hw = A.load_hw("tpu_v1_like", overrides=parse_assignments([
        "chips.0.count=2", "interconnect={topology: ring, bandwidth_bytes_per_s: 10 GB/s}"]))
    g = lstm_stack(hidden=8, cells=1, batch=2, steps=1)
    with pytest.raises(ScheduleError, match=r"issue: in_order is modelled on a one-chip step.*2 chip"):
        A.compile(g, hw, data_parallel=2, effort="fast")


def test_the_exact_mode_is_refused_on_an_in_order_chip():
    g = lstm_stack(hidden=8, cells=1, batch=2, steps=1)
    with pytest.raises(ScheduleError, match=r"exact mode does not model issue: in_order \(chip\(s\) tpu\)"):
        A.compile(g, A.load_hw("tpu_v1_like"), exact=True)
