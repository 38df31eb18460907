"""The memory planner's placement rules (compiler/timing/memory_planner.PLACEMENT_RULES), each on arenas built by
hand: which rule places a tensor, where, from when and at what write cost, and when none can (a refusal)."""
import pytest

from accelsim.compiler.timing.memory import Arena
from accelsim.compiler.timing.memory_planner import PLACEMENT_RULES, Want, choose
from accelsim.hw.spec import Memory

WRITE = {"sram": 0, "hbm": 10, "dram": 100}
"""Extra cycles of writing the tensor to each memory: none in the unit's own SRAM."""


def _memory(name: str, capacity_bytes: int) -> Memory:
    return Memory(name=name, kind=name, capacity_bytes=capacity_bytes, bandwidth_bytes_per_cycle=64)


def _ranked(**capacities: int) -> list[tuple[Memory, Arena]]:
    """(memory, arena) pairs in the order given: the first is the first choice."""
    return [(_memory(name, cap), Arena((0, name), cap)) for name, cap in capacities.items()]


def _busy(arena: Arena, size_bytes: int, until: float | None) -> None:
    """Fill `size_bytes` of `arena` from cycle 0 until `until` (None: for the rest of the step)."""
    block = arena.allocate(("other", size_bytes, until), size_bytes, 0)
    assert block is not None
    if until is not None:
        arena.close(block, until)


def _placed(ranked, size: int = 512, start: int = 0, leaf: bool = False) -> tuple[str, str, int, int] | None:
    """(rule, memory, from cycle, write cycles), or None for a refusal."""
    chosen = choose(Want(size, start, leaf, ranked, lambda mem: WRITE[mem.name]))
    if chosen is None:
        return None
    rule, (arena, at, extra) = chosen
    return rule.name, arena.name[1], at, extra


def test_the_rules_are_tried_now_wait_spill_later():
    assert [r.name for r in PLACEMENT_RULES] == ["now", "wait", "spill", "later"]


def test_a_first_choice_with_room_takes_the_tensor_at_its_start():
    assert _placed(_ranked(sram=1024, dram=4096), start=7) == ("now", "sram", 7, 0)


@pytest.mark.parametrize("free_at, expected", [
    (50, ("wait", "sram", 50, 0)),     # written at 50 in the SRAM, against 100 by spilling to the DRAM
    (100, ("wait", "sram", 100, 0)),   # a tie: waiting wins
    (101, ("spill", "dram", 0, 100)),  # waiting would finish a cycle later than the spill
])
def test_a_full_first_choice_is_waited_for_only_while_that_finishes_no_later_than_spilling(free_at, expected):
    ranked = _ranked(sram=1024, dram=4096)
    _busy(ranked[0][1], 1024, free_at)
    assert _placed(ranked) == expected


def test_with_no_memory_to_spill_to_the_first_choice_is_waited_for_however_long():
    ranked = _ranked(sram=1024, dram=4096)
    _busy(ranked[0][1], 1024, 10_000)
    _busy(ranked[1][1], 4096, None)
    assert _placed(ranked) == ("wait", "sram", 10_000, 0)


@pytest.mark.parametrize("dram_write, expected", [
    (100, ("later", "dram", 70, 100)),  # the DRAM's write ends at 170, the HBM's at 210
    (200, ("later", "hbm", 200, 10)),   # now the DRAM's ends at 270
])
def test_a_tensor_its_first_choice_never_holds_waits_for_the_level_that_writes_it_first(dram_write, expected,
                                                                                         monkeypatch):
    monkeypatch.setitem(WRITE, "dram", dram_write)
    ranked = _ranked(sram=256, hbm=1024, dram=4096)
    _busy(ranked[1][1], 1024, 200)
    _busy(ranked[2][1], 4096, 70)
    assert _placed(ranked) == expected


def test_a_leaf_never_waits_it_spills_or_is_refused():
    ranked = _ranked(sram=1024, dram=4096)
    _busy(ranked[0][1], 1024, 50)
    assert _placed(ranked, leaf=True) == ("spill", "dram", 0, 100)
    _busy(ranked[1][1], 4096, 70)
    assert _placed(ranked, leaf=True) is None
    assert _placed(ranked) == ("wait", "sram", 50, 0)  # an output, which may wait


def test_a_tensor_no_memory_ever_holds_beside_what_stays_live_is_refused():
    ranked = _ranked(sram=256, dram=4096)
    _busy(ranked[1][1], 4096 - 448, None)
    assert _placed(ranked, size=449) is None  # 449 B take 512 aligned; 448 B are left for good
    assert _placed(ranked, size=448) == ("spill", "dram", 0, 100)
