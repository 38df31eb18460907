"""The one JSON reading of a user's file (safe_file.decode_utf8, parse_json) as the schedule, mapping-file and
graph-file readers word it: each refusal names the file, says what was wrong and what the file should be."""
from __future__ import annotations

import json

import pytest

from accelsim.errors import AccelsimError, FrontendError, ScheduleError
from accelsim.frontends.graph_file import load_graph
from accelsim.safe_file import JsonRules, decode_utf8, parse_json
from accelsim.schedule.io import read_schedule
from accelsim.schedule.mapping_file import MappingFileError, read_mapping_file

READERS = {"schedule": (read_schedule, ScheduleError), "mapping file": (read_mapping_file, MappingFileError),
           "graph file": (load_graph, FrontendError)}
DEEP = b"[" * 100_000 + b"]" * 100_000
RECURSION = "maximum recursion depth exceeded while decoding a JSON array from a unicode string"
CASES = [  # (reader, file bytes, the message after "<path>: ")
    ("schedule", b"\xff\xfe{}", "not a UTF-8 text file, so not a schedule"),
    ("mapping file", b"\xff\xfe{}", "not a UTF-8 text file, so not a mapping file"),
    ("graph file", b"\xff\xfe{}", "not a UTF-8 text file, so not a graph file"),
    ("schedule", b'{"a": [1,\n 2,', "not valid JSON: Expecting value at line 2, column 4"),
    ("mapping file", b'{"a": [1,\n 2,', "not valid JSON: Expecting value at line 2, column 4"),
    ("graph file", b'{"a": [1,\n 2,', "not valid JSON: Expecting value at line 2, column 4"),
    ("schedule", b'{"a": NaN}', "not a schedule: the number NaN is not allowed in a schedule (times, sizes and "
                                "energies are finite)"),
    ("mapping file", b"[-Infinity]", "not a mapping file: the number -Infinity is not allowed in a mapping file "
                                     "(tiles are whole numbers)"),
    ("graph file", b'{"a": Infinity}', "not a graph file: Infinity is not a number a graph file may hold"),
    ("schedule", DEEP, f"not a schedule: {RECURSION}"),
    ("mapping file", DEEP, f"not a mapping file: {RECURSION}"),
    ("graph file", DEEP, "JSON nested too deeply for a graph file"),
    ("graph file", b'{"b": 1, "a": {"c": [2]}, "a": 3, "b": 4}', "not a graph file: key 'b' appears twice in one "
                                                               "object"),
]


@pytest.mark.parametrize("kind, data, problem", CASES, ids=lambda v: v if isinstance(v, str) and len(v) < 16 else "")
def test_each_json_reader_refuses_a_bad_file_in_its_own_words(tmp_path, kind, data, problem):
    reader, error = READERS[kind]
    path = tmp_path / "f.json"
    path.write_bytes(data)
    with pytest.raises(error) as info:
        reader(path)
    assert str(info.value) == f"{path}: {problem}"


def test_schedule_and_mapping_json_keep_the_last_of_a_repeated_key():
    """Only graph files refuse a repeated key; the other two readers keep json.loads's behaviour."""
    rules = JsonRules(ScheduleError, "a schedule", lambda name: name)
    assert parse_json('{"a": 1, "a": 2}', "s.json", rules) == {"a": 2}


def test_parse_json_returns_what_json_loads_returns():
    text = '{"x": [1, 2.5, "y", null, true], "z": {}}'
    rules = JsonRules(AccelsimError, "a thing", lambda name: name, unique_keys=True)
    assert parse_json(decode_utf8(text.encode(), "t.json", rules), "t.json", rules) == json.loads(text)
