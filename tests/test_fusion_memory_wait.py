"""The memory planner (compiler/timing/memory_planner.MemoryPlanner.place) on a fused step with staged weights whose
copies the SRAM can never hold: a copy waits for room in the DRAM rather than the step being refused, and a
refusal states the figures it was decided on."""
import re

import pytest

import accelsim as A
from accelsim.errors import MemoryFitError
from accelsim.fusion_groups import fusion_groups
from accelsim.passes.fuse_layers import pass_name

from test_fused_placement import HW_FILE, _conv_chain  # Stream's chip and its conv -> relu -> conv -> relu chain

SRAM = {"chips.0.memories.0.capacity_bytes": 2048}  # no room for a weight's copy (8 x 8 x 3 x 3 at 4 B: 2,304 B)


def test_a_staged_copy_the_sram_can_never_hold_waits_for_room_in_the_dram_instead_of_being_refused():
    """With 24.5 KiB of DRAM the second weight's copy once found 2,048 B free there when it was wanted, and the step
    was refused though the DRAM had room soon after: only the SRAM was waited on, which never holds 2,304 B."""
    hw = A.load_hw(HW_FILE, {**SRAM, "chips.0.memories.1.capacity_bytes": 25088})
    fused = A.optimize(_conv_chain(), [pass_name(2)])
    s = A.compile(fused, hw, effort="fast")
    (group,) = fusion_groups(fused)
    homes = {x.node: x.memory for x in s.tensors if x.task >= 0}
    assert [homes[i] for i in group.staged] == ["dram", "dram"]
    assert max(s.peak_memory_bytes.values()) <= 25088
    static = A.simulate(s, hw, graph=fused)  # validated: capacity never exceeded, every reader after its copy
    assert [(sp.start, sp.end) for sp in sorted(static.spans, key=lambda sp: sp.task)] == \
        [(t.start, t.end) for t in s.tasks]


def test_a_refused_tensor_is_named_with_the_peak_it_must_fit_beside_and_the_room_left_after_packing():
    """Two figures the check uses and the error once left out: what the memory holds later (a tensor keeps its
    bytes until its last reader), and the room a retry leaves after a first try's tensors did not pack."""
    hw = A.load_hw(HW_FILE, {**SRAM, "chips.0.memories.1.capacity_bytes": 24576})
    with pytest.raises(MemoryFitError) as e:
        A.compile(A.optimize(_conv_chain(), [pass_name(2)]), hw, effort="fast")
    msg = str(e.value)
    size = int(re.search(r"\((\d+) bytes\)", msg).group(1))
    dram = re.search(r"chip0:dram (\d+) B \(live at \d+: (\d+) B\) rising to (\d+) B later, (\d+) B of it left to "
                     r"fill after an earlier try's tensors did not pack into it", msg)
    assert dram is not None, msg
    capacity, live, peak, usable = map(int, dram.groups())
    assert live + size <= usable < capacity  # room at its start, in the part of the DRAM the retry may fill
    assert peak + size > usable  # but not beside what the DRAM holds later, while the weight stays for the step
    assert "a leaf is loaded before the step and cannot wait for room" in msg
