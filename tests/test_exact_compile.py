"""compile(..., exact=...): CP-SAT on small training steps, seeded with the list schedule; the proved bound
and gap recorded in the schedule, validated on load, reproducible byte for byte; refusals; the CLI."""
from __future__ import annotations

import json
import math

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.compiler.exact import MAX_EXACT_TASKS
from accelsim.compiler.planning.expand import expand
from accelsim.schedule.io import read_schedule, save_schedule
from accelsim.api import load_schedule
from accelsim.schedule.options import StepOptions

pytest.importorskip("ortools.sat.python.cp_model", reason="OR-Tools not installed (pip install accelsim[exact])")

MLP = {"batch": 2, "sizes": (16, 8, 4)}
MLP_ARGS = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]


def _step(model: str = "mlp", **options) -> A.Graph:
    return A.training_graph(A.models.build(model, **(options or MLP)))


def test_exact_proves_a_tiny_step_optimal_and_never_lengthens_the_list_schedule():
    graph, step = _step(), {"microbatches": 2, "data_parallel": 2}
    listed = A.compile(graph, "groq_like_x4", **step)
    exact = A.compile(graph, "groq_like_x4", **step, exact=5)
    report = exact.exact
    assert report.status == "optimal" and report.gap == 0.0
    assert report.bound_cycles == exact.makespan_cycles <= listed.makespan_cycles == report.list_makespan_cycles
    assert listed.exact is None


@pytest.mark.parametrize(("hw", "model", "options", "step"), [
    ("groq_like_x4", "mlp", MLP, {"microbatches": 2, "data_parallel": 2}),  # all-reduce over chips
    ("groq_like_x4", "mlp", MLP, {"microbatches": 2, "pipeline_stages": 2}),  # transfers over a link
    ("multicore_cpu", "mlp", MLP, {"microbatches": 2}),  # 8 instances, a shared memory port
    ("bespoke_superres", "superres", {"size": 8}, {}),  # tasks with two candidate units
])
def test_exact_is_a_valid_schedule_no_longer_than_the_list_schedule_above_its_bound(hw, model, options, step,
                                                                                   tmp_path):
    graph = _step(model, **options)
    listed = A.compile(graph, hw, **step)
    exact = A.compile(graph, hw, **step, exact=0.5)
    report = exact.exact
    assert max(exact.bounds.bound_cycles, 1) <= report.bound_cycles <= exact.makespan_cycles <= listed.makespan_cycles
    assert math.isclose(report.gap, (exact.makespan_cycles - report.bound_cycles) / exact.makespan_cycles)
    save_schedule(exact, tmp_path / "exact.json")  # validated against the graph and hardware on the way back
    loaded = load_schedule(tmp_path / "exact.json", graph, A.load_hw(hw))
    assert (loaded.exact, loaded.tasks) == (report, exact.tasks)
    assert A.simulate(exact).makespan_cycles == exact.makespan_cycles  # replays as compiled


def test_a_rerun_writes_a_byte_identical_schedule(tmp_path):
    """The budget is CP-SAT's deterministic time: a solve it stops (this one ends unproved) still repeats."""
    graph = _step()
    for name in ("a.json", "b.json"):
        save_schedule(A.compile(graph, "groq_like", microbatches=2, data_parallel=2, exact=0.3), tmp_path / name)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_a_step_above_the_task_limit_is_refused_naming_its_size_before_any_solve(monkeypatch):
    def no_solve(*args, **kwargs):
        raise AssertionError("the exact mode built a model for a step above its limit")

    monkeypatch.setattr("accelsim.compiler.exact_step.solve_tasks_exact", no_solve)
    graph, hw = _step(), A.load_hw("groq_like")
    microbatches = MAX_EXACT_TASKS // 16
    tasks = len(expand(graph, hw, StepOptions(microbatches=microbatches)).tasks)
    assert tasks > MAX_EXACT_TASKS
    with pytest.raises(A.AccelsimError, match=f"at most {MAX_EXACT_TASKS:,} tasks.*has {tasks:,} tasks.*fewer "
                                              "micro-batches"):
        A.compile(graph, hw, microbatches=microbatches, exact=1)


@pytest.mark.parametrize("value", [0, -1, 0.0, math.nan, math.inf, -math.inf, 1e9, "5", None, [1], 1j])
def test_exact_must_be_a_flag_or_a_positive_finite_number_of_seconds(value):
    with pytest.raises(A.AccelsimError, match=r"exact must be False .* True .* or a number of seconds"):
        A.compile(_step(), "groq_like", exact=value)


def test_old_schedules_without_a_report_still_load():
    assert read_schedule("schedules/superres_train_groq_like.json").exact is None


@pytest.mark.parametrize(("field", "value", "match"), [
    ("bound_cycles", "makespan+1", "is above makespan_cycles"),
    ("bound_cycles", 0, "below bounds.bound_cycles"),
    ("gap", 0.5, "exact.gap is 0.5"),
    ("status", "feasible", "exact.status is 'feasible'"),
    ("list_makespan_cycles", 1, "exact.list_makespan_cycles 1 is below"),
])
def test_a_tampered_report_is_refused_on_load(field, value, match, tmp_path):
    graph = _step()
    path = tmp_path / "s.json"
    save_schedule(A.compile(graph, "groq_like", exact=5), path)
    data = json.loads(path.read_text())
    assert data["exact"]["status"] == "optimal"
    data["exact"][field] = data["makespan_cycles"] + 1 if value == "makespan+1" else value
    path.write_text(json.dumps(data))
    with pytest.raises(A.AccelsimError, match=match):
        load_schedule(path)


@pytest.mark.parametrize(("field", "value", "match"), [
    ("gap", math.nan, "NaN is not allowed"), ("gap", 1.5, "exact.gap"), ("time_limit_s", math.inf, "Infinity"),
    ("time_limit_s", 0, "exact.time_limit_s"), ("status", "best", "exact.status"),
])
def test_a_report_with_values_out_of_range_is_refused(field, value, match, tmp_path):
    path = tmp_path / "s.json"
    save_schedule(A.compile(_step(), "groq_like", exact=5), path)
    data = json.loads(path.read_text())
    data["exact"][field] = value
    path.write_text(json.dumps(data))  # writes NaN and Infinity as JSON never does
    with pytest.raises(A.AccelsimError, match=match):
        load_schedule(path)


def test_cli_compile_exact_prints_the_bound_and_gap_and_saves_the_report(tmp_path, capsys):
    path = tmp_path / "s.json"
    argv = ["compile", *MLP_ARGS, "--hw", "groq_like", "--microbatches", "2", "--data-parallel", "2",
            "--exact", "0.5", "-o", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    report = load_schedule(path).exact
    assert report is not None and report.time_limit_s == 0.5
    assert f"bound {report.bound_cycles:,}" in out
    assert ("exact: optimal (proved)" in out) if report.status == "optimal" else (
        f"exact: within {100 * report.gap:.2f}% of optimal" in out)


def test_cli_run_with_a_bare_exact_uses_the_default_budget_and_reports_it(tmp_path, capsys):
    path = tmp_path / "run.json"
    assert main(["run", *MLP_ARGS, "--hw", "groq_like", "--no-sim", "--exact", "--json", str(path)]) == 0
    assert "exact: optimal (proved)" in capsys.readouterr().out
    assert json.loads(path.read_text())["exact"]["time_limit_s"] == 10.0


@pytest.mark.parametrize("command", ["compile", "run", "check"])
@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf", "fast", "1e9"])
def test_cli_exact_refuses_bad_seconds_with_exit_2(command, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, *MLP_ARGS, "--exact", value])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "argument --exact" in err and repr(value) in err and "Traceback" not in err
