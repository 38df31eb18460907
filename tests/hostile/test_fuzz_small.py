"""A small budget of experiments/fuzz.py in CI: mutated hardware descriptions, schedules, graph files, ONNX
models and sweep specs load (and run downstream) or are refused as AccelsimError; never a traceback. The full
run is `python experiments/fuzz.py --examples 2000`."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import fuzz  # noqa: E402

EXAMPLES = 100
EFFORT = {"yaml": "fast"}
"""The compile effort of a target's accepted examples (compile's default where not named). What this test checks
is refusal or no traceback, not the search's quality: a mutated hardware file's tiny mlp step spent ~90% of the yaml
target's time in the default-effort improvement search, so it compiles at effort="fast" (the same expansion,
list scheduling, memory planning and replay). The graph and onnx targets keep the default-effort search on
hostile inputs."""


# A hang guard, not a speed limit (see tests/conftest.py): the yaml target takes ~30 s on an idle core. The
# per-example guard of experiments/fuzz.py (guard_s) stays off: its SIGALRM would cancel pytest-timeout's.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("target", ["yaml", "schedule", "graph", "onnx", "sweep"])
def test_small_fuzz_budget_finds_no_traceback(target):
    effort = {"effort": EFFORT[target]} if target in EFFORT else {}
    tally = fuzz.TARGETS[target](EXAMPLES, seed_value=0, guard_s=None, **effort)
    assert tally.examples >= EXAMPLES * 0.9, tally.line()
    assert tally.refused > 0, f"no mutation was refused: {tally.line()}"
    assert tally.tracebacks == 0, fuzz.report(tally, show=5)
