"""Running sweeps: one typed row per point, failures recorded without stopping the sweep, resumable
after a rerun or kill -9, and the same table whichever executor (in-process, process pool, Dask) ran it."""
import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

import accelsim as A
from accelsim import models
from accelsim.cli import main
from accelsim.dse import METRICS, compile_point, evaluate_point, load_spec, run_sweep
from accelsim.dse.evaluate import spec_payload

# the `sweep` extra (CI installs it, with `dask`): skipped only where it is absent
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pandas")
pytest.importorskip("optuna")

SMALL_MLP = {"model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]}}
GRID = {"hw": "groq_like", **SMALL_MLP, "parameters": {"model.batch": [2, 4], "options.microbatches": [1, 2]}}
OPTUNA = {"hw": "groq_like", **SMALL_MLP,
          "parameters": {"chips.0.memories.mem.capacity_bytes": [2000, 10**8],  # 2000 B: no room for the step
                         "chips.0.units.mxm.array.rows": {"low": 16, "high": 320, "int": True, "log": True},
                         "options.microbatches": [1, 2, 4]},
          "search": {"method": "optuna", "points": 8, "batch": 4, "seed": 5,
                     "objectives": {"throughput_samples_per_s": "max", "tasks": "min"}},
          "constraints": ["fits", "peak_memory_fraction < 0.5"]}


def without_wall_time(table: pa.Table) -> pa.Table:
    return table.drop(["wall_s"])


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def same_table(a: pa.Table, b: pa.Table) -> bool:
    """Equal schemas and bytes (Table.equals never finds a NaN equal to a NaN)."""
    return a.schema == b.schema and parquet_bytes(a) == parquet_bytes(b)


def test_grid_gives_one_typed_row_per_point_in_generation_order():
    df = A.sweep(GRID)
    metrics = [m for m, d in METRICS.items() if d.needs is None or d.needs == "simulate"]
    assert list(df.columns) == ["point", "point_id", "config_hash", "model.batch", "options.microbatches",
                                *metrics, "feasible", "violated", "error", "wall_s"]
    assert list(df["point"]) == [0, 1, 2, 3]
    assert list(zip(df["model.batch"], df["options.microbatches"])) == [(2, 1), (2, 2), (4, 1), (4, 2)]
    assert str(df["model.batch"].dtype) == "int64" and str(df["makespan_cycles"].dtype) == "float64"
    assert df["feasible"].all() and (df["error"] == "").all() and (df["violated"] == "").all() and df["point_id"].is_unique
    assert df["config_hash"].nunique() == 1  # the hardware is the same at every point
    assert (df["simulated_makespan_cycles"] == df["makespan_cycles"]).all()


def test_a_row_holds_what_compiling_its_point_gives():
    spec = load_spec(GRID)
    df = A.sweep(spec)
    params = {"model.batch": 4, "options.microbatches": 2}
    schedule, hw, graph = compile_point(spec, params)
    summary = A.run_summary(schedule, hw)
    row = df[(df["model.batch"] == 4) & (df["options.microbatches"] == 2)].iloc[0]
    assert row["makespan_cycles"] == schedule.makespan_cycles and row["tasks"] == len(schedule.tasks)
    assert row["throughput_samples_per_s"] == summary["throughput_samples_per_s"]
    assert row["peak_memory_bytes"] == max(summary["peak_memory_bytes"].values())
    assert graph.optimizer is not None  # a training step by default, as `accelsim run` compiles


def test_compile_point_takes_a_results_row_and_refuses_keys_the_spec_lacks():
    df = A.sweep(GRID)
    row = df.iloc[3]
    schedule, _, _ = compile_point(load_spec(GRID), {k: row[k] for k in GRID["parameters"]})  # numpy scalars
    assert schedule.makespan_cycles == row["makespan_cycles"]
    with pytest.raises(A.SweepError, match="'model.width' is not a parameter of sweep 'sweep'"):
        compile_point(load_spec(GRID), {"model.width": 4})


def test_failed_points_are_recorded_and_the_sweep_finishes():
    spec = {"hw": "groq_like", **SMALL_MLP, "constraints": ["fits"],
            "parameters": {"chips.0.memories.mem.capacity_bytes": [2000, 10**8], "options.microbatches": [1, 2]}}
    df = A.sweep(spec)
    failed = df[df["chips.0.memories.mem.capacity_bytes"] == 2000]
    assert len(df) == 4 and len(failed) == 2
    assert failed["error"].str.contains("no memory can hold").all() and not failed["feasible"].any()
    assert failed["makespan_cycles"].isna().all() and failed["config_hash"].notna().all()
    assert df[df["chips.0.memories.mem.capacity_bytes"] == 10**8]["feasible"].all()


def test_an_unexpected_exception_costs_its_point_and_keeps_its_message(monkeypatch):
    spec = load_spec(GRID)

    def broken_build(name, **options):
        raise RuntimeError("boom")

    monkeypatch.setattr(models, "build", broken_build)
    record = evaluate_point(spec_payload(spec), {"model.batch": 2, "options.microbatches": 1})
    assert record["error"] == "internal error: RuntimeError: boom"
    assert record["feasible"] is False and record["config_hash"] is not None and record["wall_s"] >= 0


def test_constraints_mark_points_infeasible():
    spec = {**GRID, "constraints": ["fits", "tasks <= 30"]}
    df = A.sweep(spec)
    assert list(df["feasible"]) == list(df["tasks"] <= 30) and not df["feasible"].all() and df["feasible"].any()


def test_rerun_reuses_every_point_and_writes_the_same_table(tmp_path):
    first = run_sweep(GRID, out=tmp_path)
    assert (first.new, first.reused) == (4, 0)
    before = (tmp_path / "results.parquet").read_bytes()
    stray = tmp_path / "points" / ".0123456789abcdef.json.999.tmp"
    stray.write_text('{"half a')  # what kill -9 leaves behind mid-write
    again = run_sweep(GRID, out=tmp_path)
    assert (again.new, again.reused) == (0, 4)
    assert (tmp_path / "results.parquet").read_bytes() == before  # wall_s too: it is the stored one
    assert yaml.safe_load((tmp_path / "spec.yaml").read_text())["parameters"] == GRID["parameters"]


def test_a_damaged_point_file_is_evaluated_again(tmp_path):
    run_sweep(GRID, out=tmp_path)
    damaged = sorted((tmp_path / "points").glob("*.json"))[0]
    damaged.write_text("{not json")
    again = run_sweep(GRID, out=tmp_path)
    assert (again.new, again.reused) == (1, 3)


@pytest.mark.parametrize("tamper", [
    lambda d: d["metrics"].update(makespan_cycles="oops"),  # a metric that is not a number
    lambda d: d["metrics"].update(makespan_cycles=True),  # a bool where a number belongs
    lambda d: d.update(feasible="yes"),
    lambda d: d.update(error=None),
    lambda d: d.update(params={"model.batch": 999, "options.microbatches": 1}),  # another point's values
    lambda d: d.update(point_id="0" * 16),
    lambda d: d.update(version=0),
    lambda d: d.update(metrics=[1, 2]),
    lambda d: d.clear(),
])
def test_a_tampered_point_file_is_evaluated_again_not_trusted(tamper, tmp_path):
    import json

    first = run_sweep(GRID, out=tmp_path)
    path = sorted((tmp_path / "points").glob("*.json"))[0]
    data = json.loads(path.read_text())
    tamper(data)
    path.write_text(json.dumps(data))
    again = run_sweep(GRID, out=tmp_path)
    assert (again.new, again.reused) == (1, 3)
    assert again.results.drop(columns="wall_s").equals(first.results.drop(columns="wall_s"))


def test_optuna_resume_replays_the_study_from_the_store(tmp_path):
    full = run_sweep(OPTUNA, out=tmp_path)
    assert full.failed > 0 and full.new == len(full.results)  # the 2000-byte memory fails: told as FAIL
    for path in sorted((tmp_path / "points").glob("*.json"))[::2]:
        path.unlink()
    again = run_sweep(OPTUNA, out=tmp_path)
    assert again.new > 0 and again.reused > 0
    assert again.results.drop(columns="wall_s").equals(full.results.drop(columns="wall_s"))


def test_the_cli_prints_a_summary(tmp_path, capsys):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(GRID))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "sweep grid: 4 points (4 new, 0 reused; 0 failed, 0 infeasible)" in out
    assert f"results: {tmp_path / 'out' / 'results.parquet'}" in out


@pytest.mark.timeout(600)  # a hang guard (the child never finishing a point), not a speed limit: ~45 s idle
def test_kill_9_then_rerun_finishes_every_point_once(tmp_path):
    spec = {"hw": "tpu_v1_like", **SMALL_MLP,  # about 0.3 s a point: time to kill it midway
            "parameters": {"chips.0.units.mxu.array.rows": [16, 32, 64, 128, 256], "options.microbatches": [1, 2]}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "accelsim", "sweep", str(path), "--out", str(out), "--workers", "1",
                             "--no-plots"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while len(list((out / "points").glob("*.json"))) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = len(list((out / "points").glob("*.json")))
    assert 2 <= finished < 10
    resumed = run_sweep(path, out=out)
    assert resumed.reused >= finished and resumed.new == 10 - resumed.reused
    table = pq.read_table(out / "results.parquet")
    assert sorted(table["point"].to_pylist()) == list(range(10))
    clean = run_sweep(path, out=tmp_path / "clean")
    assert same_table(without_wall_time(table), without_wall_time(pq.read_table(clean.results_path)))


def test_process_pool_dask_and_in_process_give_the_same_table(tmp_path):
    pytest.importorskip("dask.distributed")
    tables = {}
    for name, kwargs in {"in_process": {}, "pool": {"workers": 2}, "dask": {"workers": 2, "dask": "local"}}.items():
        run = run_sweep(OPTUNA, out=tmp_path / name, **kwargs)
        assert run.new == len(run.results)
        tables[name] = without_wall_time(pq.read_table(run.results_path))
    assert tables["in_process"].num_rows == OPTUNA["search"]["points"]
    assert same_table(tables["pool"], tables["in_process"]) and same_table(tables["dask"], tables["in_process"])


@pytest.mark.timeout(300)  # a hang guard, not a speed limit: ~5 s idle
def test_an_unreachable_dask_scheduler_is_one_paragraph_after_a_short_connect_timeout(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(GRID))
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--dask", "tcp://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach a Dask scheduler" in err and "--dask local" in err and "Traceback" not in err
    # how long it waited, as the bound it gave Dask's connect (not timed here: a busy machine stretches that)
    within = re.search(r"within ([0-9.]+) s", err)
    assert within and 0 < float(within.group(1)) <= 10, err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("bad", [0, 2.5, "2"])
def test_workers_must_be_a_positive_integer(bad):
    with pytest.raises(A.SweepError, match="workers must be an integer"):
        A.sweep(GRID, workers=bad)


def test_a_tied_parameter_sets_every_path_it_names():
    """"rows, cols": [..] sweeps square arrays: each point's hardware has both set to the value."""
    key = "chips.0.units.mxm.array.rows, chips.0.units.mxm.array.cols"
    spec = load_spec({"hw": "groq_like", **SMALL_MLP, "parameters": {key: [16, 64]}, "options": {"simulate": False}})
    for side in (16, 64):
        _, hw, _ = compile_point(spec, {key: side})
        array = next(u for u in hw.chips[0].units if u.name == "mxm").array
        assert (array.rows, array.cols) == (side, side)
    results = run_sweep(spec).results
    assert list(results[key]) == [16, 64] and results["error"].eq("").all()
    # the two points compiled different hardware: a 64x64 array takes longer to fill and drain on this tiny MLP
    assert results["config_hash"].nunique() == 2
    assert results["makespan_cycles"].iloc[0] < results["makespan_cycles"].iloc[1]
