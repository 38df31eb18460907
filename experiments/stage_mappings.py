"""A mapping given per layer, at task and at stage granularity: gpt2-2 (`--model gpt2 --layers 2`, Adam) on a100_x8
with its Tensor Cores searching mappings, d=1 p=2 t=1 M=4. Each row compiles the step plain and with a mapping
file that changes some layers' mappings, at both granularities, and prints each makespan and the ratio mapped /
plain: the stage level should move in the same direction and by about the same ratio as the task level.
Then the same through layer templates: gpt2 with 10 small blocks on a100_x64's 4 stages, every middle block's
MLP matmuls given one mapping and h0's fc another, measured from templates and from the whole graph (equal
StepWork, as tests/test_layer_templates.py finds without mappings).

    PYTHONPATH=$PWD python experiments/stage_mappings.py

The a100_x8 overrides: `mapping: search` (a100_x8's Tensor Cores run a fixed mapping), and no `gpu_gemm`, whose
library tiling sets a GPU's GEMM time whatever the mapping (cost/gpu_gemm.py)."""
from __future__ import annotations

import time

import accelsim as A
from accelsim.compiler.hierarchy.layer_templates import recipe, templated_work
from accelsim.compiler.hierarchy.templates import step_work
from accelsim.limits import DEFAULT_LIMITS
from accelsim.schedule.options import StepOptions

OVERRIDES = {"chips.0.units.tensor_core.mapping": "search", "chips.0.units.tensor_core.dataflows": ["ws", "os", "is"],
             "chips.0.gpu_gemm": None}
STEP = {"pipeline_stages": 2, "microbatches": 4, "data_parallel": 1, "tensor_parallel": 1, "effort": "fast"}
CASES = {
    "h0's fc matmuls, 2 reduction elements per fold": (("h0.fc.w",), {"dataflow": "os", "stream": {"K": 2}}),
    "both blocks' MLP matmuls, 1 per fold": (("h0.fc.w", "h1.fc.w", "h0.mlp_proj.w", "h1.mlp_proj.w"),
                                             {"dataflow": "os", "stream": {"K": 1}}),
}


def _reading(graph: A.Graph, weights: tuple[str, ...]) -> list[str]:
    """The matmuls that read these weights: the forward product and the backward's input gradient (their nodes'
    names are what a mapping file names)."""
    return [n.name for n in graph.nodes if n.op == "matmul" and any(graph.nodes[i].name in weights for i in n.inputs)]


def main() -> None:
    hw = A.load_hw("a100_x8", OVERRIDES)
    graph = A.training_graph(A.models.build("gpt2", layers=2), optimizer="adam")
    plain = {}
    for granularity in ("task", "stage"):
        start = time.process_time()
        plain[granularity] = A.compile(graph, hw, granularity=granularity, **STEP).makespan_cycles
        print(f"{granularity:>5} plain: {plain[granularity]:,} cycles ({time.process_time() - start:.1f} s CPU)")
    for label, (weights, mapping) in CASES.items():
        given = {"mappings": {name: {"tensor_core": mapping} for name in _reading(graph, weights)}}
        ratios = []
        for granularity in ("task", "stage"):
            mapped = A.compile(graph, hw, granularity=granularity, mapping=given, **STEP).makespan_cycles
            ratios.append(mapped / plain[granularity])
            print(f"{label}: {granularity:>5} {mapped:,} cycles, x{ratios[-1]:.4f} of plain")
        print(f"{label}: stage ratio / task ratio = {ratios[1] / ratios[0]:.4f}")



def templates() -> None:
    hw = A.load_hw("a100_x64", {**OVERRIDES, "chips.0.gpu_overheads": None})  # no launch floor under small kernels
    model = {"batch": 1, "seq": 64, "d_model": 128, "heads": 4, "vocab": 512, "layers": 10}
    r = recipe("gpt2", model, {"optimizer": "adam"}, "every:1")
    graph = r.build(r.layers)
    given = {name: {"tensor_core": {"dataflow": "os", "stream": {"K": 1}}}
             for i in range(1, r.layers - 1) for name in _reading(graph, (f"h{i}.fc.w", f"h{i}.mlp_proj.w"))}
    given[_reading(graph, ("h0.fc.w",))[0]] = {"tensor_core": {"dataflow": "os", "stream": {"K": 4}}}
    plain = StepOptions(pipeline_stages=4, microbatches=3, pipeline_schedule="1f1b", remat="every:1")
    mapped = plain.model_copy(update={"mapping": StepOptions(mapping={"mappings": given}).mapping})
    start = time.process_time()
    measured = {name: templated_work(r, hw, o, DEFAULT_LIMITS.max_tasks) for name, o in (("plain", plain),
                                                                                          ("mapped", mapped))}
    print(f"templates: {time.process_time() - start:.1f} s CPU; forward cycles per chunk: plain "
          f"{[c.forward_cycles for c in measured['plain'].work.chunks]}, mapped "
          f"{[c.forward_cycles for c in measured['mapped'].work.chunks]}")
    print(f"templates: the mapped step's StepWork equals the whole graph's: "
          f"{measured['mapped'].work == step_work(graph, hw, mapped)}")


if __name__ == "__main__":
    main()
    templates()
