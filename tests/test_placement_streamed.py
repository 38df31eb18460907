"""Streamed outputs (hw/placement.py): activations or gradients placed in a memory with a `stream` are written
there by their class's DMA engine (a write-back task) and staged back into its buffer ahead of each reader (prefetch
tasks); the bytes, the time and the energy follow the engine, and the numbers are unchanged."""
from __future__ import annotations

import copy
import math

import pytest
import yaml

import accelsim as A
from accelsim.hw.load import bundled_path
from accelsim.passes import inference_graph

DRAM, UB, FIFO = "weight_dram", "unified_buffer", "act_fifo"
TILE = 4096


def tpu_streaming(cls: str | None, bandwidth: float = 8.0) -> A.HwSpec:
    """tpu_v1_like with a 64 KiB activation FIFO and `cls` streamed from its DDR3 through it (None: resident as
    shipped, the FIFO unused)."""
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    chip = d["chips"][0]
    chip["memories"].append({"name": FIFO, "kind": "sram", "capacity_bytes": "64 KiB",
                             "bandwidth_bytes_per_cycle": 256})
    if cls is not None:
        chip["placement"][cls] = {"memory": DRAM, "stream": {
            "buffer": FIFO, "bandwidth_bytes_per_cycle": bandwidth, "prefetch_depth": 2, "tile_bytes": TILE}}
    return A.load_hw(copy.deepcopy(d))


def mlp():
    return inference_graph(A.models.build("mlp", batch=32, sizes=(256, 512, 64)))


@pytest.fixture(scope="module")
def runs():
    g = mlp()
    out = {}
    for name, hw in (("resident", tpu_streaming(None)), ("slow", tpu_streaming("activations", 4.0)),
                     ("fast", tpu_streaming("activations", 64.0))):
        s = A.compile(g, hw, effort="fast")
        out[name] = (hw, s, A.simulate(s, hw, graph=g))
    return g, out


def dram(res, kind: str) -> float:
    return sum(i.quantity for i in res.energy.items if i.name == f"chip0:{DRAM}" and i.kind == kind)


def test_each_streamed_activation_is_written_back_and_staged_ahead_of_its_reader(runs):
    g, r = runs
    _, s, _ = r["slow"]
    where = {x.task: x.memory for x in s.tensors if x.task >= 0}
    backs = [t for t in s.tasks if t.kind == "writeback"]
    assert backs and all(t.resource == "dma.activations" for t in backs)
    for wb in backs:
        producer = s.tasks[wb.deps[0]]
        assert (producer.kind, producer.node) == ("node", wb.node)
        assert wb.out_bytes == producer.out_bytes == math.prod(g.nodes[wb.node].shape)  # 1 byte: int8
        assert where[wb.id] == DRAM and where[producer.id] == UB  # the unit writes its own memory
        heads = [t for t in s.tasks if t.kind == "prefetch" and t.deps == (wb.id,)]
        readers = [t for t in s.tasks if wb.id in t.deps and t.kind == "node"]
        assert readers and len(heads) == len(readers) * min(2, -(-wb.out_bytes // TILE))
        assert all(where[p.id] == FIFO and 0 < p.bytes_moved <= TILE for p in heads)
        for reader in readers:  # the reader waits for its staged head, which waits for the write-back
            mine = [p for p in heads if p.id in reader.after]
            assert mine and all(wb.end <= p.start and p.end <= reader.start for p in mine)
            assert sum(p.bytes_moved for p in mine) == min(wb.out_bytes, 2 * TILE)


def test_the_makespan_follows_the_dma_bandwidth(runs):
    _, r = runs
    assert r["slow"][1].makespan_cycles > r["fast"][1].makespan_cycles > r["resident"][1].makespan_cycles
    for name in ("slow", "fast"):
        assert r[name][2].makespan_cycles == r[name][1].makespan_cycles  # the replay is the compiled timeline


def test_energy_charges_the_written_back_and_prefetched_bytes(runs):
    _, r = runs
    _, s, res = r["slow"]
    written = sum(t.out_bytes for t in s.tasks if t.kind == "writeback")
    staged = sum(t.bytes_moved for t in s.tasks if t.kind == "prefetch" and t.resource == "dma.activations")
    base = r["resident"][2]
    assert dram(res, "memory_write") - dram(base, "memory_write") >= written
    assert dram(res, "memory_read") > dram(base, "memory_read")
    fifo_writes = sum(i.quantity for i in res.energy.items if i.name == f"chip0:{FIFO}" and i.kind == "memory_write")
    assert fifo_writes == staged
    assert res.energy.off_chip_pj > base.energy.off_chip_pj


def test_the_dynamic_runtime_waits_for_late_heads_and_check_computes_the_same_numbers(runs):
    g, r = runs
    hw, s, _ = r["slow"]
    dyn = A.simulate(s, hw, mode="dynamic", graph=g)
    assert dyn.makespan_cycles >= r["fast"][1].makespan_cycles
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed


def test_streamed_gradients_of_a_training_step_check():
    g = A.training_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)), optimizer="sgd", lr=0.01)
    hw = tpu_streaming("gradients")
    s = A.compile(g, hw, microbatches=2, effort="fast")
    backs = [t for t in s.tasks if t.kind == "writeback"]
    assert backs and {t.resource for t in backs} == {"dma.gradients"}
    assert set(t.node for t in backs) == set(g.gradient_nodes())
    assert A.simulate(s, hw, graph=g).makespan_cycles == s.makespan_cycles
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed
