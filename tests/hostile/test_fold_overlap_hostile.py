"""Hostile values of a systolic array's `fold_overlap` key: each is refused by `A.load_hw(path)` and by
`accelsim hw validate path` (exit 1), naming the file, the key and what is allowed; never a traceback.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

import accelsim as A

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py

GROQ = Path(__file__).resolve().parents[2] / "hwconfigs" / "groq_like.yaml"
FILE = "hostile_fold_overlap.yaml"

# name -> (keys set on the mxm's array, words the refusal must contain)
CASES: dict[str, tuple[dict[str, Any], tuple]] = {
    "unknown_word": ({"fold_overlap": "weights"}, ("fold_overlap", "none", "stationary")),
    "wrong_case": ({"fold_overlap": "Stationary"}, ("fold_overlap", "none", "stationary")),
    "bool": ({"fold_overlap": True}, ("fold_overlap",)),
    "number": ({"fold_overlap": 1}, ("fold_overlap",)),
    "null": ({"fold_overlap": None}, ("fold_overlap",)),
    "list": ({"fold_overlap": ["stationary"]}, ("fold_overlap",)),
    "mapping": ({"fold_overlap": {"stationary": True}}, ("fold_overlap",)),
    "output_stationary": ({"fold_overlap": "stationary", "dataflow": "os"}, ("fold_overlap", "ws", "is")),
    # the shipped file already says `fold_overlap: stationary`: switching only the dataflow keeps it
    "os_under_the_shipped_overlap": ({"dataflow": "os"}, ("fold_overlap", "ws", "is")),
    "misspelt_key": ({"fold_overlaps": "stationary"}, ("fold_overlaps",)),
}


def _write(tmp: Path, array_keys: dict[str, Any]) -> Path:
    d = copy.deepcopy(yaml.safe_load(GROQ.read_text()))
    d["chips"][0]["units"][0]["array"].update(array_keys)
    path = tmp / FILE
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_load_hw_refuses_a_bad_fold_overlap(name, hostile):
    keys, words = CASES[name]
    path = _write(hostile.tmp, keys)
    hostile.refuses(lambda: A.load_hw(path), FILE, "units[0].array", *words)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hw_validate_refuses_a_bad_fold_overlap(name, hostile):
    keys, words = CASES[name]
    path = _write(hostile.tmp, keys)
    hostile.cli_refuses(["hw", "validate", str(path)], FILE, *words, codes=(1,))


def test_a_good_fold_overlap_compiles_and_simulates_a_small_step(hostile):
    path = _write(hostile.tmp, {"fold_overlap": "stationary"})
    hostile.cli_ok(["hw", "validate", str(path)])
    hw = A.load_hw(path)
    sched = A.compile(A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4))), hw)
    A.simulate(sched, hw)
