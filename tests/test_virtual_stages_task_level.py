"""virtual_stages > 1 at task level: the task-level compiler makes one chunk per pipeline stage, so model chunks to
interleave exist only at stage granularity. With no pipeline schedule named it was silently ignored (the step and
its makespan were V=1's while the schedule recorded virtual_stages=2); now it is refused as with a named one."""
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import ScheduleError


@pytest.mark.parametrize("schedule", [None, "1f1b"])
def test_virtual_stages_at_task_level_are_refused_naming_the_option(schedule):
    step = A.training_graph(A.models.build("mlp", batch=4, sizes=(8, 8, 4)))
    with pytest.raises(ScheduleError, match=r"virtual_stages=2: .*stage granularity"):
        A.compile(step, A.load_hw("groq_like_x4"), pipeline_stages=2, virtual_stages=2, microbatches=2,
                  pipeline_schedule=schedule, granularity="task", effort="fast")


def test_the_cli_says_so_and_exits_non_zero(capsys):
    argv = ["run", "--hw", "groq_like_x4", "--model", "mlp", "--set", "sizes=8,8,4", "--batch", "4",
            "--pipeline-stages", "2", "--virtual-stages", "2", "--microbatches", "2", "--no-sim"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "virtual_stages=2" in err and "Traceback" not in err
