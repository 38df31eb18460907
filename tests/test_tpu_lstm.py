"""TPU v1's LSTM applications as LSTM stacks (experiments/tpu_lstm.py): the cell's structure, the sizes taken from
Jouppi et al. (ISCA 2017), and how a layer of LSTM1 runs on tpu_v1_like (products on the MXU streaming whole
weight tiles, the cell's vector work on the activation unit, each step's recurrent products after the last h)."""
import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

import accelsim as A
from accelsim.graph.verify import verify
from accelsim.hw.overrides import parse_assignments

if "tpu_lstm" not in sys.modules:  # experiments/tpu_lstm.py, loaded once (its dataclass needs its module there)
    _spec = importlib.util.spec_from_file_location(
        "tpu_lstm", Path(__file__).resolve().parent.parent / "experiments" / "tpu_lstm.py")
    sys.modules["tpu_lstm"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["tpu_lstm"])
LSTM_APPS, lstm_stack = sys.modules["tpu_lstm"].LSTM_APPS, sys.modules["tpu_lstm"].lstm_stack

VECTOR_OPS = {"sigmoid", "tanh", "mul", "add"}


def test_a_cell_has_eight_gate_products_and_the_lstm_vector_work_per_step():
    g = lstm_stack(hidden=8, cells=2, batch=3, steps=2)
    verify(g)
    ops = Counter(n.op for n in g.nodes if not n.is_leaf)
    per_step = 2 * 2  # cells x steps
    # 4 gates x (W x_t + U h): 8 products, 4 sums; sigmoid i, f, o; tanh g and c; f*c, i*g, o*tanh(c); c's sum
    assert ops == {"matmul": 8 * per_step, "add": 5 * per_step, "sigmoid": 3 * per_step, "tanh": 2 * per_step,
                   "mul": 3 * per_step}
    assert sum(n.op == "param" for n in g.nodes) == 2 * 8 and {n.shape for n in g.nodes if n.op == "param"} == {(8, 8)}


def test_a_steps_recurrent_products_read_the_previous_steps_h():
    g = lstm_stack(hidden=8, cells=1, batch=3, steps=2)
    u = {n.id for n in g.nodes if n.op == "param" and ".U_" in n.name}
    recurrent = [n for n in g.nodes if n.op == "matmul" and n.inputs[1] in u]
    h_inputs = [g.nodes[n.inputs[0]] for n in recurrent]
    assert [h.op for h in h_inputs[:4]] == ["input"] * 4  # step 0 reads the layer's initial h
    assert {h.op for h in h_inputs[4:]} == {"mul"}  # step 1 reads h_0 = o * tanh(c_0)
    assert len({h.id for h in h_inputs[4:]}) == 1


@pytest.mark.parametrize("app", LSTM_APPS, ids=lambda a: a.name)
def test_each_lstm_stack_holds_the_papers_weights_in_whole_layers(app):
    """Table 1: LSTM0 52M weights, LSTM1 34M; a layer is 8 hidden x hidden matrices, so the stack is the
    nearest whole number of layers (6 of 1024: 50.3M; 12 of 600: 34.6M)."""
    layer = 8 * app.hidden ** 2
    assert abs(app.model_weights - app.weights) <= layer / 2
    assert app.model_weights == app.cells * layer


@pytest.mark.parametrize("fifo_tiles", [4, 1])
def test_an_lstm1_layer_streams_whole_tiles_and_hides_its_vector_work_under_the_stream(fifo_tiles):
    """One layer of LSTM1 (hidden 600, batch 96), two steps, on tpu_v1_like. Every 600x600 product streams 9
    whole 64 KiB tiles at 34 GB/s, so the layer cannot beat 2 x 96 x 34e9 x 600^2 / 768^2 ops/s; the cell's
    vector work runs on the activation unit and the recurrent products wait for the previous h, but the next
    step's input products x_t @ W do not, so the stream runs on under them: within 2% of the bound, with the
    Weight FIFO's four tiles of lead or only one."""
    hw = A.load_hw("tpu_v1_like", overrides=parse_assignments(
        [f"chips.0.placement.parameters.stream.prefetch_depth={fifo_tiles}"]))
    g = lstm_stack(hidden=600, cells=1, batch=96, steps=2)
    sched = A.compile(g, hw, effort="fast")  # the stream bounds every order the search could try
    res = A.simulate(sched, hw, graph=g)
    units = {(g.nodes[s.node].op, s.resource) for s in res.spans if s.kind == "node"}
    assert {u for op, u in units if op == "matmul"} == {"mxu"}
    assert {u for op, u in units if op in VECTOR_OPS} == {"activation"}
    assert {op for op, _ in units} == {"matmul"} | VECTOR_OPS
    ends = {s.node: s.end for s in res.spans if s.kind == "node"}
    starts = {s.node: s.start for s in res.spans if s.kind == "node"}
    u = {n.id for n in g.nodes if n.op == "param" and ".U_" in n.name}
    step1 = [n for n in g.nodes if n.op == "matmul" and n.inputs[1] in u and g.nodes[n.inputs[0]].op == "mul"]
    assert len(step1) == 4 and all(starts[n.id] >= ends[n.inputs[0]] for n in step1)
    macs = 2 * 8 * 96 * 600 * 600
    bound = 2 * 96 * 34e9 * 600 ** 2 / 768 ** 2
    tops = 2 * macs / res.makespan_s
    assert 0.98 * bound <= tops <= bound
