import itertools
import math

import numpy as np
import pandas as pd
import pytest

import accelsim as A
from accelsim.errors import AccelsimError
from accelsim.dse.pareto import pareto_front, pareto_mask, staircase
from accelsim.dse.plots import LOG_NAME, MAX_SERIES, plot_front, plot_metrics_vs_parameter, sweep_plots, sweep_view

ROWS = "chips.0.units.mxu.array.rows"
MB = "options.microbatches"
THR, AREA, ENERGY = "throughput_samples_per_s", "area_mm2", "energy_per_sample_j"


def table(**columns):
    """A results table with `point` numbered 0.. and every row feasible and ok unless the columns say."""
    n = len(next(iter(columns.values())))
    base = {"point": list(range(n)), "feasible": [True] * n, "error": [""] * n}
    return pd.DataFrame({**base, **columns})


def pareto_points(df, objectives):
    return [int(p) for p in df["point"][pareto_mask(df, objectives)]]


# ---------------------------------------------------------------- pareto_mask

def test_two_objectives_max_throughput_min_area_gives_the_hand_checked_front():
    # point:        0    1    2    3    4    5
    df = table(thr=[1.0, 2.0, 2.0, 3.0, 1.5, 3.0],
               area=[1.0, 2.0, 3.0, 4.0, 2.5, 5.0])
    # 2 loses to 1 (same thr, more area), 4 loses to 1, 5 loses to 3
    assert pareto_points(df, {"thr": "max", "area": "min"}) == [0, 1, 3]


def test_flipping_a_goal_changes_the_front():
    df = table(a=[1.0, 2.0, 3.0], b=[1.0, 2.0, 3.0])
    assert pareto_points(df, {"a": "max", "b": "min"}) == [0, 1, 2]  # a trade-off: every point
    assert pareto_points(df, {"a": "max", "b": "max"}) == [2]
    assert pareto_points(df, {"a": "min", "b": "min"}) == [0]


def test_three_objectives_a_point_can_be_pareto_through_its_third_metric_only():
    df = table(thr=[2.0, 1.0, 2.0, 1.0],
               area=[1.0, 2.0, 1.0, 1.0],
               energy=[5.0, 1.0, 6.0, 5.0])
    # 1 is worse than 0 in thr and area but best in energy; 2 loses to 0 on energy; 3 loses to 0 on thr
    assert pareto_points(df, {"thr": "max", "area": "min", "energy": "min"}) == [0, 1]


def test_duplicates_of_a_pareto_point_are_all_pareto_and_ties_in_one_metric_are_broken_by_the_other():
    df = table(x=[1.0, 1.0, 1.0, 2.0, 2.0], y=[5.0, 5.0, 4.0, 3.0, 3.0])
    # 0 and 1 are identical but 2 beats both (same x, lower y); 3 and 4 are identical and both Pareto
    assert pareto_points(df, {"x": "min", "y": "min"}) == [2, 3, 4]


def test_single_objective_keeps_every_row_tied_for_best():
    df = table(thr=[3.0, 1.0, 3.0])
    assert pareto_points(df, {"thr": "max"}) == [0, 2]


def test_nan_infeasible_and_failed_rows_are_never_pareto_and_never_dominate():
    df = table(thr=[1.0, 9.0, 9.0, 9.0, np.inf, 2.0],
               area=[1.0, 0.5, np.nan, 0.5, 0.1, 3.0],
               feasible=[True, False, True, True, True, True],
               error=["", "", "", "boom", "", ""])
    # 1 (infeasible), 2 (NaN area), 3 (failed), 4 (inf) would dominate 0 and 5; they are out instead
    assert pareto_points(df, {"thr": "max", "area": "min"}) == [0, 5]


def test_feasible_nan_and_none_count_as_not_feasible():
    df = table(thr=[1.0, 2.0, 3.0], feasible=[True, None, np.nan])
    assert pareto_points(df, {"thr": "max"}) == [0]


def test_no_candidate_gives_an_all_false_mask():
    df = table(thr=[np.nan, np.nan])
    assert pareto_mask(df, {"thr": "max"}).tolist() == [False, False]
    assert pareto_mask(df.iloc[:0], {"thr": "max"}).tolist() == []


@pytest.mark.parametrize("n, k, levels", [(40, 2, 5), (40, 3, 5), (300, 4, 5), (700, 3, 10), (2000, 2, 50)])
def test_mask_matches_the_definition_on_random_tables_with_many_ties(n, k, levels):
    values = np.random.default_rng(n * k).integers(0, levels, size=(n, k)).astype(float)
    goals = ["max" if j % 2 else "min" for j in range(k)]
    df = table(**{f"m{j}": values[:, j] for j in range(k)})
    signed = values * np.where(np.array(goals) == "max", -1.0, 1.0)
    # [j, i]: j dominates i
    dominates = (signed[:, None] <= signed[None, :]).all(axis=2) & (signed[:, None] < signed[None, :]).any(axis=2)
    assert pareto_mask(df, {f"m{j}": g for j, g in enumerate(goals)}).tolist() == (~dominates.any(axis=0)).tolist()


def test_every_point_of_a_plane_is_pareto_in_three_objectives():
    grid = np.array([(a, b, 60 - a - b) for a in range(31) for b in range(31)], dtype=float)  # 961 points
    df = table(a=grid[:, 0], b=grid[:, 1], c=grid[:, 2])
    assert pareto_mask(df, {"a": "min", "b": "min", "c": "min"}).all()
    assert pareto_mask(df, {"a": "max", "b": "max", "c": "max"}).all()


def test_pareto_front_is_sorted_by_x_and_its_staircase_turns_at_the_worse_corner():
    df = table(area=[4.0, 1.0, 2.0, 3.0], thr=[3.0, 1.0, 2.0, 1.0])
    front = pareto_front(df, "area", "thr", {"area": "min", "thr": "max"})
    assert front["point"].tolist() == [1, 2, 0]  # 3 loses to 1
    xs, ys = staircase(front["area"], front["thr"], "min", "max")
    assert xs.tolist() == [1.0, 2.0, 2.0, 4.0, 4.0]
    assert ys.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]


def test_staircase_of_max_x_min_y_turns_up_before_moving_right():
    xs, ys = staircase(np.array([1.0, 2.0]), np.array([10.0, 20.0]), "max", "min")
    assert xs.tolist() == [1.0, 1.0, 2.0] and ys.tolist() == [10.0, 20.0, 20.0]


@pytest.mark.parametrize("objectives, match", [
    ({"thr": "maximize"}, "'maximize'; expected 'max' or 'min'"),
    ({"nope": "max"}, "'nope' is not a column"),
    ({}, "non-empty mapping"),
    (["thr"], "non-empty mapping"),
    ({"name": "max"}, "not numbers"),
    ({"flag": "max"}, "bool column"),
])
def test_pareto_mask_refuses_bad_objectives_by_name(objectives, match):
    df = table(thr=[1.0, 2.0], name=["a", "b"], flag=[True, False])
    with pytest.raises(AccelsimError, match=match):
        pareto_mask(df, objectives)


def test_pareto_mask_refuses_what_is_not_a_dataframe():
    with pytest.raises(AccelsimError, match="pandas DataFrame, got dict"):
        pareto_mask({"thr": [1.0]}, {"thr": "max"})


# ---------------------------------------------------------------- sweep_plots

def sweep_table():
    """3 array sizes x 2 micro-batch counts: throughput and area grow with rows, one infeasible and one failed point."""
    rows = []
    for point, (r, mb) in enumerate(itertools.product([32, 128, 512], [1, 4])):
        failed = point == 4
        rows.append({"point": point, "point_id": f"p{point:03d}", "config_hash": None, ROWS: r, MB: mb,
                     THR: math.nan if failed else 1e3 * r * mb ** 0.5, AREA: math.nan if failed else r * r / 1e3,
                     ENERGY: math.nan if failed else 1e-6 * r / mb, "makespan_cycles": 1e6 / r,
                     "feasible": not failed and point != 5, "error": "compile failed" if failed else "", "wall_s": 0.1})
    return pd.DataFrame(rows)


def run_plots(out_dir, results=None, **overrides):
    kwargs = {"parameters": [ROWS, MB], "metrics": [THR, ENERGY],
              "objectives": {THR: "max", AREA: "min"}, "compile_point": None, "label": "test sweep"}
    return sweep_plots(sweep_table() if results is None else results, out_dir, **{**kwargs, **overrides})


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    return (first, run_plots(first)), (second, run_plots(second))


def test_sweep_plots_writes_one_figure_per_parameter_and_front_in_order(two_runs):
    (out, paths), _ = two_runs
    assert [p.name for p in paths] == [
        f"param_{ROWS}.png", f"param_{MB}.png",
        f"pareto_{THR}_vs_{AREA}.png", f"pareto_{ENERGY}_vs_{THR}.png"]
    assert all(p.parent == out and p.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") for p in paths)
    assert sorted(p.name for p in out.iterdir()) == sorted([*(p.name for p in paths), LOG_NAME])


def test_sweep_plots_writes_identical_bytes_twice(two_runs):
    (_, first), (_, second) = two_runs
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    assert all(b"Software" not in p.read_bytes() for p in first)


def test_front_without_any_finite_area_is_skipped_and_logged(tmp_path):
    results = sweep_table().assign(**{AREA: math.nan})
    paths = run_plots(tmp_path, results, parameters=[ROWS], metrics=[THR], objectives={THR: "max", ENERGY: "min"})
    assert [p.name for p in paths] == [f"param_{ROWS}.png", f"pareto_{ENERGY}_vs_{THR}.png"]
    assert f"skipped the front {THR} vs {AREA}" in (tmp_path / LOG_NAME).read_text()


def test_empty_and_all_failed_tables_give_no_plots_and_no_files(tmp_path):
    empty = sweep_table().iloc[:0]
    all_failed = sweep_table().assign(error="boom")
    assert run_plots(tmp_path / "empty", empty) == []
    assert run_plots(tmp_path / "failed", all_failed) == []
    assert not (tmp_path / "empty").exists() and not (tmp_path / "failed").exists()


def test_many_series_are_drawn_as_a_median_band_and_the_title_says_so():
    n = MAX_SERIES + 1
    grid = list(itertools.product([1, 2, 4], range(n)))  # "seed" splits each x into MAX_SERIES + 1 series
    df = table(x=[x for x, _ in grid], seed=[s for _, s in grid], thr=[float(x + s) for x, s in grid])
    view = sweep_view(df, ["x", "seed"], "many")
    fig = plot_metrics_vs_parameter(view, "x", ["thr"])
    assert f"median of {n} series, band = min-max" in fig.get_suptitle()


def test_quantity_strings_sort_by_magnitude_not_as_text():
    df = table(bw=["34 GB/s", "136 GB/s", "17 GB/s"], thr=[2.0, 3.0, 1.0])
    fig = plot_metrics_vs_parameter(sweep_view(df, ["bw"], "q"), "bw", ["thr"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["17 GB/s", "34 GB/s", "136 GB/s"]


def test_a_parameter_spanning_two_decades_gets_a_log_axis_and_failures_are_counted():
    df = table(rows=[8, 80, 800], thr=[1.0, 2.0, 3.0], error=["", "", "boom"])
    view = sweep_view(df, ["rows"], "log")
    assert view.failed == 1
    assert plot_metrics_vs_parameter(view, "rows", ["thr"]).axes[0].get_xscale() == "linear"  # 8..80 now
    df.loc[2, "error"] = ""
    assert plot_metrics_vs_parameter(sweep_view(df, ["rows"], "log"), "rows", ["thr"]).axes[0].get_xscale() == "log"


def test_timelines_of_the_first_front_come_from_a_real_compile_and_a_failure_is_logged(tmp_path):
    hw = A.load_hw("groq_like")
    graph = A.models.build("mlp", batch=4, sizes=(16, 8, 4))
    seen = []

    def compile_point(params):
        seen.append(params)
        if params[MB] == 3:
            raise ValueError("cannot compile\nthis point")
        return A.compile(graph, hw, microbatches=params[MB]), hw, graph

    # every point is on the throughput-area front (both grow together)
    df = table(**{MB: [1, 2, 3], THR: [1.0, 2.0, 3.0], AREA: [1.0, 2.0, 3.0]})
    heard = []
    paths = sweep_plots(df, tmp_path, parameters=[MB], metrics=[THR], objectives={}, compile_point=compile_point,
                        label="tiny", on_figure=heard.append)
    assert [p.name for p in paths] == [f"param_{MB}.png", f"pareto_{THR}_vs_{AREA}.png",
                                       "timeline_point0.png", "timeline_point1.png"]
    # progress hears every figure before it is drawn, the failing timeline too
    assert heard == [f"metrics vs {MB}", f"Pareto front {THR} vs {AREA}", "timeline of point #0",
                     "timeline of point #1", "timeline of point #2"]
    assert seen == [{MB: 1}, {MB: 2}, {MB: 3}] and all(type(p[MB]) is int for p in seen)
    assert "timeline point #2: compile_point failed: ValueError: cannot compile this point" in \
        (tmp_path / LOG_NAME).read_text()


def test_odd_parameter_values_and_dollar_signs_in_text_still_plot(tmp_path):
    df = table(kind=["$\\frac{$", None, True, 3, "$x$", np.nan],
               width=[1.0, np.nan, 4.0, 8.0, 2.0, 1.0],
               **{THR: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], AREA: [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]})
    paths = sweep_plots(df, tmp_path, parameters=["kind", "width"], metrics=[THR], objectives={},
                        compile_point=None, label="cost $\\frac{$")
    assert [p.name for p in paths] == ["param_kind.png", "param_width.png", f"pareto_{THR}_vs_{AREA}.png"]


@pytest.mark.parametrize("overrides, match", [
    ({"metrics": ["nope"]}, "metric 'nope' is not a column"),
    ({"parameters": ["model.width"]}, "parameter 'model.width' is not a column"),
    ({"parameters": "rows"}, "parameters must be a list"),
    ({"objectives": {THR: "best"}}, "'best'; expected a metric column name mapped to 'max' or 'min'"),
    ({"objectives": {"nope": "max"}}, "objective 'nope' is not a column"),
    ({"metrics": ["point_id"]}, "'point_id' holds values that are not numbers"),
    ({"compile_point": "compile"}, "compile_point must be None or a function"),
    ({"label": None}, "label must be a str"),
])
def test_sweep_plots_refuses_bad_arguments_by_name(tmp_path, overrides, match):
    with pytest.raises(AccelsimError, match=match):
        run_plots(tmp_path, **overrides)
    assert not tmp_path.joinpath(LOG_NAME).exists()


@pytest.mark.parametrize("results, match", [
    (pd.DataFrame(), "no 'point' column"),
    ({"point": [0]}, "pandas DataFrame, got dict"),
])
def test_sweep_plots_refuses_what_is_not_a_results_table(tmp_path, results, match):
    with pytest.raises(AccelsimError, match=match):
        sweep_plots(results, tmp_path, parameters=[], metrics=[], objectives={}, compile_point=None, label="x")


def test_sweep_plots_refuses_an_out_dir_that_is_not_a_path(tmp_path):
    with pytest.raises(AccelsimError, match="out_dir must be a path"):
        run_plots(42)


@pytest.mark.parametrize("spread", [1e-6, 1.0])  # points nearly on top of each other, and spread out
def test_front_labels_never_overlap_and_stay_inside_the_axes(spread):
    n = 16  # every point on the throughput-area front (both grow together), long labels
    df = table(**{ROWS: [2 ** (k % 8) * 1000003 for k in range(n)], MB: list(range(n)),
                  THR: [1.0 + spread * k for k in range(n)], AREA: [1.0 + spread * k for k in range(n)]})
    view = sweep_view(df, [ROWS, MB], "crowded")
    front = pareto_front(df, AREA, THR, {THR: "max", AREA: "min"})
    fig = plot_front(view, AREA, THR, {THR: "max", AREA: "min"}, front)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert boxes, "no label was placed"
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    if spread == 1.0:
        assert len(boxes) >= 8  # room for most of them when the points are apart
    assert f"{len(boxes)} labelled" in ax.get_title() or len(boxes) == n
