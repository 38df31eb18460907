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
    "negative_rows": "chips[0].units[0].array.rows: Input should be greater than 0 (got -4)",
    "unknown_op": "unknown op 'matmull'; did you mean matmul",
    "unknown_unit_in_link": "link mxu->tensor_core: no unit or memory 'tensor_core'",
    "unknown_memory": "unit 'mxu' names memory 'hbm', which chip 'chip' does not have",
    "bad_quantity": "chips[0].memories[0].capacity_bytes: expected a size",
    "unknown_key": "colour: Extra inputs are not permitted (got 'blue')",
    "not_a_mapping": "expected a mapping of keys",
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
    assert "not a UTF-8 text file" in err or "not valid YAML" in err


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
    assert "2 problem(s)" in text and "clock_hz" in text and "chips[0].colour" in text


@pytest.mark.parametrize("text, value", [("24 MiB", 24 * 2**20), ("1.5 GB", 1.5e9), (4096, 4096), ("8KiB", 8192)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


def test_parse_rates_and_rejects_nonsense():
    assert parse_hz("700 MHz") == 700e6
    assert parse_bandwidth("34 GB/s") == 34e9
    with pytest.raises(ValueError, match="expected a frequency"):
        parse_hz("700 MBs")
    with pytest.raises(ValueError):
        parse_bytes(True)


def test_bandwidth_given_per_second_converts_with_the_clock():
    hw = A.hw.parse_hw({"name": "x", "clock_hz": "500 MHz", "chips": [{"units": [
        {"name": "v", "categories": ["elementwise"], "vector": {"lanes": 4}, "reads": ["m"], "writes": ["m"]}],
        "memories": [{"name": "m", "kind": "dram", "capacity_bytes": "1 GiB", "bandwidth_bytes_per_s": "10 GB/s"}]}]})
    assert hw.chips[0].memories[0].bytes_per_cycle(hw.clock_hz) == 20.0
