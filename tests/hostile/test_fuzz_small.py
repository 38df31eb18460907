"""A small budget of experiments/fuzz.py in CI: mutated hardware descriptions and schedules load (and run
downstream) or are refused as AccelsimError; never a traceback. The full run is
`python experiments/fuzz.py --examples 2000`."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import fuzz  # noqa: E402

EXAMPLES = 100


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", ["yaml", "schedule"])
def test_small_fuzz_budget_finds_no_traceback(target):
    start = time.perf_counter()
    tally = fuzz.TARGETS[target](EXAMPLES, seed_value=0, guard_s=None)
    assert tally.examples >= EXAMPLES * 0.9, tally.line()
    assert tally.refused > 0, f"no mutation was refused: {tally.line()}"
    assert tally.tracebacks == 0, fuzz.report(tally, show=5)
    assert time.perf_counter() - start < 60, tally.line()
