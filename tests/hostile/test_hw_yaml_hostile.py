"""Hostile hardware descriptions: values that are not physical, YAML tricks (duplicate keys, tags, deep
nesting) and malformed files. Each is refused by `A.load_hw(path)` (an AccelsimError) and by
`accelsim hw validate path` (exit 1), naming the file and the key; none ends in a traceback. The few whose
acceptance is a matter of taste must, when accepted, compile and simulate a small step without a traceback.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

import accelsim as A

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py
# Python steps (tests/work_meter.py) a refusal of a bomb may take: 70k from the command line, 3k from the API;
# 300k nested brackets scanned without the loader's depth check take 12M.
REFUSE_STEPS = 1_000_000

REPO = Path(__file__).resolve().parents[2]
GROQ = REPO / "hwconfigs" / "groq_like.yaml"
GROQ_X4 = REPO / "hwconfigs" / "groq_like_x4.yaml"
FILE = "hostile_hw.yaml"
INF, NAN = math.inf, math.nan


def parsed(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@dataclass(frozen=True)
class Bad:
    """A hostile description: `make()` returns YAML text or bytes, or a dict to dump."""

    make: Callable[[], Any]
    words: tuple
    strict: bool = True  # False: may be accepted, but then it must work downstream
    max_steps: int | None = None  # a budget of Python steps for the refusal


def _edit(path: str, value: Any, base: Path = GROQ) -> Callable[[], dict]:
    """groq_like with the value at a dotted path (integer list indices) replaced; `value` DELETE removes it."""
    def make() -> dict:
        d = copy.deepcopy(parsed(base))
        *parents, last = path.split(".")
        obj: Any = d
        for p in parents:
            obj = obj[int(p)] if isinstance(obj, list) else obj[p]
        key: Any = int(last) if isinstance(obj, list) else last
        if value is DELETE:
            del obj[key]
        else:
            obj[key] = value
        return d
    return make


DELETE = object()
TENSOR_LINE = "        categories: [tensor]"  # the mxm unit's line in groq_like.yaml
MXM = "chips.0.units.0"
VXM = "chips.0.units.1"
SXM = "chips.0.units.2"
MEM = "chips.0.memories.0"


def _groq_text() -> str:
    return GROQ.read_text()


def _text_replace(old: str, new: str, base: Path = GROQ) -> Callable[[], str]:
    def make() -> str:
        text = base.read_text()
        assert old in text, f"{old!r} is no longer in {base.name}"
        return text.replace(old, new, 1)
    return make


def _rename_unit(name: str) -> Callable[[], dict]:
    def make() -> dict:
        d = copy.deepcopy(parsed(GROQ))
        d["chips"][0]["units"][0]["name"] = name
        return d
    return make


def _rename_memory(name: str) -> Callable[[], dict]:
    def make() -> dict:
        d = copy.deepcopy(parsed(GROQ))
        d["chips"][0]["memories"][0]["name"] = name
        for u in d["chips"][0]["units"]:
            u["reads"], u["writes"] = [name], [name]
        return d
    return make


def _duplicate_unit() -> dict:
    d = copy.deepcopy(parsed(GROQ))
    d["chips"][0]["units"].append(copy.deepcopy(d["chips"][0]["units"][0]))
    return d


def _both_bandwidths() -> dict:
    d = copy.deepcopy(parsed(GROQ))
    d["chips"][0]["memories"][0]["bandwidth_bytes_per_s"] = "18 TB/s"
    return d


def _per_s_bandwidth(value: Any) -> Callable[[], dict]:
    def make() -> dict:
        d = copy.deepcopy(parsed(GROQ))
        mem = d["chips"][0]["memories"][0]
        del mem["bandwidth_bytes_per_cycle"]
        mem["bandwidth_bytes_per_s"] = value
        return d
    return make


def _deep_when() -> str:
    depth = 300_000
    nested = "[" * depth + "]" * depth
    return _groq_text().replace(TENSOR_LINE, f"{TENSOR_LINE}\n        when: {{kernel: {nested}}}", 1)


def _alias_amplification() -> str:
    """A small, bounded alias fan-out (10^4 leaves) in a unit's `when:`: a legal but odd file."""
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 4):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    bomb = "{" + ", ".join(lines) + "}"
    return _groq_text().replace(TENSOR_LINE, f"{TENSOR_LINE}\n        when: {bomb}", 1)


def _dup_top_key() -> str:
    return _groq_text().replace("clock_hz: 900 MHz", "clock_hz: 900 MHz\nclock_hz: 1 GHz", 1)


CASES: dict[str, Bad] = {
    # clock
    "clock_inf": Bad(_edit("clock_hz", INF), ("clock_hz",)),
    "clock_nan": Bad(_edit("clock_hz", NAN), ("clock_hz",)),
    "clock_1e-300": Bad(_edit("clock_hz", 1e-300), ("clock_hz",)),
    "clock_1e-300_hz_string": Bad(_edit("clock_hz", "1e-300 Hz"), ("clock_hz",)),
    "clock_1e300": Bad(_edit("clock_hz", 1e300), ("clock_hz",)),
    "clock_10e400_int": Bad(_edit("clock_hz", 10**400), ("clock_hz",)),
    "clock_1e400_mhz_string": Bad(_edit("clock_hz", "1e400 MHz"), ("clock_hz",)),
    "clock_nan_mhz_string": Bad(_edit("clock_hz", "nan MHz"), ("clock_hz",)),
    "clock_negative_string": Bad(_edit("clock_hz", "-900 MHz"), ("clock_hz",)),
    "clock_bool": Bad(_edit("clock_hz", True), ("clock_hz",)),
    "clock_word": Bad(_edit("clock_hz", "fast"), ("clock_hz",)),
    "clock_list": Bad(_edit("clock_hz", [900]), ("clock_hz",)),
    "clock_missing": Bad(_edit("clock_hz", DELETE), ("clock_hz",)),
    # memories
    "mem_bandwidth_1e-320": Bad(_edit(f"{MEM}.bandwidth_bytes_per_cycle", 1e-320), ("bandwidth",)),
    "mem_bandwidth_inf": Bad(_edit(f"{MEM}.bandwidth_bytes_per_cycle", INF), ("bandwidth",)),
    "mem_bandwidth_nan": Bad(_edit(f"{MEM}.bandwidth_bytes_per_cycle", NAN), ("bandwidth",)),
    "mem_bandwidth_per_s_1e-300": Bad(_per_s_bandwidth("1e-300 GB/s"), ("bandwidth",)),
    "mem_bandwidth_per_s_inf": Bad(_per_s_bandwidth("inf GB/s"), ("bandwidth",)),
    "mem_bandwidth_both": Bad(_both_bandwidths, ("bandwidth",)),
    "mem_capacity_inf": Bad(_edit(f"{MEM}.capacity_bytes", INF), ("capacity_bytes",)),
    "mem_capacity_1e300": Bad(_edit(f"{MEM}.capacity_bytes", 1e300), ("capacity_bytes",)),
    "mem_capacity_10e400_int": Bad(_edit(f"{MEM}.capacity_bytes", 10**400), ("capacity_bytes",)),
    "mem_capacity_1e400_gib_string": Bad(_edit(f"{MEM}.capacity_bytes", "1e400 GiB"), ("capacity_bytes",)),
    "mem_capacity_half_byte": Bad(_edit(f"{MEM}.capacity_bytes", 0.5), ("capacity_bytes",)),
    "mem_latency_10e30": Bad(_edit(f"{MEM}.latency_cycles", 10**30), ("latency_cycles",)),
    "mem_latency_inf": Bad(_edit(f"{MEM}.latency_cycles", INF), ("latency_cycles",)),
    "mem_kind_tape": Bad(_edit(f"{MEM}.kind", "tape"), ("kind",)),
    "mem_energy_inf": Bad(_edit(f"{MEM}.energy_pj_per_byte", INF), ("energy_pj_per_byte",)),
    "mem_area_inf": Bad(_edit(f"{MEM}.area_mm2", INF), ("area_mm2",)),
    "mem_area_1e-320": Bad(_edit(f"{MEM}.area_mm2", 1e-320), ("area_mm2",)),
    "memories_empty": Bad(_edit("chips.0.memories", []), (("memories", "mem"),)),
    # units
    "unit_latency_10e30": Bad(_edit(f"{MXM}.latency_cycles", 10**30), ("latency_cycles",)),
    "unit_latency_negative": Bad(_edit(f"{MXM}.latency_cycles", -1), ("latency_cycles",)),
    "unit_latency_fraction": Bad(_edit(f"{MXM}.latency_cycles", 2.5), ("latency_cycles",)),
    "unit_count_10e7": Bad(_edit(f"{MXM}.count", 10**7), ("count",)),
    "unit_count_zero": Bad(_edit(f"{MXM}.count", 0), ("count",)),
    "unit_count_fraction": Bad(_edit(f"{MXM}.count", 2.5), ("count",)),
    "unit_count_inf": Bad(_edit(f"{MXM}.count", INF), ("count",)),
    "chip_count_10e7": Bad(_edit("chips.0.count", 10**7), ("count",)),
    "array_rows_10e9": Bad(_edit(f"{MXM}.array.rows", 10**9), ("rows",)),
    "array_dataflow_unknown": Bad(_edit(f"{MXM}.array.dataflow", "diagonal"), ("dataflow",)),
    "vector_lanes_inf": Bad(_edit(f"{VXM}.vector.lanes", INF), ("lanes",)),
    "ops_per_lane_inf": Bad(_edit(f"{VXM}.vector.ops_per_lane_per_cycle", INF), ("ops_per_lane_per_cycle",)),
    "ops_per_lane_1e-320": Bad(_edit(f"{VXM}.vector.ops_per_lane_per_cycle", 1e-320), ("ops_per_lane_per_cycle",)),
    "stream_bytes_per_cycle_1e-320": Bad(_edit(f"{SXM}.stream.bytes_per_cycle", 1e-320), ("bytes_per_cycle",)),
    "stream_bytes_per_cycle_inf": Bad(_edit(f"{SXM}.stream.bytes_per_cycle", INF), ("bytes_per_cycle",)),
    "unit_energy_nan": Bad(_edit(f"{MXM}.energy_pj_per_op", NAN), ("energy_pj_per_op",)),
    "unit_area_negative": Bad(_edit(f"{MXM}.area_mm2", -1), ("area_mm2",)),
    "unit_area_bool": Bad(_edit(f"{MXM}.area_mm2", True), ("area_mm2",)),
    "unit_precision_int4": Bad(_edit(f"{MXM}.precision", "int4"), ("precision",)),
    "stream_unit_precision": Bad(_edit(f"{SXM}.precision", "int8"), ("precision", "stream")),
    "technology_nm_13": Bad(_edit("chips.0.technology_nm", 13), ("technology_nm", "28")),
    "technology_nm_string": Bad(_edit("chips.0.technology_nm", "14nm"), ("technology_nm",)),
    "unit_two_compute_models": Bad(_edit(f"{MXM}.vector", {"lanes": 4}), ("mxm",)),
    "unit_no_ops": Bad(_edit(f"{MXM}.categories", []), ("mxm",)),
    "unit_unknown_op": Bad(_edit(f"{MXM}.ops", ["matmull"]), ("matmull",)),
    "unit_unknown_category": Bad(_edit(f"{MXM}.categories", ["magic"]), ("categories",)),
    "unit_reads_unknown_memory": Bad(_edit(f"{MXM}.reads", ["nowhere"]), ("nowhere",)),
    "unit_when_is_string": Bad(_edit(f"{MXM}.when", "kernel 5"), ("when",)),
    "unit_named_link": Bad(_rename_unit("link:0->1"), ("link:0->1",)),
    "unit_named_allreduce": Bad(_rename_unit("allreduce"), ("allreduce",)),
    "duplicate_unit": Bad(_duplicate_unit, ("mxm",)),
    "unit_name_10000_chars": Bad(_rename_unit("x" * 10_000), ("name",), strict=False),
    "unit_name_empty": Bad(_rename_unit(""), ("name",), strict=False),
    "memory_named_like_a_label": Bad(_rename_memory("chip0:mem"), ("chip0:mem",), strict=False),
    "bytes_per_element_10e9": Bad(_edit("bytes_per_element.float32", 10**9), ("bytes_per_element",)),
    "bytes_per_element_float16": Bad(_edit("bytes_per_element.float16", 2), ("float16",)),
    # chips and the top level
    "chips_empty": Bad(_edit("chips", []), ("chips",)),
    "chips_mapping": Bad(_edit("chips", {"tsp": 1}), ("chips",)),
    "unknown_top_key": Bad(_edit("colour", "blue"), ("colour",)),
    "name_missing": Bad(_edit("name", DELETE), ("name",)),
    "description_500k_chars": Bad(_edit("description", "x" * 500_000), (("description", "characters"),),
                                  strict=False),
    "top_level_list": Bad(lambda: [parsed(GROQ)], ("mapping",)),
    "top_level_scalar": Bad(lambda: "42\n", ("mapping",)),
    "empty_file": Bad(lambda: "", (("mapping", "empty"),)),
    # interconnect (groq_like_x4)
    "link_bandwidth_inf": Bad(_edit("interconnect.bandwidth_bytes_per_s", "inf GB/s", GROQ_X4), ("bandwidth",)),
    "link_bandwidth_1e-300": Bad(_edit("interconnect.bandwidth_bytes_per_s", "1e-300 GB/s", GROQ_X4),
                                 ("bandwidth",)),
    "link_latency_10e30": Bad(_edit("interconnect.link_latency_cycles", 10**30, GROQ_X4), ("link_latency_cycles",)),
    "link_area_nan": Bad(_edit("interconnect.area_mm2", NAN, GROQ_X4), ("area_mm2",)),
    "link_topology_unknown": Bad(_edit("interconnect.topology", "hypercube", GROQ_X4), ("topology",)),
    "interconnect_missing": Bad(_edit("interconnect", DELETE, GROQ_X4), ("interconnect",)),
    # YAML itself
    "duplicate_top_key": Bad(_dup_top_key, ("clock_hz", ("duplicate", "twice", "more than once"))),
    "duplicate_unit_key": Bad(_text_replace("        count: 4  #", "        count: 4\n        count: 2  #"),
                              ("count", ("duplicate", "twice", "more than once"))),
    "duplicate_when_key": Bad(_text_replace(TENSOR_LINE, f"{TENSOR_LINE}\n        when: {{kernel: [5], kernel: [3]}}"),
                              ("kernel", ("duplicate", "twice", "more than once"))),
    "python_object_tag": Bad(_text_replace("clock_hz: 900 MHz", 'clock_hz: !!python/object/apply:os.system ["ls"]'),
                             (("python", "tag"),)),
    "python_name_tag": Bad(_text_replace("clock_hz: 900 MHz", "clock_hz: !!python/name:os.system"),
                           (("python", "tag"),)),
    "binary_tag_name": Bad(_text_replace("name: groq_like", "name: !!binary Z3JvcQ=="), ("name",), strict=False),
    "two_documents": Bad(lambda: _groq_text() + "\n---\nname: other\n", ("document",)),
    "tab_indentation": Bad(_text_replace("  - name: tsp", "\t- name: tsp"), ("line",)),
    "unclosed_bracket": Bad(_text_replace("categories: [tensor]", "categories: [tensor"), ("line",)),
    "undefined_alias": Bad(_text_replace("name: groq_like", "name: *nowhere"), (("alias", "nowhere"),)),
    "deep_nesting_300k": Bad(_deep_when, (("deep", "nest", "depth", "recurs"),), max_steps=REFUSE_STEPS),
    "alias_amplification_1e4": Bad(_alias_amplification, (("alias", "when"),), strict=False, max_steps=REFUSE_STEPS),
    "not_utf8": Bad(lambda: b"name: \xff\xfe groq\n", (("utf-8", "utf8"),)),
    "over_1mb": Bad(lambda: _groq_text() + "# padding\n" * 200_000, (("large", "limit"),)),
}


def write_case(hostile, name: str) -> Path:
    content = CASES[name].make()
    return hostile.write(FILE, content if isinstance(content, (str, bytes)) else yaml.safe_dump(content, sort_keys=False))


def _works_downstream(hw: A.HwSpec, hostile) -> None:
    """An accepted description must compile and simulate a tiny step (or refuse it as the project's error)."""
    fwd = A.models.build("mlp", batch=2, sizes=(16, 8, 4))
    sched = hostile.ok_or_refuses(lambda: A.compile(A.training_graph(fwd), hw))
    if sched is not None:
        hostile.ok_or_refuses(lambda: A.simulate(sched, hw))


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_hw_refuses_unphysical_or_malformed_description(name, hostile):
    case = CASES[name]
    path = write_case(hostile, name)
    if case.strict:
        hostile.refuses(lambda: A.load_hw(path), FILE, *case.words, max_steps=case.max_steps)
    else:
        hw = hostile.ok_or_refuses(lambda: A.load_hw(path), FILE, *case.words)
        if hw is not None:
            _works_downstream(hw, hostile)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hw_validate_refuses_unphysical_or_malformed_description(name, hostile):
    case = CASES[name]
    path = write_case(hostile, name)
    if case.strict:
        hostile.cli_refuses(["hw", "validate", str(path)], FILE, *case.words, codes=(1,),
                            max_steps=case.max_steps)
    else:
        run = hostile.cli(["hw", "validate", str(path)])
        assert run.code in (0, 1)
        if run.code == 0:
            assert hostile.cli(["hw", "show", str(path)]).code in (0, 1)


def test_duplicate_key_refusal_names_both_lines(hostile):
    text = _dup_top_key()
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if line.startswith("clock_hz:")]
    path = hostile.write(FILE, text)
    message = hostile.refuses(lambda: A.load_hw(path), "clock_hz")
    assert all(str(n) in message for n in lines), f"lines {lines} not named: {message}"


def test_python_tag_is_never_executed(hostile):
    marker = hostile.tmp / "pwned"
    text = _groq_text().replace("clock_hz: 900 MHz", f'clock_hz: !!python/object/apply:os.system ["touch {marker}"]')
    path = hostile.write(FILE, text)
    hostile.refuses(lambda: A.load_hw(path), FILE)
    assert not marker.exists()


@pytest.mark.parametrize("cmd", [["hw", "show"], ["cost", "--gemm", "64,64,64", "--hw"],
                                 ["run", "--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4", "--no-sim",
                                  "--hw"]])
@pytest.mark.parametrize("name", ["mem_bandwidth_1e-320", "clock_1e-300", "stream_bytes_per_cycle_1e-320",
                                  "unit_latency_10e30"])
def test_commands_downstream_of_unphysical_hw_refuse_without_traceback(cmd, name, hostile):
    """Issue 10: `hw validate` said ok and later stages raised ZeroDivisionError / OverflowError."""
    path = write_case(hostile, name)
    hostile.cli_refuses([*cmd, str(path)], FILE, codes=(1,))


def test_every_shipped_config_still_validates(hostile):
    files = sorted(str(p) for p in (REPO / "hwconfigs").glob("*.yaml"))
    run = hostile.cli_ok(["hw", "validate", *files])
    assert run.out.count(": ok") == len(files)
