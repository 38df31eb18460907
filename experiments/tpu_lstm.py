"""TPU v1's LSTM applications as LSTM graphs (Jouppi et al., ISCA 2017): parameters -> an inference Graph whose
gate products stream their weights from the Weight Memory and whose cell arithmetic runs on the activation unit.

What the paper gives, and how each figure enters (the rest is said as an assumption where it is used):
- Table 1: LSTM0 has 52M weights at batch 64, LSTM1 34M at batch 96; both use sigmoid and tanh; their
  operations per weight byte equal their batch, so every time step reads every weight from the Weight Memory
  again (the weights are reused across a batch, not across time steps).
- Section 7: "Consider the 600x600 matrix used in LSTM1": LSTM1's gate products are 600x600 matrices. Table 3
  row 3 agrees: LSTM1's unused MACs (4.2% against 6.3% useful) are 40% of its active MACs, as 600^2 of the
  768^2 a 600x600 matrix occupies in 256x256 tiles leaves 39%.
- Section 2: the Activation unit applies the nonlinear function to the accumulators and writes the Unified
  Buffer; "the matrix unit waits for explicit synchronization before safely reading from the Unified Buffer"
  when a layer needs the previous one's activations (Table 3 row 7's RAW stalls). In an LSTM that is every
  time step: step t's recurrent product h_{t-1} @ U needs the h that step t-1's cell arithmetic wrote. Its
  input products x_t @ W do not, so the matrix unit and the weight stream have work while the cell finishes.

The cell, per layer and time step (hidden units H, batch B), with one H x H weight matrix per gate and input
(W for x_t, U for h_{t-1}), as the 600x600 matrix of Section 7 says:
    a_k = x_t @ W_k + h_{t-1} @ U_k                       k in i, f, g, o: 8 products on the matrix unit
    i, f, o = sigmoid(a_i, a_f, a_o); g = tanh(a_g)       the Activation unit
    c_t = f * c_{t-1} + i * g; h_t = o * tanh(c_t)        vector work on the Activation unit
On the chip the two products of a gate accumulate into the same accumulators; accelsim adds them on the
activation unit (4 extra vector ops of B x H a step, each a few hundred cycles, against the 1,349 cycles at
34 GB/s of each of the 8 x 9 weight tiles a step of LSTM1 streams, 8 x 16 of LSTM0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim import ops as F
from accelsim.graph.ir import Graph, Var

GATES = "ifgo"
PRODUCTS_PER_CELL = 2 * len(GATES)  # W and U of every gate


@dataclass(frozen=True)
class LstmApp:
    """One ISCA 2017 LSTM application and the stack of LSTM layers that stands for it."""

    name: str
    paper_tops: float  # [Jouppi17] Table 3 row 9, TeraOps/s on production code, host overhead excluded
    weights: float  # Table 1
    batch: int  # Table 1, TPU batch size
    hidden: int  # units per layer: each gate product is a hidden x hidden matrix
    hidden_source: str
    steps: int = 2  # time steps unrolled: TOPS is per step (every step streams all weights), so a few suffice

    @property
    def cells(self) -> int:
        """Layers of the stack: the paper's weights over the weights of one layer (8 hidden x hidden matrices)."""
        return max(1, round(self.weights / (PRODUCTS_PER_CELL * self.hidden ** 2)))

    @property
    def model_weights(self) -> int:
        return self.cells * PRODUCTS_PER_CELL * self.hidden ** 2


LSTM_APPS = (
    LstmApp("LSTM0", 3.7, 52e6, 64, hidden=1024, hidden_source=(
        "assumption: Table 1 says one LSTM is a subset of GNMT [Wu16], whose LSTM layers have 1024 units; Table 3 "
        "row 3 (0.0% unused MACs) says LSTM0's matrices fill whole 256x256 tiles, which 1024 does")),
    LstmApp("LSTM1", 2.8, 34e6, 96, hidden=600, hidden_source='Section 7: "the 600x600 matrix used in LSTM1"'),
)


def lstm_stack(hidden: int, cells: int, batch: int, steps: int, name: str = "lstm") -> Graph:
    """`cells` stacked LSTM layers of `hidden` units unrolled over `steps` time steps (module docstring); the
    inputs are every step's x and each layer's initial h and c, the output the top layer's last h."""
    if min(hidden, cells, batch, steps) < 1:
        raise ValueError(f"lstm_stack needs hidden, cells, batch and steps of at least 1, got "
                         f"{hidden}, {cells}, {batch}, {steps}")
    g = Graph(name)
    std = 1.0 / math.sqrt(hidden)
    xs = [g.input(f"x{t}", (batch, hidden)) for t in range(steps)]
    for layer in range(cells):
        prefix = f"lstm{layer}"
        with g.layer(prefix):
            w = {k: g.param(f"{prefix}.W_{k}", (hidden, hidden), std=std) for k in GATES}
            u = {k: g.param(f"{prefix}.U_{k}", (hidden, hidden), std=std) for k in GATES}
            h: Var = g.input(f"{prefix}.h0", (batch, hidden))
            c: Var = g.input(f"{prefix}.c0", (batch, hidden))
            outs = []
            for x in xs:
                a = {k: F.matmul(x, w[k]) + F.matmul(h, u[k]) for k in GATES}
                i, f, o = F.sigmoid(a["i"]), F.sigmoid(a["f"]), F.sigmoid(a["o"])
                c = f * c + i * F.tanh(a["g"])
                h = o * F.tanh(c)
                outs.append(h)
        xs = outs
    g.output("h", xs[-1])
    return g


def lstm_graph(app: LstmApp) -> Graph:
    """The stack standing for `app`."""
    return lstm_stack(app.hidden, app.cells, app.batch, app.steps, name=app.name.lower())
