"""A slice reads only the window it selects: its op's element counts against brute force, and a compiled step
charges the memory its input lives in with the window's bytes alone (schedule/traffic.read_bytes), the same in
the scheduler, the validator and both simulators."""
import json

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import AccelsimError
from accelsim.ops.registry import OPS, numel
from accelsim.schedule.traffic import placed_io, read_bytes, task_loads

HW_FILE = "experiments/hw/stream_tpu_like_quad_core.yaml"
WINDOWS = [((4, 5), (1, 0), (3, 4)), ((3, 4, 2), (2,), (3,)), ((1, 8, 16, 16), (0, 0, 6), (1, 8, 14)),
           ((2, 3, 5, 7), (1, 1, 0, 2), (2, 3, 5, 6)), ((6,), (0,), (6,))]


@pytest.mark.parametrize("shape, starts, stops", WINDOWS)
def test_a_slice_reads_and_writes_the_elements_it_selects(shape, starts, stops):
    """Brute force: label every input element, slice, and count the distinct labels that come out."""
    op = OPS["slice"]
    x = np.arange(numel(shape)).reshape(shape)
    selected = np.unique(op.ref(x, starts=starts, stops=stops)).size
    out = op.infer(shape, starts=starts, stops=stops)
    assert op.read_elems(out, shape, starts=starts, stops=stops) == selected
    assert op.input_reads(out, shape, starts=starts, stops=stops) == (selected,)
    assert op.written_elems(out, shape, starts=starts, stops=stops) == selected


def test_read_bytes_is_the_window_share_rounded_up_and_whole_for_other_inputs():
    assert read_bytes(((3, 768, 2048),), 3, 8192) == 3072
    assert read_bytes(((3, 1, 3),), 3, 10) == 4  # 10 / 3 rounded up
    assert read_bytes(((3, 768, 2048),), 4, 8192) == 8192  # another input: read whole
    assert read_bytes((), 3, 8192) == 8192


def _sliced(rows: int = 6) -> A.Graph:
    """relu -> slice of `rows` of 16 rows -> relu: the first relu's output is an activation, placed in the DRAM
    by the chip's placement, so the slice reads its window from there."""
    g = A.Graph("sliced", dtype="float32")
    h = F.relu(g.input("x", (1, 8, 16, 16)))
    g.output("y", F.relu(F.slice(h, (0, 0, 4), (1, 8, 4 + rows))))
    return g


def test_a_slice_reads_its_window_from_the_dram_and_every_reader_of_the_schedule_agrees():
    g, hw = _sliced(), A.load_hw(HW_FILE)
    s = A.compile(g, hw, effort="fast")
    relu = next(t for t in s.tasks if t.op == "relu" and not t.deps)
    cut = next(t for t in s.tasks if t.op == "slice")
    assert cut.partial_reads == ((relu.node, 8 * 6 * 16, 8 * 16 * 16),)
    inputs, _ = placed_io(s, hw)
    assert inputs[cut.id] == [("dram", relu.out_bytes * 6 // 16)]  # 6 of 16 rows, at the stored 4 bytes
    # its output, an activation too, is written to the DRAM at its stored width (4 bytes per element)
    assert cut.out_bytes == 4 * 8 * 6 * 16
    assert task_loads(s, hw, (inputs, placed_io(s, hw)[1]))[cut.id]["dram"] == relu.out_bytes * 6 // 16 + cut.out_bytes
    assert all(not t.partial_reads for t in s.tasks if t.op != "slice")
    assert A.simulate(s, graph=g).makespan_cycles == s.makespan_cycles
    assert A.simulate(s, mode="dynamic", graph=g).makespan_cycles == s.makespan_cycles


def test_a_wider_window_takes_longer_to_read_from_the_dram():
    hw = A.load_hw(HW_FILE)
    narrow, wide = (A.compile(_sliced(rows), hw, effort="fast") for rows in (2, 12))
    cycles = lambda s: next(t.end - t.start for t in s.tasks if t.op == "slice")  # noqa: E731
    assert cycles(narrow) < cycles(wide)


def test_a_schedule_without_slices_writes_no_partial_reads():
    g = A.Graph("plain", dtype="float32")
    g.output("y", F.relu(g.input("x", (4, 4))))
    s = A.compile(g, A.load_hw(HW_FILE), effort="fast")
    assert "partial_reads" not in s.model_dump_json()


def test_a_partial_read_of_more_than_the_input_is_refused_naming_the_task():
    g, hw = _sliced(), A.load_hw(HW_FILE)
    data = A.compile(g, hw, effort="fast").model_dump()
    cut = next(t for t in data["tasks"] if t["op"] == "slice")
    cut["partial_reads"] = ((cut["partial_reads"][0][0], 5000, 2048),)
    with pytest.raises(ValueError, match=rf"task {cut['id']}: partial_reads reads 5000 of the 2048 elements"):
        type(A.compile(g, hw, effort="fast")).model_validate(data)


def test_partial_reads_survive_a_save_and_load_and_a_broken_one_is_refused_naming_the_task(tmp_path):
    g, hw = _sliced(), A.load_hw(HW_FILE)
    s = A.compile(g, hw, effort="fast")
    path = tmp_path / "sliced.json"
    A.save_schedule(s, path)
    loaded = A.load_schedule(path, graph=g, hw=hw)
    assert [t.partial_reads for t in loaded.tasks] == [t.partial_reads for t in s.tasks]
    data = json.loads(path.read_text())
    cut = next(t for t in data["tasks"] if t["op"] == "slice")
    cut["partial_reads"] = [[cut["partial_reads"][0][0], 5000, 2048]]
    path.write_text(json.dumps(data))
    with pytest.raises(AccelsimError, match=rf"task {cut['id']}: partial_reads reads 5000 of the 2048 elements"):
        A.load_schedule(path)
