"""Memory accounting of the dynamic runtime: leaves and step results held as the scheduler holds them."""
import pytest

import accelsim as A
from accelsim.schedule.expand import expand
from accelsim.schedule.plan import PER_STEP


@pytest.mark.parametrize("hw_name, microbatches, replicas", [("groq_like", 2, 1), ("groq_like_x4", 2, 2)])
def test_dynamic_runtime_ends_holding_exactly_the_step_leaves_and_results(hw_name, microbatches, replicas):
    """Parameters and optimizer state are held for the whole step, inputs and intermediates are
    given back after their last reader, and kept results (new weights, loss) stay: at the end the
    memories hold exactly those bytes (plus any output nobody reads)."""
    hw = A.load_hw(hw_name)
    graph = A.training_graph(A.models.build("superres", size=16), optimizer="momentum")
    sched = A.compile(graph, hw, microbatches=microbatches, data_parallel=replicas)
    plan = expand(graph, hw, sched.options)
    step_leaves = sum(plan.leaf_bytes[r[0]] for r, _ in {(r, t.chip) for t in plan.tasks for r in t.reads}
                      if r[1] == PER_STEP)
    read = {d for t in plan.tasks for d in t.deps}
    held = sum(t.out_bytes for t in plan.tasks if t.keep or t.id not in read)
    result = A.simulate(sched, hw, mode="dynamic")
    at_end = sum(log[-1][1] for log in result.occupancy.values())
    assert step_leaves > 0 and at_end == step_leaves + held
    peak = sum(max(u for _, u in log) for log in result.occupancy.values())
    inputs = sum(plan.leaf_bytes[n.id] for n in graph.nodes if n.op == "input")
    assert peak >= step_leaves + inputs
