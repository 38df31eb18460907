"""Pareto fronts of a sweep's results table: rows x objectives {metric: "max" | "min"} -> which rows no
other row beats, and a 2-D front sorted and stepped for drawing."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from accelsim.errors import AccelsimError

GOALS = ("max", "min")
_BLOCK = 256  # points settled per step of the k > 2 elimination: 256 x n x k bools in memory at most


def failed_rows(df: pd.DataFrame) -> np.ndarray:
    """Rows whose point raised (a non-empty `error`); no column means none failed."""
    if "error" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return (df["error"].fillna("").astype(str) != "").to_numpy()


def feasible_rows(df: pd.DataFrame) -> np.ndarray:
    """Rows that ran and are feasible (`feasible` is exactly True; NaN or a missing flag on a row is not).
    No `feasible` column means every point that ran is feasible."""
    ok = ~failed_rows(df)
    if "feasible" not in df.columns:
        return ok
    return ok & df["feasible"].eq(True).to_numpy()


def check_objectives(df: pd.DataFrame, objectives: Mapping[str, str]) -> None:
    """Every objective names a column of `df` and says "max" or "min"."""
    if not isinstance(df, pd.DataFrame):
        raise AccelsimError(f"expected the sweep results as a pandas DataFrame, got {type(df).__name__}")
    if not isinstance(objectives, Mapping) or not objectives:
        raise AccelsimError(f"objectives must be a non-empty mapping of metric column to 'max' or 'min' "
                            f"(e.g. {{'throughput_samples_per_s': 'max'}}), got {objectives!r}")
    for metric, goal in objectives.items():
        if not isinstance(metric, str) or metric not in df.columns:
            known = ", ".join(map(str, df.columns)) or "none"
            raise AccelsimError(f"objective {metric!r} is not a column of the results table; expected one of its "
                                f"metric columns (columns: {known})")
        if goal not in GOALS:
            raise AccelsimError(f"objective {metric!r} has goal {goal!r}; expected 'max' or 'min'")


def objective_values(df: pd.DataFrame, metric: str) -> np.ndarray:
    """A metric column as float64 (None -> NaN); a column that is not numbers is refused by name."""
    column = df[metric]
    if pd.api.types.is_bool_dtype(column):
        raise AccelsimError(f"metric {metric!r} is a bool column; a Pareto objective needs numbers")
    try:
        return pd.to_numeric(column, errors="raise").astype("float64").to_numpy()
    except (TypeError, ValueError) as e:
        raise AccelsimError(f"metric column {metric!r} holds values that are not numbers ({e}); expected floats "
                            f"with NaN where missing") from None


def pareto_mask(df: pd.DataFrame, objectives: Mapping[str, str]) -> np.ndarray:
    """True for each row no other candidate dominates; candidates are the feasible rows with a finite value of
    every objective (all other rows are False). Row j dominates row i when it is at least as good in every
    objective and strictly better in one, so exact duplicates never dominate each other: a duplicate of a
    Pareto point is Pareto too. O(n log n) for two objectives; for more, O(n^2 k) at worst, in blocks of
    bounded memory."""
    check_objectives(df, objectives)
    # Orient every objective as "smaller is better" so one comparison serves both goals.
    values = np.column_stack([objective_values(df, m) * (-1.0 if g == "max" else 1.0)
                              for m, g in objectives.items()])
    values[values == 0.0] = 0.0  # -0.0 (a negated 0) and 0.0 are one value
    rows = np.flatnonzero(feasible_rows(df) & np.isfinite(values).all(axis=1))
    mask = np.zeros(len(df), dtype=bool)
    if len(rows):
        # Duplicates share one status, so decide it once per distinct point, in lexicographic order.
        points, inverse = np.unique(values[rows], axis=0, return_inverse=True)
        mask[rows] = _nondominated(points)[inverse.reshape(-1)]
    return mask


def _nondominated(points: np.ndarray) -> np.ndarray:
    """For distinct points sorted lexicographically (smaller is better): which no other point dominates.
    Only a point earlier in that order can dominate a later one, and being <= everywhere is enough, as
    the points are distinct."""
    if points.shape[1] == 2:
        # Every earlier point has x <= this x, so this one is dominated iff an earlier y is <= its y.
        earlier_min_y = np.concatenate(([np.inf], np.minimum.accumulate(points[:-1, 1])))
        return points[:, 1] < earlier_min_y
    keep = np.zeros(len(points), dtype=bool)
    alive = np.arange(len(points))
    while alive.size:
        # The first points still alive are Pareto unless one of them beats another: anything earlier that
        # dominated them is Pareto or dominated by a Pareto point, which removed them already.
        block, rest = alive[:_BLOCK], alive[_BLOCK:]
        beats = (points[block][:, None, :] <= points[block][None, :, :]).all(axis=2)  # [i, j]: i dominates j
        front = block[~np.triu(beats, k=1).any(axis=0)]
        keep[front] = True
        alive = rest[~(points[front][:, None, :] <= points[rest][None, :, :]).all(axis=2).any(axis=0)]
    return keep


def pareto_front(df: pd.DataFrame, x: str, y: str, objectives: Mapping[str, str]) -> pd.DataFrame:
    """The rows on the 2-D front of (x, y) with the goals objectives[x] and objectives[y], sorted by x, then y,
    then `point` when the table has one, so consecutive rows are the front's steps (see staircase)."""
    if x == y:
        raise AccelsimError(f"a 2-D Pareto front needs two different metrics, got {x!r} twice")
    for metric in (x, y):
        if metric not in objectives:
            raise AccelsimError(f"no goal for {metric!r} in objectives {dict(objectives)!r}; expected 'max' or 'min'")
    front = df[pareto_mask(df, {x: objectives[x], y: objectives[y]})]
    keys = pd.DataFrame({"x": objective_values(front, x), "y": objective_values(front, y)}, index=front.index)
    if "point" in front.columns:
        keys["point"] = front["point"].to_numpy()
    return front.loc[keys.sort_values(list(keys.columns), kind="stable").index]


def staircase(xs: np.ndarray, ys: np.ndarray, x_goal: str, y_goal: str) -> tuple[np.ndarray, np.ndarray]:
    """The outline of a 2-D front sorted by x (pareto_front): between neighbours it turns at the corner that is
    worse in both objectives, so the line bounds the region the front dominates. Returns (xs, ys) to plot."""
    for goal in (x_goal, y_goal):
        if goal not in GOALS:
            raise AccelsimError(f"goal {goal!r}: expected 'max' or 'min'")
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(xs) < 2:
        return xs, ys
    worse_x = np.maximum if x_goal == "min" else np.minimum
    worse_y = np.maximum if y_goal == "min" else np.minimum
    corners_x, corners_y = worse_x(xs[:-1], xs[1:]), worse_y(ys[:-1], ys[1:])
    out_x = np.empty(2 * len(xs) - 1)
    out_y = np.empty(2 * len(ys) - 1)
    out_x[0::2], out_y[0::2] = xs, ys
    out_x[1::2], out_y[1::2] = corners_x, corners_y
    return out_x, out_y
