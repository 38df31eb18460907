"""The results table as a pandas user reads it: quantity parameters as numbers beside the strings the spec
wrote, the constraint an infeasible point failed, and every number `accelsim run` prints as a metric."""
from __future__ import annotations

import dataclasses
import math

import pytest

import accelsim as A
from accelsim.dse import METRICS
from accelsim.dse.metrics import NUMERIC_TYPES, SUMMARY_TYPES
from accelsim.dse.table import quantity_column, violated
from accelsim.dse.constraints import parse_constraint

pytest.importorskip("pyarrow")
pytest.importorskip("pandas")

SMALL_MLP = {"model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]}}


def test_quantity_strings_get_a_numeric_column_in_base_units_beside_them():
    spec = {"hw": "groq_like", **SMALL_MLP,
            "parameters": {"chips.0.memories.mem.capacity_bytes": ["64 MiB", "8 MiB"],
                           "clock_hz": ["900 MHz"]}}
    df = A.sweep(spec)
    key = "chips.0.memories.mem.capacity_bytes"
    assert list(df[key]) == ["64 MiB", "8 MiB"]  # as written
    assert list(df[f"{key}_bytes"]) == [64 * 2**20, 8 * 2**20] and str(df[f"{key}_bytes"].dtype) == "float64"
    assert list(df["clock_hz_hz"]) == [900e6, 900e6]
    # the number follows the string column, and both sit among the parameters before the metrics
    cols = list(df.columns)
    assert cols.index(f"{key}_bytes") == cols.index(key) + 1 < cols.index("makespan_cycles")


@pytest.mark.parametrize("values, expected", [
    (["8 MiB", "1 GiB"], ("bytes", [8 * 2**20, 2**30])),
    (["17 GB/s"], ("bytes_per_s", [17e9])),
    (["700 MHz", "1 GHz"], ("hz", [700e6, 1e9])),
    (["os", "ws"], None),                 # words are not quantities
    (["8 MiB", "600 GB/s"], None),        # two kinds in one column: no single unit
    (["32 Mb"], ("bytes", [4e6])),        # megabits, as hardware files read them: 4 MB
    ([], None),
    ([1, 2], None),                       # numbers already
])
def test_quantity_column_reads_one_kind_of_quantity_or_nothing(values, expected):
    got = quantity_column(values)
    if expected is None:
        assert got is None
    else:
        assert got[0] == expected[0] and got[1] == pytest.approx(expected[1])


def test_an_infeasible_row_names_the_constraints_it_fails():
    cons = [parse_constraint("fits"), parse_constraint("tasks < 10"), parse_constraint("makespan_cycles > 0")]
    ok = {"error": "", "metrics": {"tasks": 5.0, "makespan_cycles": 3.0}, "fits": True}
    assert violated(ok, cons) == ""
    bad = {"error": "", "metrics": {"tasks": 50.0, "makespan_cycles": math.nan}, "fits": False}
    assert violated(bad, cons) == "fits; tasks < 10; makespan_cycles > 0"  # NaN can't be shown to hold
    assert violated({**ok, "error": "compile failed"}, cons) == "error"


def test_the_sweep_table_says_which_constraint_each_infeasible_point_failed():
    spec = {"hw": "groq_like", **SMALL_MLP, "parameters": {"options.microbatches": [1, 2]},
            "constraints": ["tasks < 1", "fits"]}
    df = A.sweep(spec)
    assert not df["feasible"].any()
    assert list(df["violated"]) == ["tasks < 1", "tasks < 1"]


def test_every_number_run_summary_holds_is_a_sweep_metric():
    fields = {m.field for m in METRICS.values() if m.field}
    numeric = {name for name, kind in SUMMARY_TYPES.items() if kind in NUMERIC_TYPES}
    assert numeric <= fields, f"RunSummary numbers with no metric: {sorted(numeric - fields)}"
    assert {"mac_utilization", "achieved_tops", "mfu", "model_tflops_per_chip"} <= set(METRICS)


def test_the_new_metrics_hold_what_the_summary_says():
    spec = {"hw": "groq_like", **SMALL_MLP, "parameters": {"options.microbatches": [2]}}
    df = A.sweep(spec)
    graph = A.training_graph(A.models.build("mlp", batch=4, sizes=[32, 16, 4]))
    hw = A.load_hw("groq_like")
    summary = A.run_summary(A.compile(graph, hw, microbatches=2), hw, graph=graph)
    row = df.iloc[0]
    for name in ("mac_utilization", "achieved_tops", "ops_per_step", "bound_cycles", "samples_per_step"):
        assert row[name] == pytest.approx(float(getattr(summary, name)), rel=1e-12), name
    assert dataclasses.is_dataclass(summary)
