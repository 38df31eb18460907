"""Memory accounting of the dynamic runtime: leaves and step results held as the scheduler holds them."""
import pytest

import accelsim as A
from accelsim.schedule.plan import PER_STEP


@pytest.mark.parametrize("hw_name, microbatches, replicas", [("groq_like", 2, 1), ("groq_like_x4", 2, 2)])
def test_dynamic_runtime_ends_holding_exactly_the_step_leaves_and_results(hw_name, microbatches, replicas):
    """Parameters and optimizer state are held for the whole step, inputs and intermediates are
    given back after their last reader, and kept results (new weights, loss) stay: at the end the
    memories hold exactly those bytes (plus any output nobody reads), as the schedule says."""
    hw = A.load_hw(hw_name)
    graph = A.training_graph(A.models.build("superres", size=16), optimizer="momentum")
    sched = A.compile(graph, hw, microbatches=microbatches, data_parallel=replicas)
    leaves = [x for x in sched.tensors if x.task < 0]
    step_leaves = sum(x.size_bytes for x in leaves if x.microbatch == PER_STEP)
    read = {d for t in sched.tasks for d in t.deps}
    held = sum(t.out_bytes for t in sched.tasks if t.keep or t.id not in read)
    result = A.sim.simulate(sched, hw, mode="dynamic")
    at_end = sum(m.occupancy[-1][1] for m in result.memories)
    assert step_leaves > 0 and at_end == step_leaves + held
    peak = sum(m.peak_bytes for m in result.memories)
    first_inputs = sum(x.size_bytes for x in leaves if (x.microbatch, x.replica) == (0, 0))
    assert peak >= step_leaves + first_inputs
