"""A fused step whose staged weights do not fit memory falls back to the same fusion with every tile reading the
weights itself (compiler/fusion.py): deterministic, recorded in the schedule's source passes and said by
step_graph's lines."""

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import UNSTAGED_NOTE, step_graph
from accelsim.errors import MemoryFitError, ScheduleError
from accelsim.passes.fuse_layers import pass_name

from test_fused_placement import HW_FILE, _conv_chain  # Stream's chip and its conv -> relu -> conv -> relu chain

# 2 KiB of SRAM holds no weight's copy (8 x 8 x 3 x 3 at 4 B: 2,304 B), so the copies and the tiles' values go to
# the DRAM. 24 KiB of DRAM holds the unstaged step; the staged step's first try does not pack into it, and on the
# retry (less of the DRAM left to fill: list_sched.list_schedule) its second weight, loaded for the whole step,
# finds no room beside the most the DRAM holds later, as its error says (tests/test_fusion_memory_wait.py: with
# 24.5 KiB it fits)
SMALL = {"chips.0.memories.0.capacity_bytes": 2048, "chips.0.memories.1.capacity_bytes": 24576}


def _without_fusion_option(s: A.Schedule) -> str:
    return s.model_copy(update={"options": s.options.model_copy(update={"fusion": "off", "fusion_chains": None})}
                        ).model_dump_json()


def test_a_fused_step_whose_staged_weights_do_not_fit_is_the_unstaged_passs_schedule():
    g, hw = _conv_chain(), A.load_hw(HW_FILE, SMALL)
    with pytest.raises(MemoryFitError):  # the staged fusion alone does not fit
        A.compile(A.optimize(g, [pass_name(2)]), hw, effort="fast")
    unstaged = A.optimize(g, [pass_name(2, stage_weights=False)])
    reference = A.compile(unstaged, hw, effort="fast")
    s = A.compile(g, hw, fusion=2, effort="fast")
    assert s.options.fusion == 2 and _without_fusion_option(s) == reference.model_dump_json()
    fused, lines = step_graph(g, s)
    assert fused.dump() == unstaged.dump()
    assert len(lines) == 1 and lines[0].endswith(f"weights re-read per tile: {UNSTAGED_NOTE}")
    assert A.compile(g, hw, fusion=2, effort="fast").model_dump_json() == s.model_dump_json()  # deterministic


def test_autos_chosen_chains_get_the_same_fallback():
    g, hw = _conv_chain(), A.load_hw(HW_FILE, SMALL)
    anchor = next(n.id for n in g.nodes if n.op == "conv2d")
    s = A.compile(g, hw, fusion="auto", fusion_chains=((anchor, 2),), effort="fast")
    reference = A.compile(A.optimize(g, [pass_name(2, stage_weights=False)]), hw, effort="fast")
    assert _without_fusion_option(s) == reference.model_dump_json()
    assert step_graph(g, s)[1][0].endswith(UNSTAGED_NOTE)


def test_a_step_that_fits_with_its_weights_staged_keeps_them_staged():
    g, hw = _conv_chain(), A.load_hw(HW_FILE)
    s = A.compile(g, hw, fusion=2, effort="fast")
    assert _without_fusion_option(s) == A.compile(A.optimize(g, [pass_name(2)]), hw, effort="fast").model_dump_json()
    assert not any(UNSTAGED_NOTE in line for line in step_graph(g, s)[1])


def test_a_fused_step_that_fits_neither_way_is_refused_with_the_staged_steps_error():
    g = _conv_chain()
    hw = A.load_hw(HW_FILE, {**SMALL, "chips.0.memories.1.capacity_bytes": 20992})  # 4 KiB less DRAM
    with pytest.raises(MemoryFitError, match="no memory can hold"):
        A.compile(A.optimize(g, [pass_name(2, stage_weights=False)]), hw, effort="fast")
    with pytest.raises(MemoryFitError, match="no memory can hold"):
        A.compile(g, hw, fusion=2, effort="fast")


def test_step_graph_refuses_a_graph_whose_fusion_is_not_the_one_compiled():
    hw = A.load_hw(HW_FILE, SMALL)
    s = A.compile(_conv_chain(), hw, fusion=2, effort="fast")
    other = _conv_chain()
    F.relu(other.var(len(other.nodes) - 1))  # one node more: another graph, fused either way
    with pytest.raises(ScheduleError, match="fusing it into 2 tiles gives another graph than the one compiled"):
        step_graph(other, s)
