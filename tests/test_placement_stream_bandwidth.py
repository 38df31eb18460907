"""A placement's DMA engine slower than the memory it streams from: the reader holds its unit until the rest of
its weights has streamed at the engine's rate, and the schedule's candidates say so, so the validator and the
simulator agree with the compiler (a faster Weight Memory than its stream used to be refused as invalid)."""
import accelsim as A


def test_weights_streamed_slower_than_their_memory_compile_validate_and_replay():
    hw = A.load_hw("tpu_v1_like", overrides={"chips.0.memories.weight_dram.bandwidth_bytes_per_s": "68 GB/s"})
    assert hw.chips[0].placement.parameters.stream.bandwidth_bytes_per_s < 68e9  # the engine is the slower
    fwd = A.models.build("mlp", batch=2, sizes=(768, 1024))  # 12 weight tiles: more than the FIFO's 4 stage
    sched = A.compile(fwd, hw)
    assert A.simulate(sched, hw, graph=fwd).makespan_cycles == sched.makespan_cycles
    base = A.compile(fwd, A.load_hw("tpu_v1_like"))
    assert sched.makespan_cycles <= base.makespan_cycles  # a faster memory never makes the step slower
