"""Hardware overrides (hw/overrides.py): `load_hw(x, overrides={...})` and `--hw-set KEY=VALUE` change
values by key path, validated like the file, and schedules record them so a run can be reproduced."""
import json

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.hw.overrides import MAX_OVERRIDES, apply_overrides, parse_assignment
from accelsim.schedule.plan import hw_hash

ROWS = "chips.tpu.units.mxu.array.rows"


def _mxu(hw):
    return next(u for u in hw.chips[0].units if u.name == "mxu")


def test_names_and_indices_address_the_same_value_and_the_file_is_untouched():
    by_name = A.load_hw("tpu_v1_like", overrides={ROWS: 128})
    by_index = A.load_hw("tpu_v1_like", overrides={"chips.0.units.0.array.rows": 128})
    assert _mxu(by_name).array.rows == _mxu(by_index).array.rows == 128
    assert by_name.model_dump_json() == by_index.model_dump_json()
    assert _mxu(A.load_hw("tpu_v1_like")).array.rows == 256
    assert by_name.overrides == {ROWS: 128}


def test_an_override_equals_the_edited_file():
    """The oracle: the same change made by hand to the parsed YAML, then loaded as a dict."""
    import yaml
    data = yaml.safe_load(open(A.hw.load.resolve("tpu_v1_like")).read())
    data["chips"][0]["units"][0]["array"]["rows"] = 64
    data["clock_hz"] = "1 GHz"
    overridden = A.load_hw("tpu_v1_like", overrides={ROWS: 64, "clock_hz": "1 GHz"})
    assert overridden.model_dump_json() == A.load_hw(data).model_dump_json()
    assert hw_hash(overridden) != hw_hash(A.load_hw("tpu_v1_like"))


def test_overrides_change_the_schedule_and_are_recorded_and_replayed(tmp_path):
    graph = A.models.build("mlp", batch=8)
    hw = A.load_hw("tpu_v1_like", overrides={ROWS: 32})
    small = A.compile(graph, hw)
    assert small.hw_overrides == {ROWS: 32}
    assert small.makespan_cycles != A.compile(graph, "tpu_v1_like").makespan_cycles
    assert "hw_overrides" not in A.compile(graph, "tpu_v1_like").model_dump()  # absent: old bytes kept
    # the hardware is rebuilt from the schedule's name and overrides, its hash matching
    assert A.simulate(small, graph=graph).makespan_cycles == small.makespan_cycles
    path = tmp_path / "s.json"
    assert main(["compile", "--hw", "tpu_v1_like", "--hw-set", f"{ROWS}=32", "--model", "mlp", "--inference",
                 "-o", str(path)]) == 0
    assert json.loads(path.read_text())["hw_overrides"] == {ROWS: 32}
    assert main(["simulate", str(path)]) == 0


def test_overrides_stack_on_an_hwspec():
    once = A.load_hw("tpu_v1_like", overrides={ROWS: 128})
    twice = A.load_hw(once, overrides={"clock_hz": "1 GHz"})
    assert twice.overrides == {ROWS: 128, "clock_hz": "1 GHz"} and _mxu(twice).array.rows == 128
    assert A.load_hw(once) is once and A.load_hw(once, overrides={}) is once


def test_cli_values_are_yaml():
    assert parse_assignment("a.b=128") == ("a.b", 128)
    assert parse_assignment("a.b=true") == ("a.b", True)
    assert parse_assignment("a.b=[tensor, elementwise]") == ("a.b", ["tensor", "elementwise"])
    assert parse_assignment("clock_hz=1 GHz") == ("clock_hz", "1 GHz")
    assert parse_assignment("x=a=b") == ("x", "a=b")


@pytest.mark.parametrize("overrides, words", [
    ({"chips.tpu.units.mxx.array.rows": 1}, ("tpu_v1_like.yaml", "no item 'mxx'", "mxu, activation")),
    ({"chips.0.unitz.mxu.count": 2}, ("no key 'unitz'", "did you mean 'units'")),
    ({"chips.7.count": 2}, ("no item '7'", "indices 0..0")),
    ({"clock_hz.ghz": 1}, ("clock_hz is", "not a mapping or a list")),
    ({"chips..count": 2}, ("empty step",)),
    ({"": 2}, ("empty step",)),
    ({ROWS: -1}, ("chips[0].units[0].array.rows", "1 to 65536", "with overrides")),
    ({ROWS: float("nan")}, ("array.rows",)),
    ({ROWS: 2**80}, ("array.rows", "65536")),
    ({ROWS: "many"}, ("array.rows",)),
    ({"chips.tpu.units.mxu.array.bogus": 1}, ("bogus",)),
    ({"chips.tpu.units.mxu.array": None}, ("array",)),
    ({7: 1}, ("override key 7", "dotted key path")),
    ({"x" * 600: 1}, ("override key", "500 characters")),
])
def test_a_bad_override_is_refused_naming_it(overrides, words):
    with pytest.raises(A.HwConfigError) as err:
        A.load_hw("tpu_v1_like", overrides=overrides)
    assert all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize("bad", [[(ROWS, 1)], "rows=1", 5])
def test_overrides_must_be_a_mapping(bad):
    with pytest.raises(A.HwConfigError, match="mapping of key paths"):
        A.load_hw("tpu_v1_like", overrides=bad)


def test_too_many_overrides_are_refused():
    with pytest.raises(A.HwConfigError, match=f"at most {MAX_OVERRIDES}"):
        apply_overrides({}, {f"k{i}": i for i in range(MAX_OVERRIDES + 1)})


@pytest.mark.parametrize("arg, words", [
    ("rows", ("expected KEY=VALUE",)),
    (f"{ROWS}=", ("no value",)),
    ("clock_hz=[1,", ("not valid YAML",)),
    ("clock_hz=" + "9" * 20_000, ("too long",)),
    ("chips.tpu.units.mxx.array.rows=1", ("no item 'mxx'",)),
])
def test_cli_refuses_a_bad_hw_set_with_one_line_and_exit_1(arg, words, capsys):
    assert main(["run", "--hw", "tpu_v1_like", "--hw-set", arg]) == 1
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "Traceback" not in err, err


def test_every_command_with_hw_takes_hw_set(capsys, tmp_path):
    for argv in (["cost", "--hw", "tpu_v1_like", "--gemm", "64,64,64"],
                 ["compile", "--hw", "tpu_v1_like", "-o", str(tmp_path / "s.json")],
                 ["run", "--hw", "tpu_v1_like"]):
        assert main(argv + ["--hw-set", f"{ROWS}=64"]) == 0, argv
