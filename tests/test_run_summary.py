"""RunSummary: run_summary's typed record. Its to_dict() is the dict (and JSON) run_summary returned before it
was typed, key for key and value for value; readers use attributes, so a misspelled figure fails loudly;
the hardware may be named as A.compile takes it; the sweep's metric table is checked against its fields."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

import accelsim as A
from accelsim import metrics, report
from accelsim.cli import main
from accelsim.dse import load_spec
from accelsim.dse.metrics import METRICS, MetricDef, Outcome, measure
from accelsim.errors import AccelsimError, ScheduleError
from accelsim.sim.energy import timeline_energy
from accelsim.summary import UnknownSummaryKey

REPO = Path(__file__).resolve().parents[1]

JSON_KEYS = (
    "graph", "hw", "hw_overrides", "training", "options", "samples_per_step", "tasks", "makespan_cycles", "makespan_s",
    "throughput_samples_per_s", "latency_s", "latency_definition", "utilization", "mac_utilization", "achieved_tops",
    "peak_tops", "per_unit", "per_chip", "tops_definition", "peak_memory_bytes", "peak_memory_definition",
    "memory_capacity_bytes", "allreduce_cycles", "transfer_cycles", "energy_pj", "energy_j", "energy_per_sample_j",
    "power_w", "static_energy_j", "energy_by_component_pj", "ops_per_step", "tops_per_w", "area_mm2", "chip_area_mm2", "throughput_per_mm2",
    "critical_path_cycles", "resource_bound_cycles", "resource_bound_unit", "bound_cycles", "bound_ratio")
"""The keys of `accelsim run --json`'s summary, in their order, as scripts and sweep tables read them."""
TRAINING_KEYS = (
    "model_flops_per_step", "hardware_flops_per_step", "model_tflops_per_chip", "hardware_tflops_per_chip",
    "peak_tflops_per_chip", "mfu", "flops_definition", "peak_memory_per_chip", "memory_split_definition",
    "exposed_communication", "exposed_communication_definition")
"""Keys added after JSON_KEYS (what a training-systems user reads: tests/test_training_metrics.py), after them."""


def legacy_summary(schedule, hw) -> dict:
    """The dict run_summary returned before RunSummary, composed as it composed it (report.py before the
    typed record) from the same helpers: the oracle to_dict() must reproduce exactly."""
    clock = schedule.clock_hz
    makespan_s = schedule.makespan_cycles / clock
    comm = report.communication_cycles(schedule)
    rates = report.compute_rates(schedule, hw)
    eff, energy = report.efficiency(schedule, hw), timeline_energy(schedule, hw)
    return {
        "graph": schedule.graph_name,
        "hw": schedule.hw_name,
        "hw_overrides": schedule.hw_overrides or {},
        "training": schedule.training,
        "options": schedule.options.model_dump(),
        "samples_per_step": schedule.samples_per_step,
        "tasks": len(schedule.tasks),
        "makespan_cycles": schedule.makespan_cycles,
        "makespan_s": makespan_s,
        "throughput_samples_per_s": schedule.samples_per_step / makespan_s if makespan_s else 0.0,
        "latency_s": report.latency_cycles(schedule) / clock,
        "latency_definition": metrics.LATENCY_DEFINITION,
        "utilization": report.utilization(schedule, hw),
        **rates.overall.to_dict(),
        "per_unit": {u: r.to_dict() for u, r in rates.per_unit.items()},
        "per_chip": {f"chip{c}": r.to_dict() for c, r in rates.per_chip.items()},
        "tops_definition": metrics.TOPS_DEFINITION,
        "peak_memory_bytes": report.peak_memory_bytes(schedule),
        "peak_memory_definition": metrics.PEAK_MEMORY_DEFINITION,
        "memory_capacity_bytes": dict(schedule.memory_capacity_bytes),
        "allreduce_cycles": comm.get("collective", 0),
        "transfer_cycles": comm.get("link", 0),
        # the energy of what the compiled timeline moves (issue 28); schedule.energy_pj, the cost model's sum that
        # charged every byte at its unit's first memory and no leakage, was the value before
        "energy_pj": energy.total_pj,
        **{k: eff[k] for k in ("energy_j", "energy_per_sample_j", "power_w")},
        "static_energy_j": energy.static_pj * 1e-12,
        "energy_by_component_pj": energy.to_dict(),
        **{k: v for k, v in eff.items() if k not in ("energy_j", "energy_per_sample_j", "power_w")},
        "critical_path_cycles": schedule.bounds.critical_path_cycles,
        "resource_bound_cycles": schedule.bounds.resource_cycles,
        "resource_bound_unit": schedule.bounds.resource,
        "bound_cycles": schedule.bounds.bound_cycles,
        "bound_ratio": schedule.bound_ratio,
    }


@pytest.fixture(scope="module")
def mlp_step():
    """A training step of a small MLP on groq_like, two micro-batches."""
    hw = A.load_hw("groq_like")
    return A.compile(A.training_graph(A.models.build("mlp", batch=4, sizes=(32, 16, 4))), hw, microbatches=2), hw


@pytest.fixture(scope="module")
def x4_step():
    """Two replicas on two chips of groq_like_x4 with an override: per-chip rates, collectives, overrides."""
    hw = A.load_hw("groq_like_x4", overrides={"chips.0.units.mxm.array.rows": 160})
    graph = A.training_graph(A.models.build("mlp", batch=4, sizes=(32, 16, 4)))
    return A.compile(graph, hw, data_parallel=2), hw


# ---- to_dict is today's dict ---------------------------------------------------------------------------------

@pytest.mark.parametrize("step", ["mlp_step", "x4_step"])
def test_to_dict_is_the_dict_run_summary_returned_key_for_key_value_for_value(step, request):
    schedule, hw = request.getfixturevalue(step)
    got, want = A.run_summary(schedule, hw).to_dict(), legacy_summary(schedule, hw)
    assert tuple(got) == (*JSON_KEYS, *TRAINING_KEYS) and tuple(want) == JSON_KEYS
    legacy = {k: got[k] for k in JSON_KEYS}  # the added keys come after, the rest is as it was
    assert legacy == want
    assert json.dumps(legacy) == json.dumps(want)  # same order and the same JSON types (1 vs 1.0) all the way down


def test_the_x4_step_fills_what_one_chip_leaves_empty(x4_step):
    s = A.run_summary(*x4_step)
    assert [c.label for c in s.chips] == ["chip0", "chip1"] and s.allreduce_cycles > 0
    assert dict(s.hw_overrides) == {"chips.0.units.mxm.array.rows": 160}
    assert s.energy_j is not None and s.chip_areas is not None and s.area_mm2 > 0


def test_run_json_is_the_summary_the_terminal_printed_plus_the_simulation(tmp_path, monkeypatch, capsys):
    import accelsim.cli.sched_cmds as sched_cmds

    made = []

    def recorded(schedule, hw=None, graph=None):
        made.append(report.run_summary(schedule, hw, graph))
        return made[-1]

    monkeypatch.setattr(sched_cmds, "run_summary", recorded)
    out = tmp_path / "run.json"
    argv = ["run", "--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4", "--out", tmp_path / "plots",
            "--json", out]
    assert main([str(a) for a in argv]) == 0
    capsys.readouterr()
    written = json.loads(out.read_text())
    assert list(written) == [*JSON_KEYS, *TRAINING_KEYS, "simulation"]
    assert {k: v for k, v in written.items() if k != "simulation"} == json.loads(json.dumps(made[0].to_dict()))


# ---- a typed, frozen record ----------------------------------------------------------------------------------

def test_figures_are_attributes_with_per_unit_chip_and_memory_records(mlp_step):
    schedule, hw = mlp_step
    s = A.run_summary(schedule, hw)
    assert isinstance(s, A.RunSummary)
    assert s.makespan_cycles == schedule.makespan_cycles and s.tasks == len(schedule.tasks)
    assert [u.name for u in s.units] == sorted(u.name for u in s.units)
    mxm = s.unit("mxm")
    assert mxm.rates is not None and 0 < mxm.rates.mac_utilization <= 1 and mxm.busy > 0
    assert [(m.label, m.peak_bytes, m.capacity_bytes) for m in s.memories] == \
        [(f"chip{m.chip}:{m.memory}", m.peak_bytes, m.capacity_bytes) for m in schedule.memories]
    assert s.memory("chip0:mem").peak_bytes == s.largest_peak_memory_bytes
    assert s.rates.peak_tops == s.peak_tops
    with pytest.raises(AccelsimError, match="no unit kind 'mxu'; its unit kinds: mxm"):
        s.unit("mxu")


def test_the_record_cannot_change_under_its_reader(mlp_step):
    s = A.run_summary(*mlp_step)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.makespan_s = 0.0
    with pytest.raises(TypeError):
        s.hw_overrides["x"] = 1
    d = s.to_dict()
    d["per_unit"]["mxm"]["peak_tops"] = -1.0
    d["hw_overrides"]["x"] = 1
    assert s.to_dict() == A.run_summary(*mlp_step).to_dict()


def test_a_misspelled_figure_fails_loudly_instead_of_reading_none(mlp_step):
    s = A.run_summary(*mlp_step)
    with pytest.raises(AttributeError):
        s.throughput_sample_per_s  # noqa: B018
    assert not hasattr(s, "get")  # no dict-style .get that answers None
    assert s["makespan_s"] == s.makespan_s and s["per_unit"] == s.to_dict()["per_unit"]  # the dict-era read
    with pytest.raises(UnknownSummaryKey) as err:
        s["makespan"]
    assert isinstance(err.value, KeyError) and isinstance(err.value, AccelsimError)
    assert "no key 'makespan' (did you mean 'makespan_s' or 'makespan_cycles'?)" in str(err.value)
    with pytest.raises(TypeError):
        iter(s)


# ---- the hardware, as A.compile takes it (issue 29) -----------------------------------------------------------

@pytest.mark.parametrize("form", ["name", "path", "str_path", "dict", "hwspec", "none"])
def test_run_summary_takes_the_hardware_by_name_path_dict_or_spec(form, mlp_step):
    schedule, hw = mlp_step
    path = REPO / "hwconfigs" / "groq_like.yaml"
    given = {"name": "groq_like", "path": path, "str_path": str(path), "dict": yaml.safe_load(path.read_text()),
             "hwspec": A.load_hw("groq_like"), "none": None}[form]
    assert A.run_summary(schedule, given).to_dict() == A.run_summary(schedule, hw).to_dict()


def test_the_schedule_s_own_hardware_with_its_overrides_by_default(x4_step):
    schedule, hw = x4_step
    assert A.run_summary(schedule).to_dict() == A.run_summary(schedule, hw).to_dict()
    with pytest.raises(ScheduleError, match=r"compiled for hardware 'groq_like_x4' \(hash \w+\) but is summarized "
                                            r"with hardware 'groq_like_x4' \(hash \w+\)"):
        A.run_summary(schedule, "groq_like_x4")  # the overrides left out


def test_other_hardware_or_no_schedule_is_refused(mlp_step):
    schedule, _ = mlp_step
    with pytest.raises(ScheduleError, match="compiled for hardware 'groq_like'.*summarized with hardware "
                                            "'tpu_v1_like'"):
        A.run_summary(schedule, "tpu_v1_like")
    with pytest.raises(A.HwConfigError, match="no_such_hw"):
        A.run_summary(schedule, "no_such_hw")
    with pytest.raises(AccelsimError, match="needs a Schedule and the hardware .* got Schedule and int"):
        A.run_summary(schedule, 3)
    with pytest.raises(AccelsimError, match="got dict and str"):
        A.run_summary({}, "groq_like")


# ---- the sweep's metrics, declared against RunSummary ---------------------------------------------------------

def test_a_metric_table_naming_a_field_run_summary_lacks_is_refused_when_built():
    with pytest.raises(AccelsimError, match=r"metric 'thruput' reads RunSummary.thruput, which RunSummary does "
                                            r"not have; its fields: graph, hw"):
        MetricDef("thruput", "samples/s", "a misspelled field")
    with pytest.raises(AccelsimError, match=r"RunSummary.makespan_cycle, which RunSummary does not have \(did you "
                                            r"mean 'makespan_cycles'"):
        MetricDef("makespan", "cycles", "a misspelled field", field="makespan_cycle")
    with pytest.raises(AccelsimError, match="reads RunSummary.graph, of type <class 'str'>; a metric is a number"):
        MetricDef("graph", "-", "not a number")


def test_the_metric_table_fails_at_import_when_a_declaration_is_bad(tmp_path, monkeypatch):
    (tmp_path / "bad_metric_table.py").write_text(
        "from accelsim.dse.metrics import MetricDef\n"
        "TABLE = (MetricDef('makespan_cycles', 'cycles', 'fine'), MetricDef('speed', 'x', 'no such field'))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AccelsimError, match="metric 'speed' reads RunSummary.speed"):
        __import__("bad_metric_table")


def test_every_metric_reads_its_figure_of_the_summary(mlp_step):
    schedule, hw = mlp_step
    s = A.run_summary(schedule, hw)
    row = measure(Outcome(s, simulated_makespan_cycles=7, check_passed=True))
    assert list(row) == list(METRICS)
    for name in ("makespan_cycles", "makespan_s", "throughput_samples_per_s", "latency_s", "bound_ratio", "tasks",
                 "allreduce_cycles", "transfer_cycles", "energy_j", "energy_per_sample_j", "power_w", "tops_per_w",
                 "area_mm2", "throughput_per_mm2"):
        assert row[name] == float(getattr(s, name)), name
    assert row["peak_memory_bytes"] == max(schedule.peak_memory_bytes.values())
    assert row["peak_memory_fraction"] == max(m.peak_bytes / m.capacity_bytes for m in schedule.memories)
    assert row["simulated_makespan_cycles"] == 7.0 and row["check_passed"] == 1.0
    assert math.isnan(measure(Outcome(s))["simulated_makespan_cycles"])


def test_a_summary_without_energy_figures_gives_nan_not_an_error(mlp_step):
    s = dataclasses.replace(A.run_summary(*mlp_step), energy_j=None, power_w=None)
    row = measure(Outcome(s))
    assert math.isnan(row["energy_j"]) and math.isnan(row["power_w"]) and math.isfinite(row["makespan_s"])


# ---- sweep specs: unknown metrics refused with the valid names, known ones accepted ---------------------------

SPEC = {"hw": "groq_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"options.microbatches": [1, 2]}}


@pytest.mark.parametrize("changes, where, close", [
    ({"metrics": ["makespan_cycles", "thruput"]}, "metrics[1]: unknown metric 'thruput'",
     "'throughput_samples_per_s', 'throughput_per_mm2'"),
    ({"search": {"method": "optuna", "points": 4, "objectives": {"energy": "min"}}},
     "search.objectives.energy: unknown metric 'energy'",
     "'energy_j', 'energy_per_sample_j', 'static_energy_j', 'dynamic_energy_j', 'arithmetic_energy_j', "
     "'memory_energy_j', 'off_chip_energy_j', 'link_energy_j', 'energy_pj'"),
    ({"constraints": ["area < 300"]}, "constraints[0]: 'area < 300': unknown metric 'area'", "'area_mm2'"),
])
def test_a_spec_naming_an_unknown_metric_is_refused_with_close_and_valid_names(changes, where, close, tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}, sort_keys=False))
    with pytest.raises(A.SweepError) as err:
        load_spec(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {where} (did you mean {close}?); known metrics: makespan_cycles, ")
    assert all(name in message for name in METRICS) and "\n" not in message  # one paragraph


def test_every_metric_the_shipped_sweep_specs_name_is_still_known():
    specs = sorted((REPO / "experiments" / "sweeps").glob("*.yaml"))
    assert specs
    for path in specs:
        spec = load_spec(path)  # refused if a metric, objective or constraint names an unknown metric
        named = [*(spec.metrics or []), *(spec.search.objectives or {})]
        assert named and all(name in METRICS for name in named), path
