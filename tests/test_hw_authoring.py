"""Writing a hardware file: the JSON Schema (`hw schema`), the commented template (`hw template`), "did you
mean" for unknown keys and names, the hint for a unit missing gradient ops, bits versus bytes in sizes,
the note on idle chips, and --help free of internal references."""
from __future__ import annotations

import argparse
import json
import re
from typing import Any

import pytest

import accelsim as A
from accelsim.cli import main, make_parser
from accelsim.hw.load import bundled_names, resolve
from accelsim.hw.quantity import HZ_UNIT, SIZE_UNIT, parse_bandwidth, parse_bytes, parse_hz, pattern
from accelsim.hw.schema import hw_json_schema, keys_at, schema_text
from accelsim.hw.template import SCHEMA_FILE, hw_template
from accelsim.hw.yaml_loader import load_yaml

MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]


def _shipped(name: str) -> Any:
    return load_yaml(resolve(name).read_text())


def _template_data(chips: int = 1) -> dict[str, Any]:
    return load_yaml(hw_template(chips))


# ---- a small JSON Schema checker, used where the `jsonschema` package is not installed ------------------

_ANNOTATIONS = {"title", "description", "default", "$schema", "$defs", "examples"}


def _type_ok(value: Any, kind: str) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"integer": number and float(value).is_integer(), "number": number, "string": isinstance(value, str),
            "boolean": isinstance(value, bool), "null": value is None, "object": isinstance(value, dict),
            "array": isinstance(value, list)}[kind]


def _problems(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str = "") -> list[str]:
    """Where `value` breaks `schema`, for the keywords pydantic's schemas use; any other keyword fails the
    test, so that the schema cannot grow a rule this checker silently skips."""
    unknown = set(schema) - _ANNOTATIONS - {
        "$ref", "anyOf", "oneOf", "type", "enum", "const", "properties", "additionalProperties", "required", "items",
        "prefixItems", "minItems", "maxItems", "minimum", "maximum", "pattern", "maxLength", "propertyNames"}
    assert not unknown, f"the test's checker does not know {unknown}"
    out: list[str] = []
    if "$ref" in schema:
        out += _problems(value, root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root, path)
    if "anyOf" in schema and all(_problems(value, s, root, path) for s in schema["anyOf"]):
        out.append(f"{path}: {value!r:.60} matches no branch of anyOf")
    if "oneOf" in schema and sum(not _problems(value, s, root, path) for s in schema["oneOf"]) != 1:
        out.append(f"{path}: {value!r:.60} does not match exactly one branch of oneOf")
    if "type" in schema and not _type_ok(value, schema["type"]):
        return out + [f"{path}: {value!r:.60} is not of type {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: {value!r} is not {schema['const']!r}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{path}: missing {k}" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if "propertyNames" in schema:
                out += _problems(k, schema["propertyNames"], root, f"{path}.{k} (the key)")
            if k in props:
                out += _problems(v, props[k], root, f"{path}.{k}")
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: key {k!r} is not allowed")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += _problems(v, schema["additionalProperties"], root, f"{path}.{k}")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            out.append(f"{path}: {len(value)} items")
        prefix = schema.get("prefixItems", [])  # a tuple's positions (a weight stream's tile_shape), then items
        for i, item in enumerate(value):
            out += _problems(item, prefix[i] if i < len(prefix) else schema.get("items", {}), root, f"{path}[{i}]")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            out.append(f"{path}: {value} is out of range")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: {value!r} does not match {schema['pattern']}")
        if len(value) > schema.get("maxLength", len(value)):
            out.append(f"{path}: too long")
    return out


def schema_problems(data: Any) -> list[str]:
    """Every way `data` breaks the hardware schema: by the `jsonschema` package where it is installed, else
    by the checker above."""
    schema = hw_json_schema()
    try:
        import jsonschema
    except ImportError:
        return _problems(data, schema, schema)
    return [f"{e.json_path}: {e.message} ({e.validator})"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


# ---- hw schema ------------------------------------------------------------------------------------------

def test_schema_is_json_and_the_same_on_every_run(tmp_path, capsys):
    text = schema_text()
    assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema_text() == text
    assert main(["hw", "schema"]) == 0
    assert capsys.readouterr().out == text
    out = tmp_path / "hw.schema.json"
    assert main(["hw", "schema", "-o", str(out)]) == 0
    assert out.read_text() == text and f"wrote {out}" in capsys.readouterr().out


def test_every_key_of_the_schema_is_described():
    schema = hw_json_schema()
    models = {"(top level)": schema, **schema["$defs"]}
    undescribed = [f"{m}.{k}" for m, model in models.items() for k, prop in model["properties"].items()
                   if not prop.get("description")]
    assert undescribed == []


def test_quantities_are_described_as_numbers_or_strings_with_units():
    props = hw_json_schema()["$defs"]["Memory"]["properties"]
    capacity = props["capacity_bytes"]
    assert "'24 MiB'" in capacity["description"] and "b a bit" in capacity["description"]
    assert [b["type"] for b in capacity["anyOf"]] == ["integer", "string"]
    assert capacity["anyOf"][0]["minimum"] == A.hw.RANGES["capacity_bytes"].lo
    assert "'200 Gb/s'" in props["bandwidth_bytes_per_s"]["description"]


@pytest.mark.parametrize("name", bundled_names())
def test_every_shipped_hwconfig_satisfies_the_schema(name):
    assert schema_problems(_shipped(name)) == []


@pytest.mark.parametrize("name", bundled_names())
def test_every_key_a_shipped_hwconfig_uses_is_in_the_schema(name):
    checked: list[tuple] = []

    def walk(value: Any, loc: tuple) -> None:
        if isinstance(value, dict):
            found = keys_at(loc)
            if found is not None:  # None: a free-form mapping (when:, bytes_per_element:)
                assert set(value) <= set(found[1]), (loc, set(value) - set(found[1]))
                checked.append(loc)
            for k, v in value.items():
                walk(v, (*loc, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*loc, i))

    data = _shipped(name)
    walk(data, ())
    units = sum(len(c["units"]) for c in data["chips"])
    assert () in checked and len([c for c in checked if len(c) == 4 and c[2] == "units"]) == units


@pytest.mark.parametrize("change, where", [
    (lambda d: d["chips"][0]["units"][0].update(arrray={"rows": 8}), "arrray"),
    (lambda d: d["chips"][0]["memories"][0].update(capacity_bytes="24 MiBs"), "capacity_bytes"),
    (lambda d: d["chips"][0]["memories"][0].update(bandwidth_bytes_per_s="1 GB/s"), "oneOf"),
    (lambda d: d["chips"][0]["units"][0].update(ops=["matmull"]), "matmull"),
    (lambda d: d.update(clock_hz="1 GHzz"), "clock_hz"),
])
def test_the_schema_refuses_what_the_loader_refuses(change, where):
    data = _template_data()
    assert schema_problems(data) == []
    change(data)
    assert any(where in p for p in schema_problems(data))
    with pytest.raises(A.HwConfigError):
        A.load_hw(data)


@pytest.mark.parametrize("text", ["24 MiB", "1.5 GB", "32 Mb", "8KiB", "1e3", " 7 ", "0.5 kib", "24 MiBs", "MiB",
                                  "-4 MiB", "1 XB", "4 Hz", "34 GB/s"])
def test_the_size_pattern_accepts_exactly_what_parse_bytes_reads(text):
    try:
        parse_bytes(text)
        parsed = True
    except ValueError as e:
        parsed = "whole number of bytes" in str(e)  # "0.5 kib": well formed, refused for its value
    assert bool(re.search(pattern(SIZE_UNIT), text)) == parsed


@pytest.mark.parametrize("text", ["34 GB/s", "200 Gb/s", "1 TiB/s", "5e9", "34 GB", "34 GBps", "/s"])
def test_the_bandwidth_pattern_accepts_exactly_what_parse_bandwidth_reads(text):
    try:
        parse_bandwidth(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(re.search(pattern(SIZE_UNIT, "/s"), text)) == parsed


@pytest.mark.parametrize("text", ["700 MHz", "1.25 ghz", "9e8", "1 GHzz", "700 MB"])
def test_the_frequency_pattern_accepts_exactly_what_parse_hz_reads(text):
    try:
        parse_hz(text)
        parsed = True
    except ValueError:
        parsed = False
    assert bool(re.search(pattern(HZ_UNIT), text)) == parsed


# ---- hw template ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("chips", [1, 4])
def test_the_template_loads_satisfies_the_schema_and_comments_every_number(chips, tmp_path):
    text = hw_template(chips)
    path = tmp_path / "my_hw.yaml"
    path.write_text(text)
    hw = A.load_hw(path)
    assert hw.n_chips == chips and (hw.interconnect is not None) == (chips > 1)
    assert {u.compute_model for u in hw.chips[0].units} == {"array", "vector"}
    assert {m.kind for m in hw.chips[0].memories} == {"sram", "hbm"}
    assert schema_problems(load_yaml(text)) == []
    assert text.startswith(f"# yaml-language-server: $schema={SCHEMA_FILE}\n")
    numbers = [line for line in text.splitlines()
               if not line.lstrip().startswith("#") and re.search(r":\s*[^#]*\d", line.split("#")[0])]
    assert len(numbers) >= 14
    assert [line for line in numbers if "#" not in line] == []


def test_the_template_trains_mlp_from_the_command_line(tmp_path, capsys):
    path = tmp_path / "my_hw.yaml"
    assert main(["hw", "template", "-o", str(path)]) == 0
    assert f"wrote {path}" in capsys.readouterr().out
    assert main(["hw", "validate", str(path)]) == 0
    assert main(["run", "--hw", str(path), "--model", "mlp", "--out", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "training step of mlp.train on my_accelerator" in out and "simulated (static)" in out


def test_a_template_of_two_chips_spreads_a_step_over_both(tmp_path, capsys):
    path = tmp_path / "two.yaml"
    assert main(["hw", "template", "--chips", "2", "-o", str(path)]) == 0
    assert main(["compile", "--hw", str(path), *MLP, "--data-parallel", "2", "-o", str(tmp_path / "s.json")]) == 0
    schedule = json.loads((tmp_path / "s.json").read_text())
    assert {t["chip"] for t in schedule["tasks"]} == {0, 1}


def test_the_template_prints_without_o_and_never_overwrites_a_file(tmp_path, capsys):
    assert main(["hw", "template"]) == 0
    assert capsys.readouterr().out == hw_template(1)
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\n")
    assert main(["hw", "template", "-o", str(path)]) == 1
    assert "the file exists" in capsys.readouterr().err and path.read_text() == "name: mine\n"
    assert main(["hw", "template", "--chips", "5000"]) == 1
    assert "expected a whole number from 1 to 4096 chips" in capsys.readouterr().err


# ---- did you mean ---------------------------------------------------------------------------------------

def _load_error(data: dict[str, Any]) -> str:
    with pytest.raises(A.HwConfigError) as e:
        A.load_hw(data)
    return str(e.value)


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.update(clock=d.pop("clock_hz")), "clock: Extra inputs are not permitted (got '1 GHz'); did you "
                                                  "mean 'clock_hz'?"),
    (lambda d: d["chips"][0]["units"][0].update(arrray=d["chips"][0]["units"][0].pop("array")),
     "chips[0].units[0].arrray: Extra inputs are not permitted; did you mean 'array'?"),
    (lambda d: d["chips"][0]["units"][0]["array"].update(rowz=8), "did you mean 'rows'?"),
    (lambda d: d["chips"][0]["memories"][1].update(capacity="1 GB"),
     "chips[0].memories[1].capacity: Extra inputs are not permitted (got '1 GB'); did you mean 'capacity_bytes'?"),
    (lambda d: d["chips"][0].update(colour="blue"), "chips[0] has no key 'colour', its keys are name, count, "
                                                    "technology_nm, units, memories"),
    (lambda d: d["chips"][0]["units"][1]["vector"].update(lane=8), "did you mean 'lanes'?"),
])
def test_an_unknown_key_anywhere_gets_the_closest_allowed_key(edit, expected):
    data = _template_data()
    edit(data)
    assert expected in _load_error(data)


def test_an_unknown_key_in_the_interconnect_gets_the_closest_allowed_key():
    data = _template_data(2)
    data["interconnect"]["topolgy"] = data["interconnect"].pop("topology")
    text = _load_error(data)
    assert "interconnect.topolgy: Extra inputs are not permitted (got 'ring'); did you mean 'topology'?" in text
    assert "interconnect.topology: Field required" in text


def test_hints_stay_on_their_own_lines_when_problems_are_cut_short():
    data = _template_data()
    unit = data["chips"][0]["units"][1]
    data["chips"][0]["units"] = [{**unit, "name": f"v{i}", "cuont": 1} for i in range(22)]
    lines = _load_error(data).splitlines()
    assert lines[0].endswith("22 problem(s)") and len(lines) == 22  # 20 problems and '... and 2 more'
    assert all(line.endswith("did you mean 'count'? (chips[0].units[%d] has no key 'cuont')" % i)
               for i, line in enumerate(lines[1:21]))
    assert lines[21] == "  ... and 2 more"


def test_a_unit_naming_a_memory_that_does_not_exist_gets_the_closest_one():
    data = _template_data()
    data["chips"][0]["units"][1]["reads"] = ["srma"]
    assert ("unit 'vpu' names memory 'srma', which chip 'chip' does not have (did you mean 'sram'? memories: hbm, "
            "sram)") in _load_error(data)


def test_an_unknown_op_gets_the_closest_op():
    data = _template_data()
    data["chips"][0]["units"][0]["ops"] = ["conv2d_grad_inptu"]
    assert "unknown op 'conv2d_grad_inptu'; did you mean conv2d_grad_input" in _load_error(data)


def test_a_misspelt_bundled_config_gets_the_closest_name():
    with pytest.raises(A.HwConfigError, match="did you mean 'groq_like'"):
        A.load_hw("groq_lik")


def test_an_override_naming_a_unit_that_does_not_exist_gets_the_closest_name():
    with pytest.raises(A.HwConfigError, match=r"has no item 'mxn' \(did you mean 'mxm'\?\)"):
        A.load_hw("groq_like", overrides={"chips.tsp.units.mxn.count": 2})


# ---- a unit that lists ops but misses their gradients ----------------------------------------------------

def _ops_only_hw(ops: list[str]) -> A.HwSpec:
    data = _template_data()
    mxu = data["chips"][0]["units"][0]
    del mxu["categories"]
    mxu["ops"] = ops
    return A.load_hw(data)


def test_training_on_a_unit_without_gradient_ops_suggests_its_category():
    hw = _ops_only_hw(["matmul", "conv2d"])
    train = A.training_graph(A.models.build("superres", batch=1, size=8, width=4), optimizer="sgd", lr=0.01)
    with pytest.raises(A.MappingError) as e:
        A.compile(train, hw)
    text = str(e.value)
    assert re.search(r"conv2d_grad_(input|weight) is a gradient op of the backward pass, and a tensor op: mxu lists "
                     r"tensor ops by name but not it; `categories: \[tensor\]` on mxu runs every tensor op, the "
                     r"gradient ops of a training step included", text)


def test_inference_on_the_same_unit_needs_no_gradient_ops():
    hw = _ops_only_hw(["matmul", "conv2d"])
    assert A.compile(A.models.build("superres", batch=1, size=8, width=4), hw).makespan_cycles > 0


def test_a_forward_op_missing_from_the_list_gets_the_category_hint_without_gradients():
    hw = _ops_only_hw(["matmul"])
    with pytest.raises(A.MappingError) as e:
        A.compile(A.models.build("superres", batch=1, size=8, width=4), hw)
    text = str(e.value)
    assert "conv2d is a tensor op: mxu lists tensor ops by name but not it; `categories: [tensor]`" in text
    assert "backward" not in text


# ---- bits versus bytes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, n_bytes", [
    ("32 MB", 32_000_000), ("32 MiB", 32 * 2**20), ("32 Mb", 4_000_000), ("32 Mib", 4 * 2**20),
    ("8 kB", 8_000), ("8 KB", 8_000), ("8 kb", 1_000), ("8 Kb", 1_000), ("8 KiB", 8 * 2**10), ("8 Kib", 2**10),
    ("1 GB", 10**9), ("1 Gb", 125_000_000), ("1 GiB", 2**30), ("1 Gib", 2**27), ("2 TB", 2 * 10**12),
    ("2 Tb", 250 * 10**9), ("16 B", 16), ("16 b", 2), ("16", 16), ("1.5 GB", 1_500_000_000), ("1.5 Gb", 187_500_000),
])
def test_a_capital_b_is_a_byte_and_a_lowercase_b_a_bit(text, n_bytes):
    assert parse_bytes(text) == n_bytes and isinstance(parse_bytes(text), int)


@pytest.mark.parametrize("text, per_s", [("200 Gb/s", 25e9), ("34 GB/s", 34e9), ("1 GiB/s", 2**30),
                                         ("1 Gib/s", 2**27), ("100 Mb/s", 12.5e6), ("100 MB/s", 1e8),
                                         ("12 b/s", 1.5), ("10 kb/s", 1250)])
def test_bandwidths_in_bits_per_second_are_divided_by_8(text, per_s):
    assert parse_bandwidth(text) == per_s


@pytest.mark.parametrize("text, bits, n_bytes", [("12 b", "12", "1.5"), ("3 b", "3", "0.375"),
                                                ("0.5 kb", "500", "62.5")])
def test_a_size_in_bits_that_is_not_whole_bytes_is_refused(text, bits, n_bytes):
    with pytest.raises(ValueError, match=rf"is {bits} bits = {n_bytes} bytes \(a lowercase b is a bit, 8 to a "
                                         rf"byte\).*capital B"):
        parse_bytes(text)


def test_a_hardware_file_reads_bits_in_capacities_and_link_bandwidths():
    data = _template_data(2)
    data["chips"][0]["memories"][0]["capacity_bytes"] = "256 Mb"
    data["interconnect"]["bandwidth_bytes_per_s"] = "200 Gb/s"
    hw = A.load_hw(data)
    assert hw.chips[0].memories[0].capacity_bytes == 32_000_000
    assert hw.interconnect.bandwidth_bytes_per_s == 25e9
    data["chips"][0]["memories"][0]["capacity_bytes"] = "12 b"
    assert "chips[0].memories[0].capacity_bytes: '12 b' is 12 bits = 1.5 bytes" in _load_error(data)


@pytest.mark.parametrize("name", bundled_names())
def test_no_shipped_hwconfig_writes_a_quantity_in_bits(name):
    """The meaning of a lowercase b changed from bytes to bits; no shipped value used one."""
    strings: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            [walk(v) for v in value.values()]
        elif isinstance(value, list):
            [walk(v) for v in value]
        elif isinstance(value, str):
            strings.append(value)

    walk(_shipped(name))
    quantities = [re.search(pattern(SIZE_UNIT, "(?:/s)?"), s) for s in strings]
    assert any(m and m.group(2) for m in quantities)  # the walk sees the quantities written with a unit
    assert [m.group() for m in quantities if m and m.group(2).endswith("b")] == []


# ---- idle chips -----------------------------------------------------------------------------------------

def test_compiling_on_fewer_chips_than_the_machine_has_notes_the_idle_ones(tmp_path, capsys):
    assert main(["compile", "--hw", "groq_like_x4", *MLP, "-o", str(tmp_path / "s.json")]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    assert notes == ["note: 3 of the 4 chips of groq_like_x4 sit idle: the step uses 1 chip (one per replica x "
                     "stage x rank); --data-parallel, --pipeline-stages and --tensor-parallel spread it over more, "
                     "e.g. --data-parallel 4"]


def test_run_notes_idle_chips_once_and_names_the_one_left_over(capsys):
    assert main(["run", "--hw", "groq_like_x4", *MLP, "--pipeline-stages", "3", "--no-sim"]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "note:" in line]
    assert len(notes) == 1 and "1 of the 4 chips of groq_like_x4 sits idle: the step uses 3 chips" in notes[0]
    assert "e.g." not in notes[0]  # no --data-parallel fits beside 3 stages on 4 chips


@pytest.mark.parametrize("argv", [["--hw", "groq_like_x4", "--data-parallel", "4"],
                                  ["--hw", "groq_like_x4", "--data-parallel", "2", "--pipeline-stages", "2"],
                                  ["--hw", "groq_like"]])
def test_a_step_on_every_chip_gets_no_note(argv, tmp_path, capsys):
    assert main(["compile", *argv, *MLP, "-o", str(tmp_path / "s.json")]) == 0
    assert "idle" not in capsys.readouterr().out


# ---- --help ---------------------------------------------------------------------------------------------

def _help_texts(parser: argparse.ArgumentParser, path: str = "accelsim"):
    yield path, parser.description or ""
    for action in parser._actions:
        yield f"{path} {'/'.join(action.option_strings) or action.dest}", action.help or ""
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _help_texts(sub, f"{path} {name}")
            for choice in action._choices_actions:
                yield f"{path} {choice.dest}", choice.help or ""


INTERNAL = re.compile(r"(?i)seed \d{3}|\bissue\b|\bStep \d|\b(?:accelsim|cost|compiler|schedule|sim|hw|passes|cli|"
                      r"execute|graph|ops)/\w+|\b\w+\.py\b")


def test_help_texts_name_no_internal_references():
    found = [(where, INTERNAL.search(text).group()) for where, text in _help_texts(make_parser())
             if INTERNAL.search(text)]
    assert found == []


def test_the_internal_reference_pattern_finds_what_it_should():
    assert [bool(INTERNAL.search(t)) for t in ("seed 001's runtime", "see issue 30", "Step 5", "cost/area.py",
                                               "a .py file", "the step's chips", "schedules/x.json")] == \
        [True, True, True, True, False, False, False]
