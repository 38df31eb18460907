"""Arithmetic energy at the precision a step computes in (issue 30; cost/energy.op_precision): a bf16 step's MACs
cost less than an fp32 step's on the same machine, the optimizer's update stays at its fp32 master's cost, and a
step at a unit's own precision charges what that unit's datapath always did."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.sim.energy import timeline_energy


@pytest.fixture(scope="module")
def a100_steps():
    g = A.training_graph(A.models.build("mlp", batch=64, sizes=(256, 256, 16)), optimizer="adam")
    hw = A.load_hw("a100_like")
    out = {}
    for p in (None, "fp32", "tf32", "bf16", "fp16"):
        s = A.compile(g, hw, precision=p, effort="fast")
        out[p] = (s, A.simulate(s, hw, graph=g))
    return hw, out


def arithmetic(res, unit: str) -> float:
    return sum(i.energy_pj for i in res.energy.items if i.kind == "arithmetic" and i.name == unit)


def test_a_bf16_step_spends_less_arithmetic_energy_than_an_fp32_step(a100_steps):
    _, runs = a100_steps
    bf16, tf32, fp32 = (runs[p][1] for p in ("bf16", "tf32", "fp32"))
    assert bf16.energy.kind_pj("arithmetic") < tf32.energy.kind_pj("arithmetic") < fp32.energy.kind_pj("arithmetic")
    assert arithmetic(bf16, "tensor_core") < arithmetic(tf32, "tensor_core") < arithmetic(fp32, "tensor_core")
    ops = {p: next(i.quantity for i in runs[p][1].energy.items if i.name == "tensor_core") for p in ("bf16", "fp32")}
    assert ops["bf16"] == ops["fp32"]  # the same work, each op cheaper


def test_the_optimizer_update_stays_at_its_fp32_master_cost_under_bf16(a100_steps):
    hw, runs = a100_steps
    update = {p: timeline_energy(runs[p][0], hw, ran=[t.id for t in runs[p][0].tasks if t.phase == "update"],
                                 makespan_cycles=0).kind_pj("arithmetic") for p in ("bf16", "fp32")}
    assert update["fp32"] > 0 and update["bf16"] == pytest.approx(update["fp32"], rel=1e-12)


def test_a_step_at_a_units_own_precision_charges_its_datapath_as_before(a100_steps):
    """a100_like's Tensor Cores declare fp16: an fp16 step charges them what a step without a precision does."""
    _, runs = a100_steps
    assert arithmetic(runs["fp16"][1], "tensor_core") == pytest.approx(arithmetic(runs[None][1], "tensor_core"),
                                                                       rel=1e-12)
    assert arithmetic(runs["fp32"][1], "tensor_core") > arithmetic(runs[None][1], "tensor_core")


def test_the_cost_model_and_the_timeline_charge_an_op_alike_at_every_precision(a100_steps):
    """a100_like's units have no operand buffers: whatever a task's cost-model energy holds beyond its arithmetic
    and its port traffic would show as unit_buffers, so none means both priced each op at the same precision."""
    _, runs = a100_steps
    for p, (s, res) in runs.items():
        assert res.energy.kind_pj("unit_buffers") == 0, p
