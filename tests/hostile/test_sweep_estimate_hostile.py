"""A sweep prints the estimate of its time as it starts (points left x the measured time of its first points),
and one estimated over the limit (an hour) goes on only with --yes or a yes at the prompt; where stdin is not a
terminal it stops in one paragraph, its finished points kept. The limit is lowered here (monkeypatch), so no
test depends on how fast the machine is."""
from __future__ import annotations

import io

import pytest
import yaml

import accelsim as A
from accelsim.cli import sweep_cmd
from accelsim.dse import run_sweep
from accelsim.dse.runner import Estimate
from accelsim.dse.spec import MAX_POINTS

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

pytestmark = pytest.mark.timeout(300)

GRID = {"hw": "groq_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"model.batch": [2, 4], "options.microbatches": [1, 2, 4]}}


class Terminal(io.StringIO):
    """A stdin that is a terminal, with the user's answer typed in."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def spec(hostile):
    return hostile.write("grid.yaml", yaml.safe_dump(GRID))


@pytest.fixture
def over_the_limit(monkeypatch):
    monkeypatch.setattr(sweep_cmd, "CONFIRM_ABOVE_S", 0.0)


def test_a_sweep_prints_its_estimate_as_it_starts(spec, hostile, tmp_path):
    run = hostile.cli_ok(["sweep", spec, "--out", tmp_path / "out", "--no-plots"])
    hostile.names(run.err, "sweep grid: estimate", "for the 4 points left", "a point (median of the first 2)")
    assert "6 points (6 new, 0 reused" in run.out


def test_over_the_limit_without_a_terminal_it_stops_after_the_first_points(spec, hostile, tmp_path, over_the_limit,
                                                                            monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    run = hostile.cli_refuses(["sweep", spec, "--out", tmp_path / "out", "--no-plots"],
                              "sweep grid", "estimate", "4 points", "not a terminal", "--yes", "saved", codes=(1,))
    assert run.err.count("\n") == 2  # the estimate line, then the one-paragraph refusal
    assert len(list((tmp_path / "out" / "points").glob("*.json"))) >= 2  # the timed points are kept
    again = run_sweep(spec, out=tmp_path / "out")  # and a rerun reuses them
    assert again.reused >= 2 and again.new + again.reused == 6


def test_over_the_limit_with_yes_it_goes_on(spec, hostile, tmp_path, over_the_limit, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    run = hostile.cli_ok(["sweep", spec, "--out", tmp_path / "out", "--no-plots", "--yes"])
    assert "6 points (6 new, 0 reused" in run.out and "estimate" in run.err


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "maybe\n"])
def test_over_the_limit_at_a_terminal_anything_but_yes_stops(answer, spec, hostile, tmp_path, over_the_limit,
                                                             monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    hostile.cli_refuses(["sweep", spec, "--out", tmp_path / "out", "--no-plots"], "Go on? [y/N]",
                        "stopped at the prompt", "--yes", codes=(1,))


@pytest.mark.parametrize("answer", ["y\n", "YES\n"])
def test_over_the_limit_at_a_terminal_a_yes_goes_on(answer, spec, hostile, tmp_path, over_the_limit, monkeypatch):
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    run = hostile.cli_ok(["sweep", spec, "--out", tmp_path / "out", "--no-plots"])
    assert "Go on? [y/N]" in run.err and "6 points (6 new, 0 reused" in run.out


def test_the_largest_grid_allowed_is_estimated_and_refused_without_yes(hostile, tmp_path, over_the_limit,
                                                                        monkeypatch):
    """100,000 points (the documented maximum): the estimate covers all of them after timing two."""
    assert MAX_POINTS == 100_000
    grid = {**GRID, "options": {"simulate": False},
            "parameters": {"model.batch": list(range(1, 101)), "options.microbatches": list(range(1, 11)),
                           "chips.0.units.mxm.array.rows": list(range(16, 116))}}
    spec = hostile.write("big.yaml", yaml.safe_dump(grid))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    run = hostile.cli_refuses(["sweep", spec, "--out", tmp_path / "out", "--no-plots"],
                              "estimate", "99,998 points", "--yes", codes=(1,))
    assert "Traceback" not in run.text


def test_the_python_api_hears_the_estimate_and_may_stop_the_sweep(tmp_path, hostile):
    heard: list[Estimate] = []

    def stop(estimate: Estimate) -> None:
        heard.append(estimate)
        raise A.SweepError("stopped by the caller")

    hostile.refuses(lambda: run_sweep(GRID, out=tmp_path / "out", confirm=stop), "stopped by the caller")
    (estimate,) = heard
    assert (estimate.points, estimate.measured, estimate.workers) == (4, 2, 1)
    assert estimate.seconds == estimate.points * estimate.seconds_per_point and estimate.seconds_per_point > 0


def test_a_sweep_answered_from_its_store_asks_nothing(spec, hostile, tmp_path, over_the_limit, monkeypatch):
    hostile.cli_ok(["sweep", spec, "--out", tmp_path / "out", "--no-plots", "--yes"])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    run = hostile.cli_ok(["sweep", spec, "--out", tmp_path / "out", "--no-plots"])  # nothing left to estimate
    assert "estimate" not in run.err and "6 points (0 new, 6 reused" in run.out
