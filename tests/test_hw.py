"""Hardware descriptions: loading, readable quantities, and one clear error per broken file."""
from pathlib import Path

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.hw.quantity import parse_bandwidth, parse_bytes, parse_hz

DATA = Path(__file__).parent / "data"

BROKEN = {
    "missing_clock": "clock_hz: Field required",
    "wrong_type": "chips[0].units: Input should be a valid list (got 'all of them')",
    "negative_rows": "chips[0].units[0].array.rows: expected a whole number from 1 to 65536 rows or columns (got -4)",
    "unknown_op": "unknown op 'matmull'; did you mean matmul",
    "links_removed": "chips[0].links: Extra inputs are not permitted",
    "reserved_unit_name": "chips[0].units[0].name: a name must be a plain identifier",
    "duplicate_key": "line 4, column 1: duplicate key 'clock_hz' (first at line 3, again at line 4)",
    "infinite_quantities": "chips[0].memories[0].capacity_bytes: expected a size",
    "unknown_memory": "unit 'mxu' names memory 'hbm', which chip 'chip' does not have",
    "bad_quantity": "chips[0].memories[0].capacity_bytes: expected a size",
    "unknown_key": "colour: Extra inputs are not permitted (got 'blue')",
    "not_a_mapping": "expected a mapping of keys (name, clock_hz, chips, ...) at the top level, got a list",
    "malformed": "not valid YAML at line 2, column 9",
    "chips_without_interconnect": "2 chips need an interconnect",
}


def test_every_broken_fixture_is_listed():
    assert {p.stem for p in (DATA / "broken_hw").glob("*.yaml")} == set(BROKEN)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_config_fails_with_its_specific_message_and_exit_1(name, capsys):
    path = DATA / "broken_hw" / f"{name}.yaml"
    assert main(["hw", "validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert BROKEN[name] in err and str(path) in err and "Traceback" not in err


def test_huge_and_binary_files_are_refused(tmp_path, capsys):
    huge = tmp_path / "huge.yaml"
    huge.write_text("name: x\n" + "# padding\n" * 200_000)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)) * 4)
    assert main(["hw", "validate", str(huge)]) == 1
    assert "too large" in capsys.readouterr().err
    assert main(["hw", "validate", str(binary)]) == 1
    err = capsys.readouterr().err
    assert "a binary file" in err and str(binary) in err and "Traceback" not in err


def test_missing_file_names_the_bundled_configs(capsys):
    assert main(["hw", "show", "no_such_machine"]) == 1
    assert "no bundled hardware config" in capsys.readouterr().err


def test_validate_reports_every_bad_file_and_passes_good_ones(capsys):
    assert main(["hw", "validate", str(DATA / "toy_hw.yaml"), str(DATA / "broken_hw/negative_rows.yaml")]) == 1
    out, err = capsys.readouterr()
    assert "toy_hw.yaml: ok" in out and "negative_rows" in err


def test_several_problems_are_reported_at_once():
    data = {"name": "x", "clock_hz": "fast", "chips": [{"units": [], "memories": [], "colour": 1}]}
    with pytest.raises(A.HwConfigError) as e:
        A.hw.parse_hw(data, "inline")
    text = str(e.value)
    assert "4 problem(s)" in text and "clock_hz" in text and "chips[0].colour" in text
    assert "chips[0].units: List should have at least 1 item" in text


def test_infinite_quantity_reports_both_bad_fields_with_their_values():
    with pytest.raises(A.HwConfigError) as e:
        A.load_hw(DATA / "broken_hw" / "infinite_quantities.yaml")
    text = str(e.value)
    assert "2 problem(s)" in text and "(got '1e999 MiB')" not in text and "'1e999 MiB', which is too large" in text
    assert "chips[0].memories[0].bandwidth_bytes_per_cycle: expected a finite number from 0.001 to 1e+09 bytes per " \
           "cycle, got inf (not a finite number)" in text


@pytest.mark.parametrize("text, value", [("24 MiB", 24 * 2**20), ("1.5 GB", 1.5e9), (4096, 4096), ("8KiB", 8192),
                                         ("1.1 GB", 1_100_000_000), ("0.5 KiB", 512), ("1e3", 1000)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["1.1 GB", "2.2 GB", "0.1 KB", "1.5 KiB"])
def test_decimal_sizes_multiply_out_to_whole_bytes(text):
    """'1.1 GB' is exactly 1,100,000,000 bytes, not 1100000000.0000002: capacities must be whole."""
    assert isinstance(parse_bytes(text), int)


@pytest.mark.parametrize("parse, text", [(parse_bytes, "inf"), (parse_bytes, "nan"), (parse_bytes, "1e999 MiB"),
                                         (parse_bytes, float("inf")), (parse_bytes, float("nan")),
                                         (parse_bandwidth, "1e400 GB/s"), (parse_hz, "1e999 GHz"),
                                         (parse_hz, 10**400), (parse_bytes, "-4 MiB"), (parse_bytes, "1 MiB" * 20),
                                         (parse_bytes, None), (parse_bytes, [1]), (parse_hz, False)],
                         ids=lambda x: repr(x)[:20] if not callable(x) else x.__name__)
def test_quantities_that_are_not_finite_numbers_are_refused(parse, text):
    with pytest.raises(ValueError, match="expected a"):
        parse(text)


def test_parse_rates_and_rejects_nonsense():
    assert parse_hz("700 MHz") == 700e6
    assert parse_bandwidth("34 GB/s") == 34e9
    with pytest.raises(ValueError, match="expected a frequency"):
        parse_hz("700 MBs")
    with pytest.raises(ValueError):
        parse_bytes(True)


def test_ranges_table_states_a_reason_for_every_kind():
    assert all(r.why and r.lo <= r.hi for r in A.hw.RANGES.values())


def test_bandwidth_given_per_second_converts_with_the_clock():
    hw = A.hw.parse_hw({"name": "x", "clock_hz": "500 MHz", "chips": [{"units": [
        {"name": "v", "categories": ["elementwise"], "vector": {"lanes": 4}, "reads": ["m"], "writes": ["m"]}],
        "memories": [{"name": "m", "kind": "dram", "capacity_bytes": "1 GiB", "bandwidth_bytes_per_s": "10 GB/s"}]}]})
    assert hw.chips[0].memories[0].bytes_per_cycle(hw.clock_hz) == 20.0


def test_describe_errors_names_the_path_shows_short_scalars_and_stops_at_the_limit():
    from accelsim.pydantic_errors import describe_errors

    errors = [{"type": "value_error", "loc": ("chips", 0, "units", 3, "name"), "msg": "Value error, bad name",
               "input": "x" * 200},
              {"type": "missing", "loc": ("clock_hz",), "msg": "Field required", "input": {}},
              {"type": "dict_type", "loc": ("chips", 0, "array"), "msg": "Input should be a valid dictionary",
               "input": [4, 4]},
              {"type": "extra_forbidden", "loc": ("weird key\n",), "msg": "Extra inputs are not permitted",
               "input": 1}] + [{"type": "x", "loc": ("a",), "msg": "m", "input": 1}] * 30
    lines = describe_errors(errors, limit=4)
    assert lines[0].startswith("chips[0].units[3].name: bad name (got 'xxx") and lines[0].endswith("...)")
    assert len(lines[0]) < 140
    assert lines[1:4] == ["clock_hz: Field required", "chips[0].array: Input should be a valid dictionary",
                          "'weird key\\n': Extra inputs are not permitted (got 1)"]
    assert lines[4:] == ["... and 30 more"]
