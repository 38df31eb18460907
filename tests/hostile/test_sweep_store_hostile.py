"""A sweep's stored points are not trusted blindly: a point file edited (a metric set to 1e30 or NaN), cut
short, of the wrong type, from another point or another accelsim version, a symbolic link to /dev/zero, a
named pipe or a huge file is evaluated again, and the sweep names the point and why; the results table is
the one a clean run gives. Never a traceback, a hang or a stored number that was not computed."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from accelsim.dse import run_sweep
from accelsim.dse import runner
from accelsim.dse.point_file import MAX_POINT_FILE_BYTES, canonical_json

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("pandas")

pytestmark = pytest.mark.timeout(180)

GRID = {"hw": "groq_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"model.batch": [2, 4], "options.microbatches": [1, 2]}}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> tuple[Path, Any]:
    """A finished sweep directory and its results (wall_s dropped), made once for the module."""
    out = tmp_path_factory.mktemp("pristine") / "out"
    run = run_sweep(GRID, out=out)
    assert (run.new, run.reused) == (4, 0)
    return out, run.results.drop(columns="wall_s")


@pytest.fixture
def sweep_dir(pristine, tmp_path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(pristine[0], out)
    return out


def first_point(out: Path) -> Path:
    """The point file of the sweep's point 0."""
    table = pq.read_table(out / "results.parquet").to_pandas()
    return out / "points" / f"{table.loc[table['point'] == 0, 'point_id'].iloc[0]}.json"


def resign(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its checksum recomputed, as someone who knows the format would forge it."""
    body = {k: v for k, v in data.items() if k != "checksum"}
    return {**body, "checksum": hashlib.sha256(canonical_json(body).encode()).hexdigest()}


def rerun_evaluates_point_0_again(out: Path, pristine, *why: str | tuple[str, ...], hostile) -> None:
    """The rerun evaluates exactly point 0 again, names it and `why` in a note, and gives the clean table."""
    again = run_sweep(GRID, out=out)
    assert (again.new, again.reused) == (1, 3), again.notes
    assert len(again.notes) == 1, again.notes
    hostile.names(again.notes[0], "point 0 evaluated again", first_point(out).name, *why)
    assert again.results.drop(columns="wall_s").equals(pristine[1])
    table = pq.read_table(out / "results.parquet").to_pandas()
    assert table.drop(columns="wall_s").equals(pristine[1])


def edit_json(edit: Callable[[dict[str, Any]], Any], sign: bool = False) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(resign(data) if sign else data))
    return tamper


def write_bytes(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def symlink_to(target: str | Callable[[Path], str]) -> Callable[[Path], None]:
    def tamper(path: Path) -> None:
        where = target(path) if callable(target) else target
        path.unlink()
        os.symlink(where, path)
    return tamper


def fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def half(path: Path) -> None:
    text = path.read_bytes()
    path.write_bytes(text[: len(text) // 2])


def another_points_file(path: Path) -> None:
    other = next(p for p in sorted(path.parent.glob("*.json")) if p != path)
    shutil.copyfile(other, path)


TAMPERS: dict[str, tuple[Callable[[Path], None], tuple[str | tuple[str, ...], ...]]] = {
    "metric_1e30": (edit_json(lambda d: d["metrics"].update(makespan_cycles=1e30)), ("checksum",)),
    "metric_nan_string": (edit_json(lambda d: d["metrics"].update(makespan_cycles="nan")), ("checksum",)),
    "metric_nan_literal": (lambda p: p.write_text(p.read_text().replace('"makespan_cycles": ', '"makespan_cycles": NaN, "x": ')),
                           ("NaN",)),
    "metric_1e400_literal": (lambda p: p.write_text(p.read_text().replace('"tasks": ', '"tasks": 1e400, "x": ')),
                             (("checksum", "inf"),)),
    "forged_nan_metric": (edit_json(lambda d: d["metrics"].update(makespan_cycles="nan"), sign=True),
                          ("makespan_cycles", "nan")),
    "forged_inf_metric": (edit_json(lambda d: d["metrics"].update(throughput_samples_per_s="inf"), sign=True),
                          ("throughput_samples_per_s", "inf")),
    "forged_string_metric": (edit_json(lambda d: d["metrics"].update(tasks="many"), sign=True), ("tasks", "number")),
    "forged_huge_int_metric": (edit_json(lambda d: d["metrics"].update(tasks=10**400), sign=True),
                               (("digits", "valid JSON"),)),
    "forged_metrics_list": (edit_json(lambda d: d.update(metrics=[1, 2]), sign=True), ("metrics", "list")),
    "forged_fits_string": (edit_json(lambda d: d.update(fits="yes"), sign=True), ("fits", "wrong type")),
    "forged_negative_wall": (edit_json(lambda d: d.update(wall_s=-5.0), sign=True), ("wall_s",)),
    "forged_other_params": (edit_json(lambda d: d["params"].update({"model.batch": 999}), sign=True),
                            ("parameter values",)),
    "other_accelsim_version": (edit_json(lambda d: d.update(accelsim="0.0.1"), sign=True), ("accelsim", "0.0.1")),
    "other_store_version": (edit_json(lambda d: d.update(version=99), sign=True), ("store version",)),
    "checksum_removed": (edit_json(lambda d: d.pop("checksum")), ("checksum",)),
    "another_points_file": (another_points_file, ("point id",)),
    "truncated": (half, ("not valid JSON",)),
    "empty": (write_bytes(b""), ("empty",)),
    "whitespace": (write_bytes(b" \n\t\n"), ("empty",)),
    "json_list": (write_bytes(b"[1, 2, 3]"), ("list", "expected an object")),
    "json_string": (write_bytes(b'"a point"'), ("str", "expected an object")),
    "json_number": (write_bytes(b"1e30"), ("float", "expected an object")),
    "not_utf8": (write_bytes(b"\xff\xfe{\x00}"), ("UTF-8",)),
    "deep_nesting": (write_bytes(b"[" * 100_000 + b"]" * 100_000), (("valid JSON", "RecursionError"),)),
    "over_a_mebibyte": (write_bytes(b"{" + b" " * (MAX_POINT_FILE_BYTES + 10) + b"}"), ("1,048,576 bytes",)),
    "symlink_to_dev_zero": (symlink_to("/dev/zero"), ("symbolic link", "/dev/zero")),
    "symlink_to_a_valid_point": (symlink_to(lambda p: str(next(q for q in sorted(p.parent.glob("*.json")) if q != p))),
                                 ("symbolic link",)),
    "named_pipe": (fifo, ("named pipe",)),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_a_damaged_or_forged_point_file_is_evaluated_again_and_named(case, sweep_dir, pristine, hostile):
    tamper, why = TAMPERS[case]
    tamper(first_point(sweep_dir))
    rerun_evaluates_point_0_again(sweep_dir, pristine, *why, hostile=hostile)
    assert first_point(sweep_dir).is_file() and not first_point(sweep_dir).is_symlink()  # rewritten in place


def test_a_rerun_of_an_untouched_store_reuses_everything_without_a_note(sweep_dir, pristine):
    again = run_sweep(GRID, out=sweep_dir)
    assert (again.new, again.reused, again.notes) == (0, 4, [])


def test_the_cli_says_which_point_it_evaluated_again_and_never_stores_1e30(sweep_dir, pristine, hostile):
    TAMPERS["metric_1e30"][0](first_point(sweep_dir))
    spec = hostile.write("grid.yaml", yaml.safe_dump(GRID))
    run = hostile.cli_ok(["sweep", spec, "--out", sweep_dir, "--no-plots"])
    assert "4 points (1 new, 3 reused; 0 failed, 0 infeasible)" in run.out
    hostile.names(run.out, "note: point 0 evaluated again", first_point(sweep_dir).name, "checksum")
    table = pq.read_table(sweep_dir / "results.parquet").to_pandas()
    assert table["makespan_cycles"].max() < 1e30
    assert table.drop(columns="wall_s").equals(pristine[1])


def test_many_points_evaluated_again_are_named_up_to_a_limit_then_counted(sweep_dir, pristine, hostile, monkeypatch):
    monkeypatch.setattr(runner, "MAX_STORE_NOTES", 2)
    for path in sorted((sweep_dir / "points").glob("*.json")):
        TAMPERS["metric_1e30"][0](path)
    again = run_sweep(GRID, out=sweep_dir)
    assert (again.new, again.reused) == (4, 0)
    assert len(again.notes) == 3 and all("evaluated again" in n for n in again.notes[:2])
    hostile.names(again.notes[2], "2 more stored points evaluated again")
    assert again.results.drop(columns="wall_s").equals(pristine[1])


def test_a_directory_where_a_point_file_belongs_stops_the_sweep_with_one_paragraph(sweep_dir, hostile):
    path = first_point(sweep_dir)
    path.unlink()
    path.mkdir()
    spec = hostile.write("grid.yaml", yaml.safe_dump(GRID))
    hostile.cli_refuses(["sweep", spec, "--out", sweep_dir, "--no-plots"], path.name, "cannot write", codes=(1,))
    assert path.is_dir()  # a directory may hold a user's files: never removed
