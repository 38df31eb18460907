"""Which gradients a task-level expansion sums over the step on each stage (compiler/planning/step_sums.StepSums):
a tied weight's gradient whose parts come from two stages, only with several micro-batches and without ZeRO."""
import pytest

import accelsim as A
from accelsim.compiler.planning.step_sums import StepSums


@pytest.fixture(scope="module")
def tied():
    """A one-layer gpt2 (its vocabulary matrix read by the embedding and the LM head), cut in two stages by node
    id: the embedding's gradient part on the first, the LM head's on the second."""
    g = A.training_graph(A.models.build("gpt2", layers=1, batch=1, seq=8, d_model=16, heads=2, vocab=32),
                         optimizer="sgd", lr=0.01)
    return g, [0 if n.id < len(g.nodes) // 2 else 1 for n in g.nodes]


def test_a_tied_gradient_of_two_stages_is_summed_over_the_step_with_its_inputs(tied):
    g, stage_of = tied
    sums = StepSums.of(g, stage_of, microbatches=4, zero=False)
    (grad, inputs), = sums.gradients.items()
    assert grad in g.gradient_nodes() and g.nodes[grad].op == "add"
    assert inputs == tuple(g.nodes[grad].inputs) and {stage_of[i] for i in inputs} == {0, 1}
    assert sums.inputs == frozenset(inputs)


@pytest.mark.parametrize("microbatches, zero", [(1, False), (4, True)])
def test_nothing_is_summed_over_the_step_with_one_micro_batch_or_under_zero(tied, microbatches, zero):
    g, stage_of = tied
    sums = StepSums.of(g, stage_of, microbatches=microbatches, zero=zero)
    assert sums.gradients == {} and sums.inputs == frozenset()
