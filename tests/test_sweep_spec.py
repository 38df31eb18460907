"""Sweep specs: every bad spec is refused before any work with one SweepError naming the file and the key
path; the CLI turns it into one paragraph and exit 1; grid and random points come in a fixed order."""
import sys

import pytest
import yaml

import accelsim as A
from accelsim.cli import main
from accelsim.dse import load_spec
from accelsim.dse.search import make_search
from work_meter import WorkMeter

BASE = {"hw": "groq_like", "model": "mlp", "model_options": {"batch": 4, "sizes": [32, 16, 4]},
        "parameters": {"options.microbatches": [1, 2]}}


def spec_with(**changes):
    """BASE with top-level keys replaced (None removes one)."""
    spec = {**BASE, **changes}
    return {k: v for k, v in spec.items() if v is not None}


def refused(spec, tmp_path, *expected):
    """Write `spec` (a dict as YAML, or text or bytes as they are), load it, and check the SweepError
    names the file and each expected text."""
    path = tmp_path / "spec.yaml"
    if isinstance(spec, bytes):
        path.write_bytes(spec)
    else:
        path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(A.SweepError) as err:
        load_spec(path)
    message = str(err.value)
    assert message.startswith(str(path)), message
    for text in expected:
        assert text in message, message
    return message


BAD_SPECS = [
    ("unknown_top_level_key", spec_with(modle="mlp"), ["modle: Extra inputs are not permitted"]),
    ("unknown_model", spec_with(model="resnet9000"), ["model: unknown model 'resnet9000'", "mlp"]),
    ("unknown_model_option", spec_with(model_options={"colour": 3}), ["model_options:", "no option 'colour'"]),
    ("bad_model_option_value", spec_with(model_options={"batch": 0}), ["model_options:", "batch=0"]),
    ("unknown_hw_path", spec_with(parameters={"chips.0.units.mxm.array.rowz": [64]}),
     ["parameters.chips.0.units.mxm.array.rowz: value 64 is refused", "Extra inputs are not permitted"]),
    ("hw_path_through_missing_key", spec_with(parameters={"chips.0.unitz.mxm.rows": [64]}),
     ["parameters.chips.0.unitz.mxm.rows:", "has no key 'unitz'"]),
    ("hw_value_the_schema_refuses", spec_with(parameters={"chips.0.units.mxm.array.rows": [64, 0]}),
     ["parameters.chips.0.units.mxm.array.rows: value 0 is refused", "rows"]),
    ("bad_hw_set", spec_with(hw_set={"chips.0.units.mxm.array.rows": -1}), ["hw_set:", "rows"]),
    ("unknown_step_option", spec_with(parameters={"options.nope": [1]}),
     ["parameters.options.nope: unknown step option 'nope'", "microbatches"]),
    ("result_option_as_parameter", spec_with(parameters={"options.check": [True, False]}),
     ["parameters.options.check:", "set it in options"]),
    ("unknown_model_parameter", spec_with(parameters={"model.width": [4, 8]}),
     ["parameters.model.width: model 'mlp' has no option 'width'", "batch, sizes"]),
    ("model_parameter_value", spec_with(parameters={"model.batch": [4, -2]}),
     ["parameters.model.batch: value -2 is refused"]),
    ("empty_list", spec_with(parameters={"options.microbatches": []}),
     ["parameters.options.microbatches: List should have at least 1 item"]),
    ("no_parameters", spec_with(parameters={}), ["parameters: Dictionary should have at least 1 item"]),
    ("range_low_above_high", spec_with(parameters={"model.batch": {"low": 8, "high": 2}},
                                       search={"method": "random", "points": 2}),
     ["parameters.model.batch: low (8) must be below high (2)"]),
    ("range_not_finite", spec_with(parameters={"model.batch": {"low": 1, "high": float("inf")}},
                                   search={"method": "random", "points": 2}),
     ["parameters.model.batch.high: expected a finite number of at most 19 digits (got inf)"]),
    ("range_with_grid", spec_with(parameters={"model.batch": {"low": 1, "high": 8, "int": True}}),
     ["parameters.model.batch: a range needs search.method random or optuna"]),
    ("optuna_without_objectives", spec_with(search={"method": "optuna", "points": 4}),
     ["search.objectives: required for method optuna"]),
    ("optuna_unknown_objective", spec_with(search={"method": "optuna", "points": 4, "objectives": {"speed": "max"}}),
     ["search.objectives.speed: unknown metric 'speed'", "throughput_samples_per_s"]),
    ("unknown_metric", spec_with(metrics=["makespan_cycles", "speed"]),
     ["metrics[1]: unknown metric 'speed'; known metrics: makespan_cycles"]),
    ("metric_needs_an_option", spec_with(metrics=["check_passed"]), ["check_passed is recorded only with options.check"]),
    ("malformed_constraint", spec_with(constraints=["fits", "area_mm2 <<< 3", "__import__('os') < 1"]),
     ["constraints[1]: cannot read 'area_mm2 <<< 3'", "constraints[2]: cannot read"]),
    ("constraint_unknown_metric", spec_with(constraints=["speed > 3"]), ["constraints[0]:", "unknown metric 'speed'"]),
    ("points_below_one", spec_with(search={"method": "random", "points": 0}), ["search.points:", "greater than or equal to 1"]),
    ("points_absurd", spec_with(parameters={"model.batch": {"low": 1, "high": 1e6}}, search={"method": "random", "points": 10**9}),
     ["search.points: 1,000,000,000 is more than the limit of 100,000"]),
    ("random_without_points", spec_with(search={"method": "random"}), ["search.points: required for method random"]),
    ("points_with_grid", spec_with(search={"method": "grid", "points": 3}), ["search.points: a grid runs every combination"]),
    ("sampler_without_optuna", spec_with(search={"method": "random", "points": 2, "sampler": "tpe"}),
     ["search.sampler: applies to method optuna only"]),
    ("random_space_too_small", spec_with(search={"method": "random", "points": 5}),
     ["search.points: 5 distinct points asked of a space of 2 combinations"]),
    ("mixed_types", spec_with(parameters={"options.microbatches": [1, "two"]}),
     ["parameters.options.microbatches: mixes values of type int and str"]),
    ("duplicate_value", spec_with(parameters={"options.microbatches": [1, 2, 1]}), ["lists 1 twice"]),
    ("bool_where_int_expected", spec_with(options={"microbatches": True}), ["options.microbatches: Input should be a valid integer"]),
    ("bool_parameter_where_int_expected", spec_with(parameters={"options.microbatches": [True, False]}),
     ["parameters.options.microbatches: value True is refused"]),
    ("nan_value", spec_with(parameters={"chips.0.units.mxm.array.rows": [64, float("nan")]}),
     ["parameters.chips.0.units.mxm.array.rows[1]: expected a finite number (got nan)"]),
    ("huge_int", spec_with(parameters={"model.batch": [10**30]}), ["parameters.model.batch[0]: expected an integer of at most 19 digits (got 1000000"]),
    ("missing_hw_file", spec_with(hw="../../no/such/hw.yaml"), ["hw:", "no file", "no bundled hardware config"]),
]


@pytest.mark.parametrize("spec, expected", [c[1:] for c in BAD_SPECS], ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_is_refused_naming_file_and_key_path(spec, expected, tmp_path):
    refused(spec, tmp_path, *expected)


def test_every_problem_is_reported_at_once(tmp_path):
    message = refused(spec_with(metrics=["speed"], constraints=["x >"], model="nope",
                                parameters={"options.nope": [1], "chips.0.units.mxm.array.rows": [0]}),
                      tmp_path, "5 problem(s)")
    for key in ("metrics[0]", "constraints[0]", "model:", "parameters.options.nope", "parameters.chips.0"):
        assert f"\n  {key}" in message


@pytest.mark.parametrize("text, expected", [
    ("- hw: groq_like\n", "expected a mapping of keys (name, hw, hw_set, model"),
    ("just words\n", "got a str"),
    ("", "got nothing"),
    ("hw: groq_like\nhw: tpu_v1_like\n", "duplicate key 'hw'"),
    ("hw: [unclosed\n", "not valid YAML at line"),
    (bytes(range(256)), "not a UTF-8 text file"),
    ("hw: groq_like\n" + "# padding\n" * 110_000, "larger than 1048576 bytes"),
    ("a: &a [1, 2]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}, *{'a' if i == 0 else f'b{i - 1}'}]\n"
                                 for i in range(30)), "not valid YAML"),
])
def test_spec_file_that_is_not_a_spec_is_refused(text, expected, tmp_path):
    refused(text, tmp_path, expected)


def test_a_directory_or_missing_spec_file_is_refused(tmp_path):
    with pytest.raises(A.SweepError, match="is a directory; expected a sweep spec file"):
        load_spec(tmp_path)
    with pytest.raises(A.SweepError, match="no such file; expected a sweep spec file"):
        load_spec(tmp_path / "nope.yaml")


def test_hw_path_is_relative_to_the_spec_file_and_a_non_hw_file_is_refused(tmp_path):
    sub = tmp_path / "specs"
    sub.mkdir()
    (tmp_path / "notes.txt").write_text("just words\n")
    with pytest.raises(A.SweepError, match=r"hw: .*notes.txt: expected a mapping"):
        load_spec_file(sub, spec_with(hw="../notes.txt"))
    (tmp_path / "hw.yaml").write_text(A.load_hw("groq_like").model_dump_json())
    assert load_spec_file(sub, spec_with(hw="../hw.yaml")).name == "spec"


def load_spec_file(directory, spec):
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_spec(path)


def test_a_billion_point_grid_is_refused_before_any_point_is_made(tmp_path):
    values = list(range(1, 1001))
    spec = spec_with(parameters={"model.batch": values, "chips.0.units.mxm.array.rows": values,
                                 "chips.0.units.mxm.array.cols": values})
    # Loading the spec takes ~600k Python steps (tests/work_meter.py); making the points would never end.
    with WorkMeter(max_steps=5_000_000):
        refused(spec, tmp_path, "the grid has 1,000,000,000 points (1000 x 1000 x 1000), more than the limit of "
                "100,000")


def test_yaml_11_exponents_and_int_float_mixes_are_numbers(tmp_path):
    text = ("hw: groq_like\nmodel: mlp\nparameters:\n  chips.0.memories.mem.bandwidth_bytes_per_cycle: [1.0e4, 20480]\n"
            "  model.batch: {low: 1, high: 8, int: true}\nsearch: {method: random, points: 3}\n")
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    spec = load_spec(path)
    assert spec.parameters["chips.0.memories.mem.bandwidth_bytes_per_cycle"] == [1.0e4, 20480.0]
    assert spec.name == "ok"


def test_split_on_and_off_read_as_words():
    spec = load_spec(spec_with(options={"split": True}, parameters={"options.split": ["auto", True, False]}))
    assert spec.options.split is True and spec.parameters["options.split"] == ["auto", "on", "off"]


def test_grid_varies_the_last_parameter_fastest():
    spec = load_spec(spec_with(parameters={"model.batch": [2, 4], "options.microbatches": [1, 2, 3]}))
    points = make_search(spec).ask()
    assert [(p.index, p.params["model.batch"], p.params["options.microbatches"]) for p in points] == [
        (0, 2, 1), (1, 2, 2), (2, 2, 3), (3, 4, 1), (4, 4, 2), (5, 4, 3)]


def test_random_points_are_distinct_in_range_and_depend_only_on_the_seed():
    def points(seed):
        spec = load_spec(spec_with(parameters={
            "model.batch": {"low": 1, "high": 64, "int": True, "log": True},
            "chips.0.memories.mem.bandwidth_bytes_per_cycle": {"low": 1e3, "high": 1e5, "log": True},
            "options.microbatches": [1, 2, 4]}, search={"method": "random", "points": 20, "seed": seed}))
        return [p.params for p in make_search(spec).ask()]

    first = points(7)
    assert first == points(7) and first != points(8)
    assert len({tuple(p.values()) for p in first}) == 20
    for p in first:
        assert isinstance(p["model.batch"], int) and 1 <= p["model.batch"] <= 64
        assert 1e3 <= p["chips.0.memories.mem.bandwidth_bytes_per_cycle"] <= 1e5
        assert p["options.microbatches"] in (1, 2, 4)


def test_random_search_can_take_every_point_of_a_small_space():
    spec = load_spec(spec_with(parameters={"model.batch": [1, 2, 3], "options.microbatches": [1, 2]},
                               search={"method": "random", "points": 6}))
    assert len({tuple(p.params.values()) for p in make_search(spec).ask()}) == 6


def test_stepped_float_range_gives_values_on_the_step():
    spec = load_spec(spec_with(parameters={"chips.0.memories.mem.bandwidth_bytes_per_cycle":
                                           {"low": 1000, "high": 2000, "step": 250}},
                               search={"method": "random", "points": 5}))
    values = sorted(p.params["chips.0.memories.mem.bandwidth_bytes_per_cycle"] for p in make_search(spec).ask())
    assert values == [1000.0, 1250.0, 1500.0, 1750.0, 2000.0]


def test_range_step_must_divide_the_range(tmp_path):
    refused(spec_with(parameters={"model.batch": {"low": 1, "high": 8, "step": 3, "int": True}},
                      search={"method": "random", "points": 2}), tmp_path, "step (3) must divide high - low (7)")


@pytest.mark.parametrize("argv_tail, expected", [
    (["--workers", "0"], "expected a positive integer"),
])
def test_cli_refuses_bad_arguments_with_usage(argv_tail, expected, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), *argv_tail])
    assert e.value.code == 2 and expected in capsys.readouterr().err


@pytest.mark.parametrize("spec, expected", [
    (spec_with(modle="mlp"), "modle: Extra inputs are not permitted"),
    (spec_with(metrics=["speed"], constraints=["x >"]), "2 problem(s)"),
    ("[1, 2]\n", "expected a mapping of keys"),
])
def test_cli_prints_one_paragraph_and_exits_1(spec, expected, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(spec if isinstance(spec, str) else yaml.safe_dump(spec))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--no-plots"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"accelsim sweep: error: {path}") and expected in err
    assert "Traceback" not in err and "\n\n" not in err.strip()
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_cli_refuses_a_malformed_dask_address(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert main(["sweep", str(path), "--out", str(tmp_path / "o"), "--dask", "foo:12"]) == 1
    err = capsys.readouterr().err
    assert "expected 'local' or a scheduler address tcp://HOST:PORT" in err and "dask scheduler" in err
    assert err.count("\n") == 1


def test_the_library_refuses_bad_arguments():
    with pytest.raises(A.SweepError, match="workers must be an integer from 1"):
        A.sweep(BASE, workers=True)
    with pytest.raises(A.SweepError, match="a sweep spec must be a YAML file's path, a dict or a SweepSpec"):
        A.sweep(42)


def test_a_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # what `import optuna` sees where it is not installed
    spec = spec_with(search={"method": "optuna", "points": 2, "objectives": {"tasks": "min"}})
    with pytest.raises(A.SweepError, match=r"needs optuna, .*pip install 'accelsim\[sweep\]'"):
        A.sweep(spec)


@pytest.mark.parametrize("key, expected", [
    ("options.microbatches, options.data_parallel", "only hardware key paths can be tied"),
    ("chips.0.units.mxm.array.rows, chips.0.units.mxm.array.rows", "names each hardware path once"),
    ("chips.0.units.mxm.array.rows, ", "names each hardware path once"),
    ("chips.0.units.mxm.array.rows, chips.0.units.mxm.array.colz", "colz"),
])
def test_bad_tied_parameters_are_refused(key, expected, tmp_path):
    refused(spec_with(parameters={key: [16, 32]}), tmp_path, f"parameters.{key}", expected)


def test_a_tied_value_is_validated_on_every_path(tmp_path):
    """0 rows is refused by the schema whichever of the tied paths it reaches first."""
    refused(spec_with(parameters={"chips.0.units.mxm.array.rows, chips.0.units.mxm.array.cols": [16, 0]}),
            tmp_path, "value 0 is refused")
