"""The mapping is recorded, shown and editable: a schedule records the mapping chosen per (node, unit) of a unit
that searches them, validated on read; the per-layer report shows it as a loop nest; --mapping-out writes a file
that --mapping (StepOptions.mapping, A.compile(..., mapping=...)) reads back, whole or edited."""
from __future__ import annotations

import json

import pytest

import accelsim as A
from rich.console import Console

from accelsim.cli import main
from accelsim.cli.layer_table import time_table
from accelsim.mapping.cache import MappingCache
from accelsim.mapping.cost import mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.node import unit_node_mapping
from accelsim.mapping.record import Mapping
from accelsim.models.sizes import SMALL
from accelsim.per_layer import layer_report
from accelsim.per_layer_io import report_text
from accelsim.schedule.io import save_schedule
from accelsim.schedule.mapping_file import MappingFileError, read_mapping_file, write_mapping_file

SEARCH = {"chips.0.units.mxu.mapping": "search", "chips.0.units.mxu.dataflows": ["ws", "os", "is"],
          "chips.0.units.mxu.array.rows": 16, "chips.0.units.mxu.array.cols": 16}
HW_FLAGS = ["--hw", "tpu_v1_like", "--hw-set", "chips.0.units.mxu.mapping=search", "--hw-set",
            "chips.0.units.mxu.dataflows=[ws,os,is]", "--hw-set", "chips.0.units.mxu.array.rows=16",
            "--hw-set", "chips.0.units.mxu.array.cols=16"]
MLP_FLAGS = ["--model", "mlp", "--batch", "4", "--set", "sizes=16,8,4", "--optimizer", "sgd", "--lr", "0.01"]


@pytest.fixture(scope="module")
def hw():
    return A.load_hw("tpu_v1_like", overrides=SEARCH)


@pytest.fixture(scope="module")
def graph():
    return A.training_graph(A.models.build("resnet_block", **SMALL["resnet_block"]), optimizer="sgd", lr=0.01)


@pytest.fixture(scope="module")
def searched(graph, hw):
    return A.compile(graph, hw)


@pytest.fixture(scope="module")
def plain(graph):
    """The same step where no unit searches mappings."""
    return A.compile(graph, "tpu_v1_like")


def _json(schedule) -> str:
    return json.dumps(schedule.model_dump(mode="json"), sort_keys=True)


# --- recorded -----------------------------------------------------------------------------------------------

def test_a_schedule_without_a_searching_unit_records_no_mappings(plain):
    assert plain.mappings is None and "mappings" not in plain.model_dump(mode="json")


def test_the_schedule_records_the_mappers_choice_for_every_tensor_node(searched, graph, hw):
    unit = hw.chips[0].units[0]
    mapped = [n for n in graph.nodes if not n.is_leaf and n.op.startswith(("conv2d", "matmul"))]
    assert [(m.node, m.unit) for m in searched.mappings] == [(n.id, "mxu") for n in mapped]
    cache = MappingCache()
    for m in searched.mappings:
        node = graph.nodes[m.node]
        _, layer, best = unit_node_mapping(hw, graph, node, unit, cache=cache)
        assert m.layer == node.name and m.dims == tuple((d.name, d.size) for d in layer.dims)
        assert Mapping(m.dataflow, m.rows, m.cols, m.stream, m.order) == best.mapping


def _tampered(searched, tmp_path, edit):
    data = json.loads(_json(searched))
    edit(data["mappings"][0])
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("edit,expected", [
    (lambda m: m.__setitem__("rows", ["C", "FY", "Q"]), "rows: no dimension 'Q'"),
    (lambda m: m.__setitem__("stream", [["N", 2], ["OY", 4], ["OX", 6]]), "stream.OY: 4 elements per fold does not "
                                                                          "divide OY=6"),
    (lambda m: m.__setitem__("dims", [[n, s * 2] for n, s in m["dims"]]), "but the node's are"),
    (lambda m: m.__setitem__("order", ["cols"]), "leaves out the fold loops rows (3 iterations)"),
    (lambda m: m.__setitem__("unit", "activation"), "no array unit 'activation' that searches mappings"),
    (lambda m: m.__setitem__("layer", "conv2d9"), "names layer 'conv2d9', but node %3 is 'conv2d3'"),
])
def test_a_tampered_mapping_is_refused_on_read_naming_the_node(searched, graph, hw, tmp_path, edit, expected):
    path = _tampered(searched, tmp_path, edit)
    with pytest.raises(A.ScheduleError) as e:
        A.simulate(A.load_schedule(path), hw, graph=graph)
    assert "conv2d %3 'conv2d3'" in str(e.value) and expected in str(e.value)


def test_a_valid_mapping_the_costs_were_not_taken_from_fails_the_plan_check(searched, graph, hw, tmp_path):
    other = {"dataflow": "is", "rows": ["C", "FY", "FX"], "cols": ["N", "OY", "OX"], "stream": [["K", 4]],
             "order": ["cols", "rows"]}
    path = _tampered(searched, tmp_path, lambda m: m.update(other))
    with pytest.raises(A.ScheduleError, match=r"task \d+ \(node conv2d %3 'conv2d3'.*is not the task the compiler "
                                              r"plans: candidates"):
        A.simulate(A.load_schedule(path), hw, graph=graph)


def test_a_saved_search_schedule_loads_and_replays(searched, graph, hw, tmp_path):
    save_schedule(searched, tmp_path / "s.json")
    loaded = A.load_schedule(tmp_path / "s.json")
    assert loaded.mappings == searched.mappings
    assert A.simulate(loaded, hw, graph=graph).makespan_cycles == A.simulate(searched, hw, graph=graph).makespan_cycles


# --- editable -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_write_read_recompile_gives_a_byte_identical_schedule(searched, graph, hw, tmp_path, suffix):
    path = write_mapping_file(searched.mappings, tmp_path / f"m{suffix}")
    again = A.compile(graph, hw, mapping=str(path))
    assert _json(again) == _json(searched)
    assert again.options == searched.options  # the request is not recorded: the chosen mappings are


def test_a_complete_mapping_is_used_as_is(graph, hw):
    node = next(n for n in graph.nodes if n.name == "conv2d3")
    given = {"dataflow": "os", "rows": ["N", "OY", "OX"], "cols": ["K"], "stream": {"C": 4, "FY": 3, "FX": 3}}
    schedule = A.compile(graph, hw, mapping={"mappings": {"conv2d3": {"mxu": given}}})
    m = next(m for m in schedule.mappings if m.node == node.id)
    mapping = Mapping("os", ("N", "OY", "OX"), ("K",), (("C", 4), ("FY", 3), ("FX", 3)), m.order)
    assert (m.dataflow, m.rows, m.cols, m.stream) == (mapping.dataflow, mapping.rows, mapping.cols, mapping.stream)
    task = next(t for t in schedule.tasks if t.kind == "node" and t.node == node.id)
    cost = mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer_dims(graph, node), mapping)
    assert task.end - task.start == cost.cycles


def test_a_partial_mapping_constrains_that_layer_and_the_others_are_searched(searched, graph, hw):
    given = {"conv2d3": {"mxu": {"dataflow": "is"}}, "conv2d9": {"mxu": {"rows": ["N", "OY", "OX"]}}}
    schedule = A.compile(graph, hw, mapping={"mappings": given})
    before = {m.layer: m for m in searched.mappings}
    after = {m.layer: m for m in schedule.mappings}
    assert before["conv2d3"].dataflow != "is" and after["conv2d3"].dataflow == "is"
    assert set(before["conv2d9"].rows) != {"N", "OY", "OX"} and set(after["conv2d9"].rows) == {"N", "OY", "OX"}
    rest = set(before) - set(given)
    assert rest and {k: after[k] for k in rest} == {k: before[k] for k in rest}


def test_the_cli_round_trip_writes_and_reads_back_byte_identical_files(tmp_path):
    a, b, m, again = (tmp_path / n for n in ("a.json", "b.json", "m.yaml", "again.yaml"))
    assert main(["compile", *HW_FLAGS, *MLP_FLAGS, "-o", str(a), "--mapping-out", str(m)]) == 0
    written = read_mapping_file(m)
    assert [e.layer for e in written] == [x.layer for x in A.load_schedule(a).mappings] and written[0].complete
    assert main(["compile", *HW_FLAGS, *MLP_FLAGS, "-o", str(b), "--mapping", str(m), "--mapping-out",
                 str(again)]) == 0
    assert a.read_bytes() == b.read_bytes() and again.read_bytes() == m.read_bytes()


def test_the_report_shows_each_mapping_as_a_loop_nest(searched, graph, hw):
    report = layer_report(searched, hw, graph)
    conv = next(n for layer in report.to_dict()["layers"] for n in layer["nodes"] if n["op"] == "conv2d")
    nest = conv["mappings"][0]
    assert nest["unit"] == "mxu" and nest["nest"][0].startswith("for ")
    assert {loop["loop"]: loop["iterations"] for loop in nest["loops"]}["rows"] == 3  # C*FY*FX = 36 over 16 rows
    console = Console(width=400, record=True)
    console.print(time_table(report))
    assert "rows<-C*FY*FX:36/16" in console.export_text()


@pytest.mark.parametrize("fmt", [".csv", ".json"])
def test_the_report_has_a_mapping_column_only_where_units_searched(searched, plain, graph, hw, fmt):
    mapped = report_text(layer_report(searched, hw, graph), fmt)
    unmapped = report_text(layer_report(plain, "tpu_v1_like", graph), fmt)
    assert mapped.splitlines()[0].endswith(",mapping") == (fmt == ".csv") and "rows<-" in mapped
    assert "rows<-" not in unmapped and not unmapped.splitlines()[0].endswith(",mapping")


# --- hostile files ------------------------------------------------------------------------------------------

def _compile_with(graph, hw, tmp_path, text: str, name: str = "m.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return A.compile(graph, hw, mapping=str(path))


@pytest.mark.parametrize("text,expected", [
    ("mappings:\n  conv2d3:\n    mxu: {dataflow: ws, stream: {OY: ", "not valid YAML at line"),
    ("- 1\n- 2\n", "expected one top-level key `mappings`"),
    ("mappings:\n  conv2d3: 5\n", "mappings.conv2d3: expected unit names"),
    ("mappings:\n  conv2d3:\n    mxu: {rows: 5}\n", "mappings.conv2d3.mxu.rows: expected a list of dimension names"),
    ("mappings:\n  conv2d3:\n    mxu: {dataflow: xs}\n", "mappings.conv2d3.mxu: dataflow: Input should be 'os', 'ws' "
                                                         "or 'is'"),
    ("mappings:\n  conv2d3:\n    mxu: {datafow: ws}\n", "unknown key(s) 'datafow'"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: .nan}}\n", "stream.OY: nan elements per fold"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: -2}}\n", "stream.OY: -2 elements per fold"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: 1e300}}\n", "stream.OY: '1e300' elements per fold"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: 99999999999999999999}}\n", "stream.OY: 99999999999999999999 "
                                                                              "elements per fold"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: true}}\n", "stream.OY: True elements per fold"),
])
def test_a_malformed_mapping_file_is_refused_naming_file_layer_unit_and_key(graph, hw, tmp_path, text, expected):
    with pytest.raises(MappingFileError) as e:
        _compile_with(graph, hw, tmp_path, text)
    assert str(tmp_path / "m.yaml") in str(e.value) and expected in str(e.value)


@pytest.mark.parametrize("text,expected", [
    ("mappings:\n  conv2d_3:\n    mxu: {dataflow: ws}\n", "no layer 'conv2d_3' (did you mean 'conv2d3'"),
    ("mappings:\n  conv2d3:\n    mxv: {dataflow: ws}\n", "no unit 'mxv' (did you mean 'mxu'?)"),
    ("mappings:\n  conv2d3:\n    mxu: [{chip: 0, dataflow: ws}, {chip: 0, dataflow: os}]\n", "given twice"),
    ("mappings:\n  conv2d3:\n    mxu: [{chip: 5, dataflow: ws}]\n", "chip 5, but the hardware has 1 chip(s)"),
    ("mappings:\n  conv2d3:\n    activation: {dataflow: ws}\n", "unit 'activation' runs every layer by its fixed"),
    ("mappings:\n  relu7:\n    mxu: {dataflow: ws}\n", "unit 'mxu' does not run relu node %7"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: 4}}\n", "conv2d node %3 'conv2d3'"),
    ("mappings:\n  conv2d3:\n    mxu: {stream: {OY: 100000}}\n", "stream.OY: 100000 elements per fold does not "
                                                                 "divide OY=6"),
    ("mappings:\n  conv2d3:\n    mxu: {rows: [C, FY, FX], dataflow: os}\n", "no mapping the unit allows agrees "
                                                                            "with dataflow, rows"),
    ("mappings:\n  conv2d3:\n    mxu: {dataflow: ws, order: [rows, cols]}\n", "order: a loop order is kept only "
                                                                               "with a complete mapping"),
    ("mappings:\n  conv2d3:\n    mxu: {dataflow: ws, rows: [C, FY, FX], cols: [K], stream: {N: 2, OY: 6, OX: 6}, "
     "order: [cols]}\n", "leaves out the fold loops rows"),
])
def test_a_mapping_that_does_not_fit_the_graph_or_unit_is_refused_naming_it(graph, hw, tmp_path, text, expected):
    with pytest.raises(A.AccelsimError) as e:
        _compile_with(graph, hw, tmp_path, text)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_missing_and_directory_paths_are_refused(graph, hw, tmp_path):
    with pytest.raises(MappingFileError, match="no such mapping file"):
        A.compile(graph, hw, mapping=str(tmp_path / "absent.yaml"))
    with pytest.raises(MappingFileError, match="is a directory"):
        A.compile(graph, hw, mapping=str(tmp_path))
    (tmp_path / "m.json").write_text('{"mappings": {"conv2d3": {"mxu": {"stream": {"OY": NaN}}}}}')
    with pytest.raises(MappingFileError, match="NaN is not allowed"):
        read_mapping_file(tmp_path / "m.json")


def test_a_mapping_at_stage_granularity_is_measured_and_recorded(graph, hw, searched):
    """It was refused ("mappings given per layer apply to a task-level schedule"); tests/test_stage_mappings.py
    compares its effect with the task level's."""
    assert next(m for m in searched.mappings if m.layer == "conv2d3").dataflow != "os"
    step = A.compile(graph, hw, granularity="stage", mapping={"mappings": {"conv2d3": {"mxu": {"dataflow": "os"}}}})
    assert next(m for m in step.mappings if m.layer == "conv2d3").dataflow == "os"


def test_mapping_out_without_searching_units_is_refused(plain, tmp_path):
    with pytest.raises(MappingFileError, match="records no mappings"):
        write_mapping_file(plain.mappings, tmp_path / "m.yaml")


def test_a_mapping_option_of_another_type_is_refused_saying_what_is_expected(graph, hw):
    with pytest.raises(A.AccelsimError, match="mapping: expected a mapping file's path, its data"):
        A.compile(graph, hw, mapping=5)
