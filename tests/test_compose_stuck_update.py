"""compose's deadlock message for a stage stuck before its update (waiting for gradients other stages send or
reduce), not for an item: it raised a KeyError (the stage waits for no item) instead of the ScheduleError."""
import pytest

from accelsim.compiler.hierarchy import compose as compose_module
from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.load import load_hw


def test_a_stage_stuck_before_its_update_is_named_in_the_deadlock_error(monkeypatch):
    def stuck_at_update(step, *args):  # runs no item, then waits for what no stage will send
        yield step.env.event()

    monkeypatch.setattr(compose_module, "_run_stage", stuck_at_update)
    work = StepWork((StageWork(0, (0,), 5, 0, 10**6, 0),), (ChunkWork(0, 10, 20, 0, 0, 0, 0),), microbatches=1,
                    data_parallel=1, tensor_parallel=1)
    with pytest.raises(ScheduleError, match="stage 0 waits before its update for gradients other stages send"):
        compose(work, "1f1b", load_hw("a100_x8"))
