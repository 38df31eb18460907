"""Hostile hardware descriptions: every one is refused with one HwConfigError that names the file and
the key (or line), after little work (Python steps counted, never timed), without a traceback and without
expanding what it describes."""
import tracemalloc
from pathlib import Path
from string import Template

import pytest
import yaml

import accelsim as A
from accelsim.cli import main
from accelsim.hw import yaml_loader
from accelsim.hw.load import MAX_FILE_BYTES
from work_meter import WorkMeter

HWCONFIGS = Path(__file__).resolve().parent.parent / "hwconfigs"
# Python steps (tests/work_meter.py) a refusal may take. Every one here takes under 40k with libyaml's parser
# and under 450k with pure-Python PyYAML; the budget only catches a blow-up (300k nested brackets scanned
# without the scanner's own depth check take 12M).
REFUSAL_STEPS = 1_000_000
# A file of more values than yaml_loader.MAX_NODES is refused once that many are composed: ~90 steps a value
# with libyaml's parser, ~900 with pure-Python PyYAML.
STEPS_PER_VALUE = 1_500
# The YAML layer alone, either backend: 40k steps at most for the bombs below.
YAML_BOMB_STEPS = 100_000

# A small valid machine in which every kind of quantity appears once, as a $placeholder.
TEMPLATE = Template("""\
name: $hw_name
clock_hz: $clock_hz
bytes_per_element: {float32: $bytes_per_element}
chips:
  - name: chip
    count: $chip_count
    units:
      - name: $unit_name
        ops: [matmul]
        count: $unit_count
        array: {rows: $rows, cols: 4, dataflow: ws}
        latency_cycles: $unit_latency
        energy_pj_per_op: $energy_per_op
        reads: [sram]
        writes: [sram]
        input_buffer: {bandwidth_bytes_per_cycle: $buffer_bandwidth}
      - name: vpu
        categories: [elementwise, reduction]
        vector: {lanes: $lanes, ops_per_lane_per_cycle: $ops_per_lane}
        reads: [sram]
        writes: [sram]
      - name: dma
        categories: [data_movement]
        stream: {bytes_per_cycle: $stream}
        reads: [sram, dram]
        writes: [sram, dram]
      - name: slow
        ops: [exp]
        per_element: {cycles_per_element: $cycles_per_element}
        reads: [sram]
        writes: [sram]
    memories:
      - name: sram
        kind: sram
        capacity_bytes: $capacity
        bandwidth_bytes_per_cycle: $memory_bandwidth
        latency_cycles: $memory_latency
        energy_pj_per_byte: $energy_per_byte
      - {name: dram, kind: dram, capacity_bytes: 1 GiB, bandwidth_bytes_per_s: $bandwidth_per_s}
interconnect: {topology: ring, bandwidth_bytes_per_cycle: $link_bandwidth, link_latency_cycles: $link_latency}
""")
GOOD = {"hw_name": "toy", "clock_hz": "1 GHz", "bytes_per_element": 4, "chip_count": 2, "unit_name": "mxu",
        "unit_count": 2, "rows": 4, "unit_latency": 2, "energy_per_op": 0.5, "buffer_bandwidth": 32, "lanes": 8,
        "ops_per_lane": 2, "stream": 16, "cycles_per_element": 4, "capacity": "1 MiB", "memory_bandwidth": 64,
        "memory_latency": 1, "energy_per_byte": 0.1, "bandwidth_per_s": "10 GB/s", "link_bandwidth": 8,
        "link_latency": 100}
# placeholder -> the key path an error about it must name
KEY_OF = {
    "clock_hz": "clock_hz",
    "bytes_per_element": "bytes_per_element.float32",
    "chip_count": "chips[0].count",
    "unit_count": "chips[0].units[0].count",
    "rows": "chips[0].units[0].array.rows",
    "unit_latency": "chips[0].units[0].latency_cycles",
    "energy_per_op": "chips[0].units[0].energy_pj_per_op",
    "buffer_bandwidth": "chips[0].units[0].input_buffer.bandwidth_bytes_per_cycle",
    "lanes": "chips[0].units[1].vector.lanes",
    "ops_per_lane": "chips[0].units[1].vector.ops_per_lane_per_cycle",
    "stream": "chips[0].units[2].stream.bytes_per_cycle",
    "cycles_per_element": "chips[0].units[3].per_element.cycles_per_element",
    "capacity": "chips[0].memories[0].capacity_bytes",
    "memory_bandwidth": "chips[0].memories[0].bandwidth_bytes_per_cycle",
    "memory_latency": "chips[0].memories[0].latency_cycles",
    "energy_per_byte": "chips[0].memories[0].energy_pj_per_byte",
    "bandwidth_per_s": "chips[0].memories[1].bandwidth_bytes_per_s",
    "link_bandwidth": "interconnect.bandwidth_bytes_per_cycle",
    "link_latency": "interconnect.link_latency_cycles",
}
BAD_VALUES = {"inf": ".inf", "nan": ".nan", "denormal": "1.0e-320", "denormal_str": "1e-320", "huge": "1.0e+300",
              "negative": "-3", "zero": "0", "bool": "true", "garbage": "'lots'", "fraction": "2.5"}
# zero is a valid latency or energy; a fraction is valid wherever the quantity is not a count of things
ALLOWED = {("zero", k) for k in ("unit_latency", "memory_latency", "link_latency", "energy_per_op",
                                 "energy_per_byte")}
ALLOWED |= {("fraction", k) for k in ("clock_hz", "energy_per_op", "buffer_bandwidth", "ops_per_lane", "stream",
                                      "cycles_per_element", "memory_bandwidth", "energy_per_byte",
                                      "bandwidth_per_s", "link_bandwidth")}
ALLOWED |= {("denormal_str", k) for k in ("clock_hz", "capacity", "bandwidth_per_s")}  # same as "denormal" there


def _text(**changes) -> str:
    return TEMPLATE.substitute({**GOOD, **changes})


def _refused(source, expected: list[str], name: str | None = None, max_steps: int = REFUSAL_STEPS) -> str:
    """load_hw(source) raises HwConfigError within max_steps, naming `name` (the file) and every expected
    fragment."""
    with WorkMeter(max_steps), pytest.raises(A.HwConfigError) as e:
        A.load_hw(source)
    text = str(e.value)
    assert "Traceback" not in text
    assert name is None or name in text, text
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    return text


def test_the_template_itself_is_a_valid_machine():
    path_text = _text()
    hw = A.hw.parse_hw(yaml.safe_load(path_text), "<template>")
    assert hw.n_chips == 2 and [u.name for u in hw.chips[0].units] == ["mxu", "vpu", "dma", "slow"]


QUANTITY_CASES = [(kind, bad) for kind in KEY_OF for bad in BAD_VALUES if (bad, kind) not in ALLOWED]


@pytest.mark.parametrize("kind, bad", QUANTITY_CASES, ids=[f"{k}-{b}" for k, b in QUANTITY_CASES])
def test_a_quantity_that_is_not_finite_or_not_physical_is_refused_at_its_key(kind, bad, tmp_path):
    path = tmp_path / "hw.yaml"
    path.write_text(_text(**{kind: BAD_VALUES[bad]}))
    text = _refused(path, [KEY_OF[kind] + ": expected "], name=str(path))
    assert "1 problem(s)" in text


def _bomb(levels: int = 9, width: int = 10) -> str:
    """A billion-laughs bomb: `width`**`levels` copies of one number, in a few hundred bytes."""
    lines = ["{l0: &l0 [" + ", ".join(["1"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return ", ".join(lines) + "}"


NESTED_UNIT = "        ops: [matmul]\n"
# (id, file text or bytes, fragments the message must contain)
FILE_CASES = [
    ("unit_count_10_million", _text(unit_count=10**7), ["chips[0].units[0].count", "1 to 4096", "(got 10000000)"]),
    ("chip_count_too_many_in_total", _text().replace("    count: 2\n    units:", "    count: 4096\n    units:", 1)
     .replace("chips:\n", "chips:\n  - {name: other, count: 8, units: [{name: v, categories: [elementwise], "
              "vector: {lanes: 1}, reads: [m], writes: [m]}], memories: [{name: m, kind: sram, capacity_bytes: 1, "
              "bandwidth_bytes_per_cycle: 1}]}\n", 1), ["chips: 4104 chips in all", "1 to 4096"]),
    ("bytes_per_s_too_slow_for_the_clock", _text(bandwidth_per_s="'1 kB/s'"),
     ["chips[0].memories[1].bandwidth_bytes_per_s: 1000 bytes/s at a 1e+09 Hz clock is 1e-06 bytes per cycle"]),
    ("quantity_overflowing_to_inf", _text(capacity="1e999 MiB"), ["chips[0].memories[0].capacity_bytes", "too large"]),
    ("huge_integer_count", _text(unit_count="9" * 400), ["chips[0].units[0].count", "too large"]),
    ("alias_bomb_in_when", _text().replace(NESTED_UNIT, NESTED_UNIT + "        when: " + _bomb() + "\n"),
     ["line 10", "more than 20000 values once aliases"]),
    ("alias_bomb_at_top_level", "bomb: " + _bomb(levels=12) + "\n" + _text(), ["line 1", "alias bomb"]),
    ("recursive_alias", _text().replace(NESTED_UNIT, NESTED_UNIT + "        when: &w {a: [*w]}\n"),
     ["line 10", "recursive"]),
    ("deep_flow_sequence_300k", "name: " + "[" * 300_000 + "]" * 300_000 + "\n", ["line 1", "64 levels deep"]),
    ("deep_flow_mapping_200k", "name: " + "{a: " * 200_000 + "1" + "}" * 200_000 + "\n", ["line 1", "64 levels deep"]),
    ("deep_block_sequence", "name:\n" + "- " * 300_000 + "x\n", ["line 2", "64 levels deep"]),
    ("deep_block_mapping", "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v\n",
     ["line 6", "64 levels deep"]),
    ("duplicate_top_level_key", _text() + "clock_hz: 2 GHz\n",
     ["line 41", "duplicate key 'clock_hz' (first at line 2, again at line 41)"]),
    ("duplicate_nested_key", _text().replace("        count: 2\n", "        count: 2\n        count: 3\n", 1),
     ["line 11", "duplicate key 'count' (first at line 10, again at line 11)"]),
    ("duplicate_key_in_flow_mapping", _text(rows="4, rows: 5"), ["line 11", "duplicate key 'rows'"]),
    ("python_object_apply", _text(hw_name="!!python/object/apply:os.system ['echo pwned']"),
     ["line 1", "python/object/apply:os.system"]),
    ("python_name_tag", _text(hw_name="!!python/name:os.system ''"), ["line 1", "python/name:os.system"]),
    ("unknown_local_tag", _text(rows="!shady 4"), ["line 11", "!shady"]),
    ("unit_named_like_a_link", _text(unit_name="'link:0->1'"), ["chips[0].units[0].name", "plain identifier"]),
    ("unit_named_allreduce", _text(unit_name="allreduce"), ["chips[0].units[0].name", "reserved"]),
    ("unit_named_link", _text(unit_name="link"), ["chips[0].units[0].name", "reserved"]),
    ("unit_name_with_colon", _text(unit_name="'chip0:mxu'"), ["chips[0].units[0].name", "no spaces, ':' or '/'"]),
    ("unit_name_with_slash", _text(unit_name="'a/b'"), ["chips[0].units[0].name", "plain identifier"]),
    ("unit_name_too_long", _text(unit_name="u" * 65), ["chips[0].units[0].name", "at most 64 characters"]),
    ("unit_name_not_a_string", _text(unit_name="[1, 2]"), ["chips[0].units[0].name", "expected a name"]),
    ("unit_named_like_a_memory", _text(unit_name="sram"), ["chips[0].units[0].name", "name of a memory"]),
    ("two_units_with_one_name", _text(unit_name="vpu"), ["chips[0].units[1].name", "two units are named 'vpu'"]),
    ("memory_named_allreduce", _text().replace("      - name: sram\n", "      - name: allreduce\n"),
     ["chips[0].memories[0].name", "reserved"]),
    ("hw_name_with_newline", _text(hw_name='"toy\\nrm -rf /"'), ["name: a name must be a plain identifier"]),
    ("unknown_top_level_key", _text() + "colour: blue\n", ["colour: Extra inputs are not permitted (got 'blue')"]),
    ("unknown_nested_key", _text(rows="4, depth: 3"), ["chips[0].units[0].array.depth: Extra inputs"]),
    ("removed_links_key", _text().replace("    memories:\n", "    links: [{src: mxu, dst: vpu}]\n    memories:\n"),
     ["chips[0].links: Extra inputs are not permitted"]),
    ("removed_buffer_capacity", _text(buffer_bandwidth="32, capacity_bytes: 64 KiB"),
     ["chips[0].units[0].input_buffer.capacity_bytes: Extra inputs are not permitted"]),
    ("chips_is_a_mapping", "name: toy\nclock_hz: 1 GHz\nchips: {name: chip}\n",
     ["chips: Input should be a valid list"]),
    ("units_is_a_string", _text().replace("    units:\n", "    units: everything\n    unused:\n"),
     ["chips[0].units: Input should be a valid list"]),
    ("array_is_a_list", _text().replace("array: {rows: 4, cols: 4, dataflow: ws}", "array: [4, 4]"),
     ["chips[0].units[0].array: Input should be a valid dictionary"]),
    ("when_is_a_list", _text().replace(NESTED_UNIT, NESTED_UNIT + "        when: [kernel, 3]\n"),
     ["chips[0].units[0].when: expected a mapping of node attributes"]),
    ("when_nested_too_deep", _text().replace(NESTED_UNIT, NESTED_UNIT + "        when: {kernel: [[[3]]]}\n"),
     ["chips[0].units[0].when: when.kernel: lists nest at most 2 levels"]),
    ("when_key_not_a_name", _text().replace(NESTED_UNIT, NESTED_UNIT + "        when: {'a b': 3}\n"),
     ["chips[0].units[0].when", "is not a node attribute name"]),
    ("reads_is_a_string", _text().replace("        reads: [sram]\n", "        reads: sram\n", 1),
     ["chips[0].units[0].reads: Input should be a valid list"]),
    ("unknown_memory", _text().replace("        reads: [sram]\n", "        reads: [hbm]\n", 1),
     ["chips[0].units[0].reads[0]", "names memory 'hbm'"]),
    ("two_compute_models", _text().replace("dataflow: ws}\n", "dataflow: ws}\n        vector: {lanes: 4}\n", 1),
     ["chips[0].units[0]", "exactly one compute model of array, vector, per_element, stream (got array and vector)"]),
    ("gang_given_a_number", _text().replace(NESTED_UNIT, NESTED_UNIT + "        gang: 1\n"),
     ["chips[0].units[0].gang: Input should be a valid boolean (got 1)"]),
    ("unknown_op", _text().replace("ops: [matmul]", "ops: [matmull]", 1),
     ["chips[0].units[0].ops[0]", "unknown op 'matmull'; did you mean matmul"]),
    ("several_chips_without_interconnect", _text().split("interconnect:")[0],
     ["2 chips need an interconnect"]),
    ("bad_dtype_key", _text(bytes_per_element="4, bfloat16: 2"), ["bytes_per_element.bfloat16"]),
    ("invalid_date", _text(hw_name="2001-13-45"), ["line 1", "cannot read '2001-13-45' as timestamp"]),
    ("integer_of_5000_digits", _text(rows="9" * 5000), ["line 11", "as int"]),
    ("scalar_of_20000_characters", _text().replace("name: toy\n", "name: toy\ndescription: " + "x" * 20_000 + "\n"),
     ["line 2", "a value of 20000 characters"]),
    ("too_many_values", _text().replace("ops: [matmul]", "ops: [" + ", ".join(["matmul"] * 30_000) + "]", 1),
     ["line 9", "more than 20000 values"]),
    ("unclosed_bracket", "name: [toy\nclock_hz: 1 GHz\n", ["not valid YAML at line 2"]),
    ("two_documents", _text() + "---\n" + _text(),
     ["line 41", "expected a single document in the stream, but found another document"]),
    ("control_character", _text(hw_name="to\x07y"), ["line 1", "'\\x07'", "not allowed"]),
    ("control_character_after_accents", _text().replace("clock_hz: 1 GHz", "description: \u00e9t\u00e9\n"
                                                         "clock_hz: 1 GHz\x07"), ["line 3", "not allowed"]),
    ("empty_file", "", ["got nothing (an empty file, or only comments)"]),
    ("only_comments", "# nothing here\n# at all\n", ["got nothing"]),
    ("only_null", "~\n", ["got nothing"]),
    ("a_yaml_list", "- name: toy\n- clock_hz: 1 GHz\n", ["expected a mapping of keys", "got a list"]),
    ("a_yaml_scalar", "just some words\n", ["expected a mapping of keys", "got a str ('just some words')"]),
    ("binary_file", bytes(range(256)) * 4, ["a binary file (it contains NUL bytes)"]),
    ("latin1_text", "name: caf\xe9\n".encode("latin-1"), ["not a UTF-8 text file"]),
    ("too_large", "name: toy\n" + "# padding\n" * (MAX_FILE_BYTES // 10 + 1), ["too large"]),
]


@pytest.mark.parametrize("case", [c[0] for c in FILE_CASES])
def test_hostile_file_is_refused_with_one_paragraph_naming_file_and_key(case, tmp_path):
    text, expected = next(c[1:] for c in FILE_CASES if c[0] == case)
    path = tmp_path / "hostile.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    budget = yaml_loader.MAX_NODES * STEPS_PER_VALUE if case == "too_many_values" else REFUSAL_STEPS
    _refused(path, expected, name=str(path), max_steps=budget)


@pytest.mark.parametrize("case", ["alias_bomb_in_when", "alias_bomb_at_top_level", "deep_flow_sequence_300k",
                                  "deep_block_sequence", "too_many_values"])
def test_a_bomb_is_refused_with_bounded_memory(case, tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(dict((c[0], c[1]) for c in FILE_CASES)[case])
    tracemalloc.start()
    try:
        with pytest.raises(A.HwConfigError):
            A.load_hw(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB while refusing a file of at most 1 MiB"


def _refused_by_yaml_layer(text: str, loader: type, match: str) -> None:
    """load_yaml refuses `text` within YAML_BOMB_STEPS Python steps (libyaml's own C work is not counted)."""
    with WorkMeter(YAML_BOMB_STEPS), pytest.raises(yaml.YAMLError, match=match):
        yaml_loader.load_yaml(text, loader)


def test_alias_bomb_is_refused_after_little_work_with_either_yaml_backend():
    text = "units: " + _bomb(levels=12) + "\n"  # 10^12 values once expanded
    loaders = [yaml_loader.PyBoundedSafeLoader] + [getattr(yaml_loader, "CBoundedSafeLoader")] * (
        yaml_loader.CParser is not None)
    for loader in loaders:
        _refused_by_yaml_layer(text, loader, "more than 20000 values")


@pytest.mark.parametrize("text", ["[" * 300_000, "{a: " * 300_000, "- " * 300_000 + "x"], ids=["flow", "map", "block"])
def test_deep_nesting_is_refused_after_little_work_with_either_yaml_backend(text):
    loaders = [yaml_loader.PyBoundedSafeLoader] + [getattr(yaml_loader, "CBoundedSafeLoader")] * (
        yaml_loader.CParser is not None)
    for loader in loaders:
        _refused_by_yaml_layer(text, loader, "64 levels deep")


def test_anchors_aliases_and_merge_keys_still_work_within_the_limits(tmp_path):
    text = _text().replace("      - name: vpu\n", "      - &vector_unit\n        name: vpu\n")
    text = text.replace("interconnect:", "  - <<: *chip0\n    name: chip_b\ninterconnect:")
    text = text.replace("  - name: chip\n", "  - &chip0\n    name: chip\n")
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    hw = A.load_hw(path)
    assert [c.name for c in hw.chips] == ["chip", "chip_b"] and hw.chips[1].units == hw.chips[0].units


# ---- the Python API ----------------------------------------------------------------------------------

def _good_dict() -> dict:
    return yaml.safe_load(_text())


def test_load_hw_accepts_a_path_a_bundled_name_a_dict_and_an_hwspec(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(_text())
    hw = A.load_hw(path)
    assert A.load_hw(str(path)) == hw == A.load_hw(_good_dict())
    assert A.load_hw(hw) is hw
    assert A.load_hw("groq_like") == A.load_hw(HWCONFIGS / "groq_like.yaml")


def _recursive() -> dict:
    data = _good_dict()
    data["chips"][0]["units"][0]["when"] = {"a": []}
    data["chips"][0]["units"][0]["when"]["a"].append(data["chips"][0]["units"][0]["when"]["a"])
    return data


def _with(path: tuple, value) -> dict:
    data = _good_dict()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


DICT_CASES = [
    ("inf_clock", _with(("clock_hz",), float("inf")), ["<dict>", "clock_hz", "got inf"]),
    ("nan_rows", _with(("chips", 0, "units", 0, "array", "rows"), float("nan")), ["<dict>", "array.rows"]),
    ("numpy_style_bool", _with(("chips", 0, "units", 0, "count"), True), ["<dict>", "units[0].count", "boolean"]),
    ("bytes_name", _with(("name",), b"toy"), ["<dict>", "name: expected a name"]),
    ("recursive_structure", _recursive(), ["<dict>", "nested more than 64 levels"]),
    ("non_string_key", {**_good_dict(), 3: "x"}, ["<dict>", "[3]: Keys should be strings (got 3)"]),
]


@pytest.mark.parametrize("data, expected", [c[1:] for c in DICT_CASES], ids=[c[0] for c in DICT_CASES])
def test_a_dict_is_validated_exactly_like_a_file(data, expected):
    _refused(data, expected)


@pytest.mark.parametrize("value", [None, 3, 2.5, ["groq_like"], b"groq_like", object(), {1, 2}],
                         ids=["none", "int", "float", "list", "bytes", "object", "set"])
def test_load_hw_refuses_what_it_does_not_accept_and_says_what_it_does(value):
    _refused(value, ["load_hw got a", "expected a path to a YAML file, the name of a bundled config"])


@pytest.mark.parametrize("name, expected", [
    ("no_such_machine", ["no_such_machine: no such file, and no bundled hardware config", "groq_like"]),
    ("../../../../../no_such_dir/passwd", ["no such file"]),
    ("/nonexistent/dir/hw.yaml", ["/nonexistent/dir/hw.yaml: no such file"]),
    ("bad\0name", ["'bad\\x00name': no such file"]),
    ("x" * 5000, ["not a usable path", "File name too long"]),
    ("", ["empty name"]),
])
def test_a_missing_or_unusable_name_is_refused(name, expected):
    _refused(name, expected)


def test_a_directory_is_refused(tmp_path):
    _refused(tmp_path, [f"{tmp_path}: is a directory"])


def test_an_unreadable_special_file_is_refused():
    _refused("/dev/null", ["/dev/null: not a regular file"])


# ---- the command line ------------------------------------------------------------------------------------

def test_every_shipped_config_validates_from_the_command_line(capsys):
    files = sorted(str(p) for p in HWCONFIGS.glob("*.yaml"))
    assert main(["hw", "validate", *files]) == 0
    out, err = capsys.readouterr()
    assert all(f"{f}: ok" in out for f in files) and not err


@pytest.mark.parametrize("case", ["alias_bomb_in_when", "deep_flow_sequence_300k", "duplicate_top_level_key",
                                  "python_object_apply", "unit_named_like_a_link", "binary_file"])
def test_a_hostile_file_exits_1_from_hw_validate_without_a_traceback(case, tmp_path, capsys):
    text = dict((c[0], c[1]) for c in FILE_CASES)[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with WorkMeter(REFUSAL_STEPS):
        assert main(["hw", "validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert str(path) in err and "Traceback" not in err + out and "ok" not in out
