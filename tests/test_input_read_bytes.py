"""One rule for the bytes a task is charged for reading an input (schedule/traffic.input_read_bytes), which the
scheduler, the validator and both simulators share: a slice's window of the input, less what its prefetches staged."""
from accelsim.schedule.traffic import input_read_bytes

WINDOW = ((3, 768, 2048),)
"""Input node 3 read as 768 of its 2,048 elements (a slice's window)."""


def test_a_reader_is_charged_its_window_less_what_its_prefetches_staged():
    reader = ("node", 9, 0, WINDOW)
    assert input_read_bytes(reader, 3, 8192, {}) == 3072  # 8192 * 768 / 2048
    assert input_read_bytes(reader, 3, 8192, {3: 1024}) == 2048
    assert input_read_bytes(reader, 3, 8192, {3: 4096}) == 0  # the staged head covers the window: never negative


def test_an_input_outside_the_window_is_read_whole_less_its_own_staged_head_only():
    reader = ("node", 9, 0, WINDOW)
    assert input_read_bytes(reader, 4, 8192, {3: 1024}) == 8192
    assert input_read_bytes(reader, 4, 8192, {4: 1024}) == 7168
    assert input_read_bytes(("node", 9, 0, ()), 3, 10, {}) == 10


def test_a_prefetch_is_charged_the_tile_it_stages_at_most_the_input():
    assert input_read_bytes(("prefetch", 3, 4096, ()), 3, 8192, {}) == 4096
    assert input_read_bytes(("prefetch", 3, 4096, ()), 3, 1000, {}) == 1000
