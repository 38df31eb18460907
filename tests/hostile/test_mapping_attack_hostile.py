"""Hostile mapping files (`--mapping FILE`, StepOptions.mapping): each is refused with one MappingFileError or
MappingSpecError naming the file or the layer, the key and the value, before any compile work where the file
itself is wrong; never a traceback, never a mapping silently changed from what the file says."""
from __future__ import annotations

import os

import pytest

import accelsim as A
from accelsim.mapping.errors import MappingSpecError
from accelsim.schedule.mapping_file import MAX_FILE_BYTES, MappingFileError, mapping_entries, read_mapping_file

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py

SEARCH = {"chips.0.units.mxu.mapping": "search", "chips.0.units.mxu.dataflows": ["ws", "os", "is"],
          "chips.0.units.mxu.array.rows": 16, "chips.0.units.mxu.array.cols": 16}


@pytest.fixture(scope="module")
def hw() -> A.HwSpec:
    return A.load_hw("tpu_v1_like", SEARCH)


@pytest.fixture(scope="module")
def matmul() -> A.Graph:
    """One matmul (gemm M=4 K=16 N=8) named `mm`: the cheapest graph a mapping applies to."""
    g = A.Graph("one_matmul", dtype="float32")
    g.output("y", A.ops.matmul(g.input("x", (4, 16)), g.param("w", (16, 8))))
    return g


def _mm(graph: A.Graph) -> str:
    return next(n.name for n in graph.nodes if n.op == "matmul")


# -- the file itself: refused before any compile work ----------------------------------------------------------

def _fifo(tmp_path) -> str:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return str(path)


def _sparse(tmp_path) -> str:
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:  # past the limit without writing its bytes: refused by its size, never read
        f.seek(MAX_FILE_BYTES + 1)
        f.write(b"\n")
    return str(path)


BOMB = ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nmappings: {mm: *e}\n")

FILES = {  # name: (file name, its text or a maker of its path, words the refusal names)
    "empty": ("m.yaml", "", ["top-level key `mappings`", "None"]),
    "truncated": ("m.yaml", "mappings:\n  mm:\n    mxu: {dataf", ["not valid YAML", "line"]),
    "a_list_at_the_top": ("m.yaml", "- mappings\n", ["top-level key `mappings`", "['mappings']"]),
    "a_list_for_a_layer": ("m.yaml", "mappings:\n  mm: [1, 2]\n", ["mappings.mm", "unit names", "[1, 2]"]),
    "a_list_without_chips": ("m.yaml", "mappings:\n  mm:\n    mxu: [{dataflow: ws}]\n", ["mappings.mm.mxu", "`chip`"]),
    "chip_bool": ("m.yaml", "mappings:\n  mm:\n    mxu: {chip: true}\n", ["mappings.mm.mxu", "chip", "True"]),
    "chip_nan": ("m.yaml", "mappings:\n  mm:\n    mxu: {chip: .nan}\n", ["mappings.mm.mxu", "chip", "nan"]),
    "chip_1e300": ("m.yaml", "mappings:\n  mm:\n    mxu: {chip: 1e300}\n", ["mappings.mm.mxu", "chip", "1e300"]),
    "chip_negative": ("m.yaml", "mappings:\n  mm:\n    mxu: {chip: -1}\n", ["mappings.mm.mxu", "chip", "-1"]),
    "tile_inf": ("m.yaml", "mappings:\n  mm:\n    mxu: {stream: {K: .inf}}\n", ["stream.K", "inf", "whole number"]),
    "tile_float": ("m.yaml", "mappings:\n  mm:\n    mxu: {stream: {K: 2.0}}\n", ["stream.K", "2.0", "whole number"]),
    "rows_numbers": ("m.yaml", "mappings:\n  mm:\n    mxu: {rows: [1]}\n", ["mappings.mm.mxu.rows", "[1]"]),
    "dataflow_list": ("m.yaml", "mappings:\n  mm:\n    mxu: {dataflow: [ws]}\n", ["dataflow", "'os', 'ws' or 'is'"]),
    "layer_named_twice": ("m.yaml", "mappings:\n  mm:\n    mxu: {dataflow: ws}\n  mm:\n    mxu: {dataflow: os}\n",
                          ["duplicate key 'mm'"]),
    "layer_named_twice_json": ("m.json", '{"mappings": {"mm": {"mxu": {"dataflow": "ws"}}, '
                                         '"mm": {"mxu": {"dataflow": "os"}}}}', ["'mm'", "twice"]),
    "unit_named_twice_json": ("m.json", '{"mappings": {"mm": {"mxu": {"dataflow": "ws"}, "mxu": {}}}}',
                              ["'mxu'", "twice"]),
    "alias_bomb": ("m.yaml", BOMB, ["aliases", "20000"]),
    "deep_brackets": ("m.yaml", "mappings: " + "[" * 500 + "]" * 500 + "\n", ["nested", "64"]),
    "deep_json": ("m.json", '{"mappings": ' + "[" * 100_000 + "]" * 100_000 + "}", ["m.json", "recursion"]),
    "python_tag": ("m.yaml", "mappings: !!python/object/apply:os.system ['true']\n", ["python/object/apply"]),
    "json_nan": ("m.json", '{"mappings": {"mm": {"mxu": {"chip": NaN}}}}', ["NaN is not allowed"]),
    "json_5000_digits": ("m.json", '{"mappings": {"mm": {"mxu": {"stream": {"K": ' + "9" * 5000 + "}}}}}",
                         ["m.json", "digits"]),
    "not_utf8": ("m.yaml", b"\x00\xff\xfe mappings", ["not a UTF-8 text file"]),
    "long_layer_name": ("m.yaml", "mappings:\n  " + "m" * 20_000 + ":\n    mxu: {}\n", ["m.yaml"]),
    "directory": (None, lambda tmp: str(tmp), ["is a directory"]),
    "dev_zero": (None, lambda tmp: "/dev/zero", ["/dev/zero", "character device"]),
    "fifo": (None, _fifo, ["named pipe"]),
    "huge": (None, _sparse, ["larger than any mapping file"]),
    "missing": (None, lambda tmp: str(tmp / "absent.yaml"), ["no such mapping file"]),
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_a_hostile_mapping_file_is_refused_naming_it(hostile, tmp_path, case):
    name, content, words = FILES[case]
    path = content(tmp_path) if callable(content) else str(hostile.write(name, content))
    with pytest.raises(MappingFileError) as e:
        read_mapping_file(path)
    hostile.names(str(e.value), path[:200], *words)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_hostile_mapping_file_before_compiling(hostile):
    path = hostile.write("m.json", '{"mappings": {"matmul3": {"mxu": {}}, "matmul3": {"mxu": {"dataflow": "os"}}}}')
    hostile.cli_refuses(["compile", "--hw", "tpu_v1_like", "--model", "mlp", "--set", "sizes=16,8,4",
                         "--mapping", path, "-o", hostile.tmp / "s.json"], str(path), "'matmul3'", "twice",
                        codes=(1,))
    assert not (hostile.tmp / "s.json").exists()


# -- the entries against the graph and the unit ------------------------------------------------------------------

@pytest.mark.parametrize("key, entry, shown", [
    ("rows", {"rows": ["K", "K"], "cols": ["N"]}, "'K' is listed twice in ['K', 'K']"),
    ("cols", {"dataflow": "ws", "cols": ["N", "N"]}, "'N' is listed twice in ['N', 'N']"),
])
def test_a_dimension_listed_twice_is_refused_not_dropped(hostile, hw, matmul, key, entry, shown):
    """rows [K, K] was read as rows [K]: the file said something the mapping used did not."""
    layer = _mm(matmul)
    hostile.refuses(lambda: A.compile(matmul, hw, mapping={"mappings": {layer: {"mxu": entry}}}),
                    f"layer {layer!r}", "unit 'mxu'", f"{key}: {shown}")


@pytest.mark.parametrize("layer, words", [
    ("m\u00e4tm\u00fcl\u202e3\U0001F600", ["has no layer", "\U0001F600"]),
    ("x", ["unit 'mxu' does not run input node"]),
    ("w", ["unit 'mxu' does not run param node"]),
])
def test_an_entry_for_a_layer_the_unit_cannot_map_is_refused_naming_it(hostile, hw, matmul, layer, words):
    hostile.refuses(lambda: A.compile(matmul, hw, mapping={"mappings": {layer: {"mxu": {"dataflow": "ws"}}}}),
                    *words)


def test_a_mapping_option_listing_other_things_than_entries_is_refused(hostile, hw, matmul):
    hostile.refuses(lambda: A.compile(matmul, hw, mapping=[5]), "mapping", "LayerMapping")
    hostile.refuses(lambda: A.compile(matmul, hw, mapping=[{"layer": _mm(matmul), "unit": "mxu", "chip": True}]),
                    "mapping", "chip", "True")


def test_an_entry_from_python_streaming_a_dimension_twice_is_refused(hostile, hw, matmul):
    """A file's stream is a mapping (a dimension once); entries built in Python could give one twice, and the
    second tile was dropped."""
    entry = {"layer": _mm(matmul), "unit": "mxu", "stream": (("K", 2), ("K", 4))}
    hostile.refuses(lambda: A.compile(matmul, hw, mapping=[entry]), "stream: 'K' is listed twice")


def test_an_empty_mapping_changes_nothing(hw, matmul):
    """`mappings: {}` constrains no layer: the step is the one compiled without a file (every layer searched)."""
    plain = A.compile(matmul, hw)
    assert A.compile(matmul, hw, mapping={"mappings": {}}).makespan_cycles == plain.makespan_cycles


@pytest.mark.parametrize("layer, unit, shown", [
    ("conv\n\nrelu", "mxu", "mappings.'conv\\n\\nrelu'.mxu"),
    ("mm\x1b[2J", "mxu", "mappings.'mm\\x1b[2J'.mxu"),
    ("mm", "mxu\nunit", "mappings.mm.'mxu\\nunit'"),
    ("m" * 9000, "mxu", "mappings.'" + "m" * 56 + "....mxu: expected"),
])
def test_a_name_with_newlines_escapes_or_thousands_of_characters_is_shown_quoted_and_cut(layer, unit, shown):
    """The key path showed a layer or unit name as written: a newline split the paragraph, a terminal escape reached
    the user's terminal, a 9,000-character name made a 9 KB message."""
    with pytest.raises(MappingFileError) as e:
        mapping_entries({"mappings": {layer: {unit: 5}}}, "m.yaml")
    assert shown in str(e.value) and "\n" not in str(e.value) and "\x1b" not in str(e.value)
    assert len(str(e.value)) < 300


def test_a_long_unknown_layer_or_unit_is_cut_in_the_graphs_refusal(hostile, hw, matmul):
    for mapping in ({"m" * 9000: {"mxu": {}}}, {_mm(matmul): {"u" * 9000: {}}}):
        message = hostile.refuses(lambda: A.compile(matmul, hw, mapping={"mappings": mapping}), "mapping entry 0",
                                  ("has no layer", "no unit"))
        assert len(message) < 400 and "m" * 100 not in message and "u" * 100 not in message
